#!/usr/bin/python3
"""GPT checkpoints through dtrain-train (run by ctest; needs numpy).

1. the same world size and ZeRO stage (1 rank; 2 ranks at stages 2 and 3):
   a run stopped at step 6 and resumed to step 12 gives the uninterrupted
   run's per-step losses bit for bit (and "epoch_pos", the text position in
   samples of the global order, step by step);
2. resharded across world size and stage (4 ranks ZeRO-1 -> 2 ranks ZeRO-2,
   2 ranks ZeRO-3 -> 1 rank, 1 rank -> 2 ranks ZeRO-3): the final parameters
   (--save-model) match the uninterrupted run at the new layout within
   max|a - b| / max|b| <= 1e-5 over the whole vector (the same windows, a
   different reduction order for the first 6 steps);
3. the safetensors export holds every state_dict key of the model but the
   tied lm_head.weight, with its shape.
The global batch is 8 windows at every world size (--batch-size is per rank).
Usage: gpt_ckpt.py MPIEXEC DTRAIN_TRAIN
"""
import json, os, shutil, struct, subprocess, sys, tempfile
import numpy as np

MPIEXEC, BIN = sys.argv[1], sys.argv[2]
CORPUS = "/usr/share/games/fortunes/computers"
if not os.path.isfile(CORPUS):
    print("SKIP: %s is missing (Debian package fortunes)" % CORPUS)
    sys.exit(77)
ARGS = ["--model", "gpt", "--preset", "gpt-test", "--data", CORPUS, "--optimizer", "adamw", "--lr", "2e-3",
        "--warmup-steps", "3", "--clip-grad-norm", "1", "--eval", "0", "--quiet", "--sample-length", "0",
        "--seed", "7", "--bucket-size-mb", "0.1", "--first-bucket-mb", "0.02"]
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, flush=True)


def run(np_, extra):
    cmd = [MPIEXEC, "--oversubscribe", "-np", str(np_), BIN] + ARGS + ["--batch-size", str(8 // np_)] + extra
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        print(" ".join(cmd), "\n", p.stdout, p.stderr)
    return p


def steps(path):
    return {d["step"]: (d["loss"], d["epoch_pos"]) for d in map(json.loads, open(path)) if d["type"] == "step"}


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype="<f4").reshape(t["shape"])
    return out


tmp = tempfile.mkdtemp(prefix="dtrain_gptckpt_")
try:
    # 1. bit-identical continuation at the same layout
    for np_, z in ((1, 0), (2, 2), (2, 3)):
        full, part, ck = (os.path.join(tmp, "%s_%d_%d" % (k, np_, z)) for k in ("full.json", "part.json", "ck"))
        run(np_, ["--zero", str(z), "--max-steps", "12", "--json", full])
        run(np_, ["--zero", str(z), "--max-steps", "6", "--checkpoint-dir", ck])
        p = run(np_, ["--zero", str(z), "--max-steps", "12", "--resume", ck, "--json", part])
        f, r = steps(full), steps(part)
        same = bool(r) and min(r) == 7 and max(r) == 12 and all(f.get(s) == v for s, v in r.items())
        print("%d rank(s) ZeRO %d: resumed at step 6, steps 7-12 %s" % (np_, z, "bit-identical" if same else "DIFFER"))
        check(p.returncode == 0 and same, "%d ranks zero %d: resumed losses/positions differ: %s vs %s" % (np_, z, r, f))
        check(f.get(12, (0, 0))[1] == 12 * 8, "the text position after 12 steps of 8 windows: %s" % (f.get(12),))

    # 2. resharded across world size and stage
    def final(np_, z, extra, tag):
        out = os.path.join(tmp, "model_%d_%d_%s.safetensors" % (np_, z, tag))
        p = run(np_, ["--zero", str(z), "--max-steps", "12", "--save-model", out] + extra)
        return read_safetensors(out) if p.returncode == 0 else None

    for (na, za), (nb, zb) in (((4, 1), (2, 2)), ((2, 3), (1, 0)), ((1, 0), (2, 3))):
        ck = os.path.join(tmp, "reshard_%d_%d" % (na, za))
        ref = final(nb, zb, [], "ref")
        run(na, ["--zero", str(za), "--max-steps", "6", "--checkpoint-dir", ck])
        got = final(nb, zb, ["--resume", ck], "resumed_from_%d_%d" % (na, za))
        ok = ref is not None and got is not None and ref.keys() == got.keys()
        # max|a - b| / max|b| over the whole parameter vector (the measure of
        # the data-parallel tests), and the worst tensor for information
        err = float(max(np.max(np.abs(ref[k] - got[k])) for k in ref) / max(np.max(np.abs(ref[k])) for k in ref)) \
            if ok else 1.0
        worst = max((float(np.max(np.abs(ref[k] - got[k])) / max(1e-30, float(np.max(np.abs(ref[k]))))), k)
                    for k in ref) if ok else (1.0, "?")
        print("reshard %d rank(s) ZeRO %d -> %d rank(s) ZeRO %d at step 6: final parameters rel err %.3g "
              "(worst tensor %s: %.3g)" % (na, za, nb, zb, err, worst[1], worst[0]))
        check(ok and err <= 1e-5, "resharded resume %d/%d -> %d/%d: rel err %g" % (na, za, nb, zb, err))

    # 3. the export's names and shapes
    sd = read_safetensors(os.path.join(tmp, "model_1_0_ref.safetensors"))
    C, L, V, T = 64, 2, 256, 64
    want = {"transformer.wte.weight": (V, C), "transformer.wpe.weight": (T, C),
            "transformer.ln_f.weight": (C,), "transformer.ln_f.bias": (C,)}
    for i in range(L):
        h = "transformer.h.%d." % i
        want.update({h + "ln_1.weight": (C,), h + "ln_1.bias": (C,), h + "attn.c_attn.weight": (3 * C, C),
                     h + "attn.c_attn.bias": (3 * C,), h + "attn.c_proj.weight": (C, C), h + "attn.c_proj.bias": (C,),
                     h + "ln_2.weight": (C,), h + "ln_2.bias": (C,), h + "mlp.c_fc.weight": (4 * C, C),
                     h + "mlp.c_fc.bias": (4 * C,), h + "mlp.c_proj.weight": (C, 4 * C), h + "mlp.c_proj.bias": (C,)})
    check({k: v.shape for k, v in sd.items()} == want, "export keys/shapes: %s" % sorted(sd))
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print("gpt_ckpt: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
