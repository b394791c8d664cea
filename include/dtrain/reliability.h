/* dtrain/reliability.h - collective mismatch detection, timeouts, stalls and
 * dead ranks. Included by dtrain/coll.h (and so by dtrain/dtrain.h).
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
 *    communicators with the same members share one check channel.
 *    Communicators with different members never meet, so a rank that calls a
 *    collective on a communicator its peers are not using ends as a stall (2.).
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
 *    A point-to-point call facing a collective is not detected as a mismatch
 *    (they travel on different channels): it ends as a stall.
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
 *      dtrain:   not arrived: rank 3 (pid 4242): not in a dtrain call for
 *        3.0 s; its last call was broadcast #60 on world
 *      dtrain: ranks that have not arrived skipped this call, are stuck
 *        elsewhere or died; aborting the job (exit code 75)
 *
 *    (printed in one piece; wrapped here). A rank that has not arrived is
 *    described as "waiting in <call> for N s" (another call), "not in a dtrain
 *    call for N s; its last call was ...", "in dt_finalize", "exited without
 *    calling dt_finalize" or "dead (its process is gone)"; if every rank has
 *    arrived, the report says the transport itself is stuck. The first rank of
 *    a host to notice prints the report; other stalled ranks print one line
 *    pointing at it. Ranks of one host publish their state in a private POSIX
 *    shared-memory segment (mode 0600, unlinked as soon as every local rank
 *    has mapped it, so nothing is left in /dev/shm even after a crash); ranks
 *    on other hosts are listed as "on other hosts (state not visible from
 *    here)". Then the watchdog ends the job, exit code DT_ABORT_EXIT_CODE: the
 *    only place where the library ends the process itself. Under MPI this is
 *    MPI_Abort, which ends every rank on every host (the watchdog never calls
 *    MPI otherwise). Under the tcp bootstrap (torchrun, srun without MPI) the
 *    rank tells rank 0 (rank 0: every rank) and exits; ranks inside a
 *    bootstrap exchange fail naming it, the others are ended by their
 *    launcher (torchrun ends every worker when one fails; srun needs
 *    --kill-on-bad-exit=1) or by their own watchdog.
 *
 * 3. Dead ranks.
 *    The watchdog also watches the other processes of its host (a pidfd per
 *    process, so it wakes the moment one ends): when one ends without
 *    dt_finalize (SIGKILL, crash, exit()), every rank of the host prints one
 *    line naming the lost rank and the job is aborted at once:
 *
 *      dtrain: rank 0: lost rank 1 (pid 4242, host vm): the process died
 *        (killed by a signal or crashed) before dt_finalize; this rank was
 *        waiting in allreduce(f32, count 16384, avg) #61 on world for 0.0 s.
 *        Aborting the job (exit code 75)
 *
 *    ("the process exited without calling dt_finalize" after an exit()). A
 *    rank lost on another host is caught by its peers' timeout and appears in
 *    their stall report. Under Open MPI, mpirun also ends the job itself
 *    ("mpirun noticed that process rank 1 with PID ... exited on signal 9");
 *    either way every rank exits non-zero: within milliseconds on one host,
 *    within the timeout across hosts.
 *
 * 4. NCCL (device memory). The watchdog also polls ncclCommGetAsyncError of
 *    every NCCL communicator at each wake-up (at most every 250 ms): an
 *    asynchronous error (a peer lost, a network failure) prints
 *
 *      dtrain: rank 1 (host vm): NCCL reported an asynchronous error on
 *        communicator world: remote process exited or there was a network
 *        error (...). Aborting the job (exit code 75)
 *
 *    Before any abort of the job (that one, a stall, a lost rank) it calls
 *    ncclCommAbort on every NCCL communicator, so work in flight on the GPU
 *    stops. Blocking device calls (and dt_work_wait on device work) are
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
