#!/usr/bin/env bash
# tests/multihost/mh_run.sh MODE ARGS... - the multi-host tests, each run on a
# set of test hosts made by tools/multihost/dtrain-hosts (network namespaces
# on this machine), 2 hosts x 2 ranks:
#
#   attrs MH_ATTRS                  seed 003's attribute table and the local
#                                   attributes of every rank_list, hostnames
#   coll EXE                        a collective test of tests/coll, as is
#   train ZERO TRAINER PYTHON       dtrain-train (--zero ZERO) on 2 hosts x 2
#                                   ranks and on 1 host x 4 ranks: the same
#                                   losses and parameters (compare_runs.py)
#   fault kill|kill-recovery|stop RANK FAULT_PROG EXPECT_FAIL
#                                   rank RANK (on host 2) SIGKILLed (also with
#                                   mpirun told not to end the job) or
#                                   SIGSTOPped: every rank ends, within the
#                                   bound, and the report names RANK and host 2
#
# Each mode makes its own set (`dtrain-hosts with 2 -- ...`, removed at the
# end whatever happens) and exits 77 when no hosts can be made here (not
# root, no network namespaces), with the reason. DTRAIN_HOSTS_REQUIRE=1 turns
# that skip into a failure. MH_LIMIT: seconds one mpirun may take (240).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
H=${MH_HOSTS_TOOL:-$HERE/../../tools/multihost/dtrain-hosts}
LIMIT=${MH_LIMIT:-240}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

mode=${1:?usage: mh_run.sh MODE ARGS...}
shift

# Outside a set: make one (2 hosts, 2 slots each) and run this script in it.
if [[ -z ${DTRAIN_HOSTS:-} ]]; then
    rc=0
    "$H" with 2 --slots 2 -- "$0" "$mode" "$@" || rc=$?
    if [[ $rc == 77 && ${DTRAIN_HOSTS_REQUIRE:-0} == 1 ]]; then
        echo "mh_run: DTRAIN_HOSTS_REQUIRE=1: failing instead of skipping"
        exit 1
    fi
    exit "$rc"
fi

# In a set. Like ssh, the harness passes the remote ranks no environment but
# DTRAIN_* and the names in DTRAIN_HOSTS_EXPORT: add the sanitizers' settings
# (make sanitize runs this suite in an ASan + UBSan build).
for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do
    [[ -n ${!v+x} ]] && export DTRAIN_HOSTS_EXPORT="${DTRAIN_HOSTS_EXPORT:-} $v"
done
mapfile -t NAMES < <("$H" hosts | awk '{ print $2 }')
mapfile -t NSS < <("$H" hosts | awk '{ print $4 }')
echo "mh_run: $mode on set $DTRAIN_HOSTS: hosts ${NAMES[*]}"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mh_run.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

mhrun() { timeout -k 5 "$LIMIT" "$H" run -- "$@"; }

# Fails if a process is still running in one of the set's hosts 10 s after
# the job ended (mpirun returns once its daemons reported; they reap late).
no_leftovers() {
    local t ns left
    for t in $(seq 1 50); do
        left=""
        for ns in "${NSS[@]}"; do
            for p in $(ip netns pids "$ns" 2> /dev/null); do
                grep -q '^State:.*Z' "/proc/$p/status" 2> /dev/null || left="$left $p"
            done
        done
        [[ -z $left ]] && { echo "mh_run: no process left in the hosts after $((t / 5)).$((t % 5 * 2)) s"; return 0; }
        sleep 0.2
    done
    echo "mh_run: FAIL: processes still running in the hosts 10 s after the job:"
    # shellcheck disable=SC2086
    ps -o pid,stat,etime,cmd -p ${left// /,} || true
    return 1
}

case $mode in
attrs)
    mhrun -np 4 "$1" "${NAMES[@]}"
    ;;
coll)
    mhrun -np 4 "$@"
    ;;
train)
    zero=$1 trainer=$2 py=$3
    steps=20
    flags=(--model mlp --max-steps $steps --batch-size 16 --train-limit 2048 --test-limit 256 --epochs 1
        --optimizer sgd --momentum 0.9 --lr 0.05 --clip-grad-norm 1 --seed 3 --quiet --zero "$zero")
    mhrun -np 4 "$trainer" "${flags[@]}" --json "$TMP/hosts2.json" --save-model "$TMP/hosts2.safetensors"
    mhrun -np 4 -H "${NAMES[0]}:4" "$trainer" "${flags[@]}" --json "$TMP/host1.json" \
        --save-model "$TMP/host1.safetensors"
    # Tolerance 1e-5: see tests/multihost/CMakeLists.txt.
    "$py" "$HERE/compare_runs.py" "$TMP/hosts2.json" "$TMP/hosts2.safetensors" "$TMP/host1.json" \
        "$TMP/host1.safetensors" --steps $steps --rtol-loss 1e-5 --rtol-param 1e-5
    ;;
fault)
    what=$1 rank=$2 prog=$3 expect=$4
    h2=${NAMES[1]}
    export FAULT_RANK=$rank DTRAIN_HOSTS_EXPORT="FAULT_RANK ${DTRAIN_HOSTS_EXPORT:-}"
    rc=0
    case $what in
    kill) # the lost rank's host-mate reports it (dtrain), or mpirun does
        sh "$expect" 13 -e "lost rank $rank \\(pid [0-9]+, host $h2\\)|process rank $rank with PID [0-9]+ on node $h2" \
            -- "$H" run -- -np 4 "$prog" kill > "$TMP/out" 2>&1 || rc=$?
        ;;
    kill-recovery) # mpirun told not to end the job (as other launchers may
        # not): the lost rank's host-mate names it, the others end by themselves
        sh "$expect" 13 -z -e "dtrain: rank [0-9]+: lost rank $rank \\(pid [0-9]+, host $h2\\)" \
            -- "$H" run -- -np 4 --mca orte_enable_recovery 1 "$prog" kill > "$TMP/out" 2>&1 || rc=$?
        ;;
    stop) # alive but silent: the stall report of its host names it
        sh "$expect" 20 -e "STALL on rank [0-9]+ \\(host $h2\\)" -e "not arrived: rank $rank " \
            -- "$H" run -- -np 4 "$prog" stop > "$TMP/out" 2>&1 || rc=$?
        ;;
    *) echo "mh_run: fault: kill, kill-recovery or stop"; exit 2 ;;
    esac
    cat "$TMP/out"
    if [[ $what == stop ]]; then
        # rank RANK must be listed as not arrived in a full stall report
        # written by a rank of its own host (the header names the host)
        if awk -v h="$h2" -v r="$rank" '
            /dtrain: STALL on rank [0-9]+ \(host / { inrep = index($0, "(host " h ")") > 0 && /DTRAIN_TIMEOUT/; next }
            /dtrain: ranks that have not arrived/ { inrep = 0 }
            inrep && index($0, "not arrived: rank " r " ") { found = 1 }
            END { exit !found }' "$TMP/out"; then
            echo "mh_run: rank $rank named as not arrived in a stall report from its host $h2"
        else
            echo "mh_run: FAIL: no stall report from host $h2 names rank $rank"
            rc=1
        fi
    fi
    no_leftovers || rc=1
    exit "$rc"
    ;;
*)
    echo "mh_run: unknown mode '$mode'"
    exit 2
    ;;
esac
