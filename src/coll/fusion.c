/* src/coll/fusion.c - fused list collectives: the tensors of one dtype are
 * packed into one staging buffer, moved by ONE backend collective, and
 * unpacked; and the reduce_scatter of one tensor per rank (its API and
 * validation: coll_per_rank.c), whose blocks go through the same staging.
 * Tensors that already lie back to back in memory (views of one flat buffer,
 * as data-parallel buckets are) skip the copies, and so do allreduces on
 * backends that reduce straight from and into the tensors (allreduce_spans:
 * the MPI backend's shared-memory path). Runs inside the engine, so the
 * staging buffers are never used by two calls at once. */
#include <stdlib.h>
#include <string.h>
#include "coll/coll_internal.h"
#include "core/error.h"

/* grow-only buffers: 0, 1 staging; 2 the tensor indices of one dtype;
 * 3 spans; 4 the indices 0, 1, 2, ... (the first g_iota filled) */
enum { STAGE_SRC, STAGE_DST, STAGE_IDX, STAGE_SPANS, STAGE_IOTA, NSTAGE };
static void *g_stage[NSTAGE];
static size_t g_stage_cap[NSTAGE];
static int g_iota;

static void *stage(int i, size_t bytes) {
    if (bytes > g_stage_cap[i]) {
        void *p = realloc(g_stage[i], bytes);
        if (!p) return NULL;
        g_stage[i] = p;
        g_stage_cap[i] = bytes;
    }
    return g_stage[i];
}

void dt_fusion_release(void) {
    for (int i = 0; i < NSTAGE; i++) { free(g_stage[i]); g_stage[i] = NULL; g_stage_cap[i] = 0; }
    g_iota = 0;
}

/* 1 if the tensors idx[0..m) of list t lie back to back (t[idx[k+1]] starts
 * where t[idx[k]] ends). */
static int contiguous(const dt_tensor *t, const int *idx, int m, size_t es) {
    for (int k = 0; k + 1 < m; k++)
        if ((const char *)t[idx[k]].data + t[idx[k]].count * es != (const char *)t[idx[k + 1]].data) return 0;
    return 1;
}

static int fuse_allreduce(const dt_coll_desc *d, const int *idx, int m, size_t total, dt_dtype dt) {
    dt_comm *c = d->comm;
    size_t es = dt_dtype_size(dt);
    const void *first_in = m ? d->in[idx[0]].data : NULL;
    void *first_out = m ? d->out[idx[0]].data : NULL;
    if (contiguous(d->in, idx, m, es) && contiguous(d->out, idx, m, es)) {
        const char *a = first_in, *b = first_out;
        /* same span, or disjoint spans: one call straight on user memory */
        if (a == b || a + total * es <= b || b + total * es <= a)
            return dt_transport_allreduce(c, first_in, first_out, total, dt, d->op, d->wire);
    }
    /* the spans: reduced where they lie, through a shared-memory window (not
     * compressed either way) */
    if (c->ops->allreduce_spans && (d->wire == DT_WIRE_NATIVE || dt == DT_F32)) {
        dt_span *sp = stage(STAGE_SPANS, sizeof *sp * (size_t)m);
        if (!sp) return DT_ERR(DT_ERR_NOMEM, "out of memory for a list of %d tensors", m);
        for (int k = 0; k < m; k++) sp[k] = (dt_span){d->in[idx[k]].data, d->out[idx[k]].data, d->in[idx[k]].count};
        int rc = c->ops->allreduce_spans(c, sp, m, total, dt, d->op);
        if (rc != DT_DECLINED) return rc;
    }
    char *buf = stage(STAGE_SRC, total * es + 1);
    if (!buf) return DT_ERR(DT_ERR_NOMEM, "out of memory for a %zu-byte fusion buffer", total * es);
    size_t off = 0;
    for (int k = 0; k < m; k++) {
        size_t b = d->in[idx[k]].count * es;
        if (b) memcpy(buf + off, d->in[idx[k]].data, b);
        off += b;
    }
    int rc = dt_transport_allreduce(c, buf, buf, total, dt, d->op, d->wire);
    if (rc) return rc;
    off = 0;
    for (int k = 0; k < m; k++) {
        size_t b = d->out[idx[k]].count * es;
        if (b) memcpy(d->out[idx[k]].data, buf + off, b);
        off += b;
    }
    return DT_OK;
}

static int fuse_allgather(const dt_coll_desc *d, const int *idx, int m, size_t total, dt_dtype dt) {
    dt_comm *c = d->comm;
    size_t es = dt_dtype_size(dt), size = (size_t)c->info.size;
    char *src = stage(STAGE_SRC, total * es + 1), *dst = stage(STAGE_DST, total * size * es + 1);
    if (!src || !dst) return DT_ERR(DT_ERR_NOMEM, "out of memory for %zu-byte fusion buffers", total * (size + 1) * es);
    size_t off = 0;
    for (int k = 0; k < m; k++) {
        size_t b = d->in[idx[k]].count * es;
        if (b) memcpy(src + off, d->in[idx[k]].data, b);
        off += b;
    }
    int rc = c->ops->allgather(c, src, dst, total, dt);
    if (rc) return rc;
    for (size_t r = 0; r < size; r++) {
        off = 0;
        for (int k = 0; k < m; k++) {
            size_t b = d->in[idx[k]].count * es;
            if (b) memcpy((char *)d->out[idx[k]].data + r * b, dst + r * total * es + off, b);
            off += b;
        }
    }
    return DT_OK;
}

static int fuse_reduce_scatter(const dt_coll_desc *d, const int *idx, int m, size_t total, dt_dtype dt) {
    dt_comm *c = d->comm;
    size_t es = dt_dtype_size(dt), size = (size_t)c->info.size;
    /* total = elements each rank receives */
    char *src = stage(STAGE_SRC, total * size * es + 1), *dst = stage(STAGE_DST, total * es + 1);
    if (!src || !dst) return DT_ERR(DT_ERR_NOMEM, "out of memory for %zu-byte fusion buffers", total * (size + 1) * es);
    for (size_t r = 0; r < size; r++) {
        size_t off = 0;
        for (int k = 0; k < m; k++) {
            size_t b = d->out[idx[k]].count * es;
            if (b) memcpy(src + r * total * es + off, (const char *)d->in[idx[k]].data + r * b, b);
            off += b;
        }
    }
    int rc = dt_transport_reduce_scatter(c, src, dst, total, dt, d->op, d->wire);
    if (rc) return rc;
    size_t off = 0;
    for (int k = 0; k < m; k++) {
        size_t b = d->out[idx[k]].count * es;
        if (b) memcpy(d->out[idx[k]].data, dst + off, b);
        off += b;
    }
    return DT_OK;
}

static int fuse(const dt_coll_desc *d, const int *idx, int m, size_t total, dt_dtype dt) {
    switch (d->kind) {
    case DT_COLL_ALLREDUCE_LIST: return fuse_allreduce(d, idx, m, total, dt);
    case DT_COLL_ALLGATHER_LIST: return fuse_allgather(d, idx, m, total, dt);
    case DT_COLL_REDUCE_SCATTER_LIST: return fuse_reduce_scatter(d, idx, m, total, dt);
    default: return DT_ERR(DT_ERR_INTERNAL, "not a list collective: %d", (int)d->kind);
    }
}

int dt_fusion_execute(const dt_coll_desc *d) {
    if (d->n <= 0) return DT_OK;
    if (d->list_dtype >= 0) { /* one dtype (validation found): every tensor, in order */
        int *idx = stage(STAGE_IOTA, sizeof(int) * (size_t)d->n);
        if (!idx) return DT_ERR(DT_ERR_NOMEM, "out of memory for a list of %d tensors", d->n);
        for (; g_iota < d->n; g_iota++) idx[g_iota] = g_iota;
        return fuse(d, idx, d->n, d->list_count, (dt_dtype)d->list_dtype);
    }
    int *idx = stage(STAGE_IDX, sizeof(int) * (size_t)d->n);
    if (!idx) return DT_ERR(DT_ERR_NOMEM, "out of memory for a list of %d tensors", d->n);
    int done_mask = 0, rc = DT_OK, covered = 0;
    for (int i = 0; i < d->n && covered < d->n && rc == DT_OK; i++) { /* one dtype per pass */
        dt_dtype dt = d->in[i].dtype;
        if (done_mask & (1 << dt)) continue;
        done_mask |= 1 << dt;
        int m = 0;
        size_t total = 0;
        for (int j = i; j < d->n; j++) {
            if (d->in[j].dtype != dt) continue;
            idx[m++] = j;
            total += d->kind == DT_COLL_REDUCE_SCATTER_LIST ? d->out[j].count : d->in[j].count;
        }
        covered += m;
        rc = fuse(d, idx, m, total, dt);
    }
    return rc;
}

/* ---- reduce_scatter of one tensor per rank (coll_per_rank.c) -------------- */
int dt_per_rank_execute(const dt_coll_desc *d) {
    dt_comm *c = d->comm;
    size_t es = dt_dtype_size(d->dtype), bytes = d->count * es;
    const void *first = d->in[0].data;
    int adjacent = 1, inplace = d->n > 1 && bytes && d->recv == d->in[c->info.rank].data;
    for (int k = 1; k < d->n && adjacent; k++)
        adjacent = (const char *)d->in[k].data == (const char *)first + (size_t)k * bytes;
    if (!bytes || (adjacent && !inplace)) /* the blocks of one buffer: straight from the user's memory */
        return c->ops->reduce_scatter(c, first, d->recv, d->count, d->dtype, d->op);
    if (adjacent) {
        /* In place, the backend's in-place form may use the whole buffer as
         * scratch (MPI's does), so the other ranks' inputs would change:
         * reduce out of place into staging and copy the result (count
         * elements) instead. */
        char *res = stage(STAGE_SRC, bytes);
        if (!res) return DT_ERR(DT_ERR_NOMEM, "out of memory for a %zu-byte staging buffer", bytes);
        int rc = c->ops->reduce_scatter(c, first, res, d->count, d->dtype, d->op);
        if (rc == DT_OK) memcpy(d->recv, res, bytes);
        return rc;
    }
    char *buf = stage(STAGE_SRC, (size_t)d->n * bytes);
    if (!buf) return DT_ERR(DT_ERR_NOMEM, "out of memory for a %zu-byte staging buffer", (size_t)d->n * bytes);
    for (int k = 0; k < d->n; k++) memcpy(buf + (size_t)k * bytes, d->in[k].data, bytes);
    return c->ops->reduce_scatter(c, buf, d->recv, d->count, d->dtype, d->op);
}
