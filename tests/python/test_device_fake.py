"""The Python front on device arrays, without a GPU: every collective on
arrays of the fake CUDA runtime (tests/python/fakedev.py over
libdtrain_fakegpu.so) exposed through __cuda_array_interface__ (versions 3
and 2) and DLPack (versioned and unversioned capsules), checked against numpy
(tests/python/devchecks.py), plus what only the fake can show: which stream a
call used (fk_stream_count), the protocols' stream conventions and versions,
the kinds of memory, and where the rank's device comes from.

Run under mpiexec at 1, 2 and 4 ranks. DTRAIN_FAKEGPU_DEVICES=4 gives every
rank a fake GPU of its own (the nccl path over the fake NCCL);
DTRAIN_FAKEGPU_DEVICES=1 puts them on one (the staged path). The path the
test expects is DTRAIN_PY_DEVICE_PATH (nccl or staged)."""
import os

import numpy as np

import dtrain
from dtrain import _lib, DtrainError

import harness as H
from harness import check, expect_raises
import devchecks as DC
import fakedev as FD
from fakedev import FakeDeviceArray as F, BF16

R, S = DC.R, DC.S
NDEV = FD.device_count()


class FakeKind:
    """devchecks' Kind for FakeDeviceArray of one protocol."""
    dtypes = H.DTYPES

    def __init__(self, protocol):
        self.protocol = protocol
        self.name = "fake " + protocol

    def dev(self, a, **kw):
        return F.from_numpy(np.asarray(a), protocol=self.protocol, **kw)

    def host(self, d):
        return d.to_numpy()

    def same(self, r, like=None):
        return isinstance(r, F) and r.protocol == self.protocol and \
            (like is None or (r.dtype is like.dtype or r.dtype == like.dtype))

    def bf16(self, bits):
        if self.protocol.startswith("dlpack"):  # DLPack has a bfloat16 dtype
            return self.dev(bits, dtype=BF16), None
        return self.dev(bits), "bf16"

    def noncontig(self, a):
        return self.dev(a.T, strides_elems=(1, a.shape[1]))   # a transposed view

    def other_device(self, a):
        if NDEV < 2:
            return None
        return self.dev(a, device=(dtrain.cuda_device() + 1) % NDEV)

    def readonly(self, a):
        return self.dev(a, readonly=True)


# ---- the path and the rank's device ------------------------------------------------
def t_path_and_device():
    path = dtrain.get_communicator().device_path
    want = os.environ.get("DTRAIN_PY_DEVICE_PATH")
    if R == 0:
        print("device path: %s (%d fake devices per process, %d ranks)" % (path, NDEV, S),
              flush=True)
    if want:
        check("the %s path" % want, path == want, "got %s" % path)
    local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
    check("the rank's device is the local rank modulo the devices",
          dtrain.cuda_device() == local % NDEV, "device %s, local rank %d, %d devices"
          % (dtrain.cuda_device(), local, NDEV))
    check("init(device='current') once started is a no-op", dtrain.init(device="current") is None)
    check("init() naming the rank's own device is a no-op",
          dtrain.init(device=dtrain.cuda_device()) is None)
    if NDEV >= 2:
        expect_raises("init naming another device once started", RuntimeError,
                      lambda: dtrain.init(device=(dtrain.cuda_device() + 1) % NDEV),
                      "already runs with cuda device %d" % dtrain.cuda_device())


# ---- streams ------------------------------------------------------------------------
def uses(s):
    return FD.stream_count(s, FD.FK_STREAM_USES)


def syncs(s):
    return FD.stream_count(s, FD.FK_STREAM_SYNCS)


def t_streams():
    kind = FakeKind("cai3")
    want = np.full(4, S, np.float32)
    # an explicit stream: the collective is enqueued on it
    s1 = FD.stream_new()
    x = kind.dev(np.ones(4, np.float32), stream=s1)
    u = uses(s1)
    DC.check_dev("allreduce on an explicit stream", kind, dtrain.allreduce(x), want)
    check("the work ran on the interface's stream", uses(s1) > u,
          "uses of the stream %d -> %d" % (u, uses(s1)))
    # the protocol's default streams: 1 legacy, 2 per-thread
    for value, handle, label in ((1, None, "legacy (1)"), (2, 2, "per-thread (2)")):
        x = kind.dev(np.ones(4, np.float32), stream=value)
        u = uses(handle)
        DC.check_dev("allreduce with stream %s" % label, kind, dtrain.allreduce(x), want)
        check("the work ran on the %s default stream" % label, uses(handle) > u)
    # a second array naming another stream: synchronized before the call
    s2 = FD.stream_new()
    x = kind.dev(np.ones(4, np.float32), stream=s1)
    o = kind.dev(np.zeros(4, np.float32), stream=s2)
    u1, y2 = uses(s1), syncs(s2)
    dtrain.allreduce(x, out=o)
    DC.check_dev("x and out on two streams", kind, o, want)
    check("the call ran on x's stream", uses(s1) > u1)
    check("out's stream was synchronized first", syncs(s2) == y2 + 1,
          "syncs %d -> %d" % (y2, syncs(s2)))
    # no stream (None): no ordering asked; the call uses the legacy default stream
    x = kind.dev(np.ones(4, np.float32), stream=None)
    u = uses(None)
    DC.check_dev("allreduce with stream None", kind, dtrain.allreduce(x), want)
    check("stream None: the legacy default stream", uses(None) > u)
    # a strided gather: copies on the call's stream, waited for before returning
    x = kind.dev(np.arange(6, dtype=np.int32).reshape(2, 3) + R, stream=s1)
    y1 = syncs(s1)
    g = dtrain.allgather(x, axis=1)
    DC.check_dev("allgather axis 1 on a stream", kind, g, np.concatenate(
        [np.arange(6, dtype=np.int32).reshape(2, 3) + m for m in range(S)], 1))
    check("copies after the collective are waited for", syncs(s1) > y1)
    # DLPack: the producer is asked for the call's stream
    dl = FakeKind("dlpack")
    x = dl.dev(np.ones(4, np.float32))
    dtrain.allreduce(x)
    check("DLPack alone: exported for the legacy default stream", x.dlpack_streams == [1],
          "asked for %s" % x.dlpack_streams)
    xi = kind.dev(np.ones(4, np.float32), stream=s1)
    od = dl.dev(np.zeros(4, np.float32))
    dtrain.allreduce(xi, out=od)
    check("DLPack beside an interface on stream s: exported for s", od.dlpack_streams == [s1],
          "asked for %s, s is %#x" % (od.dlpack_streams, s1))
    DC.check_dev("interface in, DLPack out", dl, od, want)
    both = FakeKind("both").dev(np.ones(4, np.float32), stream=s1)
    dtrain.allreduce(both)
    check("interface version 3 and DLPack: the interface is read", both.dlpack_streams == [])
    tl = FakeKind("torchlike").dev(np.ones(4, np.float32))
    dtrain.allreduce(tl)
    check("interface version 2 and DLPack (PyTorch's): DLPack is used",
          tl.dlpack_streams == [1])
    # the protocol's errors
    for bad, exc, words in ((0, ValueError, ("stream 0", "disallows")),
                            (-5, ValueError, ("stream -5",)),
                            (True, TypeError, ("stream true",)),
                            ("s", TypeError, ("stream 's'",))):
        x = kind.dev(np.ones(4, np.float32), stream=bad)
        expect_raises("stream %r refused" % (bad,), exc, lambda: dtrain.allreduce(x), *words)
    FD.call("cudaStreamDestroy", s1)
    FD.call("cudaStreamDestroy", s2)


# ---- protocol versions, memory kinds, objects without a library -----------------------
def t_protocols():
    for v in (0, 1, 4, None):
        x = F.from_numpy(np.ones(2, np.float32), protocol="cai3", cai_version=v or 3)
        if v is None:
            x.cai_version = "3"   # not an integer
        else:
            x.cai_version = v
        expect_raises("interface version %r refused" % (v,), TypeError,
                      lambda: dtrain.allreduce(x), "__cuda_array_interface__ has version")
    x = F.from_numpy(np.ones(2, np.float32), protocol="dlpack", dl_version=(2, 0))
    expect_raises("DLPack 2.0 refused", TypeError, lambda: dtrain.allreduce(x),
                  "exports dlpack 2.0", "reads dlpack 1.x")
    x = F.from_numpy(np.ones(2, np.float32), protocol="dlpack", dl_version=(1, 3))
    DC.check_dev("DLPack 1.3 read", FakeKind("dlpack"), dtrain.allreduce(x),
                 np.full(2, S, np.float32))
    for proto in ("cai2", "dlpack_legacy"):
        kind = FakeKind(proto)
        x = kind.dev(np.arange(4, dtype=np.int64) + R)
        DC.check_dev("allreduce through %s" % proto, kind, dtrain.allreduce(x, "max"),
                     np.arange(4, dtype=np.int64) + S - 1)
        g = dtrain.allgather(kind.dev(np.arange(4, dtype=np.int8).reshape(2, 2)), axis=1)
        DC.check_dev("allgather through %s" % proto, kind, g,
                     np.concatenate([np.arange(4, dtype=np.int8).reshape(2, 2)] * S, 1))
    # memory kinds: managed is device memory, pinned and CPU are host memory
    for proto in ("cai3", "dlpack"):
        m = F.from_numpy(np.ones(3, np.float64), protocol=proto, memory="managed")
        kind = FakeKind(proto)
        DC.check_dev("managed memory through %s" % proto, kind, dtrain.allreduce(m),
                     np.full(3, S, np.float64))
    p = F((3,), np.float32, protocol="cai3", memory="pinned")
    expect_raises("pinned host memory behind the interface", TypeError,
                  lambda: dtrain.allreduce(p), "points at pinned host memory")
    p = F((3,), np.float32, protocol="dlpack", memory="pinned")
    expect_raises("DLPack kDLCUDAHost", TypeError, lambda: dtrain.allreduce(p),
                  "dlpack device kdlcudahost")
    c = F((3,), np.float32, protocol="dlpack", memory="cpu")
    expect_raises("DLPack kDLCPU", TypeError, lambda: dtrain.allreduce(c),
                  "host memory (dlpack device kdlcpu)", "numpy")
    # malformed interfaces and failing producers
    bad = _Bare({"version": 3, "shape": (2,), "data": (1, False)})
    expect_raises("interface without typestr", TypeError, lambda: dtrain.allreduce(bad),
                  "malformed")
    bad = _Bare({"version": 3, "shape": (2,), "typestr": "<f4", "data": (1, False),
                 "mask": 7})
    expect_raises("interface with a mask", TypeError, lambda: dtrain.allreduce(bad), "mask")
    be = F.from_numpy(np.ones(2, ">f4").astype("<f4"), protocol="cai3")
    be.dtype = np.dtype(">f4")
    expect_raises("byte-swapped device array", TypeError, lambda: dtrain.allreduce(be),
                  "byte-swapped")
    # an object with no library to make results: in place only
    x = FakeKind("cai3").dev(np.ones(3, np.float32))
    bare = _Bare(x.__cuda_array_interface__, keep=x)
    expect_raises("no library to make a result", TypeError, lambda: dtrain.allreduce(bare),
                  "cannot make a result like x", "out=")
    check("in place needs no library", dtrain.allreduce(bare, out=bare) is bare)
    DC.check_dev("in place on a bare interface", FakeKind("cai3"), x, np.full(3, S, np.float32))
    # a producer refusing both protocols (PyTorch for a tensor that requires grad)
    x = FakeKind("torchlike").dev(np.ones(2, np.float32))
    x.refuse = "Can't export tensors that require gradient, use tensor.detach()"
    expect_raises("a producer refusing to export", TypeError, lambda: dtrain.allreduce(x),
                  "x.__dlpack__(stream=1) failed: runtimeerror: can't export tensors")
    # a non-array in a device call, a DLPack capsule that is not one
    expect_raises("a non-array beside a device array", TypeError,
                  lambda: dtrain.allreduce([x, 3.0]), "x[1] must be a device array")
    expect_raises("a producer returning no capsule", TypeError,
                  lambda: dtrain.allreduce(_BadDlpack()), "not a dlpack capsule")


# ---- ranks that disagree on the memory kind --------------------------------------------
def t_kinds_across_ranks():
    """Device arrays on one rank, numpy on another: the library's fingerprint
    check, DT_ERR_MISMATCH on every rank involved (and the job goes on)."""
    if S == 1:
        return
    kind = FakeKind("cai3")
    if R == 0:
        fn = lambda: dtrain.scatter(kind.dev(np.arange(2 * S, dtype=np.float32)), 0)  # noqa: E731
    else:
        fn = lambda: dtrain.scatter(None, 0, shape=(2 * S,), dtype=np.float32)  # noqa: E731
    expect_raises("scatter: the root on the device, the others on the host", DtrainError, fn,
                  "collective mismatch", "on device memory", status="DT_ERR_MISMATCH")
    if R == 0:
        expect_raises("send from the device to a recv on the host", DtrainError,
                      lambda: dtrain.send(kind.dev(np.ones(2, np.float32)), 1),
                      "point-to-point mismatch", status="DT_ERR_MISMATCH")
    elif R == 1:
        expect_raises("recv on the host from a send on the device", DtrainError,
                      lambda: dtrain.recv(0, 2, np.float32), "point-to-point mismatch",
                      status="DT_ERR_MISMATCH")
    DC.check_dev("usable after the mismatch", kind, dtrain.allreduce(kind.dev(np.ones(2))),
                 np.full(2, S, np.float64))


# ---- the PyTorch and CuPy adapters, with stand-ins for the libraries -------------------
class _DevIndex(int):
    """CuPy's Device: a device index that is also a context manager."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def t_library_adapters():
    """Results made by the input's library and the call on that library's
    current stream, for PyTorch (DLPack, interface version 2) and CuPy
    (interface version 3): stand-in modules named torch and cupy whose arrays
    are the fake's (the real libraries run in tests/gpu/test_py_device.py)."""
    import sys
    import types
    if "torch" in sys.modules or "cupy" in sys.modules:
        print("t_library_adapters: a real torch or cupy is imported: stand-ins left out")
        return
    st, sc = FD.stream_new(), FD.stream_new()
    current = {"torch": st, "cupy": sc}

    class Tensor(F):
        is_cuda = True
    Tensor.__module__ = "torch"

    class ndarray(F):  # noqa: N801 - CuPy's name
        @property
        def device(self):
            return self._dev

        @device.setter
        def device(self, v):
            self._dev = _DevIndex(v)
    ndarray.__module__ = "cupy"

    torch = types.ModuleType("torch")
    torch.empty = lambda shape, dtype=None, device=None: Tensor(shape, dtype, device=device,
                                                                 protocol="torchlike")
    torch.cuda = types.SimpleNamespace(current_stream=lambda device: types.SimpleNamespace(
        cuda_stream=current["torch"]))
    cupy = types.ModuleType("cupy")
    cupy.empty = lambda shape, dtype=None: ndarray(shape, dtype, protocol="cai3",
                                                   stream=current["cupy"] or 1)
    cupy.cuda = types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(
        ptr=current["cupy"]))
    sys.modules["torch"], sys.modules["cupy"] = torch, cupy
    try:
        x = Tensor.from_numpy(np.ones(4, np.float32), protocol="torchlike")
        u = uses(st)
        y = dtrain.allreduce(x)
        check("torch stand-in: the result is a torch Tensor", type(y) is Tensor)
        check("torch stand-in: exported for torch's current stream", x.dlpack_streams == [st],
              "asked for %s" % x.dlpack_streams)
        check("torch stand-in: the call ran on torch's current stream", uses(st) > u)
        DC.check_dev("torch stand-in: values", FakeKind("torchlike"), y, np.full(4, S, np.float32))
        current["torch"] = 0   # the default stream: the protocol's 1
        x = Tensor.from_numpy(np.ones((2, 3), np.int64), protocol="torchlike")
        g = dtrain.allgather(x, axis=1)
        check("torch stand-in: the default stream is the legacy one (1)",
              x.dlpack_streams == [1] and type(g) is Tensor, "asked for %s" % x.dlpack_streams)
        x = ndarray.from_numpy(np.ones(4, np.float64), protocol="cai3", stream=None)
        u = uses(sc)
        y = dtrain.allreduce(x)
        check("cupy stand-in: the result is a cupy ndarray", type(y) is ndarray)
        check("cupy stand-in: stream None runs on cupy's current stream", uses(sc) > u)
        DC.check_dev("cupy stand-in: values", FakeKind("cai3"), y, np.full(4, S, np.float64))
        x = ndarray.from_numpy(np.arange(2 * S, dtype=np.int32), protocol="cai3", stream=st)
        u = uses(st)
        r = dtrain.reduce_scatter(x)
        check("cupy stand-in: the interface's stream wins", uses(st) > u and type(r) is ndarray)
    finally:
        del sys.modules["torch"], sys.modules["cupy"]
        FD.call("cudaStreamDestroy", st)
        FD.call("cudaStreamDestroy", sc)


def t_dlpack_reader_on_numpy():
    """dtrain's DLPack structures against a real producer's: numpy's own
    capsules (host memory, so read directly, not through a call)."""
    from dtrain._devarray import read_capsule
    a = np.arange(12, dtype=np.int64).reshape(3, 4)[:, ::2]
    cap = a.__dlpack__()    # held: the tensor lives in the capsule
    ro, t, shape, strides = read_capsule(cap, "a", "test")
    check("numpy's capsule: data, shape, strides in elements",
          (t.data, shape, strides) == (a.ctypes.data, (3, 2), (4, 2)) and not ro,
          "%s %s %s" % (t.data, shape, strides))
    check("numpy's capsule: dtype and device", (t.dtype.code, t.dtype.bits, t.dtype.lanes,
                                                 t.device.device_type) == (0, 64, 1, 1))
    b = np.zeros((2, 3), np.float16)
    cap = b.__dlpack__()    # held: the tensor lives in the capsule
    ro, t, shape, strides = read_capsule(cap, "b", "test")
    check("numpy's capsule: a contiguous float16 array",
          (shape, t.dtype.code, t.dtype.bits) == ((2, 3), 2, 16) and
          (strides is None or strides == (3, 1)), "%s %s" % (shape, strides))


class _Bare:
    """Only a __cuda_array_interface__ (no __array_namespace__)."""

    def __init__(self, cai, keep=None):
        self.__cuda_array_interface__ = cai
        self.keep = keep


class _BadDlpack:
    def __dlpack_device__(self):
        return (2, dtrain.cuda_device())

    def __dlpack__(self, stream=None, max_version=None):
        return "not a capsule"


def main():
    if dtrain.cuda_device() is None:
        print("test_device_fake: no fake device (DTRAIN_LIBRARY %s: %s)"
              % (dtrain.library_path(), _lib.rank_device_absent))
        raise SystemExit(1)
    H.guarded("path_and_device", t_path_and_device)
    for proto in ("cai3", "dlpack"):
        DC.run(FakeKind(proto))
    for proto in ("cai2", "torchlike", "both", "dlpack_legacy"):
        DC.run(FakeKind(proto), sections=("out_and_lists",))
    H.guarded("streams", t_streams)
    H.guarded("protocols", t_protocols)
    H.guarded("dlpack_reader_on_numpy", t_dlpack_reader_on_numpy)
    H.guarded("kinds_across_ranks", t_kinds_across_ranks)
    H.guarded("library_adapters", t_library_adapters)
    H.finish()


main()
