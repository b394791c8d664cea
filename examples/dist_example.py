#!/usr/bin/python3
"""examples/dist_example.py - RAF's scripts/distributed/dist_example.py in
dtrain: set the distributed config from a dict, then train LeNet on
Fashion-MNIST data parallel through the C trainer.

    mpirun -np 4 python3 examples/dist_example.py      (PYTHONPATH=python in a build tree)
"""
import os

import dtrain
from dtrain import distributed as dist

dtrain_dist_config = {
    "enable_data_parallel": True,
    "zero_opt_level": 1,  # ZeRO-1: optimizer state sharded across ranks
}

dcfg = dist.get_config()
dcfg.update(dtrain_dist_config)
comm = dist.get_communicator()
if comm.rank == 0:
    print("dist config:", dcfg.dumps())

# DIST_EXAMPLE_MAX_STEPS shortens the run (the test suite uses it)
max_steps = int(os.environ.get("DIST_EXAMPLE_MAX_STEPS", "-1"))  # -1: no limit
result = dtrain.train.fit(model="lenet", epochs=1, batch_size=64, lr=0.05, max_steps=max_steps, quiet=True)
if comm.rank == 0:
    print("rank %d of %d: %d steps, train loss %.4f, test accuracy %.2f%%"
          % (comm.rank, comm.size, result["steps"], result["last_loss"], 100 * result["test_acc"]))
assert result["steps"] > 0 and result["last_loss"] == result["last_loss"]  # trained, loss not NaN
