#!/bin/sh
# expect_fail.sh BOUND_S [-z] [-e REGEX]... [-n REGEX]... -- COMMAND...
# Runs COMMAND (with a hard limit of BOUND_S + 30 s) and passes only if it
# exits non-zero within BOUND_S seconds, its output (stdout + stderr) matches
# every -e extended regex and none of the -n ones. -z: any exit status (for
# mpirun --mca orte_enable_recovery 1, which reports 0 even after MPI_Abort).
# Prints the output, the exit status and the time taken.
bound=$1
shift
any_status=0
pats_file=$(mktemp) || exit 1
neg_file=$(mktemp) || exit 1
out_file=$(mktemp) || exit 1
trap 'rm -f "$pats_file" "$neg_file" "$out_file"' EXIT
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case "$1" in
    -e) printf '%s\n' "$2" >> "$pats_file"; shift 2 ;;
    -n) printf '%s\n' "$2" >> "$neg_file"; shift 2 ;;
    -z) any_status=1; shift ;;
    *) echo "expect_fail.sh: bad argument '$1'"; exit 2 ;;
    esac
done
[ "$1" = "--" ] && shift
start=$(date +%s)
timeout -k 5 $((bound + 30)) "$@" > "$out_file" 2>&1
rc=$?
end=$(date +%s)
elapsed=$((end - start))
cat "$out_file"
# a job that could not run here (tests/tools/no_mpiexec.sh): skipped
if [ "$rc" -eq 77 ] && grep -q '^SKIPPED: ' "$out_file"; then exit 77; fi
echo "expect_fail: exit status $rc after ${elapsed} s (bound ${bound} s)"
fail=0
if [ "$rc" -eq 0 ] && [ "$any_status" -eq 0 ]; then echo "expect_fail: FAIL: the job exited 0"; fail=1; fi
if [ "$elapsed" -gt "$bound" ]; then echo "expect_fail: FAIL: took ${elapsed} s, more than ${bound} s"; fail=1; fi
while IFS= read -r p; do
    if ! grep -Eq -- "$p" "$out_file"; then echo "expect_fail: FAIL: no line matches '$p'"; fail=1; fi
done < "$pats_file"
while IFS= read -r p; do
    if grep -Eq -- "$p" "$out_file"; then echo "expect_fail: FAIL: a line matches '$p'"; fail=1; fi
done < "$neg_file"
[ $fail -eq 0 ] && echo "expect_fail: OK"
exit $fail
