/* src/transport/mpi/mpi_internal.h - internal: state shared by the files of
 * the MPI transport (backend_mpi.c: data movement and the transport's entry;
 * check_mpi.c: fingerprint checks; shm_mpi.c, shm_coll.c: the shared-memory
 * window of a group on one host and the collectives through it; hier_mpi.c:
 * two-level collectives for groups spanning hosts; tree_mpi.c: block
 * collectives over point-to-point messages, the 16-bit wire formats;
 * wire_mpi.c: the compressed allreduce / reduce_scatter / reduce). Nothing outside
 * transport/mpi/ includes it. */
#ifndef DT_MPI_INTERNAL_H
#define DT_MPI_INTERNAL_H

#include <mpi.h>
#include <stdio.h>
#include "core/error.h"
#include "transport/transport.h"

/* The check channel of a set of members: a duplicate of the first MPI
 * communicator created with those members, shared (refcounted) by every
 * dtrain communicator with the same members. Fingerprint headers (and small
 * allreduces with their header) travel on it; the data of other calls on the
 * communicator's own MPI communicator. */
typedef struct mpi_check {
    MPI_Comm comm;
    int refs;
} mpi_check;

/* Shared-memory window of an intra-node communicator (shm_mpi.c), shared
 * (refcounted) like the check channel by communicators with the same members. */
typedef struct mpi_shm mpi_shm;
/* The two-level structure of a communicator spanning hosts (hier_mpi.c: its
 * hosts' windows and the communicators between them), shared the same way. */
typedef struct mpi_hier mpi_hier;

typedef struct mpi_impl {
    MPI_Comm comm;
    mpi_check *chk;
    mpi_shm *shm;   /* NULL: not intra-node, size 1, or switched off */
    mpi_hier *hier; /* NULL: on one host, two-level off, or a shape that does not take it */
} mpi_impl;

static inline MPI_Comm dt_mpi_comm(const dt_comm *c) { return ((const mpi_impl *)c->impl)->comm; }

extern const dt_backend_ops dt_backend_mpi;

/* Turns an MPI error code into DT_ERR_BACKEND with the MPI message (every
 * file of the transport reports MPI's failures so: here, below them all). */
static inline int dt_mpi_fail(int rc, const char *call) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", rc);
    return dt_error(DT_ERR_BACKEND, call, "MPI error: %s", msg);
}
#define DT_MPI_TRY(call, name) do { int mrc_ = (call); if (mrc_ != MPI_SUCCESS) return dt_mpi_fail(mrc_, name); } while (0)

/* check_mpi.c: backend ops and cleanup. */
int dt_mpi_check(dt_comm *c, dt_fp_hdr *hdr);
int dt_mpi_allreduce_checked(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt,
                             dt_op op, dt_fp_hdr *hdr);
int dt_mpi_gather_views(dt_comm *c, const dt_fp_hdr *mine, dt_fp_hdr *all);
int dt_mpi_p2p_check(dt_comm *c, int peer, const dt_fp_hdr *mine, dt_fp_hdr *theirs);
void dt_mpi_check_release(void);

/* shm_mpi.c: the shared-memory allreduce of intra-node communicators.
 * attach: collective over c's members (all take the same branch): share the
 * window of `same` (the state of a communicator with c's members; NULL:
 * none), or create one when every member is on this host, the group has more
 * than one rank and the feature is on. detach: drop the reference (the last
 * one frees the window; collective). */
int dt_mpi_shm_attach(dt_comm *c, const mpi_impl *same);
void dt_mpi_shm_detach(mpi_impl *impl, int finalized);
/* allreduce_spans op: DT_DECLINED unless c has a window, (dt, op) reduce
 * natively, the call is at least dt_shm_min() bytes, and either it fits
 * in one chunk or the spans are all in place or their outputs do not overlap
 * their inputs. */
int dt_mpi_shm_allreduce(dt_comm *c, const dt_span *spans, int n, size_t total, dt_dtype dt, dt_op op);
/* The other collectives through the window (shm_mpi.c, shm_coll.c), with
 * the transport op's arguments; each DT_DECLINED unless c has a window and
 * the call moves at least dt_shm_min() bytes (reduce and reduce_scatter:
 * and (dt, op) reduce natively; the reduce-scatter's input, the allgather's
 * output, the reduce's and broadcast's buffer). The reductions use the
 * allreduce's association: bit-identical results. */
int dt_mpi_shm_reduce(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op, int root);
int dt_mpi_shm_reduce_scatter(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op);
int dt_mpi_shm_allgather(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt);
int dt_mpi_shm_broadcast(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, int root);
/* hier_mpi.c: the two-level collectives of communicators spanning hosts.
 * attach: collective over c's members (all take the same branch): share the
 * structure of `same` (as for dt_mpi_shm_attach), or build one when the group
 * spans hosts and
 * DTRAIN_TWO_LEVEL allows (auto: some host has several members); detach:
 * drop the reference. The collectives return DT_DECLINED (the same answer
 * on every member) unless c has the structure, the call is at least
 * dt_two_level_min() bytes (any size when forced on), (dt, op) reduce
 * natively, and a wire other than native comes with f32 data. */
int dt_mpi_hier_attach(dt_comm *c, const mpi_impl *same);
void dt_mpi_hier_detach(mpi_impl *impl, int finalized);
int dt_mpi_hier_allreduce(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op, int wire);
int dt_mpi_hier_reduce_scatter(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op,
                               int wire);
int dt_mpi_hier_allgather(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt);
/* wire_mpi.c: the allreduce_wire / reduce_scatter_wire / reduce_wire ops;
 * release: the working buffers (transport finalize). */
int dt_mpi_allreduce_wire(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op, int wire);
int dt_mpi_reduce_scatter_wire(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op,
                               int wire);
int dt_mpi_reduce_wire(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op, int root,
                       int wire);
void dt_mpi_wire_release(void);
void dt_mpi_tree_release(void);

/* alloc_shared / free_shared ops: a window of `bytes` per member whose
 * in-place allreduces skip the staging buffers; DT_DECLINED when c has no
 * window or some member lacks room in /dev/shm (agreed). free marks the
 * region unused (its window goes with c's); DT_DECLINED for other pointers. */
int dt_mpi_shm_alloc(dt_comm *c, size_t bytes, void **ptr);
int dt_mpi_shm_free(dt_comm *c, void *ptr);
/* The fingerprint check of a communicator with a window: every member
 * publishes its header there, one barrier, every member compares them all
 * (the same verdict everywhere). No MPI call: waiting yields the processor. */
int dt_mpi_shm_check(dt_comm *c, dt_fp_hdr *hdr);
/* allreduce_checked on a communicator with a window. Up to 64 KiB: each
 * member publishes header and data, one barrier, and if every header matches
 * each member reduces every member's data itself (the same tree, so the same
 * bits everywhere). Larger calls: dt_mpi_shm_check, then the transport. */
int dt_mpi_shm_allreduce_checked(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op,
                                 dt_fp_hdr *hdr);

#endif
