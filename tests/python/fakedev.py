"""A device array over the fake CUDA runtime (tests/fakegpu), for the Python
front's device tests without a GPU.

libdtrain_fakegpu.so (DTRAIN_LIBRARY) holds the library and the fake runtime
in one shared object; the tests reach the fake's cudaMalloc, cudaMemcpy,
cudaStreamCreate and fk_stream_count through the very handle dtrain loaded,
so the memory is the memory the library sees: device memory the host cannot
touch (PROT_NONE), reached only by copies.

FakeDeviceArray exposes that memory the way device libraries do, one
``protocol`` per array:

* "cai3": ``__cuda_array_interface__`` version 3 with ``stream`` (as CuPy);
* "cai2": version 2 alone (no stream);
* "dlpack": ``__dlpack__``/``__dlpack_device__`` only, versioned capsules
  (DLPack 1.0) when asked with max_version, else unversioned ones;
* "dlpack_legacy": a producer from before DLPack 1.0 (``__dlpack__(stream)``
  without max_version: unversioned capsules);
* "both": interface version 3 and DLPack (dtrain should read the interface);
* "torchlike": interface version 2 and DLPack (as PyTorch: dtrain should use
  DLPack, whose export orders the producer's stream).

Results are made through ``__array_namespace__()`` (the Array API's
``empty(shape, dtype=, device=)``), which makes arrays of the same protocol.
Each array records the streams its ``__dlpack__`` was asked for
(``dlpack_streams``). The capsules are built with ctypes (PyCapsule_New, no
destructor: the structures live in the array's ``_exports``).
"""
import ctypes

import numpy as np

import dtrain
from dtrain import _lib
from dtrain._devarray import (DLManagedTensor, DLManagedTensorVersioned, KDL_CUDA,
                              KDL_CUDA_MANAGED, DLPACK_READ_ONLY)

H2D, D2H = 1, 2
FK_STREAM_USES, FK_STREAM_SYNCS = 0, 1
_P, _Z, _I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
_PROTOS = {
    "cudaMalloc": (_I, [ctypes.POINTER(_P), _Z]),
    "cudaMallocManaged": (_I, [ctypes.POINTER(_P), _Z, ctypes.c_uint]),
    "cudaHostAlloc": (_I, [ctypes.POINTER(_P), _Z, ctypes.c_uint]),
    "cudaFree": (_I, [_P]),
    "cudaFreeHost": (_I, [_P]),
    "cudaMemcpy": (_I, [_P, _P, _Z, _I]),
    "cudaSetDevice": (_I, [_I]),
    "cudaGetDevice": (_I, [ctypes.POINTER(_I)]),
    "cudaGetDeviceCount": (_I, [ctypes.POINTER(_I)]),
    "cudaStreamCreate": (_I, [ctypes.POINTER(_P)]),
    "cudaStreamDestroy": (_I, [_P]),
    "fk_stream_count": (ctypes.c_long, [_P, _I]),
}
_rt = None
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_void_p)(("PyCapsule_New", ctypes.pythonapi))
_NAME_V, _NAME = b"dltensor_versioned", b"dltensor"
_DLPACK_PROTOCOLS = ("dlpack", "dlpack_legacy", "both", "torchlike")
_CAI_PROTOCOLS = ("cai3", "cai2", "both", "torchlike")


class CudaError(RuntimeError):
    pass


def rt():
    """The fake runtime's functions (from the library dtrain loaded)."""
    global _rt
    if _rt is None:
        dtrain.init()
        fns = {}
        for name, (res, args) in _PROTOS.items():
            f = getattr(_lib.lib, name)
            f.restype, f.argtypes = res, args
            fns[name] = f
        _rt = fns
    return _rt


def call(name, *args):
    e = rt()[name](*args)
    if e:
        raise CudaError("%s: CUDA error %d" % (name, e))


def device_count():
    n = ctypes.c_int()
    return n.value if rt()["cudaGetDeviceCount"](ctypes.byref(n)) == 0 else 0


def stream_new():
    s = ctypes.c_void_p()
    call("cudaStreamCreate", ctypes.byref(s))
    return s.value


def stream_count(handle, what=FK_STREAM_USES):
    """uses (or syncs) of a stream; 1 and None: the legacy default stream."""
    return rt()["fk_stream_count"](None if handle in (None, 1) else handle, what)


class _Bf16:
    """The dtype of a DLPack bfloat16 array (stored as uint16 bit patterns)."""
    name = "bfloat16"
    itemsize = 2
    storage = np.dtype(np.uint16)

    def __repr__(self):
        return "bfloat16"


BF16 = _Bf16()


class _Namespace:
    """The Array API's empty() for FakeDeviceArray, keeping the protocol."""

    def __init__(self, protocol, stream):
        self.protocol, self.stream = protocol, stream

    def empty(self, shape, dtype=None, device=None):
        return FakeDeviceArray(shape, dtype, device=device, protocol=self.protocol,
                               stream=self.stream)


class FakeDeviceArray:
    """Fake device memory of `shape` and `dtype` (a numpy dtype, or BF16) on
    `device` (default: the rank's), exposed by `protocol`. Options: stream
    (the interface's version-3 stream), strides_elems (a strided view of a
    larger allocation), readonly, cai_version (what the interface says),
    dl_version (the versioned capsule's version), memory ("device",
    "managed", "pinned", "cpu": which kind and DLPack device it claims)."""

    def __init__(self, shape, dtype, device=None, protocol="cai3", stream=1, strides_elems=None,
                 readonly=False, cai_version=None, dl_version=(1, 0), memory="device"):
        self.shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list))
                                            else (shape,)))
        self.dtype = dtype if dtype is BF16 else np.dtype(dtype)
        self.device = dtrain.cuda_device() if device is None else int(device)
        self.protocol, self.stream, self.readonly = protocol, stream, readonly
        self.cai_version = cai_version or (2 if protocol in ("cai2", "torchlike") else 3)
        self.dl_version, self.memory = dl_version, memory
        self.strides_elems = strides_elems
        self.refuse = None   # a message: both protocols refuse (PyTorch, for requires_grad)
        self.dlpack_streams = []
        self._exports = []
        n = int(np.prod(self.shape, dtype=np.int64))
        span = n
        if strides_elems is not None and n:
            span = 1 + sum((d - 1) * s for d, s in zip(self.shape, strides_elems))
        self.nbytes_alloc = max(span, 1) * self.dtype.itemsize
        p = ctypes.c_void_p()
        if memory == "pinned" or memory == "cpu":
            call("cudaHostAlloc", ctypes.byref(p), self.nbytes_alloc, 0)
        elif memory == "managed":
            call("cudaMallocManaged", ctypes.byref(p), self.nbytes_alloc, 1)
        else:
            cur = ctypes.c_int()
            call("cudaGetDevice", ctypes.byref(cur))
            call("cudaSetDevice", self.device)
            try:
                call("cudaMalloc", ctypes.byref(p), self.nbytes_alloc)
            finally:
                call("cudaSetDevice", cur.value)
        self.ptr = p.value
        self._free = "cudaFreeHost" if memory in ("pinned", "cpu") else "cudaFree"

    def __del__(self):
        try:
            if self.ptr and _rt is not None:
                _rt[self._free](self.ptr)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
        self.ptr = None

    # ---- host copies ------------------------------------------------------------
    @classmethod
    def from_numpy(cls, a, **kw):
        """A device copy of numpy array a (BF16: pass uint16 bits and dtype=BF16)."""
        dtype = kw.pop("dtype", a.dtype)
        d = cls(a.shape, dtype, **kw)
        a = np.ascontiguousarray(a)
        if d.strides_elems is None:
            if a.nbytes:
                call("cudaMemcpy", d.ptr, a.ctypes.data, a.nbytes, H2D)
        else:
            buf = np.zeros(d.nbytes_alloc // d.dtype.itemsize, _storage(d.dtype))
            view = np.lib.stride_tricks.as_strided(
                buf, d.shape, [s * d.dtype.itemsize for s in d.strides_elems])
            view[...] = a
            call("cudaMemcpy", d.ptr, buf.ctypes.data, buf.nbytes, H2D)
        return d

    def to_numpy(self):
        """The contents, copied to the host (contiguous arrays only)."""
        out = np.empty(self.shape, _storage(self.dtype))
        if out.nbytes:
            call("cudaMemcpy", out.ctypes.data, self.ptr, out.nbytes, D2H)
        return out

    # ---- the protocols ----------------------------------------------------------------
    def __array_namespace__(self, api_version=None):
        return _Namespace(self.protocol, self.stream)

    @property
    def __cuda_array_interface__(self):
        if self.protocol not in _CAI_PROTOCOLS:
            raise AttributeError("__cuda_array_interface__")
        if self.refuse:
            raise RuntimeError(self.refuse)
        st = None if self.strides_elems is None else tuple(
            s * self.dtype.itemsize for s in self.strides_elems)
        d = {"shape": self.shape, "typestr": _storage(self.dtype).str,
             "data": (self.ptr, self.readonly), "strides": st, "version": self.cai_version}
        if isinstance(self.cai_version, int) and self.cai_version >= 3:
            d["stream"] = self.stream
        return d

    # DLPack's methods are properties, so that an array of another protocol
    # has no such attribute at all (hasattr is False)
    @property
    def __dlpack_device__(self):
        if self.protocol not in _DLPACK_PROTOCOLS:
            raise AttributeError("__dlpack_device__")
        return self._dlpack_device

    @property
    def __dlpack__(self):
        if self.protocol not in _DLPACK_PROTOCOLS:
            raise AttributeError("__dlpack__")
        return self._dlpack

    def _dlpack_device(self):
        kinds = {"device": (KDL_CUDA, self.device), "managed": (KDL_CUDA_MANAGED, 0),
                 "pinned": (3, 0), "cpu": (1, 0)}
        return kinds[self.memory]

    def _dlpack(self, stream=None, **kw):
        if self.refuse:
            raise RuntimeError(self.refuse)
        if self.protocol == "dlpack_legacy" and kw:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        self.dlpack_streams.append(stream)
        max_version = kw.get("max_version")
        nd = len(self.shape)
        shape = (ctypes.c_int64 * max(nd, 1))(*self.shape)
        strides = None
        if self.strides_elems is not None:
            strides = (ctypes.c_int64 * max(nd, 1))(*self.strides_elems)
        versioned = max_version is not None and max_version[0] >= 1
        m = DLManagedTensorVersioned() if versioned else DLManagedTensor()
        if versioned:
            m.version.major, m.version.minor = self.dl_version
            m.flags = DLPACK_READ_ONLY if self.readonly else 0
        t = m.dl_tensor
        t.data = self.ptr
        t.device.device_type, t.device.device_id = self._dlpack_device()
        t.ndim = nd
        if self.dtype is BF16:
            t.dtype.code, t.dtype.bits = 4, 16
        else:
            t.dtype.code = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}[self.dtype.kind]
            t.dtype.bits = self.dtype.itemsize * 8
        t.dtype.lanes = 1
        t.shape = shape
        if strides is not None:
            t.strides = strides
        t.byte_offset = 0
        self._exports.append((m, shape, strides))
        return _capsule_new(ctypes.addressof(m), _NAME_V if versioned else _NAME, None)

    def __repr__(self):
        return "FakeDeviceArray(%s, %s, device %d, %s)" % (self.shape, self.dtype, self.device,
                                                           self.protocol)


def _storage(dtype):
    return BF16.storage if dtype is BF16 else dtype
