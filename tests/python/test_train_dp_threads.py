"""dtrain.train.fit(..., dp_threads=N) (issue 17 part 2): data parallel over
threads of one process, no launcher needed. With 2 threads (and 3: an uneven
split of the batch) the saved model equals the 1-thread run's within 1e-5
(max|a - b| / max|b|) after 50 steps, and so do the losses; dp_threads 0 and
more threads than the batch raise DtrainError(DT_ERR_INVALID). Standalone, and
under mpiexec (threads within each rank, DDP across)."""
import json
import os
import sys
import tempfile

import numpy as np

import dtrain
from dtrain import distributed as dist

import harness as H
from harness import check, expect_raises

comm = dist.get_communicator()
R, S = comm.world_rank, comm.world_size
TMP = tempfile.mkdtemp(prefix="dtrain-dpt-")


def load_safetensors(path):
    """Every tensor of the file, concatenated in file order, as float32."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    parts = []
    for k, v in sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                       key=lambda kv: kv[1]["data_offsets"][0]):
        a, b = v["data_offsets"]
        parts.append(np.frombuffer(data[a:b], dtype=np.float32))
    return np.concatenate(parts)


def run(threads, name):
    path = os.path.join(TMP, "%s_%d.safetensors" % (name, R))
    res = dtrain.train.fit(model="mlp", hidden1=64, hidden2=32, batch_size=24, max_steps=50, epochs=1,
                           train_limit=24 * 50 * S, eval=False, lr=0.05, seed=7, dp_threads=threads,
                           save_model=path, quiet=True)
    return res, load_safetensors(path) if R == 0 else None  # rank 0 writes the model


def t_fit_dp_threads_equal():
    r1, p1 = run(1, "one")
    for n in (2, 3):
        rn, pn = run(n, "n%d" % n)
        check("%d threads: 50 steps" % n, rn["steps"] == 50, rn)
        if R == 0:
            err = float(np.max(np.abs(pn - p1)) / np.max(np.abs(p1)))
            check("%d threads: parameters equal 1 thread's (rel err %.3g <= 1e-5)" % (n, err), err <= 1e-5, err)
        check("%d threads: loss equals 1 thread's" % n,
              abs(rn["last_loss"] - r1["last_loss"]) <= 1e-5 * abs(r1["last_loss"]), (rn, r1))


def t_fit_dp_threads_errors():
    expect_raises("dp_threads 0", dtrain.DtrainError, lambda: dtrain.train.fit(model="mlp", dp_threads=0),
                  "flag --dp-threads: '0' is not an integer", status="DT_ERR_INVALID")
    expect_raises("more threads than the batch", dtrain.DtrainError,
                  lambda: dtrain.train.fit(model="mlp", dp_threads=5, batch_size=4, max_steps=1, quiet=True),
                  "--dp-threads 5 is more than --batch-size 4", status="DT_ERR_INVALID")


for name, fn in list(globals().items()):
    if name.startswith("t_") and callable(fn):
        H.guarded(name, fn)
print("%s%d passed, %d failed" % ("[rank %d] " % R if S > 1 else "", H._passed, H._failed))
sys.exit(1 if H._failed else 0)
