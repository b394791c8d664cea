#!/usr/bin/python3
"""PyTorch reference models for dtrain's nn layer, and the parity fixtures.

Run with Debian's python, which has torch 1.13 and numpy (the `python3` first
on a pyenv PATH does not):

    /usr/bin/python3 tests/reference/torch_models.py            # rewrite fixtures
    /usr/bin/python3 tests/reference/torch_models.py --check    # compare only

The C tests (tests/nn/test_nn_parity.c) read the committed fixtures and never
need torch.

Models (the same module attribute names as dtrain's slice names, so that
state_dict keys match dt_param_slice.name exactly):
  mlp    fc1, fc2, fc3            784 -> h1 -> h2 -> 10, ReLU
  lenet  conv1, bn1, linear1      RAF's dist_example with a 1-channel input
  cnn    conv1, bn1, conv2, bn2, fc1, fc2, drop

FIXTURE FORMAT (".dtfx", every integer little-endian):
  magic    4 bytes  b"DTFX"
  version  u32      1
  count    u32      number of tensors
  then `count` tensors, each:
    name_len u32, name (UTF-8, name_len bytes, no terminator)
    dtype    u32      dtrain's dt_dtype code: 0 = float32, 6 = int32, 5 = uint8
    ndim     u32
    shape    ndim x i64
    data     prod(shape) elements, row-major, little-endian
Tensor names used in the model fixtures (<key> = a state_dict key, e.g.
"fc1.weight" or "bn1.running_mean"):
  config.name      uint8 [n]   model name ("mlp", "lenet", "cnn")
  config.sizes     int32 [3]   hidden1, hidden2, hidden3 of dt_model_config
                               (cnn: conv_channels1, conv_channels2, hidden3;
                               0 where the model has no such size)
  config.dropout   float32 [1]
  input.x          float32 [B,1,28,28]
  input.y          int32 [B]
  param.<key>      float32     parameters before the step (PyTorch init, seed 0)
  buffer.<key>     float32     non-parameter buffers before the step
                               (num_batches_tracked is not stored)
  --- one TRAIN-mode forward + backward of the mean NLL loss:
  out.loss         float32 [1]
  out.logits       float32 [B,10]  log_softmax of the model output
  out.scores       float32 [B,10]  the model output (pre-softmax)
  grad.<key>       float32     d(loss)/d(param)
  buffer_after.<key> float32   buffers after that forward (running stats)
  --- then one EVAL-mode forward (running statistics, no dropout):
  eval.logits      float32 [B,10]
  eval.loss        float32 [1]
Expected values are computed in float64 (the float32 parameters and inputs
are exactly representable) and rounded to float32, so they are the exact
answer for the stored float32 inputs; the script also prints how far torch's
own float32 run is from them. Later fixtures (e.g. optimizer steps) may add
tensors with other prefixes, e.g. "step1.param.<key>"; readers look tensors
up by name and ignore what they do not know.
"""
import argparse
import copy
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")

DTYPE_CODES = {np.dtype("float32"): 0, np.dtype("int32"): 6, np.dtype("uint8"): 5}
CODE_DTYPES = {v: k for k, v in DTYPE_CODES.items()}


# ---- fixture I/O -------------------------------------------------------------

def write_fixture(path, tensors):
    """tensors: list of (name, numpy array of float32/int32/uint8)."""
    with open(path, "wb") as f:
        f.write(b"DTFX")
        f.write(struct.pack("<II", 1, len(tensors)))
        for name, arr in tensors:
            arr = np.ascontiguousarray(arr)
            if arr.dtype not in DTYPE_CODES:
                raise TypeError("%s: unsupported dtype %s" % (name, arr.dtype))
            nb = name.encode("utf-8")
            f.write(struct.pack("<I", len(nb)))
            f.write(nb)
            f.write(struct.pack("<II", DTYPE_CODES[arr.dtype], arr.ndim))
            f.write(struct.pack("<%dq" % arr.ndim, *arr.shape))
            f.write(arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes())


def read_fixture(path):
    """Returns an ordered dict name -> numpy array."""
    out = {}
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"DTFX":
        raise ValueError("%s: bad magic" % path)
    version, count = struct.unpack_from("<II", data, 4)
    if version != 1:
        raise ValueError("%s: version %d" % (path, version))
    off = 12
    for _ in range(count):
        (nlen,) = struct.unpack_from("<I", data, off)
        off += 4
        name = data[off:off + nlen].decode("utf-8")
        off += nlen
        code, ndim = struct.unpack_from("<II", data, off)
        off += 8
        shape = struct.unpack_from("<%dq" % ndim, data, off)
        off += 8 * ndim
        dt = CODE_DTYPES[code].newbyteorder("<")
        n = int(np.prod(shape)) if ndim else 1
        out[name] = np.frombuffer(data, dtype=dt, count=n, offset=off).reshape(shape)
        off += n * dt.itemsize
    return out


# ---- models ------------------------------------------------------------------

class MLP(nn.Module):
    def __init__(self, h1=1024, h2=1024, num_classes=10):
        super().__init__()
        self.fc1 = nn.Linear(784, h1)
        self.fc2 = nn.Linear(h1, h2)
        self.fc3 = nn.Linear(h2, num_classes)

    def forward(self, x):
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class LeNet(nn.Module):
    """RAF's scripts/distributed/dist_example.py model, 1 input channel."""

    def __init__(self, input_shape=28, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, kernel_size=5, padding=2, bias=False)
        self.bn1 = nn.BatchNorm2d(6)
        self.linear1 = nn.Linear((input_shape // 2) ** 2 * 6, num_classes)

    def forward(self, x):
        out = torch.sigmoid(self.bn1(self.conv1(x)))
        out = F.avg_pool2d(out, (2, 2), (2, 2))
        return self.linear1(torch.flatten(out, 1))


class CNN(nn.Module):
    def __init__(self, c1=32, c2=64, h=128, p=0.25, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, c1, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c1)
        self.conv2 = nn.Conv2d(c1, c2, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c2)
        self.fc1 = nn.Linear(c2 * 7 * 7, h)
        self.fc2 = nn.Linear(h, num_classes)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(self.drop(x))


def build_model(name, sizes=(0, 0, 0), dropout=0.0):
    """The torch twin of dt_model_create(name, hidden1..3, dropout)."""
    h1, h2, h3 = sizes
    if name == "mlp":
        return MLP(h1 or 1024, h2 or 1024)
    if name == "lenet":
        return LeNet()
    if name == "cnn":
        return CNN(h1 or 32, h2 or 64, h3 or 128, dropout)
    raise ValueError(name)


# The parity cases: small sizes keep the fixtures small (< 2 MB in all).
CASES = [
    # name,  sizes (hidden1, hidden2, hidden3; cnn: conv_channels1/2, hidden3), dropout, batch
    ("mlp", (64, 32, 0), 0.0, 8),
    ("lenet", (0, 0, 0), 0.0, 8),
    ("cnn", (4, 8, 16), 0.0, 6),
]


def model_state(model):
    """(params, buffers): lists of (state_dict key, float32 numpy array),
    without num_batches_tracked."""
    params = [(k, v.detach().float().numpy().copy()) for k, v in model.named_parameters()]
    buffers = [(k, v.detach().float().numpy().copy()) for k, v in model.named_buffers()
               if not k.endswith("num_batches_tracked")]
    return params, buffers


def run_step(model, x, y):
    """One train forward+backward and one eval forward; returns a dict."""
    model.train()
    model.zero_grad()
    scores = model(x)
    logp = F.log_softmax(scores, dim=1)
    loss = F.nll_loss(logp, y)
    loss.backward()
    res = {
        "loss": loss.detach(),
        "logits": logp.detach(),
        "scores": scores.detach(),
        "grads": {k: p.grad.detach().clone() for k, p in model.named_parameters()},
        "buffers": {k: b.detach().clone() for k, b in model.named_buffers()
                    if not k.endswith("num_batches_tracked")},
    }
    model.eval()
    with torch.no_grad():
        elogp = F.log_softmax(model(x), dim=1)
        res["eval_logits"] = elogp
        res["eval_loss"] = F.nll_loss(elogp, y)
    return res


def rel_err(a, b):
    """max|a-b| / max(max|b|, 1e-12): the measure the C test uses."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-12))


def f32(t):
    return t.detach().to(torch.float32).numpy().astype(np.float32)


def make_case(name, sizes, dropout, batch, seed=0):
    torch.manual_seed(seed)
    model = build_model(name, sizes, dropout)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.rand(batch, 1, 28, 28, generator=gen)
    y = torch.randint(0, 10, (batch,), generator=gen)
    params, buffers = model_state(model)

    m64 = copy.deepcopy(model).double()
    r64 = run_step(m64, x.double(), y)
    r32 = run_step(copy.deepcopy(model), x, y)

    t = [
        ("config.name", np.frombuffer(name.encode(), dtype=np.uint8).copy()),
        ("config.sizes", np.array(sizes, dtype=np.int32)),
        ("config.dropout", np.array([dropout], dtype=np.float32)),
        ("input.x", x.numpy().astype(np.float32)),
        ("input.y", y.numpy().astype(np.int32)),
    ]
    t += [("param." + k, v) for k, v in params]
    t += [("buffer." + k, v) for k, v in buffers]
    t.append(("out.loss", f32(r64["loss"]).reshape(1)))
    t.append(("out.logits", f32(r64["logits"])))
    t.append(("out.scores", f32(r64["scores"])))
    t += [("grad." + k, f32(v)) for k, v in r64["grads"].items()]
    t += [("buffer_after." + k, f32(v)) for k, v in r64["buffers"].items()]
    t.append(("eval.logits", f32(r64["eval_logits"])))
    t.append(("eval.loss", f32(r64["eval_loss"]).reshape(1)))

    worst = max([rel_err(f32(r32[k]), f32(r64[k])) for k in ("loss", "logits", "scores")] +
                [rel_err(f32(r32["grads"][k]), f32(v)) for k, v in r64["grads"].items()])
    print("%-6s %7d params, batch %d: torch float32 vs float64 max rel err %.2e"
          % (name, sum(v.size for _, v in params), batch, worst))
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=FIXTURES, help="fixture directory")
    ap.add_argument("--check", action="store_true",
                    help="regenerate in memory and compare with the files instead of writing")
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    status = 0
    for name, sizes, dropout, batch in CASES:
        tensors = make_case(name, sizes, dropout, batch)
        path = os.path.join(args.out, name + ".dtfx")
        if args.check:
            old = read_fixture(path)
            for k, v in tensors:
                if k not in old or old[k].shape != v.shape or rel_err(old[k], v) > 1e-6:
                    print("%s: %s differs" % (path, k))
                    status = 1
        else:
            write_fixture(path, tensors)
            back = read_fixture(path)
            assert all(np.array_equal(back[k], v) for k, v in tensors)
            print("  wrote %s (%d tensors, %d bytes)" % (path, len(tensors),
                                                        os.path.getsize(path)))
    return status


if __name__ == "__main__":
    sys.exit(main())
