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
           "library_path", "lib"]

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


_P, _I, _Z = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
_PI = ctypes.POINTER(ctypes.c_int)
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
}

_lock = threading.RLock()
lib = None                # the loaded ctypes.CDLL (None until first use)
_path = None              # where it was loaded from
ready = False             # runtime initialised and usable (the fast-path flag)
_we_initialized = False   # this package called dt_init (so it finalizes at exit)
_atexit_registered = False
generation = 0            # bumped by finalize(): communicators of older generations are dead
_finalize_hooks = []      # callables run after dt_finalize (cache invalidation)


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


def init():
    """Start the runtime (idempotent). Under mpirun it uses MPI, otherwise it is
    standalone (size 1); DTRAIN_BACKEND=mpi|void|auto overrides. If the C
    runtime was already started by someone else in this process it is reused
    (and then not finalized by this package). Registers finalize() at exit."""
    global ready, _we_initialized, _atexit_registered
    with _lock:
        if ready:
            return
        if lib is None:
            _load()
        if not lib.dt_is_initialized():
            check(lib.dt_init(), "init")
            _we_initialized = True
        ready = True
        if not _atexit_registered:
            atexit.register(_atexit_finalize)
            _atexit_registered = True


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
