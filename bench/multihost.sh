#!/usr/bin/env bash
# bench/multihost.sh - allreduce across hosts: dtrain vs raw MPI_Allreduce on
# the same buffers (dtrain-bench --vs-mpi), f32 sum, 64K..64M, on HOSTS test
# hosts x PPN ranks (tools/multihost/dtrain-hosts: network namespaces on this
# machine), with every host's link shaped both ways by a token bucket (tc
# tbf) to each rate of RATES in turn. Prints, per rate, the busbw of each
# variant and of MPI and their ratio per size, and the minimum ratio from 1 MB.
# The default variants (issue 14's targets, from 1 MB, against raw flat
# MPI_Allreduce f32 in the same run):
#   flat       DTRAIN_TWO_LEVEL=0: MPI's allreduce under dtrain (the check's cost)
#   two-level  DTRAIN_TWO_LEVEL=1: within each host, then between hosts (>= 1.4x)
#   bf16       two-level with bf16 between the hosts, f32 sums (--wire bf16) (>= 2.5x)
#
# Must run as root (network namespaces). Runs in the set named by
# DTRAIN_HOSTS if there is one (its rate is changed), else makes its own
# set and removes it at the end.
#
# Environment:
#   BUILD      build directory holding bin/dtrain-bench (default: <repo>/build)
#   HOSTS, PPN hosts and ranks per host (default 2 and 2)
#   RATES      link rates, tc syntax, "off" for unshaped (default "10gbit 1gbit")
#   VARIANTS   what dtrain runs with, ';'-separated "LABEL|ENV|ARGS" entries:
#              ENV is space-separated VAR=VALUE settings for the ranks, ARGS
#              extra dtrain-bench arguments (default: the three above,
#              "flat|DTRAIN_TWO_LEVEL=0|;two-level|DTRAIN_TWO_LEVEL=1|;
#              bf16|DTRAIN_TWO_LEVEL=1|--wire bf16"); each variant is timed
#              against MPI in its own run
#   MINBYTES, MAXBYTES  sizes (default 64K, 64M); SPLIT: sizes from here on
#              run with ITERS_LARGE iterations (default 2M)
#   ITERS, ITERS_LARGE, WARMUP, ROUNDS  -n below / from SPLIT, -w, --rounds
#              (default 10, 3, 2, 2: at 1 Gbit/s a 64 MB allreduce takes ~1 s)
#   OUT        directory for the JSON rows (default: a new one under /tmp)
# Exit status: non-zero if a run fails or reports wrong results.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BENCH=${BENCH:-$BUILD/bin/dtrain-bench}
HT=$ROOT/tools/multihost/dtrain-hosts
HOSTS=${HOSTS:-2}
PPN=${PPN:-2}
RATES=${RATES:-10gbit 1gbit}
VARIANTS=${VARIANTS:-flat|DTRAIN_TWO_LEVEL=0|;two-level|DTRAIN_TWO_LEVEL=1|;bf16|DTRAIN_TWO_LEVEL=1|--wire bf16}
MINBYTES=${MINBYTES:-64K}
MAXBYTES=${MAXBYTES:-64M}
SPLIT=${SPLIT:-2M}
ITERS=${ITERS:-10}
ITERS_LARGE=${ITERS_LARGE:-3}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-2}

if [[ ! -x $BENCH ]]; then
    echo "multihost.sh: $BENCH not found; build it first (cmake --build build --target dtrain-bench)" >&2
    exit 2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Outside a set: make one and run this script in it.
if [[ -z ${DTRAIN_HOSTS:-} ]]; then
    exec "$HT" with "$HOSTS" --slots "$PPN" -- "$0" "$@"
fi

OUT=${OUT:-$(mktemp -d /tmp/dtrain-bench-mh.XXXXXX)}
mkdir -p "$OUT"
NP=$((HOSTS * PPN))
bytes() { # 64K -> 65536
    awk -v s="$1" 'BEGIN { m = 1; u = toupper(substr(s, length(s)))
        if (u == "K") m = 1024; else if (u == "M") m = 1048576; else if (u == "G") m = 1073741824
        if (m > 1) s = substr(s, 1, length(s) - 1); printf "%.0f\n", s * m }'
}
split=$(bytes "$SPLIT")
min=$(bytes "$MINBYTES")
max=$(bytes "$MAXBYTES")

"$HT" status
echo "# $HOSTS hosts x $PPN ranks; f32 sum allreduce ${MINBYTES}..${MAXBYTES}; -n $ITERS (from $SPLIT: $ITERS_LARGE), -w $WARMUP, --rounds $ROUNDS"

# bench LABEL JSON ENV ARGS LO HI ITERS: one dtrain-bench run over LO..HI
bench() {
    local label=$1 json=$2 envs=$3 extra=$4 lo=$5 hi=$6 n=$7 names="" kv
    for kv in $envs; do names="$names ${kv%%=*}"; done
    echo "+ [$label] ${envs:+$envs }dtrain-bench -o allreduce -d f32 -r sum -b $lo -e $hi -f 2 --vs-mpi -n $n -w $WARMUP --rounds $ROUNDS $extra"
    # shellcheck disable=SC2086
    env $envs DTRAIN_HOSTS_EXPORT="${DTRAIN_HOSTS_EXPORT:-}$names" \
        "$HT" run -- -np "$NP" "$BENCH" -o allreduce -d f32 -r sum -b "$lo" -e "$hi" -f 2 --vs-mpi \
        -n "$n" -w "$WARMUP" --rounds "$ROUNDS" --json "$json" $extra
}

IFS=';' read -r -a VLIST <<< "$VARIANTS"
for rate in $RATES; do
    "$HT" shape "$rate"
    for v in "${VLIST[@]}"; do
        IFS='|' read -r label envs extra <<< "$v"
        json="$OUT/allreduce_${rate}_${label}.json"
        rm -f "$json"
        if [[ $min -lt $split ]]; then bench "$label" "$json" "$envs" "$extra" "$min" $((split < max ? split / 2 : max)) "$ITERS"; fi
        if [[ $max -ge $split ]]; then bench "$label" "$json" "$envs" "$extra" $((min > split ? min : split)) "$max" "$ITERS_LARGE"; fi
    done
done
"$HT" shape off

# ---- summary -----------------------------------------------------------------------
field() { # field KEY: KEY's value in each out-of-place row of stdin, with its bytes
    awk -v key="$1" '
        function get(k,   m) {
            if (match($0, "\"" k "\":[^,}]*")) { m = substr($0, RSTART, RLENGTH); sub(/^[^:]*:/, "", m); gsub(/"/, "", m); return m }
            return ""
        }
        get("placement") == "out" { print get("bytes"), get(key) }'
}
echo
echo "# ==== summary: busbw (GB/s) out of place, best of $ROUNDS alternated rounds; ratio = variant / MPI ===="
for rate in $RATES; do
    for v in "${VLIST[@]}"; do
        IFS='|' read -r label envs extra <<< "$v"
        json="$OUT/allreduce_${rate}_${label}.json"
        echo "# link ${rate/#off/unshaped}, $label${envs:+ ($envs)}${extra:+ [$extra]}"
        printf "#   %10s %10s %10s %7s\n" size "$label" MPI ratio
        join <(field busbw_GBps < "$json" | sort -k1,1) <(field mpi_busbw_GBps < "$json" | sort -k1,1) |
            join - <(field ratio < "$json" | sort -k1,1) | sort -n |
            awk '{ printf "#   %10s %10.3f %10.3f %7.2f\n", ($1 >= 1048576 ? $1 / 1048576 "M" : $1 / 1024 "K"), $2, $3, $4 }'
        field ratio < "$json" | awk '$1 >= 1048576 && $2 != "null" { if (m == "" || $2 < m) m = $2 }
            END { printf "#   min ratio from 1M: %s\n", (m == "" ? "-" : m) }'
    done
done
echo "# JSON rows in $OUT"
