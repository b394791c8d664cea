/* tests/device/fake_devnet.c - see fake_devnet.h. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/device.h"
#include "core/error.h"
#include "fake_devnet.h"
#include "fake_device.h"

typedef struct fimpl {
    MPI_Comm comm;
    int dev;
    dt_fp_hdr *views;
    void *scratch;
    size_t cap;
} fimpl;

static long g_prims;
static int g_last[256], g_nlast, g_aborts;
static char g_fail[256];

long fake_devnet_prims(void) { return g_prims; }
int fake_devnet_last(int *kinds, int cap) {
    for (int i = 0; i < g_nlast && i < cap; i++) kinds[i] = g_last[i];
    return g_nlast;
}
int fake_devnet_aborts(void) { return g_aborts; }
void fake_devnet_fail(const char *msg) { snprintf(g_fail, sizeof g_fail, "%s", msg); }

static fimpl *impl(const dt_comm *c) { return c->dev_impl; }

/* ---- exact reductions (those of tests/coll/coll_common.h's references) ---- */
static int is_int(dt_dtype dt) { return dt == DT_I8 || dt == DT_U8 || dt == DT_I32 || dt == DT_I64; }
static int64_t ldi(dt_dtype dt, const char *p) {
    switch (dt) {
    case DT_I8: { int8_t x; memcpy(&x, p, 1); return x; }
    case DT_U8: { uint8_t x; memcpy(&x, p, 1); return x; }
    case DT_I32: { int32_t x; memcpy(&x, p, 4); return x; }
    default: { int64_t x; memcpy(&x, p, 8); return x; }
    }
}
static void sti(dt_dtype dt, char *p, int64_t v) {
    switch (dt) {
    case DT_I8: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
    case DT_U8: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case DT_I32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}
static double ldf(dt_dtype dt, const char *p) {
    switch (dt) {
    case DT_F32: { float x; memcpy(&x, p, 4); return x; }
    case DT_F64: { double x; memcpy(&x, p, 8); return x; }
    case DT_F16: { uint16_t h; memcpy(&h, p, 2); return dt_f16_to_f32(h); }
    default: { uint16_t h; memcpy(&h, p, 2); return dt_bf16_to_f32(h); }
    }
}

/* out[i] = op over the P inputs all[k * stride + i] (k in rank order) */
static void reduce(dt_dtype dt, dt_op op, int P, const char *all, size_t stride_bytes, size_t count, char *out) {
    size_t es = dt_dtype_size(dt);
    for (size_t i = 0; i < count; i++) {
        char *o = out + i * es;
        if (is_int(dt)) {
            int64_t acc = 0;
            for (int k = 0; k < P; k++) {
                int64_t v = ldi(dt, all + (size_t)k * stride_bytes + i * es);
                if (k == 0) acc = v;
                else if (op == DT_SUM || op == DT_AVG) acc = (int64_t)((uint64_t)acc + (uint64_t)v);
                else if (op == DT_PROD) acc = (int64_t)((uint64_t)acc * (uint64_t)v);
                else if (op == DT_MIN) acc = v < acc ? v : acc;
                else acc = v > acc ? v : acc;
            }
            if (op == DT_AVG) acc /= P;
            sti(dt, o, acc);
        } else if (op == DT_MIN || op == DT_MAX) {
            double best = 0;
            for (int k = 0; k < P; k++) {
                const char *e = all + (size_t)k * stride_bytes + i * es;
                double v = ldf(dt, e);
                if (k == 0 || (op == DT_MIN ? v < best : v > best)) { best = v; memcpy(o, e, es); }
            }
        } else {
            double acc = 0;
            for (int k = 0; k < P; k++) {
                double v = ldf(dt, all + (size_t)k * stride_bytes + i * es);
                acc = k == 0 ? v : op == DT_PROD ? acc * v : acc + v;
            }
            if (dt == DT_F64) {
                double r = op == DT_AVG ? acc / (double)P : acc;
                memcpy(o, &r, 8);
            } else {
                float f = (float)acc;
                if (op == DT_AVG) f = f / (float)P;
                if (dt == DT_F32) memcpy(o, &f, 4);
                else {
                    uint16_t h = dt == DT_F16 ? dt_f32_to_f16(f) : dt_f32_to_bf16(f);
                    memcpy(o, &h, 2);
                }
            }
        }
    }
}

static int mfail(int rc, const char *call) { return dt_error(DT_ERR_BACKEND, call, "fake devnet: MPI error %d", rc); }
#define M(call, name) do { int r_ = (call); if (r_ != MPI_SUCCESS) return mfail(r_, name); } while (0)

/* every rank's `bytes` from `mine`, into a new buffer */
static int gather_all(MPI_Comm comm, int P, const void *mine, size_t bytes, char **all) {
    *all = malloc(bytes * (size_t)P + 1);
    if (!*all) return DT_ERR(DT_ERR_NOMEM, "fake devnet: out of memory");
    M(MPI_Allgather(mine, (int)bytes, MPI_BYTE, *all, (int)bytes, MPI_BYTE, comm), "MPI_Allgather");
    return DT_OK;
}

static int fn_run(dt_comm *c, const dt_prim *p, int n, void *stream, void *done) {
    fimpl *m = impl(c);
    int P = c->info.size, r = c->info.rank, rc = DT_OK;
    MPI_Request req[512];
    int nreq = 0;
    if (g_fail[0]) return dt_error(DT_ERR_BACKEND, "fake devnet", "%s", g_fail);
    g_nlast = 0;
    for (int i = 0; i < n; i++) {
        g_prims++;
        if (g_nlast < 256) g_last[g_nlast++] = p[i].kind;
        if (p[i].kind == DT_PRIM_COPY) memmove(p[i].recv, p[i].send, p[i].count * dt_dtype_size(p[i].dtype));
    }
    for (int i = 0; i < n && !rc; i++) {
        const dt_prim *q = &p[i];
        size_t es = dt_dtype_size(q->dtype), b = q->count * es;
        char *all = NULL;
        switch (q->kind) {
        case DT_PRIM_ALLREDUCE:
            if (!(rc = gather_all(m->comm, P, q->send, b, &all))) reduce(q->dtype, q->op, P, all, b, q->count, q->recv);
            break;
        case DT_PRIM_REDUCE_SCATTER:
            if (!(rc = gather_all(m->comm, P, q->send, b * (size_t)P, &all)))
                reduce(q->dtype, q->op, P, all + (size_t)r * b, b * (size_t)P, q->count, q->recv);
            break;
        case DT_PRIM_REDUCE:
            if (!(rc = gather_all(m->comm, P, q->send, b, &all)) && r == q->peer)
                reduce(q->dtype, q->op, P, all, b, q->count, q->recv);
            break;
        case DT_PRIM_ALLGATHER: {
            const void *s = (const char *)q->send == (char *)q->recv + (size_t)r * b ? MPI_IN_PLACE : q->send;
            int mr = MPI_Allgather(s, (int)b, MPI_BYTE, q->recv, (int)b, MPI_BYTE, m->comm);
            if (mr != MPI_SUCCESS) rc = mfail(mr, "MPI_Allgather");
            break;
        }
        case DT_PRIM_BROADCAST: {
            if (r == q->peer && q->send != q->recv && b) memmove(q->recv, q->send, b);
            int mr = MPI_Bcast(q->recv, (int)b, MPI_BYTE, q->peer, m->comm);
            if (mr != MPI_SUCCESS) rc = mfail(mr, "MPI_Bcast");
            break;
        }
        case DT_PRIM_SEND:
            if (nreq < 512 && MPI_Isend(q->send, (int)b, MPI_BYTE, q->peer, 77, m->comm, &req[nreq++]) != MPI_SUCCESS)
                rc = mfail(1, "MPI_Isend");
            break;
        case DT_PRIM_RECV:
            if (nreq < 512 && MPI_Irecv(q->recv, (int)b, MPI_BYTE, q->peer, 77, m->comm, &req[nreq++]) != MPI_SUCCESS)
                rc = mfail(1, "MPI_Irecv");
            break;
        case DT_PRIM_BARRIER: {
            int mr = MPI_Barrier(m->comm);
            if (mr != MPI_SUCCESS) rc = mfail(mr, "MPI_Barrier");
            break;
        }
        default: break;
        }
        free(all);
    }
    if (nreq) M(MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE), "MPI_Waitall");
    if (!rc && done) rc = dt_dev()->event_record(done, stream);
    return rc;
}

static int fn_check(dt_comm *c, dt_fp_hdr *hdr) {
    fimpl *m = impl(c);
    int P = c->info.size;
    if (!m->views && !(m->views = malloc(sizeof *m->views * (size_t)P))) return DT_ERR(DT_ERR_NOMEM, "oom");
    M(MPI_Allgather(hdr, (int)sizeof *hdr, MPI_BYTE, m->views, (int)sizeof *hdr, MPI_BYTE, m->comm), "MPI_Allgather");
    for (int k = 0; k < P; k++)
        if (m->views[k].fp != hdr->fp || (m->views[k].flags & DT_FP_MISMATCH)) hdr->flags |= DT_FP_MISMATCH;
    return DT_OK;
}

static int fn_views(dt_comm *c, const dt_fp_hdr *mine, dt_fp_hdr *all) {
    fimpl *m = impl(c);
    if (!m->views) return DT_ERR(DT_ERR_INTERNAL, "no views");
    memcpy(all, m->views, sizeof *all * (size_t)c->info.size);
    return DT_OK;
}

static int fn_p2p(dt_comm *c, int peer, const dt_fp_hdr *mine, dt_fp_hdr *theirs) {
    M(MPI_Sendrecv(mine, (int)sizeof *mine, MPI_BYTE, peer, 78, theirs, (int)sizeof *theirs, MPI_BYTE, peer, 78,
                   impl(c)->comm, MPI_STATUS_IGNORE), "MPI_Sendrecv");
    return DT_OK;
}

static int fn_async_error(dt_comm *c) {
    if (g_fail[0]) return dt_error(DT_ERR_BACKEND, "fake devnet", "%s", g_fail);
    return DT_OK;
}

static int fn_split(dt_comm *world, int color, dt_comm *out) {
    MPI_Comm nc;
    M(MPI_Comm_split(impl(world)->comm, color >= 0 ? color : MPI_UNDEFINED, world->info.rank, &nc), "MPI_Comm_split");
    if (color < 0) return DT_OK;
    fimpl *m = calloc(1, sizeof *m);
    if (!m) return DT_ERR(DT_ERR_NOMEM, "oom");
    m->comm = nc;
    m->dev = impl(world)->dev;
    out->dev_impl = m;
    return DT_OK;
}

static int fn_device(const dt_comm *c) { return impl(c)->dev; }

static void *fn_scratch(dt_comm *c, size_t bytes) {
    fimpl *m = impl(c);
    if (bytes > m->cap) {
        if (m->scratch) fake_dev_free(m->scratch);
        m->scratch = fake_dev_malloc(bytes, m->dev);
        m->cap = m->scratch ? bytes : 0;
    }
    if (!m->scratch) dt_error(DT_ERR_NOMEM, "fake devnet", "no scratch");
    return m->scratch;
}

static void fn_destroy(dt_comm *c) {
    fimpl *m = impl(c);
    if (!m) return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Comm_free(&m->comm);
    if (m->scratch) fake_dev_free(m->scratch);
    free(m->views);
    free(m);
    c->dev_impl = NULL;
}

static const dt_dev_backend fake_backend = {
    .name = "fakenet",
    .run = fn_run,
    .check = fn_check,
    .gather_views = fn_views,
    .p2p_check = fn_p2p,
    .async_error = fn_async_error,
    .split = fn_split,
    .device = fn_device,
    .scratch = fn_scratch,
    .max_count = (size_t)-1,
    .destroy = fn_destroy,
};

static int fn_probe(int dev) { return DT_OK; }

static int fn_world(dt_comm *w, int dev) {
    fimpl *m = calloc(1, sizeof *m);
    if (!m) return DT_ERR(DT_ERR_NOMEM, "oom");
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &m->comm);
    if (rc != MPI_SUCCESS) { free(m); return mfail(rc, "MPI_Comm_dup"); }
    m->dev = dev;
    w->dev_impl = m;
    return DT_OK;
}

static int fn_poll(char *msg, size_t cap) {
    if (!g_fail[0]) return DT_OK;
    snprintf(msg, cap, "fake devnet reported an asynchronous error: %s", g_fail);
    return DT_ERR_BACKEND;
}

/* the watchdog's thread, before it ends the job: say so (tests read it) */
static void fn_abort_all(void) {
    g_aborts++;
    static const char line[] = "fake devnet: abort_all called\n";
    ssize_t k = write(2, line, sizeof line - 1);
    (void)k;
}

const dt_dev_transport fake_devnet = {
    .name = "fakenet",
    .ops = &fake_backend,
    .probe = fn_probe,
    .world = fn_world,
    .finalize = NULL,
    .poll = fn_poll,
    .abort_all = fn_abort_all,
};

void fake_devnet_install(void) { dt_dev_transport_use_for_testing(&fake_devnet); }
