#!/usr/bin/python3
"""examples/device_collectives_torch.py - seed 004's collectives (PyTorch's
broadcast, reduce, all_reduce, scatter, gather, all_gather, barrier) and its
DDP gradient averaging, with dtrain on PyTorch CUDA tensors.

    mpirun -np 2 python3 examples/device_collectives_torch.py   (PYTHONPATH=python in a build tree)

dtrain's operators return new tensors (RAF's style) or write ``out=``;
``out=t`` is PyTorch's in-place form. Exits 77 with a message where PyTorch
with CUDA or a CUDA device is absent."""
import sys

try:  # before dtrain's first call: see docs/python.md, "Device arrays"
    import torch
except ImportError as e:
    torch, missing = None, e

import dtrain
from dtrain import distributed as dist

comm = dist.get_communicator()
rank, size = comm.rank, comm.size
device = dtrain.cuda_device()       # local_rank modulo the GPUs this process sees
try:
    if torch is None:
        raise missing
    if device is None:
        raise RuntimeError("this process has no CUDA device")
    if not torch.cuda.is_available():
        raise RuntimeError("torch %s has no CUDA" % torch.__version__)
    torch.cuda.set_device(device)
except Exception as e:  # noqa: BLE001 - ImportError, no GPU, a CPU-only torch
    print("device_collectives_torch: skipped: PyTorch with CUDA is needed: %s" % e)
    sys.exit(77)
cuda = torch.device("cuda", device)

# dist.broadcast(tensor, src): in place with out=
t = torch.full((4,), float(rank), device=cuda)
dtrain.broadcast(t, 0, out=t)
assert (t == 0).all()
# dist.reduce(tensor, dst, op): the result on the root, None elsewhere
r = dtrain.reduce(torch.full((4,), rank + 1.0, device=cuda), 0, "sum")
assert (r is None) if rank else (r == size * (size + 1) / 2).all()
# dist.all_reduce(tensor, op): in place
t = torch.full((2, 3), rank + 1.0, device=cuda)
dtrain.allreduce(t, "max", out=t)
assert (t == size).all()
# dist.scatter(tensor, scatter_list, src): block k of the root's tensor to rank k
full = torch.arange(2 * size, dtype=torch.float32, device=cuda)
s = dtrain.scatter(full, 0)
assert s.is_cuda and s.tolist() == [2.0 * rank, 2.0 * rank + 1]
# dist.gather(tensor, gather_list, dst) / dist.all_gather(tensor_list, tensor)
g = dtrain.gather(torch.full((1, 2), float(rank), device=cuda), 0)
a = dtrain.allgather(torch.full((1, 2), float(rank), device=cuda))
assert a.shape == (size, 2) and a[:, 0].tolist() == [float(m) for m in range(size)]
assert (g is None) if rank else torch.equal(g, a)
dtrain.barrier()

# DDP's gradient averaging (seed 004): all_reduce each gradient, divide by the size
torch.manual_seed(0)                # the same model on every rank
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(cuda)
torch.manual_seed(1 + rank)         # each rank its own batch
x, y = torch.randn(32, 8, device=cuda), torch.randn(32, 1, device=cuda)
torch.nn.functional.mse_loss(model(x), y).backward()
for param in model.parameters():
    dtrain.allreduce(param.grad, "sum", out=param.grad)
    param.grad /= size
# every rank holds the same averaged gradient
first = dtrain.allgather(model[0].weight.grad.reshape(1, -1))
assert all(torch.equal(first[0], first[k]) for k in range(size))
print("rank %d of %d: seed 004's collectives and DDP averaging on cuda:%d (%s path)"
      % (rank, size, device, comm.device_path))
