"""The Python front on a GPU (label gpu): the device-array checks of
tests/python/devchecks.py with real CuPy arrays and PyTorch CUDA tensors,
then what only a GPU shows: the order of a call after the producer's pending
work on its stream (a kernel that spins before it writes the input), the
result complete for any stream when the call returns, large arrays over the
real NCCL or staging, strided block copies (allgather along axis 1) on the
device.

Skips (exit 77, saying why) where this process has no CUDA device or neither
CuPy nor PyTorch with CUDA can be imported; DTRAIN_GPU_REQUIRE=1 makes that a
failure (the GPU suite). Run standalone and under mpiexec (ranks sharing one
GPU take the staged path, ranks with GPUs of their own NCCL)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import numpy as np  # noqa: E402

import dtrain  # noqa: E402
from dtrain import _lib  # noqa: E402

import harness as H  # noqa: E402
from harness import check  # noqa: E402


def skip(why):
    must = os.environ.get("DTRAIN_GPU_REQUIRE") == "1"
    print("test_py_device: %s: %s" % ("FAILED" if must else "skipped", why), flush=True)
    sys.stdout.flush()
    os._exit(1 if must else 77)


def _import(name):
    """(module, None) or (None, why). The array libraries are imported before
    dtrain loads libdtrain: each may carry its own libnccl.so.2, and the one
    loaded first serves both (PyTorch's is the newer, and dtrain needs 2.18+)."""
    try:
        return __import__(name), None
    except Exception as e:  # noqa: BLE001 - any failure means: not usable here
        return None, "%s: %s" % (type(e).__name__, e)


_cp, _why_cp = _import("cupy")
_torch, _why_torch = _import("torch")
DEV = dtrain.cuda_device()   # starts the runtime: the rank's GPU is bound first
if DEV is None:
    skip("no CUDA device: %s" % _lib.rank_device_absent)

import devchecks as DC  # noqa: E402

R, S = DC.R, DC.S


def _setup_cupy():
    if _cp is None:
        return None, _why_cp
    try:
        _cp.cuda.Device(DEV).use()
        _cp.zeros(1).sum()
        return _cp, None
    except Exception as e:  # noqa: BLE001
        return None, "%s: %s" % (type(e).__name__, e)


def _setup_torch():
    if _torch is None:
        return None, _why_torch
    try:
        if not _torch.cuda.is_available():
            return None, "torch %s without CUDA" % _torch.__version__
        _torch.cuda.set_device(DEV)
        return _torch, None
    except Exception as e:  # noqa: BLE001
        return None, "%s: %s" % (type(e).__name__, e)


class CupyKind:
    name = "cupy"
    dtypes = H.DTYPES

    def __init__(self, cp):
        self.cp = cp

    def dev(self, a):
        with self.cp.cuda.Device(DEV):
            return self.cp.asarray(np.ascontiguousarray(a))

    def host(self, d):
        return self.cp.asnumpy(d)

    def same(self, r, like=None):
        return isinstance(r, self.cp.ndarray) and r.device.id == DEV and \
            (like is None or r.dtype == like.dtype)

    def bf16(self, bits):
        return self.dev(bits), "bf16"

    def noncontig(self, a):
        return self.dev(np.ascontiguousarray(a.T)).T

    def other_device(self, a):
        n = self.cp.cuda.runtime.getDeviceCount()
        if n < 2:
            return None
        with self.cp.cuda.Device((DEV + 1) % n):
            return self.cp.asarray(a)

    def readonly(self, a):
        return None


class TorchKind:
    name = "torch"
    dtypes = H.DTYPES

    def __init__(self, torch):
        self.torch = torch

    def dev(self, a):
        return self.torch.from_numpy(np.ascontiguousarray(a)).to("cuda:%d" % DEV)

    def host(self, d):
        if d.dtype == self.torch.bfloat16:
            return d.view(self.torch.int16).cpu().numpy().view(np.uint16)
        return d.cpu().numpy()

    def same(self, r, like=None):
        return isinstance(r, self.torch.Tensor) and r.is_cuda and r.device.index == DEV and \
            (like is None or r.dtype == like.dtype)

    def bf16(self, bits):
        return self.dev(bits.view(np.int16)).view(self.torch.bfloat16), None

    def noncontig(self, a):
        return self.dev(np.ascontiguousarray(a.T)).T

    def other_device(self, a):
        n = self.torch.cuda.device_count()
        return None if n < 2 else self.torch.from_numpy(a).to("cuda:%d" % ((DEV + 1) % n))

    def readonly(self, a):
        return None


# ---- what only a GPU shows -------------------------------------------------------------
_SPIN = r"""
extern "C" __global__ void dt_spin_fill(float *x, float v, long long n, long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        x[i] = v;
}
"""
N_BIG = 1 << 22
CYCLES = 200 * 1000 * 1000   # about 0.1 s at 2 GHz: far longer than a call's start


def t_cupy_order(cp):
    want = float(S * (S + 1) // 2)
    try:
        spin = cp.RawKernel(_SPIN, "dt_spin_fill")
    except Exception as e:  # noqa: BLE001
        print("test_py_device: no NVRTC for the spinning kernel (%s): order checks left out" % e)
        return
    s1 = cp.cuda.Stream(non_blocking=True)
    s2 = cp.cuda.Stream(non_blocking=True)
    with s1:
        x = cp.zeros(N_BIG, cp.float32)
        spin((256,), (256,), (x, np.float32(R + 1), np.int64(N_BIG), np.int64(CYCLES)))
        y = dtrain.allreduce(x)        # the interface names s1: ordered after the kernel
    check("cupy: ordered after the producer's kernel on its stream",
          bool((cp.asnumpy(y) == want).all()))
    with s2:
        z = y * 2                      # another stream, at once: the result is complete
        zs = cp.asnumpy(z)
    check("cupy: the result complete for another stream", bool((zs == 2 * want).all()))
    with s1:
        x = cp.zeros(N_BIG, cp.float32)
        spin((256,), (256,), (x, np.float32(R + 1), np.int64(N_BIG), np.int64(CYCLES)))
    with s2:
        o = cp.empty(N_BIG, cp.float32)
    with s1:
        dtrain.allreduce(x, out=o)     # out names s2: synchronized before the call
    check("cupy: x on one stream, out on another", bool((cp.asnumpy(o) == want).all()))
    g = dtrain.allgather(cp.full((512, 1024), R, cp.int32), axis=1)
    want_g = np.concatenate([np.full((512, 1024), m, np.int32) for m in range(S)], 1)
    check("cupy: allgather of 2 MiB along axis 1", bool((cp.asnumpy(g) == want_g).all()))


def t_torch_order(torch):
    want = float(S * (S + 1) // 2)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.zeros(N_BIG, device="cuda:%d" % DEV)
        torch.cuda._sleep(CYCLES)      # the stream spins, then the fill
        x.fill_(R + 1)
        y = dtrain.allreduce(x)        # torch's current stream: ordered after the fill
    check("torch: ordered after the producer's work on the current stream",
          bool((y.cpu() == want).all()))
    with torch.cuda.stream(torch.cuda.Stream()):
        z = (y * 2).cpu()              # another stream, at once: the result is complete
    check("torch: the result complete for another stream", bool((z == 2 * want).all()))
    x = torch.ones(N_BIG, device="cuda:%d" % DEV)
    torch.cuda._sleep(CYCLES)
    x.mul_(R + 1)
    check("torch: in place on the default stream", dtrain.allreduce(x, out=x) is x and
          bool((x.cpu() == want).all()))
    b = torch.full((64,), R + 0.5, dtype=torch.bfloat16, device="cuda:%d" % DEV)
    r = dtrain.allreduce(b, "max")
    check("torch: bfloat16 tensors are bf16", r.dtype == torch.bfloat16 and
          bool((r.float().cpu() == S - 0.5).all()))
    g = dtrain.allgather(torch.full((512, 1024), R, dtype=torch.int32, device="cuda:%d" % DEV),
                         axis=1)
    want_g = np.concatenate([np.full((512, 1024), m, np.int32) for m in range(S)], 1)
    check("torch: allgather of 2 MiB along axis 1", bool((g.cpu().numpy() == want_g).all()))


def main():
    cp, why_cp = _setup_cupy()
    torch, why_torch = _setup_torch()
    if cp is None and torch is None:
        skip("neither CuPy (%s) nor PyTorch with CUDA (%s) is usable" % (why_cp, why_torch))
    path = dtrain.get_communicator().device_path
    if R == 0:
        print("test_py_device: %d rank(s), device path %s, rank 0 on GPU %d; cupy: %s; torch: %s"
              % (S, path, DEV, cp.__version__ if cp else "no (%s)" % why_cp,
                 torch.__version__ if torch else "no (%s)" % why_torch), flush=True)
    if cp is not None:
        DC.run(CupyKind(cp))
        H.guarded("cupy order", lambda: t_cupy_order(cp))
    if torch is not None:
        DC.run(TorchKind(torch))
        H.guarded("torch order", lambda: t_torch_order(torch))
    H.finish()


main()
