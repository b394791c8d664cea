#!/usr/bin/python3
"""A GPT trained by dtrain-train and exported with --save-model loads into
the PyTorch reference (tests/reference/torch_gpt.py, Debian's torch) and
gives the same validation loss (run by ctest; exits 77 without torch).

dtrain-train trains gpt-test for 10 AdamW steps at 2 ranks with ZeRO-3 (the
export is gathered one tensor at a time from the shards), evaluates 32
validation windows and writes the model and the JSON summary. PyTorch loads
the safetensors with load_state_dict(strict=False) (only the tied
lm_head.weight is missing), computes the mean cross-entropy per token on the
same 32 windows (the last 10% of the corpus, non-overlapping windows of T,
window floor(i * n / 32) for i < 32) in float64 and float32, and both must
agree with dtrain's validation loss within a relative 1e-4.
Usage: gpt_export_torch.py MPIEXEC DTRAIN_TRAIN
"""
import json, os, shutil, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch_gpt import GPT, read_safetensors
except ImportError as e:
    print("SKIP: the PyTorch check needs /usr/bin/python3 with torch and numpy (%s)" % e)
    sys.exit(77)

MPIEXEC, BIN = sys.argv[1], sys.argv[2]
CORPUS = "/usr/share/games/fortunes/computers"
if not os.path.isfile(CORPUS):
    print("SKIP: %s is missing (Debian package fortunes)" % CORPUS)
    sys.exit(77)
L, NH, C, T, V, NEVAL = 2, 4, 64, 64, 256, 32

tmp = tempfile.mkdtemp(prefix="dtrain_gptexport_")
failed = 0
try:
    model_path, js = os.path.join(tmp, "model.safetensors"), os.path.join(tmp, "run.json")
    cmd = [MPIEXEC, "--oversubscribe", "-np", "2", BIN, "--model", "gpt", "--preset", "gpt-test", "--data", CORPUS,
           "--batch-size", "4", "--max-steps", "10", "--optimizer", "adamw", "--lr", "3e-3", "--zero", "3",
           "--test-limit", str(NEVAL), "--sample-length", "0", "--quiet", "--save-model", model_path, "--json", js]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        print(" ".join(cmd), "\n", p.stdout, p.stderr)
        sys.exit(1)
    summary = [d for d in map(json.loads, open(js)) if d["type"] == "summary"][0]
    dt_loss = float(summary["test_loss"])

    data = open(CORPUS, "rb").read()
    val = data[len(data) - int(len(data) * 0.1):]
    n = (len(val) - 1) // T
    starts = [int(i * n / NEVAL) * T for i in range(NEVAL)]
    x = torch.tensor([list(val[s:s + T]) for s in starts], dtype=torch.int64)
    y = torch.tensor([list(val[s + 1:s + T + 1]) for s in starts], dtype=torch.int64)
    sd, meta = read_safetensors(model_path)
    torch.set_num_threads(1)
    for dtype in (torch.float64, torch.float32):
        model = GPT(L, NH, C, T, V).to(dtype)
        res = model.load_state_dict({k: v.to(dtype) for k, v in sd.items()}, strict=False)
        ok_keys = not res.unexpected_keys and list(res.missing_keys) == ["lm_head.weight"]
        tied = model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()
        with torch.no_grad():
            _, loss = model(x, y)
        err = abs(float(loss) - dt_loss) / dt_loss
        ok = ok_keys and tied and err <= 1e-4
        failed += not ok
        print("%s torch %s: validation loss %.7f, dtrain %.7f: rel err %.2e (tol 1e-4); keys %s, head tied %s"
              % ("ok  " if ok else "FAIL", str(dtype).replace("torch.", ""), float(loss), dt_loss, err,
                 "ok" if ok_keys else (res.missing_keys, res.unexpected_keys), tied))
finally:
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(1 if failed else 0)
