#!/usr/bin/env python3
"""Cost of the Python front on a small allreduce: a 4 KB float32 sum on 2
ranks timed call by call (median), from Python and from C.

Driver mode (no launcher): runs the two measurements under mpirun and prints
the comparison::

    PYTHONPATH=python DTRAIN_LIBRARY=build/lib/libdtrain.so \\
        /usr/bin/python3 bench/py_overhead.py --c-exe build/bin/c_allreduce_small

Worker mode (under mpirun, what the driver launches; usable directly)::

    mpirun -np 2 /usr/bin/python3 bench/py_overhead.py [--c-us 2.1]

Timing: calls are timed in blocks of --block consecutive calls (block time /
block = one sample) and the median of the samples is taken; timing single
calls of a collective on one rank would hide the caller's own overhead (the
peer is already waiting when the call starts). Python-side variants are
interleaved round by round so that machine noise hits them alike (the best
per-round median of each is kept):

  raw      ctypes call of dt_allreduce on preallocated buffers, pointers
           computed once: the ctypes call cost plus the C call
  out      dtrain.allreduce(x, out=y): the public API without allocation
  new      dtrain.allreduce(x): the public API, new result array
  list     dtrain.allreduce([x]): the fused-list path with one array

The C side (bench/programs/c_allreduce_small.c, built by bench/programs/CMakeLists.txt)
times dt_allreduce and MPI_Allreduce on the same buffers the same way.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

LAUNCHER_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK")


def worker(args):
    import numpy as np
    import dtrain
    from dtrain import _lib
    from dtrain.distributed import communicator

    comm = dtrain.get_communicator()
    n = args.bytes // 4
    x = (np.arange(n) % 7).astype(np.float32)
    y = np.empty_like(x)
    lib = _lib.lib
    world = communicator.resolve(None, "bench")
    xp, yp = x.ctypes.data, y.ctypes.data
    raw_fn = lib.dt_allreduce
    clock = time.perf_counter_ns

    # Each runner makes k calls; the time of each block of `block` consecutive
    # calls divided by `block` is one sample (everything the loop does counts).
    block = args.block

    def timed(call, k, t):
        for b in range(k // block):
            t0 = clock()
            for _ in range(block):
                call()
            t[b] = (clock() - t0) / block

    ar = dtrain.allreduce
    xs = [x]
    modes = [("raw", lambda: raw_fn(xp, yp, n, 0, 0, world)),
             ("out", lambda: ar(x, out=y)),
             ("new", lambda: ar(x)),
             ("list", lambda: ar(xs))]
    best = {m: float("inf") for m, _ in modes}
    nblocks = max(args.iters // block, 1)
    t = [0.0] * nblocks
    # correctness first
    want = x * comm.size
    assert np.array_equal(dtrain.allreduce(x), want)
    for _ in range(args.rounds):
        for name, call in modes:
            for _ in range(args.warmup):
                call()
            dtrain.barrier()
            timed(call, nblocks * block, t)
            med = sorted(t)[len(t) // 2] / 1000.0
            best[name] = min(best[name], med)
    assert np.array_equal(y, want)
    if comm.rank == 0:
        print("py_raw_us=%.3f py_out_us=%.3f py_new_us=%.3f py_list_us=%.3f bytes=%d ranks=%d "
              "iters=%d rounds=%d" % (best["raw"], best["out"], best["new"], best["list"],
                                      args.bytes, comm.size, args.iters, args.rounds))
        if args.c_us:
            print("ratio dtrain.allreduce(x) / C dt_allreduce = %.2f" % (best["new"] / args.c_us))
    return 0


def parse_kv(text):
    return {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", text)}


def measure(launch, args, env, common):
    """Alternating C / Python runs under `launch` (a command prefix, [] for
    standalone); the best (lowest) value of each key over the runs."""
    c, py = None, None
    for _ in range(args.repeat):
        if args.c_exe:
            p = subprocess.run(launch + [args.c_exe] + common, env=env, capture_output=True,
                               text=True)
            if p.returncode:
                raise RuntimeError("C run failed:\n" + p.stdout + p.stderr)
            got = parse_kv(p.stdout)
            c = got if c is None else {k: min(v, got[k]) for k, v in c.items()}
        p = subprocess.run(launch + [sys.executable, os.path.abspath(__file__), "--worker"] +
                           common, env=env, capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError("Python run failed:\n" + p.stdout + p.stderr)
        got = parse_kv(p.stdout)
        py = got if py is None else {k: min(v, got[k]) for k, v in py.items()}
    return c, py


def report(title, c, py):
    print(title)
    rows = []
    if c and "mpi_us" in c:
        rows.append(("C   MPI_Allreduce", c["mpi_us"]))
    if c:
        rows.append(("C   dt_allreduce", c["dtrain_us"]))
    rows += [("py  ctypes dt_allreduce (raw pointers)", py["py_raw_us"]),
             ("py  dtrain.allreduce(x, out=y)", py["py_out_us"]),
             ("py  dtrain.allreduce(x)", py["py_new_us"]),
             ("py  dtrain.allreduce([x])", py["py_list_us"])]
    for name, us in rows:
        print("  %-40s %8.2f us" % (name, us))
    refs = [("C dt_allreduce", c["dtrain_us"])] if c else []
    refs.append(("ctypes raw dt_allreduce", py["py_raw_us"]))
    for ref_name, ref in refs:
        for what, key in (("dtrain.allreduce(x)", "py_new_us"),
                          ("dtrain.allreduce(x, out=y)", "py_out_us")):
            print("  ratio %s / %s = %.2f  (%+.2f us)"
                  % (what, ref_name, py[key] / ref, py[key] - ref))
    if c:
        print("  ratio ctypes raw / C dt_allreduce = %.2f  (%+.2f us)"
              % (py["py_raw_us"] / c["dtrain_us"], py["py_raw_us"] - c["dtrain_us"]))


def driver(args):
    mpirun = shutil.which("mpirun") or shutil.which("mpiexec")
    if not mpirun:
        print("mpirun not found", file=sys.stderr)
        return 1
    env = dict(os.environ)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    base = [mpirun] + (["--oversubscribe"] if "Open MPI" in subprocess.run(
        [mpirun, "--version"], capture_output=True, text=True).stdout else []) + \
        ["-np", str(args.np)]
    common = ["--bytes", str(args.bytes), "--iters", str(args.iters), "--warmup",
              str(args.warmup), "--rounds", str(args.rounds), "--block", str(args.block)]
    how = ("time per call, median over blocks of %d calls (%d calls per round, best of %d "
           "rounds x %d alternating C/Python runs), rank 0"
           % (args.block, args.iters, args.rounds, args.repeat))
    # 1. the real thing: MPI, args.np ranks
    c, py = measure(base, args, env, common)
    report("%d-byte float32 sum allreduce, %d ranks (MPI): %s" % (args.bytes, args.np, how), c, py)
    # 2. standalone (void backend, no communication: the call is a 4 KB copy):
    #    isolates the per-call cost of the API layers from MPI latency and load
    if not args.no_standalone:
        env1 = {k: v for k, v in env.items() if not k.startswith(("OMPI_COMM_WORLD", "PMIX_"))}
        env1["DTRAIN_BACKEND"] = "void"
        c1, py1 = measure([], args, env1, common)
        report("same, standalone (void backend: no communication, isolates the call "
               "overhead)", c1, py1)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bytes", type=int, default=4096)
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--block", type=int, default=50, help="calls per timed block")
    ap.add_argument("--np", type=int, default=2, help="ranks (driver mode)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="alternating C / Python runs (driver mode)")
    ap.add_argument("--c-exe", help="path of c_allreduce_small (driver mode)")
    ap.add_argument("--no-standalone", action="store_true",
                    help="skip the standalone (void backend) comparison (driver mode)")
    ap.add_argument("--c-us", type=float, help="C time to compare with (worker mode)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker or any(v in os.environ for v in LAUNCHER_VARS):
        return worker(args)
    return driver(args)


if __name__ == "__main__":
    sys.exit(main())
