#!/usr/bin/env bash
# tests/tools/run_fuzz.sh [SECONDS_PER_TARGET]   (default 60)
#
# Builds the libFuzzer targets of tests/fuzz/ with clang
# (-fsanitize=fuzzer,address,undefined), replays every regression input in
# tests/fuzz/regressions/<target>/ (a crash there fails at once), then fuzzes
# each target for SECONDS_PER_TARGET seconds starting from the seeds in
# tests/fuzz/corpus/<target>/ (plus what earlier runs in the same build folder
# found). Exits non-zero on any crash, leak, UB, timeout, FUZZ_CHECK failure or
# build error; a crashing input is left in $FUZZ_BUILD/artifacts/<target>/ and
# the command to keep it as a regression file is printed.
#
# Environment:
#   FUZZ_BUILD    build/work folder (default build-fuzz in the repository)
#   FUZZ_TARGETS  space-separated subset of: idx config train_args safetensors ckpt_manifest
#   CC            clang to use (default clang)
#   JOBS          parallel compile jobs (default 2)
#   FUZZ_JOBS     targets fuzzed at once (default JOBS)
#
# The library is compiled from src/ with the same flags for every file
# (-fsanitize=fuzzer-no-link,address,undefined) into a static archive; each
# target links only the objects it needs (the linker picks them from the
# archive), plus MPI, zlib, jansson and OpenBLAS for any that refer to them.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
src="$(cd "$here/../.." && pwd)"
secs="${1:-60}"
out="${FUZZ_BUILD:-$src/build-fuzz}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
cc="${CC:-clang}"
case "$("$cc" --version 2>/dev/null | head -1)" in
  *clang*) ;;
  *) echo "run_fuzz.sh: CC=$cc is not clang (libFuzzer needs clang)"; cc=clang ;;
esac
jobs="${JOBS:-2}"
targets="${FUZZ_TARGETS:-idx config train_args safetensors ckpt_manifest}"
fuzzdir="$src/tests/fuzz"

mpi_cflags="$(mpicc --showme:compile 2>/dev/null || echo "-I/usr/lib/x86_64-linux-gnu/openmpi/include")"
mpi_libs="$(mpicc --showme:link 2>/dev/null || echo "-lmpi")"
cblas=""
for d in /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/openblas; do
  [ -f "$d/cblas.h" ] && { cblas="-I$d"; break; }
done
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cflags="-std=c11 -g -O1 $san -D_POSIX_C_SOURCE=200809L -I$src/include -I$src/src $cblas $mpi_cflags"
libs="$mpi_libs -lz -ljansson -lopenblas -lm -lpthread"

mkdir -p "$out/obj" "$out/artifacts"
t0=$(date +%s)

# ---- library objects (rebuilt when the source or a header is newer) ----------
newest_hdr=$(find "$src/include" "$src/src" -name '*.h' -printf '%T@\n' | sort -n | tail -1)
: > "$out/objs.txt"
: > "$out/todo.txt"
for f in "$src"/src/{core,io,comm,coll,parallel,nn,optim,data,train}/*.c; do
  [ -f "$f" ] || continue
  rel="${f#$src/src/}"
  o="$out/obj/${rel//\//_}.o"
  echo "$o" >> "$out/objs.txt"
  if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || \
     awk -v a="$(stat -c %Y "$o")" -v b="$newest_hdr" 'BEGIN{exit !(b > a)}'; then
    printf '%s\t%s\n' "$f" "$o" >> "$out/todo.txt"
  fi
done
if [ -s "$out/todo.txt" ]; then
  echo "== compiling $(wc -l < "$out/todo.txt") library source(s) with $cc (-j$jobs)"
  export cc cflags
  # A file that does not compile (someone's work in progress) is left out; the
  # link below fails only if a target needs it.
  tr '\t' ' ' < "$out/todo.txt" | xargs -P "$jobs" -n 2 sh -c \
    'rm -f "$1"; $cc $cflags -fsanitize=fuzzer-no-link -c "$0" -o "$1" 2>"$1.log" || { echo "warning: $0 does not compile:"; head -5 "$1.log"; }'
fi
rm -f "$out/libdtrain_fuzz.a"
# shellcheck disable=SC2046
ar rcs "$out/libdtrain_fuzz.a" $(for o in $(cat "$out/objs.txt"); do [ -f "$o" ] && echo "$o"; done)

# ---- targets -------------------------------------------------------------------
status=0
for t in $targets; do
  # shellcheck disable=SC2086
  if ! "$cc" $cflags -fsanitize=fuzzer -I"$fuzzdir" "$fuzzdir/fuzz_$t.c" "$out/libdtrain_fuzz.a" $libs \
       -o "$out/fuzz_$t" 2>"$out/fuzz_$t.link.log"; then
    echo "== fuzz_$t: BUILD FAILED"; head -20 "$out/fuzz_$t.link.log"; status=1
  fi
done
[ $status = 0 ] || exit 1
t1=$(date +%s)
echo "== built $(echo $targets | wc -w) targets in $((t1 - t0)) s"

export ASAN_OPTIONS="halt_on_error=1:print_stacktrace=1:detect_leaks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# one target: its regressions, then SECS of fuzzing; what it reports goes to
# $out/fuzz_T.report (printed in target order at the end), its summary line
# to $out/fuzz_T.summary, its status to $out/fuzz_T.rc
fuzz_one() {
  local t="$1" bin="$out/fuzz_$1" seeds="$fuzzdir/corpus/$1" regs="$fuzzdir/regressions/$1"
  local work="$out/corpus/$1" art="$out/artifacts/$1/" dict="" rep="$out/fuzz_$1.report"
  : > "$rep"
  [ -f "$fuzzdir/dict/$t.dict" ] && dict="-dict=$fuzzdir/dict/$t.dict"
  mkdir -p "$work" "$art"

  # 1. regressions: every kept input must run clean
  local nreg=0 rfiles=()
  if [ -d "$regs" ]; then
    mapfile -t rfiles < <(find "$regs" -maxdepth 1 -type f ! -name 'README*' ! -name '.*' | sort)
    nreg=${#rfiles[@]}
    if [ "$nreg" -gt 0 ]; then
      if ! "$bin" -runs=1 -timeout=30 "${rfiles[@]}" >"$out/fuzz_$t.regress.log" 2>&1; then
        { echo "== fuzz_$t: REGRESSION input fails:"; tail -40 "$out/fuzz_$t.regress.log" || true; } >> "$rep"
        echo "  $t: regression FAILED ($nreg inputs)" > "$out/fuzz_$t.summary"
        echo 1 > "$out/fuzz_$t.rc"
        return 0
      fi
    fi
  fi

  # 2. fuzz
  local log="$out/fuzz_$t.log" rc execs cov
  set +e
  # shellcheck disable=SC2086
  "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
         -print_final_stats=1 -artifact_prefix="$art" $dict "$work" "$seeds" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || true)
  if [ $rc -ne 0 ]; then
    {
      echo "== fuzz_$t: FAILED (exit $rc)"; grep -v '^#[0-9]' "$log" | tail -60 || true
      for a in "$art"*; do
        [ -f "$a" ] || continue
        echo "   crashing input: $a"
        echo "   keep it:  cp '$a' '$regs/'"
      done
    } >> "$rep"
    echo "  $t: ${secs}s, ${execs:-?} execs, cov ${cov:-?}, $nreg regressions: CRASH" > "$out/fuzz_$t.summary"
    echo 1 > "$out/fuzz_$t.rc"
  else
    echo "  $t: ${secs}s, ${execs:-?} execs, cov ${cov:-?}, $nreg regressions ok, no crash" > "$out/fuzz_$t.summary"
    echo 0 > "$out/fuzz_$t.rc"
  fi
}

# FUZZ_JOBS targets at a time (default JOBS: libFuzzer runs one thread a target)
fuzz_jobs="${FUZZ_JOBS:-$jobs}"
for t in $targets; do
  rm -f "$out/fuzz_$t.rc" "$out/fuzz_$t.summary"
  while [ "$(jobs -rp | wc -l)" -ge "$fuzz_jobs" ]; do wait -n || true; done
  fuzz_one "$t" &
done
wait
summary=""
for t in $targets; do
  cat "$out/fuzz_$t.report" 2>/dev/null || true
  summary="$summary\n$(cat "$out/fuzz_$t.summary" 2>/dev/null || echo "  $t: no result")"
  [ "$(cat "$out/fuzz_$t.rc" 2>/dev/null)" = 0 ] || status=1
done
t2=$(date +%s)
printf "== fuzz summary (%s s in all):%b\n" "$((t2 - t0))" "$summary"
exit $status
