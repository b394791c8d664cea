/* src/coll/coll.c - the public collective API: argument validation, root
 * translation, dispatch to the engine (blocking or asynchronous). What the
 * engine then runs is execute.c's. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "coll/engine.h"
#include "watchdog/watchdog.h"
#include "core/device.h"
#include "core/error.h"

/* Largest element count whose byte size, times `mult`, stays addressable. */
static int check_count(const char *fn, size_t count, dt_dtype dt, size_t mult) {
    size_t es = dt_dtype_size(dt);
    size_t limit = (size_t)PTRDIFF_MAX / es / (mult ? mult : 1);
    if (count > limit)
        return dt_error(DT_ERR_INVALID, fn, "count %zu of %s x %zu overflows the address space (limit %zu elements)",
                        count, dt_dtype_name(dt), mult, limit);
    return DT_OK;
}

static int check_dtype(const char *fn, dt_dtype dt) {
    if ((unsigned)dt >= DT_NUM_DTYPES)
        return dt_error(DT_ERR_INVALID, fn, "unknown dtype %d (valid: 0..%d, f32 f64 f16 bf16 i8 u8 i32 i64)", (int)dt, DT_NUM_DTYPES - 1);
    return DT_OK;
}

static int check_op(const char *fn, dt_op op) {
    if ((unsigned)op >= DT_NUM_OPS)
        return dt_error(DT_ERR_INVALID, fn, "unknown reduction op %d (valid: sum prod min max avg)", (int)op);
    return DT_OK;
}

static int check_buf(const char *fn, const void *p, const char *what, size_t count) {
    if (!p && count) return dt_error(DT_ERR_INVALID, fn, "%s is NULL but count is %zu", what, count);
    return DT_OK;
}

/* world rank -> group rank, with the function name in the message */
static int to_group(const char *fn, dt_comm *c, int world_rank, const char *what) {
    if (world_rank < 0 || world_rank >= c->info.world_size)
        return dt_error(DT_ERR_INVALID, fn, "%s %d is out of range: world ranks are 0..%d", what, world_rank, c->info.world_size - 1);
    int g = dt_comm_group_rank(c, world_rank);
    if (g < 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", dt_last_error());
        return dt_error(DT_ERR_INVALID, fn, "%s (world rank %d) is not in this communicator's group: %s", what, world_rank, msg);
    }
    return g;
}

#define TRY(x) do { int rc_ = (x); if (rc_ < 0) return rc_; } while (0)

/* ---- lists ---------------------------------------------------------------- */

/* One step of FNV-1a over a tensor's (count, dtype) word: the list's
 * fingerprint costs one multiply per tensor; fingerprint.c mixes the result
 * once more. */
static inline uint64_t sig_step(uint64_t sig, size_t count, unsigned dtype) {
    return (sig ^ ((uint64_t)count << 4 | dtype)) * 0x100000001b3ull;
}

/* Lists of one dtype, the common case, in one pass whose branches are all
 * predictable (lists are long): returns 0 with totals[] (elements per dtype)
 * and d's summary filled, or 1 for list_walk() (empty, mixed dtypes, or a
 * wrong tensor). Per rank counts inputs for allreduce/allgather, outputs for
 * reduce_scatter. */
static int list_scan(dt_coll_desc *d, size_t size, size_t totals[DT_NUM_DTYPES]) {
    int ag = d->kind == DT_COLL_ALLGATHER_LIST, rs = d->kind == DT_COLL_REDUCE_SCATTER_LIST;
    unsigned first = d->n > 0 ? (unsigned)d->in[0].dtype : DT_NUM_DTYPES;
    if (first >= DT_NUM_DTYPES) return 1;
    size_t lim = (size_t)PTRDIFF_MAX / dt_dtype_size((dt_dtype)first), limk = ag ? lim / size : lim;
    size_t acc = 0;
    uint64_t sig = 0;
    for (int i = 0; i < d->n; i++) {
        const dt_tensor *a = &d->in[i], *b = &d->out[i];
        size_t k = a->count, want = k;
        if ((unsigned)a->dtype != first || (unsigned)b->dtype != first || k > limk) return 1;
        if (ag) want = k * size;
        else if (rs) {
            if (k % size) return 1;
            want = k / size;
        }
        if (b->count != want || ((!a->data || !b->data) && k) || __builtin_add_overflow(acc, k, &acc)) return 1;
        sig = sig_step(sig, rs ? want : k, first);
    }
    if (acc > lim) return 1;
    for (int t = 0; t < DT_NUM_DTYPES; t++) totals[t] = 0;
    totals[first] = acc;
    d->list_count = rs ? acc / size : acc; /* every count divides: the sum of the outputs */
    d->list_sig = sig;
    d->list_dtype = (int)first;
    return 0;
}

/* What list_scan() leaves: the message of the first wrong tensor, or for a
 * good list (empty, or of mixed dtypes) totals[] and d's summary. */
static int list_walk(const char *fn, dt_coll_desc *d, size_t size, size_t totals[DT_NUM_DTYPES]) {
    size_t lim[DT_NUM_DTYPES], per_rank = 0;
    for (int t = 0; t < DT_NUM_DTYPES; t++) {
        lim[t] = (size_t)PTRDIFF_MAX / dt_dtype_size((dt_dtype)t);
        totals[t] = 0;
    }
    uint64_t sig = 0;
    int mixed = 0;
    for (int i = 0; i < d->n; i++) {
        const dt_tensor *a = &d->in[i], *b = &d->out[i];
        if ((unsigned)a->dtype >= DT_NUM_DTYPES || (unsigned)b->dtype >= DT_NUM_DTYPES)
            return dt_error(DT_ERR_INVALID, fn, "tensor %d: unknown dtype %d", i, (int)((unsigned)a->dtype >= DT_NUM_DTYPES ? a->dtype : b->dtype));
        if (a->dtype != b->dtype)
            return dt_error(DT_ERR_INVALID, fn, "tensor %d: input dtype %s differs from output dtype %s", i, dt_dtype_name(a->dtype), dt_dtype_name(b->dtype));
        size_t want = a->count;
        if (d->kind == DT_COLL_ALLGATHER_LIST) {
            TRY(check_count(fn, a->count, a->dtype, size));
            want = a->count * size;
        } else if (d->kind == DT_COLL_REDUCE_SCATTER_LIST) {
            if (a->count % size)
                return dt_error(DT_ERR_INVALID, fn, "tensor %d: count %zu is not divisible by the group size %zu", i, a->count, size);
            want = a->count / size;
        }
        if (b->count != want)
            return dt_error(DT_ERR_INVALID, fn, "tensor %d: output count %zu, expected %zu for input count %zu", i, b->count, want, a->count);
        if ((!a->data && a->count) || (!b->data && b->count))
            return dt_error(DT_ERR_INVALID, fn, "tensor %d: %s data is NULL but count is %zu", i, !a->data && a->count ? "input" : "output", a->count);
        if (a->count > lim[a->dtype] - totals[a->dtype]) {
            TRY(check_count(fn, a->count, a->dtype, 1));
            return dt_error(DT_ERR_INVALID, fn, "tensor %d: fused %s count overflows the address space", i, dt_dtype_name(a->dtype));
        }
        totals[a->dtype] += a->count;
        size_t mine = d->kind == DT_COLL_REDUCE_SCATTER_LIST ? want : a->count;
        sig = sig_step(sig, mine, (unsigned)a->dtype);
        per_rank += mine;
        mixed |= a->dtype != d->in[0].dtype;
    }
    d->list_count = per_rank;
    d->list_sig = sig;
    d->list_dtype = d->n == 0 ? -1 : mixed ? -2 : (int)d->in[0].dtype;
    return DT_OK;
}

static int is_float(dt_dtype dt) { return dt == DT_F32 || dt == DT_F16 || dt == DT_BF16; }

/* The wire type of d: native, or 16 bits for floating-point data. */
static int check_wire(const char *fn, const dt_coll_desc *d) {
    if (d->wire == DT_WIRE_NATIVE) return DT_OK;
    if (d->wire != DT_WIRE_BF16 && d->wire != DT_WIRE_F16)
        return dt_error(DT_ERR_INVALID, fn, "unknown wire type %d (valid: DT_WIRE_NATIVE 0, DT_WIRE_BF16 1, DT_WIRE_F16 2)",
                        d->wire);
    const char *w = d->wire == DT_WIRE_BF16 ? "bf16" : "f16";
    if (d->in) {
        for (int i = 0; i < d->n; i++)
            if (!is_float(d->in[i].dtype))
                return dt_error(DT_ERR_INVALID, fn, "tensor %d: a %s wire carries f32, f16 or bf16 data, not %s", i, w,
                                dt_dtype_name(d->in[i].dtype));
        return DT_OK;
    }
    if (!is_float(d->dtype))
        return dt_error(DT_ERR_INVALID, fn, "a %s wire carries f32, f16 or bf16 data, not %s", w, dt_dtype_name(d->dtype));
    return DT_OK;
}

/* sendbuf and recvbuf (bytes each) are the same, or apart: a partial
 * overlap is no layout a collective defines. `inplace` is where recvbuf
 * must start (reduce_scatter) or sendbuf must lie (allgather) to be in place. */
static int check_overlap(const char *fn, const void *s, size_t sbytes, const void *r, size_t rbytes, const void *inplace) {
    const char *a = s, *b = r;
    if (!sbytes || !rbytes || a == b || a >= b + rbytes || b >= a + sbytes) return DT_OK;
    if (inplace && (inplace == a || inplace == b)) return DT_OK;
    return dt_error(DT_ERR_INVALID, fn, "sendbuf [%p, +%zu bytes) and recvbuf [%p, +%zu bytes) overlap but the call is not "
                    "in place (coll.h: in place is sendbuf == recvbuf; allgather: sendbuf == recvbuf + rank*count; "
                    "reduce_scatter: recvbuf == sendbuf + rank*recvcount)", s, sbytes, r, rbytes);
}

/* Validate d (kind, comm, buffers, count, dtype, op; root is a WORLD rank on
 * entry and a GROUP rank on exit). */
static int validate(const char *fn, dt_coll_desc *d) {
    TRY(dt_comm_check(d->comm, fn));
    dt_comm *c = d->comm;
    size_t size = (size_t)c->info.size;
    int rank = c->info.rank;
    if (d->kind == DT_COLL_BARRIER) return DT_OK;
    TRY(check_dtype(fn, d->dtype));
    size_t maxc = c->ops->max_count;
    switch (d->kind) {
    case DT_COLL_ALLREDUCE:
        TRY(check_op(fn, d->op));
        TRY(check_count(fn, d->count, d->dtype, 1));
        TRY(check_buf(fn, d->send, "sendbuf", d->count));
        TRY(check_buf(fn, d->recv, "recvbuf", d->count));
        TRY(check_wire(fn, d));
        TRY(check_overlap(fn, d->send, d->count * dt_dtype_size(d->dtype), d->recv, d->count * dt_dtype_size(d->dtype), NULL));
        return DT_OK;
    case DT_COLL_REDUCE_SCATTER: {
        TRY(check_op(fn, d->op));
        TRY(check_count(fn, d->count, d->dtype, 1));
        if (d->count % size)
            return dt_error(DT_ERR_INVALID, fn, "count %zu is not divisible by the group size %zu", d->count, size);
        TRY(check_buf(fn, d->send, "sendbuf", d->count));
        TRY(check_buf(fn, d->recv, "recvbuf", d->count));
        TRY(check_wire(fn, d));
        d->count /= size;
        if (d->count > maxc) return dt_error(DT_ERR_INVALID, fn, "count %zu per rank exceeds the %s backend's limit %zu", d->count, c->ops->name, maxc);
        size_t es = dt_dtype_size(d->dtype), blk = d->count * es;
        return check_overlap(fn, d->send, blk * size, d->recv, blk, (const char *)d->send + (size_t)rank * blk);
    }
    case DT_COLL_ALLGATHER:
    case DT_COLL_ALL_TO_ALL:
        TRY(check_count(fn, d->count, d->dtype, size));
        if (d->count > maxc) return dt_error(DT_ERR_INVALID, fn, "count %zu per rank exceeds the %s backend's limit %zu", d->count, c->ops->name, maxc);
        TRY(check_buf(fn, d->send, "sendbuf", d->count));
        TRY(check_buf(fn, d->recv, "recvbuf", d->count));
        if (d->kind == DT_COLL_ALLGATHER) {
            size_t es = dt_dtype_size(d->dtype), blk = d->count * es;
            TRY(check_overlap(fn, d->send, blk, d->recv, blk * size, (const char *)d->recv + (size_t)rank * blk));
        }
        return DT_OK;
    case DT_COLL_REDUCE:
        TRY(check_op(fn, d->op));
        TRY(check_count(fn, d->count, d->dtype, 1));
        TRY(d->root = to_group(fn, c, d->root, "root"));
        TRY(check_buf(fn, d->send, "sendbuf", d->count));
        if (rank == d->root) TRY(check_buf(fn, d->recv, "recvbuf on the root", d->count));
        return check_wire(fn, d);
    case DT_COLL_BROADCAST:
        TRY(check_count(fn, d->count, d->dtype, 1));
        TRY(d->root = to_group(fn, c, d->root, "root"));
        if (rank == d->root) TRY(check_buf(fn, d->send, "sendbuf on the root", d->count));
        TRY(check_buf(fn, d->recv, "recvbuf", d->count));
        return DT_OK;
    case DT_COLL_GATHER:
    case DT_COLL_SCATTER:
        TRY(check_count(fn, d->count, d->dtype, size));
        if (d->count > maxc) return dt_error(DT_ERR_INVALID, fn, "count %zu per rank exceeds the %s backend's limit %zu", d->count, c->ops->name, maxc);
        TRY(d->root = to_group(fn, c, d->root, "root"));
        if (d->kind == DT_COLL_GATHER) {
            TRY(check_buf(fn, d->send, "sendbuf", d->count));
            if (rank == d->root) TRY(check_buf(fn, d->recv, "recvbuf on the root", d->count));
        } else {
            if (rank == d->root) TRY(check_buf(fn, d->send, "sendbuf on the root", d->count));
            TRY(check_buf(fn, d->recv, "recvbuf", d->count));
        }
        return DT_OK;
    case DT_COLL_SEND:
    case DT_COLL_RECV:
        TRY(check_count(fn, d->count, d->dtype, 1));
        if (d->count > maxc) return dt_error(DT_ERR_INVALID, fn, "count %zu exceeds the %s backend's limit %zu", d->count, c->ops->name, maxc);
        TRY(d->root = to_group(fn, c, d->root, "peer"));
        if (d->root == rank) return dt_error(DT_ERR_INVALID, fn, "peer %d is the calling rank itself", c->world_ranks[rank]);
        TRY(check_buf(fn, d->kind == DT_COLL_SEND ? d->send : d->recv, "buf", d->count));
        return DT_OK;
    case DT_COLL_ALLREDUCE_LIST:
    case DT_COLL_ALLGATHER_LIST:
    case DT_COLL_REDUCE_SCATTER_LIST: {
        if (d->kind != DT_COLL_ALLGATHER_LIST) TRY(check_op(fn, d->op));
        if (d->n < 0) return dt_error(DT_ERR_INVALID, fn, "list length %d is negative", d->n);
        if (d->n > 0 && (!d->in || !d->out))
            return dt_error(DT_ERR_INVALID, fn, "%s list is NULL but its length is %d", d->in ? "output" : "input", d->n);
        size_t totals[DT_NUM_DTYPES];
        if (list_scan(d, size, totals)) TRY(list_walk(fn, d, size, totals));
        TRY(check_wire(fn, d));
        for (int t = 0; t < DT_NUM_DTYPES; t++) {
            size_t per_rank = d->kind == DT_COLL_ALLREDUCE_LIST ? 0 : d->kind == DT_COLL_ALLGATHER_LIST ? totals[t] : totals[t] / size;
            if (per_rank > maxc) return dt_error(DT_ERR_INVALID, fn, "fused %s count %zu per rank exceeds the %s backend's limit %zu", dt_dtype_name((dt_dtype)t), per_rank, c->ops->name, maxc);
        }
        return DT_OK;
    }
    default:
        return dt_error(DT_ERR_INTERNAL, fn, "unknown collective kind %d", (int)d->kind);
    }
}

/* Validate and classify d (remembered for the call memo). Out of line: a
 * repeated device call skips it. */
__attribute__((noinline)) static int check(const char *fn, dt_coll_desc *d, const dt_coll_opts *opts) {
    dt_coll_desc key = *d;
    TRY(validate(fn, d));
    TRY(dt_coll_classify(fn, d, opts));
    if (d->kind == DT_COLL_BROADCAST && d->wire != DT_WIRE_NATIVE &&
        !(d->mem == DT_MEM_DEVICE && (d->comm->dev || d->comm->info.size == 1)))
        return dt_error(DT_ERR_UNSUPPORTED, fn, "a broadcast with a %s wire (opts.wire) moves device memory over a "
                        "device transport only: this call's buffers are %s", d->wire == DT_WIRE_BF16 ? "bf16" : "f16",
                        d->mem == DT_MEM_DEVICE ? "device memory staged through the host (no GPU of its own per rank)"
                                                : "host memory");
    /* host buffers with a stream: the device work that produced them first */
    if (d->mem == DT_MEM_HOST && d->stream) TRY(dt_dev()->stream_sync(d->stream));
    dt_coll_memo_put(&key, d, opts);
    return DT_OK;
}

/* Validate, then run blocking (work == NULL) or submit asynchronously. The
 * plain calls pass opts NULL (memory kind auto). */
static int issue_opts(const char *fn, dt_coll_desc *d, const dt_coll_opts *opts, dt_work **work, int async) {
    if (async && !work) return dt_error(DT_ERR_INVALID, fn, "work is NULL");
    if (async) *work = NULL;
    if (opts && opts->wire != DT_WIRE_NATIVE) {
        switch (d->kind) {
        case DT_COLL_ALLREDUCE: case DT_COLL_REDUCE_SCATTER: case DT_COLL_ALLREDUCE_LIST:
        case DT_COLL_REDUCE_SCATTER_LIST: case DT_COLL_REDUCE: case DT_COLL_BROADCAST:
            d->wire = (int)opts->wire;
            break;
        default:
            return dt_error(DT_ERR_INVALID, fn, "opts.wire %d: only allreduce and reduce_scatter (and their lists), "
                            "reduce and broadcast take a wire type", (int)opts->wire);
        }
    }
    /* these very arguments passed before, or the checks */
    if (!dt_coll_memo_get(d, opts)) TRY(check(fn, d, opts));
    return async ? dt_engine_submit(d, work) : dt_engine_run(d);
}

static int issue(const char *fn, dt_coll_desc *d, dt_work **work, int async) {
    return issue_opts(fn, d, NULL, work, async);
}

/* The _ex forms: asynchronous when work is given. */
static int issue_ex(const char *fn, dt_coll_desc *d, const dt_coll_opts *opts, dt_work **work) {
    return issue_opts(fn, d, opts, work, work != NULL);
}

#define DESC(k, s, r, n, dt, o, rt) (dt_coll_desc){.kind = (k), .comm = comm, .send = (s), .recv = (r), \
    .count = (n), .dtype = (dt), .op = (o), .root = (rt)}

int dt_allreduce(const void *s, void *r, size_t n, dt_dtype dt, dt_op op, dt_comm *comm) {
    dt_coll_desc d = DESC(DT_COLL_ALLREDUCE, s, r, n, dt, op, 0);
    return issue(__func__, &d, NULL, 0);
}
int dt_allgather(const void *s, void *r, size_t n, dt_dtype dt, dt_comm *comm) {
    dt_coll_desc d = DESC(DT_COLL_ALLGATHER, s, r, n, dt, DT_SUM, 0);
    return issue(__func__, &d, NULL, 0);
}
int dt_reduce_scatter(const void *s, void *r, size_t n, dt_dtype dt, dt_op op, dt_comm *comm) {
    dt_coll_desc d = DESC(DT_COLL_REDUCE_SCATTER, s, r, n, dt, op, 0);
    return issue(__func__, &d, NULL, 0);
}
int dt_reduce(const void *s, void *r, size_t n, dt_dtype dt, dt_op op, int root, dt_comm *comm) {
    dt_coll_desc d = DESC(DT_COLL_REDUCE, s, r, n, dt, op, root);
    return issue(__func__, &d, NULL, 0);
}
int dt_broadcast(const void *s, void *r, size_t n, dt_dtype dt, int root, dt_comm *comm) {
    dt_coll_desc d = DESC(DT_COLL_BROADCAST, s, r, n, dt, DT_SUM, root);
    return issue(__func__, &d, NULL, 0);
}
int dt_gather(const void *s, void *r, size_t n, dt_dtype dt, int root, dt_comm *comm) {
    dt_coll_desc d = DESC(DT_COLL_GATHER, s, r, n, dt, DT_SUM, root);
    return issue(__func__, &d, NULL, 0);
}
int dt_scatter(const void *s, void *r, size_t n, dt_dtype dt, int root, dt_comm *comm) {
    dt_coll_desc d = DESC(DT_COLL_SCATTER, s, r, n, dt, DT_SUM, root);
    return issue(__func__, &d, NULL, 0);
}
int dt_all_to_all(const void *s, void *r, size_t n, dt_dtype dt, dt_comm *comm) {
    dt_coll_desc d = DESC(DT_COLL_ALL_TO_ALL, s, r, n, dt, DT_SUM, 0);
    return issue(__func__, &d, NULL, 0);
}
int dt_send(const void *b, size_t n, dt_dtype dt, int peer, dt_comm *comm) {
    dt_coll_desc d = DESC(DT_COLL_SEND, b, NULL, n, dt, DT_SUM, peer);
    return issue(__func__, &d, NULL, 0);
}
int dt_recv(void *b, size_t n, dt_dtype dt, int peer, dt_comm *comm) {
    dt_coll_desc d = DESC(DT_COLL_RECV, NULL, b, n, dt, DT_SUM, peer);
    return issue(__func__, &d, NULL, 0);
}
int dt_barrier(dt_comm *comm) {
    dt_coll_desc d = DESC(DT_COLL_BARRIER, NULL, NULL, 0, DT_F32, DT_SUM, 0);
    return issue(__func__, &d, NULL, 0);
}

#define LDESC(k, o) (dt_coll_desc){.kind = (k), .comm = comm, .op = (o), .in = in, .out = out, .n = n}

int dt_allreduce_list(const dt_tensor *in, const dt_tensor *out, int n, dt_op op, dt_comm *comm) {
    dt_coll_desc d = LDESC(DT_COLL_ALLREDUCE_LIST, op);
    return issue(__func__, &d, NULL, 0);
}
int dt_allgather_list(const dt_tensor *in, const dt_tensor *out, int n, dt_comm *comm) {
    dt_coll_desc d = LDESC(DT_COLL_ALLGATHER_LIST, DT_SUM);
    return issue(__func__, &d, NULL, 0);
}
int dt_reduce_scatter_fused(const dt_tensor *in, const dt_tensor *out, int n, dt_op op, dt_comm *comm) {
    dt_coll_desc d = LDESC(DT_COLL_REDUCE_SCATTER_LIST, op);
    return issue(__func__, &d, NULL, 0);
}

/* ---- asynchronous forms ---- */
int dt_allreduce_async(const void *s, void *r, size_t n, dt_dtype dt, dt_op op, dt_comm *comm, dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_ALLREDUCE, s, r, n, dt, op, 0);
    return issue(__func__, &d, w, 1);
}
int dt_allgather_async(const void *s, void *r, size_t n, dt_dtype dt, dt_comm *comm, dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_ALLGATHER, s, r, n, dt, DT_SUM, 0);
    return issue(__func__, &d, w, 1);
}
int dt_reduce_scatter_async(const void *s, void *r, size_t n, dt_dtype dt, dt_op op, dt_comm *comm, dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_REDUCE_SCATTER, s, r, n, dt, op, 0);
    return issue(__func__, &d, w, 1);
}
int dt_reduce_async(const void *s, void *r, size_t n, dt_dtype dt, dt_op op, int root, dt_comm *comm, dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_REDUCE, s, r, n, dt, op, root);
    return issue(__func__, &d, w, 1);
}
int dt_broadcast_async(const void *s, void *r, size_t n, dt_dtype dt, int root, dt_comm *comm, dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_BROADCAST, s, r, n, dt, DT_SUM, root);
    return issue(__func__, &d, w, 1);
}
int dt_gather_async(const void *s, void *r, size_t n, dt_dtype dt, int root, dt_comm *comm, dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_GATHER, s, r, n, dt, DT_SUM, root);
    return issue(__func__, &d, w, 1);
}
int dt_scatter_async(const void *s, void *r, size_t n, dt_dtype dt, int root, dt_comm *comm, dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_SCATTER, s, r, n, dt, DT_SUM, root);
    return issue(__func__, &d, w, 1);
}
int dt_all_to_all_async(const void *s, void *r, size_t n, dt_dtype dt, dt_comm *comm, dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_ALL_TO_ALL, s, r, n, dt, DT_SUM, 0);
    return issue(__func__, &d, w, 1);
}
int dt_send_async(const void *b, size_t n, dt_dtype dt, int peer, dt_comm *comm, dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_SEND, b, NULL, n, dt, DT_SUM, peer);
    return issue(__func__, &d, w, 1);
}
int dt_recv_async(void *b, size_t n, dt_dtype dt, int peer, dt_comm *comm, dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_RECV, NULL, b, n, dt, DT_SUM, peer);
    return issue(__func__, &d, w, 1);
}
int dt_barrier_async(dt_comm *comm, dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_BARRIER, NULL, NULL, 0, DT_F32, DT_SUM, 0);
    return issue(__func__, &d, w, 1);
}
int dt_allreduce_list_async(const dt_tensor *in, const dt_tensor *out, int n, dt_op op, dt_comm *comm, dt_work **w) {
    dt_coll_desc d = LDESC(DT_COLL_ALLREDUCE_LIST, op);
    return issue(__func__, &d, w, 1);
}
int dt_allgather_list_async(const dt_tensor *in, const dt_tensor *out, int n, dt_comm *comm, dt_work **w) {
    dt_coll_desc d = LDESC(DT_COLL_ALLGATHER_LIST, DT_SUM);
    return issue(__func__, &d, w, 1);
}
int dt_reduce_scatter_fused_async(const dt_tensor *in, const dt_tensor *out, int n, dt_op op, dt_comm *comm, dt_work **w) {
    dt_coll_desc d = LDESC(DT_COLL_REDUCE_SCATTER_LIST, op);
    return issue(__func__, &d, w, 1);
}

/* ---- options: memory kind and stream ---- */
int dt_allreduce_ex(const void *s, void *r, size_t n, dt_dtype dt, dt_op op, dt_comm *comm, const dt_coll_opts *o,
                    dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_ALLREDUCE, s, r, n, dt, op, 0);
    return issue_ex(__func__, &d, o, w);
}
int dt_allgather_ex(const void *s, void *r, size_t n, dt_dtype dt, dt_comm *comm, const dt_coll_opts *o, dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_ALLGATHER, s, r, n, dt, DT_SUM, 0);
    return issue_ex(__func__, &d, o, w);
}
int dt_reduce_scatter_ex(const void *s, void *r, size_t n, dt_dtype dt, dt_op op, dt_comm *comm, const dt_coll_opts *o,
                         dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_REDUCE_SCATTER, s, r, n, dt, op, 0);
    return issue_ex(__func__, &d, o, w);
}
int dt_reduce_ex(const void *s, void *r, size_t n, dt_dtype dt, dt_op op, int root, dt_comm *comm,
                 const dt_coll_opts *o, dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_REDUCE, s, r, n, dt, op, root);
    return issue_ex(__func__, &d, o, w);
}
int dt_broadcast_ex(const void *s, void *r, size_t n, dt_dtype dt, int root, dt_comm *comm, const dt_coll_opts *o,
                    dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_BROADCAST, s, r, n, dt, DT_SUM, root);
    return issue_ex(__func__, &d, o, w);
}
int dt_gather_ex(const void *s, void *r, size_t n, dt_dtype dt, int root, dt_comm *comm, const dt_coll_opts *o,
                 dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_GATHER, s, r, n, dt, DT_SUM, root);
    return issue_ex(__func__, &d, o, w);
}
int dt_scatter_ex(const void *s, void *r, size_t n, dt_dtype dt, int root, dt_comm *comm, const dt_coll_opts *o,
                  dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_SCATTER, s, r, n, dt, DT_SUM, root);
    return issue_ex(__func__, &d, o, w);
}
int dt_all_to_all_ex(const void *s, void *r, size_t n, dt_dtype dt, dt_comm *comm, const dt_coll_opts *o, dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_ALL_TO_ALL, s, r, n, dt, DT_SUM, 0);
    return issue_ex(__func__, &d, o, w);
}
int dt_send_ex(const void *b, size_t n, dt_dtype dt, int peer, dt_comm *comm, const dt_coll_opts *o, dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_SEND, b, NULL, n, dt, DT_SUM, peer);
    return issue_ex(__func__, &d, o, w);
}
int dt_recv_ex(void *b, size_t n, dt_dtype dt, int peer, dt_comm *comm, const dt_coll_opts *o, dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_RECV, NULL, b, n, dt, DT_SUM, peer);
    return issue_ex(__func__, &d, o, w);
}
int dt_barrier_ex(dt_comm *comm, const dt_coll_opts *o, dt_work **w) {
    dt_coll_desc d = DESC(DT_COLL_BARRIER, NULL, NULL, 0, DT_F32, DT_SUM, 0);
    return issue_ex(__func__, &d, o, w);
}
int dt_allreduce_list_ex(const dt_tensor *in, const dt_tensor *out, int n, dt_op op, dt_comm *comm,
                         const dt_coll_opts *o, dt_work **w) {
    dt_coll_desc d = LDESC(DT_COLL_ALLREDUCE_LIST, op);
    return issue_ex(__func__, &d, o, w);
}
int dt_allgather_list_ex(const dt_tensor *in, const dt_tensor *out, int n, dt_comm *comm, const dt_coll_opts *o,
                         dt_work **w) {
    dt_coll_desc d = LDESC(DT_COLL_ALLGATHER_LIST, DT_SUM);
    return issue_ex(__func__, &d, o, w);
}
int dt_reduce_scatter_fused_ex(const dt_tensor *in, const dt_tensor *out, int n, dt_op op, dt_comm *comm,
                               const dt_coll_opts *o, dt_work **w) {
    dt_coll_desc d = LDESC(DT_COLL_REDUCE_SCATTER_LIST, op);
    return issue_ex(__func__, &d, o, w);
}
