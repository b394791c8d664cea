"""dtrain.distributed (alias dtrain.dist): configuration, communicators and
collective operators (RAF's ``raf.distributed``).

* ``get_config()``: the process-wide DistConfig (dtrain.distributed.config);
  ``get_context()``: the same object under seed 001's (Meta's) name.
* ``get_communicator(rank_list=None)``: the world communicator or this rank's
  sub-communicator for a rank_list (dtrain.distributed.communicator);
  ``set_default_communicator("mpi" | "void")``: the backend, before start.
* ``op``: the collective operators; ``dir(dtrain.distributed.op)`` lists them.
  They are also available here and at the package top level
  (``dtrain.allreduce``).
"""
from . import op
from .config import DistConfig, get_config, DistContext, get_context
from .communicator import (Communicator, get_communicator, normalize_rank_list,
                           set_default_communicator)
from .op import (allreduce, allgather, reduce, reduce_scatter, broadcast, all_to_all, gather,
                 scatter, send, recv, barrier, group_allgather, group_reduce_scatter)

__all__ = ["op", "DistConfig", "get_config", "DistContext", "get_context", "Communicator",
           "get_communicator", "normalize_rank_list", "set_default_communicator"] + list(op.__all__)
