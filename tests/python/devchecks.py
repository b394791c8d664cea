"""The Python front's device-array checks, shared by the test on the fake
device runtime (tests/python/test_device_fake.py, CI) and the GPU test
(tests/gpu/test_py_device.py: CuPy arrays and PyTorch CUDA tensors).

A Kind makes device arrays of one library from numpy arrays and reads them
back; ``run(kind)`` checks every collective with it against numpy references
on fresh random data (a seed drawn on rank 0 and broadcast, printed with any
failure): every dtype the kind supports, every computation, the world and
sub-communicators, results of the input's kind, out of place and in place
(``out=``), lists, axes, bfloat16, and the errors (host and device arrays
mixed, a non-contiguous array, another device, a read-only out, unsupported
dtypes). Values are small integers (halves for floats) so that every path
(NCCL's numerics, staging's) gives them exactly; float32/float64 normals are
checked within a tolerance.

Kind's interface: ``name``; ``dtypes`` (numpy dtypes); ``dev(a)`` (a device
copy of numpy array a); ``host(d)`` (numpy copy of device array d);
``same(r, like)`` (r is of like's kind); ``bf16(bits)`` ((device array,
dtype= argument) holding bfloat16 bit patterns); ``noncontig(a)`` (a
non-contiguous device view of a's values); ``other_device(a)`` (a copy on a
device that is not the rank's, or None); ``readonly(a)`` (a read-only
device array, or None).
"""
import os
import sys

import numpy as np

import dtrain
from dtrain import distributed as dist

import harness as H
from harness import OPS, check, expect_raises, members, reduce_ref

comm = dist.get_communicator()
R, S = comm.world_rank, comm.world_size
SEED = None
_salt = [0]


def seed():
    """One random seed for the run, the same on every rank."""
    global SEED
    if SEED is None:
        s = np.frombuffer(os.urandom(8), np.int64) & 0x7FFFFFFFFFFF
        SEED = int(os.environ.get("DEVCHECKS_SEED", int(dtrain.broadcast(s, 0)[0])))
        if R == 0:
            print("devchecks: random seed %d (DEVCHECKS_SEED=%d repeats it)" % (SEED, SEED),
                  flush=True)
    return SEED


def salt():
    _salt[0] += 1
    return _salt[0]


def data(r, dt, shape, sl, op=None):
    """Rank r's random input: integers in [-2, 2] ([0, 2] unsigned), halves
    for floats (integers for prod), so that every reduction is exact."""
    rng = np.random.default_rng([seed(), r, sl])
    dt = np.dtype(dt)
    lo = 0 if dt.kind == "u" else -2
    v = rng.integers(lo, 3, size=shape)
    if dt.kind == "f" and op != "prod":
        v = v * 0.5
    return np.asarray(v).astype(dt)


def tag(fn, kind, dt, *extra):
    return "%s [%s] %s %s" % (fn, kind.name, np.dtype(dt).name if dt is not None else "",
                              " ".join(map(str, extra)))


def check_dev(name, kind, got, want, like=None, tol=None):
    """got is a device array of the kind (of like's kind) holding want
    (exactly, or within tol: an array of absolute bounds)."""
    if not kind.same(got, like):
        return check(name, False, "result is a %s, not the input's kind" % type(got).__name__)
    h = kind.host(got)
    if tol is None:
        ok = h.dtype == want.dtype and h.shape == want.shape and np.array_equal(h, want)
    else:
        ok = h.shape == want.shape and bool(np.all(np.abs(h - want) <= tol))
    return check(name, ok, lambda: "seed %d: got %s %s %s, want %s %s %s" % (
        SEED, h.dtype, h.shape, h.ravel()[:8], want.dtype, want.shape, want.ravel()[:8]))


def rank_lists():
    return H.rank_lists(S)[:3]


# ---- every collective x dtype ----------------------------------------------------
def t_reductions(kind):
    for rl in rank_lists():
        mem = members(R, rl, S)
        G, gr = len(mem), mem.index(R)
        for dt in kind.dtypes:
            for op in OPS:
                sl = salt()
                x_np = data(R, dt, (3, 2 * G), sl, op)
                x = kind.dev(x_np)
                want = reduce_ref([data(m, dt, (3, 2 * G), sl, op) for m in mem], op, dt)
                check_dev(tag("allreduce", kind, dt, op, rl), kind, dtrain.allreduce(x, op, rl),
                          want, x)
                check(tag("allreduce input untouched", kind, dt, op),
                      np.array_equal(kind.host(x), x_np))
                sl = salt()
                x = kind.dev(data(R, dt, (2 * G, 3), sl, op))
                full = reduce_ref([data(m, dt, (2 * G, 3), sl, op) for m in mem], op, dt)
                check_dev(tag("reduce_scatter", kind, dt, op, rl), kind,
                          dtrain.reduce_scatter(x, op, rl), full[2 * gr:2 * gr + 2], x)
            for op in ("sum", "max"):
                root = mem[-1]
                sl = salt()
                y = dtrain.reduce(kind.dev(data(R, dt, (4,), sl, op)), root, op, rank_list=rl)
                if R == root:
                    check_dev(tag("reduce", kind, dt, op, rl), kind, y,
                              reduce_ref([data(m, dt, (4,), sl, op) for m in mem], op, dt))
                else:
                    check(tag("reduce off the root is None", kind, dt), y is None)


def t_movement(kind):
    for rl in rank_lists():
        mem = members(R, rl, S)
        G, gr = len(mem), mem.index(R)
        for dt in kind.dtypes:
            sl = salt()
            shape = (2, 3, 2)
            x = kind.dev(data(R, dt, shape, sl))
            for axis in (0, 1, -1):
                want = np.concatenate([data(m, dt, shape, sl) for m in mem], axis=axis)
                check_dev(tag("allgather", kind, dt, "axis", axis, rl), kind,
                          dtrain.allgather(x, axis=axis, rank_list=rl), want, x)
            root = mem[0]
            sl = salt()
            check_dev(tag("broadcast", kind, dt, rl), kind,
                      dtrain.broadcast(kind.dev(data(R, dt, (3, 2), sl)), root, rank_list=rl),
                      data(root, dt, (3, 2), sl))
            for axis in (0, 1):
                sl = salt()
                y = dtrain.gather(kind.dev(data(R, dt, (2, 3), sl)), root, rank_list=rl,
                                  axis=axis)
                if R == root:
                    check_dev(tag("gather", kind, dt, "axis", axis, rl), kind, y,
                              np.concatenate([data(m, dt, (2, 3), sl) for m in mem], axis))
                else:
                    check(tag("gather off the root is None", kind, dt), y is None)
            sl = salt()
            check_dev(tag("scatter", kind, dt, rl), kind,
                      dtrain.scatter(kind.dev(data(R, dt, (2 * G, 3), sl)), root, rank_list=rl),
                      data(root, dt, (2 * G, 3), sl)[2 * gr:2 * gr + 2])
            for sa, ca in ((0, 0), (1, 0), (0, 2), (2, 1), (-1, -2)):
                sl = salt()
                shape = [2, 3, 2]
                shape[sa] = 2 * G
                y = dtrain.all_to_all(kind.dev(data(R, dt, tuple(shape), sl)), sa, ca,
                                      rank_list=rl)
                want = np.concatenate([np.split(data(m, dt, tuple(shape), sl), G, axis=sa)[gr]
                                       for m in mem], axis=ca)
                check_dev(tag("all_to_all", kind, dt, "split", sa, "concat", ca, rl), kind, y,
                          want)
    check_dev(tag("allgather 0-d", kind, np.int64), kind,
              dtrain.allgather(kind.dev(np.array(R, np.int64))), np.arange(S, dtype=np.int64))


def t_p2p(kind):
    if S == 1:
        return
    nxt, prv = (R + 1) % S, (R - 1) % S
    for dt in kind.dtypes:
        sl = salt()
        x = kind.dev(data(R, dt, (2, 3), sl))
        out = kind.dev(np.zeros((2, 3), dt))
        if R % 2 == 0:
            dtrain.send(x, nxt)
            r = dtrain.recv(prv, out=out)
        else:
            r = dtrain.recv(prv, out=out)
            dtrain.send(x, nxt, token=r)
        check("recv out returns out [%s]" % kind.name, r is out)
        check_dev(tag("send/recv ring", kind, dt), kind, out, data(prv, dt, (2, 3), sl))


# ---- in place, out=, lists, bf16, tolerance ---------------------------------------
def t_out_and_lists(kind):
    sl = salt()
    x = kind.dev(data(R, np.float32, (4, 3), sl))
    want = reduce_ref([data(m, np.float32, (4, 3), sl) for m in range(S)], "sum", np.float32)
    check("allreduce out=x returns x [%s]" % kind.name, dtrain.allreduce(x, out=x) is x)
    check_dev("allreduce in place [%s]" % kind.name, kind, x, want)
    o = kind.dev(np.zeros((4, 3), np.float32))
    x = kind.dev(data(R, np.float32, (4, 3), sl))
    check("allreduce out=o returns o [%s]" % kind.name, dtrain.allreduce(x, out=o) is o)
    check_dev("allreduce out= [%s]" % kind.name, kind, o, want)
    sl = salt()
    x = kind.dev(data(R, np.int32, (5,), sl))
    check("broadcast out=x returns x [%s]" % kind.name, dtrain.broadcast(x, S - 1, out=x) is x)
    check_dev("broadcast in place [%s]" % kind.name, kind, x, data(S - 1, np.int32, (5,), sl))
    sl = salt()
    o = kind.dev(np.zeros((2, 2), np.float64))
    x = kind.dev(data(R, np.float64, (2 * S, 2), sl))
    full = reduce_ref([data(m, np.float64, (2 * S, 2), sl) for m in range(S)], "sum", np.float64)
    check("reduce_scatter out= returns out [%s]" % kind.name, dtrain.reduce_scatter(x, out=o) is o)
    check_dev("reduce_scatter out= [%s]" % kind.name, kind, o, full[2 * R:2 * R + 2])
    # lists: one fused call each
    for op in ("sum", "min"):
        sl = salt()
        specs = [(np.float32, (4,)), (np.int64, (2, 3)), (np.float16, (5,)), (np.uint8, (3,)),
                 (np.float64, ()), (np.int8, (0,)), (np.int32, (7,))]
        specs = [s for s in specs if s[0] in kind.dtypes]
        xs = [kind.dev(data(R, dt, sh, sl + i, op)) for i, (dt, sh) in enumerate(specs)]
        ys = dtrain.allreduce(xs, op)
        check("allreduce list returns a list [%s]" % kind.name,
              isinstance(ys, list) and len(ys) == len(xs))
        for i, ((dt, sh), y) in enumerate(zip(specs, ys)):
            check_dev(tag("allreduce list[%d]" % i, kind, dt, op), kind, y,
                      reduce_ref([data(m, dt, sh, sl + i, op) for m in range(S)], op, dt))
    one = kind.dev(np.ones(3, np.float32))
    check_dev("allreduce list of one gives the array [%s]" % kind.name, kind,
              dtrain.allreduce([one]), np.full(3, S, np.float32))
    outs = [kind.dev(np.zeros(3, np.float32)), kind.dev(np.zeros(2, np.int32))]
    res = dtrain.allreduce([kind.dev(np.ones(3, np.float32)), kind.dev(np.full(2, R, np.int32))],
                           out=outs)
    check("allreduce list out= returns out [%s]" % kind.name, res[0] is outs[0])
    check_dev("allreduce list out=[1] [%s]" % kind.name, kind, outs[1],
              np.full(2, S * (S - 1) // 2, np.int32))
    sl = salt()
    xs = [kind.dev(data(R, np.float32, (2, 2), sl)), kind.dev(data(R, np.int8, (3,), sl + 1))]
    ys = dtrain.allgather(xs, axis=-1)
    for i, (dt, sh) in enumerate(((np.float32, (2, 2)), (np.int8, (3,)))):
        check_dev(tag("allgather list[%d]" % i, kind, dt), kind, ys[i],
                  np.concatenate([data(m, dt, sh, sl + i) for m in range(S)], -1))
    outs = [kind.dev(np.zeros((2, 2 * S), np.float32)), kind.dev(np.zeros(3 * S, np.int8))]
    ys = dtrain.group_allgather(xs, axis=-1, out=outs)
    check("group_allgather out= returns out [%s]" % kind.name, ys[0] is outs[0])
    check_dev("group_allgather out=[0] [%s]" % kind.name, kind, outs[0],
              np.concatenate([data(m, np.float32, (2, 2), sl) for m in range(S)], -1))
    sl = salt()
    xs = [kind.dev(data(R, np.float32, (2 * S, 3), sl)), kind.dev(data(R, np.int64, (S,), sl + 1))]
    ys = dtrain.group_reduce_scatter(xs, "max")
    for i, (dt, sh) in enumerate(((np.float32, (2 * S, 3)), (np.int64, (S,)))):
        full = reduce_ref([data(m, dt, sh, sl + i) for m in range(S)], "max", dt)
        b = sh[0] // S
        check_dev(tag("group_reduce_scatter[%d]" % i, kind, dt), kind, ys[i],
                  full[b * R:b * (R + 1)])
    sl = salt()
    per = [kind.dev(data(R, np.float32, (3,), sl + k)) for k in range(S)]
    check_dev("reduce_scatter of one array per rank [%s]" % kind.name, kind,
              dtrain.reduce_scatter(per),
              reduce_ref([data(m, np.float32, (3,), sl + R) for m in range(S)], "sum", np.float32))


def t_bf16(kind):
    for op in ("sum", "max", "avg"):
        sl = salt()
        f = [data(m, np.float32, (6,), sl, op) for m in range(S)]
        x, dtype = kind.bf16(H.f32_to_bf16_bits(data(R, np.float32, (6,), sl, op)))
        y = dtrain.allreduce(x, op, dtype=dtype)
        check_dev("allreduce bf16 %s [%s]" % (op, kind.name), kind, y,
                  H.f32_to_bf16_bits(reduce_ref(f, op, np.float32)), x)


def t_random_floats(kind):
    """Real-valued random data: sums within rounding (paths sum in other
    orders): |error| <= S * eps * sum of |terms|."""
    for dt in (np.float32, np.float64):
        sl = salt()
        xs = np.stack([np.random.default_rng([seed(), m, sl]).standard_normal((257,)).astype(dt)
                       for m in range(S)]).astype(np.float64)
        tol = S * np.finfo(dt).eps * np.sum(np.abs(xs), 0)
        check_dev(tag("allreduce random normals", kind, dt), kind,
                  dtrain.allreduce(kind.dev(xs[R].astype(dt))), np.sum(xs, 0), tol=tol)


# ---- errors ---------------------------------------------------------------------
def t_errors(kind):
    d = kind.dev(np.zeros((2 * S, 2), np.float32))
    h = np.zeros((2 * S, 2), np.float32)
    mixed = {
        "allreduce x host, out device": (lambda: dtrain.allreduce(h, out=d), ("x is a numpy",
                                                                             "out is a")),
        "allreduce x device, out host": (lambda: dtrain.allreduce(d, out=h), ("out is a numpy",
                                                                             "x is a")),
        "allreduce list": (lambda: dtrain.allreduce([d, h]), ("x[1] is a numpy", "x[0]")),
        "allgather list": (lambda: dtrain.allgather([h, d]), ("x[0] is a numpy", "x[1]")),
        "group_allgather out": (lambda: dtrain.group_allgather([d], out=[h]), ("out[0]",)),
        "reduce_scatter list": (lambda: dtrain.reduce_scatter([d, h]), ("x[1] is a numpy",)),
        "group_reduce_scatter": (lambda: dtrain.group_reduce_scatter([h, d]), ("tensor_list[0]",)),
        "broadcast out": (lambda: dtrain.broadcast(d, 0, out=h), ("out is a numpy",)),
        "allreduce list out": (lambda: dtrain.allreduce([h], out=[d]), ("x[0] is a numpy",
                                                                       "out[0]")),
    }
    for name, (fn, words) in mixed.items():
        expect_raises("mixed host and device: %s [%s]" % (name, kind.name), TypeError, fn,
                      "host and device arrays in one call", *words)
    nc = kind.noncontig(np.zeros((4, 2 * S), np.float32))
    expect_raises("non-contiguous input [%s]" % kind.name, ValueError,
                  lambda: dtrain.allreduce(nc), "x is not c-contiguous")
    expect_raises("non-contiguous out [%s]" % kind.name, ValueError,
                  lambda: dtrain.allreduce(kind.dev(np.zeros(nc.shape, np.float32)), out=nc),
                  "out is not c-contiguous")
    expect_raises("non-contiguous list element [%s]" % kind.name, ValueError,
                  lambda: dtrain.allreduce([d, nc]), "x[1] is not c-contiguous")
    other = kind.other_device(np.zeros(4, np.float32))
    if other is not None:
        expect_raises("another device [%s]" % kind.name, ValueError,
                      lambda: dtrain.allreduce(other), "x is on cuda device",
                      "this rank's device is %d" % dtrain.cuda_device())
        expect_raises("another device, out [%s]" % kind.name, ValueError,
                      lambda: dtrain.allreduce(kind.dev(np.zeros(4, np.float32)), out=other),
                      "out is on cuda device")
    ro = kind.readonly(np.zeros(3, np.float32))
    if ro is not None:
        expect_raises("read-only out [%s]" % kind.name, ValueError,
                      lambda: dtrain.allreduce(kind.dev(np.zeros(3, np.float32)), out=ro),
                      "out is read-only")
        check_dev("read-only input is fine [%s]" % kind.name, kind, dtrain.allreduce(ro),
                  np.zeros(3, np.float32))
    for bad in getattr(kind, "bad_dtypes", (np.bool_, np.complex64)):
        b = kind.dev(np.zeros(2, bad))
        expect_raises("unsupported dtype %s [%s]" % (np.dtype(bad).name, kind.name), TypeError,
                      lambda: dtrain.allreduce(b), "unsupported dtype")
    expect_raises("out of the wrong shape [%s]" % kind.name, ValueError,
                  lambda: dtrain.allreduce(d, out=kind.dev(np.zeros(3, np.float32))),
                  "out has shape (3,)")
    expect_raises("out of the wrong dtype [%s]" % kind.name, ValueError,
                  lambda: dtrain.allreduce(d, out=kind.dev(np.zeros((2 * S, 2), np.int32))),
                  "dtype int32; expected shape (%d, 2) and dtype float32" % (2 * S))
    expect_raises("dtype= mismatch [%s]" % kind.name, ValueError,
                  lambda: dtrain.allreduce(d, dtype=np.float64), "does not match")
    if S > 1:
        expect_raises("reduce_scatter indivisible [%s]" % kind.name, ValueError,
                      lambda: dtrain.reduce_scatter(kind.dev(np.zeros(2 * S + 1, np.float32))),
                      "divisible by the group size")
    y = dtrain.allreduce(kind.dev(np.full(2, R + 1, np.int32)))
    check_dev("runtime usable after the errors [%s]" % kind.name, kind, y,
              np.full(2, S * (S + 1) // 2, np.int32))


def run(kind, sections=("reductions", "movement", "p2p", "out_and_lists", "bf16",
                        "random_floats", "errors")):
    """Run the sections for one kind (each guarded: an exception is one failure)."""
    seed()
    for name in sections:
        H.guarded("%s [%s]" % (name, kind.name), lambda: globals()["t_" + name](kind))
    sys.stdout.flush()
