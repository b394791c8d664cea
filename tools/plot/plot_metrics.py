#!/usr/bin/python3
"""plot_metrics.py - the curves of one or several dtrain-train runs, from their
--json metrics files, as one PNG (for a machine without TensorBoard).

    tools/plot/plot_metrics.py RUN.json [RUN2.json ...] [-o curves.png]
                               [--labels A,B,...] [--title TEXT]

Four panels: training loss (and validation loss, dashed, where the run
evaluated) against optimizer steps; the same against training time (the sum of
the step times, so evaluations do not count); the learning rate; throughput
(tokens/s, or samples/s for the classifiers, at every --eval-every point and
epoch end). One colour per run; the label is the file name unless --labels.
Needs matplotlib: `apt-get install python3-matplotlib` (Debian) or
`pip install matplotlib`. Exit status: 0, 1 (a file unreadable or without step
records), 2 (usage, or no matplotlib).
"""
import argparse
import json
import math
import os
import sys


def load(path):
    """(steps, loss, lr, cumulative time_s, val [(step, loss)], rate [(step, per_s)])"""
    steps, loss, lr, t = [], [], [], []
    pts = {"eval": ([], []), "epoch": ([], [])}  # (validation loss, rate) per record type
    total = 0.0
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except ValueError as e:
                raise ValueError("%s:%d: not JSON: %s" % (path, n, e))
            kind = r.get("type")
            if kind == "step":
                total += r.get("time_s") or 0.0
                steps.append(r["step"])
                loss.append(r["loss"] if r.get("loss") is not None else math.nan)
                lr.append(r["lr"] if r.get("lr") is not None else math.nan)
                t.append(total)
            elif kind in pts:
                s = r["step"] if kind == "eval" else r["steps"]
                if r.get("test_loss") is not None:
                    pts[kind][0].append((s, r["test_loss"]))
                if r.get("tokens_per_s"):
                    pts[kind][1].append((s, r["tokens_per_s"]))
    # the --eval-every points where there are any, else the epochs' ends
    val = pts["eval"][0] or pts["epoch"][0]
    rate = pts["eval"][1] or pts["epoch"][1]
    if not steps:
        raise ValueError("%s: no step records (was it written by dtrain-train --json?)" % path)
    return steps, loss, lr, t, sorted(val), sorted(rate)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="--json files of dtrain-train runs")
    ap.add_argument("-o", "--output", default="curves.png", help="PNG to write (default curves.png)")
    ap.add_argument("--labels", help="comma-separated names of the runs (default: file names)")
    ap.add_argument("--title", default="", help="figure title")
    a = ap.parse_args(argv[1:])
    labels = a.labels.split(",") if a.labels else [os.path.basename(p) for p in a.runs]
    if len(labels) != len(a.runs):
        print("plot_metrics: %d labels for %d runs" % (len(labels), len(a.runs)), file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_metrics: needs matplotlib: apt-get install python3-matplotlib (Debian), or pip install "
              "matplotlib; or look at the curves with tensorboard --logdir (dtrain-train --tensorboard DIR)",
              file=sys.stderr)
        return 2
    try:
        runs = [load(p) for p in a.runs]
    except (OSError, ValueError, KeyError) as e:
        print("plot_metrics: %s" % e, file=sys.stderr)
        return 1
    fig, ax = plt.subplots(2, 2, figsize=(12, 8))
    (a_step, a_time), (a_lr, a_rate) = ax
    for i, (label, (steps, loss, lr, t, val, rate)) in enumerate(zip(labels, runs)):
        c = "C%d" % (i % 10)
        a_step.plot(steps, loss, color=c, lw=1, label=label + " train")
        a_time.plot(t, loss, color=c, lw=1, label=label)
        if val:
            a_step.plot([s for s, _ in val], [v for _, v in val], color=c, ls="--", marker="o", ms=3,
                        label=label + " validation")
        a_lr.plot(steps, lr, color=c, lw=1, label=label)
        if rate:
            a_rate.plot([s for s, _ in rate], [v for _, v in rate], color=c, marker="o", ms=3, label=label)
    a_step.set(xlabel="optimizer step", ylabel="loss", title="loss against steps")
    a_time.set(xlabel="training time (s, sum of step times)", ylabel="loss", title="loss against time")
    a_lr.set(xlabel="optimizer step", ylabel="learning rate", title="learning rate")
    a_rate.set(xlabel="optimizer step", ylabel="tokens/s (classifiers: samples/s)", title="throughput")
    for x in (a_step, a_time, a_lr, a_rate):
        x.grid(alpha=0.3)
        if x.lines:
            x.legend(fontsize=8)
    if a.title:
        fig.suptitle(a.title)
    fig.tight_layout()
    try:
        fig.savefig(a.output, dpi=100)
    except OSError as e:
        print("plot_metrics: cannot write %s: %s" % (a.output, e), file=sys.stderr)
        return 1
    print("plot_metrics: %d run(s) -> %s" % (len(runs), a.output))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
