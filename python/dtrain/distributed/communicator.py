"""Communicators: the world and the sub-communicators named by a rank_list.

A ``rank_list`` is a list of disjoint groups of WORLD ranks, e.g.
``[[0, 1], [2, 3]]``. Each rank talks only to the ranks of its own group; a
rank listed in no group runs standalone (size 1, ``group_id`` -1), so
``[[0, 1, 2]]`` behaves like ``[[0, 1, 2], [3]]`` on 4 ranks (but write every
rank out explicitly). Inside a group ranks are numbered by ascending world
rank; ``group_id`` is the index of the rank's group in the list as written.

The sub-communicator of a rank_list is created on first use by a collective
call over the WORLD: every world rank must make its first call with a given
rank_list at the same point (ordinary SPMD code does). Creation is then cached
(here, by the rank_list as written, and in the C pool, by its canonical form).
A rank listed twice or a rank outside ``[0, world_size)`` raises DtrainError
(status DT_ERR_INVALID) on every rank; ranks that pass different rank_lists
get DT_ERR_MISMATCH on every rank. A rank that does not even fit a C int
(e.g. ``2**32 + 1``) raises ValueError before anything is sent.

``reduce`` and ``broadcast`` also take RAF's spelling there, a flat list of
the ranks of ONE group (``rank_list=[0, 1]`` is ``[[0, 1]]``).
"""
import ctypes
import json
import operator
import os

from .. import _lib

__all__ = ["Communicator", "get_communicator", "normalize_rank_list", "set_default_communicator"]


# The range of a C int: every integer handed to libdtrain as an int is checked
# against it first (ctypes would silently keep its low 32 bits: rank 2**32+1
# would reach the library as rank 1).
INT_MIN, INT_MAX = -2 ** 31, 2 ** 31 - 1


def _is_flat(rank_list):
    return (isinstance(rank_list, (list, tuple)) and len(rank_list) > 0 and
            not any(isinstance(g, (list, tuple)) for g in rank_list))


def normalize_rank_list(rank_list, fn="get_communicator", flat=False):
    """rank_list as a tuple of tuples of ints (the groups as written).

    Accepts lists/tuples of lists/tuples of integers (numpy integers too) or
    the same as JSON text ``"[[0,1],[2,3]]"``. With ``flat=True`` (reduce and
    broadcast, RAF's spelling there) a flat list of ranks ``[0, 1]`` is also
    accepted, as the one group ``[[0, 1]]``. The structure is checked here,
    and that every rank fits a C int (ValueError: it would wrap); emptiness,
    ranges and duplicates are checked by the C library, collectively, so that
    every rank raises the same error."""
    if isinstance(rank_list, str):
        try:
            rank_list = json.loads(rank_list)
        except ValueError as e:
            raise ValueError("dtrain.%s: rank_list %r is not valid text like '[[0, 1], [2, 3]]': %s"
                             % (fn, rank_list, e)) from None
    if flat and _is_flat(rank_list):
        rank_list = [rank_list]
    if not isinstance(rank_list, (list, tuple)):
        raise TypeError("dtrain.%s: rank_list must be a list of groups of world ranks, e.g. "
                        "[[0, 1], [2, 3]]; got %s" % (fn, type(rank_list).__name__))
    groups = []
    for gi, g in enumerate(rank_list):
        if not isinstance(g, (list, tuple)):
            raise TypeError("dtrain.%s: rank_list must be a list of groups (lists) of world ranks, "
                            "e.g. [[0, 1], [2, 3]]; got element %r in %r" % (fn, g, rank_list))
        ranks = []
        for r in g:
            if isinstance(r, bool):
                raise TypeError("dtrain.%s: rank_list entries must be integers, got %r" % (fn, r))
            try:
                v = operator.index(r)
            except TypeError:
                raise TypeError("dtrain.%s: rank_list entries must be integers, got %r (%s)"
                                % (fn, r, type(r).__name__)) from None
            if not INT_MIN <= v <= INT_MAX:
                raise ValueError("dtrain.%s: rank_list: rank %d in group %d is out of range: a "
                                 "world rank is in [0, world size)" % (fn, v, gi))
            ranks.append(v)
        groups.append(tuple(ranks))
    return tuple(groups)


class Communicator:
    """A dtrain communicator (read-only attributes, as in seed 003's table).

    ``rank``/``size``: this process's index in the communicator / its number
    of ranks. ``local_rank``/``local_size``: the same counting only the
    communicator's ranks on this host. ``world_rank``/``world_size`` (aliases
    ``global_rank``/``global_size``): index in / size of the world.
    ``group_id``/``group_size``: index of this rank's group in the rank_list /
    number of listed groups (-1 / n if this rank is in no listed group; the
    world communicator has 0 / 1). ``root_rank``: the WORLD rank of the first
    (lowest) member, 0 for the world. ``members``: world ranks of the members,
    ascending. ``rank_list``: the rank_list as given (None for the world).
    ``backend``: "mpi" or "void" (standalone). ``device_path``: how device
    arrays move ("nccl", "staged", "local", "none").

    Communicators belong to the library and die at ``dtrain.finalize()``;
    using one afterwards raises RuntimeError.
    """

    __slots__ = ("_handle", "_gen", "rank", "size", "local_rank", "local_size", "world_rank",
                 "world_size", "group_id", "group_size", "root_rank", "members", "rank_list",
                 "backend")

    def __init__(self, handle, rank_list=None):
        lib = _lib.lib
        info = _lib._CommInfo()
        _lib.check(lib.dt_comm_info_get(handle, ctypes.byref(info)), "get_communicator")
        self._handle = handle
        self._gen = _lib.generation
        for f, _ in _lib._CommInfo._fields_:
            setattr(self, f, getattr(info, f))
        self.members = tuple(_lib.check(lib.dt_comm_world_rank_of(handle, i), "get_communicator")
                             for i in range(info.size))
        self.root_rank = 0 if rank_list is None else self.members[0]
        self.rank_list = None if rank_list is None else [list(g) for g in rank_list]
        self.backend = (lib.dt_comm_backend(handle) or b"?").decode()

    @property
    def global_rank(self):
        return self.world_rank

    @property
    def global_size(self):
        return self.world_size

    @property
    def device_path(self):
        """How device arrays move on this communicator (coll.h, "Device
        memory"): "nccl", "staged" (through pinned host memory), "local" (a
        group of one rank: copies), or "none" (no CUDA device here)."""
        return (_lib.lib.dt_comm_device_path(self.handle) or b"?").decode()

    @property
    def handle(self):
        """The dt_comm* as an int (for ctypes calls into libdtrain)."""
        if self._gen != _lib.generation:
            raise RuntimeError("dtrain: this communicator was freed by dtrain.finalize()")
        return self._handle

    def group_rank(self, world_rank):
        """Index in this communicator of world rank `world_rank` (ValueError if not a member)."""
        try:
            return self.members.index(world_rank)
        except ValueError:
            raise ValueError("world rank %r is not a member of this communicator (members %s)"
                             % (world_rank, list(self.members))) from None

    def barrier(self):
        """Return once every rank of this communicator has entered."""
        _lib.check(_lib.ensure().dt_barrier(self.handle), "barrier")

    def __repr__(self):
        return ("Communicator(rank_list=%r, rank=%d, size=%d, local_rank=%d, local_size=%d, "
                "world_rank=%d, world_size=%d, group_id=%d, group_size=%d, root_rank=%d, "
                "backend=%r)" % (self.rank_list, self.rank, self.size, self.local_rank,
                                 self.local_size, self.world_rank, self.world_size, self.group_id,
                                 self.group_size, self.root_rank, self.backend))


_world = None       # Communicator of the world
_cache = {}         # normalized rank_list -> Communicator


def _invalidate():
    global _world
    _world = None
    _cache.clear()


_lib._finalize_hooks.append(_invalidate)


def world():
    global _world
    c = _world
    if c is None:
        lib = _lib.ensure()
        h = lib.dt_comm_world()
        if not h:
            raise _lib.error(-3, "get_communicator")
        c = _world = Communicator(h)
    return c


def from_rank_list(rank_list, fn="get_communicator", flat=False):
    key = normalize_rank_list(rank_list, fn, flat)
    c = _cache.get(key)
    if c is not None:
        return c
    lib = _lib.ensure()
    flat = [r for g in key for r in g]
    ranks = (ctypes.c_int * max(len(flat), 1))(*flat)
    lens = (ctypes.c_int * max(len(key), 1))(*[len(g) for g in key])
    out = ctypes.c_void_p()
    _lib.check(lib.dt_comm_from_rank_list(ranks, lens, len(key), ctypes.byref(out)), fn)
    c = _cache[key] = Communicator(out.value, key)
    return c


def resolve(rank_list, fn):
    """dt_comm* (int) for a collective's rank_list argument: None (the world), a
    rank_list (groups), or a Communicator."""
    if rank_list is None:
        c = _world
        if c is None or not _lib.ready:
            c = world()
        return c._handle
    if isinstance(rank_list, Communicator):
        return rank_list.handle
    if not _lib.ready:
        _lib.init()
    return from_rank_list(rank_list, fn)._handle


def resolve_comm(rank_list, fn, flat=False):
    """Like resolve() but returns the Communicator object; ``flat``: a flat
    list of ranks is one group (reduce, broadcast)."""
    if rank_list is None:
        return world()
    if isinstance(rank_list, Communicator):
        rank_list.handle  # liveness check
        return rank_list
    return from_rank_list(rank_list, fn, flat)


def get_communicator(rank_list=None):
    """The world communicator (rank_list None) or the sub-communicator this
    rank belongs to for `rank_list` (collective over the world on first use
    of a rank_list). See Communicator for the attributes."""
    return resolve_comm(rank_list, "get_communicator")


def set_default_communicator(name):
    """RAF's set_default_communicator: the backend of the world, "mpi" or
    "void" (standalone: every process alone, size 1). Call it before the
    runtime starts (the first collective, get_communicator() or dtrain.init());
    it sets DTRAIN_BACKEND for this process and wins over the environment's.
    Once the runtime runs, naming its own backend is a no-op and naming the
    other raises RuntimeError (the world cannot change under a running job)."""
    if name not in ("mpi", "void"):
        raise ValueError("dtrain.set_default_communicator: name must be 'mpi' or 'void', got %r"
                         % (name,))
    if _lib.is_initialized():
        current = world().backend
        if current != name:
            raise RuntimeError("dtrain.set_default_communicator(%r): the runtime already started "
                               "with backend %r; call it before the first collective"
                               % (name, current))
        return
    os.environ["DTRAIN_BACKEND"] = name
