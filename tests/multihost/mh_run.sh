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
#   hsdp ZERO MODEL TRAINER PYTHON [ckpt] [bytes]
#                                   hybrid sharding: dtrain-train --zero ZERO
#                                   --shard-group host (MODEL mlp or gpt) on 2
#                                   hosts x 2 ranks against shard_group world
#                                   on 1 host x 4 ranks (compare_runs.py);
#                                   ckpt: a checkpoint of either resumed by the
#                                   other (resharded) ends where the other's
#                                   uninterrupted run ends; bytes: the bytes
#                                   crossing hosts (the hosts' eth0) against
#                                   shard_group world on the 2 hosts
#   hsdp-uneven TRAINER             3 ranks on 2 hosts with --shard-group host:
#                                   exit 2 and a message naming the hosts
#   fault MODE RANK FAULT_PROG EXPECT_FAIL
#                                   rank RANK (on host 2) misbehaves (MODE:
#                                   kill, kill-recovery, exit-recovery,
#                                   skipfin, stop, stopin, kill-recovery-2x1,
#                                   mis-p2p):
#                                   every rank ends within the bound, a message
#                                   names RANK and host 2 (below)
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
hsdp)
    zero=$1 model=$2 trainer=$3 py=$4
    shift 4
    steps=20 half=10
    if [[ $model == gpt ]]; then
        corpus=/usr/share/games/fortunes/computers
        [[ -f $corpus ]] || { echo "mh_run: SKIP: $corpus is missing (Debian package fortunes)"; exit 77; }
        flags=(--model gpt --preset gpt-test --data "$corpus" --batch-size 2 --train-limit 400 --test-limit 16
            --sample-length 0 --optimizer sgd --momentum 0.9 --lr 0.05 --clip-grad-norm 1)
    else
        flags=(--model mlp --batch-size 16 --train-limit 2048 --test-limit 256 --optimizer sgd --momentum 0.9
            --lr 0.05 --clip-grad-norm 1)
    fi
    flags+=(--epochs 1 --seed 3 --quiet --zero "$zero" --bucket-size-mb 0.5 --first-bucket-mb 0.1)
    host1=(-H "${NAMES[0]}:4")
    # bytes sent by the hosts' network interfaces (what crosses hosts)
    wire() {
        local ns t=0
        for ns in "${NSS[@]}"; do t=$((t + $(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes))); done
        echo $t
    }
    b0=$(wire)
    mhrun -np 4 "$trainer" "${flags[@]}" --max-steps $steps --shard-group host --json "$TMP/h.json" \
        --save-model "$TMP/h.safetensors"
    b1=$(wire)
    mhrun -np 4 "${host1[@]}" "$trainer" "${flags[@]}" --max-steps $steps --shard-group world \
        --json "$TMP/w.json" --save-model "$TMP/w.safetensors"
    # Tolerance 1e-5: see tests/multihost/CMakeLists.txt.
    "$py" "$HERE/compare_runs.py" "$TMP/h.json" "$TMP/h.safetensors" "$TMP/w.json" "$TMP/w.safetensors" \
        --steps $steps --rtol-loss 1e-5 --rtol-param 1e-5
    for extra in "$@"; do
        case $extra in
        ckpt) # half the steps, a checkpoint, the rest in the other layout
            mhrun -np 4 "$trainer" "${flags[@]}" --max-steps $half --shard-group host --checkpoint-dir "$TMP/ch"
            mhrun -np 4 "${host1[@]}" "$trainer" "${flags[@]}" --max-steps $steps --shard-group world \
                --resume "$TMP/ch" --save-model "$TMP/ch_w.safetensors"
            mhrun -np 4 "${host1[@]}" "$trainer" "${flags[@]}" --max-steps $half --shard-group world \
                --checkpoint-dir "$TMP/cw"
            mhrun -np 4 "$trainer" "${flags[@]}" --max-steps $steps --shard-group host --resume "$TMP/cw" \
                --save-model "$TMP/cw_h.safetensors"
            "$py" "$HERE/compare_runs.py" --models-only "$TMP/ch_w.safetensors" "$TMP/w.safetensors" --rtol-param 1e-5
            "$py" "$HERE/compare_runs.py" --models-only "$TMP/cw_h.safetensors" "$TMP/h.safetensors" --rtol-param 1e-5
            ;;
        bytes) # stage 3 gathers stay on the host: fewer bytes cross than at shard_group world
            b2=$(wire)
            mhrun -np 4 "$trainer" "${flags[@]}" --max-steps $steps --shard-group world --save-model "$TMP/x.safetensors"
            b3=$(wire)
            h=$((b1 - b0)) w=$((b3 - b2))
            echo "mh_run: bytes crossing hosts, $steps steps: shard_group host $h, world $w (ratio $(awk -v h=$h -v w=$w 'BEGIN { printf "%.3f", h / w }'))"
            if ! awk -v h=$h -v w=$w 'BEGIN { exit !(h < 0.8 * w) }'; then
                echo "mh_run: FAIL: shard_group host sent $h bytes across hosts, not < 0.8 x world's $w"
                exit 1
            fi
            ;;
        *) echo "mh_run: hsdp: unknown extra '$extra' (ckpt, bytes)"; exit 2 ;;
        esac
    done
    ;;
hsdp-uneven)
    trainer=$1
    rc=0
    mhrun -np 3 "$trainer" --model mlp --max-steps 1 --train-limit 256 --epochs 1 --quiet --zero 3 \
        --shard-group host > "$TMP/out" 2>&1 || rc=$?
    cat "$TMP/out"
    if [[ $rc != 2 ]] || ! grep -q "same number of ranks on every host: host 0 (of world rank 0) runs 2, host 1 (world ranks 2) runs 1" "$TMP/out"; then
        echo "mh_run: FAIL: 2 + 1 ranks with --shard-group host: exit $rc (want 2 and the message naming the hosts)"
        exit 1
    fi
    echo "mh_run: uneven hosts refused with exit 2"
    ;;
fault)
    what=$1 rank=$2 prog=$3 expect=$4
    h2=${NAMES[1]}
    export FAULT_RANK=$rank DTRAIN_HOSTS_EXPORT="FAULT_RANK ${DTRAIN_HOSTS_EXPORT:-}"
    # "lost rank R (pid P, host H)" printed by a rank of host 1: it learnt of
    # the loss on host 2 through the watchdogs' side channel, not by a timeout
    # (ranks 0 and 1 run on host 1)
    lost_on_h1="dtrain: rank [01]: lost rank $rank \\(pid [0-9]+, host $h2\\)"
    # the watchdog ends a job without calling MPI (boot_mpi.c, mb_abort): no
    # MPI_Abort message in any case
    noabort=(-n "MPI_ABORT was invoked")
    rc=0
    case $what in
    kill) # the lost rank's host-mate reports it (dtrain), or mpirun does
        sh "$expect" 13 "${noabort[@]}" -e "lost rank $rank \\(pid [0-9]+, host $h2\\)|process rank $rank with PID [0-9]+ on node $h2" \
            -- "$H" run -- -np 4 "$prog" kill > "$TMP/out" 2>&1 || rc=$?
        ;;
    kill-recovery) # mpirun told not to end the job (as other launchers may
        # not): the ranks on host 1 learn of it at once and name it, and every
        # rank ends. In this mode mpirun itself waits on after every rank of a
        # 2 x 2 job has exited (Open MPI 4.1), so the job counts as ended when
        # its fault_prog processes have (-p) (the same below)
        DTRAIN_TIMEOUT=30 sh "$expect" 13 "${noabort[@]}" -p fault_prog -e "$lost_on_h1: the process died" -n "STALL" \
            -- "$H" run -- -np 4 --mca orte_enable_recovery 1 "$prog" kill > "$TMP/out" 2>&1 || rc=$?
        ;;
    kill-recovery-2x1) # one rank per host (rank RANK must be 1): no host-mate to see the death,
        # the other host's watchdog learns it from the closed side channel
        DTRAIN_TIMEOUT=30 sh "$expect" 13 "${noabort[@]}" -p fault_prog -e "$lost_on_h1" -n "STALL" \
            -- "$H" run -- -np 2 -H "${NAMES[0]}:1,${NAMES[1]}:1" --mca orte_enable_recovery 1 "$prog" kill \
            > "$TMP/out" 2>&1 || rc=$?
        ;;
    exit-recovery) # exit() without dt_finalize on host 2
        # (a rank slow to exit -- a sanitizer's leak scan -- is seen announcing its exit
        # while alive: host 1 then relays host 2's "left the job" report)
        DTRAIN_TIMEOUT=30 sh "$expect" 13 "${noabort[@]}" -p fault_prog \
            -e "$lost_on_h1: the process exited without calling dt_finalize|dtrain: rank [01] \\(host ${NAMES[0]}\\): the job ends: rank [23] \\(host $h2\\) reported: dtrain: rank $rank \\(pid [0-9]+, host $h2\\) left the job: it exited without calling dt_finalize" \
            -n "STALL" -- "$H" run -- -np 4 --mca orte_enable_recovery 1 "$prog" exit > "$TMP/out" 2>&1 || rc=$?
        ;;
    skipfin) # an early dt_finalize on host 2: the others expect it
        DTRAIN_TIMEOUT=30 sh "$expect" 13 "${noabort[@]}" -e "rank $rank \\(pid [0-9]+, host $h2\\) left the job: it is in dt_finalize" \
            -n "STALL" -- "$H" run -- -np 4 "$prog" skipfin > "$TMP/out" 2>&1 || rc=$?
        ;;
    stop) # alive but silent: every full stall report names it, its host and
        # its state, whichever host printed it
        sh "$expect" 20 "${noabort[@]}" -e "STALL on rank [0-9]+ \\(host " \
            -e "not arrived: rank $rank \\(pid [0-9]+, host $h2\\): .*stopped \\(/proc state T" \
            -- "$H" run -- -np 4 "$prog" stop > "$TMP/out" 2>&1 || rc=$?
        ;;
    stopin) # stopped inside a collective every rank entered: every full
        # report says so, none blames the transport
        sh "$expect" 20 "${noabort[@]}" -e "STALL on rank [0-9]+ \\(host " \
            -e "arrived, but cannot go on: rank $rank \\(pid [0-9]+, host $h2\\): its process is stopped \\(/proc state T" \
            -n "the transport itself is stuck" \
            -- "$H" run -- -np 4 "$prog" stopin > "$TMP/out" 2>&1 || rc=$?
        ;;
    mis-p2p) # rank 0 (host 1) sends to RANK (host 2), which calls a collective:
        # waits in a circle across hosts, seen at once
        DTRAIN_TIMEOUT=30 sh "$expect" 13 "${noabort[@]}" -e "collective mismatch across communicators" \
            -e "rank 0 \\(pid [0-9]+, host ${NAMES[0]}\\) waits in send\\(f32, count 16384, to rank $rank\\) #1 on world for rank $rank" \
            -e "rank $rank \\(pid [0-9]+, host $h2\\) waits in allreduce\\(f32, count 16384, avg\\) #61 on world for rank 0" \
            -n "STALL" -- "$H" run -- -np 4 "$prog" mis_p2p > "$TMP/out" 2>&1 || rc=$?
        ;;
    *) echo "mh_run: fault: kill, kill-recovery, kill-recovery-2x1, exit-recovery, skipfin, stop, stopin or mis-p2p"; exit 2 ;;
    esac
    cat "$TMP/out"
    if [[ $what == stop || $what == stopin ]]; then
        # every full stall report (whichever host wrote it) must list rank
        # RANK as stopped, with its host
        if awk -v h="$h2" -v r="$rank" '
            /^dtrain: STALL on rank [0-9]+ \(host / { if (inrep && !named) bad = 1; inrep = /DTRAIN_TIMEOUT/; named = 0; n += inrep; next }
            /^dtrain: ranks that have not arrived/ { if (inrep && !named) bad = 1; inrep = 0 }
            inrep && index($0, "rank " r " (pid ") && index($0, ", host " h "):") && index($0, "stopped (/proc state T") { named = 1 }
            END { if (inrep && !named) bad = 1; exit !(n > 0 && !bad) }' "$TMP/out"; then
            echo "mh_run: every full stall report names rank $rank on $h2 as stopped"
        else
            echo "mh_run: FAIL: a full stall report does not name rank $rank on $h2 as stopped (or there is none)"
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
