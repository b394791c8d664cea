"""Loading libdtrain through ctypes, its prototypes, start-up and errors.

The shared library is searched, first match wins:

1. ``$DTRAIN_LIBRARY``: a file, or a directory holding ``libdtrain.so``. When
   set it is authoritative: a path that does not load is an error, there is no
   silent fallback to another copy.
2. The build tree: ``<package>/../../build/lib`` (``python/`` next to
   ``build/`` in a source checkout built with ``cmake -B build``).
3. An installed layout: the package's parent directories (up to 5 levels)
   and their ``lib``, ``lib64`` and ``lib/<multiarch>`` sub-directories, so
   ``<prefix>/lib/python3/dist-packages/dtrain`` finds ``<prefix>/lib/libdtrain.so``.
4. ``ctypes.util.find_library("dtrain")`` (ldconfig cache, ``LD_LIBRARY_PATH``).

The library is loaded with ``RTLD_GLOBAL`` so that the MPI components Open MPI
opens later can resolve symbols of libmpi.
"""
import atexit
import ctypes
import ctypes.util
import os
import sysconfig
import threading

__all__ = ["DtrainError", "LibraryNotFoundError", "init", "finalize", "is_initialized",
           "library_path", "cuda_device", "lib"]

_LIB_NAMES = ("libdtrain.so", "libdtrain.so.0", "libdtrain.dylib")

# dt_status values (include/dtrain/status.h), used when the library cannot name them.
STATUS_NAMES = {
    0: "DT_OK", -1: "DT_ERR_INVALID", -2: "DT_ERR_NOMEM", -3: "DT_ERR_STATE",
    -4: "DT_ERR_BACKEND", -5: "DT_ERR_IO", -6: "DT_ERR_UNSUPPORTED", -7: "DT_ERR_MISMATCH",
    -8: "DT_ERR_TIMEOUT", -9: "DT_ERR_INTERNAL",
}


class DtrainError(RuntimeError):
    """An error reported by the C library.

    Attributes: ``status`` (the negative ``dt_status`` code), ``status_name``
    (e.g. ``"DT_ERR_INVALID"``), ``message`` (``dt_last_error()`` at the time of
    the failure: names the C function and what was wrong) and ``function``
    (the Python-level operation, e.g. ``"allreduce"``, or None)."""

    def __init__(self, status, message, status_name=None, function=None):
        self.status = int(status)
        self.status_name = status_name or STATUS_NAMES.get(self.status, "DT_ERR_%d" % self.status)
        self.message = message
        self.function = function
        where = "dtrain.%s: " % function if function else ""
        super().__init__("%s%s (%s)" % (where, message or "(no message)", self.status_name))


class LibraryNotFoundError(OSError):
    """libdtrain could not be found or loaded; the message lists every path tried."""


class _Tensor(ctypes.Structure):
    """struct dt_tensor { void *data; size_t count; dt_dtype dtype; }"""
    _fields_ = [("data", ctypes.c_void_p), ("count", ctypes.c_size_t), ("dtype", ctypes.c_int)]


class _CommInfo(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int) for n in ("rank", "size", "local_rank", "local_size",
                                            "world_rank", "world_size", "group_id",
                                            "group_size")]


class _CollOpts(ctypes.Structure):
    """struct dt_coll_opts { dt_mem_kind mem; void *stream; dt_wire wire; } (coll.h)"""
    _fields_ = [("mem", ctypes.c_int), ("stream", ctypes.c_void_p), ("wire", ctypes.c_int)]


DT_MEM_DEVICE = 2

_P, _I, _Z = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
_PI = ctypes.POINTER(ctypes.c_int)
_PT = ctypes.POINTER(_Tensor)
_PO = ctypes.POINTER(_CollOpts)
# name: (restype, argtypes)
_PROTOTYPES = {
    "dt_status_str": (ctypes.c_char_p, [_I]),
    "dt_last_error": (ctypes.c_char_p, []),
    "dt_clear_error": (None, []),
    "dt_init": (_I, []),
    "dt_finalize": (_I, []),
    "dt_is_initialized": (_I, []),
    "dt_comm_world": (_P, []),
    "dt_comm_info_get": (_I, [_P, ctypes.POINTER(_CommInfo)]),
    "dt_comm_backend": (ctypes.c_char_p, [_P]),
    "dt_comm_group_rank": (_I, [_P, _I]),
    "dt_comm_world_rank_of": (_I, [_P, _I]),
    "dt_comm_from_rank_list": (_I, [_PI, _PI, _I, ctypes.POINTER(_P)]),
    "dt_comm_pool_size": (_I, []),
    "dt_allreduce": (_I, [_P, _P, _Z, _I, _I, _P]),
    "dt_allgather": (_I, [_P, _P, _Z, _I, _P]),
    "dt_reduce_scatter": (_I, [_P, _P, _Z, _I, _I, _P]),
    "dt_reduce": (_I, [_P, _P, _Z, _I, _I, _I, _P]),
    "dt_broadcast": (_I, [_P, _P, _Z, _I, _I, _P]),
    "dt_gather": (_I, [_P, _P, _Z, _I, _I, _P]),
    "dt_scatter": (_I, [_P, _P, _Z, _I, _I, _P]),
    "dt_all_to_all": (_I, [_P, _P, _Z, _I, _P]),
    "dt_send": (_I, [_P, _Z, _I, _I, _P]),
    "dt_recv": (_I, [_P, _Z, _I, _I, _P]),
    "dt_barrier": (_I, [_P]),
    "dt_allreduce_list": (_I, [ctypes.POINTER(_Tensor), ctypes.POINTER(_Tensor), _I, _I, _P]),
    "dt_allgather_list": (_I, [ctypes.POINTER(_Tensor), ctypes.POINTER(_Tensor), _I, _P]),
    "dt_reduce_scatter_fused": (_I, [ctypes.POINTER(_Tensor), ctypes.POINTER(_Tensor), _I, _I, _P]),
    "dt_reduce_scatter_per_rank": (_I, [ctypes.POINTER(_Tensor), _I, ctypes.POINTER(_Tensor), _I,
                                        _P]),
    # memory kinds and streams (coll.h, "Device memory"): the device arrays' calls,
    # blocking (work NULL)
    "dt_allreduce_ex": (_I, [_P, _P, _Z, _I, _I, _P, _PO, _P]),
    "dt_allgather_ex": (_I, [_P, _P, _Z, _I, _P, _PO, _P]),
    "dt_reduce_scatter_ex": (_I, [_P, _P, _Z, _I, _I, _P, _PO, _P]),
    "dt_reduce_ex": (_I, [_P, _P, _Z, _I, _I, _I, _P, _PO, _P]),
    "dt_broadcast_ex": (_I, [_P, _P, _Z, _I, _I, _P, _PO, _P]),
    "dt_gather_ex": (_I, [_P, _P, _Z, _I, _I, _P, _PO, _P]),
    "dt_scatter_ex": (_I, [_P, _P, _Z, _I, _I, _P, _PO, _P]),
    "dt_all_to_all_ex": (_I, [_P, _P, _Z, _I, _P, _PO, _P]),
    "dt_send_ex": (_I, [_P, _Z, _I, _I, _P, _PO, _P]),
    "dt_recv_ex": (_I, [_P, _Z, _I, _I, _P, _PO, _P]),
    "dt_allreduce_list_ex": (_I, [_PT, _PT, _I, _I, _P, _PO, _P]),
    "dt_allgather_list_ex": (_I, [_PT, _PT, _I, _P, _PO, _P]),
    "dt_reduce_scatter_fused_ex": (_I, [_PT, _PT, _I, _I, _P, _PO, _P]),
    "dt_reduce_scatter_per_rank_ex": (_I, [_PT, _I, _PT, _I, _P, _PO, _P]),
    "dt_comm_device_path": (ctypes.c_char_p, [_P]),
    # which CUDA device this process uses (device.h); in every build (none: count 0)
    "dt_cuda_device_count": (_I, [ctypes.c_char_p, ctypes.c_ulong]),
    "dt_cuda_use_device": (_I, [_I]),
    "dt_cuda_current_device": (_I, []),
}

_lock = threading.RLock()
lib = None                # the loaded ctypes.CDLL (None until first use)
_path = None              # where it was loaded from
ready = False             # runtime initialised and usable (the fast-path flag)
_we_initialized = False   # this package called dt_init (so it finalizes at exit)
_atexit_registered = False
generation = 0            # bumped by finalize(): communicators of older generations are dead
_finalize_hooks = []      # callables run after dt_finalize (cache invalidation)
rank_device = None        # this rank's CUDA device (int), None without one (set by init)
rank_device_absent = ""   # why there is none (the library's words)


def _candidates():
    """(label, path) pairs to try, in order; see the module docstring."""
    env = os.environ.get("DTRAIN_LIBRARY")
    if env:
        if os.path.isdir(env):
            for n in _LIB_NAMES:
                yield "DTRAIN_LIBRARY", os.path.join(env, n)
        else:
            yield "DTRAIN_LIBRARY", env
        return
    pkg = os.path.dirname(os.path.abspath(__file__))
    build = os.path.normpath(os.path.join(pkg, os.pardir, os.pardir, "build", "lib"))
    for n in _LIB_NAMES:
        yield "build tree", os.path.join(build, n)
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    subdirs = ["", "lib", "lib64"] + ([os.path.join("lib", multiarch)] if multiarch else [])
    d = pkg
    for _ in range(5):
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
        for sub in subdirs:
            for n in _LIB_NAMES:
                yield "installed", os.path.join(d, sub, n)
    found = ctypes.util.find_library("dtrain")
    if found:
        yield "find_library", found
    yield "loader default", "libdtrain.so"


def _load():
    global lib, _path
    tried = []
    mode = getattr(os, "RTLD_GLOBAL", 0) | getattr(os, "RTLD_NOW", 0)
    for label, path in _candidates():
        is_name = os.sep not in path
        if not is_name and not os.path.exists(path):
            if label == "DTRAIN_LIBRARY":
                tried.append("%s (%s: no such file)" % (path, label))
            continue
        try:
            handle = ctypes.CDLL(path, mode=mode)
        except OSError as e:
            tried.append("%s (%s: %s)" % (path, label, e))
            if label == "DTRAIN_LIBRARY":
                break
            continue
        for name, (res, args) in _PROTOTYPES.items():
            fn = getattr(handle, name)
            fn.restype = res
            fn.argtypes = args
        lib, _path = handle, path
        return handle
    raise LibraryNotFoundError(
        "libdtrain not found. Build it (cmake -S . -B build && cmake --build build), or set "
        "DTRAIN_LIBRARY to the path of libdtrain.so. Tried: " + ("; ".join(tried) or
        "DTRAIN_LIBRARY unset, build/lib next to the package, the installed lib directories, "
        "ctypes.util.find_library('dtrain')"))


def library_path():
    """Path (or soname) of the libdtrain that is (or would be) loaded."""
    if lib is None:
        with _lock:
            if lib is None:
                _load()
    return _path


def last_error():
    """dt_last_error() of this thread, decoded."""
    msg = lib.dt_last_error()
    return msg.decode("utf-8", "replace") if msg else ""


def error(rc, function=None):
    """A DtrainError for status rc with the library's last message."""
    name = lib.dt_status_str(rc)
    return DtrainError(rc, last_error(), name.decode() if name else None, function)


def check(rc, function=None):
    if rc < 0:
        raise error(rc, function)
    return rc


# Launchers' variables for a process's index on its host, first found wins:
# Open MPI, MPICH (Hydra), MVAPICH2, torchrun, srun.
_LOCAL_RANK_VARS = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK",
                    "LOCAL_RANK", "SLURM_LOCALID")


def _launcher_local_rank():
    """(variable, value) of the launcher's local rank, or (None, None)."""
    for var in _LOCAL_RANK_VARS:
        v = os.environ.get(var, "").strip()
        if v.isdigit():
            return var, int(v)
    return None, None


def _bind_device(want):
    """Choose this rank's CUDA device before dt_init, which creates the NCCL
    communicator on the CURRENT device (comm.h). Sets ``rank_device`` and
    ``rank_device_absent``. want: None (the launcher's local rank modulo the
    devices this process sees, as RAF and dtrain-train bind them; without a
    launcher's local rank the current device), "current" (the current device,
    as the caller set it) or a device index."""
    global rank_device, rank_device_absent
    why = ctypes.create_string_buffer(512)
    n = lib.dt_cuda_device_count(why, len(why))
    if n <= 0:
        rank_device = None
        rank_device_absent = why.value.decode("utf-8", "replace") or "no CUDA device"
        if want is not None and want != "current":
            raise DtrainError(-6, "device=%r: this process has no CUDA device: %s"
                              % (want, rank_device_absent), function="init")
        return
    if want is None:
        var, local = _launcher_local_rank()
        if var is not None:
            check(lib.dt_cuda_use_device(local % n), "init")
    elif want != "current":
        if isinstance(want, bool) or not hasattr(want, "__index__"):
            raise TypeError("dtrain.init: device must be None, 'current' or a CUDA device index, "
                            "got %r" % (want,))
        idx = want.__index__()
        if not 0 <= idx < n:
            raise ValueError("dtrain.init: device %d: this process sees %d CUDA device%s (0..%d)"
                             % (idx, n, "" if n == 1 else "s", n - 1))
        check(lib.dt_cuda_use_device(idx), "init")
    rank_device, rank_device_absent = check(lib.dt_cuda_current_device(), "init"), ""


def init(device=None):
    """Start the runtime (idempotent). Under mpirun it uses MPI, otherwise it is
    standalone (size 1); DTRAIN_BACKEND=mpi|void|auto overrides. If the C
    runtime was already started by someone else in this process it is reused
    (and then not finalized by this package). Registers finalize() at exit.

    ``device`` (processes that see a CUDA device): the GPU this rank uses,
    made current before the runtime starts (its NCCL communicator lives
    there, and device arrays must lie on it). None (default): the launcher's
    local rank modulo the devices this process sees (OMPI_COMM_WORLD_LOCAL_RANK,
    MPI_LOCALRANKID, MV2_COMM_WORLD_LOCAL_RANK, LOCAL_RANK or SLURM_LOCALID;
    without one, the current device), the binding RAF and dtrain-train use;
    "current": the device the caller made current (torch.cuda.set_device,
    cupy.cuda.Device(i).use()); an int: that device. Without a CUDA device
    only None and "current" are accepted. Once started, naming another device
    than the rank's raises RuntimeError. See cuda_device()."""
    global ready, _we_initialized, _atexit_registered
    with _lock:
        if ready:
            if device is not None and device != "current" and device != rank_device:
                raise RuntimeError("dtrain.init(device=%r): the runtime already runs %s; choose "
                                   "the device at the first init" % (device, (
                                       "without a CUDA device" if rank_device is None else
                                       "with CUDA device %d" % rank_device)))
            return
        if lib is None:
            _load()
        if not lib.dt_is_initialized():
            _bind_device(device)
            check(lib.dt_init(), "init")
            _we_initialized = True
        else:  # started by the host program: its device is the current one
            _bind_device("current" if device is None else device)
        ready = True
        if not _atexit_registered:
            atexit.register(_atexit_finalize)
            _atexit_registered = True


def cuda_device():
    """This rank's CUDA device index (starting the runtime if needed), or None
    when the process has no CUDA device (or the library no CUDA). Device arrays
    given to the collectives must lie on it. See init(device=...)."""
    ensure()
    return rank_device


def ensure():
    """The loaded library, initialising the runtime on first use."""
    if not ready:
        init()
    return lib


def is_initialized():
    """True while the runtime is started (by this package or by the host program)."""
    return lib is not None and bool(lib.dt_is_initialized())


def finalize():
    """Stop the runtime: waits for outstanding work, frees every communicator
    (Communicator objects obtained earlier become invalid) and finalises MPI
    if dtrain initialised it. A no-op if not initialised. With MPI the runtime
    cannot be started again in this process (a later call raises DtrainError)."""
    global ready, _we_initialized, generation
    with _lock:
        if lib is None or not lib.dt_is_initialized():
            ready = False
            return
        ready = False
        generation += 1
        for hook in _finalize_hooks:
            hook()
        _we_initialized = False
        check(lib.dt_finalize(), "finalize")


def _atexit_finalize():
    if _we_initialized and lib is not None and lib.dt_is_initialized():
        try:
            finalize()
        except DtrainError:
            pass
