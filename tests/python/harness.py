"""Shared helpers of the Python tests: a check counter that never raises (so
the ranks stay in step), deterministic per-rank inputs that every rank can
recompute for every other rank, and the rank_lists used at a given world size.

Each test script ends with ``finish()``, which prints ``N passed, M failed``
(summed over the ranks, on world rank 0; every rank prints its own failures as
they happen) and exits non-zero if anything failed on any rank."""
import os
import sys
import traceback

import numpy as np

import dtrain

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int32, np.int64]
OPS = ["sum", "prod", "min", "max", "avg"]

_passed = 0
_failed = 0
_rank = None


def rank():
    global _rank
    if _rank is None:
        _rank = dtrain.get_communicator().world_rank
    return _rank


def _report(name, detail):
    global _failed
    _failed += 1
    print("[rank %d] FAIL %s%s" % (rank(), name, (": " + detail) if detail else ""),
          file=sys.stderr, flush=True)


def check(name, cond, detail=""):
    """Record one check; True if it passed."""
    global _passed
    if cond:
        _passed += 1
        return True
    _report(name, detail() if callable(detail) else detail)
    return False


def check_array(name, got, want):
    """got equals want exactly: type, dtype, shape and values (NaN-free data)."""
    if not isinstance(got, np.ndarray):
        return check(name, False, "expected an ndarray, got %r" % (type(got).__name__,))
    ok = got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
    return check(name, ok, lambda: "got %s %s %s, want %s %s %s" % (
        got.dtype, got.shape, got.ravel()[:12], want.dtype, want.shape, want.ravel()[:12]))


def expect_raises(name, exc, fn, *contains, status=None):
    """fn() raises exc (a type or tuple) whose message contains every string of
    `contains` (case-insensitive); for DtrainError optionally the status name."""
    try:
        fn()
    except exc as e:
        msg = str(e).lower()
        miss = [c for c in contains if c.lower() not in msg]
        if miss:
            return check(name, False, "message %r lacks %r" % (str(e), miss))
        if status is not None and getattr(e, "status_name", None) != status:
            return check(name, False, "status %r, want %r (%s)"
                         % (getattr(e, "status_name", None), status, e))
        return check(name, True)
    except Exception as e:  # wrong exception type
        return check(name, False, "raised %s: %s, want %s" % (type(e).__name__, e, exc))
    return check(name, False, "did not raise %s" % (exc,))


def guarded(name, fn):
    """Run a test section; an unexpected exception counts as one failure."""
    try:
        fn()
    except Exception:
        _report(name, "exception:\n" + traceback.format_exc())


def finish():
    """Print the closing line and exit (non-zero on any failure on any rank)."""
    total = np.array([_passed, _failed], np.int64)
    try:
        total = dtrain.allreduce(total)
    except Exception as e:  # the library itself is broken: report locally
        print("[rank %d] could not sum the counts: %s" % (rank(), e), file=sys.stderr)
        total = np.array([_passed, _failed + 1], np.int64)
    if rank() == 0:
        print("%d passed, %d failed" % (total[0], total[1]), flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    code = 1 if total[1] or _failed else 0
    if code:
        os._exit(code)  # skip atexit finalize: peers may be stuck in a collective
    sys.exit(0)


# ---- deterministic inputs ----------------------------------------------------
def inp(r, dtype, shape, salt=0, op=None):
    """Rank r's input: small integers (floats: halves) so that every
    reduction is exact and no integer type overflows with up to 4 ranks
    (signed: [-2, 2]; uint8: [0, 2]; prod on floats avoids 0 for variety)."""
    n = int(np.prod(shape, dtype=np.int64))
    base = np.arange(n, dtype=np.int64)
    v = (base * 7 + r * 3 + salt * 5) % 5 - 2
    dt = np.dtype(dtype)
    if dt.kind == "u":
        v = (base * 7 + r * 3 + salt * 5) % 3
    if dt.kind == "f":
        v = v.astype(np.float64) * (0.5 if op != "prod" else 1.0)
    return v.astype(dt).reshape(shape)


def reduce_ref(arrays, op, dtype):
    """What the C library returns for op over `arrays` (same dtype)."""
    dt = np.dtype(dtype)
    st = np.stack([a.astype(np.float64) if dt.kind == "f" else a.astype(np.int64)
                   for a in arrays])
    n = len(arrays)
    if op == "sum":
        r = st.sum(0)
    elif op == "prod":
        r = st.prod(0)
    elif op == "min":
        r = st.min(0)
    elif op == "max":
        r = st.max(0)
    elif op == "avg":
        s = st.sum(0)
        if dt.kind == "f":
            # f16/bf16 and f32 divide in f32, f64 in f64, then round once
            if dt.itemsize <= 4:
                return (s.astype(np.float32) / np.float32(n)).astype(dt)
            return s / n
        r = (np.abs(s) // n) * np.sign(s)
    else:
        raise ValueError(op)
    return r.astype(dt)


def f32_to_bf16_bits(a):
    """float32 array -> bfloat16 bit patterns (uint16), round to nearest even."""
    b = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_bits_to_f32(h):
    return (h.astype(np.uint32) << 16).view(np.float32)


# ---- rank_lists ------------------------------------------------------------
def rank_lists(S):
    """rank_lists exercised at world size S (None = the world)."""
    out = [None, [list(range(S))]]
    if S >= 2:
        h = S // 2
        out.append([list(range(h)), list(range(h, S))])            # halves
        out.append([list(range(S - 1)), [S - 1]])                  # [[0..S-2],[S-1]]
        out.append([list(range(S - 1, 0, -1)), [0]])               # unsorted, group order
    if S >= 3:
        out.append([[S - 1, 1]])                                   # partial: others alone
    if S >= 4:
        out.append([list(range(S - 1, 0, -2)), list(range(0, S, 2))])  # interleaved
    return out


def members(r, rank_list, S):
    """World ranks of r's group (ascending); [r] if r is in no listed group."""
    if rank_list is None:
        return list(range(S))
    for g in rank_list:
        if r in g:
            return sorted(g)
    return [r]


def group_id(r, rank_list):
    if rank_list is None:
        return 0
    for i, g in enumerate(rank_list):
        if r in g:
            return i
    return -1


def env_info():
    return "python %s, numpy %s, lib %s" % (sys.version.split()[0], np.__version__,
                                           dtrain.library_path())
