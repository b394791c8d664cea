"""numpy dtypes <-> dt_dtype codes, reduction names <-> dt_op codes, and input
preparation (contiguity, alignment, byte order).

Supported numpy dtypes: float16, float32, float64, int8, uint8, int32, int64.
bfloat16: numpy has no bfloat16. If the ``ml_dtypes`` package is importable its
``bfloat16`` dtype is accepted as is. Otherwise pass the raw bit patterns as a
``uint16`` array together with ``dtype="bf16"`` (the C library reduces them as
bfloat16, accumulating in float32); results come back as ``uint16`` bits.
"""
import numpy as np

# include/dtrain/dtype.h
DT_F32, DT_F64, DT_F16, DT_BF16, DT_I8, DT_U8, DT_I32, DT_I64 = range(8)
# dt_op
OPS = {"sum": 0, "prod": 1, "min": 2, "max": 3, "avg": 4}

_NATIVE = {
    np.dtype(np.float32): DT_F32, np.dtype(np.float64): DT_F64, np.dtype(np.float16): DT_F16,
    np.dtype(np.int8): DT_I8, np.dtype(np.uint8): DT_U8, np.dtype(np.int32): DT_I32,
    np.dtype(np.int64): DT_I64,
}
try:  # optional: a real bfloat16 dtype
    import ml_dtypes as _ml_dtypes  # noqa: F401
    BFLOAT16 = np.dtype(_ml_dtypes.bfloat16)
    _NATIVE[BFLOAT16] = DT_BF16
except Exception:  # pragma: no cover - depends on the environment
    BFLOAT16 = None

CODES = dict(_NATIVE)   # dtype -> code (read only from outside)
_BF16_NAMES = ("bf16", "bfloat16")
SUPPORTED = "float16, float32, float64, int8, uint8, int32, int64"
_BF16_HINT = ("bfloat16: pass uint16 bit patterns with dtype='bf16'" if BFLOAT16 is None
              else "bfloat16 (ml_dtypes)")


def unsupported(fn, dt):
    return TypeError("dtrain.%s: unsupported dtype %s; supported: %s, %s"
                     % (fn, np.dtype(dt).name if not isinstance(dt, str) else dt, SUPPORTED,
                        _BF16_HINT))


def op_code(computation, fn):
    try:
        return OPS[computation]
    except (KeyError, TypeError):
        raise ValueError("dtrain.%s: computation must be one of 'sum', 'prod', 'min', 'max', "
                         "'avg'; got %r" % (fn, computation)) from None


def is_bf16_name(dtype):
    return isinstance(dtype, str) and dtype.lower() in _BF16_NAMES


def code_of_dtype(dtype, fn):
    """(numpy dtype to allocate, dt code) for a dtype description (recv, scatter)."""
    if is_bf16_name(dtype):
        return np.dtype(np.uint16), DT_BF16
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError("dtrain.%s: dtype %r is not a numpy dtype" % (fn, dtype)) from None
    code = _NATIVE.get(dt)
    if code is None:
        code = _NATIVE.get(dt.newbyteorder("="))
        if code is None:
            raise unsupported(fn, dt)
        dt = dt.newbyteorder("=")
    return dt, code


def override_code(have, dtype, fn):
    """dt code when the caller passed dtype= along with an array of numpy dtype
    `have` (None: dtype= agrees and changes nothing)."""
    if is_bf16_name(dtype):
        if have.kind == "u" and have.itemsize == 2:
            return DT_BF16
        if BFLOAT16 is not None and have == BFLOAT16:
            return DT_BF16
        raise TypeError("dtrain.%s: dtype='bf16' needs a uint16 array of bfloat16 bit patterns, "
                        "got %s" % (fn, have.name))
    try:
        want = np.dtype(dtype)
    except TypeError:
        raise TypeError("dtrain.%s: dtype %r is not a numpy dtype" % (fn, dtype)) from None
    if want != have:
        raise ValueError("dtrain.%s: dtype=%s does not match the array's dtype %s (dtrain does not "
                         "cast; use x.astype())" % (fn, want.name, have.name))
    return None


def _override(x, dtype, fn):
    """dt code when the caller passed dtype= along with an array x."""
    return override_code(x.dtype, dtype, fn)


def prepare(x, fn, dtype=None, what="x"):
    """(C-contiguous aligned native-order array, dt code) for input x.

    Non-contiguous, misaligned or byte-swapped arrays are copied; numpy scalars
    become 0-d arrays; anything else is a TypeError."""
    if type(x) is not np.ndarray:
        if isinstance(x, np.ndarray):
            pass
        elif isinstance(x, np.generic):
            x = np.asarray(x)
        else:
            raise TypeError("dtrain.%s: %s must be a numpy.ndarray, got %s"
                            % (fn, what, type(x).__name__))
    code = _NATIVE.get(x.dtype)
    if dtype is not None:
        c2 = _override(x, dtype, fn)
        if c2 is not None:
            code = c2
    if code is None:
        dt = x.dtype
        code = None if dt.isnative else _NATIVE.get(dt.newbyteorder("="))
        if code is None:
            raise unsupported(fn, dt)
        x = x.astype(dt.newbyteorder("="))
    flags = x.flags
    if not (flags.c_contiguous and flags.aligned):
        x = np.array(x, order="C", copy=True)
    return x, code
