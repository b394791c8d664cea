"""depart_prog.py MODE - rank 1 leaves the job while rank 0 still expects it
(issue 16, item 5), after five allreduces on the world:
  raise     rank 1 raises an exception (the interpreter exits through the
            package's exit hook, which calls dt_finalize)
  exit      rank 1 calls sys.exit(3)
  finalize  rank 1 calls dtrain.finalize() early, then sleeps
Rank 0 (and any other) calls a sixth allreduce. tests/python/CMakeLists.txt
runs it through tests/fault/expect_fail.sh: every rank must end within a
bound far below DTRAIN_TIMEOUT, with a message naming rank 1."""
import sys
import time

import numpy as np

import dtrain
from dtrain import distributed as dist

mode = sys.argv[1] if len(sys.argv) > 1 else "raise"
comm = dist.get_communicator()
x = np.ones(64, "float32")
for _ in range(5):
    dtrain.allreduce(x)
if comm.rank == 1:
    if mode == "raise":
        raise RuntimeError("depart_prog: rank 1 gives up")
    if mode == "exit":
        sys.exit(3)
    if mode == "finalize":
        dtrain.finalize()
        time.sleep(60)
        sys.exit(0)
dtrain.allreduce(x)
print("depart_prog: rank %d finished (it should not have)" % comm.rank)
