#!/usr/bin/env bash
# tests/fakegpu/smallcall_callgrind.sh - instructions per small allreduce on
# device memory, dtrain over NCCL against raw ncclAllReduce, on the fake
# runtime (tests/fakegpu/smallcall_bench.c), counted by callgrind: the
# measured loop only (--toggle-collect=smallcall_loop), divided by the calls.
# Deterministic, unlike wall time on a shared machine.
#
#   tests/fakegpu/smallcall_callgrind.sh [BENCH] [CALLS] [MODE...]
#
# BENCH defaults to build/tests/fakegpu_smallcall_bench, CALLS to 2000, the
# modes to nccl async blocking auto. Per mode: Ir per call; of which the
# fake's CUDA and NCCL functions (inclusive: what the calls cost inside the
# stand-in, which is no driver's cost) and the rest (dtrain's own host work,
# libc's malloc, locks and clocks included); the extra over nccl. Then the
# functions of each dtrain mode that cost most (inclusive, per call; the
# fake's internals left out).
set -euo pipefail
BENCH=${1:-build/tests/fakegpu_smallcall_bench}
CALLS=${2:-2000}
shift $(( $# > 2 ? 2 : $# ))
MODES=${*:-nccl async blocking auto}
command -v valgrind >/dev/null || { echo "smallcall_callgrind: valgrind is not installed" >&2; exit 2; }
[ -x "$BENCH" ] || { echo "smallcall_callgrind: no $BENCH (build the fakegpu_smallcall_bench target)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export DTRAIN_FAKEGPU_DEVICES=1
# awk prologue: $1 the count without commas, fn the function of a line of
# this program's own code ("???:name [...]"; "" for libc's lines)
NAME='{ gsub(",", "", $1); fn = ""; for (i = 2; i <= NF; i++) if ($i ~ /^\?\?\?:/) { fn = substr($i, 5); break } }'
printf '# %-9s %9s %12s %11s %11s\n' mode "Ir/call" "cuda+nccl" "dtrain own" "extra"
base=""
for m in $MODES; do
    valgrind --tool=callgrind --callgrind-out-file="$TMP/$m.out" --toggle-collect=smallcall_loop \
        "$BENCH" --calls "$CALLS" "$m" > "$TMP/$m.log" 2>&1 || { cat "$TMP/$m.log" >&2; exit 1; }
    callgrind_annotate --inclusive=yes --threshold=100 "$TMP/$m.out" > "$TMP/$m.ann" 2>/dev/null
    # "1,234 (5.6%)  ???:name [object]" -> name and count
    awk -v calls="$CALLS" "$NAME"'
        / PROGRAM TOTALS/ { total = $1 }
        fn ~ /^(cuda|nccl)[A-Za-z]+$/ { api += $1 }
        END { printf "%.0f %.0f\n", total / calls, api / calls }' "$TMP/$m.ann" > "$TMP/$m.sum"
    read -r ir api < "$TMP/$m.sum"
    [ -z "$base" ] && [ "$m" = nccl ] && base=$ir
    extra=-
    [ -n "$base" ] && extra=$(( ir - base ))
    printf '  %-9s %9s %12s %11s %11s\n' "$m" "$ir" "$api" "$(( ir - api ))" "$extra"
done
for m in $MODES; do
    [ "$m" = nccl ] && continue
    echo "# $m: inclusive Ir per call of dtrain's functions and the fake's entry points"
    awk -v calls="$CALLS" "$NAME"'
        fn != "" && fn !~ /^(smallcall_loop|main|\(below|0x|fk_|run_ops|run_one|reduce_to|enqueue|dev_buf|check_args)/ && $1 / calls >= 20 {
            printf "    %-32s %7.0f\n", fn, $1 / calls }' "$TMP/$m.ann" | head -40
done
