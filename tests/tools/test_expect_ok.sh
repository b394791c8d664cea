#!/bin/sh
# test_expect_ok.sh EXPECT_OK - expect_ok.sh itself: it passes a command that
# exits 0 and prints what is asked, and fails every other case (a non-zero
# status with the right output, as when a second rank fails after rank 0 has
# printed its line; a missing line; a forbidden one); a skip stays a skip.
e=${1:?usage: test_expect_ok.sh EXPECT_OK_SH}
fail=0
t() { # WANT_STATUS ARGS...: expect_ok.sh ARGS exits WANT_STATUS
    want=$1
    shift
    sh "$e" "$@" > /dev/null 2>&1
    rc=$?
    if [ "$rc" -ne "$want" ]; then echo "FAIL: expect_ok.sh $* -> $rc, want $want"; fail=1; fi
}
t 0 -e "finished 60 steps" -- sh -c 'echo "rank 0 finished 60 steps"'
t 1 -e "finished 60 steps" -- sh -c 'echo "rank 0 finished 60 steps"; exit 1'
t 1 -e "finished 60 steps" -- sh -c 'echo "rank 0 finished 59 steps"'
t 1 -n "STALL" -- sh -c 'echo "dtrain: STALL on rank 0"'
t 0 -m "a.*b" -- sh -c 'echo a; echo b'
t 1 -m "b.*a" -- sh -c 'echo a; echo b'
t 77 -e "x" -- sh -c 'echo "SKIPPED: no GPU"; exit 77'
t 1 -e "x" -- sh -c 'echo x; exit 77'
t 2 -q -- true
[ $fail -eq 0 ] && echo "test_expect_ok: OK"
exit $fail
