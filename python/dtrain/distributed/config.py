"""The distributed configuration (RAF's ``DistConfig``), in Python.

``dtrain.distributed.get_config()`` returns the process-wide DistConfig.
Settings are attributes, checked on assignment::

    dcfg = dist.get_config()
    dcfg.enable_data_parallel = True
    dcfg.update({"enable_data_parallel": True, "zero_opt_level": 1})
    d = dcfg.dumps()             # a dict, as RAF's
    dcfg.loads(d)                # apply a dict (or JSON text)
    text = dcfg.to_json()        # JSON text

The keys, defaults and accepted values are those of the C library's config
(include/dtrain/config.h, dt_config): the JSON keys here are the JSON keys the
C trainer reads (dt_config_parse_json / dt_config_load, ``dtrain-train
--config``), the environment variables DTRAIN_<KEY> and the trainer flags
--<key-with-dashes>. ``to_json()`` output is accepted by dt_config_parse_json
and a file written by ``save()`` by dt_config_load. This object itself needs
no library (it is plain Python); the tests check it against the C parser.

Settings (default):

``enable_data_parallel`` (True)
    data parallelism: gradients are averaged across the ranks. (RAF's
    default was False; dtrain's trainer defaults to data parallel.)
``zero_opt_level`` (0)
    ZeRO stage 0-3: 1 partitions the optimizer state, 2 also replaces the
    gradient AllReduce by ReduceScatter, 3 also partitions the weights (what
    the trainer supports is the trainer's to say).
``shard_group`` ("world")
    the ranks ZeRO shards over: "world" (all of them) or "host" (the ranks
    of each host, replicated across hosts: hybrid sharding, as FSDP's HSDP;
    parameter gathers and reduce-scatters stay on the host, each gradient
    shard is summed across hosts once per step). Needs zero_opt_level 1-3
    and the same number of ranks on every host (the trainer refuses
    otherwise). ``dtrain.train.fit(shard_group="host", zero_opt_level=3)``.
``bucket_size_mb`` (25.0)
    gradient bucket cap in MiB, [0, 2^20]; 0: one bucket per layer.
``first_bucket_mb`` (1.0)
    cap of the first bucket (the last layers' gradients, ready first) in MiB,
    [0, 2^20], so that communication starts early.
``overlap`` (True)
    reduce buckets during the backward pass.
``broadcast_buffers`` (True)
    re-broadcast batch-norm buffers from rank 0 every step.
``sync_bn`` (False)
    synchronised batch norm.
``timeout_s`` (300.0)
    limit on any blocking wait, [0.001, 1e7] seconds.
``grad_comm_dtype`` ("f32")
    the type gradients travel in between processes: "f32", "bf16" or "f16"
    (sums in f32; data parallel and every ZeRO stage; with two-level
    collectives only the leg between hosts is compressed).
``zero_offload`` (False)
    ZeRO with the model on a GPU: False keeps each rank's shard and its
    optimizer state on the device (stepped by the device optimizer), True on
    the host (ZeRO-Offload: less device memory, a copy each way per step).
    No effect on host models.

Values: booleans take True/False, 0/1 or the strings true/false/1/0/yes/no/
on/off (any case); numbers take ints, floats or numeric strings (as in the C
library). Unknown keys raise AttributeError (with a suggestion), bad values
TypeError or ValueError; ``update`` and ``loads`` apply all or nothing.

Deprecated read-only attributes, as in RAF (use get_communicator() instead):
``rank``, ``size``, ``local_rank``, ``local_size``, ``root_rank`` of the world
communicator (reading one starts the runtime). They are not part of dumps().

Seed 001 (Meta, RAF's predecessor) spells the same object
``dist.get_context()`` (a DistContext): ``dctx.root_rank``, ``dctx.size``,
``dctx.rank``, ``dctx.local_rank``, ``dctx.local_size``, and
``dctx.enable_data_parallel = True``. get_context() returns the very object
get_config() returns, so both spellings read and set the same settings.
"""
import difflib
import errno
import json
import math
import numbers
import os
import stat

__all__ = ["DistConfig", "get_config", "DistContext", "get_context"]

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def _bool(name, v):
    if isinstance(v, bool):
        return v
    if isinstance(v, numbers.Integral) and int(v) in (0, 1):
        return bool(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
        raise ValueError("DistConfig.%s: %r is not a boolean (true/false/1/0/yes/no/on/off)"
                         % (name, v))
    raise TypeError("DistConfig.%s must be a bool, got %r" % (name, v))


def _number(name, v, lo, hi, integer):
    what = "an int" if integer else "a number"
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            raise ValueError("DistConfig.%s: %r is not a number" % (name, v)) from None
    elif isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError("DistConfig.%s must be %s, got %r" % (name, what, v))
    f = float(v)
    if not math.isfinite(f):
        raise ValueError("DistConfig.%s must be finite, got %r" % (name, v))
    if not lo <= f <= hi:
        raise ValueError("DistConfig.%s must be in [%g, %g], got %r" % (name, lo, hi, v))
    if integer:
        if f != math.floor(f):
            raise ValueError("DistConfig.%s must be an integer, got %r" % (name, v))
        return int(f)
    return f


def _one_of(name, v, values):
    if not isinstance(v, str):
        raise TypeError("DistConfig.%s must be a string (%s), got %r" % (name, "/".join(values), v))
    s = v.strip().lower()
    if s not in values:
        raise ValueError("DistConfig.%s: %r is not one of %s" % (name, v, ", ".join(values)))
    return s


def _choice(values):
    return lambda name, v: _one_of(name, v, values)


def _num(lo, hi, integer=False):
    return lambda name, v: _number(name, v, lo, hi, integer)


# key: (default, converter) - the table of src/core/config.c, in its order
_FIELDS = {
    "enable_data_parallel": (True, _bool),
    "zero_opt_level": (0, _num(0, 3, integer=True)),
    "shard_group": ("world", _choice(("world", "host"))),
    "bucket_size_mb": (25.0, _num(0, 1 << 20)),
    "first_bucket_mb": (1.0, _num(0, 1 << 20)),
    "overlap": (True, _bool),
    "broadcast_buffers": (True, _bool),
    "sync_bn": (False, _bool),
    "timeout_s": (300.0, _num(0.001, 1e7)),
    "grad_comm_dtype": ("f32", _choice(("f32", "bf16", "f16"))),
    "zero_offload": (False, _bool),
}
_READONLY = ("rank", "size", "local_rank", "local_size", "root_rank")


# The largest config file dt_config_load reads (its buffer, less the terminator).
_MAX_CONFIG_FILE = 8191

class DistConfig:
    __doc__ = __doc__
    __slots__ = ("_values",)

    def __init__(self, values=None):
        object.__setattr__(self, "_values", {k: d for k, (d, _) in _FIELDS.items()})
        if values:
            self.update(values)

    @staticmethod
    def keys():
        """The setting names (= JSON keys), in the C library's order."""
        return list(_FIELDS)

    @staticmethod
    def defaults():
        """A dict of the default values."""
        return {k: d for k, (d, _) in _FIELDS.items()}

    def _check(self, name, value):
        if name not in _FIELDS:
            if name in _READONLY:
                raise AttributeError("DistConfig.%s is read-only (it comes from the world "
                                     "communicator)" % name)
            near = difflib.get_close_matches(str(name), list(_FIELDS), n=1)
            raise AttributeError("DistConfig has no setting %r%s; settings: %s"
                                 % (name, " (did you mean %r?)" % near[0] if near else "",
                                    ", ".join(_FIELDS)))
        return _FIELDS[name][1](name, value)

    def __getattr__(self, name):
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        if name in _READONLY:
            from .communicator import world
            w = world()
            return {"rank": w.rank, "size": w.size, "local_rank": w.local_rank,
                    "local_size": w.local_size, "root_rank": w.root_rank}[name]
        raise AttributeError("DistConfig has no attribute %r" % name)

    def __setattr__(self, name, value):
        self._values[name] = self._check(name, value)

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(_FIELDS) | set(_READONLY))

    def update(self, mapping=None, **kwargs):
        """Apply settings from a dict (and/or keywords), e.g.
        ``{"enable_data_parallel": True, "zero_opt_level": 1}``. All values are
        checked before any is applied. Returns self."""
        items = dict(mapping or {})
        items.update(kwargs)
        checked = {k: self._check(k, v) for k, v in items.items()}
        self._values.update(checked)
        return self

    apply = update

    def from_env(self, environ=None):
        """Apply every DTRAIN_<KEY> variable present (as dt_config_from_env).
        Returns self."""
        env = os.environ if environ is None else environ
        items = {k: env["DTRAIN_" + k.upper()] for k in _FIELDS if "DTRAIN_" + k.upper() in env}
        return self.update(items)

    def to_dict(self):
        """The settings as a new dict."""
        return dict(self._values)

    def dumps(self):
        """The settings as a new dict (the C library's key order), as RAF's
        DistConfig.dumps(); to_json() gives JSON text."""
        return dict(self._values)

    def to_json(self, indent=None):
        """The settings as one JSON object (the C library's key order; accepted
        by dt_config_parse_json)."""
        return json.dumps(self._values, indent=indent)

    def loads(self, config):
        """Apply settings from a dict (as RAF's loads) or from JSON text (an
        object; keys as in dumps()). All or nothing. Returns self."""
        data = json.loads(config) if isinstance(config, (str, bytes, bytearray)) else config
        if not isinstance(data, dict):
            raise ValueError("DistConfig.loads: expected a dict or a JSON object, got %s"
                             % type(data).__name__)
        return self.update(data)

    def save(self, path):
        """Write to_json() to a file (readable by dt_config_load / dtrain-train
        --config), as dt_config_save does: never waiting for a reader, so a
        FIFO that no process reads is refused at once (OSError naming it); one
        with a reader, or a terminal, is written to."""
        text = (self.to_json() + "\n").encode()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
        except OSError as e:
            if e.errno == errno.ENXIO:
                raise OSError(e.errno, "cannot write config file %r: it is a FIFO that no process reads"
                              % path) from None
            raise OSError(e.errno, "cannot write config file %r: %s" % (path, e.strerror)) from None
        try:
            os.set_blocking(fd, True)  # a reader is there: wait for it as a plain write would
            view = memoryview(text)
            while view:
                view = view[os.write(fd, view):]
        except OSError as e:
            raise OSError(e.errno, "error writing config file %r: %s" % (path, e.strerror)) from None
        finally:
            os.close(fd)

    def load(self, path):
        """Apply a JSON file. Returns self. The rules of dt_config_load (and
        so of dtrain-train --config): a regular file of at most 8191 bytes; a
        directory, a FIFO, a device or a socket is refused without waiting
        (OSError naming it)."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as e:
            raise OSError(e.errno, "cannot open config file %r: %s" % (path, e.strerror)) from None
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                raise OSError(errno.EISDIR, "%r is a directory, not a config file" % path)
            if not stat.S_ISREG(mode):
                kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
                        else "a socket" if stat.S_ISSOCK(mode) else "a special file")
                raise OSError(errno.EINVAL, "config file %r is %s, not a regular file: give a JSON file"
                              % (path, kind))
            data = b""
            while len(data) < _MAX_CONFIG_FILE + 1:
                chunk = os.read(fd, _MAX_CONFIG_FILE + 1 - len(data))
                if not chunk:
                    break
                data += chunk
        finally:
            os.close(fd)
        if len(data) > _MAX_CONFIG_FILE:
            raise OSError(errno.EFBIG, "config file %r is larger than %d bytes" % (path, _MAX_CONFIG_FILE))
        return self.loads(data.decode("utf-8"))

    def reset(self):
        """Back to the defaults. Returns self."""
        self._values.update(self.defaults())
        return self

    def __eq__(self, other):
        return isinstance(other, DistConfig) and other._values == self._values

    __hash__ = None

    def __repr__(self):
        return "DistConfig(%s)" % ", ".join("%s=%r" % kv for kv in self._values.items())


_CONFIG = DistConfig()


def get_config():
    """The process-wide DistConfig (the same object on every call)."""
    return _CONFIG


# Seed 001's spelling (Meta, RAF's predecessor): the distributed context.
DistContext = DistConfig


def get_context():
    """The process-wide distributed context of seed 001 (Meta): the same object
    as get_config(), with root_rank, size, rank, local_rank and local_size of
    the world and the settings (enable_data_parallel, ...)."""
    return _CONFIG
