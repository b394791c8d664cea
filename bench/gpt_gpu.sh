#!/usr/bin/env bash
# bench/gpt_gpu.sh - the GPT-2 124M shape (12 layers, 12 heads, 768 wide, T
# 1024, vocabulary 50257) trained in bf16 on one GPU, side by side in one run:
#   dtrain   build/bin/gpt_gpu_bench (bench/programs/gpt_gpu_bench.c): its
#            CUDA backend, AdamW with clipping to 1.0; also fp32;
#   llm.c    train_gpt2cu built here from a carried source tree (LLMC; never
#            committed), -e d12 (a fresh GPT-2 124M), on token shards made
#            here (llm.c's format, random tokens), its own step timing;
#   PyTorch  bench/torch_gpt_gpu.py on the machine's python3 (bf16 autocast,
#            SDPA flash attention, fused AdamW, torch.compile, vocabulary
#            padded to 50304 as nanoGPT does).
# All at batch GPT_B (default 16) x 1024, median step over the steps after a
# warm-up. Prints a table: step time, tokens/s, TFLOP/s (6P + 12 L C T per
# token), MFU (dtrain/device.h's peak of the GPU), each peer's tokens/s over
# dtrain's; and dtrain's optimizer time (clip + AdamW + zero_grad over 124M
# parameters) and peak device memory. Raw output in GPT_OUT.
# Environment: GPT_OUT (default gpu-out/gpt.txt), BUILD (default build-gpu),
# BUDGET_LEFT (seconds, default 400: each part is held to a share), GPT_B,
# LLMC (default .gpu-llmc), NGPU (GPUs seen; default from nvidia-smi),
# PYTHON (default python3). Exit 1 only if dtrain's own run failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
LOG=${GPT_OUT:-$ROOT/gpu-out/gpt.txt}
mkdir -p "$(dirname "$LOG")"
BUILD=${BUILD:-$ROOT/build-gpu}
BUDGET=${BUDGET_LEFT:-400}
B=${GPT_B:-16}
LLMC=${LLMC:-$ROOT/.gpu-llmc}
PY=${PYTHON:-python3}
NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
: > "$LOG"
t_start=$SECONDS
left() { echo $((BUDGET - (SECONDS - t_start))); }
share() { local c=$(( ($(left) - $1) / $2 )); [ $c -lt 20 ] && c=20; echo $c; } # share RESERVE PARTS
capped() { local c=$1; shift; timeout -k 5 "$c" "$@"; }
json_of() { grep -h "^{\"bench\":\"$1\"" "$2" | tail -1; }
field() { sed -n "s/.*\"$2\":\\([^,}]*\\).*/\\1/p" <<<"$1" | tr -d '"'; }

if [ "$NGPU" -eq 0 ]; then
    echo "GPT benchmark: not run (no GPU)"
    exit 0
fi
status=0
T=1024

# ---- dtrain --------------------------------------------------------------------
echo "== dtrain, bf16, B=$B" >> "$LOG"
capped "$(share 200 3)" "$BUILD/bin/gpt_gpu_bench" --preset gpt2-124m --vocab 50257 --batch "$B" --steps 20 --warmup 3 \
    --precision bf16 > "$LOG.dt" 2>&1
rc=$?
cat "$LOG.dt" >> "$LOG"
DT=$(json_of gpt_gpu "$LOG.dt")
if [ $rc -ne 0 ] || [ -z "$DT" ]; then
    echo "dtrain bf16: FAILED (exit $rc): $(tail -2 "$LOG.dt" | tr '\n' ' ')"
    status=1
fi
if [ "$(left)" -gt 240 ]; then
    echo "== dtrain, fp32, B=$B" >> "$LOG"
    capped "$(share 200 3)" "$BUILD/bin/gpt_gpu_bench" --preset gpt2-124m --vocab 50257 --batch "$B" --steps 8 \
        --warmup 2 --precision fp32 > "$LOG.dt32" 2>&1 || echo "dtrain fp32: FAILED: $(tail -1 "$LOG.dt32")"
    cat "$LOG.dt32" >> "$LOG"
fi
DT32=$(json_of gpt_gpu "$LOG.dt32" 2>/dev/null)

# ---- llm.c ----------------------------------------------------------------------
LC_MS=""
if [ -f "$LLMC/train_gpt2.cu" ] && [ "$(left)" -gt 150 ]; then
    W=/tmp/dtrain-llmc
    rm -rf "$W" && cp -r "$LLMC" "$W" && mkdir -p "$W/data"
    # built as its Makefile builds train_gpt2cu without cuDNN, NCCL or MPI, with
    # one edit for CUDA 13 (cudaMemAdvise takes a cudaMemLocation there; the line
    # is its out-of-memory fallback), linked with the driver's NVML
    sed -i 's|cudaMemAdvise(\*out, bytes, cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)|cudaMemAdvise(*out, bytes, cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})|' \
        "$W/llmc/cuda_utils.cuh"
    mkdir -p "$W/lib"
    nvml=$(ldconfig -p 2>/dev/null | awk '/libnvidia-ml\.so\.1 / {print $NF; exit}')
    [ -n "$nvml" ] && ln -sf "$nvml" "$W/lib/libnvidia-ml.so"
    NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
    echo "== llm.c: build (nvcc -O3 --use_fast_math, sm_${cc:-90}, NVML ${nvml:-not found})" >> "$LOG"
    (cd "$W" && capped "$(share 120 2)" "$NVCC" --threads=0 --use_fast_math -std=c++17 -O3 \
        --generate-code "arch=compute_${cc:-90},code=[compute_${cc:-90},sm_${cc:-90}]" -DENABLE_BF16 train_gpt2.cu \
        -lcublas -lcublasLt -L"$W/lib" -lnvidia-ml -o train_gpt2cu) >> "$LOG" 2>&1
    # token shards in llm.c's format: a header of 256 int32 (magic 20240520,
    # version 1, count), then uint16 tokens
    "$PY" - "$W/data" <<'PYEOF' >> "$LOG" 2>&1
import os, random, struct, sys, array
d = sys.argv[1]
random.seed(0)
for split, n in (("train", 4 << 20), ("val", 1 << 18)):
    toks = array.array("H", (random.randrange(50257) for _ in range(n)))
    with open(os.path.join(d, "tok_%s_000000.bin" % split), "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(toks.tobytes())
PYEOF
    if [ -x "$W/train_gpt2cu" ]; then
        echo "== llm.c: train_gpt2cu -e d12 -b $B -t $T" >> "$LOG"
        (cd "$W" && capped "$(share 90 2)" ./train_gpt2cu -e d12 -i "data/tok_train_*.bin" -j "data/tok_val_*.bin" \
            -b "$B" -t $T -x 25 -v 100000 -m 1 -s 0 -h 0 -l 6e-4 -c 0.1 -u 0 -o "$W/log") > "$LOG.lc" 2>&1
        cat "$LOG.lc" >> "$LOG"
        # "step  N/25 | loss ... | X ms | Y% bf16 MFU | Z tok/s": the median of steps 6..25
        LC_MS=$(awk '/^step +[0-9]+\/[0-9]+ \|/ {split($2, s, "/"); if (s[1] + 0 > 5) for (i = 1; i <= NF; i++)
                    if ($(i + 1) == "ms") print $i}' "$LOG.lc" | sort -g | awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]}')
        [ -n "$LC_MS" ] || echo "llm.c: no step timings (see gpt.txt): $(tail -2 "$LOG.lc" | tr '\n' ' ')"
    else
        echo "llm.c: not built (see gpt.txt): $(grep -m2 -i error "$LOG" | tr '\n' ' ')"
    fi
else
    echo "llm.c: not run ($([ -f "$LLMC/train_gpt2.cu" ] && echo 'time budget' || echo "no source in $LLMC: carry it"))"
fi

# ---- PyTorch ---------------------------------------------------------------------
PT=""
if [ "$(left)" -gt 60 ] && "$PY" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    echo "== PyTorch, bf16 autocast, torch.compile, B=$B" >> "$LOG"
    capped "$(share 10 1)" "$PY" bench/torch_gpt_gpu.py --batch "$B" --block $T --vocab 50257 --steps 20 --warmup 5 \
        --compile 1 > "$LOG.pt" 2>&1
    cat "$LOG.pt" >> "$LOG"
    PT=$(json_of torch_gpt_gpu "$LOG.pt")
    [ -n "$PT" ] || echo "PyTorch: no result (see gpt.txt): $(tail -2 "$LOG.pt" | tr '\n' ' ')"
else
    echo "PyTorch: not run ($([ "$(left)" -gt 60 ] && echo 'no torch with CUDA in '"$PY" || echo 'time budget'))"
fi

# ---- the table ----------------------------------------------------------------------
dt_tps=$(field "$DT" tokens_per_s)
peak=$(field "$DT" peak_tflops)
P=$(field "$DT" params)
fpt=$(awk -v p="${P:-124475904}" 'BEGIN {printf "%.0f", 6 * p + 12 * 12 * 768 * 1024}')
row() { # name step_ms tokens/s [peak TFLOP/s: default the bf16 one]
    awk -v n="$1" -v ms="$2" -v tps="$3" -v f="$fpt" -v pk="${4:-${peak:-0}}" -v ref="${dt_tps:-0}" 'BEGIN {
        tf = f * tps / 1e12; mfu = pk > 0 ? sprintf("%.1f%%", 100 * tf / pk) : "n/a";
        r = ref > 0 ? sprintf("%.2f", tps / ref) : "n/a";
        printf "  %-34s %9.2f %12.0f %8.1f %7s %8s\n", n, ms, tps, tf, mfu, r}'
}
echo "GPT-2 124M shape, B=$B x T=$T, vocabulary 50257, one GPU ($(field "$DT" gpu)): median step"
printf "  %-34s %9s %12s %8s %7s %8s\n" "" "step ms" "tokens/s" "TFLOP/s" "MFU" "vs dtrain"
[ -n "$DT" ] && row "dtrain bf16" "$(field "$DT" step_ms)" "$dt_tps"
[ -n "$DT32" ] && row "dtrain fp32 (MFU of the fp32 peak)" "$(field "$DT32" step_ms)" "$(field "$DT32" tokens_per_s)" \
    "$(field "$DT32" peak_tflops)"
[ -n "$LC_MS" ] && row "llm.c train_gpt2cu (bf16)" "$LC_MS" "$(awk -v ms="$LC_MS" -v b="$B" 'BEGIN {print b * 1024 / (ms / 1e3)}')"
[ -n "$PT" ] && row "PyTorch $(field "$PT" torch) compile bf16" "$(field "$PT" step_ms)" "$(field "$PT" tokens_per_s)"
if [ -n "$DT" ]; then
    echo "  dtrain: clip + AdamW + zero_grad over $P parameters: $(field "$DT" optim_ms) ms (target <= 1.5); peak device" \
         "memory $(field "$DT" peak_mem_gb) GB (activations $(field "$DT" act_gb) GB); loss $(field "$DT" loss_first) ->" \
         "$(field "$DT" loss_last) (random tokens)"
fi
[ -n "$PT" ] && echo "  PyTorch: peak memory $(field "$PT" peak_mem_gb) GB, compile warm-up $(field "$PT" compile_s) s"
echo "  targets: dtrain >= 1.2x PyTorch compiled, >= 1.0x llm.c, MFU >= 45% of the peak"
rm -f "$LOG.dt" "$LOG.dt32" "$LOG.lc" "$LOG.pt"
exit $status
