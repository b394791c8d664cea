"""dtrain.train: the C trainer (include/dtrain/train.h) from Python.

    import dtrain
    from dtrain import distributed as dist
    dist.get_config().update({"enable_data_parallel": True, "zero_opt_level": 1})
    result = dtrain.train.fit(model="lenet", epochs=1, batch_size=64, lr=0.05)
    result = dtrain.train.fit(model="gpt", preset="gpt-test", max_steps=100, recompute=1,
                              optimizer="adamw", sample_prompt="The ")
    result = dtrain.train.fit(model="mlp", batch_size=64, dp_threads=2)  # 2 threads, no launcher

Keyword arguments are dtrain-train's flags with '_' for '-' (``batch_size=64``
is ``--batch-size 64``; see ``dtrain-train --help``); the distributed config
is taken from ``dist.get_config()`` unless ``config=`` gives a dict. Collective
over the world: every rank calls it with the same arguments (the trainer
compares a hash of them and raises DtrainError(DT_ERR_MISMATCH) otherwise).
Returns a dict with the fields of dt_train_result.
"""
import ctypes

from . import _lib
from .distributed import get_config

__all__ = ["fit", "TrainResult"]


class TrainResult(ctypes.Structure):
    """struct dt_train_result (include/dtrain/train.h)."""
    _fields_ = [("steps", ctypes.c_long), ("epochs", ctypes.c_int), ("last_loss", ctypes.c_double),
                ("train_acc", ctypes.c_double), ("test_acc", ctypes.c_double),
                ("samples_per_s", ctypes.c_double), ("median_step_s", ctypes.c_double),
                ("comm_hidden", ctypes.c_double), ("comm_hidden_compute", ctypes.c_double),
                ("grad_norm", ctypes.c_double), ("test_loss", ctypes.c_double),
                ("tokens_per_s", ctypes.c_double), ("mfu", ctypes.c_double)]


def _flag_value(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def fit(config=None, **flags):
    """Train with the C trainer; returns the dt_train_result fields as a dict.

    flags are the trainer's flags and the dist config's keys with '_' for '-'
    (e.g. fit(model="mlp", zero_opt_level=1, grad_comm_dtype="bf16"): gradients
    between processes as bf16, sums in f32, see dtrain/config.h)."""
    lib = _lib.ensure()
    lib.dt_train_options_size.restype = ctypes.c_size_t
    lib.dt_train_result_size.restype = ctypes.c_size_t
    if ctypes.sizeof(TrainResult) != lib.dt_train_result_size():
        raise RuntimeError("train.fit: this python package's dt_train_result (%d bytes) does not match the library's "
                           "(%d): a package of another dtrain version" % (ctypes.sizeof(TrainResult),
                                                                       lib.dt_train_result_size()))
    lib.dt_train_options_default.argtypes = [ctypes.c_void_p]
    lib.dt_train_parse_args.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    lib.dt_trainer_create.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.dt_trainer_fit.argtypes = [ctypes.c_void_p, ctypes.POINTER(TrainResult)]
    lib.dt_trainer_free.argtypes = [ctypes.c_void_p]
    dist_cfg = dict(get_config().to_dict()) if config is None else dict(config)
    args = ["dtrain-train"]
    for key, value in list(dist_cfg.items()) + list(flags.items()):
        args += ["--" + key.replace("_", "-"), _flag_value(value)]
    if "quiet" in flags:  # a bare switch
        i = args.index("--quiet")
        args.pop(i + 1) if flags["quiet"] else args.__delitem__(slice(i, i + 2))
    argv = (ctypes.c_char_p * len(args))(*[a.encode() for a in args])
    opts = ctypes.create_string_buffer(lib.dt_train_options_size())
    lib.dt_train_options_default(opts)
    rc = lib.dt_train_parse_args(opts, len(args), argv)
    if rc == 1:
        return None  # --help
    _lib.check(rc, "train.fit")
    trainer = ctypes.c_void_p()
    _lib.check(lib.dt_trainer_create(opts, ctypes.byref(trainer)), "train.fit")
    try:
        res = TrainResult()
        _lib.check(lib.dt_trainer_fit(trainer, ctypes.byref(res)), "train.fit")
        return {name: getattr(res, name) for name, _ in TrainResult._fields_}
    finally:
        lib.dt_trainer_free(trainer)
