#!/usr/bin/env bash
# Training step time of dtrain vs PyTorch 1.13 CPU, same models, batch 64 per
# rank, one thread per rank, measured in ONE run (the four configurations of a
# model interleaved in every round, best of ROUNDS medians each), and dtrain's
# weak scaling 1 -> 2 ranks.
#   bench/train_vs_torch.sh            (after `make build`; needs python3-torch)
# Env: BUILD (default build), STEPS (default 300), ROUNDS (default 3), MODELS.
# Each round also prints the cache-line round trip between two CPUs
# (dtrain-core-probe) before it: the state a shared VM's host had them in.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}; STEPS=${STEPS:-300}; ROUNDS=${ROUNDS:-3}; MODELS=${MODELS:-"mlp lenet"}
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
MPIRUN="mpirun --oversubscribe --bind-to none"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT

# median step time (s) of a dtrain run from its JSON lines, skipping 20 warm-up steps
dtrain_step() { # np model
  local np=$1 model=$2 j="$TMP/d.json"
  $MPIRUN -np "$np" "$BUILD/bin/dtrain-train" --model "$model" --batch-size 64 --epochs 1 \
      --max-steps $((STEPS + 20)) --eval 0 --quiet --json "$j" >/dev/null
  $PY -c "import json,statistics,sys; t=[json.loads(l)['time_s'] for l in open('$j') if '\"step\"' in l][20:]; print(statistics.median(t))"
}
torch_step() { # np model
  local np=$1 model=$2 ddp=""
  [ "$np" -gt 1 ] && ddp="--ddp"
  $MPIRUN -np "$np" $PY bench/torch_peer.py --model "$model" --steps "$STEPS" $ddp --port $((29500 + RANDOM % 400)) \
      | $PY -c "import json,sys; print(json.loads(sys.stdin.readline())['median_step_s'])"
}
best() { sort -g | head -1; }
probe() { # the core-to-core round trip, one line on stderr (stdout is the table)
  if [ -x "$BUILD/bin/dtrain-core-probe" ]; then echo "# $1: $("$BUILD/bin/dtrain-core-probe")" >&2; fi
}

# Every round runs the four configurations of a model back to back (dtrain and
# PyTorch at 1 and 2 ranks), so that a change in the machine's load between
# rounds moves all four alike; the best round of each is kept.
printf "%-6s %5s %14s %14s %8s\n" model ranks "dtrain s/step" "torch s/step" ratio
for m in $MODELS; do
  for np in 1 2; do eval "DL_${m}_${np}=''; TL_${m}_${np}=''"; done
  for r in $(seq "$ROUNDS"); do
    probe "$m round $r"
    for np in 1 2; do
      eval "DL_${m}_${np}=\"\$DL_${m}_${np} $(dtrain_step "$np" "$m")\""
      eval "TL_${m}_${np}=\"\$TL_${m}_${np} $(torch_step "$np" "$m")\""
    done
  done
  for np in 1 2; do
    db=$(eval echo "\$DL_${m}_${np}" | tr ' ' '\n' | grep . | best)
    tb=$(eval echo "\$TL_${m}_${np}" | tr ' ' '\n' | grep . | best)
    printf "%-6s %5d %14.5f %14.5f %8.3f\n" "$m" "$np" "$db" "$tb" "$($PY -c "print($db / $tb)")"
    eval "D_${m}_${np}=$db"
  done
  d1=$(eval echo "\$D_${m}_1"); d2=$(eval echo "\$D_${m}_2")
  printf "%-6s weak-scaling efficiency 1->2 ranks (dtrain): %.1f%%\n" "$m" "$($PY -c "print(100 * $d1 / $d2)")"
done

# Fraction of bucket communication time that overlapped backward (dtrain's own
# measurement: each bucket's execution interval on the communication thread
# against the backward interval, summed over steps), 2 ranks.
for m in $MODELS; do
  j="$TMP/o.json"
  $MPIRUN -np 2 "$BUILD/bin/dtrain-train" --model "$m" --batch-size 64 --epochs 1 --max-steps $((STEPS + 20)) \
      --eval 0 --quiet --json "$j" >/dev/null
  $PY -c "import json; s=[json.loads(l) for l in open('$j') if '\"summary\"' in l][0]; print('%-6s communication hidden behind backward (2 ranks): %.0f%%, behind backward or optimizer: %.0f%%' % ('$m', 100 * s['comm_hidden'], 100 * s['comm_hidden_compute']))"
done
