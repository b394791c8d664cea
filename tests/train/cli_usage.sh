#!/bin/sh
# tests/train/cli_usage.sh EXE PATTERN ARG...: dtrain-train ARG... is a usage
# error: exit status 2, nothing on stdout, and stderr names what was wrong
# (PATTERN, a fixed string) followed by the usage text.
exe=$1 pattern=$2
shift 2
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$exe" "$@" > "$out" 2> "$err"
rc=$?
fail=0
[ "$rc" -eq 2 ] || { echo "FAIL: exit status $rc, want 2"; fail=1; }
[ ! -s "$out" ] || { echo "FAIL: stdout is not empty:"; cat "$out"; fail=1; }
grep -qF -- "$pattern" "$err" || { echo "FAIL: stderr does not say '$pattern'"; fail=1; }
grep -q '^usage: dtrain-train' "$err" || { echo "FAIL: no usage text on stderr"; fail=1; }
[ $fail -eq 0 ] || { echo "stderr was:"; cat "$err"; exit 1; }
echo "ok: dtrain-train $*: exit 2, '$pattern'"
