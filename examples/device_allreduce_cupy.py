#!/usr/bin/python3
"""examples/device_allreduce_cupy.py - the seeds' AllReduce examples (RAF's
distribution mechanism, seeds 001 and 003) with CuPy arrays on the GPU:
each rank binds a GPU, reduces a device array, then the grouping table
(rank_list) of seed 003.

    mpirun -np 4 python3 examples/device_allreduce_cupy.py   (PYTHONPATH=python in a build tree)

Exits 77 with a message where CuPy or a CUDA device is absent."""
import sys

import numpy as np

try:  # before dtrain's first call: see docs/python.md, "Device arrays"
    import cupy as cp
except ImportError as e:
    cp, missing = None, e

import dtrain
from dtrain import distributed as dist

dcfg = dist.get_config()
root_rank = dcfg.root_rank     # The root rank.
size = dcfg.size               # The number of total MPI processes.
rank = dcfg.rank               # The rank of this process, ranging from 0 to (size - 1).
local_rank = dcfg.local_rank   # The local rank of this process on this machine.
local_size = dcfg.local_size   # The number of local MPI processes on this machine.

# The GPU this process binds to: local_rank modulo the GPUs it sees, chosen when
# dtrain started (cuda(local_rank) when every rank has a GPU of its own).
device = dtrain.cuda_device()
try:
    if cp is None:
        raise missing
    if device is None:
        raise RuntimeError("this process has no CUDA device")
    cp.cuda.Device(device).use()
except Exception as e:  # noqa: BLE001 - ImportError, no GPU, a CuPy without CUDA
    print("device_allreduce_cupy: skipped: CuPy on a CUDA device is needed: %s" % e)
    sys.exit(77)

x = np.ones(shape=(1, 4), dtype="float32") * (rank + 1)
x = cp.asarray(x)              # raf.array(x, device=device)
print("Before allreduce: ", x)
x = dtrain.allreduce(x)
# Equivalent to: x = dtrain.allreduce([x], "sum")
print("After allreduce : ", x)
assert isinstance(x, cp.ndarray) and (x == size * (size + 1) // 2).all()

# Grouping (seed 003): every rank talks to its own group only
tables = [None, [list(range(size))]]
if size >= 2:
    tables += [[list(range(size // 2)), list(range(size // 2, size))],
               [list(range(size - 1)), [size - 1]], [list(range(size - 1))]]
for rank_list in tables:
    x = cp.ones((1, 4), "float32") * (rank + 1)
    y = dtrain.allreduce([x], "sum", rank_list=rank_list)
    group = [g for g in (rank_list or [list(range(size))]) if rank in g] or [[rank]]
    assert isinstance(y, cp.ndarray) and (y == sum(m + 1 for m in group[0])).all()
    if rank == 0:
        print("AR(%s) on rank 0: %s" % (rank_list, y[0, 0]))
print("rank %d of %d: device allreduce on cuda(%d) as the seeds' tables say" % (rank, size, device))
