/* src/watchdog/watchdog.h - internal: the publication of each process's current
 * blocking operation, and the watchdog thread that turns stalls and dead
 * ranks into a report and a job abort (dtrain/reliability.h describes the
 * behaviour). Operations are described by comm/op_kind.h, communicators
 * named by comm/registry.h. */
#ifndef DT_WATCHDOG_WATCHDOG_H
#define DT_WATCHDOG_WATCHDOG_H

#include <stddef.h>
#include <stdint.h>

/* ---- publication (cheap; called around every transport call) ---- */
/* kind: a dt_coll_kind or DT_OP_* (op_kind.h). */
void dt_wd_op_begin(uint32_t cid, int kind, uint64_t seq, int dtype, uint64_t count, int root_world,
                    int op, uint32_t nlist);
void dt_wd_op_end(void);
/* The current operation's phase: point-to-point calls say 2 once the header
 * exchange with the peer is done (the watchdog then knows the peer arrived). */
void dt_wd_op_phase(int phase);
/* A new communicator: this rank has entered none of its calls yet (its
 * progress entry; every rank creates every communicator). */
void dt_wd_comm_created(uint32_t cid);

/* ---- the watchdog (jobs of more than one process) ---- */
/* Collective over the open bootstrap's job: a shared segment for the ranks of
 * each host, every rank's host name and pid, the side channel between hosts
 * (jobs across hosts), then the threads. Failures to set up the segment or
 * the side channel only reduce what reports show. */
int dt_wd_start(void);
/* dt_finalize: mark this rank as finalizing (peers then take its exit as
 * normal; a rank still waiting for one of its calls is told it left) /
 * finalized, and stop the threads. */
void dt_wd_finalizing(void);
void dt_wd_stop(void);

/* A device transport's hooks (transport.h, dt_dev_transport.poll/abort_all;
 * NULL: none): the thread calls poll on every wake-up and ends the job with
 * its message when it reports an error, and calls abort before any abort of
 * the job. Set by dt_init, cleared by dt_finalize. */
typedef int (*dt_wd_dev_poll_fn)(char *msg, size_t cap);
typedef void (*dt_wd_dev_abort_fn)(void);
void dt_wd_set_device_hooks(dt_wd_dev_poll_fn poll_fn, dt_wd_dev_abort_fn abort_fn);

/* Timeout in seconds (0: none); settable at any time. */
void dt_wd_set_timeout(double seconds);
double dt_wd_timeout(void);

#endif
