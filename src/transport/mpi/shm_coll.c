/* src/transport/mpi/shm_coll.c - reduce-scatter, allgather and broadcast
 * through the shared-memory window of a set of ranks on one host
 * (shm_internal.h), and the two engines they (and the two-level collectives
 * of hier_mpi.c) run on:
 *
 *  reduce_blocks  every member holds the whole input; block b (a range of
 *                 it) is reduced for its owner. Per chunk (the same number
 *                 of elements of every block): A. each member copies the
 *                 chunks of the blocks OTHER members own from its input into
 *                 its buffer; barrier; B. each owner reduces its blocks'
 *                 chunks reading its own input where it lies and the others'
 *                 values from their buffers, into its output. Per member:
 *                 (p-1)/p of the input copied, 1/p reduced; one barrier per
 *                 chunk (shm_internal.h says why one is enough).
 *  gather_pieces  each piece lies on its owner; every member gets every
 *                 piece. Per chunk: A. each owner copies its pieces' chunks
 *                 into its buffer; barrier; B. each member copies the other
 *                 owners' chunks from their buffers into its output. One
 *                 barrier per chunk.
 *
 * Numerics: every element of a reduce-scatter is reduced by one rank in the
 * association of the allreduce through the window (dt_shm_tree: a balanced
 * tree over the members), so the block a rank receives is bit for bit the
 * same block of the allreduce of the same inputs, on any chunk size, and
 * does not depend on how the data is cut into calls.
 * Out-of-place results of at least DTRAIN_SHM_STREAM_BYTES are written with
 * streaming stores, as the allreduce's. Calls run inside the engine. */
#include <stdlib.h>
#include <string.h>
#include "transport/mpi/shm_internal.h"
#include "core/error.h"
#include "transport/reduce_kernels.h"

/* 1 if [a, a + an) and [b, b + bn) (bytes) overlap */
static int overlap(const char *a, size_t an, const char *b, size_t bn) {
    return an && bn && a < b + bn && b < a + an;
}

int dt_shm_reduce_blocks(mpi_shm *s, const void *in, size_t in_count, const shm_block *b, int nb, dt_dtype dt,
                         dt_op op, int div, int stream) {
    size_t es = dt_dtype_size(dt);
    if (!dt_reduce_kernel_ok(dt, op) || nb < 1 || (size_t)nb * es > s->slot) return DT_DECLINED;
    int p = s->p, me = s->me;
    size_t K = s->slot / ((size_t)nb * es), B = DT_SHM_BLOCK_BYTES / es, maxc = 0;
    const char *inb = in;
    for (int i = 0; i < nb; i++) {
        if (b[i].count > maxc) maxc = b[i].count;
        if (b[i].owner == me && b[i].out != inb + b[i].off * es &&
            overlap(b[i].out, b[i].count * es, inb, in_count * es)) /* validation (coll.c) rules it out */
            return DT_ERR(DT_ERR_INTERNAL, "reduce-scatter block %d's output overlaps the input", i);
    }
    for (size_t o = 0; o < maxc; o += K) {
        int par = dt_shm_next(s);
        char *mine = dt_shm_buf(s, me, par);
        /* A: chunks of the blocks others own into my buffer */
        for (int i = 0; i < nb; i++) {
            if (b[i].owner == me || o >= b[i].count) continue;
            size_t k = b[i].count - o < K ? b[i].count - o : K;
            memcpy(mine + (size_t)i * K * es, inb + (b[i].off + o) * es, k * es);
        }
        dt_shm_sync(s);
        /* B: my blocks. The tree may write its result straight into an
         * output that lies outside my input (and, at two members, over my
         * own operand: one kernel reads both before each store); otherwise,
         * or to stream it, the result goes through my buffer's slot of the
         * block (unused: I own it). */
        for (int i = 0; i < nb; i++) {
            if (b[i].owner != me || o >= b[i].count) continue;
            size_t k = b[i].count - o < K ? b[i].count - o : K;
            char *out = (char *)b[i].out + o * es, *slotp = mine + (size_t)i * K * es;
            const char *my = inb + (b[i].off + o) * es;
            int in_place = out == my, st = stream && !in_place;
            int direct = !st && (!in_place || p == 2);
            for (size_t pos = 0; pos < k; pos += B) {
                size_t len = k - pos < B ? k - pos : B;
                for (int q = 0; q < p; q++)
                    s->x[q] = q == me ? my + pos * es : dt_shm_buf(s, q, par) + ((size_t)i * K + pos) * es;
                char *dst = direct ? out + pos * es : slotp + pos * es;
                dt_shm_tree(s, dst, len, dt, op);
                if (op == DT_AVG && div > 0) dt_reduce_divide(dst, len, dt, div);
                if (!direct) dt_shm_copy_out(out + pos * es, dst, len * es, st);
            }
        }
    }
    if (stream) dt_shm_fence();
    return DT_OK;
}

#define PIPE_BYTES ((size_t)64 << 10) /* an allgather's chunk per owner */

int dt_shm_gather_pieces(mpi_shm *s, const shm_piece *pc, int np, size_t es, int stream) {
    int p = s->p, me = s->me, maxn = 0;
    size_t maxc = 0;
    enum { STACK = 128 };
    int st[STACK], *idx = (size_t)np + (size_t)p <= STACK ? st : malloc(sizeof(int) * ((size_t)np + (size_t)p));
    if (!idx) return DT_ERR(DT_ERR_NOMEM, "out of memory for %d pieces", np);
    int *nown = idx + np;
    for (int q = 0; q < p; q++) nown[q] = 0;
    for (int i = 0; i < np; i++) { /* each piece's place among its owner's */
        idx[i] = nown[pc[i].owner]++;
        if (nown[pc[i].owner] > maxn) maxn = nown[pc[i].owner];
        if (pc[i].count > maxc) maxc = pc[i].count;
    }
    if (maxn < 1 || (size_t)maxn * es > s->slot) {
        if (idx != st) free(idx);
        return DT_DECLINED;
    }
    /* chunks of at most PIPE bytes per owner: the owners' copies into their
     * buffers overlap the others' copies out of the previous chunk */
    size_t K = s->slot / ((size_t)maxn * es), pipe = PIPE_BYTES / ((size_t)maxn * es);
    if (pipe && pipe < K) K = pipe;
    for (size_t o = 0; o < maxc; o += K) {
        int par = dt_shm_next(s);
        char *mine = dt_shm_buf(s, me, par);
        /* A: my pieces' chunks into my buffer */
        for (int i = 0; i < np; i++) {
            if (pc[i].owner != me || o >= pc[i].count) continue;
            size_t k = pc[i].count - o < K ? pc[i].count - o : K;
            memcpy(mine + (size_t)idx[i] * K * es, (const char *)pc[i].src + o * es, k * es);
        }
        dt_shm_sync(s);
        /* B: every piece's chunk from its owner's buffer into my output (my
         * own from my buffer, in cache, unless in place) */
        for (int i = 0; i < np; i++) {
            if (o >= pc[i].count || (pc[i].owner == me && pc[i].dst == pc[i].src)) continue;
            size_t k = pc[i].count - o < K ? pc[i].count - o : K;
            dt_shm_copy_out((char *)pc[i].dst + o * es, dt_shm_buf(s, pc[i].owner, par) + (size_t)idx[i] * K * es,
                            k * es, stream);
        }
    }
    if (idx != st) free(idx);
    if (stream) dt_shm_fence();
    return DT_OK;
}

/* ---- the transport's calls on a communicator with a window ----------------- */

/* The window of c if a call of `bytes` takes it. */
static mpi_shm *window_for(dt_comm *c, size_t bytes) {
    mpi_shm *s = ((mpi_impl *)c->impl)->shm;
    return s && bytes && bytes >= dt_shm_min() ? s : NULL;
}

int dt_mpi_shm_reduce_scatter(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op) {
    size_t es = dt_dtype_size(dt), p = (size_t)c->info.size;
    mpi_shm *s = window_for(c, count * p * es);
    if (!s || !dt_reduce_kernel_ok(dt, op)) return DT_DECLINED;
    int rc = dt_shm_region_collective(s, DT_SHM_REGION_REDUCE_SCATTER, send, recv, count, dt, op, -1);
    if (rc != DT_DECLINED) {
        if (rc == DT_OK) dt_path_count[DT_PATH_SHM_REDUCE_SCATTER]++;
        return rc;
    }
    enum { STACK = 64 };
    shm_block st[STACK], *b = p <= STACK ? st : malloc(sizeof *b * p);
    if (!b) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    for (size_t q = 0; q < p; q++) b[q] = (shm_block){q * count, count, (int)q, q == (size_t)s->me ? recv : NULL};
    int stream = (const char *)recv != (const char *)send + (size_t)s->me * count * es &&
                 count * es >= dt_shm_stream();
    rc = dt_shm_reduce_blocks(s, send, count * p, b, (int)p, dt, op, (int)p, stream);
    if (b != st) free(b);
    if (rc == DT_OK) dt_path_count[DT_PATH_SHM_REDUCE_SCATTER]++;
    return rc;
}

int dt_mpi_shm_allgather(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt) {
    size_t es = dt_dtype_size(dt), p = (size_t)c->info.size;
    mpi_shm *s = window_for(c, count * p * es);
    if (!s) return DT_DECLINED;
    int rc = dt_shm_region_collective(s, DT_SHM_REGION_ALLGATHER, send, recv, count, dt, DT_SUM, -1);
    if (rc != DT_DECLINED) {
        if (rc == DT_OK) dt_path_count[DT_PATH_SHM_ALLGATHER]++;
        return rc;
    }
    if (p == 2) return DT_DECLINED; /* staged: see coll.h (two copies against MPI's one) */
    enum { STACK = 64 };
    shm_piece st[STACK], *pc = p <= STACK ? st : malloc(sizeof *pc * p);
    if (!pc) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    for (size_t q = 0; q < p; q++)
        pc[q] = (shm_piece){count, (int)q, q == (size_t)s->me ? send : NULL, (char *)recv + q * count * es};
    rc = dt_shm_gather_pieces(s, pc, (int)p, es, count * p * es >= dt_shm_stream());
    if (pc != st) free(pc);
    if (rc == DT_OK) dt_path_count[DT_PATH_SHM_ALLGATHER]++;
    return rc;
}

int dt_mpi_shm_broadcast(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, int root) {
    size_t es = dt_dtype_size(dt);
    mpi_shm *s = window_for(c, count * es);
    if (!s) return DT_DECLINED;
    int rc = dt_shm_region_collective(s, DT_SHM_REGION_BROADCAST, send, recv, count, dt, DT_SUM, root);
    if (rc != DT_DECLINED) {
        if (rc == DT_OK) dt_path_count[DT_PATH_SHM_BROADCAST]++;
        return rc;
    }
    if (s->p == 2) return DT_DECLINED; /* staged: see coll.h (two copies against MPI's one) */
    shm_piece pc = {count, root, s->me == root ? send : NULL, recv};
    rc = dt_shm_gather_pieces(s, &pc, 1, es, count * es >= dt_shm_stream());
    if (rc == DT_OK) dt_path_count[DT_PATH_SHM_BROADCAST]++;
    return rc;
}
