#!/usr/bin/env bash
# The GPT benchmarks of issue 19, every ratio taken in ONE run (configurations
# interleaved round by round, the best of ROUNDS medians of each kept), one
# thread per rank (OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 exported before any
# PyTorch starts):
#   1. single process, gpt-demo (6 x 384, block 256), batch 8: dtrain's step
#      time against Debian's PyTorch 1.13 and PyTorch 2.x (PyPI; plain attention
#      and scaled_dot_product_attention); model FLOP/s (6P + 12*L*T*D per token)
#      as a fraction of the sgemm rate measured in the same run;
#   2. 2 ranks data parallel (batch 8 per rank) against PyTorch DDP (gloo, 1.13
#      and 2.x), and dtrain's weak scaling 1 -> 2 ranks;
#   3. ZeRO-3 at 2 ranks against FSDP2 (fully_shard, gloo, 2.x): step time and
#      every rank's peak RSS;
#   4. ZeRO-1/2/3 step time relative to stage 0 at 2 ranks;
#   5. per-rank memory at 1, 2, 4 ranks for stages 0-3: model state against
#      the formulas (16P, 8P + 8P/N, 4P + 12P/N, 16P/N), peak RSS of rank 0 and
#      the largest of any rank (batch 8 per rank at every N);
#   6. --recompute 1 against off: activation memory, step time, peak RSS;
#   7. a fixed-length training run, 4 layers x 256 wide (4 heads), block 256,
#      TRAIN_STEPS steps at 2 ranks x batch 8, AdamW lr 1e-3 -> 1e-4 (warm-up
#      100, cosine), weight decay 0.1 on the matrices, clipping 1.0: dtrain's
#      validation loss per byte against the PyTorch reference trained the same
#      way (same windows, same initial weights, same optimizer and schedule;
#      bench/torch_gpt_peer.py --mode train, Debian's 1.13), and dtrain's
#      sample text.
#   bench/gpt.sh                       (after `make build`)
# Env: BUILD (build), STEPS timed steps per measurement (10), WARM untimed
# steps (3), ROUNDS (2), TRAIN_STEPS (1000), EVAL_WINDOWS validation windows
# (256), PARTS (1 2 3 4 5 6 7), TORCH2 (1: install PyTorch 2.x from PyPI into
# $BUILD/torch2-venv when missing, ~3 GB with its CUDA libraries; 0: skip the
# 2.x columns), DATA (/usr/share/games/fortunes).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}; STEPS=${STEPS:-10}; WARM=${WARM:-3}; ROUNDS=${ROUNDS:-2}
TRAIN_STEPS=${TRAIN_STEPS:-1000}; EVAL_WINDOWS=${EVAL_WINDOWS:-256}; PARTS=${PARTS:-"1 2 3 4 5 6 7"}
TORCH2=${TORCH2:-1}; DATA=${DATA:-/usr/share/games/fortunes}
PY=/usr/bin/python3
VENV="$BUILD/torch2-venv"; PY2="$VENV/bin/python"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
MPIRUN="mpirun --oversubscribe --bind-to none"
TRAIN="$BUILD/bin/dtrain-train"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
DEMO=(--model gpt --preset gpt-demo --optimizer adamw --lr 1e-4 --eval 0 --quiet --sample-length 0 --data "$DATA")
has() { case " $PARTS " in *" $1 "*) return 0;; esac; return 1; }

if [ "$TORCH2" = 1 ] && [ ! -x "$PY2" ]; then
  echo "# installing PyTorch 2.x from PyPI into $VENV (once; the CPU wheel index is tried first)" >&2
  $PY -m venv "$VENV"
  "$PY2" -m pip install --quiet torch numpy --index-url https://download.pytorch.org/whl/cpu 2>/dev/null ||
    "$PY2" -m pip install --quiet torch numpy
fi
[ "$TORCH2" = 1 ] && T2V=$("$PY2" -c "import torch; print(torch.__version__)") || T2V=""
T1V=$($PY -c "import torch; print(torch.__version__)")

# ---- helpers ---------------------------------------------------------------------------
med_json() { # the median step time of a dtrain JSON lines file, skipping WARM steps
  $PY -c "import json,statistics; t=[json.loads(l)['time_s'] for l in open('$1') if '\"type\":\"step\"' in l][$WARM:]; print(statistics.median(t))"
}
dtrain_step() { # np extra...   -> median s/step
  local np=$1; shift
  $MPIRUN -np "$np" "$TRAIN" "${DEMO[@]}" --max-steps $((STEPS + WARM)) --json "$TMP/d.json" "$@" >/dev/null
  med_json "$TMP/d.json"
}
torch_step() { # python np extra... -> JSON line of torch_gpt_peer.py
  local py=$1 np=$2; shift 2
  $MPIRUN -np "$np" "$py" bench/torch_gpt_peer.py --mode step --preset gpt-demo --batch 8 --steps "$STEPS" \
      --warmup "$WARM" --port $((29500 + RANDOM % 400)) "$@"
}
jget() { $PY -c "import json,sys; print(json.loads(sys.stdin.readline())['$1'])"; }
best() { tr ' ' '\n' | grep . | sort -g | head -1; }
ratio() { $PY -c "print('%.3f' % ($1 / $2))"; }
rss_of() { # file of "peak_rss_kb R N" lines -> "rank0_MB max_MB"
  $PY -c "import sys; d={int(l.split()[1]): int(l.split()[2]) for l in open('$1') if l.startswith('peak_rss_kb')}; print('%.0f %.0f' % (d.get(0, 0) / 1024, max(d.values()) / 1024))"
}
declare -A B

# ---- 1. single process ------------------------------------------------------------------
if has 1 || has 2; then
  for r in $(seq "$ROUNDS"); do
    B[d1]="${B[d1]:-} $(dtrain_step 1 --batch-size 8)"
    has 1 && B[t1]="${B[t1]:-} $(torch_step $PY 1 | jget median_step_s)"
    if has 1 && [ -n "$T2V" ]; then
      B[t2]="${B[t2]:-} $(torch_step "$PY2" 1 | jget median_step_s)"
      B[t2s]="${B[t2s]:-} $(torch_step "$PY2" 1 --sdpa | jget median_step_s)"
    fi
  done
  d1=$(echo "${B[d1]}" | best)
fi
if has 1; then
  echo "# 1. single process, gpt-demo, batch 8 x 256 tokens, one thread (best of $ROUNDS medians of $STEPS steps)"
  sg=$("$BUILD/tests/gpt_step_bench" gpt-demo 8 1 | sed -n 's/.*sgemm one core: \([0-9.]*\) GFLOP.*/\1/p')
  P=$($PY -c "import json; print([json.loads(l) for l in open('$TMP/d.json') if '\"memory\"' in l][0]['num_params'])")
  flops=$($PY -c "print((6 * $P + 12 * 6 * 256 * 384) * 8 * 256)")
  printf "%-34s %10s %12s %10s %14s\n" peer "s/step" "dtrain/peer" "GFLOP/s" "x sgemm rate"
  row() { printf "%-34s %10.4f %12s %10.1f %14.3f\n" "$1" "$2" "$3" "$($PY -c "print($flops / $2 / 1e9)")" "$($PY -c "print($flops / $2 / 1e9 / $sg)")"; }
  row "dtrain" "$d1" "1.000"
  t1=$(echo "${B[t1]}" | best); row "PyTorch $T1V (Debian)" "$t1" "$(ratio "$d1" "$t1")"
  if [ -n "$T2V" ]; then
    t2=$(echo "${B[t2]}" | best); row "PyTorch $T2V" "$t2" "$(ratio "$d1" "$t2")"
    t2s=$(echo "${B[t2s]}" | best); row "PyTorch $T2V, sdpa attention" "$t2s" "$(ratio "$d1" "$t2s")"
  fi
  echo "sgemm rate of one core (OpenBLAS, this model's linear shapes, same run): $sg GFLOP/s; P = $P"
  echo
fi

# ---- 2. data parallel, 2 ranks ---------------------------------------------------------------
if has 2; then
  echo "# 2. data parallel, 2 ranks x batch 8 (best of $ROUNDS medians)"
  for r in $(seq "$ROUNDS"); do
    B[d2]="${B[d2]:-} $(dtrain_step 2 --batch-size 8)"
    B[t1ddp]="${B[t1ddp]:-} $(torch_step $PY 2 --ddp | jget median_step_s)"
    [ -n "$T2V" ] && B[t2ddp]="${B[t2ddp]:-} $(torch_step "$PY2" 2 --ddp | jget median_step_s)"
  done
  d2=$(echo "${B[d2]}" | best)
  printf "%-34s %10s %12s\n" peer "s/step" "dtrain/peer"
  printf "%-34s %10.4f %12s\n" "dtrain (ZeRO 0: DDP buckets)" "$d2" "1.000"
  t=$(echo "${B[t1ddp]}" | best); printf "%-34s %10.4f %12s\n" "PyTorch $T1V DDP (gloo)" "$t" "$(ratio "$d2" "$t")"
  if [ -n "$T2V" ]; then t=$(echo "${B[t2ddp]}" | best); printf "%-34s %10.4f %12s\n" "PyTorch $T2V DDP (gloo)" "$t" "$(ratio "$d2" "$t")"; fi
  echo "dtrain weak scaling 1 -> 2 ranks: $($PY -c "print('%.1f%%' % (100 * $d1 / $d2))") (step $d1 s -> $d2 s)"
  $MPIRUN -np 2 "$TRAIN" "${DEMO[@]}" --batch-size 8 --max-steps $((STEPS + WARM)) --json "$TMP/o.json" >/dev/null
  $PY -c "import json; s=[json.loads(l) for l in open('$TMP/o.json') if '\"summary\"' in l][0]; print('communication hidden behind backward: %.0f%%, behind backward or the per-bucket optimizer steps: %.0f%%' % (100 * s['comm_hidden'], 100 * s['comm_hidden_compute']))"
  echo
fi

# ---- 3. ZeRO-3 against FSDP2 ----------------------------------------------------------------------
if has 3; then
  echo "# 3. ZeRO-3 against FSDP2 (fully_shard, gloo), 2 ranks x batch 8 (best of $ROUNDS medians; peak RSS per rank)"
  for r in $(seq "$ROUNDS"); do
    : > "$TMP/rss3"
    $MPIRUN -np 2 $PY bench/peak_rss.py "$TRAIN" "${DEMO[@]}" --zero 3 --batch-size 8 --max-steps $((STEPS + WARM)) \
        --json "$TMP/z3.json" >/dev/null 2>"$TMP/rss3"
    B[z3]="${B[z3]:-} $(med_json "$TMP/z3.json")"
    B[z3rss]=$(rss_of "$TMP/rss3")
    if [ -n "$T2V" ]; then
      torch_step "$PY2" 2 --fsdp > "$TMP/fsdp.json"
      B[fsdp]="${B[fsdp]:-} $(jget median_step_s < "$TMP/fsdp.json")"
      B[fsdprss]=$($PY -c "import json; d=json.load(open('$TMP/fsdp.json')); r=d['peak_rss_kb']; print('%.0f %.0f %.0f' % (r[0] / 1024, max(r) / 1024, d['import_rss_kb'] / 1024))")
    fi
  done
  z3=$(echo "${B[z3]}" | best)
  read -r r0 rmax <<< "${B[z3rss]}"
  printf "%-34s %10s %12s %14s %14s\n" peer "s/step" "dtrain/peer" "rank 0 RSS MB" "max RSS MB"
  printf "%-34s %10.4f %12s %14s %14s\n" "dtrain ZeRO-3" "$z3" "1.000" "$r0" "$rmax"
  if [ -n "$T2V" ]; then
    f=$(echo "${B[fsdp]}" | best)
    read -r f0 fmax fimp <<< "${B[fsdprss]}"
    printf "%-34s %10.4f %12s %14s %14s\n" "PyTorch $T2V FSDP2" "$f" "$(ratio "$z3" "$f")" "$f0" "$fmax"
    echo "(PyTorch's RSS right after 'import torch', before any model: $fimp MB; its PyPI build maps CUDA libraries)"
  fi
  echo
fi

# ---- 4. ZeRO stages at 2 ranks -------------------------------------------------------------------
if has 4; then
  echo "# 4. step time at 2 ranks x batch 8 relative to stage 0 (best of $ROUNDS medians)"
  for r in $(seq "$ROUNDS"); do
    for z in 0 1 2 3; do B[s$z]="${B[s$z]:-} $(dtrain_step 2 --batch-size 8 --zero $z)"; done
  done
  s0=$(echo "${B[s0]}" | best)
  for z in 0 1 2 3; do
    s=$(echo "${B[s$z]}" | best)
    printf "stage %d: %.4f s/step  %sx stage 0\n" $z "$s" "$(ratio "$s" "$s0")"
  done
  echo
fi

# ---- 5. memory per rank ------------------------------------------------------------------------
if has 5; then
  echo "# 5. per-rank memory, gpt-demo, AdamW, batch 8 per rank: model state (rank 0's accounting) and peak RSS"
  printf "%5s %5s %14s %8s %8s %12s %12s %14s %12s\n" ranks stage "model state B" "x P" formula "comm pk B" "gather pk B" "rank 0 RSS MB" "max RSS MB"
  for np in 1 2 4; do
    for z in 0 1 2 3; do
      : > "$TMP/rss5"
      $MPIRUN -np $np $PY bench/peak_rss.py "$TRAIN" "${DEMO[@]}" --zero $z --batch-size 8 --max-steps 2 \
          --json "$TMP/m.json" >/dev/null 2>"$TMP/rss5"
      read -r r0 rmax <<< "$(rss_of "$TMP/rss5")"
      $PY - "$TMP/m.json" $np $z "$r0" "$rmax" <<'PY'
import json, sys
path, n, z, r0, rmax = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
m = [json.loads(l) for l in open(path) if '"memory"' in l][-1]
P = m["num_params"]
state = m["params"] + m["grads"] + m["optimizer"]
formula = [16, 8 + 8 / n, 4 + 12 / n, 16 / n][z]
print("%5d %5d %14d %8.3f %8.3f %12d %12d %14s %12s" % (n, z, state, state / P, formula, m["comm_peak"],
                                                        m["gathered_peak"], r0, rmax))
PY
    done
  done
  echo
fi

# ---- 6. recomputation --------------------------------------------------------------------------
if has 6; then
  echo "# 6. --recompute 1 against 0, 1 rank, gpt-demo, batch 8 (best of $ROUNDS medians)"
  for r in $(seq "$ROUNDS"); do
    for rc in 0 1; do
      : > "$TMP/rss6"
      $MPIRUN -np 1 $PY bench/peak_rss.py "$TRAIN" "${DEMO[@]}" --batch-size 8 --recompute $rc \
          --max-steps $((STEPS + WARM)) --json "$TMP/r$rc.json" >/dev/null 2>"$TMP/rss6"
      B[rc$rc]="${B[rc$rc]:-} $(med_json "$TMP/r$rc.json")"
      B[rss$rc]=$(rss_of "$TMP/rss6" | cut -d' ' -f1)
    done
  done
  r0=$(echo "${B[rc0]}" | best); r1=$(echo "${B[rc1]}" | best)
  $PY -c "import json; m=[json.loads(l) for l in open('$TMP/r0.json') if '\"memory\"' in l][0]; a, b = m['activations_recompute_off'], m['activations_recompute_on']; print('activations of a batch of 8 x 256: %.1f MB off, %.1f MB on (%.1f%% less)' % (a / 1e6, b / 1e6, 100 * (1 - b / a)))"
  echo "step time: $r0 s off, $r1 s on ($(ratio "$r1" "$r0")x); peak RSS ${B[rss0]} MB off, ${B[rss1]} MB on"
  echo
fi

# ---- 7. a fixed-length training run --------------------------------------------------------------
if has 7; then
  echo "# 7. training run: 4 x 256 (4 heads), block 256, $TRAIN_STEPS steps, 2 ranks x batch 8, $EVAL_WINDOWS validation windows"
  TR=(--lr 1e-3 --min-lr 1e-4 --warmup-steps 100 --weight-decay 0.1 --clip-grad-norm 1 --seed 1)
  [ "$TRAIN_STEPS" -le 100 ] && TR=(--lr 1e-3 --min-lr 1e-4 --warmup-steps $((TRAIN_STEPS / 4 + 1)) --weight-decay 0.1 --clip-grad-norm 1 --seed 1)
  every=$(( TRAIN_STEPS / 5 > 0 ? TRAIN_STEPS / 5 : 1 ))
  $MPIRUN -np 2 "$TRAIN" --model gpt --preset gpt-test --n-layer 4 --n-head 4 --n-embd 256 --block-size 256 \
      --batch-size 8 --optimizer adamw --schedule cosine "${TR[@]}" --max-steps "$TRAIN_STEPS" --data "$DATA" \
      --test-limit "$EVAL_WINDOWS" --eval-every "$every" --sample-length 300 --json "$TMP/t.json" \
      | grep -a -v -e "^memory\|^  \|^dist config"
  warm=$(printf '%s\n' "${TR[@]}" | sed -n '/--warmup-steps/{n;p}')
  $PY bench/torch_gpt_peer.py --mode train --preset gpt-test --n-layer 4 --n-head 4 --n-embd 256 --block-size 256 \
      --batch 16 --steps "$TRAIN_STEPS" --warmup "$warm" --lr 1e-3 --min-lr 1e-4 --weight-decay 0.1 --clip 1 \
      --seed 1 --eval-windows "$EVAL_WINDOWS" --eval-every "$every" --lib "$BUILD/lib/libdtrain.so" --data "$DATA" \
      | tee "$TMP/torch_train.txt"
  $PY - "$TMP/t.json" "$TMP/torch_train.txt" <<'PY'
import json, math, sys
d = [json.loads(l) for l in open(sys.argv[1]) if '"summary"' in l][0]["test_loss"]
t = json.loads([l for l in open(sys.argv[2]) if l.startswith("{")][-1])["val_loss"]
print("validation loss per byte: dtrain %.4f nats (%.3f bits), PyTorch %.4f nats (%.3f bits): dtrain / PyTorch = %.4f"
      % (d, d / math.log(2), t, t / math.log(2), d / t))
PY
fi
