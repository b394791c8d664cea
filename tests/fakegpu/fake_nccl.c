/* tests/fakegpu/fake_nccl.c - the NCCL calls dtrain makes, on the CPU
 * (fakegpu.h): communicators from a unique id or a split, the collectives and
 * send/recv on device memory of the communicator's device, groups (calls
 * queued until the outermost ncclGroupEnd, then send/recv progressed together
 * and the collectives run in order), asynchronous errors and abort. The data
 * path between processes is fake_shm.c. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "fake_shm.h"
#include "fakegpu.h"

static _Thread_local char t_last[384];

/* ---- results and errors ---------------------------------------------------------------- */

__attribute__((format(printf, 3, 4))) static ncclResult_t fail(struct ncclComm *c, ncclResult_t r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c ? c->last : t_last, sizeof t_last, fmt, ap);
    va_end(ap);
    return r;
}

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t c) { return c ? c->last : t_last; }

ncclResult_t ncclGetVersion(int *v) {
    FK_COUNTED(FK_LIB_NCCL);
    if (!v) return ncclInvalidArgument;
    *v = NCCL_VERSION_CODE;
    return ncclSuccess;
}

static int comm_ok(ncclComm_t c) { return c && c->magic == FK_COMM_LIVE; }
#define COMM(c) do { if (!comm_ok(c)) return fail(NULL, ncclInvalidArgument, "fakegpu: %s: not a live communicator", __func__); } while (0)

/* ---- communicators ----------------------------------------------------------------------------- */

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    FK_COUNTED(FK_LIB_NCCL);
    static _Atomic unsigned seq;
    if (!id) return ncclInvalidArgument;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "/dtfakegpu-%d-%lx-%u", (int)getpid(),
             (unsigned long)ts.tv_sec * 1000000000ul + (unsigned long)ts.tv_nsec, atomic_fetch_add(&seq, 1));
    return ncclSuccess;
}

/* DTRAIN_FAKEGPU_FAIL=RANK:N: this rank's world communicator fails after N calls */
static long fail_after(int rank) {
    const char *v = getenv("DTRAIN_FAKEGPU_FAIL");
    int r;
    long n;
    if (v && sscanf(v, "%d:%ld", &r, &n) == 2 && r == rank) return n;
    return -1;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int n, ncclUniqueId id, int rank) {
    FK_COUNTED(FK_LIB_NCCL);
    if (!comm) return fail(NULL, ncclInvalidArgument, "fakegpu: ncclCommInitRank: comm is NULL");
    *comm = NULL;
    if (n < 1 || n > FK_MAXR || rank < 0 || rank >= n)
        return fail(NULL, ncclInvalidArgument, "fakegpu: ncclCommInitRank: rank %d of %d ranks (the fake has 1 to %d)", rank, n, FK_MAXR);
    if (strncmp(id.internal, "/dtfakegpu-", 11) != 0 || !memchr(id.internal, 0, sizeof id.internal))
        return fail(NULL, ncclInvalidArgument, "fakegpu: ncclCommInitRank: not a unique id of ncclGetUniqueId");
    ncclResult_t r = fk_open(id.internal, n, rank, fk_current_device(), comm, t_last, sizeof t_last);
    if (r == ncclSuccess) (*comm)->world = 1;
    return r;
}

ncclResult_t ncclCommSplit(ncclComm_t c, int color, int key, ncclComm_t *out, ncclConfig_t *config) {
    FK_COUNTED(FK_LIB_NCCL);
    COMM(c);
    if (!out) return fail(c, ncclInvalidArgument, "fakegpu: ncclCommSplit: newcomm is NULL");
    *out = NULL;
    if (color < NCCL_SPLIT_NOCOLOR) return fail(c, ncclInvalidArgument, "fakegpu: ncclCommSplit: color %d", color);
    unsigned seq = ++c->splits;
    c->sh->color[c->rank] = color;
    c->sh->key[c->rank] = key;
    ncclResult_t r = fk_barrier(c);
    if (r != ncclSuccess) return r;
    /* my rank in my color: members ordered by key, then by rank */
    int n = 0, me = 0;
    for (int q = 0; q < c->n; q++) {
        if (c->sh->color[q] != color) continue;
        n++;
        if (c->sh->key[q] < key || (c->sh->key[q] == key && q < c->rank)) me++;
    }
    if ((r = fk_barrier(c)) != ncclSuccess) return r; /* the arrays are free again */
    if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
    char name[sizeof c->name];
    int w = snprintf(name, sizeof name, "%s.%uc%d", c->name, seq, color);
    if (w < 0 || (size_t)w >= sizeof name) return fail(c, ncclInternalError, "fakegpu: ncclCommSplit: splits nested too deep");
    return fk_open(name, n, me, c->dev, out, c->last, sizeof c->last);
}

ncclResult_t ncclCommCount(const ncclComm_t c, int *count) {
    FK_COUNTED(FK_LIB_NCCL);
    COMM(c);
    *count = c->n;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t c, int *rank) {
    FK_COUNTED(FK_LIB_NCCL);
    COMM(c);
    *rank = c->rank;
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t c) {
    FK_COUNTED(FK_LIB_NCCL);
    COMM(c);
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t c) {
    FK_COUNTED(FK_LIB_NCCL);
    COMM(c);
    fk_close(c);
    return ncclSuccess;
}

/* Aborted communicators stay mapped (another thread may be waiting inside
 * one); kept here, so that they are not leaks. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static ncclComm_t g_aborted[256];
static int g_naborted;

ncclResult_t ncclCommAbort(ncclComm_t c) {
    FK_COUNTED(FK_LIB_NCCL);
    if (!c) return ncclSuccess;
    COMM(c);
    atomic_store(&c->aborted, 1);
    fprintf(stderr, "fakegpu: rank %d: ncclCommAbort on communicator %s\n", c->rank, c->name);
    int none = 0;
    atomic_compare_exchange_strong(&c->sh->aborted, &none, c->rank + 1);
    pthread_mutex_lock(&g_mu);
    if (g_naborted < 256) g_aborted[g_naborted++] = c;
    pthread_mutex_unlock(&g_mu);
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e) {
    FK_COUNTED(FK_LIB_NCCL);
    COMM(c);
    if (!e) return ncclInvalidArgument;
    *e = (ncclResult_t)atomic_load(&c->async);
    if (*e == ncclSuccess && fk_alive(c) != ncclSuccess) *e = ncclRemoteError;
    return ncclSuccess;
}

/* ---- calls and groups ----------------------------------------------------------------------------- */

enum { K_AR, K_AG, K_RS, K_RED, K_BC, K_SEND, K_RECV };
static const char *const k_name[] = {"ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclReduce",
                                     "ncclBroadcast", "ncclSend", "ncclRecv"};

typedef struct fk_op {
    int kind;
    ncclComm_t c;
    const char *s; /* host addresses */
    char *r;
    size_t count;
    ncclDataType_t t;
    ncclRedOp_t op;
    int root;      /* root, or peer */
    size_t off;    /* send/recv: bytes moved so far */
    int done;
} fk_op;

static _Thread_local int t_depth;
static _Thread_local fk_op *t_q;
static _Thread_local size_t t_n, t_cap;
static _Thread_local ncclResult_t t_err; /* the first error of a call in the open group */

/* a buffer of `bytes` for c: device memory of c's device, inside one allocation */
static ncclResult_t dev_buf(ncclComm_t c, const void *p, size_t bytes, const char *what, char **host) {
    *host = NULL;
    if (bytes == 0) return ncclSuccess;
    int kind, dev;
    void *h;
    if (!p) return fail(c, ncclInvalidArgument, "fakegpu: %s is NULL (%zu bytes)", what, bytes);
    if (fk_mem(p, bytes, &kind, &dev, &h))
        return fail(c, ncclInvalidArgument, "fakegpu: %s (%p, %zu bytes) runs past the end of its allocation", what, p, bytes);
    if (kind != FK_DEVICE && kind != FK_MANAGED)
        return fail(c, ncclInvalidArgument, "fakegpu: %s (%p) is not device memory (memory type %d)", what, p, kind);
    if (kind == FK_DEVICE && dev != c->dev)
        return fail(c, ncclInvalidArgument, "fakegpu: %s (%p) is memory of device %d, the communicator's is %d", what, p, dev, c->dev);
    *host = h;
    return ncclSuccess;
}

static ncclResult_t run_ops(fk_op *q, size_t n);

static ncclResult_t check_args(fk_op *o, const void *s, void *r, cudaStream_t st) {
    ncclComm_t c = o->c;
    const char *fn = k_name[o->kind];
    size_t es = fk_type_size(o->t);
    if (es == 0) return fail(c, ncclInvalidArgument, "fakegpu: %s: datatype %d is not one the fake has", fn, (int)o->t);
    if ((o->kind == K_AR || o->kind == K_RS || o->kind == K_RED) && ((int)o->op < 0 || (int)o->op >= ncclNumOps))
        return fail(c, ncclInvalidArgument, "fakegpu: %s: reduction op %d", fn, (int)o->op);
    if ((o->kind == K_RED || o->kind == K_BC || o->kind == K_SEND || o->kind == K_RECV) && (o->root < 0 || o->root >= c->n))
        return fail(c, ncclInvalidArgument, "fakegpu: %s: root or peer %d of %d ranks", fn, o->root, c->n);
    if (!fk_stream_ok(st)) return fail(c, ncclInvalidArgument, "fakegpu: %s: the stream is not a live stream", fn);
    size_t n = (size_t)c->n, sb = o->count * es, rb = o->count * es;
    switch (o->kind) {
    case K_AG: rb *= n; break;
    case K_RS: sb *= n; break;
    case K_RED: if (o->root != c->rank) rb = 0; break;
    case K_BC: if (o->root != c->rank) sb = 0; break;
    case K_SEND: rb = 0; break;
    case K_RECV: sb = 0; break;
    default: break;
    }
    char *hs, *hr;
    ncclResult_t e = dev_buf(c, s, sb, "sendbuff", &hs);
    if (e == ncclSuccess) e = dev_buf(c, r, rb, "recvbuff", &hr);
    if (e != ncclSuccess) return e;
    o->s = hs;
    o->r = hr;
    return ncclSuccess;
}

static ncclResult_t enqueue(int kind, const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
                            ncclComm_t c, cudaStream_t st) {
    COMM(c);
    fk_op o = {kind, c, NULL, NULL, count, t, op, root, 0, 0};
    ncclResult_t e = check_args(&o, s, r, st);
    if (e == ncclSuccess) e = fk_alive(c);
    if (e != ncclSuccess) {
        if (t_depth > 0 && t_err == ncclSuccess) t_err = e;
        return e;
    }
    if (t_depth == 0) return run_ops(&o, 1);
    if (t_n == t_cap) {
        size_t cap = t_cap ? 2 * t_cap : 16;
        fk_op *q = realloc(t_q, cap * sizeof *q);
        if (!q) return fail(c, ncclSystemError, "fakegpu: %s: out of memory", k_name[kind]);
        t_q = q;
        t_cap = cap;
    }
    t_q[t_n++] = o;
    return ncclSuccess;
}

/* is an earlier op of the same direction and peer on the same comm still pending? */
static int queued_behind(const fk_op *q, size_t i) {
    for (size_t j = 0; j < i; j++)
        if (!q[j].done && q[j].kind == q[i].kind && q[j].c == q[i].c && q[j].root == q[i].root) return 1;
    return 0;
}

/* one step of a send or a receive; 1 if it moved */
static int p2p_step(fk_op *o, ncclResult_t *e) {
    ncclComm_t c = o->c;
    size_t total = o->count * fk_type_size(o->t);
    if (o->kind == K_SEND) {
        fk_box *b = fk_box_of(c, c->rank, o->root);
        if (atomic_load(&b->full)) return 0;
        size_t k = total - o->off < FK_CHUNK ? total - o->off : FK_CHUNK;
        if (k) memcpy(fk_box_data(b), o->s + o->off, k);
        b->bytes = (uint32_t)k;
        b->total = total;
        atomic_store(&b->full, 1);
        o->off += k;
        o->done = o->off == total;
        return 1;
    }
    fk_box *b = fk_box_of(c, o->root, c->rank);
    if (!atomic_load(&b->full)) return 0;
    if (b->total != total) {
        *e = fail(c, ncclInvalidUsage, "fakegpu: ncclRecv of %zu bytes from rank %d met an ncclSend of %llu bytes",
                  total, o->root, (unsigned long long)b->total);
        return 0;
    }
    if (b->bytes) memcpy(o->r + o->off, fk_box_data(b), b->bytes);
    o->off += b->bytes;
    atomic_store(&b->full, 0);
    o->done = o->off == total;
    return 1;
}

static ncclResult_t run_p2p(fk_op *q, size_t n) {
    size_t left = 0;
    for (size_t i = 0; i < n; i++) left += q[i].kind == K_SEND || q[i].kind == K_RECV;
    unsigned spins = 0;
    while (left) {
        int moved = 0;
        for (size_t i = 0; i < n; i++) {
            if ((q[i].kind != K_SEND && q[i].kind != K_RECV) || q[i].done || queued_behind(q, i)) continue;
            ncclResult_t e = ncclSuccess;
            if (p2p_step(&q[i], &e)) {
                moved = 1;
                if (q[i].done) left--;
            }
            if (e != ncclSuccess) return e;
            if ((e = fk_alive(q[i].c)) != ncclSuccess) return e;
        }
        if (moved) spins = 0;
        else fk_backoff(&spins);
    }
    return ncclSuccess;
}

static ncclResult_t run_one(fk_op *o) {
    ncclComm_t c = o->c;
    ncclResult_t e = ncclSuccess;
    switch (o->kind) {
    case K_AR: e = fk_allreduce(c, o->s, o->r, o->count, o->t, o->op); break;
    case K_AG: e = fk_allgather(c, o->s, o->r, o->count, o->t); break;
    case K_RS: e = fk_reduce_scatter(c, o->s, o->r, o->count, o->t, o->op); break;
    case K_RED: e = fk_reduce(c, o->s, o->r, o->count, o->t, o->op, o->root); break;
    case K_BC: e = fk_broadcast(c, o->s, o->r, o->count, o->t, o->root); break;
    default: return ncclSuccess;
    }
    c->calls++;
    long after = c->world ? fail_after(c->rank) : -1;
    if (after >= 0 && c->calls > after && atomic_load(&c->async) == ncclSuccess) {
        snprintf(c->last, sizeof c->last, "fakegpu: injected failure after %ld calls (DTRAIN_FAKEGPU_FAIL)", after);
        atomic_store(&c->async, ncclSystemError);
    }
    return e;
}

static ncclResult_t run_ops(fk_op *q, size_t n) {
    ncclResult_t e = run_p2p(q, n);
    for (size_t i = 0; i < n && e == ncclSuccess; i++) e = run_one(&q[i]);
    return e;
}

ncclResult_t ncclGroupStart(void) {
    FK_COUNTED(FK_LIB_NCCL);
    t_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
    FK_COUNTED(FK_LIB_NCCL);
    if (t_depth == 0) return fail(NULL, ncclInvalidUsage, "fakegpu: ncclGroupEnd without ncclGroupStart");
    if (--t_depth > 0) return ncclSuccess;
    ncclResult_t e = t_err;
    if (e == ncclSuccess) e = run_ops(t_q, t_n);
    free(t_q);
    t_q = NULL;
    t_n = t_cap = 0;
    t_err = ncclSuccess;
    return e;
}

ncclResult_t ncclAllReduce(const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           cudaStream_t st) {
    FK_COUNTED(FK_LIB_NCCL);
    return enqueue(K_AR, s, r, count, t, op, 0, c, st);
}

ncclResult_t ncclAllGather(const void *s, void *r, size_t count, ncclDataType_t t, ncclComm_t c, cudaStream_t st) {
    FK_COUNTED(FK_LIB_NCCL);
    return enqueue(K_AG, s, r, count, t, ncclSum, 0, c, st);
}

ncclResult_t ncclReduceScatter(const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                               cudaStream_t st) {
    FK_COUNTED(FK_LIB_NCCL);
    return enqueue(K_RS, s, r, count, t, op, 0, c, st);
}

ncclResult_t ncclReduce(const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op, int root, ncclComm_t c,
                        cudaStream_t st) {
    FK_COUNTED(FK_LIB_NCCL);
    return enqueue(K_RED, s, r, count, t, op, root, c, st);
}

ncclResult_t ncclBroadcast(const void *s, void *r, size_t count, ncclDataType_t t, int root, ncclComm_t c,
                           cudaStream_t st) {
    FK_COUNTED(FK_LIB_NCCL);
    return enqueue(K_BC, s, r, count, t, ncclSum, root, c, st);
}

ncclResult_t ncclSend(const void *s, size_t count, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
    FK_COUNTED(FK_LIB_NCCL);
    return enqueue(K_SEND, s, NULL, count, t, ncclSum, peer, c, st);
}

ncclResult_t ncclRecv(void *r, size_t count, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
    FK_COUNTED(FK_LIB_NCCL);
    return enqueue(K_RECV, NULL, r, count, t, ncclSum, peer, c, st);
}
