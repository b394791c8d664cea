"""dtrain: the Python front of the dtrain C runtime (ctypes, numpy arrays).

    import numpy as np
    import dtrain
    from dtrain import distributed as dist

    comm = dist.get_communicator()              # starts the runtime on first use
    x = np.ones((1, 4), "float32") * (comm.rank + 1)
    y = dtrain.allreduce(x)                      # sum over all ranks
    z = dtrain.allreduce([x], "sum", rank_list=[[0, 1], [2, 3]])

Run under a launcher: ``mpirun -np 4 python3 script.py``; without one the
runtime is standalone (size 1). The runtime starts on first use (or with
dtrain.init()) and is finalised at interpreter exit (or by dtrain.finalize()).
Errors reported by the C library raise dtrain.DtrainError (a RuntimeError).
libdtrain is located as described in dtrain._lib (DTRAIN_LIBRARY first).
dtypes: float16, float32, float64, int8, uint8, int32, int64; bfloat16 as
uint16 bit patterns with dtype="bf16", or as ml_dtypes.bfloat16 arrays when
ml_dtypes is installed (then dtrain.bfloat16 is that dtype, else None).

CUDA device arrays (CuPy, PyTorch CUDA tensors, __cuda_array_interface__ or
DLPack) are taken too, and give results of the input's kind (see
dtrain.distributed.op, "Device arrays"); dtrain.cuda_device() is this rank's
GPU, chosen when the runtime starts (dtrain.init(device=...)).
"""
import sys as _sys

from ._lib import (DtrainError, LibraryNotFoundError, init, finalize, is_initialized,
                   library_path, cuda_device)
from . import distributed
from .distributed import (allreduce, allgather, reduce, reduce_scatter, broadcast, all_to_all,
                          gather, scatter, send, recv, barrier, group_allgather,
                          group_reduce_scatter, get_config, get_context, get_communicator)
from ._dtypes import BFLOAT16 as bfloat16
from . import train

dist = distributed
_sys.modules[__name__ + ".dist"] = distributed

__version__ = "0.1.0"

__all__ = ["DtrainError", "LibraryNotFoundError", "init", "finalize", "is_initialized",
           "library_path", "cuda_device", "distributed", "dist", "allreduce", "allgather", "reduce",
           "reduce_scatter", "broadcast", "all_to_all", "gather", "scatter", "send", "recv",
           "barrier", "group_allgather", "group_reduce_scatter", "get_config", "get_context",
           "get_communicator", "bfloat16", "train", "__version__"]
