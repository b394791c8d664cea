"""The collective operators on device arrays (dtrain.distributed.op sends
calls whose arrays are device arrays here; see its "Device arrays" rules).

Each call imports its arrays through their protocols (dtrain._devarray:
``__cuda_array_interface__`` or DLPack), makes the results it returns with
the input's library (dtrain._arraylib), and runs the C library's ``_ex`` form
with ``dt_coll_opts {DT_MEM_DEVICE, the call's stream}``, blocking: when the
call returns the result is complete and visible to every stream and to the
host (coll.h, "Device memory"). Shapes, roots, rank_lists and errors are
those of the numpy forms; what differs:

* no copies of inputs: a device array must be C-contiguous (ValueError);
* results are new arrays of the input's library (or ``out=``, which must be
  C-contiguous and writable, of the result's shape and dtype);
* allgather, gather and all_to_all along another axis than the first
  rearrange blocks with strided device copies (cudaMemcpy2DAsync) on the
  call's stream, waited for before the call returns.
"""
import ctypes

from .. import _lib
from .._devarray import DeviceCall
from .._dtypes import op_code
from . import op as _op
from .communicator import resolve_comm, INT_MAX


def _tensors(arrays):
    if len(arrays) > INT_MAX:
        raise ValueError("dtrain: a list of %d arrays is longer than a C int" % len(arrays))
    arr = (_lib._Tensor * max(len(arrays), 1))()
    for i, a in enumerate(arrays):
        arr[i].data, arr[i].count, arr[i].dtype = a.ptr or None, a.size, a.code
    return arr


def _concat_shape(shape, S, axis):
    if not shape:
        return (S,)
    return shape[:axis] + (S * shape[axis],) + shape[axis + 1:]


def _out_or_new(call, name, like, shape):
    """The out= array of that name (checked) or a new one like `like`."""
    o = call[name]
    return call.expect(o, shape, like) if o is not None else call.new(like, shape, name)


def _gather_into(call, a, S, axis, target):
    """(buffer the collective fills, target): the target itself when the
    blocks lie in it back to back (axis 0, or a 0-d input), else a temporary
    the blocks are copied from afterwards (call.copy_blocks)."""
    if axis == 0 or not a.shape:
        return target
    return call.new(a, (S,) + a.shape, "buffer")


# ---------------------------------------------------------------------------
def allreduce(x, computation, rank_list, out, dtype):
    fn = "allreduce"
    if isinstance(x, (list, tuple)):
        return _allreduce_list(x, computation, rank_list, out, dtype)
    op = op_code(computation, fn)
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn)
    call = DeviceCall(fn, [("x", x), ("out", out)], dtype, writes=("out",))
    a = call["x"]
    r = _out_or_new(call, "out", a, a.shape)
    call.ready()
    call.check(lib.dt_allreduce_ex(a.ptr, r.ptr, a.size, a.code, op, c.handle, call.opts, None))
    return call.finish(r.obj)


def _allreduce_list(xs, computation, rank_list, out, dtype):
    fn = "allreduce"
    op = op_code(computation, fn)
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn)
    if out is not None and (not isinstance(out, (list, tuple)) or len(out) != len(xs)):
        raise ValueError("dtrain.%s: out must be a list of %d arrays" % (fn, len(xs)))
    call = DeviceCall(fn, [("x", xs), ("out", out)], dtype,
                      writes=["out[%d]" % i for i in range(len(xs))])
    ins = [call["x[%d]" % i] for i in range(len(xs))]
    outs = [_out_or_new(call, "out[%d]" % i, a, a.shape) for i, a in enumerate(ins)]
    call.ready()
    call.check(lib.dt_allreduce_list_ex(_tensors(ins), _tensors(outs), len(ins), op, c.handle,
                                        call.opts, None))
    res = call.finish([o.obj for o in outs])
    return res[0] if len(res) == 1 else res


def allgather(x, axis, rank_list, dtype):
    fn = "allgather"
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn)
    if isinstance(x, (list, tuple)):
        return _allgather_list(x, axis, c, dtype, fn, "x", None)
    S = c.size
    call = DeviceCall(fn, [("x", x)], dtype)
    a = call["x"]
    ax = _op._norm_axis(axis, max(len(a.shape), 1), fn)
    r = call.new(a, _concat_shape(a.shape, S, ax))
    buf = _gather_into(call, a, S, ax, r)
    call.ready()
    call.check(lib.dt_allgather_ex(a.ptr, buf.ptr, a.size, a.code, c.handle, call.opts, None))
    if buf is not r:
        call.copy_blocks(buf, S, a.shape, ax, r)
    return call.finish(r.obj)


def _allgather_list(xs, axis, c, dtype, fn, name, out):
    S = c.size
    if out is not None and (not isinstance(out, (list, tuple)) or len(out) != len(xs)):
        raise ValueError("dtrain.%s: out must be a list of %d arrays" % (fn, len(xs)))
    call = DeviceCall(fn, [(name, xs), ("out", out)], dtype,
                      writes=["out[%d]" % i for i in range(len(xs))])
    ins = [call["%s[%d]" % (name, i)] for i in range(len(xs))]
    axes = [_op._norm_axis(axis, max(len(a.shape), 1), fn) for a in ins]
    outs = [_out_or_new(call, "out[%d]" % i, a, _concat_shape(a.shape, S, ax))
            for i, (a, ax) in enumerate(zip(ins, axes))]
    bufs = [_gather_into(call, a, S, ax, o) for a, ax, o in zip(ins, axes, outs)]
    call.ready()
    call.check(_lib.lib.dt_allgather_list_ex(_tensors(ins), _tensors(bufs), len(ins), c.handle,
                                             call.opts, None))
    for a, ax, b, o in zip(ins, axes, bufs, outs):
        if b is not o:
            call.copy_blocks(b, S, a.shape, ax, o)
    return call.finish([o.obj for o in outs])


def group_allgather(tensor_list, axis, out, rank_list, dtype):
    fn = "group_allgather"
    _lib.ensure()
    c = resolve_comm(rank_list, fn)
    return _allgather_list(tensor_list, axis, c, dtype, fn, "tensor_list", out)


def _rs_shape(a, S, fn):
    if not a.shape or a.shape[0] % S:
        raise ValueError("dtrain.%s: %s.shape[0] must be divisible by the group size %d; %s has "
                         "shape %s" % (fn, a.name, S, a.name, a.shape))
    return (a.shape[0] // S,) + a.shape[1:]


def reduce_scatter(x, computation, rank_list, out, dtype):
    fn = "reduce_scatter"
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn)
    op = op_code(computation, fn)
    S = c.size
    if isinstance(x, (list, tuple)):
        return _reduce_scatter_per_rank(x, op, c, out, dtype, fn)
    call = DeviceCall(fn, [("x", x), ("out", out)], dtype, writes=("out",))
    a = call["x"]
    r = _out_or_new(call, "out", a, _rs_shape(a, S, fn))
    call.ready()
    call.check(lib.dt_reduce_scatter_ex(a.ptr, r.ptr, a.size, a.code, op, c.handle, call.opts,
                                        None))
    return call.finish(r.obj)


def _reduce_scatter_per_rank(xs, op, c, out, dtype, fn):
    S = c.size
    if len(xs) != S:
        raise ValueError("dtrain.%s: a list holds one array per rank of the group (rank k "
                         "receives the reduction of every rank's x[k]): got %d arrays for a group "
                         "of %d; to reduce-scatter each array on its own use group_reduce_scatter"
                         % (fn, len(xs), S))
    call = DeviceCall(fn, [("x", xs), ("out", out)], dtype, writes=("out",))
    ins = [call["x[%d]" % i] for i in range(S)]
    a0 = ins[0]
    for a in ins:
        if a.code != a0.code:
            raise TypeError("dtrain.%s: %s has dtype %s, x[0] has %s: the arrays of the list are "
                            "all of one dtype" % (fn, a.name, a.dtname, a0.dtname))
        if a.shape != a0.shape:
            raise ValueError("dtrain.%s: %s has shape %s, x[0] has %s: the arrays of the list are "
                             "all of one shape" % (fn, a.name, a.shape, a0.shape))
    r = _out_or_new(call, "out", a0, a0.shape)
    tout = _lib._Tensor(r.ptr or None, r.size, r.code)
    call.ready()
    call.check(_lib.lib.dt_reduce_scatter_per_rank_ex(_tensors(ins), S, ctypes.byref(tout), op,
                                                      c.handle, call.opts, None))
    return call.finish(r.obj)


def group_reduce_scatter(tensor_list, computation, rank_list, out, dtype):
    fn = "group_reduce_scatter"
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn)
    op = op_code(computation, fn)
    n = len(tensor_list)
    if out is not None and (not isinstance(out, (list, tuple)) or len(out) != n):
        raise ValueError("dtrain.%s: out must be a list of %d arrays" % (fn, n))
    call = DeviceCall(fn, [("tensor_list", tensor_list), ("out", out)], dtype,
                      writes=["out[%d]" % i for i in range(n)])
    ins = [call["tensor_list[%d]" % i] for i in range(n)]
    outs = [_out_or_new(call, "out[%d]" % i, a, _rs_shape(a, c.size, fn))
            for i, a in enumerate(ins)]
    call.ready()
    call.check(lib.dt_reduce_scatter_fused_ex(_tensors(ins), _tensors(outs), n, op, c.handle,
                                              call.opts, None))
    return call.finish([o.obj for o in outs])


def reduce(x, root, computation, rank_list, dtype):
    fn = "reduce"
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn, flat=True)
    root = _op._root(root, c, fn)
    op = op_code(computation, fn)
    call = DeviceCall(fn, [("x", x)], dtype)
    a = call["x"]
    r = call.new(a, a.shape) if c.world_rank == root else None
    call.ready()
    call.check(lib.dt_reduce_ex(a.ptr, r.ptr if r else None, a.size, a.code, op, root, c.handle,
                                call.opts, None))
    return call.finish(r.obj if r else None)


def broadcast(x, root, rank_list, out, dtype):
    fn = "broadcast"
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn, flat=True)
    root = _op._root(root, c, fn)
    call = DeviceCall(fn, [("x", x), ("out", out)], dtype, writes=("out",))
    a = call["x"]
    r = _out_or_new(call, "out", a, a.shape)
    call.ready()
    call.check(lib.dt_broadcast_ex(a.ptr, r.ptr, a.size, a.code, root, c.handle, call.opts, None))
    return call.finish(r.obj)


def all_to_all(x, split_axis, concat_axis, rank_list, dtype):
    fn = "all_to_all"
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn)
    S = c.size
    call = DeviceCall(fn, [("x", x)], dtype)
    a = call["x"]
    if not a.shape:
        raise ValueError("dtrain.all_to_all: x must have at least one dimension")
    sa = _op._norm_axis(split_axis, len(a.shape), fn, "split_axis")
    ca = _op._norm_axis(concat_axis, len(a.shape), fn, "concat_axis")
    shape = a.shape
    if shape[sa] % S:
        raise ValueError("dtrain.all_to_all: x.shape[%d] = %d is not divisible by the group size "
                         "%d (x.shape %s)" % (sa, shape[sa], S, shape))
    chunk = shape[:sa] + (shape[sa] // S,) + shape[sa + 1:]
    send = a
    if sa != 0:
        send = call.new(a, (S,) + chunk, "send buffer")
        call.split_blocks(a, S, shape, sa, send)
    r = call.new(a, _concat_shape(chunk, S, ca))
    buf = r if ca == 0 else call.new(a, (S,) + chunk, "buffer")
    call.ready()
    call.check(lib.dt_all_to_all_ex(send.ptr, buf.ptr, a.size // S if S else 0, a.code, c.handle,
                                    call.opts, None))
    if buf is not r:
        call.copy_blocks(buf, S, chunk, ca, r)
    return call.finish(r.obj)


def gather(x, root, rank_list, axis, dtype):
    fn = "gather"
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn)
    root = _op._root(root, c, fn)
    S = c.size
    call = DeviceCall(fn, [("x", x)], dtype)
    a = call["x"]
    ax = _op._norm_axis(axis, max(len(a.shape), 1), fn)
    me = c.world_rank == root
    r = call.new(a, _concat_shape(a.shape, S, ax)) if me else None
    buf = _gather_into(call, a, S, ax, r) if me else None
    call.ready()
    call.check(lib.dt_gather_ex(a.ptr, buf.ptr if me else None, a.size, a.code, root, c.handle,
                                call.opts, None))
    if me and buf is not r:
        call.copy_blocks(buf, S, a.shape, ax, r)
    return call.finish(r.obj if me else None)


def scatter(x, root, rank_list, shape, dtype):
    fn = "scatter"
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn)
    root = _op._root(root, c, fn)
    me = c.world_rank == root
    call = DeviceCall(fn, [("x", x)], dtype)
    a = call["x"]
    if shape is not None and _op._shape_tuple(shape, fn) != a.shape:
        raise ValueError("dtrain.scatter: shape=%s does not match x.shape %s"
                         % (tuple(shape), a.shape))
    r = call.new(a, _rs_shape(a, c.size, fn))
    call.ready()
    call.check(lib.dt_scatter_ex(a.ptr if me else None, r.ptr, r.size, a.code, root, c.handle,
                                 call.opts, None))
    return call.finish(r.obj)


def send(x, peer, rank_list, dtype):
    fn = "send"
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn)
    peer = _op._world_rank_arg(peer, c, fn, "peer")
    call = DeviceCall(fn, [("x", x)], dtype)
    a = call["x"]
    call.ready()
    call.check(lib.dt_send_ex(a.ptr, a.size, a.code, peer, c.handle, call.opts, None))
    call.finish(None)


def recv(peer, shape, dtype, rank_list, out):
    fn = "recv"
    lib = _lib.ensure()
    c = resolve_comm(rank_list, fn)
    peer = _op._world_rank_arg(peer, c, fn, "peer")
    call = DeviceCall(fn, [("out", out)], dtype, writes=("out",))
    r = call["out"]
    if shape is not None and _op._shape_tuple(shape, fn) != r.shape:
        raise ValueError("dtrain.recv: out.shape %s does not match shape %s" % (r.shape, shape))
    call.ready()
    call.check(lib.dt_recv_ex(r.ptr, r.size, r.code, peer, c.handle, call.opts, None))
    return call.finish(r.obj)
