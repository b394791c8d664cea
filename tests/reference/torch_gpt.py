#!/usr/bin/python3
"""PyTorch reference GPT (GPT-2 architecture) for dtrain's "gpt" model family.

Run with Debian's python, which has torch 1.13 and numpy:

    /usr/bin/python3 tests/reference/torch_gpt.py              # rewrite fixtures/gpt.dtfx
    /usr/bin/python3 tests/reference/torch_gpt.py --check      # compare only
    /usr/bin/python3 tests/reference/torch_gpt.py --live DIR   # used by the test gpt_torch_live
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \\
      /usr/bin/python3 tests/reference/torch_gpt.py --bench [--preset gpt-demo] [--batch 8]

The C test tests/nn/test_gpt_parity.c reads the committed fixture and never
needs torch.

THE MODEL (class GPT) is nanoGPT's GPT without dropout: the state_dict keys
are those of dtrain's slices (and of HF transformers' GPT2LMHeadModel):
  transformer.wte.weight [V,C]  transformer.wpe.weight [block_size,C]
  transformer.h.<i>.{ln_1,ln_2}.{weight,bias} [C]
  transformer.h.<i>.attn.c_attn.{weight [3C,C], bias [3C]}
  transformer.h.<i>.attn.c_proj.{weight [C,C], bias [C]}
  transformer.h.<i>.mlp.c_fc.{weight [4C,C], bias [4C]}
  transformer.h.<i>.mlp.c_proj.{weight [C,4C], bias [C]}
  transformer.ln_f.{weight,bias} [C]
  lm_head.weight                 the same tensor as transformer.wte.weight
Matrices are torch.nn.Linear's [out, in] (HF's Conv1D stores [in, out]; see
to_hf_state_dict). A dtrain safetensors export has every key but
lm_head.weight: load it with load_state_dict(sd, strict=False), which leaves
the tied head pointing at the loaded wte.

FIXTURE gpt.dtfx (the .dtfx format of torch_models.py), one case:
  config.gpt       int32 [5]      n_layer, n_head, n_embd, block_size, vocab_size
  config.adamw     float32 [6]    lr, beta1, beta2, eps, weight_decay, steps
  input.x          int32 [B,T]    tokens (T < block_size on purpose)
  input.y          int32 [B,T]    targets
  param.<key>      float32        parameters before the steps: nanoGPT's
                                  initialisation, then LayerNorm weights
                                  1 + N(0, 0.1), every bias N(0, 0.02), so that
                                  no gradient is trivially zero or symmetric
  --- one forward + backward of the mean cross-entropy per token:
  out.loss         float32 [1]
  out.logits       float32 [B,T,V]  lm_head output (pre-softmax)
  out.logp         float32 [B,T,V]  log_softmax of it
  grad.<key>       float32          d(loss)/d(param); wte's includes the tied head
  --- then `steps` AdamW steps (torch.optim.AdamW, foreach=False, one param
      group, the config.adamw values), each on the same batch:
  step.loss        float32 [steps]  loss before each step
  after.param.<key> float32         parameters after the last step
Expected values are computed in float64 from the stored float32 values and
rounded to float32; the script also prints how far torch's own float32 run
is from them (the error any float32 implementation may have).
"""
import argparse
import json
import math
import os
import struct
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # the live test skips (77) without torch
    print("torch_gpt.py: cannot import torch/numpy (%s)" % e)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torch_models import read_fixture, rel_err, write_fixture  # noqa: E402

FIXTURE = os.path.join(HERE, "fixtures", "gpt.dtfx")

# dtrain's presets (dtrain/model.h): n_layer, n_head, n_embd, block_size, vocab_size
PRESETS = {
    "gpt-test": (2, 4, 64, 64, 256),
    "gpt-demo": (6, 6, 384, 256, 256),
    "gpt2-124m": (12, 12, 768, 1024, 256),
}

# The parity case: small enough for a ~0.5 MB fixture; T = 100 is more than one
# of dtrain's 64-row attention blocks and less than block_size; vocab_size is
# not 256 on purpose.
CASE = dict(n_layer=2, n_head=4, n_embd=32, block_size=128, vocab_size=96, B=2, T=100)
# AdamW of the fixture. eps 1e-6: an element whose gradient is ~0 (where float32
# and float64 may disagree in sign) moves by at most lr * |g| / eps, not by lr.
ADAMW = dict(lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-6, weight_decay=0.1, steps=10)


# ---- the model ---------------------------------------------------------------

class CausalSelfAttention(nn.Module):
    def __init__(self, n_head, n_embd, block_size, sdpa=False):
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head
        # F.scaled_dot_product_attention (PyTorch >= 2.0) when asked for
        self.sdpa = sdpa and hasattr(F, "scaled_dot_product_attention")
        mask = torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size)
        self.register_buffer("bias", mask, persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, n_head, n_embd, block_size, sdpa=False):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_head, n_embd, block_size, sdpa)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, block_size, vocab_size, sdpa=False):
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_head, n_embd, block_size, sdpa) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied (nanoGPT)
        # GPT-2 / nanoGPT initialisation
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))
            elif name.endswith(".weight") and p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets=None):
        B, T = idx.size()
        assert T <= self.block_size
        pos = torch.arange(T, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss


def to_hf_state_dict(sd):
    """HF transformers GPT2LMHeadModel keeps these four as Conv1D [in, out]."""
    conv1d = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
    return {k: (v.t().contiguous() if k.endswith(conv1d) else v) for k, v in sd.items()}


def param_list(model):
    """(key, float32 numpy) in dtrain's layout order (named_parameters lists
    the tied wte/lm_head once, as transformer.wte.weight)."""
    return [(k, p.detach().float().numpy().copy()) for k, p in model.named_parameters()]


# ---- the parity fixture ---------------------------------------------------------

def make_model(dtype):
    c = CASE
    torch.manual_seed(0)
    model = GPT(c["n_layer"], c["n_head"], c["n_embd"], c["block_size"], c["vocab_size"])
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.02 * torch.randn(p.shape, generator=gen))
    return model.to(dtype)


def train_steps(model, x, y):
    a = ADAMW
    opt = torch.optim.AdamW(model.parameters(), lr=a["lr"], betas=(a["beta1"], a["beta2"]),
                            eps=a["eps"], weight_decay=a["weight_decay"], foreach=False)
    model.zero_grad()
    logits, loss = model(x, y)
    loss.backward()
    res = {"loss": loss.detach().clone(), "logits": logits.detach().clone(),
           "logp": F.log_softmax(logits.detach(), dim=-1),
           "grads": {k: p.grad.detach().clone() for k, p in model.named_parameters()},
           "step_loss": []}
    for s in range(a["steps"]):
        if s > 0:
            model.zero_grad()
            _, loss = model(x, y)
            loss.backward()
        res["step_loss"].append(float(loss.detach()))
        opt.step()
    res["after"] = {k: p.detach().clone() for k, p in model.named_parameters()}
    return res


def f32(t):
    return t.detach().to(torch.float32).numpy().astype(np.float32)


def make_fixture():
    c = CASE
    m32 = make_model(torch.float32)
    params = param_list(m32)
    gen = torch.Generator().manual_seed(2)
    x = torch.randint(0, c["vocab_size"], (c["B"], c["T"]), generator=gen)
    y = torch.randint(0, c["vocab_size"], (c["B"], c["T"]), generator=gen)
    m64 = make_model(torch.float64)
    with torch.no_grad():  # the float32 values, exactly, in float64
        for (k, v), p in zip(params, m64.parameters()):
            p.copy_(torch.from_numpy(v).double())
    r64 = train_steps(m64, x, y)
    r32 = train_steps(m32, x, y)
    a = ADAMW
    t = [
        ("config.gpt", np.array([c["n_layer"], c["n_head"], c["n_embd"], c["block_size"],
                                 c["vocab_size"]], dtype=np.int32)),
        ("config.adamw", np.array([a["lr"], a["beta1"], a["beta2"], a["eps"], a["weight_decay"],
                                   a["steps"]], dtype=np.float32)),
        ("input.x", x.numpy().astype(np.int32)),
        ("input.y", y.numpy().astype(np.int32)),
    ]
    t += [("param." + k, v) for k, v in params]
    t.append(("out.loss", f32(r64["loss"]).reshape(1)))
    t.append(("out.logits", f32(r64["logits"])))
    t.append(("out.logp", f32(r64["logp"])))
    t += [("grad." + k, f32(v)) for k, v in r64["grads"].items()]
    t.append(("step.loss", np.array(r64["step_loss"], dtype=np.float32)))
    t += [("after.param." + k, f32(v)) for k, v in r64["after"].items()]
    worst_g = max(rel_err(f32(r32["grads"][k]), f32(v)) for k, v in r64["grads"].items())
    worst_p = max(rel_err(f32(r32["after"][k]), f32(v)) for k, v in r64["after"].items())
    print("gpt %d params, B=%d T=%d: torch float32 vs float64: loss %.2e, logits %.2e, "
          "grads %.2e, params after %d AdamW steps %.2e"
          % (sum(v.size for _, v in params), c["B"], c["T"],
             rel_err(f32(r32["loss"]), f32(r64["loss"])),
             rel_err(f32(r32["logits"]), f32(r64["logits"])), worst_g, a["steps"], worst_p))
    return t


# ---- the live check of a dtrain safetensors export ---------------------------------

ST_DTYPES = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8"}


def read_safetensors(path):
    """json + numpy reader (no safetensors package needed)."""
    with open(path, "rb") as f:
        data = f.read()
    (hlen,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + hlen].decode("utf-8"))
    base = 8 + hlen
    out, meta = {}, header.pop("__metadata__", {})
    for name, d in header.items():
        a, b = d["data_offsets"]
        arr = np.frombuffer(data[base + a:base + b], dtype=ST_DTYPES[d["dtype"]])
        out[name] = torch.from_numpy(arr.reshape(d["shape"]).copy())
    return out, meta


def live_check(workdir):
    fx = read_fixture(os.path.join(workdir, "batch.dtfx"))
    L, NH, C, BS, V = (int(v) for v in fx["config.gpt"])
    sd, meta = read_safetensors(os.path.join(workdir, "model.safetensors"))
    print("safetensors: %d tensors, metadata %s" % (len(sd), meta))
    failures = 0
    for dtype, tol in ((torch.float64, 1e-4), (torch.float32, 1e-4)):
        model = GPT(L, NH, C, BS, V).to(dtype)
        res = model.load_state_dict({k: v.to(dtype) for k, v in sd.items()}, strict=False)
        if list(res.unexpected_keys) or list(res.missing_keys) != ["lm_head.weight"]:
            print("FAIL: load_state_dict: missing %s unexpected %s"
                  % (res.missing_keys, res.unexpected_keys))
            return 1
        if model.lm_head.weight.data_ptr() != model.transformer.wte.weight.data_ptr():
            print("FAIL: the head is not tied to the loaded wte")
            return 1
        x = torch.from_numpy(fx["input.x"].astype(np.int64))
        y = torch.from_numpy(fx["input.y"].astype(np.int64))
        with torch.no_grad():
            logits, loss = model(x, y)
        el = rel_err([float(fx["out.loss"][0])], [float(loss)])
        eg = rel_err(fx["out.logits"], logits.double().numpy())
        ok = el <= tol and eg <= tol
        failures += not ok
        print("%s torch %s: loss %.7f, dtrain %.7f: rel err %.2e; logits rel err %.2e (tol %g)"
              % ("ok  " if ok else "FAIL", str(dtype).replace("torch.", ""), float(loss),
                 float(fx["out.loss"][0]), el, eg, tol))
    return 1 if failures else 0


# ---- benchmark ---------------------------------------------------------------------

def bench(preset, batch, steps, sdpa):
    L, NH, C, T, V = PRESETS[preset]
    torch.manual_seed(0)
    model = GPT(L, NH, C, T, V, sdpa=sdpa)
    nparams = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, V, (batch, T))
    y = torch.randint(0, V, (batch, T))
    times, cpus = [], []
    for it in range(steps + 2):
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        if it >= 2:
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
    times.sort()
    cpus.sort()
    med = times[len(times) // 2]
    flops = (6 * nparams + 12 * L * T * C) * batch * T
    print("torch %s %s B=%d T=%d: %d params, threads %d, step median %.3f s (min %.3f; "
          "process CPU time %.3f), %.0f tokens/s, %.1f GFLOP/s (6P + 12LTD per token)%s"
          % (torch.__version__, preset, batch, T, nparams, torch.get_num_threads(), med,
             times[0], cpus[len(cpus) // 2], batch * T / med, flops / med / 1e9,
             " sdpa" if sdpa else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=FIXTURE, help="fixture path")
    ap.add_argument("--check", action="store_true", help="compare with the fixture instead")
    ap.add_argument("--live", metavar="DIR", help="check DIR/model.safetensors + DIR/batch.dtfx")
    ap.add_argument("--bench", action="store_true", help="time training steps")
    ap.add_argument("--preset", default="gpt-demo", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--sdpa", action="store_true", help="scaled_dot_product_attention (2.x)")
    args = ap.parse_args()
    if args.live:
        torch.set_num_threads(1)
        return live_check(args.live)
    if args.bench:
        bench(args.preset, args.batch, args.steps, args.sdpa)
        return 0
    torch.set_num_threads(1)
    tensors = make_fixture()
    if args.check:
        old = read_fixture(args.out)
        bad = [k for k, v in tensors
               if k not in old or old[k].shape != v.shape or rel_err(old[k], v) > 1e-6]
        for k in bad:
            print("%s: %s differs" % (args.out, k))
        return 1 if bad else 0
    write_fixture(args.out, tensors)
    back = read_fixture(args.out)
    assert all(np.array_equal(back[k], v) for k, v in tensors)
    print("  wrote %s (%d tensors, %d bytes)" % (args.out, len(tensors), os.path.getsize(args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
