"""dtrain against Hugging Face transformers itself (run by bench/hf_transformers.sh
in a benchmark-only virtual environment with torch and transformers from PyPI;
`make test` never needs it: tests/train/gpt_hf_interop.py checks the same
layouts with Debian's torch).

1. transformers writes a GPT-2 (GPT2LMHeadModel.save_pretrained: model.safetensors
   and config.json; 2 layers x 64, 4 heads, 128 positions, vocabulary 50257,
   random weights with the attention and MLP input matrices x10 so that the
   greedy continuation is not a repetition) and GPT2Model.save_pretrained (no
   "transformer." prefix). dtrain-train --init-from each --max-steps 0 on llm.c
   token shards written here: its validation loss equals transformers' on the
   same windows (float64) within 1e-5, and its greedy continuation of a token
   prompt is transformers' token for token. The same for save_pretrained's
   sharded folder (max_shard_size 4MB: the shards and
   model.safetensors.index.json), given to --init-from as the folder.
2. dtrain trains it (AdamW) and writes --save-format hf: from_pretrained loads
   the directory with no missing, unexpected or mismatched key; its loss on the
   validation windows equals dtrain's final validation loss within 1e-5, its
   greedy continuation is dtrain's sample, and its logits equal those of
   tests/reference/torch_gpt.py's model holding dtrain's own export of the same
   run (converted by --init-from DIR --max-steps 0 --save-model) within 1e-5.
Usage: python hf_check.py DTRAIN_TRAIN WORKDIR
"""
import json, os, subprocess, sys

import numpy as np
import torch
import torch.nn.functional as F
import transformers
from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
from torch_gpt import GPT, read_safetensors  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
L, NH, C, T, V = 2, 4, 64, 128, 50257
NEVAL, PROMPT, NGEN = 8, [50256, 464, 2068, 7586], 24
failed = 0


def check(ok, what):
    global failed
    failed += not ok
    print(("ok   " if ok else "FAIL ") + what, flush=True)


def run(*args):
    cmd = [BIN, "--model", "gpt", "--quiet"] + [str(a) for a in args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        print(" ".join(cmd), "\n", p.stdout, p.stderr)
        sys.exit(1)


def records(path, kind):
    return [d for d in map(json.loads, open(path)) if d["type"] == kind]


def shard(path, tokens):
    hdr = np.zeros(256, dtype="<i4")
    hdr[:3] = [20240520, 1, len(tokens)]
    with open(path, "wb") as f:
        f.write(hdr.tobytes() + np.asarray(tokens, dtype="<u2").tobytes())


def windows(val):
    n = (len(val) - 1) // T
    starts = [int(i * n / NEVAL) * T for i in range(NEVAL)]
    return (torch.tensor([val[s:s + T] for s in starts]), torch.tensor([val[s + 1:s + T + 1] for s in starts]))


def hf_loss_and_greedy(model, x, y):
    """float64: the mean cross-entropy on the windows and the greedy continuation."""
    m = model.double().eval()
    with torch.no_grad():
        logits = m(x).logits
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        gen, margin = list(PROMPT), float("inf")
        for _ in range(NGEN):
            last = m(torch.tensor([gen])).logits[0, -1]
            top = torch.topk(last, 2).values
            margin = min(margin, float(top[0] - top[1]))
            gen.append(int(last.argmax()))
    return float(loss), gen[len(PROMPT):], margin


print("transformers %s, torch %s" % (transformers.__version__, torch.__version__))
torch.manual_seed(0)
torch.set_num_threads(1)
cfg = GPT2Config(vocab_size=V, n_positions=T, n_embd=C, n_layer=L, n_head=NH, resid_pdrop=0.0, embd_pdrop=0.0,
                 attn_pdrop=0.0)
hf = GPT2LMHeadModel(cfg)
with torch.no_grad():
    for name, p in hf.named_parameters():
        if name.endswith(("c_attn.weight", "c_fc.weight")):
            p.mul_(10.0)
        elif name.endswith(".bias") or name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            p.add_(0.05 * torch.randn(p.shape))
hf.save_pretrained(os.path.join(WORK, "hf_lm"))
# a model beyond max_shard_size: save_pretrained shards it (model-0000k-of-0000n.safetensors and
# model.safetensors.index.json), as it does GPT-2 XL in float32 at its default of 5 GB
hf.save_pretrained(os.path.join(WORK, "hf_sharded"), max_shard_size="4MB")
nshards = len([f for f in os.listdir(os.path.join(WORK, "hf_sharded")) if f.endswith(".safetensors")])
check(nshards > 1 and os.path.exists(os.path.join(WORK, "hf_sharded", "model.safetensors.index.json")),
      "save_pretrained(max_shard_size=4MB) wrote %d shards and an index" % nshards)
base = GPT2Model(cfg)
base.load_state_dict(hf.transformer.state_dict())
base.save_pretrained(os.path.join(WORK, "hf_base"))

rng = np.random.default_rng(5)
vocab = rng.choice(V, 400, replace=False)
nxt = rng.integers(0, 400, (400, 3))
state, toks = 0, []
for _ in range(20000):
    state = nxt[state, rng.choice(3, p=[0.6, 0.3, 0.1])]
    toks.append(int(vocab[state]))
os.makedirs(os.path.join(WORK, "shards"), exist_ok=True)
shard(os.path.join(WORK, "shards", "toy_val_000000.bin"), toks[:3000])
shard(os.path.join(WORK, "shards", "toy_train_000001.bin"), toks[3000:])
x, y = windows(toks[:3000])
common = ["--data", os.path.join(WORK, "shards"), "--test-limit", NEVAL, "--batch-size", 4, "--sample-tokens",
          ",".join(map(str, PROMPT)), "--sample-temperature", 0, "--sample-length", NGEN]

# 1. transformers' files into dtrain
want_loss, want_gen, margin = hf_loss_and_greedy(GPT2LMHeadModel.from_pretrained(os.path.join(WORK, "hf_lm")), x, y)
for name in ("hf_lm", "hf_base", "hf_sharded"):
    js = os.path.join(WORK, name + ".json")
    src = os.path.join(WORK, name) if name == "hf_sharded" else os.path.join(WORK, name, "model.safetensors")
    run("--init-from", src, "--max-steps", 0, "--json", js, *common)
    got = records(js, "summary")[0]["test_loss"]
    sample = records(js, "sample")[0]["tokens"]
    e = abs(got - want_loss) / want_loss
    check(e <= 1e-5, "%s: dtrain's validation loss %.7f, transformers' %.7f: rel err %.2e (tol 1e-5)"
          % (name, got, want_loss, e))
    check(sample == want_gen, "%s: greedy continuation of %s, %d tokens: dtrain %s, transformers %s (smallest top-2 "
          "margin %.3g)" % (name, PROMPT, NGEN, sample[:8], want_gen[:8], margin))

# 2. dtrain's export into transformers
out = os.path.join(WORK, "dtrain_hf")
js = os.path.join(WORK, "train.json")
run("--init-from", os.path.join(WORK, "hf_lm", "model.safetensors"), "--max-steps", 30, "--optimizer", "adamw",
    "--lr", "3e-3", "--save-format", "hf", "--save-model", out, "--json", js, *common)
dt_loss = records(js, "summary")[0]["test_loss"]
dt_gen = records(js, "sample")[0]["tokens"]
model, info = GPT2LMHeadModel.from_pretrained(out, output_loading_info=True)
keys_ok = not any(info.get(k) for k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"))
check(keys_ok, "from_pretrained(%s): no missing, unexpected or mismatched key (%s)" % (out, info))
got_loss, got_gen, margin = hf_loss_and_greedy(model, x, y)
e = abs(got_loss - dt_loss) / dt_loss
check(e <= 1e-5, "dtrain's export after 30 steps: transformers' loss %.7f, dtrain's %.7f: rel err %.2e (tol 1e-5; "
      "before training %.7f)" % (got_loss, dt_loss, e, want_loss))
check(got_gen == dt_gen, "dtrain's export: transformers' greedy continuation is dtrain's sample (%s; margin %.3g)"
      % (got_gen[:8], margin))
conv = os.path.join(WORK, "dtrain.safetensors")
run("--init-from", os.path.join(out, "model.safetensors"), "--max-steps", 0, "--eval", 0, "--sample-length", 0,
    "--data", os.path.join(WORK, "shards"), "--save-model", conv)
sd, _ = read_safetensors(conv)
ref = GPT(L, NH, C, T, V)
ref.load_state_dict(sd, strict=False)
hf32 = GPT2LMHeadModel.from_pretrained(out).float().eval()
with torch.no_grad():
    a, _ = ref.eval()(x)
    b = hf32(x).logits
el = float((a - b).abs().max() / b.abs().max())
check(el <= 1e-5, "the export's logits in transformers vs the reference model on dtrain's own layout: rel err %.2e" % el)
sys.exit(1 if failed else 0)
