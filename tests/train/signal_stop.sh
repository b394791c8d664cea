#!/bin/sh
# SIGINT to mpirun mid-training: every rank stops at the same step boundary with
# a clear message and a non-zero exit, well before the run would have ended.
# usage: signal_stop.sh MPIEXEC NP DTRAIN_TRAIN
set -u
MPIEXEC=$1; NP=$2; BIN=$3
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
$MPIEXEC --oversubscribe -np "$NP" "$BIN" --model mlp --hidden1 64 --hidden2 32 --epochs 50 \
    --quiet --json "$dir/steps.json" > "$dir/out.log" 2>&1 &
pid=$!
i=0
while [ $i -lt 600 ] && ! grep -q '"type":"step"' "$dir/steps.json" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
kill -INT $pid
wait $pid; rc=$?
cat "$dir/out.log"
[ $rc -ne 0 ] || { echo "FAIL: exit code 0 after SIGINT"; exit 1; }
n=$(grep -c "stopped by request (signal) after step" "$dir/out.log")
[ "$n" -eq "$NP" ] || { echo "FAIL: $n of $NP ranks reported a clean stop"; exit 1; }
steps=$(grep -o "after step [0-9]*" "$dir/out.log" | sort -u | wc -l)
[ "$steps" -eq 1 ] || { echo "FAIL: ranks stopped at different steps"; exit 1; }
echo "1 passed, 0 failed"
