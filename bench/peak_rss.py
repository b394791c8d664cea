#!/usr/bin/python3
"""Run a command and report its peak resident set size (ru_maxrss of the
child, Linux: KiB) on stderr as "peak_rss_kb RANK N", RANK from Open MPI's or
MPICH's environment (0 outside mpirun). Exits with the command's status.
    mpirun -np 2 python3 bench/peak_rss.py build/bin/dtrain-train ...
"""
import os, resource, subprocess, sys

rc = subprocess.call(sys.argv[1:])
rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
print("peak_rss_kb %s %d" % (rank, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss), file=sys.stderr, flush=True)
sys.exit(rc)
