#!/usr/bin/env bash
# ZeRO: per-rank memory by stage (mlp, fp32 Adam) at 1, 2 and 4 ranks, and step
# time of stages 1-3 relative to stage 0 at 2 ranks, measured in ONE run
# (stages alternated, best of ROUNDS medians each).
#   bench/zero.sh            (after `make build`)
# Env: BUILD (default build), STEPS (default 200), ROUNDS (default 3).
#
# DEVICE=cuda bench/zero.sh (a CUDA build, BUILD default build-gpu): the GPT-2
# 124M shape (12 layers x 768, T 1024, vocabulary 50257) trained on the GPU(s)
# in fp32 with AdamW, DDP and ZeRO-1/2/3 at 1, 2 and 4 ranks (rank r on GPU r %
# the GPUs present: ranks share a GPU when there are fewer, their collectives
# then staged unless NCCL_MULTI_RANK_GPU_ENABLE=1 lets NCCL serve them): rank
# 0's DEVICE bytes of model state (the memory record's params_device +
# grads_device + optimizer_device) against 16P, 8P + 8P/N, 4P + 12P/N, 16P/N,
# its communication and gathered buffers' device peaks, the median step time,
# the sum of its registered device peaks (activations included), the GPU
# memory in use at the end (the memory table's line: all processes on it) and
# at its peak during the run (nvidia-smi sampled every 100 ms, when present); and ZeRO-3 with --zero-offload 1 at each N (the
# shard and optimizer on the host). Env: GPU_B (batch per rank, default 1),
# GPU_STEPS (default 6), DATA (a text file or directory; default: docs/*.md
# concatenated), MPIRUN (default mpirun; absent: only N = 1), NPS (the rank
# counts, default "1 2 4"), PRECISION
# (fp32, default, or bf16: the formulas 18P, 6P + 12P/N, 2P + 16P/N, 16P/N
# with the bf16 compute copy and from stage 1 the f32 master sharded), TRAIN (the trainer; default
# $BUILD/bin/dtrain-train: build/tests/dtrain-train-fakegpu with
# DTRAIN_FAKEGPU_DEVICES=4 gives the registered bytes on the fake GPU, every
# kernel a CPU twin: about 12 s per step and rank at this shape).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT

if [ "${DEVICE:-cpu}" = cuda ]; then
  BUILD=${BUILD:-build-gpu}; B=${GPU_B:-1}; STEPS=${GPU_STEPS:-6}
  MPIRUN=${MPIRUN:-mpirun}; PREC=${PRECISION:-fp32}; TRAIN=${TRAIN:-$BUILD/bin/dtrain-train}
  DATA=${DATA:-}
  if [ -z "$DATA" ]; then DATA=$TMP/text.txt; cat docs/*.md > "$DATA"; fi
  nps=${NPS:-1 2 4}
  command -v "${MPIRUN%% *}" > /dev/null || { nps=1; echo "(no $MPIRUN: 1 rank only)"; }
  echo "# per-rank device memory of model state, GPT-2 124M shape (vocabulary 50257, T 1024), $PREC AdamW, batch $B per rank ($TRAIN)"
  printf "%5s %-10s %14s %8s %8s %12s %14s %14s %12s\n" ranks stage "device B" "x P" formula "host B" "comm pk B" \
      "gathered pk B" "ms/step"
  for np in $nps; do
    for z in 0 1 2 3 3o; do
      flags=(--zero "${z%o}")
      [ "$z" = 3o ] && flags+=(--zero-offload 1)
      cmd=("$TRAIN" --model gpt --preset gpt2-124m --vocab-size 50257 --device cuda --precision "$PREC" --optimizer adamw
           --batch-size "$B" --max-steps "$STEPS" --eval 0 --sample-length 0 --data "$DATA" --json "$TMP/g.json"
           "${flags[@]}")
      rm -f "$TMP/g.json" "$TMP/smi.txt"
      smi=
      if command -v nvidia-smi > /dev/null; then # the GPUs' memory in use, every 100 ms: its peak
        nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$TMP/smi.txt" 2>/dev/null &
        smi=$!
      fi
      if [ "$np" = 1 ]; then "${cmd[@]}" > "$TMP/g.out" 2>&1 || true
      else $MPIRUN -np "$np" "${cmd[@]}" > "$TMP/g.out" 2>&1 || true; fi
      [ -n "$smi" ] && kill "$smi" 2>/dev/null && wait "$smi" 2>/dev/null
      $PY - "$np" "$z" "$TMP/g.json" "$TMP/g.out" "$TMP/smi.txt" "$PREC" <<'PY'
import json, os, re, sys
n, z, path, out, smi, prec = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
try:
    recs = [json.loads(l) for l in open(path)]
except OSError:
    print("%5d %-10s FAILED: %s" % (n, z, " ".join(open(out).read().split("\n")[-3:])))
    sys.exit(0)
m = [r for r in recs if r.get("type") == "memory"][-1]
s = [r for r in recs if r.get("type") == "summary"][-1]
P = m["num_params"]
dev = m["params_device"] + m["grads_device"] + m["optimizer_device"]
host = m["params"] + m["grads"] + m["optimizer"] - dev
st = int(z[0])
if prec == "bf16":  # a bf16 copy (none at stage 3: bf16 layers gathered) and the f32 master (ZeRO's shards from stage 1)
    formula = [18, 6 + 12 / n, 2 + 16 / n, 16 / n][st] if z != "3o" else 4 / n
else:
    formula = [16, 8 + 8 / n, 4 + 12 / n, 16 / n][st] if z != "3o" else 4 / n
name = {"0": "0 (DDP)", "3o": "3 offload"}.get(z, z)
print("%5d %-10s %14d %8.3f %8.3f %12d %14d %14d %12.2f" % (n, name, dev, dev / P, formula, host,
      m["comm_device_peak"], m["gathered_device_peak"], 1e3 * s["median_step_s"]))
reg = sum(m[c + "_device_peak"] for c in ("params", "grads", "optimizer", "comm", "gathered", "activations"))
line = "%5s %-10s rank 0 registered device peaks (activations included) %.2f GB" % ("", "", reg / 1e9)
used = re.findall(r"the device has ([0-9.]+) GB, ([0-9.]+) GB in use now", open(out).read())
if used:
    line += "; GPU memory in use at the end %s of %s GB" % (used[-1][1], used[-1][0])
if os.path.exists(smi):
    v = [int(x) for x in re.findall(r"^\s*(\d+)\s*$", open(smi).read(), re.M)]
    if v:
        line += "; peak in use during the run %.2f GB (nvidia-smi, all processes)" % (max(v) * 1048576 / 1e9)
print(line)
PY
    done
  done
  exit 0
fi

BUILD=${BUILD:-build}; STEPS=${STEPS:-200}; ROUNDS=${ROUNDS:-3}
MPIRUN="mpirun --oversubscribe --bind-to none"

echo "# per-rank model-state memory, mlp 784-1024-1024-10 (P = 1863690), Adam, rank 0"
printf "%5s %5s %14s %10s %10s %14s %14s\n" ranks stage "model state B" "x P" formula "comm peak B" "gathered pk B"
# parsed from the memory table the trainer prints at the end of a short run
for np in 1 2 4; do
  for z in 0 1 2 3; do
    out=$($MPIRUN -np $np "$BUILD/bin/dtrain-train" --model mlp --optimizer adam --zero $z --epochs 1 --max-steps 3 \
        --train-limit 4096 --eval 0 2>&1)
    $PY - $np $z <<PY
import re
n, z = $np, $z
txt = """$out"""
end = txt[txt.index("memory (end"):]
P = int(re.search(r"P = (\d+)", end).group(1))
cur = {k: int(v) for k, v, p in re.findall(r"^\s+(\w+)\s+(-?\d+)\s+(-?\d+)", end, re.M)}
peaks = {k: int(p) for k, v, p in re.findall(r"^\s+(\w+)\s+(-?\d+)\s+(-?\d+)", end, re.M)}
state = cur["params"] + cur["grads"] + cur["optimizer"]
formula = [16, 8 + 8 / n, 4 + 12 / n, 16 / n][z]
print("%5d %5d %14d %10.3f %10.3f %14d %14d" % (n, z, state, state / P, formula, peaks["comm"], peaks["gathered"]))
PY
  done
done

echo
echo "# step time at 2 ranks relative to stage 0 (mlp, Adam, batch 64 per rank; best of $ROUNDS medians)"
declare -A best
for r in $(seq "$ROUNDS"); do
  for z in 0 1 2 3; do
    j="$TMP/z$z.json"
    $MPIRUN -np 2 "$BUILD/bin/dtrain-train" --model mlp --optimizer adam --zero $z --epochs 1 \
        --max-steps $((STEPS + 20)) --eval 0 --quiet --json "$j" >/dev/null
    t=$($PY -c "import json,statistics; t=[json.loads(l)['time_s'] for l in open('$j') if '\"type\":\"step\"' in l][20:]; print(statistics.median(t))")
    if [ -z "${best[$z]:-}" ] || $PY -c "import sys; sys.exit(0 if $t < ${best[$z]} else 1)"; then best[$z]=$t; fi
  done
done
for z in 0 1 2 3; do
  printf "stage %d: %.5f s/step  %.3fx stage 0\n" $z "${best[$z]}" "$($PY -c "print(${best[$z]} / ${best[0]})")"
done
