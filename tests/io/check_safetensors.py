#!/usr/bin/env python3
"""ckpt_safetensors_python: cross-checks dtrain's safetensors code against an
independent reader/writer written here with json + numpy (no safetensors pkg).

  1. `io_st_tool write` -> parse the header with json, check the layout rules
     (8-byte LE length, padding, offsets tiling the data section), compare every
     tensor (np.frombuffer) with the expected values.
  2. Python writes a file (unpadded header, keys not in data order) ->
     `io_st_tool dump` must print the same names, dtypes, shapes and values.
  3. Python corrupts files -> `io_st_tool dump` must refuse each one with a
     message that names the file and says what is wrong.

usage: check_safetensors.py PATH/TO/io_st_tool WORKDIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

TOOL, WORK = sys.argv[1], sys.argv[2]
failures = 0
checks = 0


def check(cond, msg):
    global failures, checks
    checks += 1
    if not cond:
        failures += 1
        print("FAIL:", msg, file=sys.stderr)


NP = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I8": "i1", "U8": "u1", "I32": "<i4", "I64": "<i8"}
SIZE = {"F32": 4, "F64": 8, "F16": 2, "BF16": 2, "I8": 1, "U8": 1, "I32": 4, "I64": 8}


def decode(dtype, raw):
    if dtype == "BF16":
        bits = np.frombuffer(raw, dtype="<u2").astype("<u4") << 16
        return bits.view("<f4")
    return np.frombuffer(raw, dtype=NP[dtype])


# Expected content of `io_st_tool write` (mirrors st_tool.c).
EXPECTED = {
    "a.f32": ("F32", [2, 3], np.arange(6, dtype=np.float32) * np.float32(0.5) - np.float32(1.0)),
    "b.f64": ("F64", [4], np.arange(4, dtype=np.float64) / 3.0),
    "c.f16": ("F16", [3], np.array([1.5, -2.0, 0.25], dtype=np.float16)),
    "d.bf16": ("BF16", [2, 2], np.array([1.0, -0.5, 3.0, 256.0], dtype=np.float32)),
    "e.i8": ("I8", [5], np.arange(5, dtype=np.int64) * 30 - 60),
    "f.u8": ("U8", [2, 2, 2], np.arange(8, dtype=np.int64) * 30),
    "g.i32": ("I32", [3], np.array([-2**31, 0, 2**31 - 1], dtype=np.int64)),
    "h.i64": ("I64", [2], np.array([-(2**62), 2**62 + 5], dtype=np.int64)),
    "scalar": ("F32", [], np.array([3.25], dtype=np.float32)),
    "empty": ("F32", [0, 4], np.zeros(0, dtype=np.float32)),
}
ORDER = list(EXPECTED)


def read_st(path):
    """Independent strict-enough reader: returns (header dict, data bytes)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    return n, header, blob[8 + n:]


def part1():
    path = os.path.join(WORK, "c_written.safetensors")
    r = subprocess.run([TOOL, "write", path], capture_output=True, text=True)
    check(r.returncode == 0, "write failed: " + r.stderr)
    if r.returncode:
        return
    n, header, data = read_st(path)
    check(n % 8 == 0, f"header length {n} not a multiple of 8")
    meta = header.pop("__metadata__", None)
    check(meta == {"format": "pt", "note": 'dtrain "quoted" \u00e9'}, f"metadata {meta}")
    check(set(header) == set(EXPECTED), f"tensor names {sorted(header)}")
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k) for k, v in header.items())
    check([s[2] for s in spans if s[0] != s[1]] == [k for k in ORDER if k != "empty"],
          f"data order {[s[2] for s in spans]}")
    pos = 0
    for b, e, k in spans:
        check(b == pos, f"{k}: begins at {b}, expected {pos}")
        pos = e
    check(pos == len(data), f"tensors cover {pos} of {len(data)} data bytes")
    for name, (dtype, shape, want) in EXPECTED.items():
        info = header.get(name, {})
        check(info.get("dtype") == dtype, f"{name}: dtype {info.get('dtype')}")
        check(info.get("shape") == shape, f"{name}: shape {info.get('shape')}")
        b, e = info.get("data_offsets", [0, 0])
        count = int(np.prod(shape)) if shape else 1
        check(e - b == count * SIZE[dtype], f"{name}: byte length {e - b}")
        got = decode(dtype, data[b:e])
        check(got.size == want.size and np.array_equal(got.astype(np.float64), want.astype(np.float64)),
              f"{name}: values {got} want {want}")
    # The reshaped view matches numpy's row-major layout.
    b, e = header["a.f32"]["data_offsets"]
    a = np.frombuffer(data[b:e], dtype="<f4").reshape(2, 3)
    check(a[1, 0] == 0.5 and a[0, 2] == 0.0, f"row-major a.f32 {a}")


def write_py(path, tensors, metadata=None, pad=False, key_order=None):
    """tensors: list of (name, dtype, shape, np array) in data order."""
    header, chunks, off = {}, [], 0
    for name, dtype, shape, arr in tensors:
        raw = arr.tobytes()
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    if metadata is not None:
        header["__metadata__"] = metadata
    if key_order:
        header = {k: header[k] for k in key_order}
    text = json.dumps(header).encode("utf-8")
    if pad:
        text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def dump(path):
    r = subprocess.run([TOOL, "dump", path], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def part2():
    path = os.path.join(WORK, "py_written.safetensors")
    w = np.arange(12, dtype="<f4").reshape(3, 4) / 8 - 0.75
    idx = np.array([-5, 7, 2**40], dtype="<i8")
    h = np.array([0.5, -1.25], dtype="<f2")
    u = np.arange(3, dtype="u1") * 7
    tensors = [("weight", "F32", [3, 4], w), ("idx", "I64", [3], idx), ("zz.half", "F16", [2], h),
               ("bytes", "U8", [3], u), ("s", "F64", [], np.array([2.5], dtype="<f8"))]
    write_py(path, tensors, metadata={"k": "v"}, key_order=["zz.half", "__metadata__", "s", "bytes", "weight", "idx"])
    rc, out, err = dump(path)
    check(rc == 0, "dump of a python-written file failed: " + err)
    lines = out.strip().split("\n")
    check(lines[0] == "META k=v", f"metadata line {lines[0]!r}")
    want = [
        "weight F32 (3,4) " + " ".join("%.9g" % x for x in w.ravel()),
        "idx I64 (3) -5 7 1099511627776",
        "zz.half F16 (2) 0.5 -1.25",
        "bytes U8 (3) 0 7 14",
        "s F64 () 2.5",
    ]
    check(lines[1:] == want, f"dump lines {lines[1:]} want {want}")
    # The C-written reference file also dumps to the expected values.
    rc, out, err = dump(os.path.join(WORK, "c_written.safetensors"))
    check(rc == 0 and "scalar F32 () 3.25" in out and "empty F32 (0,4)\n" in out and
          "d.bf16 BF16 (2,2) 1 -0.5 3 256" in out and "h.i64 I64 (2) -4611686018427387904 4611686018427387909" in out,
          "dump of the C-written file: " + out + err)


def part3():
    base = [("a", "F32", [2], np.array([1, 2], dtype="<f4")), ("b", "I32", [1], np.array([3], dtype="<i4"))]
    good = os.path.join(WORK, "good.safetensors")
    write_py(good, base, pad=True)
    rc, out, err = dump(good)
    check(rc == 0, "good file refused: " + err)
    with open(good, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    hdr = json.loads(blob[8:8 + n])
    data = blob[8 + n:]

    def raw_file(name, header_bytes, data_bytes, n_override=None):
        p = os.path.join(WORK, name)
        hl = len(header_bytes) if n_override is None else n_override
        with open(p, "wb") as f:
            f.write(struct.pack("<Q", hl) + header_bytes + data_bytes)
        return p

    def with_header(name, h):
        return raw_file(name, json.dumps(h).encode(), data)

    cases = []
    cases.append((raw_file("truncated.safetensors", blob[8:8 + n], data[:-1]), "truncated"))
    cases.append((raw_file("hlen_big.safetensors", blob[8:8 + n], data, n_override=len(blob)),
                  "exceeds the file size"))
    cases.append((raw_file("hlen_huge.safetensors", blob[8:8 + n], data, n_override=2**63), "too large"))
    cases.append((raw_file("bad_json.safetensors", blob[8:8 + n].replace(b"}", b"]", 1), data), "invalid header JSON"))
    h = json.loads(json.dumps(hdr))
    h["b"]["data_offsets"] = [4, 8]
    cases.append((with_header("overlap.safetensors", h), "overlap"))
    h = json.loads(json.dumps(hdr))
    h["a"]["dtype"] = "FP32"
    cases.append((with_header("dtype.safetensors", h), "unknown dtype 'FP32'"))
    h = json.loads(json.dumps(hdr))
    h["a"]["shape"] = [3]
    cases.append((with_header("shape.safetensors", h), "shape/size mismatch"))
    h = json.loads(json.dumps(hdr))
    h["a"]["shape"] = [1, 2, 1]
    check(dump(with_header("shape_ok.safetensors", h))[0] == 0, "reshaped [1,2,1] accepted")
    cases.append((raw_file("trailing.safetensors", blob[8:8 + n], data + b"\0"), "unexpected bytes"))
    cases.append((raw_file("short.safetensors", b"{}", b"", n_override=1), "too small"))
    dup = blob[8:8 + n].decode().replace('"b"', '"a"').encode()
    cases.append((raw_file("dupkey.safetensors", dup, data), "duplicate object key near '\"a\"'"))
    for path, msg in cases:
        rc, out, err = dump(path)
        check(rc == 1, f"{os.path.basename(path)}: accepted (rc {rc})")
        check(path in err and msg in err, f"{os.path.basename(path)}: message {err.strip()!r} "
              f"should name the file and contain {msg!r}")


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    part1()
    part2()
    part3()
    print(f"ckpt_safetensors_python: {checks - failures} passed, {failures} failed")
    if not failures:
        shutil.rmtree(WORK, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
