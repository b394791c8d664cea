#!/usr/bin/env bash
# bench/hsdp.sh - hybrid sharding (--shard-group host: ZeRO sharded within
# each host, replicated across hosts) against ZeRO over the world
# (--shard-group world) with dtrain-train on HOSTS test hosts x PPN ranks
# (tools/multihost/dtrain-hosts: network namespaces on this machine), every
# host's link shaped both ways by a token bucket (tc tbf) to each rate of
# RATES in turn. Per rate, stage and shard group: the median step time and
# the bytes that crossed hosts (what the hosts' eth0 sent, per step: every
# byte between hosts goes through one of them), and per stage the ratios
# host / world. The same training either way (tests/multihost checks the
# results; here only time and traffic are measured).
#
# Must run as root (network namespaces). Runs in the set named by
# DTRAIN_HOSTS if there is one (its rate is changed), else makes its own
# set and removes it at the end.
#
# Environment:
#   BUILD      build directory holding bin/dtrain-train (default: <repo>/build)
#   HOSTS, PPN hosts and ranks per host (default 2 and 2)
#   RATES      link rates, tc syntax, "off" for unshaped (default "10gbit 1gbit")
#   STAGES     ZeRO stages (default "3"; e.g. "2 3")
#   MODEL      dtrain-train model flags (default: --model mlp, 1024 x 1024
#              hidden, 1.9 M parameters; e.g. "--model gpt --preset gpt-demo")
#   BATCH      --batch-size per rank (default 32)
#   STEPS      optimizer steps per run (default 30; the median skips the first 3)
#   OUT        directory for the runs' JSON lines (default: a new one under /tmp)
# Exit status: non-zero if a run fails.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
TRAIN=${TRAIN:-$BUILD/bin/dtrain-train}
HT=$ROOT/tools/multihost/dtrain-hosts
HOSTS=${HOSTS:-2}
PPN=${PPN:-2}
RATES=${RATES:-10gbit 1gbit}
STAGES=${STAGES:-3}
MODEL=${MODEL:---model mlp}
BATCH=${BATCH:-32}
STEPS=${STEPS:-30}

if [[ ! -x $TRAIN ]]; then
    echo "hsdp.sh: $TRAIN not found; build it first (cmake --build build --target dtrain-train)" >&2
    exit 2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Outside a set: make one and run this script in it.
if [[ -z ${DTRAIN_HOSTS:-} ]]; then
    exec "$HT" with "$HOSTS" --slots "$PPN" -- "$0" "$@"
fi

OUT=${OUT:-$(mktemp -d /tmp/dtrain-bench-hsdp.XXXXXX)}
mkdir -p "$OUT"
NP=$((HOSTS * PPN))
mapfile -t NSS < <("$HT" hosts | awk '{ print $4 }')
wire() { # bytes sent so far by every host's link
    local ns t=0
    for ns in "${NSS[@]}"; do t=$((t + $(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes))); done
    echo $t
}
median_step() { # median of the steps' time_s, the first 3 skipped
    awk -F'"time_s":' '/"type":"step"/ { split($2, a, /[,}]/); if (n++ >= 3) print a[1] + 0 }' "$1" |
        sort -g | awk '{ d[m++] = $1 } END { if (!m) print "nan"; else print (m % 2 ? d[(m - 1) / 2] : (d[m / 2 - 1] + d[m / 2]) / 2) }'
}

"$HT" status
echo "# $HOSTS hosts x $PPN ranks; dtrain-train $MODEL --batch-size $BATCH --max-steps $STEPS; rates: $RATES"
printf "%-8s %-6s %-6s %14s %16s\n" rate stage group "step ms" "MB across/step"
# shellcheck disable=SC2086
for rate in $RATES; do
    "$HT" shape "$rate" > /dev/null
    for z in $STAGES; do
        declare -A ms=() mb=()
        for g in world host; do
            json=$OUT/r${rate}_z${z}_${g}.json
            b0=$(wire)
            "$HT" run -- -np "$NP" "$TRAIN" $MODEL --batch-size "$BATCH" --max-steps "$STEPS" --epochs 1 --eval 0 \
                --quiet --zero "$z" --shard-group "$g" --json "$json" > "$OUT/r${rate}_z${z}_${g}.log" 2>&1 || {
                echo "hsdp.sh: run failed ($rate, stage $z, $g):"; tail -20 "$OUT/r${rate}_z${z}_${g}.log"; exit 1; }
            b1=$(wire)
            ms[$g]=$(awk -v s="$(median_step "$json")" 'BEGIN { printf "%.2f", s * 1000 }')
            mb[$g]=$(awk -v b=$((b1 - b0)) -v n="$STEPS" 'BEGIN { printf "%.2f", b / n / 1e6 }')
            printf "%-8s %-6s %-6s %14s %16s\n" "$rate" "$z" "$g" "${ms[$g]}" "${mb[$g]}"
        done
        awk -v r="$rate" -v z="$z" -v hm="${ms[host]}" -v wm="${ms[world]}" -v hb="${mb[host]}" -v wb="${mb[world]}" \
            'BEGIN { printf "%-8s %-6s host/world: step time %.2fx, bytes across hosts %.2fx\n", r, z, hm / wm, hb / wb }'
    done
done
"$HT" shape off > /dev/null
echo "# runs' JSON lines and logs: $OUT (bytes across hosts include the launch and the start-up broadcast)"
