#!/usr/bin/python3
"""Reference values for the dtrain optimizers, computed with PyTorch.

Run with Debian's python (it has torch + numpy):
    /usr/bin/python3 tests/reference/torch_optim.py [out.bin]
Default output: tests/reference/fixtures/optim_ref.bin (committed; regenerate
only when the cases below change). Read by tests/optim/test_optim_parity.c.

Inputs: a flat float32 parameter vector of N elements (standard normal) and
NSTEPS float32 gradient vectors (standard normal times 10^U(-7, 1), so
magnitudes span 1e-7..10 and eps matters for the smallest; in step k the
elements k, k+50, k+100, ... are exactly 0), from
numpy.random.RandomState(SEED). Each case builds one torch.nn.Parameter from
the same p0, sets param.grad = grads[k] and the param group's lr = lr[k], calls
opt.step() (foreach=False: the single-tensor path dtrain mirrors) and records
the parameter and the optimizer state after every step. Hyperparameters are
stored as f64, the exact Python values given to torch (dtrain's config fields
are doubles too); the per-step learning rates are rounded to float32 first,
because dt_optim_step takes a float lr.

Binary format (all little-endian; f32 = IEEE binary32, i32/u32 = 4 bytes):
    char  magic[8]            "DTOPTREF"
    u32   version             1
    u32   n                   elements per vector
    u32   nsteps
    u32   ncases
    f32   p0[n]               initial parameters
    f32   grads[nsteps][n]    gradient of step k (k = 0..nsteps-1)
    then ncases times:
      char  name[32]          case name, NUL-padded ASCII
      i32   kind              0 = SGD, 1 = Adam, 2 = AdamW (dt_optim_kind)
      f64   weight_decay
      f64   momentum          (SGD)
      i32   nesterov          (SGD)
      f64   beta1, beta2, eps (Adam/AdamW)
      f32   lr[nsteps]        learning rate used at step k
      i32   nstates           number of state buffers
      char  state_name[nstates][32]   PyTorch state key, NUL-padded
      nsteps times (after step k):
        f32 params[n]
        f32 state[nstates][n]           in state_name order
"""
import struct
import sys

import numpy as np
import torch

N = 1000
NSTEPS = 3
SEED = 20240611
NAME_LEN = 32


def f32(x):
    return float(np.float32(x))


# (name, kind, options, lrs). Options use PyTorch's defaults for what is absent.
CASES = [
    ("sgd_plain", 0, dict(), [0.1, 0.05, 0.02]),
    ("sgd_momentum", 0, dict(momentum=0.9), [0.1, 0.05, 0.02]),
    ("sgd_nesterov_wd", 0, dict(momentum=0.9, nesterov=True, weight_decay=1e-2), [0.1, 0.05, 0.02]),
    ("adam", 1, dict(), [1e-2, 2e-2, 5e-3]),
    ("adam_wd", 1, dict(weight_decay=0.1, betas=(0.8, 0.99), eps=1e-6), [1e-2, 2e-2, 5e-3]),
    ("adamw", 2, dict(weight_decay=0.05), [1e-2, 2e-2, 5e-3]),
]
STATE_NAMES = {0: ["momentum_buffer"], 1: ["exp_avg", "exp_avg_sq"], 2: ["exp_avg", "exp_avg_sq"]}


def make_inputs():
    rs = np.random.RandomState(SEED)
    p0 = rs.standard_normal(N).astype(np.float32)
    grads = []
    for k in range(NSTEPS):
        g = rs.standard_normal(N) * 10.0 ** rs.uniform(-7.0, 1.0, N)
        g[k::50] = 0.0
        grads.append(g.astype(np.float32))
    return p0, grads


def name_bytes(s):
    b = s.encode("ascii")
    assert len(b) < NAME_LEN
    return b + b"\0" * (NAME_LEN - len(b))


def run_case(kind, opts, lrs, p0, grads):
    wd = float(opts.get("weight_decay", 0.01 if kind == 2 else 0.0))
    mom = float(opts.get("momentum", 0.0))
    nesterov = bool(opts.get("nesterov", False))
    b1, b2 = (float(b) for b in opts.get("betas", (0.9, 0.999)))
    eps = float(opts.get("eps", 1e-8))
    lrs = [f32(x) for x in lrs]
    param = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    momentum_state = False
    if kind == 0:
        opt = torch.optim.SGD([param], lr=lrs[0], momentum=mom, nesterov=nesterov,
                              weight_decay=wd, foreach=False)
        momentum_state = mom != 0.0
    elif kind == 1:
        opt = torch.optim.Adam([param], lr=lrs[0], betas=(b1, b2), eps=eps,
                               weight_decay=wd, foreach=False)
    else:
        opt = torch.optim.AdamW([param], lr=lrs[0], betas=(b1, b2), eps=eps,
                                weight_decay=wd, foreach=False)
    names = STATE_NAMES[kind] if (kind != 0 or momentum_state) else []
    steps = []
    for k in range(NSTEPS):
        opt.param_groups[0]["lr"] = lrs[k]
        param.grad = torch.from_numpy(grads[k].copy())
        opt.step()
        st = opt.state[param]
        if kind != 0:
            assert int(st["step"]) == k + 1
        bufs = [param.detach().numpy().astype(np.float32).copy()]
        bufs += [st[s].detach().numpy().astype(np.float32).copy() for s in names]
        steps.append(bufs)
    head = struct.pack("<iddiddd", kind, wd, mom, int(nesterov), b1, b2, eps)
    head += struct.pack("<%df" % NSTEPS, *lrs)
    head += struct.pack("<i", len(names)) + b"".join(name_bytes(s) for s in names)
    return head, steps


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/reference/fixtures/optim_ref.bin"
    torch.set_num_threads(1)
    p0, grads = make_inputs()
    blob = b"DTOPTREF" + struct.pack("<IIII", 1, N, NSTEPS, len(CASES))
    blob += p0.astype("<f4").tobytes()
    for g in grads:
        blob += g.astype("<f4").tobytes()
    for name, kind, opts, lrs in CASES:
        head, steps = run_case(kind, opts, lrs, p0, grads)
        blob += name_bytes(name) + head
        for bufs in steps:
            for b in bufs:
                blob += b.astype("<f4").tobytes()
    with open(out, "wb") as f:
        f.write(blob)
    print("wrote %s: %d bytes, %d cases, n=%d, %d steps (torch %s)"
          % (out, len(blob), len(CASES), N, NSTEPS, torch.__version__))


if __name__ == "__main__":
    main()
