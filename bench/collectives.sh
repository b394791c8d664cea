#!/usr/bin/env bash
# bench/collectives.sh - the collective benchmarks of bench/README.md, at 2 ranks:
#   1. allreduce f32 sum, 1K..64M, against raw MPI_Allreduce (--vs-mpi)
#   2. gradient-fusion comparison on 1000 x 1 KiB f32 tensors:
#        one dt_allreduce_list over the 1000 tensors   (--list 1000, vs MPI)
#        the list against one dt_allreduce of the same total size, alternated
#        in one run                                     (--list 1000 --vs-single)
#        1000 separate dt_allreduce calls               (--separate 1000)
#   3. allreduce f32 sum in place on dt_comm_alloc_shared memory, 64K..64M,
#      against raw in-place MPI_Allreduce on the same buffers (--shared-mem)
#   4. the other collectives through the shared-memory window (coll.h), f32,
#      64K..64M, each against its raw MPI call (MPI_Reduce_scatter_block,
#      MPI_Allgather, MPI_Bcast, MPI_Reduce) on the same buffers: OPS
# and prints a summary (busbw ratios vs MPI, list/single time, separate/list
# speedup). Raw results (one JSON object per row) are written to $OUT.
# Before each run and at the end it measures the cache-line round trip between
# two CPUs (dtrain-core-probe): on a shared VM that says which state the host
# had the CPUs in (bench/README.md), and the summary lists the readings.
#
# Environment:
#   BUILD    build directory holding bin/dtrain-bench (default: <repo>/build)
#   BENCH    the executable itself (default: $BUILD/bin/dtrain-bench)
#   NP       number of ranks (default 2)
#   MPIRUN   launcher (default mpirun); MPIRUN_ARGS (default --oversubscribe)
#   OUT      directory for the JSON files (default: a new directory under /tmp)
#   ITERS, WARMUP, ROUNDS   -n, -w and --rounds of every run (default 20, 5, 3)
#   OPS      the collectives of part 4 (default "reduce_scatter allgather
#            broadcast reduce"; empty: none)
#   FUSION_ITERS  -n of the three 1000-tensor runs (default 200: a round of
#                 20 iterations of a ~100 us call is shorter than this VM's
#                 slow phases, so its best-of-rounds ratio was a lottery)
# Exit status: non-zero if a run fails or reports wrong results.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BENCH=${BENCH:-$BUILD/bin/dtrain-bench}
NP=${NP:-2}
MPIRUN=${MPIRUN:-mpirun}
MPIRUN_ARGS=${MPIRUN_ARGS:---oversubscribe}
ITERS=${ITERS:-20}
FUSION_ITERS=${FUSION_ITERS:-200}
WARMUP=${WARMUP:-5}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-$(mktemp -d /tmp/dtrain-bench.XXXXXX)}
OPS=${OPS-reduce_scatter allgather broadcast reduce}

if [[ ! -x $BENCH ]]; then
    echo "collectives.sh: $BENCH not found; build it first:" >&2
    echo "  cmake -S $ROOT -B $BUILD -DCMAKE_BUILD_TYPE=Release && cmake --build $BUILD --target dtrain-bench" >&2
    exit 2
fi
if [[ $(id -u) == 0 ]]; then # Open MPI refuses to run as root without these
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
mkdir -p "$OUT"

COMMON=(-n "$ITERS" -w "$WARMUP" -c 1 --rounds "$ROUNDS" -d f32 -r sum)
FUSION=(-n "$FUSION_ITERS" -w "$WARMUP" -c 1 --rounds "$ROUNDS" -d f32 -r sum)
PROBES=""
probe() { # the core-to-core round trip in ns, appended to PROBES
    local ns="n/a"
    if [[ -x $BUILD/bin/dtrain-core-probe ]]; then
        ns=$("$BUILD/bin/dtrain-core-probe" | awk '{ print $4 }') || ns="n/a"
    fi
    PROBES="$PROBES $ns"
    echo "# core-to-core round trip: $ns ns"
}
run() { # run NAME ARGS...: one dtrain-bench invocation, JSON into $OUT/NAME.json
    local name=$1
    shift
    probe
    rm -f "$OUT/$name.json"
    echo "+ $MPIRUN $MPIRUN_ARGS -np $NP $BENCH $* --json $OUT/$name.json"
    # shellcheck disable=SC2086
    $MPIRUN $MPIRUN_ARGS -np "$NP" "$BENCH" "$@" --json "$OUT/$name.json"
}

run allreduce -o allreduce -b 1K -e 64M -f 2 --vs-mpi "${COMMON[@]}"
run fusion_list -o allreduce -b 1000K -e 1000K --list 1000 --vs-mpi "${FUSION[@]}"
run fusion_vs_single -o allreduce -b 1000K -e 1000K --list 1000 --vs-single "${FUSION[@]}"
run fusion_separate -o allreduce -b 1000K -e 1000K --separate 1000 --vs-mpi "${FUSION[@]}"
run shared_mem -o allreduce -b 64K -e 64M -f 2 --vs-mpi --shared-mem "${COMMON[@]}"
for op in $OPS; do
    run "op_$op" -o "$op" -b 64K -e 64M -f 2 --vs-mpi "${COMMON[@]}"
done
probe

# field FILE KEY [AWK-CONDITION] [PLACEMENT]: values of KEY over the rows of
# one placement (default out-of-place)
field() {
    awk -v key="$2" -v pl="${4:-out}" '
        function get(k,   m) {
            if (match($0, "\"" k "\":[^,}]*")) { m = substr($0, RSTART, RLENGTH); sub(/^[^:]*:/, "", m); gsub(/"/, "", m); return m }
            return ""
        }
        get("placement") == pl && ('"${3:-1}"') { print get(key) }' "$1"
}
minof() { awk 'BEGIN { m = "" } $1 != "null" && $1 != "" { if (m == "" || $1 + 0 < m) m = $1 + 0 } END { print (m == "" ? "-" : m) }'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.3f\n", a / b }'; }

AR=$OUT/allreduce.json
r_big=$(field "$AR" ratio 'get("bytes") + 0 >= 65536 && get("bytes") + 0 <= 67108864' | minof)
r_small=$(field "$AR" ratio 'get("bytes") + 0 >= 4096 && get("bytes") + 0 <= 65536' | minof)
t_list=$(field "$OUT/fusion_list.json" time_us)
t_list_mpi=$(field "$OUT/fusion_list.json" mpi_time_us)
FV=$OUT/fusion_vs_single.json
t_single=$(field "$FV" single_time_us)
t_list2=$(field "$FV" time_us)
t_single_in=$(field "$FV" single_time_us 1 in)
t_list2_in=$(field "$FV" time_us 1 in)
t_sep=$(field "$OUT/fusion_separate.json" time_us)
t_sep_mpi=$(field "$OUT/fusion_separate.json" mpi_time_us)
SM=$OUT/shared_mem.json
r_sm_big=$(field "$SM" ratio 'get("bytes") + 0 >= 524288' in | minof)
r_sm_small=$(field "$SM" ratio 'get("bytes") + 0 < 524288' in | minof)

echo
echo "# ==== summary ($NP ranks; out-of-place; ratio = dtrain busbw / MPI busbw, best of $ROUNDS alternated rounds) ===="
printf "# allreduce f32 sum: min busbw ratio 64K..64M : %s\n" "$r_big"
printf "# allreduce f32 sum: min busbw ratio  4K..64K : %s\n" "$r_small"
printf "# fusion, 1000 x 1 KiB f32 (1000 KiB in all), time per iteration (us):\n"
printf "#   dt_allreduce_list (1000 tensors)   : %s  (one MPI_Allreduce of 1000 KiB: %s)\n" "$t_list" "$t_list_mpi"
printf "#   1000 separate dt_allreduce         : %s  (1000 MPI_Allreduce: %s)\n" "$t_sep" "$t_sep_mpi"
printf "# list vs one dt_allreduce of 1000 KiB, alternated in ONE run (--vs-single):\n"
printf "#   out-of-place: list %s, single %s -> list / single %s\n" "$t_list2" "$t_single" "$(div "$t_list2" "$t_single")"
printf "#   in-place    : list %s, single %s -> list / single %s\n" "$t_list2_in" "$t_single_in" "$(div "$t_list2_in" "$t_single_in")"
printf "# separate / list speedup              : %s\n" "$(div "$t_sep" "$t_list")"
printf "# in place on dt_comm_alloc_shared memory vs in-place MPI_Allreduce: min busbw ratio\n"
printf "#   512K..64M (reduced between the ranks' buffers): %s;  64K..256K (staged): %s\n" "$r_sm_big" "$r_sm_small"
for op in $OPS; do
    f=$OUT/op_$op.json
    printf "# %-14s through the window vs MPI: min busbw ratio 64K..64M (out-of-place) %s\n" "$op" \
        "$(field "$f" ratio 1 | minof)"
done
printf "# core-to-core round trip (ns) before each run and after:%s\n" "$PROBES"
echo "# JSON rows in $OUT"
