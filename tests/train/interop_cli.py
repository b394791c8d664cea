#!/usr/bin/python3
"""dtrain-train's --init-from, --save-format, --max-steps 0, --vocab-size,
--sample-tokens and llm.c token shards from the command line (run by ctest;
the standard library only).

Refusals: each exits with its code (2: the input does not fit the flags; 1:
a file that cannot be read) and a message naming the file, tensor, option
or flag. The inputs are made by dtrain-train itself (a gpt-test model in
dtrain's and in Hugging Face's layout, a config.json edited here) and by
this script (llm.c shards, a truncated one).
Successes: a classifier saved by dtrain and read back with --max-steps 0
evaluates to the saving run's accuracy; a gpt read back from its Hugging
Face export evaluates to the exporting run's loss; --max-steps 0 trains no
step, prints the evaluation and the sample's token ids for a vocabulary
that is not bytes.
The Hugging Face export gathered from ZeRO-3 shards at 2 ranks is the
one-rank export byte for byte.
Usage: interop_cli.py DTRAIN_TRAIN MPIEXEC
"""
import json, os, shutil, struct, subprocess, sys, tempfile

BIN, MPIEXEC = sys.argv[1], sys.argv[2]
CORPUS = "/usr/share/games/fortunes/computers"
FMNIST = "/usr/share/datasets/fashion-mnist"
if not os.path.isfile(CORPUS):
    print("SKIP: %s is missing (Debian package fortunes)" % CORPUS)
    sys.exit(77)
failed = 0
tmp = tempfile.mkdtemp(prefix="dtrain_interop_cli_")
GPT = ["--model", "gpt", "--preset", "gpt-test", "--batch-size", "4", "--test-limit", "8", "--sample-length", "0"]


def check(ok, what, out=""):
    global failed
    failed += not ok
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok and out:
        print(out)


def run(*args, np_=0):
    launch = [MPIEXEC, "--oversubscribe", "-np", str(np_)] if np_ else []
    p = subprocess.run(launch + [BIN] + [str(a) for a in args], capture_output=True, timeout=300)
    return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")


def refused(name, code, msg, *args):
    rc, out = run(*args)
    check(rc == code and msg in out, "%s: exit %d (want %d), '%s'" % (name, rc, code, msg), out)


def P(*names):
    return os.path.join(tmp, *names)


def shard(path, tokens, count=None):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(tokens) if count is None else count, *([0] * 253)))
        f.write(struct.pack("<%dH" % len(tokens), *tokens))


def summary(path):
    return [d for d in map(json.loads, open(path)) if d["type"] == "summary"][0]


try:
    # the inputs: a trained gpt-test in both layouts, shards, a truncated shard
    rc, out = run(*GPT, "--data", CORPUS, "--max-steps", 3, "--quiet", "--save-model", P("gpt.safetensors"))
    check(rc == 0, "gpt-test saved in dtrain's layout", out)
    rc, out = run(*GPT, "--data", CORPUS, "--max-steps", 3, "--quiet", "--save-format", "hf", "--save-model", P("hf"),
                  "--json", P("hf.json"))
    check(rc == 0 and os.path.isfile(P("hf", "config.json")), "gpt-test saved in Hugging Face's layout", out)
    os.makedirs(P("nocfg"))  # the HF export without config.json and without dtrain's metadata: no n_head
    raw = open(P("hf", "model.safetensors"), "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__")
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    open(P("nocfg", "model.safetensors"), "wb").write(struct.pack("<Q", len(h)) + h + raw[8 + n:])
    os.makedirs(P("gelu"))
    shutil.copy(P("hf", "model.safetensors"), P("gelu"))
    cfg = json.load(open(P("hf", "config.json")))
    cfg["activation_function"] = "gelu"
    json.dump(cfg, open(P("gelu", "config.json"), "w"))
    os.makedirs(P("shards"))
    toks = [(i * 7919) % 50257 for i in range(3000)]
    shard(P("shards", "t_val_0.bin"), toks[:600])
    shard(P("shards", "t_train_1.bin"), toks[600:])
    shard(P("trunc.bin"), toks[:100], count=200)

    # refusals
    refused("a size flag against the file", 2, "flag --n-embd 32: %s has n_embd 64 (wte.weight [256, 64]; the sizes "
            "come from the file" % P("gpt.safetensors"),
            "--model", "gpt", "--n-embd", "32", "--init-from", P("gpt.safetensors"), "--data", CORPUS, "--max-steps", 0)
    refused("a block size against the file", 2, "flag --block-size 32: %s has block_size (n_positions) 64 "
            "(wpe.weight [64, 64]" % P("gpt.safetensors"), "--model", "gpt", "--block-size", "32", "--init-from",
            P("gpt.safetensors"), "--data", CORPUS, "--max-steps", 0)
    refused("a vocabulary against the file", 2, "flag --vocab-size 300: %s has vocab_size 256" % P("gpt.safetensors"),
            "--model", "gpt", "--vocab-size", "300", "--init-from", P("gpt.safetensors"), "--data", CORPUS,
            "--max-steps", 0)
    refused("a depth against the file", 2, "flag --n-layer 3: %s has n_layer 2 (the blocks h.0 .. h.1" %
            P("gpt.safetensors"), "--model", "gpt", "--n-layer", "3", "--init-from", P("gpt.safetensors"),
            "--data", CORPUS, "--max-steps", 0)
    refused("no n_head anywhere", 2, "give --n-head", "--model", "gpt", "--init-from", P("nocfg", "model.safetensors"),
            "--data", CORPUS, "--max-steps", 0)
    refused("an activation dtrain has not", 2, "activation_function gelu is not supported",
            "--model", "gpt", "--init-from", P("gelu", "model.safetensors"), "--data", CORPUS, "--max-steps", 0)
    refused("a missing file", 1, P("missing.safetensors"), "--model", "gpt", "--init-from", P("missing.safetensors"),
            "--data", CORPUS, "--max-steps", 0)
    refused("a gpt file into an mlp", 2, "has no tensor fc1.weight", "--model", "mlp", "--init-from",
            P("gpt.safetensors"), "--max-steps", 0)
    refused("a byte vocabulary on token shards", 2, "give --vocab-size 50257", "--model", "gpt", "--preset", "gpt-test",
            "--vocab-size", "256", "--data", P("shards"), "--max-steps", 0)
    refused("a truncated shard", 1, "trunc.bin is truncated: its header counts 200 tokens", "--model", "gpt",
            "--preset", "gpt-test", "--data", P("trunc.bin"), "--max-steps", 0)
    refused("a text prompt for token ids", 2, "--sample-prompt is text, but the vocabulary of 50257 tokens is not bytes",
            "--model", "gpt", "--preset", "gpt-test", "--data", P("shards"), "--sample-prompt", "Hi", "--max-steps", 0)
    refused("a prompt token outside the vocabulary", 2, "token 60000 at position 2 of the prompt is outside the vocabulary of 50257",
            "--model", "gpt", "--preset", "gpt-test", "--data", P("shards"), "--sample-tokens", "5,60000",
            "--max-steps", 0)
    open(P("a_file"), "w").close()
    refused("--save-format hf onto a file", 1, "writes a directory (model.safetensors and config.json), and this is not one",
            *GPT, "--data", CORPUS, "--max-steps", 0, "--save-format", "hf", "--save-model", P("a_file"))

    # successes: read back what dtrain wrote
    rc, out = run(*GPT, "--init-from", P("hf", "model.safetensors"), "--data", CORPUS, "--max-steps", 0,
                  "--json", P("back.json"), "--sample-length", 12, "--sample-temperature", 0)
    want, got = summary(P("hf.json")), summary(P("back.json"))
    check(rc == 0 and got["steps"] == 0 and got["test_loss"] == want["test_loss"] and
          "evaluation at step 0 (--max-steps 0: no training step)" in out and "done: no training step" in out and
          "init: weights of" in out and "Hugging Face Conv1D matrices" in out,
          "gpt read back from its HF export: validation loss %s, the exporting run's %s" % (got["test_loss"],
                                                                                           want["test_loss"]), out)
    conv = ["--init-from", P("gpt.safetensors"), "--data", CORPUS, "--max-steps", 0, "--eval", 0, "--sample-length", 0,
            "--quiet", "--save-format", "hf", "--save-model"]
    rc, out = run("--model", "gpt", *conv, P("hf1"))
    rc2, out2 = run("--model", "gpt", "--zero", 3, "--batch-size", 2, *conv, P("hf2"), np_=2)
    if rc2 == 77:  # the no-MPI build's mpiexec stand-in: the MPI job cannot run here
        print("skip the HF export gathered from ZeRO-3 shards at 2 ranks: " + out2.strip().splitlines()[-1], flush=True)
    else:
        same = rc == 0 and rc2 == 0 and all(open(P("hf1", f), "rb").read() == open(P("hf2", f), "rb").read()
                                            for f in ("model.safetensors", "config.json"))
        check(same, "the HF export gathered from ZeRO-3 shards at 2 ranks is the one-rank export, byte for byte", out + out2)
    rc, out = run("--model", "gpt", "--preset", "gpt-test", "--data", P("shards"), "--max-steps", 0, "--test-limit", 4,
                  "--sample-length", 8, "--json", P("tok.json"))
    rec = [d for d in map(json.loads, open(P("tok.json"))) if d["type"] == "sample"][0] if rc == 0 else {}
    check(rc == 0 and "vocabulary 50257 (tokens)" in out and "bits/token" in out and
          "sample (prompt tokens [50256]" in out and rec.get("prompt_tokens") == [50256] and
          len(rec.get("tokens", [])) == 8 and "text" not in rec,
          "token shards: vocabulary 50257, bits/token, the sample's token ids from <|endoftext|>", out)
    if os.path.isdir(FMNIST):
        mlp = ["--model", "mlp", "--hidden1", "32", "--hidden2", "16", "--test-limit", "500", "--batch-size", "32"]
        rc, out = run(*mlp, "--max-steps", 5, "--epochs", 1, "--quiet", "--save-model", P("mlp.safetensors"),
                      "--json", P("mlp.json"))
        rc2, out2 = run(*mlp, "--init-from", P("mlp.safetensors"), "--max-steps", 0, "--json", P("mlp2.json"))
        ok = rc == 0 and rc2 == 0 and summary(P("mlp2.json"))["test_acc"] == summary(P("mlp.json"))["test_acc"]
        check(ok, "mlp read back from dtrain's file: the saving run's test accuracy", out + out2)
    else:
        print("(%s missing: the classifier case is skipped)" % FMNIST)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(1 if failed else 0)
