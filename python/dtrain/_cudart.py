"""The few CUDA runtime calls the Python front makes itself, for device arrays.

They are resolved through the libdtrain that _lib loaded (its libcudart, or
the fake runtime inside libdtrain_fakegpu.so in the tests), so they act on the
runtime the library uses. Used for:

* ``pointer_device``: which device a ``__cuda_array_interface__`` pointer
  lies on (that protocol does not say; DLPack does);
* ``stream_sync``: waiting for a producer's stream that is not the call's
  (the ``__cuda_array_interface__`` protocol lets the consumer synchronize);
* ``copy2d``: the rearrangements of allgather, gather and all_to_all along
  another axis than the first (strided device-to-device copies on the call's
  stream, the same for every array library).

A failing call raises DtrainError (DT_ERR_BACKEND) naming the call and
CUDA's message.
"""
import ctypes

from . import _lib

# enum cudaMemoryType
MEM_UNREGISTERED, MEM_HOST, MEM_DEVICE, MEM_MANAGED = 0, 1, 2, 3
_MEMCPY_D2D = 3  # cudaMemcpyDeviceToDevice


class _PointerAttributes(ctypes.Structure):
    """struct cudaPointerAttributes (CUDA 11 and later; reserved tail of CUDA 12+)."""
    _fields_ = [("type", ctypes.c_int), ("device", ctypes.c_int),
                ("devicePointer", ctypes.c_void_p), ("hostPointer", ctypes.c_void_p),
                ("reserved", ctypes.c_long * 8)]


_P, _Z, _I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
_PROTOTYPES = {
    "cudaGetErrorString": (ctypes.c_char_p, [_I]),
    "cudaGetLastError": (_I, []),
    "cudaPointerGetAttributes": (_I, [ctypes.POINTER(_PointerAttributes), _P]),
    "cudaStreamSynchronize": (_I, [_P]),
    "cudaMemcpy2DAsync": (_I, [_P, _Z, _P, _Z, _Z, _Z, _I, _P]),
}

_fns = None


def _runtime():
    """name -> ctypes function, resolved once from the loaded library."""
    global _fns
    if _fns is None:
        lib = _lib.lib
        fns = {}
        for name, (res, args) in _PROTOTYPES.items():
            fn = getattr(lib, name, None)
            if fn is None:
                raise _lib.DtrainError(-6, "%s not found in %s: this libdtrain was built without "
                                       "CUDA" % (name, _lib.library_path()), function="cuda")
            fn.restype, fn.argtypes = res, args
            fns[name] = fn
        _fns = fns
    return _fns


def _check(err, what, fn):
    if err:
        rt = _runtime()
        rt["cudaGetLastError"]()  # clear the thread's sticky copy of a non-sticky error
        msg = rt["cudaGetErrorString"](err)
        raise _lib.DtrainError(-4, "%s: %s (CUDA error %d)"
                               % (what, msg.decode("utf-8", "replace") if msg else "?", err),
                               function=fn)


def pointer_device(ptr, fn):
    """(memory type, device) of a pointer: MEM_DEVICE with its device,
    MEM_MANAGED (device -1: any), MEM_HOST (pinned) or MEM_UNREGISTERED."""
    attr = _PointerAttributes()
    err = _runtime()["cudaPointerGetAttributes"](ctypes.byref(attr), ptr)
    if err:
        _check(err, "cudaPointerGetAttributes(%#x)" % ptr, fn)
    if attr.type == MEM_MANAGED:
        return MEM_MANAGED, -1
    return attr.type, attr.device


def stream_sync(handle, fn):
    """cudaStreamSynchronize(handle) (None: the legacy default stream)."""
    _check(_runtime()["cudaStreamSynchronize"](handle), "cudaStreamSynchronize", fn)


def copy2d(dst, dpitch, src, spitch, width, height, stream, fn):
    """height rows of width bytes, device to device, pitches in bytes, on stream."""
    if width and height:
        _check(_runtime()["cudaMemcpy2DAsync"](dst, dpitch, src, spitch, width, height,
                                                 _MEMCPY_D2D, stream),
               "cudaMemcpy2DAsync", fn)
