/* src/transport/void/backend_void.c - the standalone backend: a group of one process.
 * Every collective reduces to a copy (a reduction over one rank is the value
 * itself; avg divides by 1). Point to point has no peer: the collective layer
 * rejects it before it gets here. */
#include <string.h>
#include "transport/transport.h"
#include "core/error.h"

static int copy(const void *send, void *recv, size_t count, dt_dtype dt) {
    if (send != recv && count) memmove(recv, send, count * dt_dtype_size(dt));
    return DT_OK;
}

static int v_allreduce(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, dt_op op) {
    return copy(s, r, n, dt);
}
static int v_allgather(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt) { return copy(s, r, n, dt); }
static int v_reduce_scatter(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, dt_op op) {
    return copy(s, r, n, dt);
}
static int v_reduce(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, dt_op op, int root) {
    return copy(s, r, n, dt);
}
static int v_rooted(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, int root) {
    return copy(s, r, n, dt);
}
static int v_all_to_all(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt) { return copy(s, r, n, dt); }
static int v_send(dt_comm *c, const void *b, size_t n, dt_dtype dt, int peer) {
    return DT_ERR(DT_ERR_INVALID, "standalone communicator has no peer %d", peer);
}
static int v_recv(dt_comm *c, void *b, size_t n, dt_dtype dt, int peer) {
    return DT_ERR(DT_ERR_INVALID, "standalone communicator has no peer %d", peer);
}
static int v_barrier(dt_comm *c) { return DT_OK; }

const dt_backend_ops dt_backend_void = {
    .name = "void",
    .allreduce = v_allreduce,
    .allgather = v_allgather,
    .reduce_scatter = v_reduce_scatter,
    .reduce = v_reduce,
    .broadcast = v_rooted,
    .gather = v_rooted,
    .scatter = v_rooted,
    .all_to_all = v_all_to_all,
    .send = v_send,
    .recv = v_recv,
    .barrier = v_barrier,
    .split = NULL,
    .max_count = (size_t)-1,
    .destroy = NULL,
};
