#!/bin/sh
# dtrain-train --tensorboard DIR (issue 27): a short GPT run on 2 ranks (or 1
# where there is no MPI) writes one event file, rank 0's, whose every record's
# CRCs, first record (file_version) and scalars (tags, steps, values) equal the
# same run's --json records, read back by tests/train/tfevents_reader.py (an
# independent reader, standard library only); a path that cannot be a
# directory is refused before training (exit 1, naming it).
# usage: tensorboard.sh MPIEXEC|"" DTRAIN_TRAIN PYTHON3
set -u
MPI=$1 BIN=$2 PY=$3
HERE=$(dirname "$0")
base=$(mktemp -d); trap 'rm -rf "$base"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
ARGS="--model gpt --preset gpt-test --batch-size 4 --max-steps 4 --eval-every 2 --test-limit 16
      --optimizer adamw --lr 1e-3 --clip-grad-norm 1 --sample-length 0 --quiet"
if [ -n "$MPI" ] && [ -x "$MPI" ]; then LAUNCH="$MPI -np 2"; else LAUNCH=""; fi

# 1. a run: the event file against the JSON records
$LAUNCH "$BIN" $ARGS --json "$base/m.json" --tensorboard "$base/tb/run1" > "$base/out" 2>&1; rc=$?
[ $rc -eq 0 ] && ok || { cat "$base/out"; bad "training run: exit $rc"; }
"$PY" "$HERE/tfevents_reader.py" check "$base/tb/run1" "$base/m.json" && ok || bad "the event file (above)"

# 2. --tensorboard alone (no --json) writes it too
"$BIN" $ARGS --max-steps 2 --tensorboard "$base/tb2" > "$base/out" 2>&1; rc=$?
[ $rc -eq 0 ] && ok || { cat "$base/out"; bad "run without --json: exit $rc"; }
n=$(ls "$base/tb2" | grep -c '^events\.out\.tfevents\.')
[ "$n" = 1 ] && ok || bad "run without --json: $n event files"

# 3. a regular file where the directory should be: refused before training
: > "$base/afile"
"$BIN" $ARGS --tensorboard "$base/afile/x" > "$base/out" 2>&1; rc=$?
[ $rc -eq 1 ] && ok || bad "--tensorboard under a file: exit $rc (want 1)"
grep -q "TensorBoard directory '$base/afile/x'" "$base/out" && ok || { cat "$base/out"; bad "no message naming the path"; }
grep -q '^step ' "$base/out" && bad "trained although the output was refused" || ok

echo "tensorboard: $pass passed, $fail failed"
[ $fail -eq 0 ]
