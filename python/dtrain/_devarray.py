"""Device arrays: CUDA memory of other libraries (CuPy, PyTorch, Numba, ...)
read through their protocols, and the stream a call runs on.

Protocols
---------
* ``__cuda_array_interface__`` (Numba's CUDA Array Interface), versions 2
  and 3: ``data`` (pointer, read-only flag), ``shape``, ``typestr``,
  ``strides`` (bytes; None: C-contiguous), no ``mask``; version 3's
  ``stream`` is the stream on which the producer's data is ready: an integer
  handle, 1 the legacy default stream, 2 the per-thread default stream, None
  no ordering needed (0 is disallowed, as the protocol says). Which device
  the memory is on comes from cudaPointerGetAttributes.
* DLPack: ``__dlpack_device__()`` (kDLCUDA with its device id, or
  kDLCUDAManaged) and ``__dlpack__(stream=S)`` for the call's stream S, so
  that the producer orders its pending work before S (the Array API
  standard's rule); versioned capsules ("dltensor_versioned", DLPack 1.x:
  ``max_version=(1, 0)`` is asked for, their read-only flag is honoured) and
  unversioned ones ("dltensor"). Strides are in elements (NULL: C-contiguous).
  dtrain reads the capsule during the call and does not consume it: the
  producer's deleter runs when the capsule is released, as the protocol says
  for an unconsumed capsule.

An object offering both uses ``__cuda_array_interface__`` when its version is
3 (its stream is explicit), else DLPack (PyTorch's interface is version 2,
without a stream; its DLPack export orders torch's current stream); a
version-2 interface alone is taken as ready (version 2 has no stream). Any
other version, with no DLPack to fall back on, is a TypeError.

The call's stream (DeviceCall.stream, a protocol integer): the ``stream`` of
the first version-3 interface that names one; else the current stream of the
first array's library (PyTorch's ``torch.cuda.current_stream``, CuPy's
``get_current_stream``); else the legacy default stream (1). DLPack arrays
are exported for it; a version-3 interface naming another stream has that
stream synchronized before the call (the protocol allows waiting instead of
ordering).

Rules checked here, each a TypeError or ValueError naming the argument: a
device array and a host (numpy) array in one call (TypeError); memory that is
not CUDA device or managed memory (TypeError); a device other than the
rank's, dtrain.cuda_device() (ValueError); a non-contiguous array
(ValueError: dtrain does not copy device arrays); a read-only array to be
written (ValueError); dtypes as for numpy arrays (TypeError; DLPack's
bfloat16 is dtrain's bf16, lanes other than 1 are not supported); a process
without a CUDA device: DtrainError (DT_ERR_UNSUPPORTED, with the library's
reason).
"""
import ctypes

import numpy as np

from . import _lib, _cudart, _arraylib
from ._dtypes import _NATIVE, DT_BF16, is_bf16_name, override_code, unsupported

LEGACY, PER_THREAD = 1, 2   # the protocols' default-stream values

# ---- DLPack (dlpack.h) --------------------------------------------------------------
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
_DL_DEVICE = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL", 7: "kDLVulkan",
              8: "kDLMetal", 9: "kDLVPI", 10: "kDLROCM", 11: "kDLROCMHost", 12: "kDLExtDev",
              13: "kDLCUDAManaged", 14: "kDLOneAPI"}
DLPACK_READ_ONLY = 1   # DLPACK_FLAG_BITMASK_READ_ONLY
DLPACK_MAJOR = 1       # the versioned capsules dtrain reads
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT = 0, 1, 2, 4
_DL_KINDS = {_DL_INT: "i", _DL_UINT: "u", _DL_FLOAT: "f", 5: "c", 6: "b"}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64),
                ("dl_tensor", DLTensor)]


# own prototypes (ctypes.pythonapi's are shared with every other user)
_capsule_ptr = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_capsule_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))


# ---- host or device ----------------------------------------------------------------
def _is_host(o):
    return isinstance(o, (np.ndarray, np.generic))


def _cai(o):
    """o's __cuda_array_interface__, or None when it has none or refuses to
    give it (PyTorch, for a tensor that requires grad: its DLPack export then
    says why)."""
    try:
        return getattr(o, "__cuda_array_interface__", None)
    except Exception:  # noqa: BLE001 - the producer's refusal
        return None


def is_device(o):
    """True for an object offering a device protocol (not numpy)."""
    if o is None or _is_host(o):
        return False
    return _cai(o) is not None or hasattr(o, "__dlpack_device__")


def _flat(named):
    for name, v in named:
        if isinstance(v, (list, tuple)):
            for i, e in enumerate(v):
                yield "%s[%d]" % (name, i), e
        elif v is not None:
            yield name, v


def _what(o):
    t = type(o)
    return "%s.%s" % (t.__module__, t.__qualname__) if t.__module__ != "builtins" else t.__name__


def device_call(fn, *named):
    """True if the arrays of a call ((name, value) pairs; lists are looked
    into) are device arrays, False for host (numpy) arrays or none; a
    TypeError naming one of each when both are there."""
    host = dev = None
    for n, o in _flat(named):
        if _is_host(o):
            host = host or n
        elif dev is None and is_device(o):
            dev = (n, o)
    if dev is None:
        return False
    if host is not None:
        raise TypeError("dtrain.%s: host and device arrays in one call: %s is a numpy array (host "
                        "memory), %s is a %s (CUDA device memory); pass all host (numpy) arrays "
                        "or all device arrays" % (fn, host, dev[0], _what(dev[1])))
    return True


# ---- one array ----------------------------------------------------------------------
class DevArray:
    """A device array as its protocol describes it: ``obj`` (the object),
    ``name`` (the argument), ``ptr``, ``shape``, ``size``, ``itemsize``,
    ``code`` (dt_dtype), ``device`` (-1: managed memory), ``stream`` (the
    interface's stream, or None), ``keep`` (the DLPack capsule)."""
    __slots__ = ("obj", "name", "ptr", "shape", "size", "itemsize", "code", "dtname", "device",
                 "readonly", "stream", "keep")

    def __init__(self, obj, name, ptr, shape, itemsize, code, dtname, device, readonly,
                 stream=None, keep=None):
        self.obj, self.name, self.ptr, self.shape = obj, name, ptr, shape
        self.size = int(np.prod(shape, dtype=np.int64)) if shape else 1
        self.itemsize, self.code, self.dtname, self.device = itemsize, code, dtname, device
        self.readonly, self.stream, self.keep = readonly, stream, keep


def _contiguous(shape, strides, unit):
    """strides (None: C-contiguous) describe a C-contiguous array of shape,
    in units of `unit` (bytes or 1 element)."""
    if strides is None:
        return True
    if len(strides) != len(shape):
        return False
    if 0 in shape:
        return True
    want = unit
    for d, s in zip(reversed(shape), reversed(strides)):
        if d != 1 and s != want:
            return False
        want *= d
    return True


def _code(dt, dtype, name, fn):
    """dt code for an array of numpy dtype dt (dtype=: the caller's override)."""
    if dt.byteorder == (">" if np.little_endian else "<"):
        raise TypeError("dtrain.%s: %s has the byte-swapped dtype %s; dtrain does not swap device "
                        "arrays" % (fn, name, dt.str))
    code = _NATIVE.get(dt)
    if dtype is not None:
        c2 = override_code(dt, dtype, fn)
        if c2 is not None:
            code = c2
    if code is None:
        raise unsupported(fn, dt)
    return code


def stream_value(v, name, fn):
    """A protocol stream: None or a positive int (1 legacy, 2 per-thread)."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("dtrain.%s: %s's __cuda_array_interface__ has stream %r: the protocol "
                        "wants None or an integer" % (fn, name, v))
    if v == 0:
        raise ValueError("dtrain.%s: %s's __cuda_array_interface__ has stream 0, which the "
                         "protocol disallows (ambiguous: 1 is the legacy default stream, 2 the "
                         "per-thread one)" % (fn, name))
    if v < 0:
        raise ValueError("dtrain.%s: %s's __cuda_array_interface__ has stream %d: not a stream"
                         % (fn, name, v))
    return v


def protocol_of(o, name, fn):
    """("cai", the interface dict) or ("dlpack", None) for o; TypeError if o
    offers neither in a version dtrain reads."""
    cai = _cai(o)
    has_dl = hasattr(o, "__dlpack__") and hasattr(o, "__dlpack_device__")
    if cai is not None:
        if not isinstance(cai, dict):
            raise TypeError("dtrain.%s: %s's __cuda_array_interface__ is a %s, not a dict"
                            % (fn, name, type(cai).__name__))
        v = cai.get("version")
        if v == 3 or (v == 2 and not has_dl):
            return "cai", cai
        if not has_dl:
            raise TypeError("dtrain.%s: %s's __cuda_array_interface__ has version %r; dtrain reads "
                            "versions 2 and 3" % (fn, name, v))
    if has_dl:
        return "dlpack", None
    if _is_host(o):
        raise TypeError("dtrain.%s: host and device arrays in one call: %s is a numpy array (host "
                        "memory); pass all device arrays" % (fn, name))
    raise TypeError("dtrain.%s: %s must be a device array (__cuda_array_interface__ or "
                    "__dlpack__) like the call's other arrays, got %s" % (fn, name, _what(o)))


def _from_cai(o, cai, name, fn, dtype):
    try:
        shape = tuple(int(d) for d in cai["shape"])
        ptr, ro = cai["data"]
        ptr, ro = int(ptr or 0), bool(ro)
        dt = np.dtype(cai["typestr"])
    except (KeyError, TypeError, ValueError) as e:
        raise TypeError("dtrain.%s: %s's __cuda_array_interface__ is malformed (%s: %s)"
                        % (fn, name, type(e).__name__, e)) from None
    if cai.get("mask") is not None:
        raise TypeError("dtrain.%s: %s has a mask (__cuda_array_interface__['mask']); dtrain does "
                        "not take masked arrays" % (fn, name))
    code = _code(dt, dtype, name, fn)
    strides = cai.get("strides")
    if not _contiguous(shape, None if strides is None else tuple(strides), dt.itemsize):
        raise ValueError("dtrain.%s: %s is not C-contiguous (shape %s, strides %s bytes); dtrain "
                         "does not copy device arrays: pass a contiguous copy"
                         % (fn, name, shape, tuple(strides)))
    stream = stream_value(cai.get("stream"), name, fn) if cai.get("version") == 3 else None
    device = -1
    if ptr and 0 not in shape:
        kind, device = _cudart.pointer_device(ptr, fn)
        if kind not in (_cudart.MEM_DEVICE, _cudart.MEM_MANAGED):
            raise TypeError("dtrain.%s: %s's __cuda_array_interface__ points at %s, not CUDA "
                            "device memory" % (fn, name, "pinned host memory" if kind ==
                                               _cudart.MEM_HOST else "host memory"))
    return DevArray(o, name, ptr, shape, dt.itemsize, code, dt.name, device, ro, stream)


def _dl_dtype(t, name, fn):
    """(numpy dtype or None, dt code or None, its name) of a DLDataType."""
    code, bits, lanes = t.code, t.bits, t.lanes
    if lanes != 1:
        raise TypeError("dtrain.%s: %s has a DLPack dtype of %d lanes; dtrain takes 1"
                        % (fn, name, lanes))
    if code == _DL_BFLOAT and bits == 16:
        return None, DT_BF16, "bfloat16"
    kind = _DL_KINDS.get(code)
    try:
        dt = np.dtype("%s%d" % (kind, bits // 8)) if kind and bits % 8 == 0 else None
    except TypeError:
        dt = None
    if dt is None:
        raise TypeError("dtrain.%s: %s has the DLPack dtype (code %d, %d bits), which dtrain does "
                        "not support" % (fn, name, code, bits))
    return dt, _NATIVE.get(dt), dt.name


def read_capsule(cap, name, fn):
    """(read-only flag, DLTensor, shape, strides in elements or None) of a
    DLPack capsule, left unconsumed (the capsule must outlive the use)."""
    if _capsule_valid(cap, b"dltensor_versioned"):
        m = DLManagedTensorVersioned.from_address(_capsule_ptr(cap, b"dltensor_versioned"))
        if m.version.major != DLPACK_MAJOR:
            raise TypeError("dtrain.%s: %s exports DLPack %d.%d; dtrain reads DLPack %d.x and "
                            "unversioned capsules" % (fn, name, m.version.major, m.version.minor,
                                                       DLPACK_MAJOR))
        readonly, t = bool(m.flags & DLPACK_READ_ONLY), m.dl_tensor
    elif _capsule_valid(cap, b"dltensor"):
        readonly, t = False, DLManagedTensor.from_address(_capsule_ptr(cap, b"dltensor")).dl_tensor
    else:
        raise TypeError("dtrain.%s: %s.__dlpack__() returned %s, not a DLPack capsule ('dltensor' "
                        "or 'dltensor_versioned')" % (fn, name, _what(cap)))
    if t.ndim < 0 or (t.ndim and not t.shape):
        raise TypeError("dtrain.%s: %s's DLPack tensor is malformed (ndim %d)" % (fn, name, t.ndim))
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    strides = tuple(int(t.strides[i]) for i in range(t.ndim)) if t.strides else None
    return readonly, t, shape, strides


def _from_dlpack(o, name, fn, dtype, stream):
    try:
        dev_type, dev_id = (int(v) for v in o.__dlpack_device__())
    except Exception as e:  # noqa: BLE001 - the producer's own failure
        raise TypeError("dtrain.%s: %s.__dlpack_device__() failed: %s: %s"
                        % (fn, name, type(e).__name__, e)) from None
    if dev_type == KDL_CPU:
        raise TypeError("dtrain.%s: %s (a %s) is in host memory (DLPack device kDLCPU): dtrain "
                        "takes numpy arrays for host memory (numpy.from_dlpack(x)) and CUDA device "
                        "arrays" % (fn, name, _what(o)))
    if dev_type not in (KDL_CUDA, KDL_CUDA_MANAGED):
        raise TypeError("dtrain.%s: %s is on DLPack device %s: dtrain takes CUDA device memory "
                        "(kDLCUDA, kDLCUDAManaged)"
                        % (fn, name, _DL_DEVICE.get(dev_type, "type %d" % dev_type)))
    try:
        try:
            cap = o.__dlpack__(stream=stream, max_version=(DLPACK_MAJOR, 0))
        except TypeError:  # a producer from before DLPack 1.0's max_version
            cap = o.__dlpack__(stream=stream)
    except Exception as e:  # noqa: BLE001 - the producer's own failure
        raise TypeError("dtrain.%s: %s.__dlpack__(stream=%r) failed: %s: %s"
                        % (fn, name, stream, type(e).__name__, e)) from None
    readonly, t, shape, strides = read_capsule(cap, name, fn)
    dt, code, dtname = _dl_dtype(t.dtype, name, fn)
    if dtype is not None:
        if dt is None:  # DLPack bfloat16
            if not is_bf16_name(dtype):
                raise ValueError("dtrain.%s: dtype=%s does not match %s's dtype bfloat16"
                                 % (fn, dtype, name))
        else:
            code = _code(dt, dtype, name, fn)
    elif code is None:
        raise unsupported(fn, dt)
    if not _contiguous(shape, strides, 1):
        raise ValueError("dtrain.%s: %s is not C-contiguous (shape %s, strides %s elements); "
                         "dtrain does not copy device arrays: pass a contiguous copy (e.g. "
                         ".contiguous())" % (fn, name, shape, strides))
    device = t.device.device_id if t.device.device_type == KDL_CUDA else -1
    ptr = (t.data or 0) + t.byte_offset
    return DevArray(o, name, ptr, shape, t.dtype.bits // 8, code, dtname, device, readonly,
                    keep=cap)


# ---- one call -----------------------------------------------------------------------
class DeviceCall:
    """The device arrays of one collective call and the stream it runs on.

    ``named``: the caller's arrays as (name, value) pairs (lists are looked
    into, None skipped); ``writes``: the names the call writes (out=), checked
    writable. ``call[name]`` is the DevArray of an argument, ``new()`` makes a
    result with the library of an input, ``ready()`` waits for foreign
    streams, ``check(rc)`` raises the library's error, ``finish(res)`` waits
    for copies enqueued after the collective and returns res. ``opts`` is the
    dt_coll_opts of the call (DT_MEM_DEVICE, the stream)."""

    def __init__(self, fn, named, dtype=None, writes=()):
        self.fn, self.dtype = fn, dtype
        items = list(_flat(named))
        if _lib.rank_device is None:
            raise _lib.DtrainError(-6, "%s is a CUDA device array (a %s), but this process has no "
                                   "CUDA device: %s" % (items[0][0], _what(items[0][1]),
                                                        _lib.rank_device_absent), function=fn)
        protos = [(n, o) + protocol_of(o, n, fn) for n, o in items]
        stream = None
        for n, o, proto, cai in protos:
            if proto == "cai" and cai.get("version") == 3:
                stream = stream_value(cai.get("stream"), n, fn)
                if stream is not None:
                    break
        if stream is None and protos:
            ad = _arraylib.adapter(protos[0][1])
            stream = ad.current_stream(protos[0][1]) if ad else None
        self.stream = stream or LEGACY
        # to the library and the runtime: NULL is the legacy default stream
        self.handle = None if self.stream == LEGACY else self.stream
        self.opts = _lib._CollOpts(_lib.DT_MEM_DEVICE, self.handle, 0)
        self.arrays = {}
        self._copied = False
        for n, o, proto, cai in protos:
            self.arrays[n] = self._import(n, o, proto, cai, n in writes)

    def __getitem__(self, name):
        return self.arrays.get(name)

    def _import(self, name, o, proto, cai, write):
        fn = self.fn
        a = (_from_cai(o, cai, name, fn, self.dtype) if proto == "cai"
             else _from_dlpack(o, name, fn, self.dtype, self.stream))
        if a.device >= 0 and a.device != _lib.rank_device:
            raise ValueError("dtrain.%s: %s is on CUDA device %d, but this rank's device is %d "
                             "(dtrain.cuda_device(), chosen when the runtime started: see "
                             "dtrain.init(device=...))" % (fn, name, a.device, _lib.rank_device))
        if write and a.readonly:
            raise ValueError("dtrain.%s: %s is read-only" % (fn, name))
        return a

    def new(self, like, shape, name="result"):
        """A new array of like's library, dtype and device, of `shape`."""
        ad = _arraylib.adapter(like.obj)
        if ad is None:
            raise TypeError("dtrain.%s: cannot make a result like %s (a %s): dtrain makes results "
                            "with CuPy, PyTorch or the array's own __array_namespace__() (the "
                            "Array API's empty()); pass out= (out=x: in place) where the call "
                            "takes it" % (self.fn, like.name, _what(like.obj)))
        obj = ad.empty(like.obj, tuple(shape))
        proto, cai = protocol_of(obj, name, self.fn)
        a = self._import(name, obj, proto, cai, True)
        self.arrays[name] = a
        return a

    def expect(self, a, shape, like):
        """a (an out= array) has the result's shape and like's dtype."""
        if a.shape != tuple(shape) or a.code != like.code:
            raise ValueError("dtrain.%s: %s has shape %s and dtype %s; expected shape %s and dtype "
                             "%s" % (self.fn, a.name, a.shape, a.dtname, tuple(shape), like.dtname))
        return a

    def ready(self):
        """Synchronize the streams of version-3 interfaces other than the call's."""
        done = set()
        for a in self.arrays.values():
            s = a.stream
            if s is not None and s != self.stream and s not in done:
                done.add(s)
                _cudart.stream_sync(None if s == LEGACY else s, self.fn)

    def check(self, rc):
        if rc:
            raise _lib.error(rc, self.fn)

    def copy_blocks(self, buf, S, shape, axis, dst):
        """dst = the concatenation along `axis` of the S blocks of buf (each of
        `shape`, back to back), by strided copies on the call's stream."""
        it = buf.itemsize
        a_rows = int(np.prod(shape[:axis], dtype=np.int64))
        b = int(np.prod(shape[axis:], dtype=np.int64)) * it
        for j in range(S):
            _cudart.copy2d(dst.ptr + j * b, S * b, buf.ptr + j * a_rows * b, b, b, a_rows,
                           self.handle, self.fn)
        self._copied = True

    def split_blocks(self, src, S, shape, axis, dst):
        """dst (S blocks back to back) = src cut into S along `axis` (the
        inverse of copy_blocks), on the call's stream."""
        it = src.itemsize
        a_rows = int(np.prod(shape[:axis], dtype=np.int64))
        b = int(np.prod(shape[axis:], dtype=np.int64)) * it // S
        for j in range(S):
            _cudart.copy2d(dst.ptr + j * a_rows * b, b, src.ptr + j * b, S * b, b, a_rows,
                           self.handle, self.fn)

    def finish(self, result):
        """Wait for copies enqueued after the collective (the collective itself
        completed before it returned); release the capsules; return result."""
        if self._copied:
            _cudart.stream_sync(self.handle, self.fn)
        self.arrays = {}
        return result
