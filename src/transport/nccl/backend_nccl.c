/* src/transport/nccl/backend_nccl.c - the NCCL transport: device memory
 * between processes, each on a GPU of its own (transport.h, "Device
 * transports"; coll.h, "Device memory").
 *
 *  - World: rank 0 creates NCCL's unique id, every rank learns it through
 *    the bootstrap (dt_boot_allgather: under mpirun or under the tcp
 *    bootstrap alike, no MPI needed), ncclCommInitRank on the current device;
 *    then the ranks agree over the bootstrap on the outcome, so that a rank
 *    that failed makes every rank fail (each with NCCL's message or the
 *    failing ranks' numbers) instead of some of them going on.
 *  - rank_list groups: ncclCommSplit of the world with color = the group
 *    index and key = the world rank, so NCCL ranks are group ranks (members
 *    by ascending world rank, dtrain's rule); ranks in no group of more than
 *    one pass NCCL_SPLIT_NOCOLOR.
 *  - Calls: the collective layer's primitives, copies and a compressed
 *    wire's packing first (on the stream), then the transfers in one
 *    ncclGroupStart/End (a lone transfer, the common case, without: NCCL
 *    makes it a group of its own), then the wire's unpacking (wire_nccl.cu);
 *    a barrier is a one-element allreduce. Every dtype and op is mapped before anything is
 *    enqueued (nccl_map.c).
 *  - Checks (where neither the host transport nor the bootstrap can carry
 *    them): a second communicator of the same members, split off on first
 *    use, with its own stream: the headers are all-gathered (or swapped, for
 *    point to point) and copied to pinned host memory, and the host waits.
 *  - The watchdog: poll() reads ncclCommGetAsyncError of every live
 *    communicator; abort_all() calls ncclCommAbort on all of them before the
 *    job ends. Live communicators are kept in a list under a mutex for that
 *    (the watchdog runs on its own thread). */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bootstrap/bootstrap.h"
#include "core/device.h"
#include "core/error.h"
#include "transport/nccl/nccl_map.h"
#include "transport/nccl/wire_nccl.h"
#include "transport/transport.h"

typedef struct nccl_impl {
    ncclComm_t comm;
    int dev;
    const dt_comm *owner;      /* for messages */
    void *bar;                 /* device: the barrier's element */
    void *scratch;             /* device, grow-only */
    size_t scratch_cap;
    void *scratch_ev;          /* recorded after the last call that used the scratch */
    void *scratch_stream;      /* ... on this stream */
    /* the check channel (lazy) */
    ncclComm_t chk;
    cudaStream_t chk_stream;
    void *chk_ev;
    dt_fp_hdr *dhdr, *hhdr;    /* device / pinned host: max(size, 2) headers */
    int aborted;
    struct nccl_impl *next;    /* live list */
} nccl_impl;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static nccl_impl *g_live;
static int g_version;          /* of the library loaded */

static int nfail(ncclResult_t r, ncclComm_t comm, const char *call) {
    const char *last = comm ? ncclGetLastError(comm) : ncclGetLastError(NULL);
    return dt_error(DT_ERR_BACKEND, call, "NCCL error: %s%s%s", ncclGetErrorString(r), last && *last ? ": " : "",
                    last ? last : "");
}
static int cfail(cudaError_t e, const char *call) {
    return dt_error(DT_ERR_BACKEND, call, "CUDA error %s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
}
#define NC(call, comm, name) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) return nfail(r_, comm, name); } while (0)
#define CU(call, name) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return cfail(e_, name); } while (0)

static const char *comm_name(const dt_comm *c) { return c && c->key ? c->key : "world"; }

/* ---- device of a communicator: work on it, restore the caller's ------------------ */

typedef struct devguard { int prev, changed; } devguard;

static int on_device(int dev, devguard *g) {
    g->changed = 0;
    CU(cudaGetDevice(&g->prev), "cudaGetDevice");
    if (g->prev != dev) {
        CU(cudaSetDevice(dev), "cudaSetDevice");
        g->changed = 1;
    }
    return DT_OK;
}
static void off_device(const devguard *g) {
    if (g->changed) cudaSetDevice(g->prev);
}

/* ---- creation and destruction -------------------------------------------------------- */

static void live_add(nccl_impl *m) {
    pthread_mutex_lock(&g_mu);
    m->next = g_live;
    g_live = m;
    pthread_mutex_unlock(&g_mu);
}

static void live_remove(nccl_impl *m) {
    pthread_mutex_lock(&g_mu);
    for (nccl_impl **p = &g_live; *p; p = &(*p)->next)
        if (*p == m) { *p = m->next; break; }
    pthread_mutex_unlock(&g_mu);
}

/* Device resources of a new communicator (the barrier's element). */
static int impl_new(ncclComm_t comm, int dev, const dt_comm *owner, nccl_impl **out) {
    nccl_impl *m = calloc(1, sizeof *m);
    if (!m) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    m->comm = comm;
    m->dev = dev;
    m->owner = owner;
    devguard g;
    int rc = on_device(dev, &g);
    if (!rc) {
        cudaError_t e = cudaMalloc(&m->bar, 256);
        if (e != cudaSuccess) rc = cfail(e, "cudaMalloc");
        else if ((e = cudaMemset(m->bar, 0, 256)) != cudaSuccess) rc = cfail(e, "cudaMemset");
        off_device(&g);
    }
    if (rc) {
        if (m->bar) cudaFree(m->bar);
        free(m);
        return rc;
    }
    *out = m;
    return DT_OK;
}

static void impl_free(nccl_impl *m) {
    if (!m) return;
    live_remove(m);
    devguard g;
    int on = on_device(m->dev, &g) == DT_OK;
    if (!m->aborted) {
        if (m->chk) {
            ncclCommFinalize(m->chk);
            ncclCommDestroy(m->chk);
        }
        if (m->comm) {
            ncclCommFinalize(m->comm);
            ncclCommDestroy(m->comm);
        }
    }
    if (m->chk_ev) cudaEventDestroy((cudaEvent_t)m->chk_ev);
    if (m->chk_stream) cudaStreamDestroy(m->chk_stream);
    if (m->dhdr) cudaFree(m->dhdr);
    if (m->hhdr) cudaFreeHost(m->hhdr);
    if (m->scratch) cudaFree(m->scratch);
    if (m->scratch_ev) cudaEventDestroy((cudaEvent_t)m->scratch_ev);
    if (m->bar) cudaFree(m->bar);
    if (on) off_device(&g);
    free(m);
}

static void n_destroy(dt_comm *c) {
    impl_free(c->dev_impl);
    c->dev_impl = NULL;
}

/* Every rank's status after a collective NCCL step: DT_OK on all, else this
 * rank's own error, or one naming the ranks that failed. */
static int agree(int rc, const char *what) {
    const dt_boot *b = dt_boot_get();
    int32_t mine = rc, *all = malloc(sizeof *all * (size_t)b->size);
    if (!all) return rc ? rc : DT_ERR(DT_ERR_NOMEM, "out of memory");
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", dt_last_error());
    int arc = dt_boot_allgather(&mine, all, sizeof mine);
    if (arc) { free(all); return arc; }
    char ranks[256] = "";
    size_t n = 0;
    int bad = 0;
    for (int r = 0; r < b->size; r++)
        if (all[r] != DT_OK) {
            if (!bad) bad = all[r];
            if (n < sizeof ranks) n += (size_t)snprintf(ranks + n, sizeof ranks - n, "%s%d", n ? "," : "", r);
        }
    free(all);
    if (rc) return dt_error(rc, NULL, "%s", saved);
    if (bad) return dt_error(bad, what, "failed on rank(s) %s (see their messages)", ranks);
    return DT_OK;
}

static int n_world(dt_comm *w, int dev) {
    const dt_boot *b = dt_boot_get();
    struct { int32_t rc; int32_t pad; ncclUniqueId id; } mine, *all;
    memset(&mine, 0, sizeof mine);
    if (b->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&mine.id);
        if (r != ncclSuccess) mine.rc = nfail(r, NULL, "ncclGetUniqueId");
    }
    all = malloc(sizeof *all * (size_t)b->size);
    if (!all) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    int rc = dt_boot_allgather(&mine, all, sizeof mine);
    if (rc) { free(all); return rc; }
    ncclUniqueId id = all[0].id;
    int rc0 = all[0].rc;
    free(all);
    if (rc0) return b->rank == 0 ? rc0 : dt_error(rc0, "ncclGetUniqueId", "rank 0 could not create NCCL's unique id");
    ncclComm_t comm = NULL;
    devguard g;
    rc = on_device(dev, &g);
    if (!rc) {
        ncclResult_t r = ncclCommInitRank(&comm, b->size, id, b->rank);
        if (r != ncclSuccess) {
            rc = nfail(r, NULL, "ncclCommInitRank");
            comm = NULL;
        }
        off_device(&g);
    }
    nccl_impl *m = NULL;
    if (!rc) rc = impl_new(comm, dev, w, &m);
    rc = agree(rc, "ncclCommInitRank");
    if (rc) {
        if (m) impl_free(m);
        else if (comm) ncclCommAbort(comm);
        return rc;
    }
    w->dev_impl = m;
    live_add(m);
    return DT_OK;
}

static int n_split(dt_comm *world, int color, dt_comm *out) {
    nccl_impl *wm = world->dev_impl;
    ncclComm_t nc = NULL;
    devguard g;
    int rc = on_device(wm->dev, &g);
    if (rc) return rc;
    ncclResult_t r = ncclCommSplit(wm->comm, color >= 0 ? color : NCCL_SPLIT_NOCOLOR, world->info.rank, &nc, NULL);
    off_device(&g);
    if (r != ncclSuccess) return nfail(r, wm->comm, "ncclCommSplit");
    if (color < 0) {
        if (nc) ncclCommDestroy(nc);
        return DT_OK;
    }
    int cnt = -1, me = -1;
    ncclCommCount(nc, &cnt);
    ncclCommUserRank(nc, &me);
    if (cnt != out->info.size || me != out->info.rank) {
        ncclCommDestroy(nc);
        return DT_ERR(DT_ERR_INTERNAL, "ncclCommSplit gave rank %d of %d, expected %d of %d", me, cnt, out->info.rank,
                      out->info.size);
    }
    nccl_impl *m;
    if ((rc = impl_new(nc, wm->dev, out, &m))) {
        ncclCommDestroy(nc);
        return rc;
    }
    out->dev_impl = m;
    live_add(m);
    return DT_OK;
}

/* ---- calls ------------------------------------------------------------------------------ */

/* q's NCCL type and op (ops of reductions only; 0 otherwise) */
static int map_prim(const dt_prim *q, int *t, int *o) {
    int rc;
    *o = 0;
    if ((rc = dt_nccl_dtype(q->dtype, g_version, t))) return rc;
    if (q->kind == DT_PRIM_ALLREDUCE || q->kind == DT_PRIM_REDUCE || q->kind == DT_PRIM_REDUCE_SCATTER)
        return dt_nccl_op(q->op, g_version, o);
    return DT_OK;
}

/* Enqueue transfer q (type ti, op oi) on s; *what: the NCCL call's name. */
static ncclResult_t transfer(const dt_comm *c, const nccl_impl *m, const dt_prim *q, int ti, int oi, cudaStream_t s,
                             const char **what) {
    ncclDataType_t t = (ncclDataType_t)ti;
    ncclRedOp_t o = (ncclRedOp_t)oi;
    /* NCCL's one-rank reduction kernel (avg is a pre-multiplied sum there)
     * gives each block count / blocks elements rounded up to a 16-byte
     * pack and drops the rest when that quotient is already whole packs:
     * NCCL 2.28.9 left the last 3 of 2^20 + 3 f32 unwritten on an H100.
     * Over one rank avg is the sum (x / 1), which NCCL copies whole. */
    if (o == ncclAvg && c->info.size == 1) o = ncclSum;
    switch (q->kind) {
    case DT_PRIM_ALLREDUCE: *what = "ncclAllReduce"; return ncclAllReduce(q->send, q->recv, q->count, t, o, m->comm, s);
    case DT_PRIM_ALLGATHER: *what = "ncclAllGather"; return ncclAllGather(q->send, q->recv, q->count, t, m->comm, s);
    case DT_PRIM_REDUCE_SCATTER:
        *what = "ncclReduceScatter";
        return ncclReduceScatter(q->send, q->recv, q->count, t, o, m->comm, s);
    case DT_PRIM_REDUCE: *what = "ncclReduce"; return ncclReduce(q->send, q->recv, q->count, t, o, q->peer, m->comm, s);
    case DT_PRIM_BROADCAST: *what = "ncclBroadcast"; return ncclBroadcast(q->send, q->recv, q->count, t, q->peer, m->comm, s);
    case DT_PRIM_SEND: *what = "ncclSend"; return ncclSend(q->send, q->count, t, q->peer, m->comm, s);
    case DT_PRIM_RECV: *what = "ncclRecv"; return ncclRecv(q->recv, q->count, t, q->peer, m->comm, s);
    case DT_PRIM_BARRIER: *what = "ncclAllReduce"; return ncclAllReduce(m->bar, m->bar, 1, ncclInt32, ncclSum, m->comm, s);
    default: return ncclSuccess; /* copies: done before */
    }
}

/* p[i] is one of the steps on this rank around the group's transfers */
static int local_step(const dt_prim *q) {
    return q->kind == DT_PRIM_COPY || q->kind == DT_PRIM_PACK || q->kind == DT_PRIM_UNPACK;
}

/* whether q reads or writes the scratch */
static int in_scratch(const nccl_impl *m, const dt_prim *q) {
    const char *a = m->scratch, *b = a ? a + m->scratch_cap : NULL;
    const char *x = q->send, *y = q->recv;
    return a && ((x >= a && x < b) || (y >= a && y < b));
}

/* Before a call that uses the scratch: its stream waits for the last such
 * call's, when that ran on another stream (NCCL orders one stream itself). */
static int scratch_enter(nccl_impl *m, cudaStream_t s) {
    if (!m->scratch_ev) CU(cudaEventCreateWithFlags((cudaEvent_t *)&m->scratch_ev, cudaEventDisableTiming),
                           "cudaEventCreateWithFlags");
    else if (m->scratch_stream != (void *)s) CU(cudaStreamWaitEvent(s, (cudaEvent_t)m->scratch_ev, 0), "cudaStreamWaitEvent");
    return DT_OK;
}

static int scratch_leave(nccl_impl *m, cudaStream_t s) {
    CU(cudaEventRecord((cudaEvent_t)m->scratch_ev, s), "cudaEventRecord");
    m->scratch_stream = (void *)s;
    return DT_OK;
}

static int n_run(dt_comm *c, const dt_prim *p, int n, void *stream, void *done) {
    nccl_impl *m = c->dev_impl;
    cudaStream_t s = (cudaStream_t)stream;
    const char *what = "";
    int rc, t, o;
    if (n == 1 && !local_step(p)) { /* the usual call: a lone transfer, its own group in NCCL */
        if ((rc = map_prim(p, &t, &o))) return rc;
        ncclResult_t r = transfer(c, m, p, t, o, s, &what);
        if (r != ncclSuccess) return nfail(r, m->comm, what);
        if (done) CU(cudaEventRecord((cudaEvent_t)done, s), "cudaEventRecord");
        return DT_OK;
    }
    /* every dtype and op first: nothing is enqueued for a call NCCL cannot make */
    int scratch = 0;
    for (int i = 0; i < n; i++) {
        if ((rc = map_prim(&p[i], &t, &o))) return rc;
        scratch |= in_scratch(m, &p[i]);
    }
    if (scratch && (rc = scratch_enter(m, s))) return rc;
    for (int i = 0; i < n; i++) {
        const dt_prim *q = &p[i];
        if (q->kind == DT_PRIM_COPY)
            CU(cudaMemcpyAsync(q->recv, q->send, q->count * dt_dtype_size(q->dtype), cudaMemcpyDeviceToDevice, s),
               "cudaMemcpyAsync");
        else if (q->kind == DT_PRIM_PACK &&
                 (rc = dt_nccl_wire_pack(q->recv, q->send, q->count, q->dtype == DT_BF16 ? DT_WIRE_BF16 : DT_WIRE_F16, s)))
            return rc;
    }
    int transfers = 0;
    for (int i = 0; i < n; i++) transfers += !local_step(&p[i]);
    int group = transfers > 1;
    if (group) NC(ncclGroupStart(), m->comm, "ncclGroupStart");
    ncclResult_t first = ncclSuccess;
    for (int i = 0; i < n && first == ncclSuccess; i++) {
        if (local_step(&p[i])) continue;
        map_prim(&p[i], &t, &o);
        first = transfer(c, m, &p[i], t, o, s, &what);
    }
    ncclResult_t end = group ? ncclGroupEnd() : ncclSuccess;
    if (first != ncclSuccess) return nfail(first, m->comm, what);
    if (end != ncclSuccess) return nfail(end, m->comm, "ncclGroupEnd");
    for (int i = 0; i < n; i++) {
        const dt_prim *q = &p[i];
        if (q->kind == DT_PRIM_UNPACK &&
            (rc = dt_nccl_wire_unpack(q->recv, q->send, q->count, q->dtype == DT_BF16 ? DT_WIRE_BF16 : DT_WIRE_F16,
                                      q->divisor, s)))
            return rc;
    }
    if (scratch && (rc = scratch_leave(m, s))) return rc;
    if (done) CU(cudaEventRecord((cudaEvent_t)done, s), "cudaEventRecord");
    return DT_OK;
}

static void *n_scratch(dt_comm *c, size_t bytes) {
    nccl_impl *m = c->dev_impl;
    if (bytes <= m->scratch_cap) return m->scratch;
    devguard g;
    if (on_device(m->dev, &g)) return NULL;
    /* the old scratch may still be read by work in flight on some stream */
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess && m->scratch) e = cudaFree(m->scratch);
    m->scratch = NULL;
    m->scratch_cap = 0;
    if (e == cudaSuccess) e = cudaMalloc(&m->scratch, bytes);
    off_device(&g);
    if (e != cudaSuccess) {
        m->scratch = NULL;
        cfail(e, "cudaMalloc");
        return NULL;
    }
    m->scratch_cap = bytes;
    return m->scratch;
}

static int n_device(const dt_comm *c) { return ((const nccl_impl *)c->dev_impl)->dev; }

static int n_async_error(dt_comm *c) {
    nccl_impl *m = c->dev_impl;
    ncclResult_t e = ncclSuccess;
    if (ncclCommGetAsyncError(m->comm, &e) == ncclSuccess && e != ncclSuccess && e != ncclInProgress)
        return dt_error(DT_ERR_BACKEND, "NCCL", "asynchronous error on communicator %s: %s: %s", comm_name(c),
                        ncclGetErrorString(e), ncclGetLastError(m->comm));
    return DT_OK;
}

/* ---- the check channel ----------------------------------------------------------------- */

static int check_channel(dt_comm *c) {
    nccl_impl *m = c->dev_impl;
    if (m->chk) return DT_OK;
    int slots = c->info.size > 2 ? c->info.size : 2;
    devguard g;
    int rc = on_device(m->dev, &g);
    if (rc) return rc;
    ncclResult_t r = ncclCommSplit(m->comm, 0, c->info.rank, &m->chk, NULL);
    cudaError_t e = cudaSuccess;
    if (r == ncclSuccess) e = cudaStreamCreateWithFlags(&m->chk_stream, cudaStreamNonBlocking);
    if (r == ncclSuccess && e == cudaSuccess) e = cudaMalloc((void **)&m->dhdr, sizeof(dt_fp_hdr) * (size_t)slots);
    if (r == ncclSuccess && e == cudaSuccess) e = cudaHostAlloc((void **)&m->hhdr, sizeof(dt_fp_hdr) * (size_t)slots, 0);
    if (r == ncclSuccess && e == cudaSuccess) e = cudaEventCreateWithFlags((cudaEvent_t *)&m->chk_ev, cudaEventDisableTiming);
    off_device(&g);
    if (r != ncclSuccess) { m->chk = NULL; return nfail(r, m->comm, "ncclCommSplit"); }
    if (e != cudaSuccess) return cfail(e, "the NCCL check channel's buffers");
    return DT_OK;
}

static int chk_poll(void *arg) {
    nccl_impl *m = arg;
    ncclResult_t e = ncclSuccess;
    if (ncclCommGetAsyncError(m->chk, &e) == ncclSuccess && e != ncclSuccess && e != ncclInProgress)
        return dt_error(DT_ERR_BACKEND, "NCCL", "asynchronous error on the check channel of communicator %s: %s",
                        comm_name(m->owner), ncclGetErrorString(e));
    return DT_OK;
}

/* copy `n` headers from device back to pinned host memory and wait */
static int chk_finish(nccl_impl *m, const void *dsrc, void *hdst, size_t n) {
    CU(cudaMemcpyAsync(hdst, dsrc, n * sizeof(dt_fp_hdr), cudaMemcpyDeviceToHost, m->chk_stream), "cudaMemcpyAsync");
    CU(cudaEventRecord((cudaEvent_t)m->chk_ev, m->chk_stream), "cudaEventRecord");
    return dt_dev_event_wait(m->chk_ev, chk_poll, m);
}

static int n_check(dt_comm *c, dt_fp_hdr *hdr) {
    int rc = check_channel(c);
    if (rc) return rc;
    nccl_impl *m = c->dev_impl;
    int p = c->info.size, me = c->info.rank;
    m->hhdr[me] = *hdr;
    CU(cudaMemcpyAsync(m->dhdr + me, m->hhdr + me, sizeof *hdr, cudaMemcpyHostToDevice, m->chk_stream), "cudaMemcpyAsync");
    NC(ncclAllGather(m->dhdr + me, m->dhdr, sizeof *hdr, ncclUint8, m->chk, m->chk_stream), m->chk, "ncclAllGather");
    if ((rc = chk_finish(m, m->dhdr, m->hhdr, (size_t)p))) return rc;
    for (int r = 0; r < p; r++)
        if (m->hhdr[r].fp != hdr->fp || (m->hhdr[r].flags & DT_FP_MISMATCH)) hdr->flags |= DT_FP_MISMATCH;
    return DT_OK;
}

static int n_gather_views(dt_comm *c, const dt_fp_hdr *mine, dt_fp_hdr *all) {
    nccl_impl *m = c->dev_impl;
    if (!m->hhdr) return DT_ERR(DT_ERR_INTERNAL, "no check headers to show");
    memcpy(all, m->hhdr, sizeof *all * (size_t)c->info.size); /* the last check's, every rank's */
    return DT_OK;
}

static int n_p2p_check(dt_comm *c, int peer, const dt_fp_hdr *mine, dt_fp_hdr *theirs) {
    int rc = check_channel(c);
    if (rc) return rc;
    nccl_impl *m = c->dev_impl;
    m->hhdr[0] = *mine;
    CU(cudaMemcpyAsync(m->dhdr, m->hhdr, sizeof *mine, cudaMemcpyHostToDevice, m->chk_stream), "cudaMemcpyAsync");
    NC(ncclGroupStart(), m->chk, "ncclGroupStart");
    ncclResult_t r1 = ncclSend(m->dhdr, sizeof *mine, ncclUint8, peer, m->chk, m->chk_stream);
    ncclResult_t r2 = ncclRecv(m->dhdr + 1, sizeof *mine, ncclUint8, peer, m->chk, m->chk_stream);
    ncclResult_t r3 = ncclGroupEnd();
    if (r1 != ncclSuccess) return nfail(r1, m->chk, "ncclSend");
    if (r2 != ncclSuccess) return nfail(r2, m->chk, "ncclRecv");
    if (r3 != ncclSuccess) return nfail(r3, m->chk, "ncclGroupEnd");
    if ((rc = chk_finish(m, m->dhdr + 1, m->hhdr + 1, 1))) return rc;
    *theirs = m->hhdr[1];
    return DT_OK;
}

const dt_dev_backend dt_backend_nccl = {
    .name = "nccl",
    .run = n_run,
    .check = n_check,
    .gather_views = n_gather_views,
    .p2p_check = n_p2p_check,
    .async_error = n_async_error,
    .split = n_split,
    .device = n_device,
    .scratch = n_scratch,
    .max_count = (size_t)-1,
    .destroy = n_destroy,
};

/* ---- the transport's entry (transport.c's table) and the watchdog's hooks --------------- */

static int n_probe(int dev) {
    if (!dt_dev()->is_cuda)
        return DT_ERR(DT_ERR_UNSUPPORTED, "NCCL needs the CUDA runtime; the device runtime in use is '%s'",
                      dt_dev()->name);
    int v = 0;
    ncclResult_t r = ncclGetVersion(&v);
    if (r != ncclSuccess) return nfail(r, NULL, "ncclGetVersion");
    if (v < DT_NCCL_SPLIT)
        return DT_ERR(DT_ERR_UNSUPPORTED, "NCCL %d.%d.%d is older than 2.18 (ncclCommSplit)", v / 10000, v / 100 % 100,
                      v % 100);
    g_version = v;
    return DT_OK;
}

static int n_poll(char *msg, size_t cap) {
    int rc = DT_OK;
    pthread_mutex_lock(&g_mu);
    for (nccl_impl *m = g_live; m && rc == DT_OK; m = m->next) {
        ncclResult_t e = ncclSuccess;
        if (m->aborted || ncclCommGetAsyncError(m->comm, &e) != ncclSuccess) continue;
        if (e != ncclSuccess && e != ncclInProgress) {
            snprintf(msg, cap, "NCCL reported an asynchronous error on communicator %s: %s (%s)", comm_name(m->owner),
                     ncclGetErrorString(e), ncclGetLastError(m->comm));
            rc = DT_ERR_BACKEND;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* Before the job ends: stop what runs on the GPU. The watchdog's thread calls
 * this while others may be inside NCCL (that is what ncclCommAbort is for);
 * the list lock is only tried, the process ends right after. */
static void n_abort_all(void) {
    int locked = 0;
    for (int i = 0; i < 100 && !locked; i++) {
        locked = pthread_mutex_trylock(&g_mu) == 0;
        if (!locked) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    for (nccl_impl *m = g_live; m; m = m->next) {
        if (m->aborted) continue;
        m->aborted = 1;
        if (m->chk) ncclCommAbort(m->chk);
        ncclCommAbort(m->comm);
    }
    if (locked) pthread_mutex_unlock(&g_mu);
}

const dt_dev_transport dt_dev_transport_nccl = {
    .name = "nccl",
    .ops = &dt_backend_nccl,
    .probe = n_probe,
    .world = n_world,
    .finalize = NULL,
    .poll = n_poll,
    .abort_all = n_abort_all,
};
