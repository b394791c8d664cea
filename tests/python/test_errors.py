"""Bad inputs raise clear errors, identically on every rank that must see
them, and leave the runtime usable: unsupported dtypes, non-arrays, bad
computation names, bad rank_lists (structure, rank listed twice, out of
range, empty, ranks disagreeing), roots and peers outside the group, shape
mismatches, bad axes and out= arrays. DtrainError's fields."""
import numpy as np

import dtrain
from dtrain import distributed as dist
from dtrain import DtrainError

import harness as H
from harness import check, check_array, expect_raises

comm = dist.get_communicator()
R, S = comm.world_rank, comm.world_size
x32 = np.arange(4 * S, dtype=np.float32).reshape(2 * S, 2)


def still_works(name):
    y = dtrain.allreduce(np.array([R + 1], np.int32))
    check("runtime usable after " + name, int(y[0]) == S * (S + 1) // 2)


BAD_DTYPES = [np.bool_, np.complex64, np.uint16, np.uint32, np.uint64, np.int16,
              np.longdouble, object, "U3"]


def t_unsupported_dtypes():
    for dt in BAD_DTYPES:
        name = np.dtype(dt).name
        a = np.zeros((2 * S, 2), dtype=dt)
        calls = {
            "allreduce": lambda: dtrain.allreduce(a),
            "allreduce list": lambda: dtrain.allreduce([np.zeros(2, np.float32), a]),
            "allgather": lambda: dtrain.allgather(a),
            "reduce": lambda: dtrain.reduce(a, 0),
            "reduce_scatter": lambda: dtrain.reduce_scatter(a),
            "broadcast": lambda: dtrain.broadcast(a, 0),
            "all_to_all": lambda: dtrain.all_to_all(a),
            "gather": lambda: dtrain.gather(a, 0),
            "scatter": lambda: dtrain.scatter(a, 0),
            "send": lambda: dtrain.send(a, (R + 1) % S),
            "recv": lambda: dtrain.recv((R + 1) % S, (2,), dt),
            "scatter x=None": lambda: dtrain.scatter(None, S - 1, shape=(S,), dtype=dt)
            if R != S - 1 else dtrain.scatter(np.zeros(S, dt), S - 1),
        }
        for fn, call in calls.items():
            expect_raises("%s rejects %s" % (fn, name), TypeError, call, "unsupported dtype",
                          "supported: float16")
    expect_raises("message names the dtype", TypeError, lambda: dtrain.allreduce(
        np.zeros(2, np.complex128)), "complex128")
    # bf16 override needs uint16 bit patterns
    expect_raises("dtype='bf16' on float32", TypeError,
                  lambda: dtrain.allreduce(np.zeros(2, np.float32), dtype="bf16"), "uint16")
    expect_raises("dtype= mismatch", ValueError,
                  lambda: dtrain.allreduce(np.zeros(2, np.float32), dtype=np.float64),
                  "does not match")
    expect_raises("recv dtype not a dtype", TypeError,
                  lambda: dtrain.recv((R + 1) % S, 2, "nonsense"), "not a numpy dtype")
    still_works("dtype errors")


def t_not_arrays():
    for fn, call in {
        "allreduce float": lambda: dtrain.allreduce(3.0),
        "allreduce list of ints": lambda: dtrain.allreduce([1, 2]),
        "allgather list of lists": lambda: dtrain.allgather([[1, 2]]),
        "broadcast str": lambda: dtrain.broadcast("abc", 0),
        "reduce None": lambda: dtrain.reduce(None, 0),
    }.items():
        expect_raises(fn, TypeError, call, "numpy.ndarray")
    still_works("type errors")


def t_bad_computation():
    for bad in ("mean", "SUM", "", None, 1, "add"):
        for fn, call in {
            "allreduce": lambda: dtrain.allreduce(x32, bad),
            "allreduce list": lambda: dtrain.allreduce([x32], bad),
            "reduce": lambda: dtrain.reduce(x32, 0, bad),
            "reduce_scatter": lambda: dtrain.reduce_scatter(x32, bad),
            "reduce_scatter list": lambda: dtrain.reduce_scatter([x32], bad),
            "group_reduce_scatter": lambda: dtrain.group_reduce_scatter([x32], bad),
        }.items():
            expect_raises("%s computation=%r" % (fn, bad), ValueError, call, "computation",
                          "'sum', 'prod', 'min', 'max', 'avg'", repr(bad))
    still_works("bad computation")


def t_bad_rank_list():
    x = np.ones(2, np.float32)
    # structure: caught in Python, TypeError/ValueError, before any communication
    # a flat list is one group only for reduce and broadcast (RAF's spelling there)
    for bad, exc, msg in (([0, 1], TypeError, "list of groups"),
                          (3, TypeError, "list of groups"),
                          ([[0.5]], TypeError, "integers"),
                          ([[True]], TypeError, "integers"),
                          ([["0"]], TypeError, "integers"),
                          ("[[0,1", ValueError, "not valid text")):
        expect_raises("rank_list %r" % (bad,), exc, lambda: dtrain.allreduce(x, rank_list=bad),
                      msg)
    # values: checked by the library, collectively, DtrainError on every rank
    twice = [[0, 0]] if S == 1 else [[0, 1], [1] + list(range(2, S))]
    for bad, msgs in ((twice, ("listed twice",)),
                      ([[0, S]], ("out of range",)),
                      ([[S]], ("out of range", "rank %d" % S)),
                      ([[-1]], ("out of range",)),
                      ([], ("at least one group",)),
                      ([[]], ("empty",))):
        for fn, call in (("allreduce", lambda: dtrain.allreduce(x, rank_list=bad)),
                         ("allgather", lambda: dtrain.allgather(x, rank_list=bad)),
                         ("get_communicator", lambda: dist.get_communicator(bad))):
            expect_raises("%s rank_list=%r" % (fn, bad), DtrainError, call, *msgs,
                          status="DT_ERR_INVALID")
    # ranks disagreeing on the rank_list: MISMATCH everywhere, no hang
    if S >= 2:
        mine = [[0, 1]] if R == 0 else [[0], [1]]
        expect_raises("ranks pass different rank_lists", DtrainError,
                      lambda: dtrain.allreduce(x, rank_list=mine), "different rank_lists",
                      status="DT_ERR_MISMATCH")
    still_works("rank_list errors")


def t_roots_and_peers():
    x = np.ones(2 * S, np.float32)
    for fn, call in (("reduce", lambda r: dtrain.reduce(x, r)),
                     ("broadcast", lambda r: dtrain.broadcast(x, r)),
                     ("gather", lambda r: dtrain.gather(x, r)),
                     ("scatter", lambda r: dtrain.scatter(x, r))):
        for root in (S, -1, 100):
            expect_raises("%s root %d out of range" % (fn, root), DtrainError,
                          lambda: call(root), "root %d is out of range" % root,
                          status="DT_ERR_INVALID")
        for root in ("0", 1.5, True, [0]):
            expect_raises("%s root %r" % (fn, root), TypeError, lambda: call(root),
                          "root must be an int")
    # root outside the caller's group: the other group proceeds normally
    if S >= 2:
        rl = [list(range(S // 2)), list(range(S // 2, S))]
        in_g0 = R < S // 2
        xg = np.ones(2 * len(H.members(R, rl, S)), np.float32)  # divisible by the group size
        for fn, call in (("reduce", lambda: dtrain.reduce(x, 0, rank_list=rl)),
                         ("broadcast", lambda: dtrain.broadcast(x, 0, rank_list=rl)),
                         ("gather", lambda: dtrain.gather(x, 0, rank_list=rl)),
                         ("scatter", lambda: dtrain.scatter(xg, 0, rank_list=rl))):
            if in_g0:
                try:
                    call()
                    check("%s root in own group works" % fn, True)
                except Exception as e:
                    check("%s root in own group works" % fn, False, str(e))
            else:
                expect_raises("%s root outside group" % fn, DtrainError, call,
                              "not in this communicator's group", status="DT_ERR_INVALID")
    # peers
    expect_raises("send to self", DtrainError, lambda: dtrain.send(x, R), "calling rank itself",
                  status="DT_ERR_INVALID")
    expect_raises("recv from self", DtrainError, lambda: dtrain.recv(R, 2, np.float32),
                  "calling rank itself")
    expect_raises("send peer out of range", DtrainError, lambda: dtrain.send(x, S),
                  "peer %d is out of range" % S)
    expect_raises("send peer not int", TypeError, lambda: dtrain.send(x, 0.0), "peer must be")
    expect_raises("recv without shape", ValueError, lambda: dtrain.recv((R + 1) % S),
                  "shape and dtype")
    still_works("root/peer errors")


def t_int_ranges():
    """Issue 16 item 9: integers that do not fit their C type are refused before they
    cross into the library (they used to wrap modulo 2**32: rank 2**32+1 acted as 1)."""
    x = np.ones(2 * S, np.float32)
    big = [2 ** 32 + 1, 2 ** 31, -2 ** 31 - 1, 2 ** 64 + 1, np.int64(2 ** 32 + 1),
           np.uint64(2 ** 63)]
    for v in big:
        vi = int(v)
        for rl in ([[0, v]], [[v]], [[0], [v]]):
            for fn, call in (("allreduce", lambda: dtrain.allreduce(x, rank_list=rl)),
                             ("reduce_scatter", lambda: dtrain.reduce_scatter(x, rank_list=rl)),
                             ("get_communicator", lambda: dist.get_communicator(rl))):
                expect_raises("%s rank_list=%r" % (fn, rl), ValueError, call, "rank_list",
                              str(vi), "out of range")
        for fn, call in (("reduce", lambda: dtrain.reduce(x, v)),
                         ("broadcast", lambda: dtrain.broadcast(x, v)),
                         ("gather", lambda: dtrain.gather(x, v)),
                         ("scatter", lambda: dtrain.scatter(x, v)),
                         ("reduce flat rank_list", lambda: dtrain.reduce(x, 0, rank_list=[0, v])),
                         ("broadcast flat rank_list",
                          lambda: dtrain.broadcast(x, 0, rank_list=[0, v]))):
            what = "rank_list" if "rank_list" in fn else "root"
            expect_raises("%s %s=%d" % (fn, what, vi), ValueError, call, what, str(vi),
                          "out of range")
        expect_raises("send peer=%d" % vi, ValueError, lambda: dtrain.send(x, v), "peer",
                      str(vi), "out of range")
        expect_raises("recv peer=%d" % vi, ValueError, lambda: dtrain.recv(v, 2, np.float32),
                      "peer", str(vi), "out of range")
    # the three examples, by name
    expect_raises("rank_list=[[0, 2**32+1]]", ValueError,
                  lambda: dtrain.allreduce(x, rank_list=[[0, 2 ** 32 + 1]]), "rank_list",
                  "4294967297")
    expect_raises("root=2**32+1", ValueError, lambda: dtrain.reduce(x, 2 ** 32 + 1), "root",
                  "4294967297")
    expect_raises("send(x, 2**32+1)", ValueError, lambda: dtrain.send(x, 2 ** 32 + 1), "peer",
                  "4294967297")
    # shapes of arrays to be received: non-negative ints
    expect_raises("recv negative shape", ValueError,
                  lambda: dtrain.recv((R + 1) % S, (2, -1), np.float32), "shape", "-1")
    expect_raises("recv bool shape", TypeError,
                  lambda: dtrain.recv((R + 1) % S, (True, 2), np.float32), "shape")
    if R != 0:
        expect_raises("scatter x=None negative shape", ValueError,
                      lambda: dtrain.scatter(None, 0, shape=(-S,), dtype=np.float32), "shape")
    # train.fit passes its integers as flag text: the C flag parser checks the range
    for kw, flag in (({"max_steps": 2 ** 64 + 1}, "--max-steps"), ({"seed": 2 ** 32 + 1}, "--seed"),
                     ({"batch_size": 2 ** 32 + 64}, "--batch-size")):
        v = str(list(kw.values())[0])
        expect_raises("train.fit %s" % kw, DtrainError, lambda: dtrain.train.fit(**kw), flag, v,
                      "is not an integer in", status="DT_ERR_INVALID")
    # grad_comm_dtype: a config key, given as fit(grad_comm_dtype=...)
    expect_raises("train.fit grad_comm_dtype='fp8'", DtrainError, lambda: dtrain.train.fit(grad_comm_dtype="fp8"),
                  "--grad-comm-dtype", "'fp8' is not one of f32, bf16, f16", status="DT_ERR_INVALID")
    still_works("integer range errors")


def t_shapes():
    if S > 1:
        expect_raises("reduce_scatter first axis not divisible", ValueError,
                      lambda: dtrain.reduce_scatter(np.ones((2 * S + 1, 2), np.float32)),
                      "divisible by the group size %d" % S, "(%d, 2)" % (2 * S + 1))
        # total count divisible, first axis not
        expect_raises("reduce_scatter count divisible but axis 0 not", ValueError,
                      lambda: dtrain.reduce_scatter(np.ones((S + 1, S), np.float32)),
                      "x.shape[0]")
        expect_raises("group_reduce_scatter list element", ValueError,
                      lambda: dtrain.group_reduce_scatter([np.ones(S), np.ones(S + 1)]),
                      "tensor_list[1]", "divisible")
        expect_raises("all_to_all split axis not divisible", ValueError,
                      lambda: dtrain.all_to_all(np.ones((2, S + 1)), split_axis=1),
                      "not divisible by the group size")
        expect_raises("scatter not divisible", ValueError,
                      lambda: dtrain.scatter(np.ones(S + 1), 0), "divisible")
    # reduce_scatter of a list: one array per rank of the group, all of one shape and dtype
    for n in (S - 1, S + 1, 2 * S):
        expect_raises("reduce_scatter list of %d on %d ranks" % (n, S), ValueError,
                      lambda: dtrain.reduce_scatter([np.ones(2, np.float32)] * n),
                      "one array per rank", "%d arrays" % n, "group of %d" % S,
                      "group_reduce_scatter")
    if S >= 2:
        rl = [list(range(S))[::-1]] if S == 2 else [[0, 1], list(range(2, S))]
        expect_raises("reduce_scatter list length vs sub-group", ValueError,
                      lambda: dtrain.reduce_scatter([np.ones(2)] * S, rank_list=rl)
                      if S > 2 else dtrain.reduce_scatter([np.ones(2)] * 3, rank_list=rl),
                      "one array per rank", "group of 2")
        xs = [np.ones((2, 2), np.float32) for _ in range(S)]
        xs[-1] = np.ones((2, 3), np.float32)
        expect_raises("reduce_scatter list mixed shapes", ValueError,
                      lambda: dtrain.reduce_scatter(xs), "x[%d]" % (S - 1), "shape (2, 3)",
                      "(2, 2)")
        xs[-1] = np.ones((2, 2), np.float64)
        expect_raises("reduce_scatter list mixed dtypes", TypeError,
                      lambda: dtrain.reduce_scatter(xs), "x[%d]" % (S - 1), "float64", "float32")
        xs[-1] = np.ones((2, 2), np.float32)
        expect_raises("reduce_scatter list out shape", ValueError,
                      lambda: dtrain.reduce_scatter(xs, out=np.ones((1, 2), np.float32)),
                      "expected shape (2, 2)")
        if S >= 2:
            expect_raises("reduce_scatter list out overlaps another rank's array", DtrainError,
                          lambda: dtrain.reduce_scatter(xs, out=xs[(R + 1) % S]), "overlaps",
                          status="DT_ERR_INVALID")
    expect_raises("reduce_scatter empty list", ValueError, lambda: dtrain.reduce_scatter([]),
                  "one array per rank")
    expect_raises("reduce_scatter list of non-arrays", TypeError,
                  lambda: dtrain.reduce_scatter([[1.0]] * S), "numpy.ndarray")
    expect_raises("group_reduce_scatter needs a list", TypeError,
                  lambda: dtrain.group_reduce_scatter(np.ones(S)), "list")
    expect_raises("group_allgather needs a list", TypeError,
                  lambda: dtrain.group_allgather(np.ones(S), 0), "list")
    expect_raises("group_allgather out length", ValueError,
                  lambda: dtrain.group_allgather([np.ones(2)] * 2, 0, [np.ones(2 * S)]),
                  "list of 2")
    for fn, call in (("all_to_all", lambda: dtrain.all_to_all([np.ones(S)] * S)),
                     ("gather", lambda: dtrain.gather([np.ones(2)], 0)),
                     ("scatter", lambda: dtrain.scatter([np.ones(S)], 0))):
        expect_raises("%s of a list" % fn, TypeError, call, "one array", "not a list")
    expect_raises("reduce_scatter 0-d", ValueError,
                  lambda: dtrain.reduce_scatter(np.float32(1)), "divisible")
    expect_raises("all_to_all 0-d", ValueError, lambda: dtrain.all_to_all(np.float32(1)),
                  "at least one dimension")
    for axis in (3, -4):
        expect_raises("allgather axis %d" % axis, ValueError,
                      lambda: dtrain.allgather(np.ones((2, 2, 2)), axis=axis), "axis")
    expect_raises("all_to_all concat_axis", ValueError,
                  lambda: dtrain.all_to_all(np.ones((S, 2)), 0, 2), "concat_axis")
    expect_raises("gather axis", ValueError, lambda: dtrain.gather(np.ones(2), 0, axis=1),
                  "axis")
    expect_raises("allgather axis not an int", TypeError,
                  lambda: dtrain.allgather(np.ones(2), axis=0.0), "axis must be an int")
    if R != 0:
        expect_raises("scatter x=None without shape", ValueError,
                      lambda: dtrain.scatter(None, 0, dtype=np.float32), "shape=")
    else:
        expect_raises("scatter x=None on the root", ValueError,
                      lambda: dtrain.scatter(None, 0, shape=(S,), dtype=np.float32),
                      "root (world rank 0) must pass the array")
    # out=
    x = np.ones((2, 3), np.float32)
    for bad, exc, msg in ((np.ones((3, 2), np.float32), ValueError, "expected shape (2, 3)"),
                          (np.ones((2, 3), np.float64), ValueError, "dtype float32"),
                          ([0] * 6, TypeError, "out must be a numpy.ndarray")):
        expect_raises("allreduce out %s" % msg, exc, lambda: dtrain.allreduce(x, out=bad), msg)
    ro = np.ones((2, 3), np.float32)
    ro.setflags(write=False)
    expect_raises("allreduce out read-only", ValueError, lambda: dtrain.allreduce(x, out=ro),
                  "read-only")
    expect_raises("allreduce list out length", ValueError,
                  lambda: dtrain.allreduce([x, x], out=[x]), "list of 2")
    expect_raises("recv out dtype mismatch", ValueError,
                  lambda: dtrain.recv((R + 1) % S, 6, np.float64, out=x.ravel()), "dtype")
    expect_raises("recv out shape mismatch", ValueError,
                  lambda: dtrain.recv((R + 1) % S, (3, 3), out=x), "shape")
    still_works("shape errors")


def t_noncontig_inputs():
    """Non-contiguous inputs are copied: results equal those of a contiguous copy."""
    base = np.arange(8 * S * 3, dtype=np.float64).reshape(8 * S, 3) * (R + 1)
    views = {"T": base.T, "stride": base[::2], "neg": base[::-1], "col": base[:, 1]}
    for name, v in views.items():
        c = np.ascontiguousarray(v)
        check_array("allreduce %s" % name, dtrain.allreduce(v, "max"), dtrain.allreduce(c, "max"))
        check_array("allgather %s" % name, dtrain.allgather(v, -1), dtrain.allgather(c, -1))
        check_array("broadcast %s" % name, dtrain.broadcast(v, S - 1), dtrain.broadcast(c, S - 1))
        if v.shape[0] % S == 0:
            check_array("reduce_scatter %s" % name, dtrain.reduce_scatter(v),
                        dtrain.reduce_scatter(c))
            check_array("all_to_all %s" % name, dtrain.all_to_all(v), dtrain.all_to_all(c))
        check("view untouched %s" % name, np.array_equal(v, c))
    # misaligned: a float64 view at an odd byte offset
    raw = np.zeros(8 * 5 + 1, np.uint8)
    mis = raw[1:].view(np.float64)
    mis[:] = np.arange(5) + R
    check("misaligned view is misaligned", not mis.flags.aligned)
    check_array("allreduce misaligned", dtrain.allreduce(mis),
                np.arange(5, dtype=np.float64) * S + sum(range(S)))


def t_error_object():
    try:
        dist.get_communicator([[S + 7]])
        check("DtrainError raised", False)
    except DtrainError as e:
        check("DtrainError is a RuntimeError", isinstance(e, RuntimeError))
        check("status", e.status == -1 and e.status_name == "DT_ERR_INVALID",
              (e.status, e.status_name))
        check("message from dt_last_error", "rank %d in group 0 is out of range" % (S + 7)
              in e.message, e.message)
        check("function", e.function == "get_communicator", e.function)
        check("str has all", "DT_ERR_INVALID" in str(e) and "dtrain.get_communicator" in str(e),
              str(e))


class _DeviceLike:
    """A bare __cuda_array_interface__ (no memory behind it is ever touched:
    every call below fails before)."""

    def __init__(self):
        self.__cuda_array_interface__ = {"version": 3, "shape": (2,), "typestr": "<f4",
                                         "data": (4096, False), "stream": None}


def t_device_arrays_here():
    """Device arrays where none can be used (tests/python/test_device_fake.py
    has the rest): host and device arrays mixed are refused before anything
    moves, in any build; a process without a CUDA device refuses a device
    array with the library's reason."""
    d = _DeviceLike()
    h = np.zeros(2, np.float32)
    expect_raises("host x, device out", TypeError, lambda: dtrain.allreduce(h, out=d),
                  "dtrain.allreduce: host and device arrays in one call", "x is a numpy array",
                  "out is a")
    expect_raises("device then host in a list", TypeError, lambda: dtrain.allgather([d, h]),
                  "x[1] is a numpy array", "x[0] is a")
    expect_raises("recv into a device out with a host token", TypeError,
                  lambda: dtrain.recv(R, out=d, token=object()), "token must be None or an array")
    if dtrain.cuda_device() is None:
        expect_raises("a device array without a CUDA device", DtrainError,
                      lambda: dtrain.allreduce(d, out=d), "x is a cuda device array",
                      "this process has no cuda device", status="DT_ERR_UNSUPPORTED")
        expect_raises("a device array without a CUDA device (send)", DtrainError,
                      lambda: dtrain.send(d, R), "no cuda device", status="DT_ERR_UNSUPPORTED")
    still_works("device arrays")


for name, fn in list(globals().items()):
    if name.startswith("t_") and callable(fn):
        H.guarded(name, fn)
H.finish()
