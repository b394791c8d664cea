#!/usr/bin/python3
"""PyTorch peer of dtrain's GPT benchmarks (bench/gpt.sh). Runs under
Debian's python3-torch 1.13 (/usr/bin/python3) or a PyTorch 2.x virtual
environment; the model is tests/reference/torch_gpt.py's GPT (nanoGPT's,
the same architecture and parameter names as dtrain's "gpt" family).

--mode step     median training step time (forward, cross-entropy,
                backward, AdamW, zero_grad) on random tokens, batch --batch
                per rank at the preset's block size. Single process, or under
                mpirun with --ddp (DistributedDataParallel, gloo) or --fsdp
                (FSDP2: fully_shard on every block, then on the model; gloo,
                torch >= 2.4). Prints one JSON line (rank 0): median_step_s
                (the slowest rank's), peak_rss_kb (every rank's ru_maxrss) and
                import_rss_kb (the RSS right after `import torch`: what the
                library alone costs, e.g. a CUDA build's libraries).
--mode train    the fixed-length training run dtrain is compared with: the
                same data windows (dtrain's text windows through libdtrain's
                dt_text_batch, ctypes), the same initial weights (a dtrain
                model created through libdtrain with the same seed), AdamW
                with nanoGPT's groups (tensors of 2+ dimensions decayed,
                the others not), dtrain's warm-up + cosine schedule
                (dt_lr_at), global-norm clipping; one process trains the
                global batch. Prints the validation loss per byte (the mean
                cross-entropy per token, nats) at --eval-every steps and at
                the end, on the windows dtrain's --test-limit picks.
Threads: set OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 in the environment
before starting (torch.set_num_threads(1) alone lets 1.13's OpenBLAS use
every core).
"""
import argparse, ctypes, json, math, os, resource, statistics, struct, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
IMPORT_T0 = time.perf_counter()
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

IMPORT_RSS_KB = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
from torch_gpt import GPT, PRESETS  # noqa: E402


def rank_size():
    r = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
    n = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))
    return r, n


def sizes(a):
    L, NH, C, T, V = PRESETS[a.preset]
    return (a.n_layer or L, a.n_head or NH, a.n_embd or C, a.block_size or T, V)


# ---- step time -----------------------------------------------------------------------

def bench_step(a):
    rank, size = rank_size()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    L, NH, C, T, V = sizes(a)
    model = GPT(L, NH, C, T, V, sdpa=a.sdpa)
    nparams = sum(p.numel() for p in model.parameters())
    dist = None
    if a.ddp or a.fsdp:
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % a.port, rank=rank, world_size=size)
        if a.ddp:
            model = torch.nn.parallel.DistributedDataParallel(model)
        else:
            try:
                from torch.distributed.fsdp import fully_shard
            except ImportError:
                from torch.distributed._composable.fsdp import fully_shard
            from torch.distributed.device_mesh import init_device_mesh
            mesh = init_device_mesh("cpu", (size,))
            for block in model.transformer.h:
                fully_shard(block, mesh=mesh)
            fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1 + rank)
    x = torch.randint(0, V, (a.batch, T), generator=g)
    y = torch.randint(0, V, (a.batch, T), generator=g)
    times = []
    for it in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        if it >= a.warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rss_all = [rss]
    if dist:
        t = torch.tensor([med])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        med = float(t[0])
        r = torch.zeros(size, dtype=torch.int64)
        r[rank] = rss
        dist.all_reduce(r)
        rss_all = [int(v) for v in r]
        dist.destroy_process_group()
    if rank == 0:
        flops = (6 * nparams + 12 * L * T * C) * a.batch * T
        print(json.dumps({"peer": "torch", "version": torch.__version__, "mode": "fsdp2" if a.fsdp else
                          "ddp" if a.ddp else "single", "ranks": size, "preset": a.preset, "batch_per_rank": a.batch,
                          "block_size": T, "params": nparams, "sdpa": bool(a.sdpa), "median_step_s": med,
                          "gflops_per_s": flops / med / 1e9, "peak_rss_kb": rss_all,
                          "import_rss_kb": IMPORT_RSS_KB}))


# ---- the training run on dtrain's windows --------------------------------------------------

class TextDataset(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_int64), ("train_size", ctypes.c_int64),
                ("nfiles", ctypes.c_int)]


class ModelConfig(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("hidden1", ctypes.c_int), ("hidden2", ctypes.c_int),
                ("conv_channels1", ctypes.c_int), ("conv_channels2", ctypes.c_int), ("hidden3", ctypes.c_int), ("dropout", ctypes.c_float), ("seed", ctypes.c_uint64),
                ("n_layer", ctypes.c_int), ("n_head", ctypes.c_int), ("n_embd", ctypes.c_int),
                ("block_size", ctypes.c_int), ("vocab_size", ctypes.c_int), ("recompute", ctypes.c_int)]


class ParamSlice(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 64), ("ndim", ctypes.c_int), ("shape", ctypes.c_int64 * 4),
                ("offset", ctypes.c_size_t), ("count", ctypes.c_size_t), ("layer", ctypes.c_int)]


def load_lib(path):
    lib = ctypes.CDLL(path)
    P = ctypes.POINTER
    lib.dt_text_load.argtypes = [ctypes.c_char_p, ctypes.c_double, P(TextDataset)]
    lib.dt_text_batch.argtypes = [P(TextDataset), ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64,
                                  ctypes.c_int, P(ctypes.c_int32), P(ctypes.c_int32)]
    lib.dt_text_num_windows.argtypes = [P(TextDataset), ctypes.c_int, ctypes.c_int]
    lib.dt_text_num_windows.restype = ctypes.c_int64
    lib.dt_text_num_eval_windows.argtypes = [P(TextDataset), ctypes.c_int, ctypes.c_int]
    lib.dt_text_num_eval_windows.restype = ctypes.c_int64
    lib.dt_text_eval_batch.argtypes = [P(TextDataset), ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int,
                                       P(ctypes.c_int32), P(ctypes.c_int32)]
    lib.dt_model_config_default.argtypes = [P(ModelConfig), ctypes.c_char_p]
    lib.dt_model_create.argtypes = [P(ModelConfig), P(ctypes.c_void_p)]
    lib.dt_model_num_params.argtypes = [ctypes.c_void_p]
    lib.dt_model_num_params.restype = ctypes.c_size_t
    lib.dt_model_params.argtypes = [ctypes.c_void_p]
    lib.dt_model_params.restype = P(ctypes.c_float)
    lib.dt_model_num_slices.argtypes = [ctypes.c_void_p]
    lib.dt_model_slice.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.dt_model_slice.restype = P(ParamSlice)
    lib.dt_model_free.argtypes = [ctypes.c_void_p]
    lib.dt_last_error.restype = ctypes.c_char_p
    return lib


def check(lib, rc, what):
    if rc < 0:
        raise SystemExit("%s failed: %s" % (what, lib.dt_last_error().decode()))
    return rc


def dtrain_init(lib, a, L, NH, C, T, V):
    """dtrain's initial parameters of the model (by state_dict name)."""
    cfg = ModelConfig()
    check(lib, lib.dt_model_config_default(ctypes.byref(cfg), b"gpt"), "dt_model_config_default")
    cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.block_size, cfg.vocab_size = L, NH, C, T, V
    cfg.seed = a.seed
    m = ctypes.c_void_p()
    check(lib, lib.dt_model_create(ctypes.byref(cfg), ctypes.byref(m)), "dt_model_create")
    base = ctypes.addressof(lib.dt_model_params(m).contents)
    sd = {}
    for i in range(lib.dt_model_num_slices(m)):
        s = lib.dt_model_slice(m, i).contents
        raw = ctypes.string_at(base + 4 * s.offset, 4 * s.count)
        sd[s.name.decode()] = torch.frombuffer(bytearray(raw), dtype=torch.float32).reshape(
            [s.shape[d] for d in range(s.ndim)])
    lib.dt_model_free(m)
    return sd


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def dtrain_lr(s, base, warmup, total, min_lr):
    """dt_lr_at: linear warm-up from 0, then cosine to min_lr, in double from
    the float base and floor, rounded to float."""
    base, min_lr = f32(base), f32(min_lr)
    if s < warmup:
        return f32(base * (s / warmup))
    if s >= total or total <= warmup:
        return min_lr
    return f32(min_lr + (base - min_lr) * 0.5 * (1.0 + math.cos(math.pi * (s - warmup) / (total - warmup))))


def train_run(a):
    torch.set_num_threads(1)
    L, NH, C, T, V = sizes(a)
    lib = load_lib(a.lib)
    ds = TextDataset()
    check(lib, lib.dt_text_load(a.data.encode(), 0.1, ctypes.byref(ds)), "dt_text_load")
    W = check(lib, lib.dt_text_num_windows(ctypes.byref(ds), 0, T), "dt_text_num_windows")
    nval = check(lib, lib.dt_text_num_eval_windows(ctypes.byref(ds), 1, T), "dt_text_num_eval_windows")
    neval = a.eval_windows if 0 < a.eval_windows < nval else nval
    G = a.batch  # the global batch (dtrain: --batch-size x ranks)
    per_epoch = W // G
    xb, yb = (ctypes.c_int32 * (G * T))(), (ctypes.c_int32 * (G * T))()

    def batch(step):
        e, pos = divmod(step, per_epoch)  # dtrain's text source: no partial batch at an epoch's end
        check(lib, lib.dt_text_batch(ctypes.byref(ds), 0, T, a.seed, e * W + pos * G, G, xb, yb), "dt_text_batch")
        return (torch.frombuffer(bytearray(xb), dtype=torch.int32).long().view(G, T),
                torch.frombuffer(bytearray(yb), dtype=torch.int32).long().view(G, T))

    ex, ey = [], []
    x1, y1 = (ctypes.c_int32 * T)(), (ctypes.c_int32 * T)()
    for i in range(neval):  # dtrain's evaluation windows: floor(i * n / N), spread over the split
        check(lib, lib.dt_text_eval_batch(ctypes.byref(ds), 1, T, int(i * nval / neval), 1, x1, y1), "eval")
        ex.append(list(x1))
        ey.append(list(y1))
    ex, ey = torch.tensor(ex, dtype=torch.int64), torch.tensor(ey, dtype=torch.int64)

    model = GPT(L, NH, C, T, V)
    res = model.load_state_dict(dtrain_init(lib, a, L, NH, C, T, V), strict=False)
    assert list(res.missing_keys) == ["lm_head.weight"] and not res.unexpected_keys, res
    decay = [p for _, p in model.named_parameters() if p.dim() >= 2]
    nodecay = [p for _, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": nodecay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.999), eps=1e-8)

    def evaluate():
        model.eval()
        with torch.no_grad():
            tot = 0.0
            for i in range(0, neval, 16):
                logits, _ = model(ex[i:i + 16])
                tot += float(F.cross_entropy(logits.reshape(-1, V), ey[i:i + 16].reshape(-1), reduction="sum"))
        model.train()
        return tot / (neval * T)

    t0 = time.perf_counter()
    for s in range(a.steps):
        lr = dtrain_lr(s, a.lr, a.warmup, a.steps, a.min_lr)
        for gr in opt.param_groups:
            gr["lr"] = lr
        x, y = batch(s)
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        if a.eval_every and (s + 1) % a.eval_every == 0 and s + 1 < a.steps:
            print("torch step %d/%d  loss %.4f  val_loss %.4f" % (s + 1, a.steps, float(loss), evaluate()), flush=True)
    vl = evaluate()
    print(json.dumps({"peer": "torch", "version": torch.__version__, "mode": "train", "steps": a.steps,
                      "val_loss": vl, "val_bits_per_byte": vl / math.log(2), "time_s": time.perf_counter() - t0}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["step", "train"], default="step")
    ap.add_argument("--preset", default="gpt-demo", choices=sorted(PRESETS))
    ap.add_argument("--n-layer", type=int, default=0)
    ap.add_argument("--n-head", type=int, default=0)
    ap.add_argument("--n-embd", type=int, default=0)
    ap.add_argument("--block-size", type=int, default=0)
    ap.add_argument("--batch", type=int, default=8, help="per rank (step) / global (train)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps (step) / lr warm-up steps (train)")
    ap.add_argument("--sdpa", action="store_true", help="F.scaled_dot_product_attention (2.x)")
    ap.add_argument("--ddp", action="store_true")
    ap.add_argument("--fsdp", action="store_true")
    ap.add_argument("--port", type=int, default=29540)
    ap.add_argument("--lib", default="build/lib/libdtrain.so")
    ap.add_argument("--data", default="/usr/share/games/fortunes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--eval-windows", type=int, default=0)
    ap.add_argument("--eval-every", type=int, default=0)
    a = ap.parse_args()
    if a.mode == "train":
        train_run(a)
    else:
        bench_step(a)


if __name__ == "__main__":
    main()
