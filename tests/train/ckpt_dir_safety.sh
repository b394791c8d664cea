#!/bin/sh
# --checkpoint-dir never deletes or moves anything dtrain did not write (issue 16, item 1):
#  1. a non-empty directory that holds no dtrain checkpoint is refused before training,
#     its files untouched, nothing renamed, no DIR.old / DIR.tmp;
#  2. a regular file given as the directory is refused and left where it was;
#  3. `--checkpoint-dir .` works in an empty directory (and leaves nothing beside it);
#     `--resume .` continues from it;
#  4. a checkpoint directory that also holds a user's file: saves keep the file, the
#     directory itself is never renamed (same inode), and only the current
#     generation's rank files remain after each save.
# usage: ckpt_dir_safety.sh MPIEXEC DTRAIN_TRAIN
set -u
MPIEXEC=$1; BIN=$2
case $BIN in /*) ;; *) BIN=$(pwd)/$BIN ;; esac
base=$(mktemp -d); trap 'rm -rf "$base"' EXIT
ARGS="--model mlp --hidden1 8 --hidden2 8 --train-limit 256 --epochs 1 --batch-size 16 --eval 0 --quiet"
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# 1. a user's directory
mkdir "$base/u"; echo "my thesis" > "$base/u/thesis.txt"
ino=$(stat -c %i "$base/u")
"$BIN" $ARGS --max-steps 3 --checkpoint-dir "$base/u" --checkpoint-every 1 > "$base/out1" 2>&1; rc=$?
cat "$base/out1"
[ $rc -ne 0 ] && ok || bad "a directory holding a user's file was accepted as --checkpoint-dir"
grep -q "not empty and holds no dtrain checkpoint" "$base/out1" && ok || bad "no clear message for a foreign directory"
[ "$(cat "$base/u/thesis.txt" 2>/dev/null)" = "my thesis" ] && ok || bad "u/thesis.txt was changed or deleted"
[ "$(ls -A "$base/u")" = "thesis.txt" ] && ok || bad "files were added to u: $(ls -A "$base/u")"
[ "$(stat -c %i "$base/u" 2>/dev/null)" = "$ino" ] && ok || bad "u was moved or replaced"
[ ! -e "$base/u.old" ] && [ ! -e "$base/u.tmp" ] && ok || bad "u.old or u.tmp left behind"

# 2. a regular file
echo "not a directory" > "$base/f"
"$BIN" $ARGS --max-steps 2 --checkpoint-dir "$base/f" > "$base/out2" 2>&1; rc=$?
cat "$base/out2"
[ $rc -ne 0 ] && ok || bad "a regular file was accepted as --checkpoint-dir"
grep -q "is not a directory" "$base/out2" && ok || bad "no clear message for a regular file"
[ "$(cat "$base/f" 2>/dev/null)" = "not a directory" ] && ok || bad "the file f was moved or changed"
[ ! -e "$base/f.old" ] && [ ! -e "$base/f.tmp" ] && ok || bad "f.old or f.tmp left behind"

# 3. "." in an empty directory, then --resume .
mkdir "$base/e"
(cd "$base/e" && "$BIN" $ARGS --max-steps 3 --checkpoint-dir . --checkpoint-every 2) > "$base/out3" 2>&1; rc=$?
cat "$base/out3"
[ $rc -eq 0 ] && ok || bad "--checkpoint-dir . failed (exit $rc)"
[ -f "$base/e/manifest.json" ] && ok || bad "no manifest.json in ."
[ "$(ls -A "$base" "$base/e" | grep -c '\.tmp$\|\.old$')" -eq 0 ] && ok || bad "leftovers: $(ls -A "$base" "$base/e")"
(cd "$base/e" && "$BIN" $ARGS --max-steps 5 --resume . --checkpoint-dir .) > "$base/out3b" 2>&1; rc=$?
cat "$base/out3b"
[ $rc -eq 0 ] && ok || bad "--resume . failed (exit $rc)"
grep -q '"step": 5,' "$base/e/manifest.json" && ok || bad "the resumed run did not save step 5 into ."

# 4. a checkpoint directory with a user's file in it
echo "keep me" > "$base/e/notes.txt"
ino=$(stat -c %i "$base/e")
for np in 2 1; do
    (cd "$base/e" && $MPIEXEC --oversubscribe -np $np "$BIN" $ARGS --batch-size $((32 / np)) --max-steps 4 \
        --checkpoint-dir "$base/e" --checkpoint-every 1) > "$base/out4" 2>&1; rc=$?
    [ $rc -eq 0 ] && ok || { cat "$base/out4"; bad "$np ranks: saving into a checkpoint directory with a user's file failed"; }
    [ "$(cat "$base/e/notes.txt" 2>/dev/null)" = "keep me" ] && ok || bad "$np ranks: notes.txt was changed or deleted"
    [ "$(stat -c %i "$base/e")" = "$ino" ] && ok || bad "$np ranks: the checkpoint directory was renamed or replaced"
    n=$(ls "$base/e" | grep -c '^rank-')
    [ "$n" -eq $np ] && ok || bad "$np ranks: $n rank files left (older generations not removed?): $(ls "$base/e")"
    others=$(ls -A "$base/e" | grep -v '^rank-' | grep -v '^manifest.json$' | grep -v '^notes.txt$')
    [ -z "$others" ] && ok || bad "$np ranks: unexpected files: $others"
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
