#!/usr/bin/python3
"""Checkpoint round trips through dtrain-train (run by ctest; needs numpy).

1. same world size and ZeRO level (0 and 3 at 2 ranks, 1 at 4): the resumed
   run's per-step losses equal the uninterrupted run's bit for bit;
2. resharded: stage 1 on 4 ranks -> stage 2 on 2 ranks, and stage 3 on 2 ranks
   -> stage 0 on 1 rank: the final parameters match the uninterrupted run
   within float tolerance (rel err <= 1e-4);
3. a truncated rank file, a flipped byte (checksum), a manifest of another
   model and an unknown format version are refused with a message naming the
   file, and the checkpoint on disk is left untouched;
4. the safetensors model is parsed with json + numpy: state_dict names and
   shapes of the model, values equal between stage 0 and stage 3 runs.
5. another world size and batch size (2 x 32 -> 1..4 ranks x 7..128): the
   resumed epoch continues at the checkpoint's sample of the global order
   (steps and "epoch_pos" of every step as computed);
6. a checkpoint of dtrain ea878ae (tests/train/data/legacy_mlp_w2: format
   version 1, position in batches) resumes at its layout.
Usage: ckpt_roundtrip.py MPIEXEC DTRAIN_TRAIN
"""
import json, os, shutil, struct, subprocess, sys, tempfile
import numpy as np

MPIEXEC, BIN = sys.argv[1], sys.argv[2]
# global batch 64 at every world size (--batch-size is per rank): 20 steps per epoch
ARGS = ["--model", "lenet", "--train-limit", "1280", "--epochs", "2", "--eval", "0", "--quiet", "--lr", "0.05",
        "--sync-bn", "1"]  # batch-norm statistics over the global batch: world-size invariant
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, flush=True)


def run(np_, extra, expect_ok=True):
    cmd = [MPIEXEC, "--oversubscribe", "-np", str(np_), BIN] + ARGS + ["--batch-size", str(64 // np_)] + extra
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if expect_ok and p.returncode != 0:
        print(" ".join(cmd), "\n", p.stdout, p.stderr)
    return p


def losses(path):
    return {d["step"]: d["loss"] for d in map(json.loads, open(path)) if d["type"] == "step"}


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        assert t["dtype"] == "F32"
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype="<f4").reshape(t["shape"])
    return out, meta


tmp = tempfile.mkdtemp(prefix="dtrain_ckpt_")
try:
    # 1. same size: bit-identical continuation
    for np_, z in ((2, 0), (2, 3), (4, 1)):
        full, part, ck = (os.path.join(tmp, f"{k}_{np_}_{z}") for k in ("full.json", "part.json", "ck"))
        run(np_, ["--zero", str(z), "--json", full])
        run(np_, ["--zero", str(z), "--max-steps", "25", "--checkpoint-dir", ck])
        p = run(np_, ["--zero", str(z), "--resume", ck, "--json", part])
        f, r = losses(full), losses(part)
        same = bool(r) and min(r) == 26 and all(f.get(s) == v for s, v in r.items()) and max(r) == max(f)
        check(p.returncode == 0 and same, f"{np_} ranks zero {z}: resumed losses differ from the uninterrupted run")

    # 2. resharding
    def final_params(np_, z, extra):
        out = os.path.join(tmp, f"model_{np_}_{z}_{len(extra)}.safetensors")
        p = run(np_, ["--zero", str(z), "--save-model", out] + extra)
        return read_safetensors(out)[0] if p.returncode == 0 else None

    for (np_a, za), (np_b, zb) in (((4, 1), (2, 2)), ((2, 3), (1, 0))):
        ck = os.path.join(tmp, f"reshard_{np_a}_{za}")
        ref = final_params(np_b, zb, [])
        run(np_a, ["--zero", str(za), "--max-steps", "25", "--checkpoint-dir", ck])
        got = final_params(np_b, zb, ["--resume", ck])
        ok = ref is not None and got is not None and ref.keys() == got.keys()
        err = max(float(np.max(np.abs(ref[k] - got[k])) / max(1e-30, float(np.max(np.abs(ref[k]))))) for k in ref) if ok else 1
        print(f"reshard {np_a} ranks zero {za} -> {np_b} ranks zero {zb}: rel err {err:.3g}")
        check(ok and err <= 1e-4, f"resharded resume {np_a}/{za} -> {np_b}/{zb}: rel err {err}")

    # 3. refused checkpoints; the directory stays as it was
    base = os.path.join(tmp, "reshard_4_1")
    def refused(mutate, needle, name):
        d = os.path.join(tmp, "bad_" + name)
        shutil.copytree(base, d)
        mutate(d)
        before = {f: open(os.path.join(d, f), "rb").read() for f in os.listdir(d)}
        p = run(2, ["--zero", "1", "--resume", d], expect_ok=False)
        after = {f: open(os.path.join(d, f), "rb").read() for f in os.listdir(d)}
        msg = p.stdout + p.stderr
        check(p.returncode != 0 and needle in msg, f"{name}: not refused with '{needle}': {msg[-400:]}")
        check(before == after, f"{name}: checkpoint modified")
    def rank_file(d, r):  # rank r's file of the checkpoint's generation
        return os.path.join(d, "rank-%05d.g%d.bin" % (r, json.load(open(os.path.join(d, "manifest.json")))["generation"]))
    def truncate(d):
        f = rank_file(d, 1); open(f, "r+b").truncate(os.path.getsize(f) - 100)
    def flip(d):
        f = rank_file(d, 2); b = bytearray(open(f, "rb").read()); b[-7] ^= 0x40
        open(f, "wb").write(b)
    def other_model(d):
        f = os.path.join(d, "manifest.json"); s = open(f).read().replace('"lenet"', '"mlp"'); open(f, "w").write(s)
    def version(d):
        f = os.path.join(d, "manifest.json"); m = json.load(open(f)); m["format_version"] = 3
        json.dump(m, open(f, "w"))
    refused(truncate, "rank-00001.g", "truncated")
    refused(flip, "rank-00002.g", "checksum")
    refused(other_model, "mlp", "other_model")
    refused(version, "format version 3", "version")

    # 5. another world size / batch size: the position is in samples of the epoch's global
    #    order (issue 16, item 4). 2048 samples, 2 ranks x 32: 32 steps per epoch; the
    #    checkpoint at step 20 is at sample 1280. Resumed with R ranks x B, the epoch's
    #    remaining 768 samples make ceil(ceil(768 / R) / B) steps (before: at 3 ranks ~1150
    #    samples were never seen, at 1 rank 1280 repeated, at 1 x 128 it failed).
    POS_ARGS = ["--model", "mlp", "--hidden1", "16", "--hidden2", "16", "--train-limit", "2048", "--epochs", "2",
                "--eval", "0", "--quiet"]
    def run_layout(np_, b, extra):
        cmd = [MPIEXEC, "--oversubscribe", "-np", str(np_), BIN] + POS_ARGS + ["--batch-size", str(b)] + extra
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            print(" ".join(cmd), "\n", p.stdout, p.stderr)
        return p
    ck = os.path.join(tmp, "pos_ck")
    run_layout(2, 32, ["--max-steps", "20", "--checkpoint-dir", ck])
    for np_, b in ((1, 32), (1, 128), (2, 16), (3, 32), (3, 20), (4, 16), (4, 7)):
        js = os.path.join(tmp, f"pos_{np_}_{b}.json")
        p = run_layout(np_, b, ["--resume", ck, "--json", js])
        recs = [json.loads(l) for l in open(js)] if p.returncode == 0 else []
        st = [d for d in recs if d["type"] == "step"]
        e0 = [d for d in st if d["epoch"] == 0]
        per = -(-768 // np_)
        want0 = -(-per // b)
        want1 = -(-(-(-2048 // np_)) // b)
        check(p.returncode == 0 and len(e0) == want0 and len(st) - len(e0) == want1,
              f"resume 2 x 32 -> {np_} x {b}: {len(e0)} steps in the resumed epoch (want {want0}), "
              f"{len(st) - len(e0)} in the next (want {want1})")
        # the position after each step of the resumed epoch, in samples of the global order
        pos = [d.get("epoch_pos") for d in e0]
        wantpos = [1280 + np_ * min(per, b * (k + 1)) for k in range(want0)]
        check(pos == wantpos, f"resume -> {np_} x {b}: positions {pos[:3]}...{pos[-2:]} (want {wantpos[:3]}...{wantpos[-2:]})")

    # 6. a checkpoint of dtrain ea878ae (format version 1, position in batches of its
    #    layout: tests/train/data/legacy_mlp_w2, 2 ranks x 32, step 25 = epoch 1 + 5
    #    batches) resumes at that layout: steps 26-40, losses as the uninterrupted run's
    #    (bit-identical on the machine that wrote it; 1e-4 elsewhere, whose BLAS may
    #    differ in the last bits)
    LEG = ["--model", "mlp", "--hidden1", "4", "--hidden2", "4", "--train-limit", "1280", "--epochs", "2",
           "--eval", "0", "--quiet", "--lr", "0.05", "--batch-size", "32"]
    legacy = os.path.join(tmp, "legacy")
    shutil.copytree(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "legacy_mlp_w2"), legacy)
    full, part = os.path.join(tmp, "leg_full.json"), os.path.join(tmp, "leg_part.json")
    subprocess.run([MPIEXEC, "--oversubscribe", "-np", "2", BIN] + LEG + ["--json", full], capture_output=True, timeout=300)
    p = subprocess.run([MPIEXEC, "--oversubscribe", "-np", "2", BIN] + LEG + ["--json", part, "--resume", legacy],
                       capture_output=True, text=True, timeout=300)
    f, r = (losses(x) if os.path.exists(x) else {} for x in (full, part))
    close = bool(r) and sorted(r) == list(range(26, 41)) and all(abs(f[s] - v) <= 1e-4 * abs(f[s]) for s, v in r.items())
    check(p.returncode == 0 and close, f"legacy checkpoint: resumed steps {sorted(r)[:2]}..{sorted(r)[-1:]} "
          f"(want 26..40), max rel diff {max((abs(f.get(s, 0) - v) / abs(v) for s, v in r.items()), default=-1)}; "
          f"{p.stderr[-300:]}")

    # 4. safetensors
    a = final_params(2, 0, ["--max-steps", "10"])
    b = final_params(2, 3, ["--max-steps", "10"])
    want = {"conv1.weight": (6, 1, 5, 5), "bn1.weight": (6,), "bn1.bias": (6,), "bn1.running_mean": (6,),
            "bn1.running_var": (6,), "linear1.weight": (10, 1176), "linear1.bias": (10,)}
    check(a is not None and {k: v.shape for k, v in a.items()} == want, f"state_dict names/shapes: {a and {k: v.shape for k, v in a.items()}}")
    check(a is not None and b is not None and all(np.array_equal(a[k], b[k]) for k in want),
          "stage 0 and stage 3 models differ")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
