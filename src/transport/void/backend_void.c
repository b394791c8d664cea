/* src/transport/void/backend_void.c - the transport that moves no data
 * between processes.
 *
 * On a group of one process (standalone, or a rank alone in its rank_list
 * group) every collective reduces to a copy: a reduction over one rank is the
 * value itself, avg divides by 1. Point to point has no peer: the collective
 * layer rejects it before it gets here.
 *
 * It is also the world's transport when the job was started without MPI (the
 * tcp bootstrap: torchrun, srun) and no other transport serves it: the
 * communicators then have their full attributes and rank_list groups
 * (members, local ranks from the bootstrap's hosts), but collectives on a
 * group of more than one process fail with DT_ERR_UNSUPPORTED naming the
 * transport that would move the data. */
#include <stdio.h>
#include <string.h>
#include "bootstrap/bootstrap.h"
#include "core/error.h"
#include "transport/transport.h"

/* A collective on a group of several processes: which transport it needs. */
static int no_data_transport(const dt_comm *c, const char *fn) {
    const dt_boot *b = dt_boot_get();
    const char *boot = b ? b->ops->name : "none";
    if (dt_transport_find("mpi") && strcmp(boot, "mpi") == 0)
        return dt_error(DT_ERR_UNSUPPORTED, fn, "the group has %d processes and its transport, void, moves no data "
                        "between processes (DTRAIN_BACKEND=void under an MPI launcher): unset DTRAIN_BACKEND or set "
                        "it to mpi or auto", c->info.size);
    if (dt_transport_find("mpi"))
        return dt_error(DT_ERR_UNSUPPORTED, fn, "the group has %d processes and its transport, void, moves no data "
                        "between processes (this job was started by the %s bootstrap, without MPI): collectives on "
                        "host memory between processes need the mpi transport (start the job with mpirun)",
                        c->info.size, boot);
    return dt_error(DT_ERR_UNSUPPORTED, fn, "the group has %d processes and its transport, void, moves no data between "
                    "processes (this job was started by the %s bootstrap): collectives on host memory between processes "
                    "need the mpi transport, which this build lacks (configured with DTRAIN_WITH_MPI=OFF or without "
                    "MPI found): rebuild with MPI and start the job with mpirun", c->info.size, boot);
}

static int copy(const dt_comm *c, const char *fn, const void *send, void *recv, size_t count, dt_dtype dt) {
    if (c->info.size > 1) return no_data_transport(c, fn);
    if (send != recv && count) memmove(recv, send, count * dt_dtype_size(dt));
    return DT_OK;
}

static int v_allreduce(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, dt_op op) {
    return copy(c, "dt_allreduce", s, r, n, dt);
}
static int v_allgather(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt) {
    return copy(c, "dt_allgather", s, r, n, dt);
}
static int v_reduce_scatter(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, dt_op op) {
    return copy(c, "dt_reduce_scatter", s, r, n, dt);
}
static int v_reduce(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, dt_op op, int root) {
    return copy(c, "dt_reduce", s, r, n, dt);
}
static int v_broadcast(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, int root) {
    return copy(c, "dt_broadcast", s, r, n, dt);
}
static int v_gather(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, int root) {
    return copy(c, "dt_gather", s, r, n, dt);
}
static int v_scatter(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, int root) {
    return copy(c, "dt_scatter", s, r, n, dt);
}
static int v_all_to_all(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt) {
    return copy(c, "dt_all_to_all", s, r, n, dt);
}
static int v_send(dt_comm *c, const void *b, size_t n, dt_dtype dt, int peer) {
    if (c->info.size > 1) return no_data_transport(c, "dt_send");
    return DT_ERR(DT_ERR_INVALID, "standalone communicator has no peer %d", peer);
}
static int v_recv(dt_comm *c, void *b, size_t n, dt_dtype dt, int peer) {
    if (c->info.size > 1) return no_data_transport(c, "dt_recv");
    return DT_ERR(DT_ERR_INVALID, "standalone communicator has no peer %d", peer);
}
static int v_barrier(dt_comm *c) { return c->info.size > 1 ? no_data_transport(c, "dt_barrier") : DT_OK; }

/* Groups of a world of several processes: nothing to build, the members and
 * attributes are the caller's. */
static int v_split(dt_comm *world, int color, dt_comm *out, dt_comm *same) { return DT_OK; }

const dt_backend_ops dt_backend_void = {
    .name = "void",
    .allreduce = v_allreduce,
    .allgather = v_allgather,
    .reduce_scatter = v_reduce_scatter,
    .reduce = v_reduce,
    .broadcast = v_broadcast,
    .gather = v_gather,
    .scatter = v_scatter,
    .all_to_all = v_all_to_all,
    .send = v_send,
    .recv = v_recv,
    .barrier = v_barrier,
    .split = v_split,
    .max_count = (size_t)-1,
    .destroy = NULL,
};

static int v_probe(void) { return DT_OK; }
static int v_world(dt_comm *w) { return DT_OK; }

/* Asked for by name (DTRAIN_BACKEND=void) it keeps the launcher's bootstrap
 * (.boot NULL): under mpirun -np 2 the world has ranks 0 and 1, never two
 * worlds of one that both think they are rank 0. */
const dt_transport dt_transport_void = {
    .name = "void",
    .ops = &dt_backend_void,
    .boot = NULL,
    .probe = v_probe,
    .world = v_world,
    .finalize = NULL,
};
