/* src/parallel/ddp.c - data-parallel gradient averaging in ordered buckets
 * overlapped with backward (see dtrain/ddp.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/device.h"
#include "core/error.h"
#include "dtrain/coll.h"
#include "dtrain/ddp.h"
#include "dtrain/trace.h"

typedef struct bucket {
    int first, last;        /* segment range [first, last], forward order */
    size_t bytes;
    int pending;            /* segments not ready yet this step */
    dt_work *work;
    void *ready;            /* device: event on cfg.stream after the bucket's backward */
    dt_tensor *views;       /* [last-first+1] gradient tensors, in/out (in place) */
    double t0, t1;          /* execution interval of the last synced step */
} bucket;

struct dt_ddp {
    dt_comm *comm;
    dt_ddp_config cfg;
    dt_ddp_segment *segs;
    int nsegs;
    dt_ddp_buffer *bufs;
    int nbufs;
    bucket *buckets;
    int nbuckets;
    int *seg_bucket;        /* [nsegs] bucket of each segment */
    unsigned char *ready;   /* [nsegs] */
    int next_submit;        /* buckets [0, next_submit) submitted this step */
    int sync;
    int in_step;
    int device;             /* cfg.mem == DT_MEM_DEVICE */
    void *comm_stream;      /* device: where the buckets are reduced */
};

void dt_ddp_config_default(dt_ddp_config *cfg) {
    if (!cfg) return;
    cfg->bucket_cap_bytes = (size_t)25 << 20;
    cfg->first_bucket_bytes = (size_t)1 << 20;
    cfg->overlap = 1;
    cfg->root = 0;
    cfg->broadcast_buffers = 1;
    cfg->average = 1;
    cfg->wire = DT_WIRE_NATIVE;
    cfg->mem = DT_MEM_AUTO;
    cfg->stream = NULL;
}

static int bcast_all(dt_ddp *d, int params) {
    int rc = DT_OK;
    dt_coll_opts o = {.mem = d->cfg.mem, .stream = d->cfg.stream};
    for (int i = 0; params && i < d->nsegs && !rc; i++)
        rc = dt_broadcast_ex(d->segs[i].param, d->segs[i].param, d->segs[i].count, DT_F32, d->cfg.root, d->comm, &o,
                             NULL);
    for (int i = 0; i < d->nbufs && !rc; i++)
        rc = dt_broadcast_ex(d->bufs[i].data, d->bufs[i].data, d->bufs[i].count, DT_F32, d->cfg.root, d->comm, &o,
                             NULL);
    return rc;
}

void dt_ddp_free(dt_ddp *d) {
    if (!d) return;
    for (int b = 0; b < d->nbuckets; b++) {
        dt_work_free(d->buckets[b].work);
        free(d->buckets[b].views);
        if (d->buckets[b].ready) dt_dev()->event_destroy(d->buckets[b].ready);
    }
    if (d->comm_stream) dt_dev()->stream_destroy(d->comm_stream);
    free(d->buckets);
    free(d->segs);
    free(d->bufs);
    free(d->seg_bucket);
    free(d->ready);
    free(d);
}

static int build_buckets(dt_ddp *d) {
    d->buckets = calloc((size_t)d->nsegs, sizeof *d->buckets); /* at most one per segment */
    if (!d->buckets) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    int nb = 0;
    size_t cap = d->cfg.first_bucket_bytes;
    for (int s = d->nsegs - 1; s >= 0;) {
        bucket *b = &d->buckets[nb];
        b->last = s;
        b->bytes = 0;
        do {
            b->bytes += d->segs[s].count * sizeof(float);
            d->seg_bucket[s] = nb;
            s--;
        } while (s >= 0 && d->cfg.bucket_cap_bytes && b->bytes < cap);
        b->first = s + 1;
        int m = b->last - b->first + 1;
        b->views = malloc(sizeof(dt_tensor) * (size_t)m);
        if (!b->views) return DT_ERR(DT_ERR_NOMEM, "out of memory");
        for (int k = 0; k < m; k++) /* segment order inside a bucket = forward order */
            b->views[k] = (dt_tensor){.data = d->segs[b->first + k].grad,
                                      .count = d->segs[b->first + k].count, .dtype = DT_F32};
        nb++;
        cap = d->cfg.bucket_cap_bytes;
    }
    d->nbuckets = nb;
    return DT_OK;
}

int dt_ddp_create(dt_comm *comm, const dt_ddp_segment *segs, int nsegs,
                  const dt_ddp_buffer *bufs, int nbufs, const dt_ddp_config *cfg, dt_ddp **out) {
    if (!out) return DT_ERR(DT_ERR_INVALID, "out is NULL");
    *out = NULL;
    dt_comm_info info;
    int rc = dt_comm_info_get(comm, &info);
    if (rc) return rc;
    if (nsegs < 1 || !segs) return DT_ERR(DT_ERR_INVALID, "need at least one segment (nsegs %d, segs %p)", nsegs, (const void *)segs);
    if (nbufs < 0 || (nbufs > 0 && !bufs)) return DT_ERR(DT_ERR_INVALID, "bad buffer list (nbufs %d)", nbufs);
    for (int i = 0; i < nsegs; i++)
        if (segs[i].count && (!segs[i].param || !segs[i].grad))
            return DT_ERR(DT_ERR_INVALID, "segment %d has count %zu but a NULL %s pointer", i, segs[i].count, segs[i].param ? "grad" : "param");
    for (int i = 0; i < nbufs; i++)
        if (bufs[i].count && !bufs[i].data)
            return DT_ERR(DT_ERR_INVALID, "buffer %d has count %zu but a NULL pointer", i, bufs[i].count);
    dt_ddp_config c;
    dt_ddp_config_default(&c);
    if (cfg) c = *cfg;
    if (c.first_bucket_bytes == 0) c.first_bucket_bytes = c.bucket_cap_bytes;
    if (c.wire != DT_WIRE_NATIVE && c.wire != DT_WIRE_BF16 && c.wire != DT_WIRE_F16)
        return DT_ERR(DT_ERR_INVALID, "unknown gradient wire type %d (valid: DT_WIRE_NATIVE 0, DT_WIRE_BF16 1, DT_WIRE_F16 2)", c.wire);
    if (dt_comm_group_rank(comm, c.root) < 0)
        return DT_ERR(DT_ERR_INVALID, "root %d is not a member of the communicator", c.root);

    /* every rank must describe the same model: compare counts */
    unsigned long long h = 1469598103934665603ull;
    for (int i = 0; i < nsegs; i++) { h ^= segs[i].count + 0x9e37ull * (unsigned)i; h *= 1099511628211ull; }
    for (int i = 0; i < nbufs; i++) { h ^= bufs[i].count + 0x7f4aull; h *= 1099511628211ull; }
    h ^= (unsigned long long)nsegs << 32 | (unsigned)nbufs;
    long long v[2] = {(long long)(h >> 1), -(long long)(h >> 1)}, r[2];
    rc = dt_allreduce(v, r, 2, DT_I64, DT_MAX, comm);
    if (rc) return rc;
    if (r[0] != v[0] || r[1] != v[1])
        return DT_ERR(DT_ERR_MISMATCH, "ranks describe different models (segment/buffer counts differ); world rank %d has %d segments, %d buffers", info.world_rank, nsegs, nbufs);

    dt_ddp *d = calloc(1, sizeof *d);
    if (!d) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    d->comm = comm;
    d->cfg = c;
    d->nsegs = nsegs;
    d->nbufs = nbufs;
    d->sync = 1;
    d->segs = malloc(sizeof *d->segs * (size_t)nsegs);
    d->bufs = malloc(sizeof *d->bufs * (size_t)(nbufs ? nbufs : 1));
    d->seg_bucket = malloc(sizeof(int) * (size_t)nsegs);
    d->ready = calloc((size_t)nsegs, 1);
    if (!d->segs || !d->bufs || !d->seg_bucket || !d->ready) { dt_ddp_free(d); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    memcpy(d->segs, segs, sizeof *segs * (size_t)nsegs);
    if (nbufs) memcpy(d->bufs, bufs, sizeof *bufs * (size_t)nbufs);
    rc = build_buckets(d);
    if (!rc && c.mem == DT_MEM_DEVICE) { /* the communication stream and an event per bucket */
        d->device = 1;
        rc = dt_dev()->stream_create(&d->comm_stream);
        for (int b = 0; b < d->nbuckets && !rc; b++) rc = dt_dev()->event_create(&d->buckets[b].ready);
    }
    if (!rc) rc = bcast_all(d, 1);
    if (rc) { dt_ddp_free(d); return rc; }
    *out = d;
    return DT_OK;
}

int dt_ddp_set_grad_sync(dt_ddp *d, int enabled) {
    if (!d) return DT_ERR(DT_ERR_INVALID, "ddp is NULL");
    if (d->in_step) return DT_ERR(DT_ERR_STATE, "cannot change gradient sync in the middle of a step (call it before dt_ddp_begin_step)");
    d->sync = enabled != 0;
    return DT_OK;
}

int dt_ddp_begin_step(dt_ddp *d) {
    if (!d) return DT_ERR(DT_ERR_INVALID, "ddp is NULL");
    if (d->in_step) return DT_ERR(DT_ERR_STATE, "dt_ddp_begin_step called twice without dt_ddp_finish");
    memset(d->ready, 0, (size_t)d->nsegs);
    for (int b = 0; b < d->nbuckets; b++) {
        d->buckets[b].pending = d->buckets[b].last - d->buckets[b].first + 1;
    }
    d->next_submit = 0;
    d->in_step = 1;
    if (d->cfg.broadcast_buffers && d->nbufs && d->comm) {
        int rc = bcast_all(d, 0);
        if (rc) return rc;
    }
    return DT_OK;
}

/* Reduce the next bucket in order (d->next_submit): submitted to the
 * communication engine, or run blocking on this thread with its interval
 * recorded. */
static int submit(dt_ddp *d, int blocking) {
    bucket *k = &d->buckets[d->next_submit++];
    int m = k->last - k->first + 1;
    dt_op op = d->cfg.average ? DT_AVG : DT_SUM;
    dt_coll_opts opts = {.wire = (dt_wire)d->cfg.wire};
    dt_work_free(k->work);
    k->work = NULL;
    if (d->device) { /* after the bucket's backward on cfg.stream, on the communication stream */
        const dt_dev_ops *o = dt_dev();
        dt_coll_opts co = {.mem = DT_MEM_DEVICE, .stream = d->comm_stream, .wire = (dt_wire)d->cfg.wire};
        k->t0 = dt_trace_now_us();
        int rc = o->event_record(k->ready, d->cfg.stream);
        if (!rc) rc = o->stream_wait_event(d->comm_stream, k->ready);
        return rc ? rc : dt_allreduce_list_ex(k->views, k->views, m, op, d->comm, &co, &k->work);
    }
    if (!blocking) return dt_allreduce_list_ex(k->views, k->views, m, op, d->comm, &opts, &k->work);
    k->t0 = dt_trace_now_us();
    int rc = dt_allreduce_list_ex(k->views, k->views, m, op, d->comm, &opts, NULL);
    k->t1 = dt_trace_now_us();
    return rc;
}

/* Submit every complete bucket at the head of the order, up to (not
 * including) bucket `limit`. The last bucket is left to dt_ddp_finish_each:
 * it completes when backward ends (it holds the first layer), so nothing is
 * left to overlap it with and finish may run it on the caller's thread. */
static int advance(dt_ddp *d, int flush, int limit) {
    while (d->next_submit < limit &&
           (flush || (d->cfg.overlap && d->buckets[d->next_submit].pending == 0))) {
        int rc = submit(d, 0);
        if (rc) return rc;
    }
    return DT_OK;
}

int dt_ddp_grad_ready(dt_ddp *d, int seg) {
    if (!d) return DT_ERR(DT_ERR_INVALID, "ddp is NULL");
    if (!d->in_step) return DT_ERR(DT_ERR_STATE, "dt_ddp_grad_ready outside a step (call dt_ddp_begin_step first)");
    if (seg < 0 || seg >= d->nsegs) return DT_ERR(DT_ERR_INVALID, "segment %d out of range [0, %d)", seg, d->nsegs);
    if (d->ready[seg]) return DT_ERR(DT_ERR_STATE, "segment %d reported ready twice in one step", seg);
    d->ready[seg] = 1;
    d->buckets[d->seg_bucket[seg]].pending--;
    return d->sync ? advance(d, 0, d->nbuckets - 1) : DT_OK;
}

int dt_ddp_finish(dt_ddp *d) { return dt_ddp_finish_each(d, NULL, NULL); }

int dt_ddp_finish_each(dt_ddp *d, int (*done)(void *user, int first_seg, int last_seg), void *user) {
    if (!d) return DT_ERR(DT_ERR_INVALID, "ddp is NULL");
    if (!d->in_step) return DT_ERR(DT_ERR_STATE, "dt_ddp_finish outside a step (call dt_ddp_begin_step first)");
    d->in_step = 0;
    if (!d->sync) return DT_OK;
    /* The last bucket runs blocking on this thread (no hand-off to the
     * communication thread and back), unless a callback on the earlier
     * buckets can overlap it: then it goes to the communication thread. */
    int last = d->nbuckets - 1, inline_last = !d->device && !(done && d->nbuckets > 1);
    int rc = advance(d, 1, inline_last ? last : d->nbuckets);
    for (int b = 0; b < d->nbuckets; b++) {
        bucket *k = &d->buckets[b];
        if (b == last && inline_last && d->next_submit == last && !rc) {
            rc = submit(d, 1);
        } else if (d->device) { /* cfg.stream waits for the bucket: no host wait */
            if (!k->work) continue;
            int w = dt_work_stream_wait(k->work, d->cfg.stream);
            if (!rc) rc = w;
            k->t1 = dt_trace_now_us();
        } else {
            if (!k->work) continue;
            int w = dt_work_wait(k->work);
            if (!rc) rc = w;
            dt_work_times(k->work, &k->t0, &k->t1);
        }
        if (dt_trace_enabled()) {
            char name[48];
            snprintf(name, sizeof name, "allreduce bucket %d", b);
            dt_trace_event(name, "comm", DT_TRACE_COMM, k->t0, k->t1);
        }
        dt_work_free(k->work); /* NULL for the inline bucket */
        k->work = NULL;
        if (!rc && done) rc = done(user, k->first, k->last);
    }
    return rc;
}

int dt_ddp_broadcast_params(dt_ddp *d) {
    if (!d) return DT_ERR(DT_ERR_INVALID, "ddp is NULL");
    return bcast_all(d, 1);
}

int dt_ddp_num_buckets(const dt_ddp *d) { return d ? d->nbuckets : DT_ERR(DT_ERR_INVALID, "ddp is NULL"); }

int dt_ddp_bucket_info(const dt_ddp *d, int i, int *first, int *last, size_t *bytes) {
    if (!d) return DT_ERR(DT_ERR_INVALID, "ddp is NULL");
    if (i < 0 || i >= d->nbuckets) return DT_ERR(DT_ERR_INVALID, "bucket %d out of range [0, %d)", i, d->nbuckets);
    if (first) *first = d->buckets[i].first;
    if (last) *last = d->buckets[i].last;
    if (bytes) *bytes = d->buckets[i].bytes;
    return DT_OK;
}

int dt_ddp_bucket_times(const dt_ddp *d, int i, double *t0, double *t1) {
    if (!d || !t0 || !t1) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    if (i < 0 || i >= d->nbuckets) return DT_ERR(DT_ERR_INVALID, "bucket %d out of range [0, %d)", i, d->nbuckets);
    *t0 = d->buckets[i].t0;
    *t1 = d->buckets[i].t1;
    return DT_OK;
}
