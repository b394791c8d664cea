#!/bin/sh
# expect_ok.sh [-e REGEX]... [-m REGEX]... [-n REGEX]... -- COMMAND...
# Runs COMMAND and passes only if it exits 0 (under mpiexec: every rank
# exited 0) and its output (stdout + stderr) matches every -e extended regex
# and none of the -n ones (each against single lines), and every -m one
# against the whole output at once (there . matches newlines too: "a.*b" is
# an a, later a b). A command that exits
# 77 after printing a line that starts with "SKIPPED: " is skipped (exit 77,
# the suite's skip code). For tests whose output must say something AND whose
# status counts: ctest's PASS_REGULAR_EXPRESSION alone ignores the status.
# Prints the output, then each failed requirement.
pats_file=$(mktemp) || exit 1
neg_file=$(mktemp) || exit 1
multi_file=$(mktemp) || exit 1
out_file=$(mktemp) || exit 1
trap 'rm -f "$pats_file" "$neg_file" "$multi_file" "$out_file"' EXIT
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case "$1" in
    -e) printf '%s\n' "$2" >> "$pats_file"; shift 2 ;;
    -n) printf '%s\n' "$2" >> "$neg_file"; shift 2 ;;
    -m) printf '%s\n' "$2" >> "$multi_file"; shift 2 ;;
    *) echo "expect_ok.sh: bad argument '$1'"; exit 2 ;;
    esac
done
[ "$1" = "--" ] && shift
[ $# -gt 0 ] || { echo "expect_ok.sh: no command"; exit 2; }
"$@" > "$out_file" 2>&1
rc=$?
cat "$out_file"
if [ "$rc" -eq 77 ] && grep -q '^SKIPPED: ' "$out_file"; then exit 77; fi
fail=0
if [ "$rc" -ne 0 ]; then echo "expect_ok: FAIL: exit status $rc (want 0)"; fail=1; fi
while IFS= read -r p; do
    if ! grep -Eq -- "$p" "$out_file"; then echo "expect_ok: FAIL: no line matches '$p'"; fail=1; fi
done < "$pats_file"
while IFS= read -r p; do
    if ! grep -Ezq -- "$p" "$out_file"; then echo "expect_ok: FAIL: the output does not match '$p'"; fail=1; fi
done < "$multi_file"
while IFS= read -r p; do
    if grep -Eq -- "$p" "$out_file"; then echo "expect_ok: FAIL: a line matches '$p'"; fail=1; fi
done < "$neg_file"
[ $fail -eq 0 ] && echo "expect_ok: OK"
exit $fail
