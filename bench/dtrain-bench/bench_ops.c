/* bench/dtrain-bench/bench_ops.c - per-op buffer layout, input initialisation,
 * validation, and the dtrain / raw-MPI calls timed by dtrain-bench.
 *
 * Sizes follow nccl-tests: S (the "size" column) is the whole buffer for
 * allreduce, reduce, broadcast and sendrecv; the whole gathered output for
 * allgather and gather; the whole input for reduce_scatter and scatter; the
 * whole per-rank buffer for all_to_all. Per-rank block counts are S / (n*esize)
 * rounded down, so S is rounded down to a multiple of n*esize. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "bench.h"

static const bench_op_info op_table[B_NUM_OPS] = {
    /* name            reduces rooted blocked inplace */
    {"allreduce",      1, 0, 0, 1},
    {"allgather",      0, 0, 1, 1},
    {"reduce_scatter", 1, 0, 1, 1},
    {"reduce",         1, 1, 0, 1},
    {"broadcast",      0, 1, 0, 1},
    {"gather",         0, 1, 1, 0},
    {"scatter",        0, 1, 1, 0},
    {"all_to_all",     0, 0, 1, 1},
    {"sendrecv",       0, 0, 0, 0},
    {"barrier",        0, 0, 0, 0},
};

const bench_op_info *bench_op_get(bench_op op) {
    return ((unsigned)op < B_NUM_OPS) ? &op_table[op] : NULL;
}

int bench_op_parse(const char *name, bench_op *out) {
    static const struct { const char *alias; bench_op op; } aliases[] = {
        {"reducescatter", B_REDUCE_SCATTER}, {"alltoall", B_ALL_TO_ALL},
        {"all2all", B_ALL_TO_ALL}, {"bcast", B_BROADCAST}, {"send_recv", B_SENDRECV}};
    for (int i = 0; i < B_NUM_OPS; i++)
        if (strcmp(name, op_table[i].name) == 0) { *out = (bench_op)i; return 0; }
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(name, aliases[i].alias) == 0) { *out = aliases[i].op; return 0; }
    return -1;
}

double bench_bus_factor(bench_op op, int n) {
    switch (op) {
    case B_ALLREDUCE: return 2.0 * (n - 1) / n;
    case B_ALLGATHER:
    case B_REDUCE_SCATTER:
    case B_ALL_TO_ALL:
    case B_GATHER:
    case B_SCATTER: return (double)(n - 1) / n;
    case B_REDUCE:
    case B_BROADCAST:
    case B_SENDRECV: return 1.0;
    default: return 0.0;
    }
}

/* ---- layout ---------------------------------------------------------------- */

void bench_case_layout(bench_case *c, size_t bytes) {
    size_t es = dt_dtype_size(c->dtype), n = (size_t)c->nranks;
    c->esize = es;
    c->tcount = 0;
    if (c->op == B_BARRIER) {
        c->count = c->send_elems = c->recv_elems = c->bytes = c->total_elems = 0;
        return;
    }
    if (op_table[c->op].blocked) {
        size_t bc = bytes / (n * es);
        c->bytes = bc * n * es;
        switch (c->op) {
        case B_ALLGATHER: c->count = bc; c->send_elems = bc; c->recv_elems = n * bc; break;
        case B_REDUCE_SCATTER: c->count = n * bc; c->send_elems = n * bc; c->recv_elems = bc; break;
        case B_GATHER: c->count = bc; c->send_elems = bc; c->recv_elems = n * bc; break;
        case B_SCATTER: c->count = bc; c->send_elems = n * bc; c->recv_elems = bc; break;
        default: /* all_to_all */ c->count = bc; c->send_elems = n * bc; c->recv_elems = n * bc; break;
        }
    } else {
        size_t cnt = bytes / es;
        if (c->mode != M_SINGLE) {
            c->tcount = cnt / (size_t)c->ntensors;
            cnt = c->tcount * (size_t)c->ntensors;
            c->count = c->tcount;
        } else {
            c->count = cnt;
        }
        c->send_elems = c->recv_elems = cnt;
        c->bytes = cnt * es;
    }
    c->total_elems = c->bytes / es;
}

/* ---- buffer sets ------------------------------------------------------------- */

static int has_slabs(const bench_case *c) { return c->mode == M_SINGLE || c->need_slab; }

size_t bench_set_bytes(const bench_case *c) {
    /* list modes keep the in/out tensors, plus slabs for the MPI reference */
    size_t b = (c->send_elems + c->recv_elems) * c->esize;
    if (c->mode != M_SINGLE && c->need_slab) b *= 2;
    return b;
}

static void *alloc_buf(size_t bytes) {
    void *p = NULL;
    size_t align = bytes >= 4096 ? 4096 : 64;
    if (posix_memalign(&p, align, bytes ? bytes : 1) != 0) return NULL;
    return p;
}

/* a slab: plain, or from dt_comm_alloc_shared (collective: every rank
 * allocates the same slabs in the same order) */
static void *alloc_slab(const bench_case *c, size_t bytes) {
    void *p = NULL;
    if (!c->shared_mem) return alloc_buf(bytes);
    return dt_comm_alloc_shared(c->comm, bytes ? bytes : 1, &p) == DT_OK ? p : NULL;
}

static void free_slab(const bench_case *c, void *p) {
    if (c->shared_mem) dt_comm_free_shared(c->comm, p);
    else free(p);
}

int bench_set_alloc(const bench_case *c, bench_set *s) {
    memset(s, 0, sizeof *s);
    if (has_slabs(c)) {
        s->send = alloc_slab(c, c->send_elems * c->esize);
        s->recv = alloc_slab(c, c->recv_elems * c->esize);
        if (!s->send || !s->recv) goto fail;
    }
    if (c->mode != M_SINGLE) {
        int nt = c->ntensors;
        size_t tb = c->tcount * c->esize;
        s->tin = calloc((size_t)nt, sizeof *s->tin);
        s->tout = calloc((size_t)nt, sizeof *s->tout);
        s->lin = calloc((size_t)nt, sizeof *s->lin);
        s->lout = calloc((size_t)nt, sizeof *s->lout);
        if (!s->tin || !s->tout || !s->lin || !s->lout) goto fail;
        for (int j = 0; j < nt; j++) { /* separately malloc'd, as a model's tensors are */
            s->tin[j] = malloc(tb ? tb : 1);
            s->tout[j] = malloc(tb ? tb : 1);
            if (!s->tin[j] || !s->tout[j]) goto fail;
            s->lin[j] = (dt_tensor){s->tin[j], c->tcount, c->dtype};
            s->lout[j] = (dt_tensor){s->tout[j], c->tcount, c->dtype};
        }
    }
    return 0;
fail:
    bench_set_free(c, s);
    return -1;
}

void bench_set_free(const bench_case *c, bench_set *s) {
    free_slab(c, s->send);
    free_slab(c, s->recv);
    if (s->tin)
        for (int j = 0; j < c->ntensors; j++) free(s->tin[j]);
    if (s->tout)
        for (int j = 0; j < c->ntensors; j++) free(s->tout[j]);
    free(s->tin);
    free(s->tout);
    free(s->lin);
    free(s->lout);
    memset(s, 0, sizeof *s);
}

/* ---- init / verify ------------------------------------------------------------ */

#define AT(p, i) ((p) + (size_t)(i) * es)

/* Inputs of rank r for a plain "own data in, sentinel out" op. */
static void init_plain(const bench_case *c, const bench_gen *g, bench_set *s, int inplace) {
    if (inplace) {
        bench_fill(g, s->recv, c->recv_elems, 0, c->rank);
    } else {
        bench_fill(g, s->send, c->send_elems, 0, c->rank);
        bench_fill_sentinel(c->dtype, s->recv, c->recv_elems);
    }
}

void bench_init(const bench_case *c, const bench_gen *g, bench_set *s, int inplace) {
    size_t es = c->esize, bc = c->count;
    int r = c->rank;
    dt_dtype dt = c->dtype;
    switch (c->op) {
    case B_ALLREDUCE:
        if (c->mode != M_SINGLE) {
            size_t tc = c->tcount;
            for (int j = 0; j < c->ntensors; j++) {
                if (inplace) {
                    bench_fill(g, s->tout[j], tc, (uint64_t)j * tc, r);
                } else {
                    bench_fill(g, s->tin[j], tc, (uint64_t)j * tc, r);
                    bench_fill_sentinel(dt, s->tout[j], tc);
                }
            }
            if (c->need_slab) init_plain(c, g, s, inplace); /* MPI reference buffers */
            break;
        }
        init_plain(c, g, s, inplace);
        break;
    case B_REDUCE:
    case B_ALL_TO_ALL:
        init_plain(c, g, s, inplace);
        break;
    case B_BROADCAST: {
        unsigned char *src = inplace ? s->recv : s->send;
        if (r == c->root) bench_fill(g, src, c->count, 0, r);
        else bench_fill_sentinel(dt, src, c->count);
        if (!inplace) bench_fill_sentinel(dt, s->recv, c->recv_elems);
        break;
    }
    case B_ALLGATHER:
        bench_fill_sentinel(dt, s->recv, c->recv_elems);
        if (inplace) bench_fill(g, AT(s->recv, (size_t)r * bc), bc, 0, r);
        else bench_fill(g, s->send, bc, 0, r);
        break;
    case B_REDUCE_SCATTER:
        bench_fill(g, s->send, c->send_elems, 0, r);
        if (!inplace) bench_fill_sentinel(dt, s->recv, c->recv_elems);
        break;
    case B_GATHER:
        bench_fill(g, s->send, bc, 0, r);
        bench_fill_sentinel(dt, s->recv, c->recv_elems);
        break;
    case B_SCATTER:
        if (r == c->root) bench_fill(g, s->send, c->send_elems, 0, r);
        else bench_fill_sentinel(dt, s->send, c->send_elems);
        bench_fill_sentinel(dt, s->recv, c->recv_elems);
        break;
    case B_SENDRECV:
        bench_fill(g, s->send, c->send_elems, 0, r);
        bench_fill_sentinel(dt, s->recv, c->recv_elems);
        break;
    default:
        break;
    }
}

size_t bench_verify(const bench_case *c, const bench_gen *g, const bench_set *s,
                    int inplace) {
    size_t es = c->esize, bc = c->count, w = 0;
    int r = c->rank, n = c->nranks;
    char what[64];
    switch (c->op) {
    case B_ALLREDUCE:
        if (c->mode != M_SINGLE) {
            size_t tc = c->tcount;
            for (int j = 0; j < c->ntensors; j++) {
                snprintf(what, sizeof what, "out tensor %d", j);
                w += bench_check_reduce(g, s->tout[j], tc, (uint64_t)j * tc, what);
                if (!inplace) {
                    snprintf(what, sizeof what, "in tensor %d (input modified)", j);
                    w += bench_check_move(g, s->tin[j], tc, (uint64_t)j * tc, r, what);
                }
            }
            break;
        }
        w += bench_check_reduce(g, s->recv, c->recv_elems, 0, "recvbuf");
        if (!inplace) w += bench_check_move(g, s->send, c->send_elems, 0, r, "sendbuf (input modified)");
        break;
    case B_REDUCE:
        if (r == c->root) w += bench_check_reduce(g, s->recv, c->recv_elems, 0, "recvbuf on root");
        if (!inplace) w += bench_check_move(g, s->send, c->send_elems, 0, r, "sendbuf (input modified)");
        break;
    case B_BROADCAST:
        w += bench_check_move(g, s->recv, c->recv_elems, 0, c->root, "recvbuf");
        if (!inplace && r == c->root)
            w += bench_check_move(g, s->send, c->send_elems, 0, r, "sendbuf on root (input modified)");
        break;
    case B_ALLGATHER:
        for (int q = 0; q < n; q++) {
            snprintf(what, sizeof what, "recvbuf block %d", q);
            w += bench_check_move(g, AT(s->recv, (size_t)q * bc), bc, 0, q, what);
        }
        if (!inplace) w += bench_check_move(g, s->send, bc, 0, r, "sendbuf (input modified)");
        break;
    case B_REDUCE_SCATTER:
        if (inplace) {
            size_t blk = c->recv_elems; /* = count / n */
            w += bench_check_reduce(g, AT(s->send, (size_t)r * blk), blk, (uint64_t)r * blk,
                                    "in-place block of sendbuf");
        } else {
            w += bench_check_reduce(g, s->recv, c->recv_elems, (uint64_t)r * c->recv_elems, "recvbuf");
            w += bench_check_move(g, s->send, c->send_elems, 0, r, "sendbuf (input modified)");
        }
        break;
    case B_GATHER:
        if (r == c->root)
            for (int q = 0; q < n; q++) {
                snprintf(what, sizeof what, "root recvbuf block %d", q);
                w += bench_check_move(g, AT(s->recv, (size_t)q * bc), bc, 0, q, what);
            }
        w += bench_check_move(g, s->send, bc, 0, r, "sendbuf (input modified)");
        break;
    case B_SCATTER:
        w += bench_check_move(g, s->recv, bc, (uint64_t)r * bc, c->root, "recvbuf");
        if (r == c->root)
            w += bench_check_move(g, s->send, c->send_elems, 0, r, "root sendbuf (input modified)");
        break;
    case B_ALL_TO_ALL: {
        const unsigned char *out = s->recv;
        for (int q = 0; q < n; q++) {
            snprintf(what, sizeof what, "recvbuf block %d", q);
            w += bench_check_move(g, AT(out, (size_t)q * bc), bc, (uint64_t)r * bc, q, what);
        }
        if (!inplace) w += bench_check_move(g, s->send, c->send_elems, 0, r, "sendbuf (input modified)");
        break;
    }
    case B_SENDRECV:
        w += bench_check_move(g, s->recv, c->recv_elems, 0, (r - 1 + n) % n, "recvbuf");
        w += bench_check_move(g, s->send, c->send_elems, 0, r, "sendbuf (input modified)");
        break;
    default:
        break;
    }
    return w;
}

/* ---- dtrain calls ------------------------------------------------------------- */

static int wait_free(dt_work *w) {
    int rc = dt_work_wait(w);
    dt_work_free(w);
    return rc;
}

#define TRY(expr, name) do { int rc_ = (expr); \
    if (rc_ != DT_OK) { *what = (name); return rc_; } } while (0)
/* async: submit then wait */
#define TRYA(submit, name) do { dt_work *w_ = NULL; int rc_ = (submit); \
    if (rc_ != DT_OK) { *what = (name); return rc_; } \
    rc_ = wait_free(w_); if (rc_ != DT_OK) { *what = "dt_work_wait(" name ")"; return rc_; } \
    } while (0)

static int call_sendrecv(const bench_case *c, bench_set *s, const char **what) {
    int r = c->rank, n = c->nranks, next = (r + 1) % n, prev = (r - 1 + n) % n;
    size_t cnt = c->count;
    dt_comm *cm = c->comm;
    /* even ranks send first, odd ranks receive first: a deadlock-free ring
     * even if sends are synchronous */
    if (!c->async) {
        if (r % 2 == 0) {
            TRY(dt_send(s->send, cnt, c->dtype, next, cm), "dt_send");
            TRY(dt_recv(s->recv, cnt, c->dtype, prev, cm), "dt_recv");
        } else {
            TRY(dt_recv(s->recv, cnt, c->dtype, prev, cm), "dt_recv");
            TRY(dt_send(s->send, cnt, c->dtype, next, cm), "dt_send");
        }
        return DT_OK;
    }
    dt_work *w[2] = {NULL, NULL};
    int rc;
    if (r % 2 == 0) {
        rc = dt_send_async(s->send, cnt, c->dtype, next, cm, &w[0]);
        if (rc != DT_OK) { *what = "dt_send_async"; return rc; }
        rc = dt_recv_async(s->recv, cnt, c->dtype, prev, cm, &w[1]);
        if (rc != DT_OK) { dt_work_free(w[0]); *what = "dt_recv_async"; return rc; }
    } else {
        rc = dt_recv_async(s->recv, cnt, c->dtype, prev, cm, &w[0]);
        if (rc != DT_OK) { *what = "dt_recv_async"; return rc; }
        rc = dt_send_async(s->send, cnt, c->dtype, next, cm, &w[1]);
        if (rc != DT_OK) { dt_work_free(w[0]); *what = "dt_send_async"; return rc; }
    }
    int rc0 = wait_free(w[0]), rc1 = wait_free(w[1]);
    if (rc0 != DT_OK || rc1 != DT_OK) {
        *what = "dt_work_wait(send/recv)";
        return rc0 != DT_OK ? rc0 : rc1;
    }
    return DT_OK;
}

static int call_separate(const bench_case *c, bench_set *s, int inplace, const char **what) {
    int nt = c->ntensors;
    dt_op op = (dt_op)c->redop;
    if (!c->async) {
        for (int j = 0; j < nt; j++) {
            void *out = s->tout[j];
            TRY(dt_allreduce(inplace ? out : s->tin[j], out, c->tcount, c->dtype, op, c->comm),
                "dt_allreduce");
        }
        return DT_OK;
    }
    /* async: submit every tensor, then wait for all (how DDP buckets use it) */
    static dt_work **works;
    static int nworks;
    if (nworks < nt) {
        dt_work **nw = realloc(works, (size_t)nt * sizeof *nw);
        if (!nw) { *what = "malloc"; return DT_ERR_NOMEM; }
        works = nw;
        nworks = nt;
    }
    int submitted = 0, rc = DT_OK;
    for (int j = 0; j < nt; j++) {
        void *out = s->tout[j];
        rc = dt_allreduce_async(inplace ? out : s->tin[j], out, c->tcount, c->dtype, op, c->comm,
                                &works[j]);
        if (rc != DT_OK) { *what = "dt_allreduce_async"; break; }
        submitted++;
    }
    for (int j = 0; j < submitted; j++) {
        int rw = wait_free(works[j]);
        if (rw != DT_OK && rc == DT_OK) { rc = rw; *what = "dt_work_wait(dt_allreduce_async)"; }
    }
    return rc;
}

int bench_call_dtrain(const bench_case *c, bench_set *s, int inplace, const char **what) {
    size_t es = c->esize, cnt = c->count;
    int r = c->rank, n = c->nranks, root = c->root;
    dt_dtype dt = c->dtype;
    dt_op op = (dt_op)(c->redop < 0 ? DT_SUM : c->redop);
    dt_comm *cm = c->comm;
    unsigned char *S = s->send, *R = s->recv;
    int a = c->async;
    *what = "";
    switch (c->op) {
    case B_ALLREDUCE:
        if (c->mode == M_SEPARATE) return call_separate(c, s, inplace, what);
        if (c->mode == M_LIST) {
            const dt_tensor *in = inplace ? s->lout : s->lin;
            if (a) TRYA(dt_allreduce_list_async(in, s->lout, c->ntensors, op, cm, &w_),
                        "dt_allreduce_list_async");
            else TRY(dt_allreduce_list(in, s->lout, c->ntensors, op, cm), "dt_allreduce_list");
            return DT_OK;
        }
        if (c->wire) {
            dt_coll_opts o = {.wire = (dt_wire)c->wire};
            if (a) TRYA(dt_allreduce_ex(inplace ? R : S, R, cnt, dt, op, cm, &o, &w_), "dt_allreduce_ex(async)");
            else TRY(dt_allreduce_ex(inplace ? R : S, R, cnt, dt, op, cm, &o, NULL), "dt_allreduce_ex");
            return DT_OK;
        }
        if (a) TRYA(dt_allreduce_async(inplace ? R : S, R, cnt, dt, op, cm, &w_), "dt_allreduce_async");
        else TRY(dt_allreduce(inplace ? R : S, R, cnt, dt, op, cm), "dt_allreduce");
        return DT_OK;
    case B_ALLGATHER: {
        const void *in = inplace ? (const void *)AT(R, (size_t)r * cnt) : S;
        if (a) TRYA(dt_allgather_async(in, R, cnt, dt, cm, &w_), "dt_allgather_async");
        else TRY(dt_allgather(in, R, cnt, dt, cm), "dt_allgather");
        return DT_OK;
    }
    case B_REDUCE_SCATTER: {
        void *out = inplace ? (void *)AT(S, (size_t)r * (cnt / n)) : R;
        if (c->wire) {
            dt_coll_opts o = {.wire = (dt_wire)c->wire};
            if (a) TRYA(dt_reduce_scatter_ex(S, out, cnt, dt, op, cm, &o, &w_), "dt_reduce_scatter_ex(async)");
            else TRY(dt_reduce_scatter_ex(S, out, cnt, dt, op, cm, &o, NULL), "dt_reduce_scatter_ex");
            return DT_OK;
        }
        if (a) TRYA(dt_reduce_scatter_async(S, out, cnt, dt, op, cm, &w_), "dt_reduce_scatter_async");
        else TRY(dt_reduce_scatter(S, out, cnt, dt, op, cm), "dt_reduce_scatter");
        return DT_OK;
    }
    case B_REDUCE:
        if (a) TRYA(dt_reduce_async(inplace ? R : S, R, cnt, dt, op, root, cm, &w_), "dt_reduce_async");
        else TRY(dt_reduce(inplace ? R : S, R, cnt, dt, op, root, cm), "dt_reduce");
        return DT_OK;
    case B_BROADCAST:
        if (a) TRYA(dt_broadcast_async(inplace ? R : S, R, cnt, dt, root, cm, &w_), "dt_broadcast_async");
        else TRY(dt_broadcast(inplace ? R : S, R, cnt, dt, root, cm), "dt_broadcast");
        return DT_OK;
    case B_GATHER:
        if (a) TRYA(dt_gather_async(S, R, cnt, dt, root, cm, &w_), "dt_gather_async");
        else TRY(dt_gather(S, R, cnt, dt, root, cm), "dt_gather");
        return DT_OK;
    case B_SCATTER:
        if (a) TRYA(dt_scatter_async(S, R, cnt, dt, root, cm, &w_), "dt_scatter_async");
        else TRY(dt_scatter(S, R, cnt, dt, root, cm), "dt_scatter");
        return DT_OK;
    case B_ALL_TO_ALL:
        if (a) TRYA(dt_all_to_all_async(inplace ? R : S, R, cnt, dt, cm, &w_), "dt_all_to_all_async");
        else TRY(dt_all_to_all(inplace ? R : S, R, cnt, dt, cm), "dt_all_to_all");
        return DT_OK;
    case B_SENDRECV:
        return call_sendrecv(c, s, what);
    case B_BARRIER:
        if (a) TRYA(dt_barrier_async(cm, &w_), "dt_barrier_async");
        else TRY(dt_barrier(cm), "dt_barrier");
        return DT_OK;
    default:
        break;
    }
    (void)es;
    *what = "unknown op";
    return DT_ERR_INVALID;
}

/* ---- raw MPI reference ---------------------------------------------------------- */

static MPI_Datatype mpi_dtype(dt_dtype dt) {
    switch (dt) {
    case DT_F32: return MPI_FLOAT;
    case DT_F64: return MPI_DOUBLE;
    case DT_F16:
    case DT_BF16: return MPI_UINT16_T; /* data movement only: same bytes */
    case DT_I8: return MPI_INT8_T;
    case DT_U8: return MPI_UINT8_T;
    case DT_I32: return MPI_INT32_T;
    case DT_I64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL;
    }
}

static MPI_Op mpi_op(int op) {
    switch (op) {
    case DT_PROD: return MPI_PROD;
    case DT_MIN: return MPI_MIN;
    case DT_MAX: return MPI_MAX;
    default: return MPI_SUM; /* sum; avg has no MPI op: compared against MPI_SUM */
    }
}

int bench_mpi_available(const bench_case *c, int inplace) {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin) return 0;
    const bench_op_info *oi = &op_table[c->op];
    if (c->ref_single) return 1; /* a dtrain call: any dtype, both placements */
    if (oi->reduces && (c->dtype == DT_F16 || c->dtype == DT_BF16)) return 0;
    if (inplace && !oi->inplace) return 0;
    if (c->op == B_SENDRECV && c->nranks < 2) return 0;
    if (c->send_elems > INT_MAX || c->recv_elems > INT_MAX) return 0;
    return 1;
}

int bench_call_mpi(const bench_case *c, bench_set *s, int inplace) {
    MPI_Comm W = MPI_COMM_WORLD;
    MPI_Datatype t = mpi_dtype(c->dtype);
    MPI_Op op = mpi_op(c->redop);
    int r = c->rank, n = c->nranks, root = c->root;
    int cnt = (int)c->count;
    unsigned char *S = s->send, *R = s->recv;
    switch (c->op) {
    case B_ALLREDUCE:
        if (c->mode == M_SEPARATE) {
            for (int j = 0; j < c->ntensors; j++) {
                int rc = MPI_Allreduce(inplace ? MPI_IN_PLACE : s->tin[j], s->tout[j],
                                       (int)c->tcount, t, op, W);
                if (rc != MPI_SUCCESS) return rc;
            }
            return MPI_SUCCESS;
        }
        /* --vs-single (M_LIST): one dt_allreduce of the total size on the slabs */
        if (c->ref_single)
            return dt_allreduce(inplace ? (const void *)R : (const void *)S, R, c->recv_elems, c->dtype,
                                (dt_op)c->redop, c->comm) == DT_OK ? MPI_SUCCESS : MPI_ERR_OTHER;
        /* single, and M_LIST: one MPI_Allreduce of the total size on contiguous slabs */
        return MPI_Allreduce(inplace ? MPI_IN_PLACE : (void *)S, R, (int)c->recv_elems, t, op, W);
    case B_ALLGATHER:
        if (inplace) return MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, R, cnt, t, W);
        return MPI_Allgather(S, cnt, t, R, cnt, t, W);
    case B_REDUCE_SCATTER:
        if (inplace) return MPI_Reduce_scatter_block(MPI_IN_PLACE, S, cnt / n, t, op, W);
        return MPI_Reduce_scatter_block(S, R, cnt / n, t, op, W);
    case B_REDUCE:
        if (inplace) {
            if (r == root) return MPI_Reduce(MPI_IN_PLACE, R, cnt, t, op, root, W);
            return MPI_Reduce(R, NULL, cnt, t, op, root, W);
        }
        return MPI_Reduce(S, R, cnt, t, op, root, W);
    case B_BROADCAST:
        return MPI_Bcast((!inplace && r == root) ? (void *)S : (void *)R, cnt, t, root, W);
    case B_GATHER:
        return MPI_Gather(S, cnt, t, R, cnt, t, root, W);
    case B_SCATTER:
        return MPI_Scatter(S, cnt, t, R, cnt, t, root, W);
    case B_ALL_TO_ALL:
        if (inplace) return MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, R, cnt, t, W);
        return MPI_Alltoall(S, cnt, t, R, cnt, t, W);
    case B_SENDRECV: {
        /* ring shift: send to rank+1, receive from rank-1 in one call */
        int next = (r + 1) % n, prev = (r - 1 + n) % n;
        return MPI_Sendrecv(S, cnt, t, next, 0, R, cnt, t, prev, 0, W, MPI_STATUS_IGNORE);
    }
    case B_BARRIER:
        return MPI_Barrier(W);
    default:
        return MPI_ERR_OTHER;
    }
}
