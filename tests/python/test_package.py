"""The package around the collectives: DistConfig, the library search
(DTRAIN_LIBRARY, build tree, installed layout; in child processes), the
standalone runtime, init/finalize and stale communicators.

Runs standalone (void backend) or under mpiexec. It finalizes the runtime at
the end, so each rank prints its own closing line."""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

import dtrain
from dtrain import distributed as dist
from dtrain.distributed import DistConfig

import harness as H
from harness import check, check_array, expect_raises

comm = dist.get_communicator()
R, S = comm.world_rank, comm.world_size
UNDER_MPI = comm.backend == "mpi" or S > 1
H._rank = R  # the harness must not ask the runtime after finalize


DEFAULTS = {"enable_data_parallel": True, "zero_opt_level": 0, "shard_group": "world", "bucket_size_mb": 25.0,
            "first_bucket_mb": 1.0, "overlap": True, "broadcast_buffers": True,
            "sync_bn": False, "timeout_s": 300.0, "grad_comm_dtype": "f32", "zero_offload": False}


def t_config():
    d = dist.get_config()
    check("get_config singleton", d is dist.get_config() and d is dtrain.get_config())
    check("defaults", d.to_dict() == DEFAULTS, d.to_dict())
    check("keys in the C order", DistConfig.keys() == list(DEFAULTS))
    d.enable_data_parallel = False
    d.zero_opt_level = 1
    check("set attributes", d.enable_data_parallel is False and d.zero_opt_level == 1)
    d.enable_data_parallel = 1
    check("1 accepted as bool", d.enable_data_parallel is True)
    d.sync_bn = "Yes"
    check("'Yes' accepted as bool", d.sync_bn is True)
    d.timeout_s = "12.5"
    check("numeric string", d.timeout_s == 12.5)
    d.zero_opt_level = 3.0
    check("integral float for an int key", d.zero_opt_level == 3 and
          type(d.zero_opt_level) is int)
    expect_raises("typo", AttributeError, lambda: setattr(d, "enable_data_paralel", True),
                  "no setting 'enable_data_paralel'", "did you mean 'enable_data_parallel'")
    expect_raises("RAF-only key", AttributeError,
                  lambda: setattr(d, "enable_auto_dp_profiling", True), "no setting")
    expect_raises("bool type", TypeError, lambda: setattr(d, "overlap", 2.5), "must be a bool")
    expect_raises("bool text", ValueError, lambda: setattr(d, "overlap", "maybe"),
                  "not a boolean")
    expect_raises("non-integer level", ValueError, lambda: setattr(d, "zero_opt_level", 1.5),
                  "integer")
    expect_raises("bool for int", TypeError, lambda: setattr(d, "zero_opt_level", True), "an int")
    expect_raises("level 4", ValueError, lambda: setattr(d, "zero_opt_level", 4), "[0, 3]")
    expect_raises("negative bucket", ValueError, lambda: setattr(d, "bucket_size_mb", -1), "[0,")
    expect_raises("timeout 0", ValueError, lambda: setattr(d, "timeout_s", 0), "[0.001,")
    expect_raises("nan", ValueError, lambda: setattr(d, "first_bucket_mb", float("nan")),
                  "finite")
    d.grad_comm_dtype = "BF16"
    check("grad_comm_dtype, any case", d.grad_comm_dtype == "bf16")
    expect_raises("grad_comm_dtype fp8", ValueError, lambda: setattr(d, "grad_comm_dtype", "fp8"),
                  "not one of f32, bf16, f16")
    expect_raises("grad_comm_dtype 16", TypeError, lambda: setattr(d, "grad_comm_dtype", 16), "a string")
    expect_raises("read-only rank", AttributeError, lambda: setattr(d, "rank", 3), "read-only")
    expect_raises("unknown attribute read", AttributeError, lambda: d.nope, "nope")
    # a dict like the seeds' raf_dist_config
    d.reset()
    d.update({"enable_data_parallel": True, "zero_opt_level": 1})
    check("update dict", (d.enable_data_parallel, d.zero_opt_level) == (True, 1))
    d.update(bucket_size_mb=4, overlap=False)
    check("update kwargs", d.bucket_size_mb == 4.0 and isinstance(d.bucket_size_mb, float)
          and d.overlap is False)
    expect_raises("update is atomic", ValueError,
                  lambda: d.update({"zero_opt_level": 2, "overlap": "nope"}), "overlap")
    check("nothing applied after a failed update", d.zero_opt_level == 1)
    # RAF's DistConfig.dumps() returns a dict and loads() takes one; JSON text: to_json()
    obj = d.dumps()
    check("dumps is a dict with the setting keys",
          type(obj) is dict and list(obj) == list(DEFAULTS), obj)
    check("dumps values", obj["enable_data_parallel"] is True and obj["zero_opt_level"] == 1
          and obj["bucket_size_mb"] == 4.0 and obj["overlap"] is False, obj)
    obj["zero_opt_level"] = 3
    check("dumps is a copy", d.zero_opt_level == 1)
    obj["zero_opt_level"] = 1
    e = DistConfig().loads(d.dumps())
    check("loads(dumps()) round trip", e == d and e is not d)
    text = d.to_json()
    check("to_json is JSON", json.loads(text) == d.dumps(), text)
    check("loads(to_json()) round trip", DistConfig().loads(text) == d)
    check("to_json indent", "\n" in d.to_json(indent=2))
    expect_raises("loads a list", ValueError, lambda: DistConfig().loads([1]), "dict")
    expect_raises("loads non-object", ValueError, lambda: DistConfig().loads("[1]"),
                  "JSON object")
    expect_raises("loads unknown key", AttributeError,
                  lambda: DistConfig().loads('{"zero_opt": 1}'), "zero_opt")
    check("DistConfig(dict)", DistConfig({"zero_opt_level": 2}).zero_opt_level == 2)
    env = {"DTRAIN_SYNC_BN": "on", "DTRAIN_BUCKET_SIZE_MB": "0", "DTRAIN_OTHER": "x"}
    f = DistConfig().from_env(env)
    check("from_env", f.sync_bn is True and f.bucket_size_mb == 0.0 and
          f.to_dict() == dict(DEFAULTS, sync_bn=True, bucket_size_mb=0.0))
    tmpf = os.path.join(tempfile.mkdtemp(prefix="dtrain-cfg-"), "c.json")
    d.save(tmpf)
    check("save/load", DistConfig().load(tmpf) == d)
    files_that_are_not_configs(os.path.dirname(tmpf), d)
    shutil.rmtree(os.path.dirname(tmpf), ignore_errors=True)
    check("deprecated world attributes", (d.rank, d.size, d.local_rank, d.local_size,
                                          d.root_rank) == (R, S, comm.local_rank,
                                                           comm.local_size, 0))
    check("dir lists settings", "zero_opt_level" in dir(d) and "rank" in dir(d))
    d.reset()
    check("reset", d.to_dict() == DEFAULTS)
    check("repr", repr(d).startswith("DistConfig(enable_data_parallel=True"))


def files_that_are_not_configs(tmp, d):
    """DistConfig.load/.save on what is not a regular file never wait (a FIFO
    used to block both forever), and refuse what dt_config_load refuses, in
    its words."""
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    t0 = time.monotonic()
    expect_raises("load a FIFO", OSError, lambda: DistConfig().load(fifo), "is a FIFO, not a regular file")
    expect_raises("save to a FIFO no process reads", OSError, lambda: d.save(fifo),
                  "a FIFO that no process reads")
    check("FIFOs refused at once", time.monotonic() - t0 < 5, "%.1f s" % (time.monotonic() - t0))
    # with a reader, the FIFO is written to (as a shell's pipe or /dev/stdout would be)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    for _ in range(500):  # the reader's open() must come first
        try:
            d.save(fifo)
            break
        except OSError:
            time.sleep(0.01)
    reader.join(10)
    check("save to a FIFO with a reader", got and DistConfig().loads(got[0]) == d, repr(got))
    expect_raises("load a directory", OSError, lambda: DistConfig().load(tmp), "is a directory")
    expect_raises("load a missing file", OSError, lambda: DistConfig().load(os.path.join(tmp, "no")),
                  "cannot open config file")
    big = os.path.join(tmp, "big.json")
    with open(big, "w") as f:
        f.write('{"zero_opt_level": 1' + " " * 9000 + "}")
    expect_raises("load a file over 8191 bytes", OSError, lambda: DistConfig().load(big),
                  "larger than 8191 bytes")
    expect_raises("save into a missing directory", OSError,
                  lambda: d.save(os.path.join(tmp, "no", "c.json")), "cannot write config file")


class _CConfig(ctypes.Structure):
    """struct dt_config of include/dtrain/config.h"""
    _fields_ = [("enable_data_parallel", ctypes.c_int), ("zero_opt_level", ctypes.c_int),
                ("shard_group", ctypes.c_int), ("bucket_size_mb", ctypes.c_double), ("first_bucket_mb", ctypes.c_double),
                ("overlap", ctypes.c_int), ("broadcast_buffers", ctypes.c_int),
                ("sync_bn", ctypes.c_int), ("timeout_s", ctypes.c_double),
                ("grad_comm_dtype", ctypes.c_int), ("zero_offload", ctypes.c_int)]


def t_config_vs_c():
    """DistConfig agrees with the C config (defaults, JSON both ways, validation)."""
    lib = ctypes.CDLL(dtrain.library_path())
    if not hasattr(lib, "dt_config_parse_json"):
        check("C config API present", False, "libdtrain lacks dt_config_parse_json")
        return
    lib.dt_config_to_json.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.dt_config_parse_json.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.dt_config_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    lib.dt_last_error.restype = ctypes.c_char_p

    def c_default():
        c = _CConfig()
        lib.dt_config_default(ctypes.byref(c))
        return c

    def c_dumps(c):
        buf = ctypes.create_string_buffer(1024)
        lib.dt_config_to_json(ctypes.byref(c), buf, 1024)
        return json.loads(buf.value.decode())

    check("C defaults == DistConfig defaults", c_dumps(c_default()) == DistConfig().to_dict(),
          lambda: "%s vs %s" % (c_dumps(c_default()), DistConfig().to_dict()))
    py = DistConfig({"enable_data_parallel": False, "zero_opt_level": 2, "shard_group": "host", "bucket_size_mb": 0,
                     "first_bucket_mb": 0.25, "overlap": False, "broadcast_buffers": False,
                     "sync_bn": True, "timeout_s": 1.5, "grad_comm_dtype": "bf16", "zero_offload": True})
    c = c_default()
    rc = lib.dt_config_parse_json(ctypes.byref(c), py.to_json().encode())
    check("C parses DistConfig.to_json()", rc == 0, lambda: lib.dt_last_error().decode())
    check("C reads the same values", c_dumps(c) == py.to_dict(),
          lambda: "%s vs %s" % (c_dumps(c), py.to_dict()))
    check("DistConfig reads the C dumps", DistConfig().update(c_dumps(c)) == py)
    # the same verdict on values given as text (what env/flags/JSON strings carry)
    cases = [("zero_opt_level", v) for v in ("0", "3", "4", "-1", "1.5", "x", "2.0")] + \
            [("overlap", v) for v in ("true", "OFF", "Yes", "0", "2", "maybe", "")] + \
            [("bucket_size_mb", v) for v in ("0", "1048576", "1048577", "-0.5", "inf", "1e3")] + \
            [("timeout_s", v) for v in ("0", "0.001", "1e7", "1e8", "nan")] + \
            [("grad_comm_dtype", v) for v in ("f32", "BF16", "f16", "fp16", "", "1")] + \
            [("shard_group", v) for v in ("world", "host", "Host", "node", "1", "")] + \
            [("zero_offload", v) for v in ("true", "0", "On", "2", "")] + \
            [("no_such_key", "1")]
    for key, val in cases:
        c = c_default()
        c_ok = lib.dt_config_set(ctypes.byref(c), key.encode(), val.encode()) == 0
        try:
            d = DistConfig()
            setattr(d, key, val)
            py_ok = True
        except (TypeError, ValueError, AttributeError):
            py_ok = False
        same = c_ok == py_ok and (not c_ok or c_dumps(c)[key] == d.to_dict()[key])
        check("DistConfig and dt_config_set agree on %s=%r" % (key, val), same,
              "C %s, Python %s" % ("accepts" if c_ok else "rejects",
                                   "accepts" if py_ok else "rejects"))


def _child_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX_", "PMI_", "HYDI_", "MPI_LOCALNRANKS"))
           and k not in ("DTRAIN_LIBRARY", "PYTHONPATH")}
    env.update(extra)
    return env


def _child(code, env, cwd):
    p = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout.strip(), p.stderr.strip()


def t_library_search():
    if R != 0:
        return  # once is enough; the children run standalone
    real = os.path.realpath(dtrain.library_path())
    pkg = os.path.dirname(os.path.abspath(dtrain.__file__))
    probe = ("import numpy as np, dtrain; print(dtrain.library_path()); "
             "print(int(dtrain.allreduce(np.array([5], np.int32))[0]), "
             "dtrain.get_communicator().backend)")
    tmp = tempfile.mkdtemp(prefix="dtrain-pytest-")
    try:
        # installed layout: <prefix>/lib/python3/dist-packages/dtrain + <prefix>/lib/libdtrain.so
        site = os.path.join(tmp, "prefix", "lib", "python3", "dist-packages")
        shutil.copytree(pkg, os.path.join(site, "dtrain"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        os.symlink(real, os.path.join(tmp, "prefix", "lib", "libdtrain.so"))
        rc, out, err = _child(probe, _child_env(PYTHONPATH=site), tmp)
        want = os.path.join(tmp, "prefix", "lib", "libdtrain.so")
        check("installed layout finds <prefix>/lib", rc == 0 and out.splitlines() ==
              [want, "5 void"], "rc %d out %r err %r" % (rc, out, err[-800:]))
        # the same with only the versioned soname (a runtime-only install) in lib/<multiarch>
        import sysconfig
        ma = sysconfig.get_config_var("MULTIARCH")
        if ma:
            os.remove(os.path.join(tmp, "prefix", "lib", "libdtrain.so"))
            os.makedirs(os.path.join(tmp, "prefix", "lib", ma))
            want = os.path.join(tmp, "prefix", "lib", ma, "libdtrain.so.0")
            os.symlink(real, want)
            rc, out, err = _child(probe, _child_env(PYTHONPATH=site), tmp)
            check("installed layout finds lib/<multiarch>/libdtrain.so.0", rc == 0 and
                  out.splitlines()[:1] == [want], "rc %d out %r err %r" % (rc, out, err[-800:]))
        # build tree: <src>/python/dtrain + <src>/build/lib/libdtrain.so
        src = os.path.join(tmp, "src")
        shutil.copytree(pkg, os.path.join(src, "python", "dtrain"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        os.makedirs(os.path.join(src, "build", "lib"))
        want = os.path.join(src, "build", "lib", "libdtrain.so")
        os.symlink(real, want)
        rc, out, err = _child(probe, _child_env(PYTHONPATH=os.path.join(src, "python")), tmp)
        check("build tree finds build/lib", rc == 0 and out.splitlines() == [want, "5 void"],
              "rc %d out %r err %r" % (rc, out, err[-800:]))
        # DTRAIN_LIBRARY: a directory, and a missing file (authoritative: a clear error)
        rc, out, err = _child(probe, _child_env(PYTHONPATH=os.path.join(src, "python"),
                                                DTRAIN_LIBRARY=os.path.dirname(real)), tmp)
        check("DTRAIN_LIBRARY directory", rc == 0 and out.splitlines()[0].startswith(
            os.path.dirname(real)), "rc %d out %r err %r" % (rc, out, err[-800:]))
        bad = os.path.join(tmp, "nowhere", "libdtrain.so")
        rc, out, err = _child("import dtrain\ntry:\n dtrain.library_path()\n"
                              "except dtrain.LibraryNotFoundError as e:\n print('ERR', e)",
                              _child_env(PYTHONPATH=os.path.join(src, "python"),
                                         DTRAIN_LIBRARY=bad), tmp)
        check("DTRAIN_LIBRARY missing file: LibraryNotFoundError naming it",
              rc == 0 and out.startswith("ERR") and bad in out and "no such file" in out,
              "rc %d out %r err %r" % (rc, out, err[-800:]))
        # import alone does not need the library
        rc, out, err = _child("import dtrain, dtrain.dist; print(dtrain.dist.get_config().to_json()"
                              "[:1])", _child_env(PYTHONPATH=os.path.join(src, "python"),
                                                  DTRAIN_LIBRARY=bad), tmp)
        check("import and config work without the library", rc == 0 and out == "{",
              "rc %d out %r err %r" % (rc, out, err[-800:]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def t_init_device():
    """dtrain.init(device=...): the rank's CUDA device, chosen before the runtime
    starts (children, standalone): the launcher's local rank modulo the devices,
    an index, "current"; the errors. On the fake runtime (libdtrain_fakegpu.so,
    DTRAIN_FAKEGPU_LIBRARY, CUDA builds) and on the library under test."""
    if R != 0:
        return
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    py = os.path.join(src, "python")
    probe = ("import dtrain\ntry:\n dtrain.init(%s)\n print('DEV', dtrain.cuda_device())\n"
             "except Exception as e:\n print('ERR', type(e).__name__, e)")
    fake = os.environ.get("DTRAIN_FAKEGPU_LIBRARY")
    if fake:
        cases = [("", "4", {"MPI_LOCALRANKID": "3"}, "DEV 3"),
                 ("", "2", {"MPI_LOCALRANKID": "3"}, "DEV 1"),
                 ("", "2", {"SLURM_LOCALID": "1"}, "DEV 1"),
                 ("", "4", {}, "DEV 0"),
                 ("device=2", "4", {"MPI_LOCALRANKID": "1"}, "DEV 2"),
                 ("device='current'", "4", {"MPI_LOCALRANKID": "1"}, "DEV 0"),
                 ("device=4", "4", {}, "ERR ValueError dtrain.init: device 4: this process sees 4 "
                  "CUDA devices (0..3)"),
                 ("device='gpu'", "4", {}, "ERR TypeError dtrain.init: device must be None, "
                  "'current' or a CUDA device index"),
                 ("device=True", "4", {}, "ERR TypeError"),
                 ("device=1", "0", {}, "ERR DtrainError dtrain.init: device=1: this process has "
                  "no CUDA device"),
                 ("", "0", {}, "DEV None")]
        for arg, ndev, extra, want in cases:
            env = _child_env(PYTHONPATH=py, DTRAIN_LIBRARY=fake, DTRAIN_FAKEGPU_DEVICES=ndev,
                             **extra)
            rc, out, err = _child(probe % arg, env, src)
            check("init(%s) with %s fake devices %s" % (arg, ndev, extra),
                  rc == 0 and out.startswith(want), "rc %d out %r err %r" % (rc, out, err[-800:]))
    else:
        print("t_init_device: no DTRAIN_FAKEGPU_LIBRARY (a build without CUDA): the fake "
              "devices' cases left out")
    if dtrain.cuda_device() is None:  # the library under test sees no GPU
        env = _child_env(PYTHONPATH=py, DTRAIN_LIBRARY=os.path.realpath(dtrain.library_path()))
        rc, out, err = _child(probe % "device=0", env, src)
        check("init(device=0) without a CUDA device", rc == 0 and out.startswith(
            "ERR DtrainError dtrain.init: device=0: this process has no CUDA device"),
            "rc %d out %r err %r" % (rc, out, err[-800:]))
        expect_raises("init(device=0) once started without a device", RuntimeError,
                      lambda: dtrain.init(device=0), "already runs without a CUDA device")


def t_set_default_communicator():
    """RAF's dist.set_default_communicator("mpi" | "void"): before the runtime starts
    it picks the backend (DTRAIN_BACKEND); afterwards only the running one is accepted."""
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # the call wins over the environment's DTRAIN_BACKEND
    env = _child_env(PYTHONPATH=os.path.join(src, "python"),
                     DTRAIN_LIBRARY=os.path.realpath(dtrain.library_path()), DTRAIN_BACKEND="mpi")
    rc, out, err = _child("from dtrain import dist\ndist.set_default_communicator('void')\n"
                          "print(dist.get_communicator().backend)", env, src)
    check("set_default_communicator('void') before start", rc == 0 and out.strip() == "void",
          "rc %d out %r err %r" % (rc, out, err[-800:]))
    expect_raises("set_default_communicator bad name", ValueError,
                  lambda: dist.set_default_communicator("nccl"), "'mpi' or 'void'")
    dist.set_default_communicator(comm.backend)     # the running one: accepted
    other = "void" if comm.backend == "mpi" else "mpi"
    expect_raises("set_default_communicator after start", RuntimeError,
                  lambda: dist.set_default_communicator(other), "already started",
                  comm.backend)


def t_standalone_semantics():
    if UNDER_MPI:
        return
    check("standalone world", (comm.size, comm.rank, comm.backend) == (1, 0, "void"))
    for dt in H.DTYPES:
        for op in H.OPS:
            x = H.inp(0, dt, (3,), 1, op)
            check_array("standalone allreduce %s %s" % (np.dtype(dt).name, op),
                        dtrain.allreduce(x, op), H.reduce_ref([x], op, dt))
    check_array("standalone rank_list [[0]]", dtrain.allgather(np.ones(2), rank_list=[[0]]),
                np.ones(2))
    expect_raises("standalone rank_list [[1]]", dtrain.DtrainError,
                  lambda: dtrain.allreduce(np.ones(2), rank_list=[[1]]), "out of range")


def t_finalize():
    """Last: finalize, stale communicators, restart (void) or refusal (MPI)."""
    c = dist.get_communicator()
    sub = dist.get_communicator([list(range(S))])
    dtrain.barrier()
    dtrain.finalize()
    check("not initialized after finalize", not dtrain.is_initialized())
    expect_raises("stale communicator", RuntimeError, lambda: c.handle, "finalize")
    expect_raises("stale communicator in a call", RuntimeError,
                  lambda: dtrain.allreduce(np.ones(2), rank_list=sub), "finalize")
    dtrain.finalize()
    check("second finalize is a no-op", True)
    if UNDER_MPI:
        expect_raises("MPI cannot restart", dtrain.DtrainError,
                      lambda: dtrain.allreduce(np.ones(2)), "cannot be initialised again",
                      status="DT_ERR_STATE")
    else:
        y = dtrain.allreduce(np.ones(2))
        check_array("void restarts on use", y, np.ones(2))
        c2 = dist.get_communicator()
        check("new world communicator", c2 is not c and c2.size == 1)
        dtrain.init()
        check("init is idempotent", dtrain.is_initialized())


for name, fn in list(globals().items()):
    if name.startswith("t_") and callable(fn):
        H.guarded(name, fn)
print("%s%d passed, %d failed" % ("[rank %d] " % R if S > 1 else "", H._passed, H._failed))
sys.exit(1 if H._failed else 0)
