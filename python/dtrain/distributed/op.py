"""Collective communication operators on numpy arrays and CUDA device arrays
(``dir()`` lists them).

Common rules
------------
* Arrays: numpy arrays of float16, float32, float64, int8, uint8, int32 or
  int64 (bfloat16: uint16 bit patterns with ``dtype="bf16"``, or an ml_dtypes
  bfloat16 array). Other dtypes raise TypeError. Non-contiguous, misaligned or
  byte-swapped inputs are copied first. Inputs are never modified (except
  through ``out=``); results are new C-contiguous arrays.
* ``rank_list``: None (the world), a list of groups of WORLD ranks such as
  ``[[0, 1], [2, 3]]`` (each rank works with its own group; see
  dtrain.distributed.communicator), or a Communicator. reduce and broadcast
  also take RAF's flat spelling there, the ranks of one group (``[0, 1]``).
* Roots and peers are WORLD ranks and must be members of the caller's group.
  With a rank_list each group has its own root: every rank passes the world
  rank of its own group's root (``root=None`` means the group's first member,
  ``Communicator.root_rank``). A rank in no group of the rank_list runs alone
  and is its own root (it gets its own data back).
* Integers that do not fit the C int they become (ranks in a rank_list,
  roots, peers) raise ValueError naming the argument; ctypes would otherwise
  keep their low 32 bits (rank 2**32+1 would act as rank 1).
* Lists: allreduce, allgather and group_* take a list of arrays and handle
  each array as the single call would, in one fused transfer (allreduce of a
  list of ONE array returns the array, as RAF's). reduce_scatter of a list is
  different: one array per rank of the group (RAF's and PyTorch's meaning).
  all_to_all, gather and scatter take one array.
* Reductions (``computation``): "sum", "prod", "min", "max", "avg". float16
  and bfloat16 accumulate in float32; "avg" on integers truncates toward zero;
  integer overflow wraps as in C.
* Every rank of a group must call the same operators in the same order with
  matching shapes and dtypes (dtrain cannot detect a shape that differs
  between ranks). Argument errors found locally (TypeError/ValueError) are
  raised before anything moves; errors found by the C library raise
  dtrain.DtrainError.
* ``out=`` (an existing array of the result's shape and dtype, contiguous or
  not; ``out=x`` is in place) is accepted by allreduce, reduce_scatter,
  broadcast and recv. For allreduce of a list and the group_* operators,
  ``out`` is a list.
* Signatures follow RAF's (``raf.distributed.op``) positional order; dtrain's
  extra arguments (``out``, ``dtype``, ``rank_list`` where RAF has none) come
  after RAF's.

Device arrays
-------------
Every operator also takes CUDA device arrays (CuPy arrays, PyTorch CUDA
tensors, Numba device arrays...): objects with ``__cuda_array_interface__``
(versions 2 and 3) or ``__dlpack__``/``__dlpack_device__`` (dtrain._devarray
says how each is read and which stream a call runs on). Such a call is
dtrain._device_op's: the C library's device path (nccl, staged or local,
``Communicator.device_path``), blocking: the result is complete for every
stream and the host when the call returns. The rules above hold, except:

* results are new arrays of the input's library on the input's device
  (dtrain._arraylib: ``torch.empty``, ``cupy.empty``, the Array API's
  ``empty``); ``out=`` (``out=x``: in place) as for numpy arrays;
* every array of a call is a device array: a host (numpy) array beside a
  device one is a TypeError naming both; every device array lies on this
  rank's device, ``dtrain.cuda_device()`` (ValueError otherwise);
* device arrays are never copied: a non-contiguous array or out= is a
  ValueError, a byte-swapped one a TypeError; a read-only out= is a
  ValueError;
* bfloat16: PyTorch's (DLPack's) bfloat16 is bf16 as it is; uint16 bit
  patterns with ``dtype="bf16"`` as for numpy;
* scatter off the root and recv receive into a device array only when given
  one (x of the root's shape and dtype; ``out=``); ``x=None`` or
  ``shape``/``dtype`` alone receive into numpy arrays. Ranks of one call
  on different kinds of memory get DtrainError (DT_ERR_MISMATCH) on every
  rank.
"""
import ctypes

import numpy as np

from .. import _lib
from .._devarray import device_call as _device_call, is_device as _is_device
from .._dtypes import prepare, op_code, code_of_dtype, CODES as _CODES, OPS as _OPS
from . import _device_op as _dev
from . import communicator as _communicator
from .communicator import resolve, resolve_comm, INT_MIN, INT_MAX

__all__ = ["allreduce", "allgather", "reduce", "reduce_scatter", "broadcast", "all_to_all",
           "gather", "scatter", "send", "recv", "barrier", "group_allgather",
           "group_reduce_scatter"]


def __dir__():
    return list(__all__)


_ndarray = np.ndarray
_empty = np.empty
_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def _ptr(a):
    """Address of a C-contiguous array's data. ctypes.c_char.from_buffer is
    about 4x cheaper than ndarray.ctypes.data but needs a writable, non-empty
    buffer with a standard format; otherwise fall back."""
    try:
        return _addressof(_from_buffer(a))
    except (TypeError, ValueError, BufferError):
        return a.ctypes.data


def _raise(rc, fn):
    raise _lib.error(rc, fn)


def _shape_tuple(shape, fn):
    dims = shape if isinstance(shape, (tuple, list)) else (shape,)
    try:
        if any(isinstance(d, bool) for d in dims):
            raise TypeError
        out = tuple(d.__index__() for d in dims)
    except (AttributeError, TypeError):
        raise TypeError("dtrain.%s: shape must be an int or a tuple of ints, got %r"
                        % (fn, shape)) from None
    if any(d < 0 for d in out):
        raise ValueError("dtrain.%s: shape %s has a negative dimension" % (fn, out))
    return out


# numpy.AxisError (numpy.exceptions.AxisError since numpy 1.25); a ValueError
_AxisError = getattr(getattr(np, "exceptions", None), "AxisError", None) or np.AxisError


def _norm_axis(axis, ndim, fn, what="axis"):
    if isinstance(axis, bool) or not hasattr(axis, "__index__"):
        raise TypeError("dtrain.%s: %s must be an int, got %r" % (fn, what, axis))
    a = axis.__index__()
    if not -ndim <= a < ndim:
        raise _AxisError(a, ndim, "dtrain.%s: %s" % (fn, what))
    return a + ndim if a < 0 else a


def _concat_blocks(buf, axis):
    """buf has shape (S, *shape): the concatenation of buf[0..S-1] along `axis`."""
    S, shape = buf.shape[0], buf.shape[1:]
    if not shape:
        return buf
    if axis == 0:
        return buf.reshape((S * shape[0],) + shape[1:])
    moved = np.moveaxis(buf, 0, axis)
    return moved.reshape(shape[:axis] + (S * shape[axis],) + shape[axis + 1:])


def _check_out(out, shape, dtype, fn):
    if not isinstance(out, np.ndarray):
        raise TypeError("dtrain.%s: out must be a numpy.ndarray, got %s" % (fn, type(out).__name__))
    if out.shape != shape or out.dtype != dtype:
        raise ValueError("dtrain.%s: out has shape %s and dtype %s; expected shape %s and dtype %s"
                         % (fn, out.shape, out.dtype, shape, dtype))
    if not out.flags.writeable:
        raise ValueError("dtrain.%s: out is read-only" % fn)
    f = out.flags
    return f.c_contiguous and f.aligned and out.dtype.isnative


def _world_rank_arg(v, c, fn, what):
    """v (root or peer) as an int that fits a C int; TypeError / ValueError naming it."""
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError("dtrain.%s: %s must be an int (a world rank), got %r" % (fn, what, v))
    r = int(v.__index__())
    if not INT_MIN <= r <= INT_MAX:  # ctypes would keep the low 32 bits
        raise ValueError("dtrain.%s: %s %d is out of range: world ranks are 0..%d"
                         % (fn, what, r, c.world_size - 1))
    return r


def _root(root, c, fn):
    """The world rank to pass as root. None: the group's first member. A rank in
    no group of its rank_list runs alone, and is its own root whatever world
    rank it names (RAF: reduce/broadcast with rank_list=[0, 1] on ranks 2, 3)."""
    if root is None:
        return c.root_rank
    r = _world_rank_arg(root, c, fn, "root")
    if c.group_id == -1 and 0 <= r < c.world_size:
        return c.world_rank
    return r


def _token(token, fn):
    """RAF's send/recv token: a data dependency that keeps RAF's graph from
    reordering the calls. dtrain runs calls in program order, so it is not
    needed; it is accepted (None or an array) and ignored."""
    if token is not None and not isinstance(token, (np.ndarray, np.generic)) \
            and not _is_device(token):
        raise TypeError("dtrain.%s: token must be None or an array (a previous send/recv's "
                        "result), got %s" % (fn, type(token).__name__))


# ---------------------------------------------------------------------------
def allreduce(x, computation="sum", rank_list=None, out=None, dtype=None):
    """Element-wise reduction over the ranks of the group, result on every rank.

    ``x``: an array, or a list/tuple of arrays (any dtypes and shapes): a list
    is reduced by ONE fused call (dt_allreduce_list) and a list is returned,
    except for a list of ONE array, which returns that array (as RAF's:
    ``allreduce([x])`` is ``allreduce(x)``, seed 003).
    ``computation``: "sum" (default), "prod", "min", "max", "avg".
    ``out``: optional result array (list of arrays for a list); ``out=x`` is
    in place. ``dtype="bf16"``: x holds bfloat16 bit patterns in uint16.
    Returns a new array (or ``out``).

    Seed 003, rank r holding r+1 on 4 ranks: allreduce(x) -> 10 everywhere;
    rank_list=[[0, 1], [2, 3]] -> 3, 3, 7, 7; [[0, 1, 2], [3]] -> 6, 6, 6, 4.
    """
    # fast path: a contiguous supported array on the world, result new or a
    # contiguous out= (the common case; anything else takes the general path)
    if type(x) is _ndarray and dtype is None and rank_list is None:
        code = _CODES.get(x.dtype)
        op = _OPS.get(computation) if type(computation) is str else None
        flags = x.flags
        world = _communicator._world
        if code is not None and op is not None and flags.c_contiguous and flags.aligned \
                and world is not None and _lib.ready:
            if out is None:
                res = _empty(x.shape, x.dtype)
            elif type(out) is _ndarray and out.shape == x.shape and out.dtype == x.dtype:
                of = out.flags
                res = out if of.c_contiguous and of.aligned and of.writeable else None
            else:
                res = None
            if res is not None:
                try:
                    xp = _addressof(_from_buffer(x))
                except (TypeError, ValueError, BufferError):
                    xp = x.ctypes.data
                rc = _lib.lib.dt_allreduce(xp, _ptr(res), x.size, code, op, world._handle)
                if rc:
                    _raise(rc, "allreduce")
                return res
    if _device_call("allreduce", ("x", x), ("out", out)):
        return _dev.allreduce(x, computation, rank_list, out, dtype)
    if isinstance(x, (list, tuple)):
        return _allreduce_list(x, computation, rank_list, out, dtype)
    op = op_code(computation, "allreduce")
    x, code = prepare(x, "allreduce", dtype)
    lib = _lib.lib if _lib.ready else _lib.ensure()
    comm = resolve(rank_list, "allreduce")
    if out is None:
        res = np.empty(x.shape, x.dtype)
        rc = lib.dt_allreduce(_ptr(x), _ptr(res), x.size, code, op, comm)
        if rc:
            _raise(rc, "allreduce")
        return res
    if _check_out(out, x.shape, x.dtype, "allreduce"):
        rc = lib.dt_allreduce(_ptr(x), _ptr(out), x.size, code, op, comm)
    else:
        res = np.empty(x.shape, x.dtype)
        rc = lib.dt_allreduce(_ptr(x), _ptr(res), x.size, code, op, comm)
        if not rc:
            out[...] = res
    if rc:
        _raise(rc, "allreduce")
    return out


def _tensor_array(arrays, codes):
    if len(arrays) > INT_MAX:
        raise ValueError("dtrain: a list of %d arrays is longer than a C int" % len(arrays))
    arr = (_lib._Tensor * max(len(arrays), 1))()
    for i, (a, c) in enumerate(zip(arrays, codes)):
        arr[i].data = _ptr(a)
        arr[i].count = a.size
        arr[i].dtype = c
    return arr


def _prepare_list(xs, fn, dtype, name="x"):
    prepared, codes = [], []
    for i, x in enumerate(xs):
        a, c = prepare(x, fn, dtype, what="%s[%d]" % (name, i))
        prepared.append(a)
        codes.append(c)
    return prepared, codes


def _outs_for_list(out, shapes, dtypes, fn):
    """(arrays to write, final outputs): direct when out[i] is usable, else temporaries."""
    if out is None:
        res = [np.empty(s, d) for s, d in zip(shapes, dtypes)]
        return res, res
    if not isinstance(out, (list, tuple)) or len(out) != len(shapes):
        raise ValueError("dtrain.%s: out must be a list of %d arrays" % (fn, len(shapes)))
    targets = []
    for o, s, d in zip(out, shapes, dtypes):
        targets.append(o if _check_out(o, s, d, fn) else np.empty(s, d))
    return targets, list(out)


def _copy_back(targets, finals):
    for t, f in zip(targets, finals):
        if t is not f:
            f[...] = t


def _allreduce_list(xs, computation, rank_list, out, dtype):
    fn = "allreduce"
    op = op_code(computation, fn)
    xs, codes = _prepare_list(xs, fn, dtype)
    lib = _lib.ensure()
    comm = resolve(rank_list, fn)
    targets, finals = _outs_for_list(out, [a.shape for a in xs], [a.dtype for a in xs], fn)
    tin, tout = _tensor_array(xs, codes), _tensor_array(targets, codes)
    rc = lib.dt_allreduce_list(tin, tout, len(xs), op, comm)
    if rc:
        _raise(rc, fn)
    _copy_back(targets, finals)
    # RAF (seed 003): allreduce([x]) is allreduce(x), the array itself
    return finals[0] if len(finals) == 1 else finals


def allgather(x, axis=0, rank_list=None, dtype=None):
    """Concatenation along ``axis`` of every group member's x, in group-rank
    (ascending world rank) order, on every rank: the result's ``axis`` has
    ``size * x.shape[axis]`` entries. All ranks pass the same shape. A 0-d x
    gives shape (size,). A list of arrays is gathered by one fused call
    (dt_allgather_list; each along ``axis``) and a list is returned."""
    fn = "allgather"
    if _device_call(fn, ("x", x)):
        return _dev.allgather(x, axis, rank_list, dtype)
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn)
    S = c.size
    if isinstance(x, (list, tuple)):
        return _allgather_list(x, axis, c, dtype, fn, "x")
    x, code = prepare(x, fn, dtype)
    ax = _norm_axis(axis, max(x.ndim, 1), fn)
    buf = np.empty((S,) + x.shape, x.dtype)
    rc = lib.dt_allgather(_ptr(x), _ptr(buf), x.size, code, c.handle)
    if rc:
        _raise(rc, fn)
    return _concat_blocks(buf, ax)


def _allgather_list(x, axis, c, dtype, fn, name):
    xs, codes = _prepare_list(x, fn, dtype, name)
    axes = [_norm_axis(axis, max(a.ndim, 1), fn) for a in xs]
    bufs = [np.empty((c.size,) + a.shape, a.dtype) for a in xs]
    rc = _lib.lib.dt_allgather_list(_tensor_array(xs, codes), _tensor_array(bufs, codes), len(xs),
                                    c.handle)
    if rc:
        _raise(rc, fn)
    return [_concat_blocks(b, ax) for b, ax in zip(bufs, axes)]


def group_allgather(tensor_list, axis=0, out=None, rank_list=None, dtype=None):
    """RAF's group_allgather(tensor_list, axis, out): every array of the list
    gathered on its own along ``axis`` (as allgather of each), by one fused call
    (dt_allgather_list). ``out``: optional list of result arrays, written and
    returned. Returns a list."""
    fn = "group_allgather"
    if not isinstance(tensor_list, (list, tuple)):
        raise TypeError("dtrain.group_allgather: tensor_list must be a list of arrays, got %s"
                        % type(tensor_list).__name__)
    if _device_call(fn, ("tensor_list", tensor_list), ("out", out)):
        return _dev.group_allgather(tensor_list, axis, out, rank_list, dtype)
    _lib.ensure()
    c = resolve_comm(rank_list, fn)
    res = _allgather_list(tensor_list, axis, c, dtype, fn, "tensor_list")
    if out is None:
        return res
    if not isinstance(out, (list, tuple)) or len(out) != len(res):
        raise ValueError("dtrain.group_allgather: out must be a list of %d arrays" % len(res))
    for o, r in zip(out, res):
        _check_out(o, r.shape, r.dtype, fn)
    for o, r in zip(out, res):
        o[...] = r
    return list(out)


def _rs_shape(x, S, fn, what="x"):
    if x.ndim == 0 or x.shape[0] % S:
        raise ValueError("dtrain.%s: %s.shape[0] must be divisible by the group size %d; %s has "
                         "shape %s" % (fn, what, S, what, x.shape))
    return (x.shape[0] // S,) + x.shape[1:]


def reduce_scatter(x, computation="sum", rank_list=None, out=None, dtype=None):
    """Reduction over the group, scattered: group rank k receives part k.

    ``x`` an array: reduced over the group, then rank k keeps block k of the
    result along axis 0 (x.shape[0] must be divisible by the group size; the
    result has shape (x.shape[0] // size,) + x.shape[1:]).

    ``x`` a list/tuple: ONE ARRAY PER RANK of the group, as in RAF
    (``raf.reduce_scatter(x_list)``) and PyTorch (``dist.reduce_scatter(output,
    input_list)``): len(x) must equal the group size and the arrays share one
    shape and dtype; group rank k receives the reduction over the group of
    every rank's x[k], an array of x[0]'s shape (dt_reduce_scatter_per_rank:
    no copy when the arrays are consecutive views of one buffer, e.g.
    ``np.split(a, size)``). To reduce-scatter each array of a list on its own,
    use group_reduce_scatter.

    ``out``: optional result array (``out=x[rank]`` is in place for a list)."""
    fn = "reduce_scatter"
    if _device_call(fn, ("x", x), ("out", out)):
        return _dev.reduce_scatter(x, computation, rank_list, out, dtype)
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn)
    op = op_code(computation, fn)
    S = c.size
    if isinstance(x, (list, tuple)):
        return _reduce_scatter_per_rank(x, op, c, out, dtype, fn)
    x, code = prepare(x, fn, dtype)
    shape = _rs_shape(x, S, fn)
    if out is not None and _check_out(out, shape, x.dtype, fn):
        res = out
    else:
        res = np.empty(shape, x.dtype)
    rc = lib.dt_reduce_scatter(_ptr(x), _ptr(res), x.size, code, op, c.handle)
    if rc:
        _raise(rc, fn)
    if out is not None and res is not out:
        out[...] = res
        return out
    return res


def _reduce_scatter_per_rank(x, op, c, out, dtype, fn):
    S = c.size
    if len(x) != S:
        raise ValueError("dtrain.%s: a list holds one array per rank of the group (rank k "
                         "receives the reduction of every rank's x[k]): got %d arrays for a group "
                         "of %d; to reduce-scatter each array on its own use group_reduce_scatter"
                         % (fn, len(x), S))
    xs, codes = _prepare_list(x, fn, dtype)
    a0 = xs[0]
    for i, a in enumerate(xs):
        if a.dtype != a0.dtype or codes[i] != codes[0]:
            raise TypeError("dtrain.%s: x[%d] has dtype %s, x[0] has %s: the arrays of the list "
                            "are all of one dtype" % (fn, i, a.dtype.name, a0.dtype.name))
        if a.shape != a0.shape:
            raise ValueError("dtrain.%s: x[%d] has shape %s, x[0] has %s: the arrays of the list "
                             "are all of one shape" % (fn, i, a.shape, a0.shape))
    if out is not None and _check_out(out, a0.shape, a0.dtype, fn):
        res = out
    else:
        res = np.empty(a0.shape, a0.dtype)
    tout = _lib._Tensor(_ptr(res), res.size, codes[0])
    rc = _lib.lib.dt_reduce_scatter_per_rank(_tensor_array(xs, codes), S, ctypes.byref(tout), op,
                                             c.handle)
    if rc:
        _raise(rc, fn)
    if out is not None and res is not out:
        out[...] = res
        return out
    return res


def group_reduce_scatter(tensor_list, computation="sum", rank_list=None, out=None, dtype=None):
    """RAF's group_reduce_scatter(tensor_list, computation): every array of the
    list reduce-scattered on its own (group rank k receives block k, along
    axis 0, of the reduction of tensor_list[i]; shape[0] divisible by the group
    size), all by one fused call (dt_reduce_scatter_fused). Arrays may differ
    in shape and dtype. ``out``: optional list of result arrays. Returns a list."""
    fn = "group_reduce_scatter"
    if not isinstance(tensor_list, (list, tuple)):
        raise TypeError("dtrain.group_reduce_scatter: tensor_list must be a list of arrays, got "
                        "%s (for one array use reduce_scatter)" % type(tensor_list).__name__)
    if _device_call(fn, ("tensor_list", tensor_list), ("out", out)):
        return _dev.group_reduce_scatter(tensor_list, computation, rank_list, out, dtype)
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn)
    op = op_code(computation, fn)
    xs, codes = _prepare_list(tensor_list, fn, dtype, "tensor_list")
    shapes = [_rs_shape(a, c.size, fn, "tensor_list[%d]" % i) for i, a in enumerate(xs)]
    targets, finals = _outs_for_list(out, shapes, [a.dtype for a in xs], fn)
    rc = lib.dt_reduce_scatter_fused(_tensor_array(xs, codes), _tensor_array(targets, codes),
                                     len(xs), op, c.handle)
    if rc:
        _raise(rc, fn)
    _copy_back(targets, finals)
    return finals


def reduce(x, root, computation="sum", rank_list=None, dtype=None):
    """Reduction over the group delivered to ``root`` (a world rank in the
    caller's group; None: the group's first member). Returns the result on
    the root and None on every other rank (RAF returns an array there whose
    contents are undefined). ``rank_list`` also takes RAF's flat spelling, the
    ranks of one group (``[0, 1]``); a rank in no group runs alone and gets its
    own x back."""
    fn = "reduce"
    if _device_call(fn, ("x", x)):
        return _dev.reduce(x, root, computation, rank_list, dtype)
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn, flat=True)
    root = _root(root, c, fn)
    op = op_code(computation, fn)
    x, code = prepare(x, fn, dtype)
    me = c.world_rank == root
    res = np.empty(x.shape, x.dtype) if me else None
    rc = lib.dt_reduce(_ptr(x), _ptr(res) if me else None, x.size, code, op, root,
                       c.handle)
    if rc:
        _raise(rc, fn)
    return res


def broadcast(x, root, rank_list=None, out=None, dtype=None):
    """Copy of the root's x on every rank of the group. Every rank passes an
    array of the same shape and dtype (off the root only shape and dtype are
    used). ``root``: a world rank in the caller's group (None: the group's
    first member). Returns a new array (or ``out``; ``out=x`` is in place).
    ``rank_list`` also takes RAF's flat spelling, the ranks of one group
    (``[0, 1]``); a rank in no group runs alone and gets its own x back."""
    fn = "broadcast"
    if _device_call(fn, ("x", x), ("out", out)):
        return _dev.broadcast(x, root, rank_list, out, dtype)
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn, flat=True)
    root = _root(root, c, fn)
    x, code = prepare(x, fn, dtype)
    if out is not None and _check_out(out, x.shape, x.dtype, fn):
        res = out
    else:
        res = np.empty(x.shape, x.dtype)
    rc = lib.dt_broadcast(_ptr(x), _ptr(res), x.size, code, root, c.handle)
    if rc:
        _raise(rc, fn)
    if out is not None and res is not out:
        out[...] = res
        return out
    return res


def _no_list(x, fn):
    if isinstance(x, (list, tuple)):
        raise TypeError("dtrain.%s: x must be one array, not a list (RAF's %s takes one tensor; "
                        "PyTorch's list forms are not offered)" % (fn, fn))


def all_to_all(x, split_axis=0, concat_axis=0, rank_list=None, dtype=None):
    """x is cut into ``size`` equal chunks along ``split_axis`` (its length
    must be divisible by the group size); chunk j goes to group rank j. Each
    rank returns the chunks it received, from group ranks 0..size-1,
    concatenated along ``concat_axis``. Result shape: x.shape with
    shape[split_axis] divided by size, then shape[concat_axis] multiplied by
    size."""
    fn = "all_to_all"
    _no_list(x, fn)
    if _device_call(fn, ("x", x)):
        return _dev.all_to_all(x, split_axis, concat_axis, rank_list, dtype)
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn)
    S = c.size
    x, code = prepare(x, fn, dtype)
    if x.ndim == 0:
        raise ValueError("dtrain.all_to_all: x must have at least one dimension")
    sa = _norm_axis(split_axis, x.ndim, fn, "split_axis")
    ca = _norm_axis(concat_axis, x.ndim, fn, "concat_axis")
    shape = x.shape
    if shape[sa] % S:
        raise ValueError("dtrain.all_to_all: x.shape[%d] = %d is not divisible by the group size "
                         "%d (x.shape %s)" % (sa, shape[sa], S, shape))
    chunk = shape[:sa] + (shape[sa] // S,) + shape[sa + 1:]
    if sa == 0:
        send = x
    else:
        send = np.ascontiguousarray(
            np.moveaxis(x.reshape(shape[:sa] + (S, shape[sa] // S) + shape[sa + 1:]), sa, 0))
    buf = np.empty((S,) + chunk, x.dtype)
    rc = lib.dt_all_to_all(_ptr(send), _ptr(buf), x.size // S if S else 0, code,
                           c.handle)
    if rc:
        _raise(rc, fn)
    return _concat_blocks(buf, ca)


def gather(x, root, rank_list=None, axis=0, dtype=None):
    """Concatenation along ``axis`` of every group member's x (group-rank
    order) on ``root`` (a world rank in the group; None: the first member);
    None on the other ranks. All ranks pass the same shape."""
    fn = "gather"
    _no_list(x, fn)
    if _device_call(fn, ("x", x)):
        return _dev.gather(x, root, rank_list, axis, dtype)
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn)
    root = _root(root, c, fn)
    x, code = prepare(x, fn, dtype)
    ax = _norm_axis(axis, max(x.ndim, 1), fn)
    me = c.world_rank == root
    buf = np.empty((c.size,) + x.shape, x.dtype) if me else None
    rc = lib.dt_gather(_ptr(x), _ptr(buf) if me else None, x.size, code, root,
                       c.handle)
    if rc:
        _raise(rc, fn)
    return _concat_blocks(buf, ax) if me else None


def scatter(x, root, rank_list=None, shape=None, dtype=None):
    """Block k (along axis 0) of the root's x lands on group rank k: x.shape[0]
    must be divisible by the group size; every rank returns an array of shape
    (x.shape[0] // size,) + x.shape[1:].

    Off the root the data is not read, only its description: pass either an
    array of the same shape and dtype as the root's x, or ``x=None`` with
    ``shape=`` (the root's full shape) and ``dtype=``. ``root``: a world rank
    in the caller's group (None: the group's first member)."""
    fn = "scatter"
    _no_list(x, fn)
    if _device_call(fn, ("x", x)):
        return _dev.scatter(x, root, rank_list, shape, dtype)
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn)
    root = _root(root, c, fn)
    S = c.size
    me = c.world_rank == root
    if x is None:
        if me:
            raise ValueError("dtrain.scatter: the root (world rank %d) must pass the array" % root)
        if shape is None or dtype is None:
            raise ValueError("dtrain.scatter: off the root pass x (same shape and dtype as the "
                             "root's) or x=None with shape= and dtype=")
        npdt, code = code_of_dtype(dtype, fn)
        full = _shape_tuple(shape, fn)
        src = None
        if not full or full[0] % S:
            raise ValueError("dtrain.scatter: shape[0] must be divisible by the group size %d; "
                             "got shape %s" % (S, full))
        block = (full[0] // S,) + full[1:]
    else:
        x, code = prepare(x, fn, dtype)
        npdt = x.dtype
        if shape is not None and _shape_tuple(shape, fn) != x.shape:
            raise ValueError("dtrain.scatter: shape=%s does not match x.shape %s"
                             % (tuple(shape), x.shape))
        block = _rs_shape(x, S, fn)
        src = _ptr(x) if me else None
    res = np.empty(block, npdt)
    rc = lib.dt_scatter(src, _ptr(res), res.size, code, root, c.handle)
    if rc:
        _raise(rc, fn)
    return res


def send(x, peer, token=None, rank_list=None, dtype=None):
    """Send x to ``peer`` (a world rank in the caller's group, not itself).
    Blocking; the receiver calls recv(peer=<this rank>, shape, dtype).
    ``token``: RAF's ordering token, accepted and ignored (calls run in program
    order). Returns None (RAF returns an empty 0-d tensor, "no return value")."""
    fn = "send"
    _token(token, fn)
    if _device_call(fn, ("x", x)):
        return _dev.send(x, peer, rank_list, dtype)
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn)
    peer = _world_rank_arg(peer, c, fn, "peer")
    x, code = prepare(x, fn, dtype)
    rc = lib.dt_send(_ptr(x), x.size, code, peer, c.handle)
    if rc:
        _raise(rc, fn)


def recv(peer, shape=None, dtype=None, token=None, rank_list=None, out=None):
    """Receive an array of ``shape`` and ``dtype`` (``dtype="bf16"``: uint16
    bit patterns) from ``peer`` (a world rank; unlike PyTorch's recv there is no
    receive-from-anyone). With ``out=`` (shape/dtype then optional) the data
    lands in out, which is returned. ``token``: RAF's ordering token, accepted
    and ignored. A sender whose element count differs raises DtrainError
    (DT_ERR_MISMATCH)."""
    fn = "recv"
    _token(token, fn)
    if _device_call(fn, ("out", out)):
        return _dev.recv(peer, shape, dtype, rank_list, out)
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn)
    peer = _world_rank_arg(peer, c, fn, "peer")
    if out is not None:
        if not isinstance(out, np.ndarray):
            raise TypeError("dtrain.recv: out must be a numpy.ndarray, got %s"
                            % type(out).__name__)
        if dtype is not None:
            npdt, code = code_of_dtype(dtype, fn)
            if npdt != out.dtype:
                raise ValueError("dtrain.recv: out.dtype %s does not match dtype %s"
                                 % (out.dtype, dtype))
        else:
            npdt, code = code_of_dtype(out.dtype, fn)
        if shape is not None and _shape_tuple(shape, fn) != out.shape:
            raise ValueError("dtrain.recv: out.shape %s does not match shape %s"
                             % (out.shape, shape))
        direct = _check_out(out, out.shape, out.dtype, fn)
        res = out if direct else np.empty(out.shape, out.dtype)
    else:
        if shape is None or dtype is None:
            raise ValueError("dtrain.recv: pass shape and dtype (or out=)")
        npdt, code = code_of_dtype(dtype, fn)
        res = np.empty(_shape_tuple(shape, fn), npdt)
    rc = lib.dt_recv(_ptr(res), res.size, code, peer, c.handle)
    if rc:
        _raise(rc, fn)
    if out is not None and res is not out:
        out[...] = res
        return out
    return res


def barrier(rank_list=None):
    """Return once every rank of the group has entered."""
    lib = _lib.ensure()
    rc = lib.dt_barrier(resolve(rank_list, "barrier"))
    if rc:
        _raise(rc, "barrier")

