#!/usr/bin/python3
"""Hugging Face GPT-2 checkpoints and llm.c token shards through dtrain-train,
against the PyTorch reference (tests/reference/torch_gpt.py, Debian's torch;
run by ctest, exits 77 without torch).

The reference model (2 layers, 4 heads, width 32, 32 positions, GPT-2's
vocabulary of 50257) is written as a real producer does: in Hugging Face's
GPT2LMHeadModel layout ("transformer." names, the four matrices as Conv1D
[in, out], no lm_head.weight, the attn.bias mask buffers, config.json), in
GPT2Model's (no prefix, lm_head.weight kept tied) and as nanoGPT's
state_dict (torch.nn.Linear [out, in]). The data are llm.c token shards
(a val and a train shard, written here in its format).
1. dtrain-train --init-from the HF file --max-steps 0: the validation loss
   equals torch's on the same windows (float64) within 1e-5 relative, and the
   greedy continuation of a token prompt is torch's, token for token; the
   other two layouts give the same loss, bit for bit, and so does the HF
   layout sharded over three files as save_pretrained writes it beyond
   max_shard_size (model.safetensors.index.json), given as its folder, and
   llm.c's model file (train_gpt2.py's format, gpt2_124M.bin's: version 3).
2. A few AdamW steps, then --save-format hf: the directory's config.json and
   model.safetensors are GPT2LMHeadModel's (names, Conv1D shapes, no
   lm_head); torch loads them (transposed back) and its loss equals dtrain's
   validation loss of the same model within 1e-5; the export read back by
   dtrain (--init-from DIR/model.safetensors, --save-model in dtrain's
   layout) gives the same parameters bit for bit, so the same logits.
Usage: gpt_hf_interop.py MPIEXEC DTRAIN_TRAIN
"""
import json, os, shutil, struct, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch_gpt import GPT, read_safetensors, to_hf_state_dict
except ImportError as e:
    print("SKIP: the PyTorch check needs /usr/bin/python3 with torch and numpy (%s)" % e)
    sys.exit(77)

MPIEXEC, BIN = sys.argv[1], sys.argv[2]
L, NH, C, T, V = 2, 4, 32, 32, 50257
NEVAL, PROMPT, NGEN = 8, [50256, 464, 318, 257], 16
failed = 0


def check(ok, what):
    global failed
    failed += not ok
    print(("ok   " if ok else "FAIL ") + what, flush=True)


def write_safetensors(path, tensors, meta=None):
    """A small safetensors writer: F32 tensors in the given order."""
    header, blobs, off = {}, [], 0
    if meta:
        header["__metadata__"] = meta
    for name, a in tensors:
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def write_shard(path, tokens):
    """llm.c's dev/data format: 256 int32 (magic, version, count), uint16 tokens."""
    hdr = np.zeros(256, dtype="<i4")
    hdr[:3] = [20240520, 1, len(tokens)]
    with open(path, "wb") as f:
        f.write(hdr.tobytes() + np.asarray(tokens, dtype="<u2").tobytes())


def run(*args):
    cmd = [BIN, "--model", "gpt", "--quiet"] + [str(a) for a in args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        print(" ".join(cmd), "\n", p.stdout, p.stderr)
        sys.exit(1)
    return p


def records(path, kind):
    return [d for d in map(json.loads, open(path)) if d["type"] == kind]


def reference_model():
    torch.manual_seed(0)
    m = GPT(L, NH, C, T, V)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # blocks that matter (a varied greedy continuation), no trivial LayerNorm
        for name, p in m.named_parameters():
            if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
            elif name.endswith(("c_attn.weight", "c_fc.weight")):
                p.mul_(10.0)
    return m


def as_float64(sd):
    """The reference model in float64 with the given float32 state_dict (Linear layout, lm_head tied)."""
    m = GPT(L, NH, C, T, V).double()
    res = m.load_state_dict({k: torch.as_tensor(v).double() for k, v in sd.items()}, strict=False)
    assert not res.unexpected_keys and set(res.missing_keys) <= {"lm_head.weight"}, res
    return m.eval()


def from_hf(sd):
    """A GPT2LMHeadModel state_dict (Conv1D) back to the reference's (Linear)."""
    conv1d = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
    return {k: (v.t().contiguous() if k.endswith(conv1d) else v) for k, v in sd.items()}


def eval_windows(val):
    n = (len(val) - 1) // T
    starts = [int(i * n / NEVAL) * T for i in range(NEVAL)]
    x = torch.tensor([val[s:s + T] for s in starts], dtype=torch.int64)
    y = torch.tensor([val[s + 1:s + T + 1] for s in starts], dtype=torch.int64)
    return x, y


def rel(a, b):
    return abs(a - b) / abs(b)


tmp = tempfile.mkdtemp(prefix="dtrain_hfinterop_")
try:
    torch.set_num_threads(1)
    model = reference_model()
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    sd.pop("lm_head.weight")  # the tied head: wte
    hf = to_hf_state_dict({k: torch.from_numpy(v) for k, v in sd.items()})
    masks = [("transformer.h.%d.attn.bias" % l, np.tril(np.ones((T, T), "f4")).reshape(1, 1, T, T)) for l in range(L)]
    config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V, "n_positions": T,
              "n_ctx": T, "n_embd": C, "n_layer": L, "n_head": NH, "n_inner": None,
              "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05, "resid_pdrop": 0.1,
              "scale_attn_weights": True, "tie_word_embeddings": True, "bos_token_id": 50256, "eos_token_id": 50256}
    # GPT2LMHeadModel's layout, GPT2Model's (with the tied head), nanoGPT's
    layouts = {"hf": [(k, v.numpy()) for k, v in hf.items()] + masks,
               "hf_base": [(k[len("transformer."):], v.numpy()) for k, v in hf.items()] +
                          [(k[len("transformer."):], v) for k, v in masks] + [("lm_head.weight", sd["transformer.wte.weight"])],
               "nanogpt": list(sd.items()) + [("lm_head.weight", sd["transformer.wte.weight"])]}
    for name, tensors in layouts.items():
        os.makedirs(os.path.join(tmp, name))
        write_safetensors(os.path.join(tmp, name, "model.safetensors"), tensors, {"format": "pt"})
        if name != "nanogpt":
            json.dump(config, open(os.path.join(tmp, name, "config.json"), "w"))
    # save_pretrained's sharded folder: the HF layout over three shards and their index
    sharded = os.path.join(tmp, "hf_sharded")
    os.makedirs(sharded)
    json.dump(config, open(os.path.join(sharded, "config.json"), "w"))
    parts, weight_map, total = [[], [], []], {}, 0
    for i, (k, v) in enumerate(layouts["hf"]):
        parts[i * 3 // len(layouts["hf"])].append((k, v))
    for i, part in enumerate(parts):
        fname = "model-%05d-of-00003.safetensors" % (i + 1)
        write_safetensors(os.path.join(sharded, fname), part, {"format": "pt"})
        weight_map.update({k: fname for k, _ in part})
        total += sum(v.size * 4 for _, v in part)
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map},
              open(os.path.join(sharded, "model.safetensors.index.json"), "w"), indent=2)
    # llm.c's model file (its train_gpt2.py's write_model, version 3): a 256-int32 header, then the
    # float32 tensors in llm.c's order, the per-block ones stacked over the blocks, wte padded to 128s
    Vp = (V + 127) // 128 * 128
    llmc = os.path.join(tmp, "gpt_llmc.bin")
    hdr = np.zeros(256, dtype="<i4")
    hdr[:8] = [20240326, 3, T, V, L, NH, C, Vp]
    wte = np.concatenate([sd["transformer.wte.weight"], np.zeros((Vp - V, C), "f4")])
    blocks = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
              "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
              "mlp.c_proj.bias"]
    parts = [wte, sd["transformer.wpe.weight"]] + \
            [np.stack([sd["transformer.h.%d.%s" % (l, b)] for l in range(L)]) for b in blocks] + \
            [sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"]]
    with open(llmc, "wb") as f:
        f.write(hdr.tobytes() + b"".join(np.ascontiguousarray(a, "<f4").tobytes() for a in parts))
    # llm.c shards: a "text" of tokens from a small random transition table
    rng = np.random.default_rng(5)
    vocab = rng.choice(V, 400, replace=False)
    nxt = rng.integers(0, 400, (400, 3))
    state, toks = 0, []
    for _ in range(6000):
        state = nxt[state, rng.integers(0, 3)]
        toks.append(int(vocab[state]))
    shards = os.path.join(tmp, "shards")
    os.makedirs(shards)
    write_shard(os.path.join(shards, "toy_val_000000.bin"), toks[:1000])
    write_shard(os.path.join(shards, "toy_train_000001.bin"), toks[1000:])

    # 1. inference from the loaded checkpoints
    common = ["--data", shards, "--max-steps", "0", "--test-limit", NEVAL, "--batch-size", 8,
              "--sample-tokens", ",".join(map(str, PROMPT)), "--sample-temperature", 0, "--sample-length", NGEN]
    losses = {}
    for name in list(layouts) + ["hf_sharded", "llmc"]:
        js = os.path.join(tmp, name + ".json")
        heads = ["--n-head", NH] if name == "nanogpt" else []  # no config.json: the flag says it
        src = {"hf_sharded": sharded, "llmc": llmc}.get(name, os.path.join(tmp, name, "model.safetensors"))
        run("--init-from", src, "--json", js, *(common + heads))
        losses[name] = records(js, "summary")[0]["test_loss"]
        if name == "hf":
            sample = records(js, "sample")[0]
    ref = as_float64(sd)
    x, y = eval_windows(toks[:1000])
    with torch.no_grad():
        _, loss = ref(x, y)
        gen = list(PROMPT)
        margins = []
        for _ in range(NGEN):
            logits, _ = ref(torch.tensor([gen]))
            top = torch.topk(logits[0, -1], 2).values
            margins.append(float(top[0] - top[1]))
            gen.append(int(torch.argmax(logits[0, -1])))
    e = rel(losses["hf"], float(loss))
    check(e <= 1e-5, "HF checkpoint: dtrain's validation loss %.9f, torch float64 %.9f on the same %d windows: "
          "rel err %.2e (tol 1e-5)" % (losses["hf"], float(loss), NEVAL, e))
    check(sample["tokens"] == gen[len(PROMPT):] and sample["prompt_tokens"] == PROMPT and "text" not in sample and
          len(set(gen[len(PROMPT):])) > NGEN // 2,
          "greedy continuation of %s: dtrain %s, torch %s (smallest top-2 margin %.3g)"
          % (PROMPT, sample["tokens"], gen[len(PROMPT):], min(margins)))
    check(losses["hf_base"] == losses["hf"] and losses["nanogpt"] == losses["hf"],
          "GPT2Model's and nanoGPT's layouts: the same loss bit for bit (%r, %r)" % (losses["hf_base"], losses["nanogpt"]))
    check(losses["hf_sharded"] == losses["hf"],
          "the HF layout over 3 shards, --init-from its folder (index and config.json): the same loss bit for bit "
          "(%r)" % losses["hf_sharded"])
    check(losses["llmc"] == losses["hf"],
          "llm.c's model file (version 3, wte padded to %d rows): the same loss bit for bit (%r)" % (Vp, losses["llmc"]))

    # 2. train, export in HF's layout, read back
    out = os.path.join(tmp, "out_hf")
    run("--init-from", os.path.join(tmp, "hf", "model.safetensors"), "--data", shards, "--max-steps", 4,
        "--batch-size", 4, "--optimizer", "adamw", "--lr", "1e-3", "--eval", 0, "--sample-length", 0,
        "--save-format", "hf", "--save-model", out)
    cfg = json.load(open(os.path.join(out, "config.json")))
    check(cfg["model_type"] == "gpt2" and cfg["architectures"] == ["GPT2LMHeadModel"] and
          (cfg["n_layer"], cfg["n_head"], cfg["n_embd"], cfg["n_positions"], cfg["vocab_size"]) == (L, NH, C, T, V) and
          cfg["activation_function"] == "gelu_new" and cfg["layer_norm_epsilon"] == 1e-5 and cfg["eos_token_id"] == 50256,
          "the export's config.json: %s" % {k: cfg[k] for k in ("n_layer", "n_head", "n_embd", "n_positions", "vocab_size")})
    exp, meta = read_safetensors(os.path.join(out, "model.safetensors"))
    check(set(exp) == set(hf) and all(tuple(exp[k].shape) == tuple(hf[k].shape) for k in hf) and meta.get("format") == "pt",
          "the export's tensors: GPT2LMHeadModel's names and Conv1D shapes, no lm_head.weight, format pt")
    back = os.path.join(tmp, "back")
    run("--init-from", os.path.join(out, "model.safetensors"), "--json", back + ".json", "--save-model",
        back + ".safetensors", *common)
    dt_loss = records(back + ".json", "summary")[0]["test_loss"]
    lin, _ = read_safetensors(back + ".safetensors")
    trained = from_hf(exp)
    check(all(torch.equal(lin[k], trained[k]) for k in trained),
          "the export read back by dtrain: the same parameters bit for bit (Conv1D transposed back)")
    m64 = as_float64({k: v.numpy() for k, v in trained.items()})
    m32 = GPT(L, NH, C, T, V)
    m32.load_state_dict(lin, strict=False)
    with torch.no_grad():
        _, l64 = m64(x, y)
        lg32, _ = m32.eval()(x, y)
        lg64, _ = m64(x, y)
    e = rel(dt_loss, float(l64))
    check(e <= 1e-5 and float(l64) < float(loss),
          "the trained export: dtrain's validation loss %.9f, torch's %.9f: rel err %.2e (tol 1e-5); before "
          "training %.6f" % (dt_loss, float(l64), e, float(loss)))
    el = float((lg32.double() - lg64).abs().max() / lg64.abs().max())
    check(el <= 1e-5, "the export's logits: torch float32 from dtrain's layout vs float64 from HF's: rel err %.2e" % el)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(1 if failed else 0)
