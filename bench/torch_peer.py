#!/usr/bin/python3
"""PyTorch 1.13 (Debian python3-torch) peer for dtrain's training benchmarks.

Times the identical model and step (forward, cross-entropy, backward, SGD
momentum 0.9) with one intra-op thread per process (--threads T: T), batch 64
per rank, on random inputs; --model gpt (with --preset gpt-test|gpt-demo) is
the reference GPT of tests/reference/torch_gpt.py on random bytes, with AdamW. Single process by default; under mpirun with --ddp it wraps
the model in DistributedDataParallel (gloo, rank/size from Open MPI's or
MPICH's environment, rendezvous on 127.0.0.1). Prints one JSON line (rank 0):
{"peer":"torch","model":..,"ranks":..,"median_step_s":..}.
"""
import argparse, json, os, statistics, sys, time
import torch
import torch.nn as nn

GPT_PRESETS = {"gpt-test": (2, 4, 64, 64), "gpt-demo": (6, 6, 384, 256)}  # n_layer, n_head, n_embd, block


def make_model(name):
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(),
                             nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    if name == "lenet":  # RAF dist_example's LeNet
        return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2, bias=False), nn.BatchNorm2d(6),
                             nn.Sigmoid(), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(1176, 10))
    if name in GPT_PRESETS:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
        from torch_gpt import GPT
        L, H, C, T = GPT_PRESETS[name]
        return GPT(L, H, C, T, 256)
    raise SystemExit("unknown model " + name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="lenet")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--ddp", action="store_true")
    ap.add_argument("--port", type=int, default=29533)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads (torch.set_num_threads)")
    ap.add_argument("--preset", default="gpt-test", help="--model gpt: gpt-test or gpt-demo")
    a = ap.parse_args()
    if a.model == "gpt":
        a.model = a.preset
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))
    model = make_model(a.model)
    if a.ddp:
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{a.port}", rank=rank, world_size=size)
        model = nn.parallel.DistributedDataParallel(model)
    gpt = a.model in GPT_PRESETS
    if gpt:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        T = GPT_PRESETS[a.model][3]
        x = torch.randint(0, 256, (a.batch_size, T))
        y = torch.randint(0, 256, (a.batch_size, T))
        lossf = lambda out, t: out[1]
        model_call = model
        model = lambda inp: model_call(inp, y)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        lossf = nn.CrossEntropyLoss()
        x = torch.randn(a.batch_size, 1, 28, 28)
        y = torch.randint(0, 10, (a.batch_size,))
    times = []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = lossf(model(x), y)
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        if i >= a.warmup:
            times.append(t1 - t0)
    med = statistics.median(times)
    if a.ddp:
        import torch.distributed as dist
        t = torch.tensor([med])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        med = float(t[0])
        dist.destroy_process_group()
    if rank == 0:
        print(json.dumps({"peer": "torch", "model": a.model, "ranks": size, "batch_per_rank": a.batch_size,
                          "threads": a.threads, "median_step_s": med}))


if __name__ == "__main__":
    main()
