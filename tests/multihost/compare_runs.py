"""compare_runs.py A.json A.safetensors B.json B.safetensors [--steps N]
   [--rtol-loss R] [--rtol-param R]

Two dtrain-train runs that must be the same training (here: 2 hosts x 2
ranks against 1 host x 4 ranks) compared step by step and parameter by
parameter:
  - both wrote N step records (--steps), with the same step numbers, lr and
    epochs;
  - every step's loss: |a - b| <= rtol_loss * |b|;
  - the epoch records' global losses the same way, their accuracies within
    0.005 (one answer of the 256 test images the test uses may flip at a
    near tie);
  - every tensor of the saved model: same names, shapes, dtypes, and
    max|a - b| <= rtol_param * max|b| over the tensor.
Prints the largest differences and whether the runs are bitwise identical.
Exit status 0 if within tolerance, 1 if not, 2 on a malformed input."""
import argparse
import json
import struct
import sys

import numpy as np

DT = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def load_st(path):
    with open(path, "rb") as f:
        b = f.read()
    (n,) = struct.unpack("<Q", b[:8])
    head = json.loads(b[8:8 + n])
    data = b[8 + n:]
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        out[k] = (v["dtype"], tuple(v["shape"]), np.frombuffer(data[s:e], dtype=DT[v["dtype"]]))
    return out


def load_json(path):
    steps, epochs = [], []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r.get("type") == "step":
                steps.append(r)
            elif r.get("type") == "epoch":
                epochs.append(r)
    return steps, epochs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a_json")
    ap.add_argument("a_st")
    ap.add_argument("b_json")
    ap.add_argument("b_st")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--rtol-loss", type=float, required=True)
    ap.add_argument("--rtol-param", type=float, required=True)
    o = ap.parse_args()
    bad = []
    sa, ea = load_json(o.a_json)
    sb, eb = load_json(o.b_json)
    if len(sa) != o.steps or len(sb) != o.steps:
        print("compare_runs: step records %d and %d, want %d each" % (len(sa), len(sb), o.steps))
        return 2
    worst_loss, same = 0.0, True
    for p, q in zip(sa, sb):
        if p["step"] != q["step"] or p["epoch"] != q["epoch"] or p["lr"] != q["lr"]:
            bad.append("step record %s/%s: step, epoch or lr differ" % (p["step"], q["step"]))
        rel = abs(p["loss"] - q["loss"]) / max(abs(q["loss"]), 1e-30)
        same &= p["loss"] == q["loss"]
        worst_loss = max(worst_loss, rel)
        if not rel <= o.rtol_loss:
            bad.append("step %d: loss %r vs %r (rel %.3g > %g)" % (p["step"], p["loss"], q["loss"], rel, o.rtol_loss))
    if len(ea) != len(eb):
        bad.append("epoch records: %d vs %d" % (len(ea), len(eb)))
    for p, q in zip(ea, eb):
        for k, v in p.items():
            if k in ("time_s", "samples_per_s", "tokens_per_s") or not isinstance(v, (int, float)) or isinstance(v, bool):
                continue
            w = q.get(k)
            if not isinstance(w, (int, float)):
                bad.append("epoch %s: %s missing in the second run" % (p.get("epoch"), k))
                continue
            same &= v == w
            if "acc" in k:  # fractions of right answers: one answer may flip (a near tie)
                if abs(v - w) > 0.005:
                    bad.append("epoch %s: %s %r vs %r" % (p.get("epoch"), k, v, w))
            elif abs(v - w) > o.rtol_loss * max(abs(w), 1e-30):
                bad.append("epoch %s: %s %r vs %r" % (p.get("epoch"), k, v, w))
    ta, tb = load_st(o.a_st), load_st(o.b_st)
    if sorted(ta) != sorted(tb):
        bad.append("tensor names differ: %s vs %s" % (sorted(ta), sorted(tb)))
    worst_param, worst_name, ndiff, nall = 0.0, "-", 0, 0
    for k in sorted(set(ta) & set(tb)):
        (da, sha, xa), (db, shb, xb) = ta[k], tb[k]
        if da != db or sha != shb:
            bad.append("%s: %s%s vs %s%s" % (k, da, sha, db, shb))
            continue
        x, y = xa.astype(np.float64), xb.astype(np.float64)
        if not (np.isfinite(x).all() and np.isfinite(y).all()):
            bad.append("%s: not finite" % k)
            continue
        d = np.abs(x - y)
        scale = max(float(np.abs(y).max()), 1e-30)
        rel = float(d.max()) / scale if d.size else 0.0
        ndiff += int((xa.view(np.uint8) != xb.view(np.uint8)).reshape(xa.size, -1).any(axis=1).sum())
        nall += xa.size
        if rel > worst_param:
            worst_param, worst_name = rel, k
        if not rel <= o.rtol_param:
            bad.append("%s: max|a-b| / max|b| = %.3g > %g" % (k, rel, o.rtol_param))
    same &= ndiff == 0
    print("compare_runs: %d steps; largest loss difference %.3g (relative, tolerance %g); largest parameter "
          "difference %.3g of the tensor's largest value (%s; tolerance %g); %d of %d parameters differ; %s"
          % (o.steps, worst_loss, o.rtol_loss, worst_param, worst_name, o.rtol_param, ndiff, nall,
             "bitwise identical" if same else "not bitwise identical"))
    for b in bad[:20]:
        print("compare_runs: FAIL: " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
