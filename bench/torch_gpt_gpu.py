#!/usr/bin/env python3
"""PyTorch peer of dtrain's GPT on a GPU (bench/programs/gpt_gpu_bench.c, the
GPU suite's GPT benchmark): the same model (tests/reference/torch_gpt.py's
GPT, nanoGPT's GPT-2 with the same parameter names and tied head) as
PyTorch users train it fast: bf16 autocast, F.scaled_dot_product_attention
(flash attention), fused AdamW (lr 6e-4, betas 0.9/0.95, weight decay 0.1),
gradient clipping to 1.0, TF32 allowed, torch.compile, on random tokens.

    python3 bench/torch_gpt_gpu.py [--batch 16] [--block 1024] [--vocab 50257]
        [--pad-vocab 1] [--steps 20] [--warmup 5] [--compile 1] [--dtype bf16|fp32]

--pad-vocab 1 rounds the vocabulary up to a multiple of 128 (nanoGPT's 50304,
what dtrain does inside; the loss then covers the padded columns too, as in
nanoGPT). Each step is timed with CUDA events (forward, loss, backward,
clip, AdamW, zero_grad); medians after the warm-up (which includes
compilation). Last line: one JSON object."""
import argparse, json, math, os, statistics, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_gpt import GPT  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--pad-vocab", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--compile", type=int, default=1)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_gpt_gpu: no CUDA device")
        sys.exit(77)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    V = (a.vocab + 127) // 128 * 128 if a.pad_vocab else a.vocab
    model = GPT(a.layers, a.heads, a.embd, a.block, V, sdpa=True).to(dev)
    P = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    run = torch.compile(model) if a.compile else model
    x = torch.randint(0, a.vocab, (a.batch, a.block), device=dev)
    y = torch.roll(x, -1, dims=1)
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    times, losses = [], []
    torch.cuda.reset_peak_memory_stats()
    t_compile = time.perf_counter()
    for it in range(a.warmup + a.steps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        with torch.autocast(device_type="cuda", dtype=dt, enabled=a.dtype == "bf16"):
            _, loss = run(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        e1.record()
        torch.cuda.synchronize()
        if it == a.warmup - 1:
            t_compile = time.perf_counter() - t_compile
        if it >= a.warmup:
            times.append(e0.elapsed_time(e1) / 1e3)
        losses.append(loss.item())
    step = statistics.median(times)
    tokens = a.batch * a.block
    fpt = 6 * P + 12 * a.layers * a.embd * a.block
    peak_mem = torch.cuda.max_memory_allocated() / 1e9
    name = torch.cuda.get_device_name(0)
    print("pytorch %s GPT %dx%d, B=%d T=%d V=%d%s, %s, compile %d on %s: %d parameters" %
          (torch.__version__, a.layers, a.embd, a.batch, a.block, V, " (padded)" if V != a.vocab else "", a.dtype,
           a.compile, name, P))
    print("  step %.2f ms: %.0f tokens/s, %.1f TFLOP/s; warm-up (compile) %.1f s; peak memory %.2f GB; loss %.4f -> %.4f"
          % (1e3 * step, tokens / step, fpt * tokens / step / 1e12, t_compile, peak_mem, losses[0], losses[-1]))
    print(json.dumps({"bench": "torch_gpt_gpu", "torch": torch.__version__, "gpu": name, "dtype": a.dtype,
                      "compile": a.compile, "B": a.batch, "T": a.block, "V": V, "params": P,
                      "step_ms": round(1e3 * step, 3), "tokens_per_s": round(tokens / step, 1),
                      "tflops": round(fpt * tokens / step / 1e12, 2), "peak_mem_gb": round(peak_mem, 3),
                      "compile_s": round(t_compile, 1), "loss_first": losses[0], "loss_last": losses[-1]}))


if __name__ == "__main__":
    main()
