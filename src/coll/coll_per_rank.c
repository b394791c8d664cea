/* src/coll/coll_per_rank.c - reduce_scatter of one tensor per rank (RAF's
 * raf.reduce_scatter(x_list), PyTorch's dist.reduce_scatter(output,
 * input_list)): rank k receives the reduction over the group of every rank's
 * in[k]. The n tensors are the n blocks of one dt_reduce_scatter: when they
 * lie back to back in memory they are passed to the backend as they are (no
 * copy; in place, the result goes through staging: count elements); otherwise
 * they are gathered into the fusion's staging buffer first (one copy of
 * n * count elements), inside the engine, so that asynchronous work reads its
 * inputs when it runs, not when it is submitted (that execution:
 * dt_per_rank_execute, fusion.c; this file is the API and validation). The
 * fingerprint of the call is that of dt_reduce_scatter with the same per-rank
 * count: the two move the same data, and the check treats them alike. */
#include <stdint.h>
#include <string.h>
#include "coll/engine.h"
#include "core/device.h"
#include "core/error.h"

#define TRY(x) do { int rc_ = (x); if (rc_ < 0) return rc_; } while (0)

static uintptr_t addr(const void *p) { return (uintptr_t)p; }

/* 1 if [a, a+bytes) and [b, b+bytes) share a byte (empty ranges never do) */
static int overlap(const void *a, const void *b, size_t bytes) {
    return bytes && addr(a) < addr(b) + bytes && addr(b) < addr(a) + bytes;
}

static int validate(const char *fn, dt_coll_desc *d, const dt_tensor *out) {
    TRY(dt_comm_check(d->comm, fn));
    const dt_comm *c = d->comm;
    int size = c->info.size, rank = c->info.rank;
    if ((unsigned)d->op >= DT_NUM_OPS)
        return dt_error(DT_ERR_INVALID, fn, "unknown reduction op %d (valid: sum prod min max avg)", (int)d->op);
    if (!out) return dt_error(DT_ERR_INVALID, fn, "out is NULL");
    if (d->n != size)
        return dt_error(DT_ERR_INVALID, fn, "list length %d differs from the group size %d: the list holds one tensor per "
                        "rank of the group", d->n, size);
    if (!d->in) return dt_error(DT_ERR_INVALID, fn, "input list is NULL but its length is %d", d->n);
    dt_dtype dt = out->dtype;
    if ((unsigned)dt >= DT_NUM_DTYPES)
        return dt_error(DT_ERR_INVALID, fn, "out: unknown dtype %d (valid: 0..%d, f32 f64 f16 bf16 i8 u8 i32 i64)", (int)dt,
                        DT_NUM_DTYPES - 1);
    size_t count = out->count, es = dt_dtype_size(dt);
    size_t limit = (size_t)PTRDIFF_MAX / es / (size_t)size;
    if (count > limit)
        return dt_error(DT_ERR_INVALID, fn, "count %zu of %s x %d tensors overflows the address space (limit %zu elements)",
                        count, dt_dtype_name(dt), size, limit);
    if (count > c->ops->max_count)
        return dt_error(DT_ERR_INVALID, fn, "count %zu per rank exceeds the %s backend's limit %zu", count, c->ops->name,
                        c->ops->max_count);
    if (!out->data && count) return dt_error(DT_ERR_INVALID, fn, "out data is NULL but its count is %zu", count);
    size_t bytes = count * es;
    int inplace = count && out->data == d->in[rank].data;
    for (int k = 0; k < d->n; k++) {
        const dt_tensor *t = &d->in[k];
        if (t->dtype != dt)
            return dt_error(DT_ERR_INVALID, fn, "in[%d]: dtype %s differs from out's %s (one dtype for every tensor)", k,
                            (unsigned)t->dtype < DT_NUM_DTYPES ? dt_dtype_name(t->dtype) : "(unknown)", dt_dtype_name(dt));
        if (t->count != count)
            return dt_error(DT_ERR_INVALID, fn, "in[%d]: count %zu differs from out's %zu (every tensor has out's count)", k,
                            t->count, count);
        if (!t->data && count) return dt_error(DT_ERR_INVALID, fn, "in[%d]: data is NULL but its count is %zu", k, count);
        if (inplace && k == rank) continue;
        if (overlap(out->data, t->data, bytes))
            return dt_error(DT_ERR_INVALID, fn, "out overlaps in[%d]: in place, out must be in[%d] exactly (this rank's "
                            "group rank), and otherwise overlap no input", k, rank);
    }
    d->recv = out->data;
    d->count = count;
    d->dtype = dt;
    return DT_OK;
}

static int issue(const char *fn, const dt_tensor *in, int n, const dt_tensor *out, dt_op op, dt_comm *comm,
                 const dt_coll_opts *opts, dt_work **work, int async) {
    if (async && !work) return dt_error(DT_ERR_INVALID, fn, "work is NULL");
    if (async) *work = NULL;
    if (opts && opts->wire != DT_WIRE_NATIVE)
        return dt_error(DT_ERR_INVALID, fn, "opts.wire %d: only allreduce and reduce_scatter (and their lists) "
                        "and reduce take a wire type", (int)opts->wire);
    dt_coll_desc d = {.kind = DT_COLL_REDUCE_SCATTER_PER_RANK, .comm = comm, .op = op, .in = in, .n = n};
    TRY(validate(fn, &d, out));
    TRY(dt_coll_classify(fn, &d, opts));
    if (d.mem == DT_MEM_HOST && d.stream) TRY(dt_dev()->stream_sync(d.stream));
    return async ? dt_engine_submit(&d, work) : dt_engine_run(&d);
}

int dt_reduce_scatter_per_rank(const dt_tensor *in, int n, const dt_tensor *out, dt_op op, dt_comm *comm) {
    return issue(__func__, in, n, out, op, comm, NULL, NULL, 0);
}

int dt_reduce_scatter_per_rank_async(const dt_tensor *in, int n, const dt_tensor *out, dt_op op, dt_comm *comm,
                                     dt_work **work) {
    return issue(__func__, in, n, out, op, comm, NULL, work, 1);
}

int dt_reduce_scatter_per_rank_ex(const dt_tensor *in, int n, const dt_tensor *out, dt_op op, dt_comm *comm,
                                  const dt_coll_opts *opts, dt_work **work) {
    return issue(__func__, in, n, out, op, comm, opts, work, work != NULL);
}
