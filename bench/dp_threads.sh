#!/usr/bin/env bash
# Data-parallel threads (dtrain-train --dp-threads 2, issue 17) against the
# other ways of putting 2 cores on one training run, same global batch, in ONE
# run (the four configurations of a model interleaved in every round, best of
# ROUNDS medians each):
#   threads   1 process, --dp-threads 2 (BLAS single-threaded in each thread)
#   ddp       2 MPI ranks of DDP, half the batch each
#   blas      1 process, --threads 2 (OpenBLAS with 2 threads)
#   torch     PyTorch 1.13 (Debian), 1 process, 2 intra-op threads
# for mlp and lenet (batch 64, SGD-momentum) and the gpt (GPT_PRESET, default
# gpt-test; batch 8, AdamW). Prints the median step times and each one's ratio
# to the threads' (> 1: dp-threads is faster).
#   bench/dp_threads.sh                 (after `make build`; needs python3-torch)
#   STEPS=5 ROUNDS=1 bench/dp_threads.sh   (a smoke run)
# Env: BUILD (default build), STEPS (default 200), ROUNDS (default 3),
# MODELS (default "mlp lenet gpt"), GPT_PRESET (gpt-test | gpt-demo).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}; STEPS=${STEPS:-200}; ROUNDS=${ROUNDS:-3}; MODELS=${MODELS:-"mlp lenet gpt"}
GPT_PRESET=${GPT_PRESET:-gpt-test}
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
MPIRUN="mpirun --oversubscribe --bind-to none"
WARM=$(( STEPS < 20 ? 1 : 20 ))
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT

batch_of() { [ "$1" = gpt ] && echo 8 || echo 64; }
model_flags() { # model
  case $1 in
    gpt) echo "--model gpt --preset $GPT_PRESET --optimizer adamw --sample-length 0" ;;
    *) echo "--model $1" ;;
  esac
}
# median step time (s) of a dtrain run from its JSON lines, skipping the warm-up steps
dtrain_step() { # np model batch-per-rank extra-flags...
  local np=$1 model=$2 b=$3 j="$TMP/d.json"; shift 3
  rm -f "$j"
  # shellcheck disable=SC2046
  $MPIRUN -np "$np" "$BUILD/bin/dtrain-train" $(model_flags "$model") --batch-size "$b" --epochs 1 \
      --max-steps $((STEPS + WARM)) --eval 0 --quiet --json "$j" "$@" >/dev/null
  $PY -c "import json,statistics; t=[json.loads(l)['time_s'] for l in open('$j') if '\"step\"' in l][$WARM:]; print(statistics.median(t))"
}
torch_step() { # model batch
  local m=$1
  [ "$m" = gpt ] && m="gpt --preset $GPT_PRESET"
  # shellcheck disable=SC2086
  $PY bench/torch_peer.py --model $m --batch-size "$2" --steps "$STEPS" --warmup "$WARM" --threads 2 \
      | $PY -c "import json,sys; print(json.loads(sys.stdin.readline())['median_step_s'])"
}
best() { tr ' ' '\n' | grep . | sort -g | head -1; }

printf "%-6s %-8s %12s %14s\n" model config "s/step" "ratio to threads"
for m in $MODELS; do
  b=$(batch_of "$m")
  th=""; dd=""; bl=""; to=""
  for r in $(seq "$ROUNDS"); do
    th="$th $(dtrain_step 1 "$m" "$b" --dp-threads 2)"
    dd="$dd $(dtrain_step 2 "$m" $((b / 2)))"
    bl="$bl $(dtrain_step 1 "$m" "$b" --threads 2)"
    to="$to $(torch_step "$m" "$b")"
  done
  t0=$(echo "$th" | best)
  for c in threads ddp blas torch; do
    case $c in threads) v=$t0 ;; ddp) v=$(echo "$dd" | best) ;; blas) v=$(echo "$bl" | best) ;; torch) v=$(echo "$to" | best) ;; esac
    printf "%-6s %-8s %12.5f %14.3f\n" "$m" "$c" "$v" "$($PY -c "print($v / $t0)")"
  done
done
