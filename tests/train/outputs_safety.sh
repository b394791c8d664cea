#!/bin/sh
# Output paths of dtrain-train (issue 16, items 2 and 3):
#  --save-model never renames over a special file (FIFO, character device,
#  directory): refused, the special file left as it was; a symbolic link to a
#  regular file keeps the link and replaces the file it points to; every output
#  path (--save-model, --json, --timeline, --checkpoint-dir) is checked BEFORE
#  training: a bad one fails the run with no step trained;
#  --json / --timeline on a full disk (/dev/full): the failure is reported with
#  the file and errno, the exit code is non-zero, and the model is still saved.
# usage: outputs_safety.sh MPIEXEC DTRAIN_TRAIN
set -u
MPIEXEC=$1; BIN=$2
base=$(mktemp -d); trap 'rm -rf "$base"' EXIT
ARGS="--model mlp --hidden1 8 --hidden2 8 --train-limit 256 --epochs 1 --batch-size 16 --eval 0 --quiet"
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
steps() { if [ -f "$1" ]; then grep -c '"type":"step"' "$1"; else echo 0; fi; }

# refused before training: exit != 0, the message, no step in --json
refused() { # name expected-message args...
    name=$1; msg=$2; shift 2
    rm -f "$base/steps.json"
    "$BIN" $ARGS --max-steps 4 --json "$base/steps.json" "$@" > "$base/out" 2>&1; rc=$?
    [ $rc -ne 0 ] && ok || bad "$name: accepted (exit 0)"
    grep -q -- "$msg" "$base/out" && ok || { cat "$base/out"; bad "$name: no message '$msg'"; }
    [ "$(steps "$base/steps.json")" = 0 ] && ok || bad "$name: $(steps "$base/steps.json") steps trained before the failure"
}

# --save-model onto a FIFO: refused, the FIFO stays a FIFO
mkfifo "$base/fifo"
refused "save-model FIFO" "is a FIFO" --save-model "$base/fifo"
[ -p "$base/fifo" ] && ok || bad "the FIFO was replaced"
# ... a character device (root only: mknod), the same numbers as /dev/null
if mknod "$base/null" c 1 3 2>/dev/null; then
    refused "save-model device" "is a character device" --save-model "$base/null"
    [ -c "$base/null" ] && ok || bad "the device node was replaced"
else
    echo "(not root: the character-device case is skipped)"
fi
# ... a directory
mkdir "$base/adir"
refused "save-model directory" "is a directory" --save-model "$base/adir"
[ -d "$base/adir" ] && ok || bad "the directory was replaced"
# ... a symbolic link to a FIFO
ln -s "$base/fifo" "$base/link_to_fifo"
refused "save-model link to FIFO" "points to a FIFO" --save-model "$base/link_to_fifo"
# ... a directory that does not exist: before training, not after
refused "save-model missing directory" "cannot create a file beside it" --save-model "$base/nodir/m.safetensors"
# the other outputs, checked before training too
refused "json missing directory" "nodir/steps.json" --json "$base/nodir/steps.json"
refused "timeline missing directory" "nodir/trace.json" --timeline "$base/nodir/trace.json"
refused "checkpoint-dir missing parent" "cannot create the checkpoint directory" --checkpoint-dir "$base/nodir/ck"

# a symbolic link to a regular file: the link stays, its target gets the model
echo "old" > "$base/target.safetensors"
ln -s "$base/target.safetensors" "$base/link.safetensors"
"$BIN" $ARGS --max-steps 2 --save-model "$base/link.safetensors" > "$base/out" 2>&1; rc=$?
[ $rc -eq 0 ] && ok || { cat "$base/out"; bad "save-model through a symbolic link failed"; }
[ -L "$base/link.safetensors" ] && ok || bad "the symbolic link was replaced by a file"
[ "$(stat -c %s "$base/target.safetensors")" -gt 1000 ] && ok || bad "the link's target does not hold the model"

# --timeline with other % directives: taken literally (it was a printf format once)
"$BIN" $ARGS --max-steps 1 --timeline "$base/t%s%n%d.json" > "$base/out" 2>&1; rc=$?
[ $rc -eq 0 ] && [ -s "$base/t%s%n0.json" ] && ok || { cat "$base/out"; bad "--timeline with %s%n: exit $rc"; }

# --json on a full disk (/dev/full): reported with the file and errno, exit != 0,
# and the training still completes (the model is saved)
"$BIN" $ARGS --max-steps 3 --json /dev/full --save-model "$base/m1.safetensors" > "$base/out" 2>&1; rc=$?
cat "$base/out"
[ $rc -ne 0 ] && ok || bad "--json /dev/full: exit 0"
grep -q "/dev/full.*No space left on device" "$base/out" && ok || bad "--json /dev/full: no message naming the file and errno"
[ -s "$base/m1.safetensors" ] && ok || bad "--json /dev/full: the model was not saved"
# --timeline on a full disk
"$BIN" $ARGS --max-steps 3 --timeline /dev/full > "$base/out" 2>&1; rc=$?
cat "$base/out"
[ $rc -ne 0 ] && ok || bad "--timeline /dev/full: exit 0"
grep -q "/dev/full.*No space left on device" "$base/out" && ok || bad "--timeline /dev/full: no message naming the file and errno"
# ... on rank 1 only (its file FILE.1 is a link to /dev/full)
ln -s /dev/full "$base/tl.json.1"
$MPIEXEC --oversubscribe -np 2 "$BIN" $ARGS --max-steps 3 --timeline "$base/tl.json" > "$base/out" 2>&1; rc=$?
cat "$base/out"
[ $rc -ne 0 ] && ok || bad "rank 1's --timeline on a full disk: exit 0"
grep -q "rank 1\].*tl.json.1.*No space left on device" "$base/out" && ok || bad "rank 1 did not report its timeline failure"
grep -q '"traceEvents"' "$base/tl.json" && ok || bad "rank 0's timeline is missing"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
