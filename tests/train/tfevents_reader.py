#!/usr/bin/python3
"""tests/train/tfevents_reader.py - an independent reader of TensorBoard event
files (standard library only), and the check of what `dtrain-train
--tensorboard DIR` wrote against the same run's `--json` records.

    tfevents_reader.py check DIR JSON_FILE     the test (exit 0 / 1)
    tfevents_reader.py dump FILE               every event, one per line

The format (what TensorBoard's own reader expects): records of
  u64 length | u32 masked CRC32C(length bytes) | data | u32 masked CRC32C(data)
masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2^32); data is a
tensorflow.Event protobuf: wall_time = 1 (double), step = 2 (int64),
file_version = 3 (string), summary = 5 {value = 1 {tag = 1, simple_value = 2
(float)}}. Written from the formats' definitions, not from src/io/tfevents.c.
"""
import glob
import json
import math
import os
import re
import struct
import sys


def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_T = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(c):
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    """Yields each record's data; raises ValueError on a bad CRC or a cut file."""
    with open(path, "rb") as f:
        buf = f.read()
    i = 0
    while i < len(buf):
        if len(buf) - i < 12:
            raise ValueError("%s: truncated record header at byte %d" % (path, i))
        head = buf[i:i + 8]
        (n,) = struct.unpack("<Q", head)
        (hcrc,) = struct.unpack("<I", buf[i + 8:i + 12])
        if hcrc != masked(crc32c(head)):
            raise ValueError("%s: length CRC wrong at byte %d" % (path, i))
        data = buf[i + 12:i + 12 + n]
        tail = buf[i + 12 + n:i + 16 + n]
        if len(data) != n or len(tail) != 4:
            raise ValueError("%s: truncated record at byte %d" % (path, i))
        if struct.unpack("<I", tail)[0] != masked(crc32c(data)):
            raise ValueError("%s: data CRC wrong at byte %d" % (path, i))
        yield data
        i += 16 + n


def _varint(b, i):
    v, s = 0, 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if not c & 0x80:
            return v, i


def fields(b):
    """(field number, wire type, value) of one protobuf message."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        yield num, wt, v


def event(data):
    """{'wall_time', 'step', 'file_version', 'scalars': [(tag, value)]}"""
    e = {"wall_time": None, "step": 0, "file_version": None, "scalars": []}
    for num, wt, v in fields(data):
        if num == 1 and wt == 1:
            e["wall_time"] = struct.unpack("<d", v)[0]
        elif num == 2 and wt == 0:
            e["step"] = v - (1 << 64) if v >= 1 << 63 else v
        elif num == 3 and wt == 2:
            e["file_version"] = v.decode()
        elif num == 5 and wt == 2:
            for snum, swt, sv in fields(v):
                if snum == 1 and swt == 2:
                    tag, val = None, None
                    for vnum, vwt, vv in fields(sv):
                        if vnum == 1 and vwt == 2:
                            tag = vv.decode()
                        elif vnum == 2 and vwt == 5:
                            val = struct.unpack("<f", vv)[0]
                    e["scalars"].append((tag, val))
    return e


def read(path):
    return [event(d) for d in records(path)]


def _f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def check(tb_dir, json_path):
    bad = []
    ok = [0]

    def expect(cond, what):
        if cond:
            ok[0] += 1
        else:
            bad.append(what)

    files = glob.glob(os.path.join(tb_dir, "events.out.tfevents.*"))
    expect(len(files) == 1, "one event file in %s (rank 0 writes, the others do not): %s" % (tb_dir, files))
    if not files:
        print("0 passed, 1 failed")
        return 1
    name = os.path.basename(files[0])
    expect(re.fullmatch(r"events\.out\.tfevents\.\d{10}\.[^.]+(\.[^.]+)*\.\d+\.\d+", name) is not None,
           "file name events.out.tfevents.<time>.<host>.<pid>.<n>: " + name)
    try:
        evs = read(files[0])
    except ValueError as e:
        print("FAIL:", e)
        print("%d passed, 1 failed" % ok[0])
        return 1
    expect(evs and evs[0]["file_version"] == "brain.Event:2", "first record: file_version brain.Event:2")
    expect(all(e["wall_time"] and abs(e["wall_time"] - evs[0]["wall_time"]) < 3600 for e in evs),
           "every event has a wall time near the first's")
    got = {}
    for e in evs[1:]:
        for tag, val in e["scalars"]:
            got.setdefault(tag, {})[e["step"]] = val
    recs = [json.loads(l) for l in open(json_path)]
    want = {}
    curve_keys = {"step": ["loss", "lr", "time_s", "grad_norm"],
                  "eval": ["loss", "tokens_per_s", "test_loss", "test_acc"],
                  "epoch": ["loss", "train_acc", "samples_per_s", "tokens_per_s", "time_s", "test_loss", "test_acc"]}
    for r in recs:
        t = r["type"]
        step = r.get("steps" if t == "epoch" else "step")
        for k in curve_keys.get(t, []):
            if k in r and r[k] is not None:
                want.setdefault(t + "/" + k, {})[step] = r[k]
    for tag in ["step/loss", "step/lr", "step/grad_norm", "eval/test_loss", "eval/tokens_per_s"]:
        expect(tag in got, "tag %s present (tags: %s)" % (tag, sorted(got)))
    expect(any(t.startswith("memory/") for t in got), "memory/* tags present")
    for tag, pts in want.items():
        # step times and rates: printed with fewer digits in the JSON
        tol = 2e-3 if tag.endswith(("time_s", "per_s")) else 1e-5 if tag.endswith("grad_norm") else 1e-6
        g = got.get(tag, {})
        expect(sorted(g) == sorted(pts), "%s: steps %s, JSON has %s" % (tag, sorted(g), sorted(pts)))
        for s, v in pts.items():
            if s in g:
                x = g[s]
                expect(abs(x - _f32(v)) <= tol * max(1.0, abs(v)) + 0.05 * (tol > 1e-6),
                       "%s at step %s: event %r, JSON %r" % (tag, s, x, v))
    expect(sorted(got.get("step/loss", {})) == list(range(1, 1 + len(got.get("step/loss", {})))),
           "step/loss at steps 1..N")
    for b in bad[:20]:
        print("FAIL:", b)
    print("tfevents: %d events, %d tags" % (len(evs), len(got)))
    print("%d passed, %d failed" % (ok[0], len(bad)))
    return 1 if bad else 0


def main(argv):
    if len(argv) == 4 and argv[1] == "check":
        return check(argv[2], argv[3])
    if len(argv) == 3 and argv[1] == "dump":
        try:
            for e in read(argv[2]):
                print(json.dumps(e))
            sys.stdout.flush()
        except BrokenPipeError:  # | head
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
