#!/bin/sh
# What dtrain-train says when it resumes (issue 16, item 10): a "resumed from
# DIR: step N ..." line; an epoch with nothing left to train (resumed at its
# end) prints no "loss 0.0000, acc 0.00%" line; resuming a run that is already
# complete says so ("nothing to train") and exits 0.
# usage: resume_output.sh DTRAIN_TRAIN
set -u
BIN=$1
base=$(mktemp -d); trap 'rm -rf "$base"' EXIT
# 256 samples, batch 16: 16 steps per epoch
ARGS="--model mlp --hidden1 8 --hidden2 8 --train-limit 256 --batch-size 16 --eval 0"
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# 1. mid-epoch: the resumed-from line
"$BIN" $ARGS --epochs 1 --max-steps 4 --quiet --checkpoint-dir "$base/a" > "$base/out" 2>&1 || { cat "$base/out"; bad "setup a"; }
"$BIN" $ARGS --epochs 1 --resume "$base/a" > "$base/out" 2>&1; rc=$?
cat "$base/out"
[ $rc -eq 0 ] && ok || bad "resume a: exit $rc"
grep -q "resumed from $base/a: step 4, epoch 1, sample 64 of the epoch" "$base/out" && ok || bad "no 'resumed from ... step 4' line"
grep -q "^epoch 1/1 .*loss" "$base/out" && ok || bad "no epoch line for the resumed epoch"

# 2. stopped exactly at an epoch's end (--max-steps 16): the resumed run's first
#    epoch has nothing left; no line of zeros for it
"$BIN" $ARGS --epochs 2 --max-steps 16 --quiet --checkpoint-dir "$base/b" > "$base/out" 2>&1 || { cat "$base/out"; bad "setup b"; }
"$BIN" $ARGS --epochs 2 --resume "$base/b" > "$base/out" 2>&1; rc=$?
cat "$base/out"
[ $rc -eq 0 ] && ok || bad "resume b: exit $rc"
grep -q "loss 0.0000\|acc 0.00%" "$base/out" && bad "a line of zeros for an epoch with nothing trained" || ok
grep -q "^epoch 1/2" "$base/out" && bad "an epoch line for the finished epoch 1" || ok
grep -q "^epoch 2/2 .*loss" "$base/out" && ok || bad "no line for epoch 2"

# 3. a complete run resumed: nothing to train, said so, exit 0
"$BIN" $ARGS --epochs 1 --quiet --checkpoint-dir "$base/c" > "$base/out" 2>&1 || { cat "$base/out"; bad "setup c"; }
"$BIN" $ARGS --epochs 1 --resume "$base/c" > "$base/out" 2>&1; rc=$?
cat "$base/out"
[ $rc -eq 0 ] && ok || bad "resume c: exit $rc"
grep -q "nothing to train" "$base/out" && ok || bad "no 'nothing to train'"
grep -q "loss 0.0000\|acc 0.00%" "$base/out" && bad "zeros printed for a run with nothing trained" || ok
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
