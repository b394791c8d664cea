/* src/transport/mpi/wire_mpi.c - the MPI transport's compressed allreduce,
 * reduce_scatter and reduce (coll.h, dt_coll_opts.wire): 16-bit floats for
 * what travels in messages between processes, f32 for what a shared-memory
 * window reduces. In order:
 *   - f32 on a group on one host whose call takes the window: exact, as the
 *     plain call (nothing travels in messages);
 *   - f32 on a group that takes the two-level path (allreduce and
 *     reduce_scatter; a reduce has none): the leg between hosts compressed
 *     (hier_mpi.c);
 *   - otherwise ("flat"): the whole exchange compressed, by tree_mpi.c over
 *     every member (f16/bf16 data widened to f32 first and rounded back to
 *     its type once at the end). A reduce is the allreduce's reduce-scatter
 *     half, then each member's block, rounded to the wire type, sent to the
 *     root: the root gets the bits the flat allreduce gives, from half the
 *     bytes of an f32 gather.
 * Calls run inside the engine, so the staging buffers are never used twice
 * at once. */
#include <stdlib.h>
#include <string.h>
#include "transport/mpi/tree_internal.h"
#include "transport/reduce_kernels.h"
#include "core/error.h"

#define TAG_GATHER 7431 /* the reduce's blocks to the root (the tree uses 7430) */
#define MSG_ELEMS ((size_t)1 << 29) /* wire elements per MPI message (1 GiB) */

static float *g_work; /* the flat path's f32 working copy, grow-only */
static size_t g_work_cap;
static uint16_t *g_blk; /* the reduce's packed block, grow-only */
static size_t g_blk_cap;

void dt_mpi_wire_release(void) {
    free(g_work);
    free(g_blk);
    g_work = NULL;
    g_blk = NULL;
    g_work_cap = g_blk_cap = 0;
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

/* Member b's block of the root's result (already rounded to the wire type)
 * to the root, packed, in messages of at most MSG_ELEMS elements. */
static int gather_blocks(dt_comm *c, const dt_tree_blk *blk, int root, int wire) {
    int p = c->info.size, me = c->info.rank;
    MPI_Comm comm = ((mpi_impl *)c->impl)->comm;
    size_t most = 0;
    for (int b = 0; b < p; b++) most = blk[b].count > most ? blk[b].count : most;
    if (most + 1 > g_blk_cap) {
        uint16_t *q = realloc(g_blk, (most + 1) * sizeof *q);
        if (!q) return DT_ERR(DT_ERR_NOMEM, "out of memory for a %zu-element block", most);
        g_blk = q;
        g_blk_cap = most + 1;
    }
    for (int b = 0; b < p; b++) {
        if (b == root || (me != root && b != me)) continue;
        float *f = (float *)(void *)blk[b].buf;
        size_t n = blk[b].count;
        if (me != root) dt_wire_pack(g_blk, f, n, wire);
        for (size_t o = 0; o < n; o += MSG_ELEMS) {
            int k = (int)(n - o < MSG_ELEMS ? n - o : MSG_ELEMS);
            if (me == root)
                DT_MPI_TRY(MPI_Recv(g_blk + o, k, MPI_UINT16_T, b, TAG_GATHER, comm, MPI_STATUS_IGNORE), "MPI_Recv");
            else
                DT_MPI_TRY(MPI_Send(g_blk + o, k, MPI_UINT16_T, root, TAG_GATHER, comm), "MPI_Send");
        }
        if (me == root) dt_wire_unpack(f, g_blk, n, wire);
    }
    return DT_OK;
}

/* The whole exchange compressed: allreduce (rs == 0, root < 0: count
 * elements), reduce_scatter (rs: count per member) or reduce to group rank
 * root (rs == 0, root >= 0: count elements) over c's members. */
static int flat(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op, int wire, int rs,
                int root) {
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
    rc = dt_mpi_tree(((mpi_impl *)c->impl)->comm, p, me, blk, DT_F32, op, wire, rs || root >= 0 ? DT_TREE_RS : DT_TREE_AR);
    if (!rc && root >= 0) { /* my block, rounded as the allreduce's results are, to the root */
        if (me == root) dt_wire_round((float *)(void *)blk[me].buf, blk[me].count, wire);
        rc = gather_blocks(c, blk, root, wire);
    }
    if (blk != stack) free(blk);
    if (rc) return rc;
    dt_path_count[DT_PATH_WIRE_FLAT]++;
    if (root >= 0 && me != root) return DT_OK;
    float *res = rs ? w + count * (size_t)me : w;
    if (op == DT_AVG) dt_reduce_divide(res, count, DT_F32, p);
    from_f32(recv, res, count, dt);
    (void)es;
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
    return flat(c, send, recv, count, dt, op, wire, 0, -1);
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
    return flat(c, send, recv, count, dt, op, wire, 1, -1);
}

int dt_mpi_reduce_wire(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op, int root,
                       int wire) {
    if (wire == DT_WIRE_NATIVE) return c->ops->reduce(c, send, recv, count, dt, op, root);
    if (count == 0) return DT_OK;
    if (c->info.size == 1) return c->ops->reduce(c, send, recv, count, dt, op, root);
    if (dt == DT_F32) {
        int rc = dt_mpi_shm_reduce(c, send, recv, count, dt, op, root);
        if (rc != DT_DECLINED) return rc;
    }
    return flat(c, send, recv, count, dt, op, wire, 0, root);
}
