"""How results of device calls are made: by the input's own library.

A collective on device arrays returns an array of the input's kind, allocated
the way that library allocates (its memory pool / caching allocator, on its
current stream), on the input's device, with the input's dtype:

* PyTorch tensors: ``torch.empty(shape, dtype=x.dtype, device=x.device)``;
* CuPy arrays: ``cupy.empty(shape, dtype=x.dtype)`` under ``x.device``;
* any other object with ``__array_namespace__()`` (the Array API standard):
  ``xp.empty(shape, dtype=x.dtype, device=x.device)``.

An object with none of these (a bare ``__cuda_array_interface__``, say) can
still be used where the call takes ``out=`` (``out=x``: in place); a call that
must make a result raises TypeError saying so.

Each adapter also names the library's current stream (a protocol integer,
1 for the legacy default stream; None: unknown), which a call runs on when
no ``__cuda_array_interface__`` names a stream (dtrain._devarray).

Libraries are taken from ``sys.modules``: an array of a library means the
library is imported, and dtrain imports none itself.
"""
import sys


def _stream_int(ptr):
    """A stream handle as a protocol integer (0, the NULL stream: 1, legacy)."""
    return int(ptr) or 1


class _Torch:
    name = "PyTorch"

    @staticmethod
    def empty(like, shape):
        torch = sys.modules["torch"]
        return torch.empty(shape, dtype=like.dtype, device=like.device)

    @staticmethod
    def current_stream(like):
        torch = sys.modules["torch"]
        if getattr(like, "is_cuda", False):
            return _stream_int(torch.cuda.current_stream(like.device).cuda_stream)
        return None


class _Cupy:
    name = "CuPy"

    @staticmethod
    def empty(like, shape):
        cupy = sys.modules["cupy"]
        with like.device:
            return cupy.empty(shape, dtype=like.dtype)

    @staticmethod
    def current_stream(like):
        cupy = sys.modules["cupy"]
        with like.device:
            return _stream_int(cupy.cuda.get_current_stream().ptr)


class _ArrayApi:
    name = "Array API"

    @staticmethod
    def empty(like, shape):
        xp = like.__array_namespace__()
        return xp.empty(shape, dtype=like.dtype, device=like.device)

    @staticmethod
    def current_stream(like):
        return None


_BY_MODULE = {"torch": _Torch, "cupy": _Cupy}


def adapter(obj):
    """The adapter that makes arrays like obj (torch.Tensor and its subclasses,
    cupy.ndarray, Array API arrays), or None."""
    ad = _BY_MODULE.get(type(obj).__module__.partition(".")[0])
    if ad is not None:
        return ad
    if hasattr(obj, "__array_namespace__"):
        return _ArrayApi
    return None
