/* src/transport/mpi/wire_mpi.c - the MPI transport's compressed allreduce and
 * reduce_scatter (coll.h, dt_coll_opts.wire): 16-bit floats for what travels
 * in messages between processes, f32 for what a shared-memory window
 * reduces. In order:
 *   - f32 on a group on one host whose call takes the window: exact, as the
 *     plain call (nothing travels in messages);
 *   - f32 on a group that takes the two-level path: the leg between hosts
 *     compressed (hier_mpi.c);
 *   - otherwise ("flat"): the whole exchange compressed, by tree_mpi.c over
 *     every member (f16/bf16 data widened to f32 first and rounded back to
 *     its type once at the end).
 * Calls run inside the engine, so the staging buffer is never used twice at
 * once. */
#include <stdlib.h>
#include <string.h>
#include "transport/mpi/tree_internal.h"
#include "transport/reduce_kernels.h"
#include "core/error.h"

static float *g_work; /* the flat path's f32 working copy, grow-only */
static size_t g_work_cap;

void dt_mpi_wire_release(void) {
    free(g_work);
    g_work = NULL;
    g_work_cap = 0;
}

static float *work(size_t n) {
    if (n * sizeof(float) + 1 > g_work_cap) {
        float *p = realloc(g_work, n * sizeof(float) + 1);
        if (!p) return NULL;
        g_work = p;
        g_work_cap = n * sizeof(float) + 1;
    }
    return g_work;
}

static void to_f32(float *dst, const void *src, size_t n, dt_dtype dt) {
    const uint16_t *h = src;
    if (dt == DT_F32) memcpy(dst, src, n * sizeof(float));
    else if (dt == DT_BF16) dt_wire_unpack(dst, h, n, DT_WIRE_BF16); /* widening is exact */
    else dt_wire_unpack(dst, h, n, DT_WIRE_F16);
}

static void from_f32(void *dst, const float *src, size_t n, dt_dtype dt) {
    if (dt == DT_F32) memcpy(dst, src, n * sizeof(float));
    else dt_wire_pack(dst, src, n, dt == DT_BF16 ? DT_WIRE_BF16 : DT_WIRE_F16);
}

/* The whole exchange compressed: allreduce (rs == 0: count elements) or
 * reduce_scatter (rs: count per member) over c's members. */
static int flat(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op, int wire, int rs) {
    int p = c->info.size, me = c->info.rank, rc;
    size_t total = rs ? count * (size_t)p : count, es = dt_dtype_size(dt);
    float *w = work(total);
    if (!w) return DT_ERR(DT_ERR_NOMEM, "out of memory for a %zu-element working buffer", total);
    to_f32(w, send, total, dt);
    dt_tree_blk stack[64], *blk = p <= 64 ? stack : malloc(sizeof *blk * (size_t)p);
    if (!blk) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    for (int b = 0; b < p; b++) {
        size_t lo = rs ? count * (size_t)b : total * (size_t)b / (size_t)p;
        size_t hi = rs ? lo + count : total * (size_t)(b + 1) / (size_t)p;
        blk[b] = (dt_tree_blk){(char *)(w + lo), hi - lo};
    }
    rc = dt_mpi_tree(((mpi_impl *)c->impl)->comm, p, me, blk, DT_F32, op, wire, rs ? DT_TREE_RS : DT_TREE_AR);
    if (blk != stack) free(blk);
    if (rc) return rc;
    float *res = rs ? w + count * (size_t)me : w;
    if (op == DT_AVG) dt_reduce_divide(res, count, DT_F32, p);
    from_f32(recv, res, count, dt);
    (void)es;
    dt_path_count[DT_PATH_WIRE_FLAT]++;
    return DT_OK;
}

int dt_mpi_allreduce_wire(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op, int wire) {
    if (wire == DT_WIRE_NATIVE) return c->ops->allreduce(c, send, recv, count, dt, op);
    if (count == 0) return DT_OK;
    if (c->info.size == 1) return c->ops->allreduce(c, send, recv, count, dt, op);
    if (dt == DT_F32) {
        dt_span one = {send, recv, count};
        int rc = dt_mpi_shm_allreduce(c, &one, 1, count, dt, op);
        if (rc != DT_DECLINED) return rc;
        rc = dt_mpi_hier_allreduce(c, send, recv, count, dt, op, wire);
        if (rc != DT_DECLINED) return rc;
    }
    return flat(c, send, recv, count, dt, op, wire, 0);
}

int dt_mpi_reduce_scatter_wire(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op,
                               int wire) {
    if (wire == DT_WIRE_NATIVE) return c->ops->reduce_scatter(c, send, recv, count, dt, op);
    if (count == 0) return DT_OK;
    if (c->info.size == 1) return c->ops->reduce_scatter(c, send, recv, count, dt, op);
    if (dt == DT_F32) {
        int rc = dt_mpi_shm_reduce_scatter(c, send, recv, count, dt, op);
        if (rc != DT_DECLINED) return rc;
        rc = dt_mpi_hier_reduce_scatter(c, send, recv, count, dt, op, wire);
        if (rc != DT_DECLINED) return rc;
    }
    return flat(c, send, recv, count, dt, op, wire, 1);
}
