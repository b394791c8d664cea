/* src/comm/watchdog.h - internal: the communicator registry, the publication
 * of each process's current blocking operation, and the watchdog thread that
 * turns stalls and dead ranks into a report and a job abort
 * (dtrain/reliability.h describes the behaviour). */
#ifndef DT_COMM_WATCHDOG_H
#define DT_COMM_WATCHDOG_H

#include <stddef.h>
#include <stdint.h>
#include "comm/comm_internal.h"

/* ---- registry: cid -> name and members (world ranks), for messages ---- */
void dt_reg_add(uint32_t cid, const char *name, const int *members, int n);
/* Name of communicator `cid` ("world", "[[0,1],[2,3]] group 0", "comm#7"). */
const char *dt_reg_name(uint32_t cid, char *buf, size_t cap);
void dt_reg_clear(void);

/* "allreduce(f32, count 1024, sum) #5 on world" (dtype/op DT_FP_NONE when
 * not applicable, root a world rank or -1, nlist and layout (0: not shown)
 * for list collectives). */
const char *dt_op_describe(char *buf, size_t cap, int kind, int dtype, uint64_t count, int op,
                           int root, uint64_t seq, uint32_t cid, uint32_t nlist, uint32_t layout);

/* Operations that are not collectives (dt_coll_kind values are below 64). */
enum { DT_WD_COMM_CREATE = 64, DT_WD_FINALIZE = 65 };

/* ---- publication (cheap; called around every transport call) ---- */
void dt_wd_op_begin(uint32_t cid, int kind, uint64_t seq, int dtype, uint64_t count, int root_world,
                    int op, uint32_t nlist);
void dt_wd_op_end(void);

/* ---- the watchdog (MPI worlds of more than one rank) ---- */
/* Collective over the world: shared segment for the ranks of this host, then
 * the thread. Failures to set up the segment only reduce what reports show. */
int dt_wd_start(dt_comm *world);
/* dt_finalize: mark this rank as finalizing (peers then take its exit as
 * normal) / finalized, and stop the thread. */
void dt_wd_finalizing(void);
void dt_wd_stop(void);

/* Timeout in seconds (0: none); settable at any time. */
void dt_wd_set_timeout(double seconds);
double dt_wd_timeout(void);

#endif
