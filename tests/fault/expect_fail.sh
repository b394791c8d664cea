#!/bin/sh
# expect_fail.sh BOUND_S [-z | -s STATUS] [-e REGEX]... [-n REGEX]... -- COMMAND...
# Runs COMMAND (with a hard limit of BOUND_S + 30 s) and passes only if it
# exits non-zero within BOUND_S seconds, its output (stdout + stderr) matches
# every -e extended regex and none of the -n ones. -z: any exit status (for
# mpirun --mca orte_enable_recovery 1, which may report 0 after a rank's
# failure); -s STATUS: exactly that exit status. -p NAME: the job also counts
# as ended once every process named NAME that COMMAND started (its
# descendants) has ended; COMMAND is then stopped (SIGTERM) and its status is
# not checked: for launchers that outlive their job's processes (mpirun --mca
# orte_enable_recovery 1 across hosts waits on after every rank has exited).
# Prints the output, the exit status and the time taken.
bound=$1
shift
any_status=0
want_status=
proc_name=
pats_file=$(mktemp) || exit 1
neg_file=$(mktemp) || exit 1
out_file=$(mktemp) || exit 1
trap 'rm -f "$pats_file" "$neg_file" "$out_file"' EXIT
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case "$1" in
    -e) printf '%s\n' "$2" >> "$pats_file"; shift 2 ;;
    -n) printf '%s\n' "$2" >> "$neg_file"; shift 2 ;;
    -z) any_status=1; shift ;;
    -s) want_status=$2; shift 2 ;;
    -p) proc_name=$2; any_status=1; shift 2 ;;
    *) echo "expect_fail.sh: bad argument '$1'"; exit 2 ;;
    esac
done
[ "$1" = "--" ] && shift
start=$(date +%s)
timeout -k 5 $((bound + 30)) "$@" > "$out_file" 2>&1 &
cmd_pid=$!
# the live (not zombie) processes named $proc_name below $cmd_pid
live_named() {
    ps -eo pid=,ppid=,stat=,comm= | awk -v root="$cmd_pid" -v name="$proc_name" '
        { pp[$1] = $2; st[$1] = $3; c[$1] = $4 }
        END { n = 0
              for (p in pp) {
                  if (c[p] != name || st[p] ~ /^Z/) continue
                  q = p; k = 0
                  while (q != root && (q in pp) && k++ < 64) q = pp[q]
                  if (q == root) n++
              }
              print n }'
}
stopped=0
if [ -n "$proc_name" ]; then
    seen=0
    while kill -0 "$cmd_pid" 2> /dev/null; do
        if [ "$(live_named)" -gt 0 ]; then
            seen=1
        elif [ "$seen" -eq 1 ]; then
            stopped=$(date +%s)
            kill -TERM "$cmd_pid" 2> /dev/null
            break
        fi
        sleep 0.2
    done
fi
wait "$cmd_pid"
rc=$?
end=$(date +%s)
[ "$stopped" -gt 0 ] && end=$stopped
elapsed=$((end - start))
cat "$out_file"
# a job that could not run here (tests/tools/no_mpiexec.sh): skipped
if [ "$rc" -eq 77 ] && grep -q '^SKIPPED: ' "$out_file"; then exit 77; fi
if [ "$stopped" -gt 0 ]; then
    echo "expect_fail: every $proc_name process had ended after ${elapsed} s (bound ${bound} s); the command, still running, was stopped (status $rc)"
else
    echo "expect_fail: exit status $rc after ${elapsed} s (bound ${bound} s)"
fi
fail=0
if [ "$rc" -eq 0 ] && [ "$any_status" -eq 0 ]; then echo "expect_fail: FAIL: the job exited 0"; fail=1; fi
if [ -n "$want_status" ] && [ "$rc" -ne "$want_status" ]; then
    echo "expect_fail: FAIL: exit status $rc, want $want_status"; fail=1
fi
if [ "$elapsed" -gt "$bound" ]; then echo "expect_fail: FAIL: took ${elapsed} s, more than ${bound} s"; fail=1; fi
while IFS= read -r p; do
    if ! grep -Eq -- "$p" "$out_file"; then echo "expect_fail: FAIL: no line matches '$p'"; fail=1; fi
done < "$pats_file"
while IFS= read -r p; do
    if grep -Eq -- "$p" "$out_file"; then echo "expect_fail: FAIL: a line matches '$p'"; fail=1; fi
done < "$neg_file"
[ $fail -eq 0 ] && echo "expect_fail: OK"
exit $fail
