#!/usr/bin/env bash
# tests/multihost/harness_test.sh DTRAIN_HOSTS: the test-host harness itself.
#  - two sets made at once get different ids, subnets, namespaces, hostnames;
#  - each host has its name, its address, no route out; mpirun reaches all;
#  - the machine's own namespace gains no link while sets exist;
#  - shape puts a tbf on both ends of every host's link, shape off removes it,
#    a bad rate is refused;
#  - `with` passes the command's status on and tears down after success,
#    failure, SIGTERM and SIGINT; a `with` killed by SIGKILL leaves its set,
#    with a process in it, which gc then removes;
#  - at the end nothing of any set is left (namespaces, /etc/netns entries,
#    state), the root namespace's links are as before.
# Uses a private state directory, so that sets of tests running beside it are
# neither seen nor touched. Exit 77 (with the reason) where no hosts can be
# made.
set -uo pipefail
H=$1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rc=0
"$H" check || rc=$?
if [[ $rc != 0 ]]; then
    [[ $rc == 77 && ${DTRAIN_HOSTS_REQUIRE:-0} == 1 ]] && exit 1
    exit "$rc"
fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mh_harness.XXXXXX")
export DTRAIN_HOSTS_STATE=$TMP/state
unset DTRAIN_HOSTS
FAILED=0 PASSED=0
ok() { PASSED=$((PASSED + 1)); }
fail() { FAILED=$((FAILED + 1)); echo "harness_test: FAIL: $*"; }
check() { # check DESCRIPTION CMD...
    local what=$1
    shift
    if "$@"; then ok; else fail "$what"; fi
}
cleanup() { "$H" down --all > /dev/null 2>&1; rm -rf "$TMP"; }
trap cleanup EXIT

links_before=$(ip -o link | awk -F': ' '{ print $2 }' | sort)
ns_of() { ip netns list | awk -v p="dtrain-$1-" 'index($1, p) == 1 { print $1 }' | sort; }

check "help names the commands" sh -c "'$H' help | grep -q 'up N' && '$H' help | grep -q 'shape RATE'"

# ---- two sets at once ------------------------------------------------------------
"$H" up 3 > "$TMP/a" 2> "$TMP/a.err" &
pa=$!
"$H" up 2 --slots 3 > "$TMP/b" 2> "$TMP/b.err" &
pb=$!
wait $pa || fail "up 3: $(cat "$TMP/a.err")"
wait $pb || fail "up 2: $(cat "$TMP/b.err")"
A=$(cat "$TMP/a") B=$(cat "$TMP/b")
echo "harness_test: sets $A (3 hosts) and $B (2 hosts)"
check "ids are 6 hex digits" test "$(printf '%s\n%s\n' "$A" "$B" | grep -cE '^[0-9a-f]{6}$')" = 2
check "ids differ" test "$A" != "$B"
check "set $A has 3 host namespaces and a bridge" test "$(ns_of "$A" | wc -l)" = 4
check "set $B has 2 host namespaces and a bridge" test "$(ns_of "$B" | wc -l)" = 3
"$H" --id "$A" hosts > "$TMP/ha"
"$H" --id "$B" hosts > "$TMP/hb"
cat "$TMP/ha" "$TMP/hb"
netA=$(awk 'NR == 1 { sub(/\.[0-9]+$/, "", $3); print $3 }' "$TMP/ha")
netB=$(awk 'NR == 1 { sub(/\.[0-9]+$/, "", $3); print $3 }' "$TMP/hb")
check "subnets differ ($netA, $netB)" test "$netA" != "$netB"
check "hostnames unique over both sets" test "$(cat "$TMP/ha" "$TMP/hb" | awk '{ print $2 }' | sort -u | wc -l)" = 5
check "addresses unique over both sets" test "$(cat "$TMP/ha" "$TMP/hb" | awk '{ print $3 }' | sort -u | wc -l)" = 5
check "without --id, several sets are refused" sh -c "! '$H' hosts 2> /dev/null"
check "the machine's namespace has no new link" test "$(ip -o link | awk -F': ' '{ print $2 }' | sort)" = "$links_before"
check "hostfile of $B has 3 slots per host" grep -q "slots=3" "$DTRAIN_HOSTS_STATE/$B/hostfile"

while read -r i name addr ns; do
    got=$("$H" --id "$A" exec "$i" hostname)
    check "host $i of $A is named $name (got $got)" test "$got" = "$name"
    check "host $i has $addr on eth0" sh -c "ip -n '$ns' -o addr show dev eth0 | grep -q 'inet $addr/24'"
    check "host $i has no default route" sh -c "! ip -n '$ns' route | grep -q default"
    check "host $i resolves the set's names" sh -c \
        "'$H' --id '$A' exec '$i' getent hosts '$(awk 'NR == 2 { print $2 }' "$TMP/ha")' | grep -q '$netA.2'"
done < "$TMP/ha"

# mpirun on host 1 reaches every host of the set (one rank per host)
out=$(timeout -k 5 120 "$H" --id "$A" run -- -np 3 --map-by node hostname 2>&1 | sort)
check "mpirun across the 3 hosts of $A (got: $out)" test "$out" = "$(awk '{ print $2 }' "$TMP/ha" | sort)"
# DTRAIN_* variables reach the remote hosts' ranks; other variables only if listed
out=$(DTRAIN_FOO=7 MH_BAR=8 DTRAIN_HOSTS_EXPORT=MH_BAR timeout -k 5 120 "$H" --id "$A" run -- -np 3 --map-by node \
    sh -c 'echo "$(hostname) ${DTRAIN_FOO:-none} ${MH_BAR:-none} ${MH_BAZ:-none}"' 2>&1)
echo "$out"
check "DTRAIN_* and DTRAIN_HOSTS_EXPORT names reach every host" test "$(echo "$out" | grep -c ' 7 8 none$')" = 3

# ---- shaping --------------------------------------------------------------------
"$H" --id "$B" shape 1gbit || fail "shape 1gbit"
nshaped=0
while read -r i name addr ns; do
    ip netns exec "$ns" tc qdisc show dev eth0 | grep -q 'tbf.*rate 1Gbit' && nshaped=$((nshaped + 1))
    ip netns exec "dtrain-$B-br" tc qdisc show dev "h$i" | grep -q 'tbf.*rate 1Gbit' && nshaped=$((nshaped + 1))
done < "$TMP/hb"
check "tbf at 1Gbit on both ends of both links of $B ($nshaped of 4)" test "$nshaped" = 4
check "status shows the rate" sh -c "'$H' --id '$B' status | grep -q 'links 1gbit'"
check "a bad rate is refused" sh -c "! '$H' --id '$B' shape 10gbps 2> /dev/null"
"$H" --id "$B" shape off || fail "shape off"
check "shape off removes every tbf" sh -c "! { for n in \$(ip netns list | awk '/^dtrain-$B-/ { print \$1 }'); do ip netns exec \$n tc qdisc show; done | grep -q tbf; }"

"$H" --id "$A" down || fail "down $A"
"$H" --id "$B" down || fail "down $B"
check "down removed the namespaces" test -z "$(ns_of "$A")$(ns_of "$B")"
check "down removed /etc/netns entries" test -z "$(ls /etc/netns 2> /dev/null | grep -E "dtrain-($A|$B)-")"
check "down removed the state" test ! -e "$DTRAIN_HOSTS_STATE/$A" -a ! -e "$DTRAIN_HOSTS_STATE/$B"

# ---- with: status passed on, teardown on exit, error, signals ------------------------
sets_now() { ls "$DTRAIN_HOSTS_STATE" 2> /dev/null | grep -E '^[0-9a-f]{6}$'; }
rc=0
"$H" with 2 -- sh -c 'echo "$DTRAIN_HOSTS" > "$0"; exit 3' "$TMP/with_id" || rc=$?
id=$(cat "$TMP/with_id" 2> /dev/null)
check "with passes the command's status on (got $rc)" test "$rc" = 3
check "with ran the command in set '$id' and tore it down" test -n "$id" -a -z "$(ns_of "$id")" -a ! -e "$DTRAIN_HOSTS_STATE/$id"
# job control: background commands then keep SIGINT (as typed at a terminal)
set -m
for sig in TERM INT; do
    "$H" with 2 -- sleep 60 &
    pw=$!
    for t in $(seq 1 100); do [[ -n $(sets_now) ]] && break; sleep 0.1; done
    id=$(sets_now)
    sleep 0.3
    t0=$(date +%s)
    kill -"$sig" $pw
    rc=0
    wait $pw || rc=$?
    t1=$(date +%s)
    check "with ends on SIG$sig (status $rc, $((t1 - t0)) s)" test $((t1 - t0)) -le 10 -a "$rc" -ne 0
    check "with tore down set $id on SIG$sig" test -n "$id" -a -z "$(ns_of "$id")" -a ! -e "$DTRAIN_HOSTS_STATE/$id"
done

# SIGKILL: nothing can clean up at once; the set (with a process running in
# host 2) is removed by the next gc, which kills that process. The process is
# the `sleep` (the set's own set-up also runs short commands in host 2, which
# are gone by the next look: waiting for any process there once read none);
# waits of up to 30 s, for a loaded machine.
"$H" with 2 -- "$H" exec 2 sleep 120 &
pw=$!
for t in $(seq 1 300); do [[ -n $(sets_now) ]] && break; sleep 0.1; done
id=$(sets_now)
sleeper() {
    local p
    for p in $(ip netns pids "dtrain-$id-2" 2> /dev/null); do
        [[ $(cat "/proc/$p/comm" 2> /dev/null) == sleep ]] && echo "$p"
    done
}
inner=
for t in $(seq 1 300); do inner=$(sleeper); [[ -n $inner ]] && break; sleep 0.1; done
echo "harness_test: set $id, process in host 2: $inner"
kill -KILL $pw
wait $pw 2> /dev/null
check "after SIGKILL the set $id is still there" test -n "$(ns_of "$id")"
check "and a process runs in its host 2 ($inner)" test -n "$inner"
# the gc an `up` runs first (a teardown inside `up` once overwrote its host
# count: the new set then had no hosts)
id3=$("$H" up 3)
check "up 3 after the gc of a stale set made 3 hosts" test "$(DTRAIN_HOSTS=$id3 "$H" hosts | wc -l)" = 3
"$H" --id "$id3" down
"$H" gc
check "gc removed the set of the killed with" test -z "$(ns_of "$id")" -a ! -e "$DTRAIN_HOSTS_STATE/$id"
alive() { [[ -e /proc/$1 ]] && ! grep -q '^State:.*Z' "/proc/$1/status" 2> /dev/null; } # zombies are dead
gone() { [[ -n $1 ]] && ! alive "$1"; }
check "gc killed the process in its host ($inner)" gone "$inner"

# ---- nothing left --------------------------------------------------------------------
check "no set state left" test -z "$(sets_now)"
check "the machine's links are as before" test "$(ip -o link | awk -F': ' '{ print $2 }' | sort)" = "$links_before"
for id in $A $B; do
    check "no namespace of $id left" test -z "$(ns_of "$id")"
done
echo "harness_test: $PASSED passed, $FAILED failed"
[[ $FAILED == 0 ]]
