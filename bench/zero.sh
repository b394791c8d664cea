#!/usr/bin/env bash
# ZeRO: per-rank memory by stage (mlp, fp32 Adam) at 1, 2 and 4 ranks, and step
# time of stages 1-3 relative to stage 0 at 2 ranks, measured in ONE run
# (stages alternated, best of ROUNDS medians each).
#   bench/zero.sh            (after `make build`)
# Env: BUILD (default build), STEPS (default 200), ROUNDS (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}; STEPS=${STEPS:-200}; ROUNDS=${ROUNDS:-3}
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
MPIRUN="mpirun --oversubscribe --bind-to none"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT

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
