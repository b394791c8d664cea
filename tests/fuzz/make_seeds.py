#!/usr/bin/env python3
"""tests/fuzz/make_seeds.py - (re)writes the seed corpora in tests/fuzz/corpus/.

Small valid and invalid examples per target; run it after changing a format.
Only the standard library is used. Layouts: see each fuzz_<target>.c."""
import gzip, json, os, struct, sys

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- idx: [flags][k lo][k hi][images k bytes][labels] ------------------------
def idx_images(count, rows, cols, magic=0x803, pixels=None):
    h = struct.pack(">IIII", magic, count, rows, cols)
    body = bytes(pixels if pixels is not None else [(i * 37) & 255 for i in range(count * rows * cols)])
    return h + body


def idx_labels(labels, magic=0x801, count=None):
    return struct.pack(">II", magic, len(labels) if count is None else count) + bytes(labels)


def idx_seed(flags, images, labels):
    return bytes([flags]) + struct.pack("<H", len(images)) + images + labels


img = idx_images(3, 2, 2)
lbl = idx_labels([0, 2, 1])
put("idx", "valid_3x2x2", idx_seed(0, img, lbl))
put("idx", "valid_declared_10_classes", idx_seed(10, img, lbl))
put("idx", "valid_gzip_both", idx_seed(0xC0, img, lbl))
put("idx", "valid_1x28x28", idx_seed(10, idx_images(1, 28, 28), idx_labels([7])))
put("idx", "bad_magic_swapped", idx_seed(0, idx_labels([0, 1, 2]), idx_images(3, 2, 2)))
put("idx", "truncated_images", idx_seed(0, img[:-3], lbl))
put("idx", "truncated_header", idx_seed(0, img[:10], lbl))
put("idx", "count_mismatch", idx_seed(0, img, idx_labels([0, 1])))
put("idx", "trailing_bytes", idx_seed(0, img + b"\x00", lbl))
put("idx", "label_out_of_range", idx_seed(3, img, idx_labels([0, 5, 1])))
put("idx", "zero_rows", idx_seed(0, idx_images(1, 0, 4, pixels=[]), idx_labels([0])))
put("idx", "huge_count", idx_seed(0, struct.pack(">IIII", 0x803, 0x7fffffff, 16384, 16384), lbl))
put("idx", "empty", idx_seed(0, b"", b""))

# ---- config: JSON text, or "=key=value" --------------------------------------
put("config", "valid_all", json.dumps({"enable_data_parallel": True, "zero_opt_level": 0,
    "bucket_size_mb": 25, "first_bucket_mb": 1, "overlap": True, "broadcast_buffers": True,
    "sync_bn": False, "timeout_s": 300}))
for name, text in [
        ("valid_strings", '{"overlap": "off", "sync_bn": "yes", "bucket_size_mb": "4.5"}'),
        ("empty_object", "{ }"),
        ("escapes", '{"sync\\u0062n": true, "a\\"b": 1}'),
        ("unknown_key", '{"bucket_size": 4}'),
        ("out_of_range", '{"zero_opt_level": 7}'),
        ("not_integer", '{"zero_opt_level": 1.5}'),
        ("trailing", '{"overlap": true} x'),
        ("nested", '{"overlap": {"a": 1}}'),
        ("unterminated", '{"overlap": tru'),
        ("duplicate_key", '{"overlap": true,\n "overlap": false}'),
        ("bare_word", '{"overlap": yes}')]:
    put("config", name, text)
put("config", "set_bool", "=overlap=on")
put("config", "set_num", "=timeout_s=1e-3")

# ---- train_args: one argument per line ----------------------------------------
put("train_args", "typical", "\n".join(["--model", "mlp", "--epochs", "2", "--batch-size=32", "--lr", "0.1",
    "--optimizer", "adam", "--seed", "7", "--quiet", "--sync-bn", "1", "--bucket-size-mb=4"]))
put("train_args", "all_eq", "\n".join(["--model=cnn", "--channels1=8", "--channels2=16", "--dropout=0.5",
    "--momentum=0.5", "--nesterov=1", "--weight-decay=0.01", "--schedule=cosine", "--warmup-steps=3",
    "--min-lr=0.001", "--data=/tmp/x", "--train-limit=100", "--test-limit=10", "--max-steps=5",
    "--accum-steps=2", "--threads=1", "--shuffle=0", "--drop-last=1", "--eval=0", "--json=/tmp/j",
    "--timeline=/tmp/t%d", "--zero=1", "--overlap=false", "--timeout-s=5"]))
put("train_args", "gpt", "\n".join(["--model", "gpt", "--preset=gpt-test", "--n-layer", "3", "--n-head=2",
    "--n-embd", "32", "--block-size=48", "--seq-len=24", "--recompute", "1", "--sample-prompt", "Once upon", "--sample-temperature=0.5",
    "--sample-length", "50", "--eval-every=10", "--zero", "3"]))
put("train_args", "gpt_heads", "--model\ngpt\n--n-head\n5")
put("train_args", "bad_value", "--epochs\nzero")
put("train_args", "missing_value", "--batch-size")
put("train_args", "unknown", "--bogus\n1")
put("train_args", "positional", "lenet")
put("train_args", "long_path", "--data\n" + "d" * 300)

# ---- safetensors: 8-byte LE header length, JSON header, data ------------------
def st(tensors, meta=None, pad=True, extra=b""):
    hdr, data = {}, b""
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data + extra


f32 = struct.pack("<6f", *range(6))
put("safetensors", "valid_two", st([("w", "F32", [2, 3], f32), ("b", "I64", [1], struct.pack("<q", -1))],
                                   meta={"format": "pt"}))
put("safetensors", "valid_scalar_empty", st([("s", "F16", [], b"\x00\x3c"), ("e", "U8", [0], b"")]))
put("safetensors", "valid_all_dtypes", st([(d, d, [2], b"\x01" * (2 * n)) for d, n in
    [("F64", 8), ("BF16", 2), ("I8", 1), ("I32", 4)]]))
put("safetensors", "unsupported_bool", st([("m", "BOOL", [2], b"\x00\x01")]))
put("safetensors", "trailing_data", st([("w", "F32", [2, 3], f32)], extra=b"\x00"))
put("safetensors", "truncated", st([("w", "F32", [2, 3], f32)])[:-4])
put("safetensors", "header_too_long", struct.pack("<Q", 1 << 40) + b"{}")
put("safetensors", "empty_header", struct.pack("<Q", 2) + b"{}")
big = b'{"w":{"dtype":"U8","shape":[0],"data_offsets":[9223372036854775808,9223372036854775808]}}'
put("safetensors", "offset_over_int64", struct.pack("<Q", len(big)) + big)
put("safetensors", "wrong_nbytes", struct.pack("<Q", 56) +
    b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}'.ljust(56) + b"\x00" * 4)

# ---- ckpt_manifest: manifest.json text ----------------------------------------
manifest = """{
  "format": "dtrain-checkpoint",
  "format_version": 1,
  "step": 12,
  "epoch": 1,
  "epoch_position": 3,
  "rng_state": ["0123456789abcdef", "0000000000000001", "fedcba9876543210", "0000000000000000"],
  "world_size": 2,
  "zero_level": 1,
  "num_params": 10,
  "num_buffers": 2,
  "vectors": [
    {"name": "params", "length": 10},
    {"name": "exp_avg", "length": 10}
  ],
  "ranks": [
    {"rank": 0, "file": "rank-00000.bin", "bytes": 148, "crc32": "1a2b3c4d", "ranges": [{"vector": "params", "offset": 0, "count": 10}, {"vector": "exp_avg", "offset": 0, "count": 5}]},
    {"rank": 1, "file": "rank-00001.bin", "bytes": 84, "crc32": "00000000", "ranges": [{"vector": "exp_avg", "offset": 5, "count": 5}]}
  ],
  "metadata": {
    "model": "lenet",
    "optimizer": "adam"
  }
}
"""
put("ckpt_manifest", "valid", manifest)
put("ckpt_manifest", "valid_empty", """{"format": "dtrain-checkpoint", "format_version": 1, "step": 0, "epoch": 0,
 "epoch_position": 0, "rng_state": ["0000000000000000", "0000000000000000", "0000000000000000", "0000000000000000"],
 "world_size": 1, "zero_level": 0, "num_params": 0, "num_buffers": 0, "vectors": [], "ranks": [], "metadata": {}}""")
put("ckpt_manifest", "version_2", manifest.replace('"format_version": 1', '"format_version": 2'))  # no generation
manifest_v2 = (manifest.replace('"format_version": 1,', '"format_version": 2,\n  "generation": 5,')
               .replace("rank-00000.bin", "rank-00000.g5.bin").replace("rank-00001.bin", "rank-00001.g5.bin"))
put("ckpt_manifest", "valid_v2", manifest_v2)
put("ckpt_manifest", "version_3", manifest_v2.replace('"format_version": 2', '"format_version": 3'))
put("ckpt_manifest", "v2_old_file_name", manifest_v2.replace("rank-00001.g5.bin", "rank-00001.bin"))
put("ckpt_manifest", "truncated", manifest[:300])
put("ckpt_manifest", "rank_outside_world", manifest.replace('"world_size": 2', '"world_size": 1'))
put("ckpt_manifest", "range_beyond_vector", manifest.replace('"offset": 5, "count": 5', '"offset": 8, "count": 5'))
put("ckpt_manifest", "duplicate_key", manifest.replace('"step": 12,', '"step": 12, "step": 13,'))
put("ckpt_manifest", "unicode_escape", manifest.replace('"lenet"', '"le\\u00e9\\ud83d\\ude00net"'))
put("ckpt_manifest", "step_int64_max", manifest.replace('"step": 12', '"step": 9223372036854775807'))
put("ckpt_manifest", "step_over_int64", manifest.replace('"step": 12', '"step": 9223372036854775808'))
put("ckpt_manifest", "nesting_64", '{"a": ' + "[" * 63 + "0" + "]" * 63 + "}")
print("seeds written under", os.path.join(HERE, "corpus"))
