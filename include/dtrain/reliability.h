/* dtrain/reliability.h - collective mismatch detection, timeouts, stalls,
 * dead and departed ranks. Included by dtrain/coll.h (and so by
 * dtrain/dtrain.h).
 *
 * 1. Collective fingerprints (always on unless DTRAIN_CHECK_COLLECTIVES=0).
 *    Every collective carries a fingerprint: the communicator's sequence number
 *    (1 for its first collective; calls rejected by argument validation and
 *    mismatched calls do not count), the operation, dtype, element count,
 *    root, reduction op, list layout (dtype and count of each tensor of a list
 *    collective) and the communicator (its rank_list and group). The ranks of
 *    the group compare fingerprints BEFORE any data moves. If any two differ
 *    (another op, dtype, count, root or communicator, or collectives issued in
 *    another order), the call returns DT_ERR_MISMATCH on EVERY rank of the
 *    group, receive buffers untouched, and dt_last_error() names the sequence
 *    number, this rank's call, every rank's call (identical calls grouped)
 *    and the ranks that differ from the most common call (ties: the call of
 *    the lowest rank). E.g. on 4 ranks where rank 3 passed another count:
 *
 *      dt_allreduce: collective mismatch at sequence number 5 on communicator
 *      world: this rank (world rank 0) called allreduce(f32, count 1024, sum)
 *      #5 on world; ranks that differ from the most common call: 3; calls:
 *      ranks 0,1,2: allreduce(f32, count 1024, sum) #5 on world | rank 3:
 *      allreduce(f32, count 2048, sum) #5 on world
 *
 *    The message is the same on every rank except for "this rank (...) called
 *    ...". A mismatched call does not count, so afterwards every rank's
 *    sequence number is where it was before, and the communicator is usable.
 *    The check also catches the same collective issued on two communicators
 *    with the same members (e.g. world and rank_list [[0,1]] on 2 ranks):
 *    communicators with the same members share one check channel. Creating
 *    a sub-communicator (dt_comm_from_rank_list*, also implicitly from
 *    Python's rank_list= arguments) and releasing one (dt_comm_release) are
 *    checked operations on the world: they take its next sequence number, so
 *    a rank that calls a world collective where the others create one (or
 *    the reverse) gets DT_ERR_MISMATCH on every rank ("rank 0: sub-communicator
 *    creation #61 on world | rank 1: allreduce(...) #61 on world").
 *    Communicators with different members never meet in a check; when their
 *    calls wait for each other in a circle, the watchdog sees it (3.).
 *
 *    Point to point: dt_send/dt_recv swap a 64-byte header with the peer
 *    before the data (per-peer, per-direction sequence numbers, dtype, count),
 *    so a count or dtype mismatch, or two ranks both sending (or both
 *    receiving) to each other, returns DT_ERR_MISMATCH on both sides instead
 *    of truncating or deadlocking, e.g.
 *
 *      dt_send: point-to-point mismatch on communicator world: this rank
 *      (world rank 0) called send(f32, count 8, to rank 1) #1 on world, but
 *      rank 1 called recv(f32, count 16, from rank 0) #1 on world
 *
 *    A point-to-point call facing a collective travels on another channel: the
 *    watchdog catches it (3.).
 *
 *    Device memory (coll.h, "Device memory"): the fingerprint also says the
 *    call is on device memory ("... on device memory" in the message), so a
 *    rank on host memory facing ranks on device memory is a mismatch where
 *    both meet on the same channel (jobs with MPI). Over NCCL the headers are
 *    compared on the host before anything is enqueued: on the host
 *    transport's channel under MPI, else over the bootstrap for communicators
 *    of the whole world, else over a second NCCL communicator of the same
 *    members (a small allgather, or a swap for point to point, and a wait).
 *
 *    How, and what it costs: the ranks exchange 64-byte headers by recursive
 *    doubling (log2(size) rounds of point-to-point messages on a channel of
 *    their own) and every rank combines what it receives, so all reach the
 *    same verdict. Allreduces of up to 64 KiB (f32, f64, i8, u8, i32, i64,
 *    every op; not f16/bf16, not avg on i8/u8/i32) carry the header in the
 *    same messages as the data and are reduced on the way: no extra message,
 *    no extra copy of the data. Every other call adds one header exchange
 *    (about one small-message latency, ~1-2 us on one host) before its usual
 *    transport call; barrier needs nothing more (the exchange is the barrier).
 *    When all the ranks of a communicator share one host (and the shared-
 *    memory allreduce is on, DTRAIN_SHM_ALLREDUCE), the exchange goes through
 *    shared memory instead: each rank writes its header there, one barrier,
 *    each reads every header (a rank that waits yields its processor). The
 *    inline allreduces up to 64 KiB put their data beside the header and
 *    every rank then reduces all of it itself; larger inline ones (a raised
 *    DTRAIN_CHECK_INLINE_MAX) take the check, then their transport.
 *    DTRAIN_CHECK_COLLECTIVES=0 (also false/no/off) turns the check off. The
 *    ranks agree at dt_init: the check stays on if any rank wants it.
 *    DTRAIN_CHECK_INLINE_MAX=BYTES (advanced) changes the 64 KiB limit (the
 *    smallest value over the ranks is used; 0: every call uses the separate
 *    exchange).
 *
 * 2. Timeouts and stalls (jobs of more than one process).
 *    Every blocking operation (each collective, point-to-point call,
 *    sub-communicator creation, dt_finalize; dt_work_wait and dt_coll_sync
 *    wait on such operations) has a timeout: default 300 s, DTRAIN_TIMEOUT=
 *    SECONDS (or DTRAIN_TIMEOUT_S, the environment form of the config key
 *    timeout_s) read by dt_init, dt_set_timeout() at any time; 0 disables it.
 *    A watchdog thread started by dt_init notices an operation that has not
 *    completed within the timeout and prints a stall report to stderr: the
 *    operation and its sequence number, which ranks of the group have arrived
 *    and which have not, and what each of those is doing:
 *
 *      dtrain: STALL on rank 0 (host vm): allreduce(f32, count 16384, avg) #61
 *        on world has not completed after 3.0 s (timeout 3 s; DTRAIN_TIMEOUT /
 *        dt_set_timeout)
 *      dtrain:   arrived (3 of 4): 0,1,2
 *      dtrain:   not arrived: rank 3 (pid 4242, host n2): not in a dtrain
 *        call for 3.0 s; its last call was broadcast #60 on world
 *      dtrain: ranks that have not arrived skipped this call, are stuck
 *        elsewhere or died; aborting the job (exit code 75)
 *
 *    (printed in one piece; wrapped here). A rank that has not arrived is
 *    described as "waiting in <call> for N s" (another call), "not in a dtrain
 *    call for N s; its last call was ...", "in dt_finalize", "exited without
 *    calling dt_finalize" or "dead (its process is gone)", followed by "; its
 *    process is stopped (/proc state T: SIGSTOP, SIGTSTP or a debugger; ...)"
 *    when it is (also 't': a debugger, 'D': blocked in the kernel). A rank that
 *    has arrived but is stopped is listed as "arrived, but cannot go on: rank
 *    1 (...): its process is stopped (...)"; only when every rank has arrived
 *    and none is stopped does the report say the transport itself is stuck.
 *    The first rank of each host to notice prints the report; other stalled
 *    ranks of that host print one line pointing at it. Ranks of one host
 *    publish their state in a private POSIX shared-memory segment (mode 0600,
 *    unlinked as soon as every local rank has mapped it, so nothing is left
 *    in /dev/shm even after a crash); in jobs across hosts the reporting rank
 *    asks the other hosts for theirs over the watchdogs' side channel (below)
 *    and lists them the same way, so every full report names a stopped or
 *    missing rank and its host, whichever host prints it; ranks of a host
 *    that does not answer within 1.5 s are listed as "on other hosts that did
 *    not answer". Then the watchdog ends the job, exit code
 *    DT_ABORT_EXIT_CODE: the only place where the library ends the process
 *    itself. It first tells the other hosts' ranks (they print "the job ends:
 *    rank R (host H) reported: <its first line>" and end too). Under MPI the
 *    rank then ends its own process with that exit code, without calling MPI
 *    (not MPI_Abort: the application's thread may be inside MPI at that
 *    moment, which MPI_THREAD_SERIALIZED forbids a second thread to join);
 *    mpirun ends the job's other ranks when one exits non-zero before
 *    MPI_Finalize, and where a launcher would not, their own watchdogs see
 *    the rank lost and end them. The watchdog never calls MPI. Under the tcp
 *    bootstrap (torchrun, srun without MPI) the rank tells rank 0 (rank 0:
 *    every rank) and exits; ranks inside a bootstrap exchange fail naming it,
 *    the others are ended by the notice, their launcher or their own
 *    watchdog.
 *
 * 3. Dead ranks, departed ranks, waits in a circle (at once, no timeout).
 *    The watchdog also watches the other processes of its host (a pidfd per
 *    process, so it wakes the moment one ends): when one ends without
 *    dt_finalize (SIGKILL, crash, exit() or a return from main), every rank of
 *    the host prints one line naming the lost rank and what it was doing, the
 *    other hosts are told, and the job is aborted at once:
 *
 *      dtrain: rank 0: lost rank 1 (pid 4242, host vm): the process died
 *        (killed by a signal or crashed) before dt_finalize; it was in
 *        allreduce(f32, count 16384, avg) #61 on world for 0.1 s; this rank
 *        was waiting in allreduce(f32, count 16384, avg) #61 on world for 0.1
 *        s. Aborting the job (exit code 75)
 *
 *    ("the process exited without calling dt_finalize" after an exit()). The
 *    ranks of the other hosts print the same line with "(seen by rank R on
 *    host H)" and end at once too, also when the launcher would not end the
 *    job. In jobs across hosts every rank listens on a TCP port of its own
 *    (the kernel's choice; addresses, port, pid and host name are exchanged
 *    at dt_init through the bootstrap): the watchdogs' side channel, which
 *    carries these notices and the states a stall report asks for. A rank
 *    alone on its host has no host-mate to see it die: the first ranks of the
 *    hosts keep a ring of connections, and one that closes without a goodbye
 *    reports the rank lost ("died or its host went down"). A firewall that
 *    blocks the ports only takes these away: the job runs, losses across hosts
 *    are then seen by the launcher or the timeout.
 *
 *    A rank that LEAVES while others still expect it is reported like a lost
 *    one: a member of the call this rank waits in is in dt_finalize (or has
 *    exited) and never entered that call (every rank publishes, per
 *    communicator, the last call it entered, so this is exact):
 *
 *      dtrain: rank 1 (pid 4242, host vm) left the job: it is in dt_finalize
 *        (its last call on world was #60) while rank 0 (pid 4241, host vm)
 *        waits in allreduce(f32, count 16384, avg) #61 on world, which rank 1
 *        never entered. Aborting the job (exit code 75)
 *
 *    Python's exit hook calls dt_finalize, so an uncaught exception,
 *    sys.exit() or an early dtrain.finalize() on one rank ends up here. Ranks
 *    that reach dt_finalize after every other rank did end normally.
 *
 *    With the fingerprint check on (1.), no rank completes a collective
 *    before every member entered it, so the watchdog also knows whom each
 *    blocked rank waits for; when the waits go round in a circle (a
 *    collective on one communicator facing one on another with other
 *    members, dt_send/dt_recv facing a collective) none can go on, and after
 *    reading the states again in the circle's order it reports them:
 *
 *      dtrain: collective mismatch across communicators (seen by rank 1):
 *        rank 1 (pid 4242, host vm) waits in allreduce(f32, count 16384, avg)
 *        #1 on [[0,1]] group 0 for rank 0; rank 0 (pid 4241, host vm) waits in
 *        allreduce(f32, count 16384, avg) #62 on world for rank 1; none of them
 *        can go on: ... Aborting the job (exit code 75)
 *
 *    A blocked call that no rank waits for in a circle (a rank computing for
 *    a long time) is left to the timeout (2.). Under Open MPI, mpirun may also
 *    end the job itself ("mpirun noticed that process rank 1 with PID ...
 *    exited on signal 9"); either way every rank exits non-zero within
 *    milliseconds to a second or two, on every host.
 *
 * 4. NCCL (device memory). The watchdog also polls ncclCommGetAsyncError of
 *    every NCCL communicator at each wake-up (at most every 250 ms): an
 *    asynchronous error (a peer lost, a network failure) prints
 *
 *      dtrain: rank 1 (host vm): NCCL reported an asynchronous error on
 *        communicator world: remote process exited or there was a network
 *        error (...). Aborting the job (exit code 75)
 *
 *    Before any abort of the job (that one, a stall, a lost or departed
 *    rank, a wait in a circle) it calls ncclCommAbort on every NCCL
 *    communicator, so work in flight on the GPU stops. Blocking device calls (and dt_work_wait on device work) are
 *    watched by the timeout like host calls and get the same stall report.
 */
#ifndef DTRAIN_RELIABILITY_H
#define DTRAIN_RELIABILITY_H

#ifdef __cplusplus
extern "C" {
#endif

/* Exit status of a job ended by the watchdog (stall or dead rank). */
#define DT_ABORT_EXIT_CODE 75

/* Set this process's timeout for blocking operations in seconds (0 disables
 * stall detection). Takes effect at once, also for an operation in flight.
 * DT_ERR_INVALID if seconds is negative or not finite. Callable before
 * dt_init (the value then overrides DTRAIN_TIMEOUT). Every rank should use the
 * same value. */
int dt_set_timeout(double seconds);
/* The current timeout in seconds (0: disabled). */
double dt_get_timeout(void);
/* 1 if collectives are fingerprint-checked in this run, 0 if not (also before
 * dt_init, where it reports what DTRAIN_CHECK_COLLECTIVES asks for). */
int dt_check_collectives_enabled(void);

#ifdef __cplusplus
}
#endif
#endif
