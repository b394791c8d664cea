/* src/coll/device_path.c - collectives on device memory (coll.h, "Device
 * memory"). A validated descriptor whose buffers are device memory takes one
 * of two paths:
 *  - over the communicator's device transport (nccl), when it has one: the
 *    call's primitives (device_plan.c) are enqueued as one group on the
 *    caller's stream, after the fingerprint check has compared the group's
 *    headers on the host (over the host transport's channel when it has one,
 *    the bootstrap for communicators of the whole world, else the device
 *    transport's own); blocking calls then wait for an event on the host
 *    (polling the transport's asynchronous error), asynchronous ones record
 *    the work's event; a compressed wire packs each f32 reduction's values
 *    into the transport's scratch in the wire type, reduces them there in
 *    that type, and unpacks the result (device_plan.c);
 *  - staged: the buffers this rank reads are copied into pinned host memory
 *    on the caller's stream, the host path runs (checked, on the world's host
 *    transport) on those copies, and what it wrote is copied back; the stream
 *    is synchronised before the host reads and before returning (a
 *    compressed wire is the host path's, the same bits as host memory). Each copy
 *    stays inside one allocation: buffers that merely touch (two cudaMallocs
 *    can lie back to back) are copied apart, since CUDA refuses a copy that
 *    spans two allocations (cudaErrorInvalidValue, seen on an H100).
 * A group of one rank needs neither: its primitives are copies, made on the
 * caller's stream (path "local"; stream-ordered like the transport's).
 * All run inside the engine's exclusive section on the caller's thread, so
 * the grow-only buffers below have one user at a time. */
#include <stdlib.h>
#include <string.h>
#include "coll/coll_internal.h"
#include "core/device.h"
#include "core/error.h"

static dt_region *g_reg;
static int g_reg_cap;
static dt_prim *g_prim;
static int g_prim_cap;
static dt_prim *g_wprim; /* a compressed wire's plan */
static int g_wprim_cap;
static dt_tensor *g_tens;
static int g_tens_cap;
static int *g_order;
static int g_order_cap;

typedef struct extent {
    const char *lo, *hi; /* device bytes [lo, hi) */
    size_t off;          /* in the staging buffer */
} extent;
static extent *g_ext;
static int g_ext_cap;

void dt_dev_path_release(void) {
    free(g_reg); free(g_prim); free(g_wprim); free(g_tens); free(g_order); free(g_ext);
    g_reg = NULL; g_prim = NULL; g_wprim = NULL; g_tens = NULL; g_order = NULL; g_ext = NULL;
    g_reg_cap = g_prim_cap = g_wprim_cap = g_tens_cap = g_order_cap = g_ext_cap = 0;
}

/* grow *buf to hold n items of size sz */
static int grow(void **buf, int *cap, int n, size_t sz) {
    if (n <= *cap) return DT_OK;
    int c = *cap ? *cap : 16;
    while (c < n) c = c > (1 << 29) ? n : 2 * c;
    void *p = realloc(*buf, sz * (size_t)c);
    if (!p) return DT_ERR(DT_ERR_NOMEM, "out of memory for the device path's bookkeeping (%d items)", n);
    *buf = p;
    *cap = c;
    return DT_OK;
}
#define GROW(buf, cap, n) grow((void **)&(buf), &(cap), (n), sizeof *(buf))

int dt_dev_stream_ordered(const dt_coll_desc *d) {
    return d->mem == DT_MEM_DEVICE && (d->comm->dev != NULL || d->comm->info.size == 1);
}

static int plan(const dt_coll_desc *d, void *scratch, int *n) {
    *n = dt_dev_plan(d, scratch, g_prim, g_prim_cap);
    if (*n > g_prim_cap) {
        int rc = GROW(g_prim, g_prim_cap, *n);
        if (rc) return rc;
        *n = dt_dev_plan(d, scratch, g_prim, g_prim_cap);
    }
    return DT_OK;
}

/* ---- a group of one: every primitive is a copy on the stream ------------------- */

__attribute__((noinline)) static int local(const dt_coll_desc *d) {
    const dt_dev_ops *o = dt_dev();
    int n, rc = plan(d, NULL, &n);
    for (int i = 0; i < n && !rc; i++) {
        const dt_prim *q = &g_prim[i];
        if (q->kind == DT_PRIM_BARRIER || !q->send || !q->recv || q->send == q->recv || !q->count) continue;
        rc = o->memcpy_async(q->recv, q->send, q->count * dt_dtype_size(q->dtype), d->stream);
    }
    if (rc) return rc;
    void *ev = d->event;
    if (!ev && (rc = dt_dev_blocking_event(d->device, &ev))) return rc;
    if ((rc = o->event_record(ev, d->stream))) return rc;
    return d->event ? DT_OK : dt_dev_event_wait(ev, NULL, NULL);
}

/* ---- over a device transport -------------------------------------------------- */

typedef struct dev_run {
    const dt_prim *p;
    int n;
    void *blocking_ev;
} dev_run;

static int poll_async(void *arg) {
    dt_comm *c = arg;
    return c->dev->async_error(c);
}

static int run_prims(const dt_coll_desc *d, void *arg) {
    const dev_run *x = arg;
    dt_comm *c = d->comm;
    void *ev = d->event ? d->event : x->blocking_ev;
    int rc = c->dev->run(c, x->p, x->n, d->stream, ev);
    if (rc || d->event) return rc;
    return dt_dev_event_wait(ev, poll_async, c);
}

/* A compressed wire: plan p[0..n) with packs and unpacks (device_plan.c)
 * into g_wprim; *n becomes its length (unchanged when nothing takes it). */
static int wire_plan(const dt_coll_desc *d, const dt_prim **p, int *n) {
    dt_comm *c = d->comm;
    size_t wb = dt_dev_wire_scratch(d, *p, *n);
    if (!wb) return DT_OK;
    void *w = c->dev->scratch(c, wb);
    if (!w) return DT_ERR_NOMEM;
    int m = dt_dev_wire_plan(d, w, *p, *n, g_wprim, g_wprim_cap), rc;
    if (m > g_wprim_cap) {
        if ((rc = GROW(g_wprim, g_wprim_cap, m))) return rc;
        m = dt_dev_wire_plan(d, w, *p, *n, g_wprim, g_wprim_cap);
    }
    *p = g_wprim;
    *n = m;
    return DT_OK;
}

static int over_transport(const dt_coll_desc *d, dt_fp_hdr *h) {
    dt_comm *c = d->comm;
    size_t sb = dt_dev_plan_scratch(d);
    void *scratch = NULL;
    if (sb && !(scratch = c->dev->scratch(c, sb))) return DT_ERR_NOMEM;
    int n, rc = plan(d, scratch, &n);
    if (rc) return rc;
    const dt_prim *p = g_prim;
    if (d->wire != DT_WIRE_NATIVE && (rc = wire_plan(d, &p, &n))) return rc;
    dev_run x = {p, n, NULL};
    if (!d->event && (rc = dt_dev_blocking_event(c->dev->device(c), &x.blocking_ev))) return rc;
    if (c->info.size == 1 || !dt_rel_check_on()) return run_prims(d, &x);
    int p2p = d->kind == DT_COLL_SEND || d->kind == DT_COLL_RECV;
    int which = dt_fp_device_channel(c->ops->check != NULL, c->info.size == c->info.world_size, p2p);
    dt_fp_channel ch;
    if (which == 0) ch = (dt_fp_channel){c->ops->name, c->ops->check, c->ops->gather_views, c->ops->p2p_check};
    else if (which == 1) ch = dt_fp_boot_channel;
    else ch = (dt_fp_channel){c->dev->name, c->dev->check, c->dev->gather_views, c->dev->p2p_check};
    return dt_fp_execute_on(d, h, &ch, run_prims, &x);
}

/* ---- staged through pinned host memory ------------------------------------------ */

static const dt_region *g_sort_reg; /* for the comparison below (engine-exclusive) */
static int by_address(const void *a, const void *b) {
    const char *x = g_sort_reg[*(const int *)a].p, *y = g_sort_reg[*(const int *)b].p;
    return (x > y) - (x < y);
}

/* the staging address of device pointer p (NULL, or outside every extent:
 * unchanged; such a pointer is never dereferenced by the host path) */
static void *host_of(const void *p, const extent *e, int ne, char *stage) {
    const char *q = p;
    int lo = 0, hi = ne - 1;
    while (q && lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (q < e[mid].lo) hi = mid - 1;
        else if (q >= e[mid].hi) lo = mid + 1;
        else return stage + e[mid].off + (size_t)(q - e[mid].lo);
    }
    return (void *)p;
}

/* The run of overlapping regions that starts at sorted region k (with `outs`,
 * of outputs only; region k is one): [*lo, *hi) lies inside one allocation,
 * since allocations do not overlap, so one copy may move it (regions that
 * merely touch may be two allocations, which CUDA will not copy as one).
 * *in: whether a region of the run is an input. Returns the next k. */
static int overlap_run(int k, int m, int outs, const char **lo, const char **hi, int *in) {
    const dt_region *r = &g_reg[g_order[k]];
    *lo = r->p;
    *hi = *lo + r->bytes;
    *in = r->in;
    for (k++; k < m; k++) {
        const dt_region *q = &g_reg[g_order[k]];
        if (outs && !q->out) continue;
        if ((const char *)q->p >= *hi) break;
        if ((const char *)q->p + q->bytes > *hi) *hi = (const char *)q->p + q->bytes;
        *in |= q->in;
    }
    return k;
}

__attribute__((noinline)) static int staged(const dt_coll_desc *d, dt_fp_hdr *h) {
    const dt_dev_ops *o = dt_dev();
    int n = dt_coll_regions(d, g_reg, g_reg_cap), rc;
    if (n > g_reg_cap) {
        if ((rc = GROW(g_reg, g_reg_cap, n))) return rc;
        n = dt_coll_regions(d, g_reg, g_reg_cap);
    }
    /* the non-empty regions by address, merged into extents (overlapping or
     * touching): pointers into one extent keep their distances on the host,
     * so in-place relations hold there too; the device side is copied per run
     * of overlapping regions (below), never across two allocations */
    int m = 0;
    if ((rc = GROW(g_order, g_order_cap, n)) || (rc = GROW(g_ext, g_ext_cap, n))) return rc;
    for (int i = 0; i < n; i++)
        if (g_reg[i].bytes) g_order[m++] = i;
    g_sort_reg = g_reg;
    qsort(g_order, (size_t)m, sizeof *g_order, by_address);
    int ne = 0;
    size_t total = 0;
    for (int k = 0; k < m; k++) {
        const dt_region *r = &g_reg[g_order[k]];
        const char *lo = r->p, *hi = lo + r->bytes;
        if (ne && lo <= g_ext[ne - 1].hi) {
            if (hi > g_ext[ne - 1].hi) g_ext[ne - 1].hi = hi;
        } else {
            g_ext[ne++] = (extent){lo, hi, 0};
        }
    }
    for (int e = 0; e < ne; e++) {
        g_ext[e].off = total;
        total += ((size_t)(g_ext[e].hi - g_ext[e].lo) + 63) & ~(size_t)63;
    }
    char *stage = NULL;
    if (total && !(stage = dt_dev_staging(total))) return DT_ERR_NOMEM;
    /* what the call reads, to the host: the runs that hold an input */
    const char *lo, *hi;
    int in, copied = 0;
    for (int k = 0; k < m && !rc;) {
        k = overlap_run(k, m, 0, &lo, &hi, &in);
        if (!in) continue;
        rc = o->memcpy_async(host_of(lo, g_ext, ne, stage), lo, (size_t)(hi - lo), d->stream);
        copied = 1;
    }
    if (!rc && copied) rc = o->stream_sync(d->stream);
    if (rc) return rc;

    dt_coll_desc hd = *d;
    hd.mem = DT_MEM_HOST;
    hd.send = host_of(d->send, g_ext, ne, stage);
    hd.recv = host_of(d->recv, g_ext, ne, stage);
    if (d->n > 0 && d->in) {
        int nt = d->n * (d->out ? 2 : 1);
        if ((rc = GROW(g_tens, g_tens_cap, nt))) return rc;
        for (int i = 0; i < d->n; i++) {
            g_tens[i] = d->in[i];
            g_tens[i].data = host_of(d->in[i].data, g_ext, ne, stage);
            if (d->out) {
                g_tens[d->n + i] = d->out[i];
                g_tens[d->n + i].data = host_of(d->out[i].data, g_ext, ne, stage);
            }
        }
        hd.in = g_tens;
        hd.out = d->out ? g_tens + d->n : NULL;
    }
    rc = dt_coll_run_host(&hd, h);
    if (rc) return rc;

    /* what the call wrote, back to the device: the runs of outputs */
    copied = 0;
    for (int k = 0; k < m && !rc;) {
        if (!g_reg[g_order[k]].out) { k++; continue; }
        k = overlap_run(k, m, 1, &lo, &hi, &in);
        rc = o->memcpy_async((void *)lo, host_of(lo, g_ext, ne, stage), (size_t)(hi - lo), d->stream);
        copied = 1;
    }
    if (!rc && copied) rc = o->stream_sync(d->stream);
    return rc;
}

int dt_dev_execute(const dt_coll_desc *d, dt_fp_hdr *h) {
    if (d->comm->dev) return over_transport(d, h);
    return d->comm->info.size == 1 ? local(d) : staged(d, h);
}
