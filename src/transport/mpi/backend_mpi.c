/* src/transport/mpi/backend_mpi.c - the MPI backend (CPU memory).
 *
 * Each communicator holds its own MPI communicator (a duplicate of
 * MPI_COMM_WORLD for the world, MPI_Comm_split of it for groups), with
 * MPI_ERRORS_RETURN so failures come back as statuses. Native MPI datatypes
 * and ops are used wherever they exist, so the common case (f32/f64 sum) is a
 * single MPI call on the caller's buffers. Special cases:
 *  - f16/bf16 reductions: MPI has no such types; the data is widened into an
 *    f32 scratch buffer, reduced in f32 and rounded once (chunked).
 *  - avg: sum, then divide by the group size (integers: summed exactly in i64,
 *    then divided truncating toward zero).
 *  - counts above INT_MAX: elementwise ops (allreduce, reduce, broadcast) are
 *    chunked; other ops are limited by max_count.
 * Before MPI's own algorithms, each op offers the call to dtrain's paths
 * (each declines with the same answer on every member): the shared-memory
 * window of a group on one host (allreduce, reduce, reduce_scatter,
 * allgather, broadcast: shm_mpi.c, shm_coll.c), then the two-level path of a
 * group spanning hosts (allreduce, reduce_scatter, allgather: hier_mpi.c).
 * The compressed forms (wire_mpi.c) choose among the same paths.
 * Calls are serialised by the engine (coll/engine.c): MPI_THREAD_SERIALIZED.
 * Each communicator also references a check channel (mpi_internal.h) used by
 * the fingerprint checks of check_mpi.c. MPI itself is initialised and
 * finalised by the mpi bootstrap (bootstrap/mpi/), which this transport
 * needs (its probe). */
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bootstrap/bootstrap.h"
#include "transport/mpi/mpi_internal.h"
#include "transport/reduce_kernels.h"
#include "core/error.h"

static int g_thread_level = -1;
static void *g_scratch;     /* widening buffer, engine-serialised */
static size_t g_scratch_cap;

#define WIDEN_CHUNK ((size_t)1 << 22) /* elements per widened chunk */
#define MPI_CHUNK ((size_t)1 << 30)   /* elements per call for huge elementwise ops */

static MPI_Comm mcomm(const dt_comm *c) { return ((const mpi_impl *)c->impl)->comm; }

#define MPI_TRY(call, name) DT_MPI_TRY(call, name)

static MPI_Datatype mpi_type(dt_dtype dt) {
    switch (dt) {
    case DT_F32: return MPI_FLOAT;
    case DT_F64: return MPI_DOUBLE;
    case DT_F16: case DT_BF16: return MPI_UINT16_T;
    case DT_I8: return MPI_INT8_T;
    case DT_U8: return MPI_UINT8_T;
    case DT_I32: return MPI_INT32_T;
    case DT_I64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL;
    }
}

static MPI_Op mpi_op(dt_op op) {
    switch (op) {
    case DT_PROD: return MPI_PROD;
    case DT_MIN: return MPI_MIN;
    case DT_MAX: return MPI_MAX;
    default: return MPI_SUM; /* sum, avg */
    }
}

static int is_int(dt_dtype dt) { return dt == DT_I8 || dt == DT_U8 || dt == DT_I32 || dt == DT_I64; }
static int is_half(dt_dtype dt) { return dt == DT_F16 || dt == DT_BF16; }
/* needs the widening path: 16-bit floats (any reduction), narrow ints for avg */
static int needs_widen(dt_dtype dt, dt_op op) {
    return is_half(dt) || (op == DT_AVG && is_int(dt) && dt != DT_I64);
}

static void *scratch(size_t bytes) {
    if (bytes > g_scratch_cap) {
        void *p = realloc(g_scratch, bytes);
        if (!p) return NULL;
        g_scratch = p;
        g_scratch_cap = bytes;
    }
    return g_scratch;
}

/* widen n elements of dt into w (f32 for half types, i64 for ints) */
static void widen(const void *src, void *w, size_t n, dt_dtype dt) {
    float *f = w;
    int64_t *l = w;
    const uint16_t *h = src;
    switch (dt) {
    case DT_F16: for (size_t i = 0; i < n; i++) f[i] = dt_f16_to_f32(h[i]); break;
    case DT_BF16: for (size_t i = 0; i < n; i++) f[i] = dt_bf16_to_f32(h[i]); break;
    case DT_I8: for (size_t i = 0; i < n; i++) l[i] = ((const int8_t *)src)[i]; break;
    case DT_U8: for (size_t i = 0; i < n; i++) l[i] = ((const uint8_t *)src)[i]; break;
    case DT_I32: for (size_t i = 0; i < n; i++) l[i] = ((const int32_t *)src)[i]; break;
    default: break;
    }
}

/* narrow n widened elements into dst, dividing by div first when avg */
static void narrow(const void *w, void *dst, size_t n, dt_dtype dt, int avg, int div) {
    const float *f = w;
    const int64_t *l = w;
    uint16_t *h = dst;
    float fd = (float)div;
    switch (dt) {
    case DT_F16: for (size_t i = 0; i < n; i++) h[i] = dt_f32_to_f16(avg ? f[i] / fd : f[i]); break;
    case DT_BF16: for (size_t i = 0; i < n; i++) h[i] = dt_f32_to_bf16(avg ? f[i] / fd : f[i]); break;
    case DT_I8: for (size_t i = 0; i < n; i++) ((int8_t *)dst)[i] = (int8_t)(avg ? l[i] / div : l[i]); break;
    case DT_U8: for (size_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = (uint8_t)(avg ? l[i] / div : l[i]); break;
    case DT_I32: for (size_t i = 0; i < n; i++) ((int32_t *)dst)[i] = (int32_t)(avg ? l[i] / div : l[i]); break;
    default: break;
    }
}

static MPI_Datatype widened_type(dt_dtype dt) { return is_half(dt) ? MPI_FLOAT : MPI_INT64_T; }
static size_t widened_size(dt_dtype dt) { return is_half(dt) ? 4 : 8; }

static int m_allreduce(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, dt_op op) {
    int size = c->info.size, avg = op == DT_AVG;
    size_t es = dt_dtype_size(dt);
    if (needs_widen(dt, op)) {
        size_t ws = widened_size(dt);
        void *w = scratch((n < WIDEN_CHUNK ? n : WIDEN_CHUNK) * ws + 1);
        if (!w) return DT_ERR(DT_ERR_NOMEM, "out of memory for a %zu-element widening buffer", n);
        for (size_t off = 0; off < n; off += WIDEN_CHUNK) {
            size_t k = n - off < WIDEN_CHUNK ? n - off : WIDEN_CHUNK;
            widen((const char *)s + off * es, w, k, dt);
            MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, w, (int)k, widened_type(dt), mpi_op(op), mcomm(c)), "MPI_Allreduce");
            narrow(w, (char *)r + off * es, k, dt, avg, size);
        }
        return DT_OK;
    }
    dt_span one = {s, r, n};
    int src = dt_mpi_shm_allreduce(c, &one, 1, n, dt, op);
    if (src == DT_DECLINED) src = dt_mpi_hier_allreduce(c, s, r, n, dt, op, 0);
    if (src != DT_DECLINED) return src;
    for (size_t off = 0; off < n || off == 0; off += MPI_CHUNK) {
        size_t k = n - off < MPI_CHUNK ? n - off : MPI_CHUNK;
        const void *sp = (s == r) ? MPI_IN_PLACE : (const char *)s + off * es;
        MPI_TRY(MPI_Allreduce(sp, (char *)r + off * es, (int)k, mpi_type(dt), mpi_op(op), mcomm(c)), "MPI_Allreduce");
        if (n == 0) break;
    }
    if (avg) dt_reduce_divide(r, n, dt, size);
    return DT_OK;
}

static int m_reduce(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, dt_op op, int root) {
    int size = c->info.size, avg = op == DT_AVG, me = c->info.rank == root;
    size_t es = dt_dtype_size(dt);
    if (needs_widen(dt, op)) {
        size_t ws = widened_size(dt);
        void *w = scratch((n < WIDEN_CHUNK ? n : WIDEN_CHUNK) * ws + 1);
        if (!w) return DT_ERR(DT_ERR_NOMEM, "out of memory for a %zu-element widening buffer", n);
        for (size_t off = 0; off < n; off += WIDEN_CHUNK) {
            size_t k = n - off < WIDEN_CHUNK ? n - off : WIDEN_CHUNK;
            widen((const char *)s + off * es, w, k, dt);
            MPI_TRY(MPI_Reduce(me ? MPI_IN_PLACE : w, me ? w : NULL, (int)k, widened_type(dt), mpi_op(op), root, mcomm(c)), "MPI_Reduce");
            if (me) narrow(w, (char *)r + off * es, k, dt, avg, size);
        }
        return DT_OK;
    }
    int src = dt_mpi_shm_reduce(c, s, r, n, dt, op, root);
    if (src != DT_DECLINED) return src;
    for (size_t off = 0; off < n || off == 0; off += MPI_CHUNK) {
        size_t k = n - off < MPI_CHUNK ? n - off : MPI_CHUNK;
        const void *sp = (me && s == r) ? MPI_IN_PLACE : (const char *)s + off * es;
        void *rp = me ? (char *)r + off * es : NULL;
        MPI_TRY(MPI_Reduce(sp, rp, (int)k, mpi_type(dt), mpi_op(op), root, mcomm(c)), "MPI_Reduce");
        if (n == 0) break;
    }
    if (avg && me) dt_reduce_divide(r, n, dt, size);
    return DT_OK;
}

static int m_reduce_scatter(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, dt_op op) {
    int size = c->info.size, rank = c->info.rank, avg = op == DT_AVG;
    size_t es = dt_dtype_size(dt);
    size_t total = n * (size_t)size;
    if (needs_widen(dt, op)) {
        void *w = scratch(total * widened_size(dt) + 1);
        if (!w) return DT_ERR(DT_ERR_NOMEM, "out of memory for a %zu-element widening buffer", total);
        widen(s, w, total, dt);
        MPI_TRY(MPI_Reduce_scatter_block(MPI_IN_PLACE, w, (int)n, widened_type(dt), mpi_op(op), mcomm(c)), "MPI_Reduce_scatter_block");
        narrow(w, r, n, dt, avg, size);
        return DT_OK;
    }
    int src = dt_mpi_shm_reduce_scatter(c, s, r, n, dt, op);
    if (src == DT_DECLINED) src = dt_mpi_hier_reduce_scatter(c, s, r, n, dt, op, 0);
    if (src != DT_DECLINED) return src;
    if ((const char *)r == (const char *)s + (size_t)rank * n * es) {
        /* in place: MPI leaves the result at the front of the buffer */
        MPI_TRY(MPI_Reduce_scatter_block(MPI_IN_PLACE, (void *)s, (int)n, mpi_type(dt), mpi_op(op), mcomm(c)), "MPI_Reduce_scatter_block");
        if (rank && n) memmove(r, s, n * es);
    } else {
        MPI_TRY(MPI_Reduce_scatter_block(s, r, (int)n, mpi_type(dt), mpi_op(op), mcomm(c)), "MPI_Reduce_scatter_block");
    }
    if (avg) dt_reduce_divide(r, n, dt, size);
    return DT_OK;
}

static int m_allgather(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt) {
    int src = dt_mpi_shm_allgather(c, s, r, n, dt);
    if (src == DT_DECLINED) src = dt_mpi_hier_allgather(c, s, r, n, dt);
    if (src != DT_DECLINED) return src;
    size_t es = dt_dtype_size(dt);
    const void *sp = ((const char *)s == (const char *)r + (size_t)c->info.rank * n * es) ? MPI_IN_PLACE : s;
    MPI_TRY(MPI_Allgather(sp, (int)n, mpi_type(dt), r, (int)n, mpi_type(dt), mcomm(c)), "MPI_Allgather");
    return DT_OK;
}

static int m_broadcast(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, int root) {
    int src = dt_mpi_shm_broadcast(c, s, r, n, dt, root);
    if (src != DT_DECLINED) return src;
    size_t es = dt_dtype_size(dt);
    if (c->info.rank == root && s != r && n) memcpy(r, s, n * es);
    for (size_t off = 0; off < n; off += MPI_CHUNK) {
        size_t k = n - off < MPI_CHUNK ? n - off : MPI_CHUNK;
        MPI_TRY(MPI_Bcast((char *)r + off * es, (int)k, mpi_type(dt), root, mcomm(c)), "MPI_Bcast");
    }
    if (n == 0) MPI_TRY(MPI_Bcast(r, 0, mpi_type(dt), root, mcomm(c)), "MPI_Bcast");
    return DT_OK;
}

static int m_gather(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, int root) {
    size_t es = dt_dtype_size(dt);
    int me = c->info.rank == root;
    const void *sp = (me && (const char *)s == (const char *)r + (size_t)root * n * es) ? MPI_IN_PLACE : s;
    MPI_TRY(MPI_Gather(sp, (int)n, mpi_type(dt), me ? r : NULL, (int)n, mpi_type(dt), root, mcomm(c)), "MPI_Gather");
    return DT_OK;
}

static int m_scatter(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, int root) {
    size_t es = dt_dtype_size(dt);
    int me = c->info.rank == root;
    void *rp = (me && (const char *)r == (const char *)s + (size_t)root * n * es) ? MPI_IN_PLACE : r;
    MPI_TRY(MPI_Scatter(me ? s : NULL, (int)n, mpi_type(dt), rp, (int)n, mpi_type(dt), root, mcomm(c)), "MPI_Scatter");
    return DT_OK;
}

static int m_all_to_all(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt) {
    const void *sp = (s == r) ? MPI_IN_PLACE : s;
    MPI_TRY(MPI_Alltoall(sp, (int)n, mpi_type(dt), r, (int)n, mpi_type(dt), mcomm(c)), "MPI_Alltoall");
    return DT_OK;
}

#define DT_P2P_TAG 7411

static int m_send(dt_comm *c, const void *b, size_t n, dt_dtype dt, int peer) {
    MPI_TRY(MPI_Send(b, (int)n, mpi_type(dt), peer, DT_P2P_TAG, mcomm(c)), "MPI_Send");
    return DT_OK;
}

static int m_recv(dt_comm *c, void *b, size_t n, dt_dtype dt, int peer) {
    MPI_Status st;
    MPI_TRY(MPI_Recv(b, (int)n, mpi_type(dt), peer, DT_P2P_TAG, mcomm(c), &st), "MPI_Recv");
    int got = 0;
    MPI_Get_count(&st, mpi_type(dt), &got);
    if ((size_t)got != n)
        return DT_ERR(DT_ERR_MISMATCH, "received %d elements from group rank %d but expected %zu (the sender's count differs)", got, peer, n);
    return DT_OK;
}

static int m_barrier(dt_comm *c) {
    MPI_TRY(MPI_Barrier(mcomm(c)), "MPI_Barrier");
    return DT_OK;
}

/* The check channel for a new communicator `nc`: shared with si (the state
 * of a communicator with the same members; NULL: none) or a duplicate of nc.
 * Collective over nc's members, who all take the same branch (identical
 * pools). */
static int attach_check(mpi_impl *impl, MPI_Comm nc, const mpi_impl *si) {
    if (si && si->chk) {
        impl->chk = si->chk;
        impl->chk->refs++;
        return DT_OK;
    }
    mpi_check *k = malloc(sizeof *k);
    if (!k) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    int rc = MPI_Comm_dup(nc, &k->comm);
    if (rc != MPI_SUCCESS) { free(k); return dt_mpi_fail(rc, "MPI_Comm_dup"); }
    MPI_Comm_set_errhandler(k->comm, MPI_ERRORS_RETURN);
    k->refs = 1;
    impl->chk = k;
    return DT_OK;
}

static int m_split(dt_comm *world, int color, dt_comm *out, dt_comm *same) {
    MPI_Comm nc;
    MPI_TRY(MPI_Comm_split(mcomm(world), color >= 0 ? color : MPI_UNDEFINED, world->info.rank, &nc), "MPI_Comm_split");
    if (color < 0) return DT_OK;
    mpi_impl *impl = malloc(sizeof *impl);
    if (!impl) { MPI_Comm_free(&nc); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    impl->comm = nc;
    impl->chk = NULL;
    impl->shm = NULL;
    impl->hier = NULL;
    out->impl = impl;
    MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
    /* the MPI state of `same`, when it is one of this transport's */
    const mpi_impl *si = (same && same->ops == &dt_backend_mpi) ? same->impl : NULL;
    int crc = attach_check(impl, nc, si);
    if (crc) return crc;
    int r = -1, s = -1;
    MPI_Comm_rank(nc, &r);
    MPI_Comm_size(nc, &s);
    if (r != out->info.rank || s != out->info.size)
        return DT_ERR(DT_ERR_INTERNAL, "MPI_Comm_split gave rank %d/%d, expected %d/%d", r, s, out->info.rank, out->info.size);
    int rc = dt_mpi_shm_attach(out, si);
    return rc ? rc : dt_mpi_hier_attach(out, si);
}

/* Asynchronous work runs on the engine's thread: a second thread in MPI,
 * which needs at least MPI_THREAD_SERIALIZED; below that it runs at
 * submission. */
static int m_async_ok(const dt_comm *c) { return g_thread_level >= MPI_THREAD_SERIALIZED; }

static void m_destroy(dt_comm *c) {
    mpi_impl *impl = c->impl;
    if (!impl) return;
    int fin = 0;
    MPI_Finalized(&fin);
    dt_mpi_shm_detach(impl, fin);
    dt_mpi_hier_detach(impl, fin);
    if (!fin) MPI_Comm_free(&impl->comm);
    if (impl->chk && --impl->chk->refs == 0) {
        if (!fin) MPI_Comm_free(&impl->chk->comm);
        free(impl->chk);
    }
    free(impl);
    c->impl = NULL;
}

const dt_backend_ops dt_backend_mpi = {
    .name = "mpi",
    .allreduce = m_allreduce,
    .allgather = m_allgather,
    .reduce_scatter = m_reduce_scatter,
    .reduce = m_reduce,
    .broadcast = m_broadcast,
    .gather = m_gather,
    .scatter = m_scatter,
    .all_to_all = m_all_to_all,
    .send = m_send,
    .recv = m_recv,
    .barrier = m_barrier,
    .allreduce_wire = dt_mpi_allreduce_wire,
    .reduce_scatter_wire = dt_mpi_reduce_scatter_wire,
    .reduce_wire = dt_mpi_reduce_wire,
    .allreduce_spans = dt_mpi_shm_allreduce,
    .alloc_shared = dt_mpi_shm_alloc,
    .free_shared = dt_mpi_shm_free,
    .check = dt_mpi_check,
    .allreduce_checked = dt_mpi_allreduce_checked,
    .gather_views = dt_mpi_gather_views,
    .p2p_check = dt_mpi_p2p_check,
    .split = m_split,
    .async_ok = m_async_ok,
    .max_count = INT_MAX,
    .destroy = m_destroy,
};

/* ---- the transport's entry (transport.c's table) ---------------------------- */

/* MPI moves data between the processes MPI started: the job of the mpi
 * bootstrap. */
static int m_probe(void) {
    const dt_boot *b = dt_boot_get();
    if (b && strcmp(b->ops->name, "mpi") == 0) return DT_OK;
    return DT_ERR(DT_ERR_UNSUPPORTED, "the mpi transport needs a job started by an MPI launcher (the mpi bootstrap); "
                  "this one was started by the %s bootstrap", b ? b->ops->name : "(none)");
}

/* The world: a duplicate of MPI_COMM_WORLD (the bootstrap initialised MPI),
 * its check channel and, on one host, its shared-memory window. */
static int m_world(dt_comm *c) {
    MPI_Query_thread(&g_thread_level);
    mpi_impl *impl = malloc(sizeof *impl);
    if (!impl) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    impl->chk = NULL;
    impl->shm = NULL;
    impl->hier = NULL;
    int mrc = MPI_Comm_dup(MPI_COMM_WORLD, &impl->comm);
    if (mrc != MPI_SUCCESS) { free(impl); return dt_mpi_fail(mrc, "MPI_Comm_dup"); }
    MPI_Comm_set_errhandler(impl->comm, MPI_ERRORS_RETURN);
    c->impl = impl;
    int rc = attach_check(impl, impl->comm, NULL);
    if (rc) return rc;
    int r, s;
    MPI_Comm_rank(impl->comm, &r);
    MPI_Comm_size(impl->comm, &s);
    if (r != c->info.rank || s != c->info.size)
        return DT_ERR(DT_ERR_INTERNAL, "MPI_COMM_WORLD has rank %d/%d, the bootstrap said %d/%d", r, s, c->info.rank,
                      c->info.size);
    if (s == 1) return DT_OK;
    rc = dt_mpi_shm_attach(c, NULL);
    return rc ? rc : dt_mpi_hier_attach(c, NULL);
}

static void m_finalize(void) {
    free(g_scratch);
    g_scratch = NULL;
    g_scratch_cap = 0;
    dt_mpi_check_release();
    dt_mpi_tree_release();
    dt_mpi_wire_release();
}

const dt_transport dt_transport_mpi = {
    .name = "mpi",
    .ops = &dt_backend_mpi,
    .boot = "mpi",
    .probe = m_probe,
    .world = m_world,
    .finalize = m_finalize,
};
