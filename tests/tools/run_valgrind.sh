#!/usr/bin/env bash
# tests/tools/run_valgrind.sh BUILD_DIR
#
# Configures BUILD_DIR as a plain RelWithDebInfo build (no sanitizers: valgrind
# and ASan do not mix), builds it, and runs every ctest test that is a direct
# dtrain test executable (the standalone unit tests, the *_void variants, the
# fuzz replays, the bad-input matrix: no mpiexec, sh or python launchers) under
#   valgrind --tool=memcheck --error-exitcode=1 --leak-check=full
#            --errors-for-leak-kinds=definite
# with the test's own environment and working directory (from ctest's JSON test
# list). Exits non-zero if the build fails or any program has a memcheck error
# or a definite leak (or fails on its own).
#
# Environment:
#   JOBS        build parallelism (default 2)
#   VG_TESTS    regex: only tests whose name matches (default: all selected)
#   VG_EXCLUDE  regex: skip these tests (default
#               '^train_|_emu$|^fakegpu_(gpt|gpt_kernels|wire_kernels)$|^fakegpu_smallcall', see below;
#               '' keeps all)
#   VG_TIMEOUT  seconds per test (default 1200)
#   VG_JOBS     programs under memcheck at once (default JOBS; each prints its
#               line when it ends, the failures' logs follow in list order)
#
# Excluded by default: the fake GPU's emulated-kernel tests (fakegpu_*_emu: linked
# with AddressSanitizer, which checks them, and their CUDA threads are fibers on
# stacks of their own, which memcheck would take for stack switches), and the
# GPT on the fake GPU (fakegpu_gpt, fakegpu_gpt_kernels: the kernels' CPU twins and
# the fake cuBLASLt's OpenBLAS GEMMs; fakegpu_gpt_kernels was still running after 10
# minutes here; fakegpu_wire_kernels: the wire kernels' twins over 2^22 elements a
# case), the small-call tests on the fake GPU (fakegpu_smallcall*: thousands
# of calls from several threads whose waits poll; memcheck runs one thread at a time
# and was still in the first after 6 minutes), and the trainer integration tests (train_learns,
# train_dp_equiv_np1, train_zero_np1: 3-15 s each normally). Their time is spent in
# OpenBLAS GEMM kernels, which valgrind runs 100x+ slower (train_learns alone was
# still running after 10 minutes). Their code paths are checked by the ASan + UBSan
# run of the same tests (run_sanitizers.sh), and dtrain-train's argument, config,
# data and checkpoint paths are checked under valgrind here through the bad-input
# matrix: child processes are traced (--trace-children), except launchers and system
# programs (mpiexec, sh, ...), so every dtrain-train a row starts runs under memcheck
# too (one log per process). The matrix's fixtures (the checkpoints some rows
# corrupt, made by short training runs) are not under test: test_badinput starts
# them through /bin/sh, so they run natively (they were 214 of the matrix's 305 s
# here). Tests run through a runner script (tests/tools/expect_ok.sh: the step-time
# benchmarks' smoke tests) are not direct programs and are left to ASan; their
# models' code runs here in test_nn_model and test_gpt_model.
#
# OPENBLAS_NUM_THREADS=1 keeps OpenBLAS from starting its thread pool (the
# trainer sets its BLAS threads itself; the pool only adds noise here).
# tests/tools/valgrind.supp holds suppressions for non-dtrain libraries only.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
src="$(cd "$here/../.." && pwd)"
build="${1:-$src/build-vg}"
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
jobs="${JOBS:-2}"
command -v valgrind >/dev/null || { echo "run_valgrind.sh: valgrind is not installed (apt-get install valgrind)"; exit 1; }
t0=$(date +%s)

echo "== configure + build $build (RelWithDebInfo, no sanitizers)"
# -Werror off: warnings are the normal build's job; -O2 -g inlines differently from
# Release and gcc then reports a few extra (format-truncation) warnings.
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDTRAIN_SANITIZE=OFF -DDTRAIN_WERROR=OFF >/dev/null
if ! cmake --build "$build" -j "$jobs" >"$build/build.log" 2>&1; then
  grep -E "error|Error" "$build/build.log" | head -40
  echo "== valgrind: BUILD FAILED (full log: $build/build.log)"
  exit 1
fi
t1=$(date +%s)

logdir="$build/valgrind-logs"
rm -rf "$logdir"
mkdir -p "$logdir"
list="$build/valgrind-tests.txt"
( cd "$build" && ctest --show-only=json-v1 ) | python3 -c '
import json, os, re, sys
build, only, skip = sys.argv[1], sys.argv[2], sys.argv[3]
for t in json.load(sys.stdin)["tests"]:
    cmd = t.get("command") or []
    if not cmd or not os.path.realpath(cmd[0]).startswith(os.path.realpath(build) + "/"):
        continue  # launched through mpiexec, sh or python: not a unit test program
    name = t["name"]
    if only and not re.search(only, name): continue
    if skip and re.search(skip, name): continue
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    env = props.get("ENVIRONMENT", [])
    if isinstance(env, str): env = env.split(";")
    wd = props.get("WORKING_DIRECTORY", build)
    skip_rc = str(props.get("SKIP_RETURN_CODE", ""))
    print("\x1f".join([name, wd, "\x1e".join(env), skip_rc] + cmd))
' "$build" "${VG_TESTS:-}" "${VG_EXCLUDE-^train_|_emu$|^fakegpu_(gpt|gpt_kernels|wire_kernels)$|^fakegpu_smallcall}" > "$list"

# one program under memcheck: prints its line when done and leaves
# $logdir/NAME.rc (0 clean, else its exit) for the summary
run_one() {
  local name="$1" wd="$2" envs="$3" skip_rc="$4"
  shift 4
  local cmd=("$@") envargs=() log="$logdir/$name"
  if [ -n "$envs" ]; then IFS=$'\x1e' read -r -a envargs <<< "$envs"; fi
  local s e rc nproc errs leak why line
  s=$(date +%s)
  set +e
  (cd "$wd" && env "${envargs[@]}" OPENBLAS_NUM_THREADS=1 timeout "${VG_TIMEOUT:-1200}" \
     valgrind --tool=memcheck --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
              --show-leak-kinds=definite --num-callers=30 --suppressions="$here/valgrind.supp" \
              --trace-children=yes --trace-children-skip='*mpiexec*,*mpirun*,*orterun*,/bin/*,/usr/bin/*,/usr/sbin/*' \
              --log-file="$log.%p.log" "${cmd[@]}" </dev/null >"$logdir/$name.out" 2>&1)
  rc=$?
  set -e
  e=$(date +%s)
  # one log per process (the test and the dtrain programs it started)
  nproc=$(ls "$log".*.log 2>/dev/null | wc -l || true)
  errs=$(cat "$log".*.log 2>/dev/null | grep -o 'ERROR SUMMARY: [0-9]*' | grep -o '[0-9]*$' | awk '{s+=$1} END{print s+0}' || true)
  leak=$(cat "$log".*.log 2>/dev/null | grep -o 'definitely lost: [0-9,]* bytes' | grep -o '[0-9,]*' | tr -d , |
         awk '{s+=$1} END{print s+0}' || true)
  [ "$errs" = 0 ] || rc=${rc/#0/1}
  # the test's own skip (its SKIP_RETURN_CODE, e.g. 77 for no GPU) with no memcheck
  # error is a skip here too, its reason printed
  why=""
  if [ -n "$skip_rc" ] && [ "$rc" = "$skip_rc" ] && [ "$errs" = 0 ]; then
    rc=0
    why="  skipped: $(grep -m1 -i 'skip' "$logdir/$name.out" || tail -1 "$logdir/$name.out")"
  fi
  line=$(printf '%-28s %4ss  %2s process(es), errors %s, definitely lost %s bytes%s%s' "$name" "$((e - s))" "$nproc" \
         "$errs" "$leak" "$([ $rc -ne 0 ] && echo "  FAILED (exit $rc)")" "$why")
  echo "$line"
  echo "$rc" > "$logdir/$name.rc"
}

# VG_JOBS programs at a time (default JOBS): memcheck runs each program's
# threads one at a time, so the cores take a program each; the bad-input
# matrix (most of the time: a dtrain-train per row) starts first
vg_jobs="${VG_JOBS:-$jobs}"
awk -F '\x1f' '$1 == "badinput_matrix" {print; next} {rest[++n] = $0}
  END {for (i = 1; i <= n; i++) print rest[i]}' "$list" > "$list.order"
n=0
while IFS=$'\x1f' read -r -a f; do
  n=$((n + 1))
  while [ "$(jobs -rp | wc -l)" -ge "$vg_jobs" ]; do wait -n || true; done
  run_one "${f[@]}" &
done < "$list.order"
wait

status=0
failed=""
while IFS=$'\x1f' read -r -a f; do
  name="${f[0]}"
  rc=$(cat "$logdir/$name.rc" 2>/dev/null || echo "no result")
  [ "$rc" = 0 ] && continue
  status=1
  failed="$failed $name"
  echo "==== $name: exit $rc"
  for l in "$logdir/$name".*.log; do
    [ -e "$l" ] || continue
    grep -q 'ERROR SUMMARY: [1-9]' "$l" || continue
    echo "---- $l"; grep -v '^==[0-9]*== *$' "$l" | head -80 || true  # head's early exit is no failure
  done
  echo "---- output"; tail -20 "$logdir/$name.out" 2>/dev/null || true
done < "$list"
t2=$(date +%s)
echo "== valgrind: $n programs, build $((t1 - t0)) s, run $((t2 - t1)) s: $([ $status = 0 ] && echo CLEAN || echo "FAILED:$failed")"
exit $status
