/* src/parallel/zero.c - ZeRO stages 1-3 over a sharded flat vector (see
 * dtrain/zero.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/device.h"
#include "core/error.h"
#include "core/mem.h"
#include "dtrain/coll.h"
#include "dtrain/ddp.h"
#include "dtrain/zero.h"

#define MAXW 64 /* pending works per layer buffer (one per owner piece) */

typedef struct wlist { dt_work *w[MAXW]; int n; } wlist;

typedef struct layerbuf { /* a reusable layer-sized buffer */
    float *buf;
    int seg;   /* segment it holds, -1 if free */
    wlist pending;
    /* device: this rank's piece, reduced in place in buf, still to be added
     * into the (host) gradient shard once pending completes */
    size_t acc_off, acc_n;
    const float *acc_src;
} layerbuf;

typedef struct chunk { size_t a, b; dt_work *w; } chunk;

struct dt_zero {
    dt_comm *comm;
    dt_comm_info ci;
    dt_zero_config cfg;
    int N, r;
    int R;          /* replicas (hybrid sharding: cfg.replicas' size), else 1 */
    size_t P, S, lo, hi;
    int nsegs;
    size_t *off, *cnt, maxseg;
    float *params;  /* stage 1/2: caller's full vector */
    float *grads;   /* stage 1: caller's full gradients */
    float *p_shard, *g_shard;
    int own_p, own_g;
    dt_optim *opt;
    dt_ddp *ddp;    /* stage 1 */
    int *ddp_seg;   /* seg -> ddp segment */
    layerbuf gb[2]; /* stage 2/3 gradient layer buffers */
    layerbuf pb[2]; /* stage 3 gathered parameter buffers */
    int *owner;     /* [nsegs] segment whose parameters each computes with */
    int *umin, *umax; /* [nsegs] lowest / highest segment using each one's parameters */
    layerbuf *sp, *sg; /* [nsegs] a shared segment's own stage 3 parameter /
                        * stage 2-3 gradient buffer (buf NULL for the others) */
    chunk *chunks;  /* stage 1/2 parameter broadcasts in flight */
    int nchunks, capchunks;
    int in_step, sync;
    /* device memory (cfg.mem DT_MEM_DEVICE): params, grads (stage 1), the
     * layer buffers and p_dev (stage 3: this rank's slice, the gathers'
     * source) live on the device; the optimizer's slice (p_shard, g_shard)
     * and its state stay on the host */
    int dev;
    dt_coll_opts co;  /* the collectives' memory and stream */
    dt_coll_opts gco; /* co with cfg.wire: the stage 2/3 gradient reduces */
    dt_coll_opts rco; /* hybrid sharding: the shard's allreduce across the
                       * replicas (host memory, cfg.wire) */
    float *p_dev;
    float *acc_host;  /* [maxseg]: a reduced piece copied back for the shard */
};

void dt_zero_config_default(dt_zero_config *c) {
    if (!c) return;
    *c = (dt_zero_config){.stage = 1, .bucket_cap_bytes = (size_t)25 << 20,
                          .first_bucket_bytes = (size_t)1 << 20, .overlap = 1, .prefetch = 1, .average = 1,
                          .mem = DT_MEM_AUTO, .stream = NULL};
}

static int wait_list(wlist *l) {
    int rc = DT_OK;
    for (int i = 0; i < l->n; i++) {
        int w = dt_work_wait(l->w[i]);
        if (!rc) rc = w;
        dt_work_free(l->w[i]);
    }
    l->n = 0;
    return rc;
}

static int owner_world(const dt_zero *z, int o) { return dt_comm_world_rank_of(z->comm, o); }

/* Calls fn for each owner piece of [a, b). */
#define FOR_PIECES(z, a, b, o, pa, pb)                                                    \
    for (int o = (int)((a) / (z)->S); (size_t)o * (z)->S < (b) && o < (z)->N; o++)         \
        for (size_t pa = (a) > (size_t)o * (z)->S ? (a) : (size_t)o * (z)->S,               \
                    pb = (b) < ((size_t)o + 1) * (z)->S ? (b) : ((size_t)o + 1) * (z)->S,   \
                    once_ = 1; once_ && pa < pb; once_ = 0)

static void mem_buf(dt_mem_category c, size_t n, int sign) { dt_mem_add(c, sign * (long long)(n * sizeof(float))); }

/* Device copies on the configured stream, complete when they return. */
static int dcopy(const dt_zero *z, void *dst, const void *src, size_t n) {
    if (!n) return DT_OK;
    int rc = dt_dev()->memcpy_async(dst, src, n * sizeof(float), z->co.stream);
    return rc ? rc : dt_dev()->stream_sync(z->co.stream);
}

static float *buf_alloc(const dt_zero *z, size_t n) {
    void *p = NULL;
    if (!z->dev) return malloc(sizeof(float) * (n ? n : 1));
    return dt_dev()->dev_alloc(sizeof(float) * (n ? n : 1), &p) ? NULL : p;
}

static void buf_free(const dt_zero *z, float *p) {
    if (z->dev) dt_dev()->dev_free(p);
    else free(p);
}

/* n floats of a gradient buffer zeroed (on the device: on the stream) */
static int zero_buf(const dt_zero *z, float *p, size_t n) {
    if (z->dev) return dt_dev()->memset_async(p, 0, n * sizeof(float), z->co.stream);
    memset(p, 0, n * sizeof(float));
    return DT_OK;
}

/* Wait for a gradient layer buffer's reduces; on the device, add this
 * rank's reduced piece into the host gradient shard. */
static int wait_grads(dt_zero *z, layerbuf *g) {
    int rc = wait_list(&g->pending);
    if (g->acc_src) {
        if (!rc) rc = dcopy(z, z->acc_host, g->acc_src, g->acc_n);
        float *sp = z->g_shard + g->acc_off;
        for (size_t i = 0; !rc && i < g->acc_n; i++) sp[i] += z->acc_host[i];
        g->acc_src = NULL;
    }
    return rc;
}

void dt_zero_free(dt_zero *z) {
    if (!z) return;
    for (int i = 0; i < 2; i++) {
        wait_list(&z->gb[i].pending);
        wait_list(&z->pb[i].pending);
        if (z->gb[i].buf) { buf_free(z, z->gb[i].buf); mem_buf(DT_MEM_COMM, z->maxseg, -1); }
        if (z->pb[i].buf) { buf_free(z, z->pb[i].buf); mem_buf(DT_MEM_GATHERED, z->maxseg, -1); }
    }
    for (int s = 0; s < z->nsegs && z->sp && z->sg; s++) {
        wait_list(&z->sp[s].pending);
        wait_list(&z->sg[s].pending);
        if (z->sp[s].buf) { buf_free(z, z->sp[s].buf); mem_buf(DT_MEM_GATHERED, z->cnt[s], -1); }
        if (z->sg[s].buf) { buf_free(z, z->sg[s].buf); mem_buf(DT_MEM_COMM, z->cnt[s], -1); }
    }
    free(z->sp);
    free(z->sg);
    free(z->owner);
    free(z->umin);
    free(z->umax);
    for (int i = 0; i < z->nchunks; i++) { dt_work_wait(z->chunks[i].w); dt_work_free(z->chunks[i].w); }
    free(z->chunks);
    dt_ddp_free(z->ddp);
    if (z->opt) { dt_mem_add(DT_MEM_OPTIM, -(long long)dt_optim_state_bytes(z->opt)); dt_optim_free(z->opt); }
    if (z->own_p) { free(z->p_shard); mem_buf(DT_MEM_PARAMS, z->hi - z->lo, -1); }
    if (z->own_g) { free(z->g_shard); mem_buf(DT_MEM_GRADS, z->hi - z->lo, -1); }
    if (z->p_dev) dt_dev()->dev_free(z->p_dev);
    free(z->acc_host);
    free(z->off);
    free(z->cnt);
    free(z->ddp_seg);
    free(z);
}

/* Hybrid sharding: every member of `rep` has this rank's rank and size in
 * its comm. The verdict is agreed over rep and then comm, so that every rank
 * of the grid returns the same. */
static int check_replicas(dt_comm *comm, const dt_comm_info *ci, dt_comm *rep, dt_comm_info *ri) {
    int rc = dt_comm_info_get(rep, ri);
    if (rc) return rc;
    int *all = malloc(sizeof(int) * 2 * (size_t)ri->size), mine[2] = {ci->rank, ci->size}, bad[2] = {0, 0};
    rc = all ? dt_allgather(mine, all, 2, DT_I32, rep) : DT_ERR(DT_ERR_NOMEM, "out of memory");
    for (int i = 0; !rc && i < ri->size && !bad[0]; i++)
        if (all[2 * i] != mine[0] || all[2 * i + 1] != mine[1])
            bad[0] = 1, bad[1] = i;
    int who = bad[0] ? dt_comm_world_rank_of(rep, bad[1]) : -1, them[2] = {bad[0] ? all[2 * bad[1]] : 0,
                                                                            bad[0] ? all[2 * bad[1] + 1] : 0};
    free(all);
    if (rc) return rc;
    int v = bad[0];
    if ((rc = dt_allreduce(&v, &v, 1, DT_I32, DT_MAX, rep)) || (rc = dt_allreduce(&v, &v, 1, DT_I32, DT_MAX, comm)))
        return rc;
    if (bad[0])
        return DT_ERR(DT_ERR_INVALID, "replicas: world rank %d is rank %d of %d in its comm, this rank (world %d) is rank "
                      "%d of %d: replicas must hold the same shard", who, them[0], them[1], ci->world_rank, mine[0],
                      mine[1]);
    if (v) return DT_ERR(DT_ERR_INVALID, "replicas: the ranks of another replica do not hold the same shards (see their message)");
    return DT_OK;
}

int dt_zero_create(dt_comm *comm, const dt_zero_config *cfg, size_t P, const size_t *seg_off,
                   const size_t *seg_cnt, int nsegs, float *params, float *grads,
                   const dt_optim_config *ocfg, dt_zero **out) {
    if (!out) return DT_ERR(DT_ERR_INVALID, "out is NULL");
    *out = NULL;
    dt_comm_info ci;
    int rc = dt_comm_info_get(comm, &ci);
    if (rc) return rc;
    dt_zero_config c;
    dt_zero_config_default(&c);
    if (cfg) c = *cfg;
    if (c.stage < 1 || c.stage > 3) return DT_ERR(DT_ERR_INVALID, "ZeRO stage %d (valid: 1, 2, 3)", c.stage);
    if (!ocfg) return DT_ERR(DT_ERR_INVALID, "optimizer config is NULL");
    if (P == 0 || nsegs < 1 || !seg_off || !seg_cnt || !params)
        return DT_ERR(DT_ERR_INVALID, "need parameters (num_params %zu, nsegs %d, params %p)", P, nsegs, (void *)params);
    if (c.stage == 1 && !grads) return DT_ERR(DT_ERR_INVALID, "stage 1 needs the full gradient buffer");
    if (c.wire != DT_WIRE_NATIVE && c.wire != DT_WIRE_BF16 && c.wire != DT_WIRE_F16)
        return DT_ERR(DT_ERR_INVALID, "unknown gradient wire type %d (valid: DT_WIRE_NATIVE 0, DT_WIRE_BF16 1, DT_WIRE_F16 2)", c.wire);
    dt_comm_info ri = {.size = 1};
    if (c.replicas && (rc = check_replicas(comm, &ci, c.replicas, &ri))) return rc;
    int dev = 0;
    if (c.mem == DT_MEM_AUTO || c.mem == DT_MEM_DEVICE) { /* where the caller's vectors live */
        int d, gdev;
        if ((dev = dt_dev_is_device(params, &d)) < 0) return dev;
        if (c.mem == DT_MEM_DEVICE && !dev)
            return DT_ERR(DT_ERR_INVALID, "cfg.mem is DT_MEM_DEVICE but params (%p) is host memory", (void *)params);
        if (c.stage == 1 && (gdev = dt_dev_is_device(grads, &d)) < 0) return gdev;
        if (c.stage == 1 && gdev != dev)
            return DT_ERR(DT_ERR_INVALID, "params (%s memory) and grads (%s memory) must be the same kind",
                          dev ? "device" : "host", gdev ? "device" : "host");
    } else if (c.mem != DT_MEM_HOST) {
        return DT_ERR(DT_ERR_INVALID, "cfg.mem %d (valid: DT_MEM_AUTO, DT_MEM_HOST, DT_MEM_DEVICE)", (int)c.mem);
    }
    if (c.wire != DT_WIRE_NATIVE && dev) /* as dt_ddp_create (stage 1) and the collectives (coll.h) */
        return DT_ERR(DT_ERR_UNSUPPORTED, "gradient wire type %d with device memory: compressed wires are "
                      "host-memory only (use DT_WIRE_NATIVE)", c.wire);
    for (int s = 0; s < nsegs; s++)
        if (seg_off[s] > P || seg_cnt[s] > P - seg_off[s])
            return DT_ERR(DT_ERR_INVALID, "segment %d [%zu, +%zu) lies outside [0, %zu)", s, seg_off[s], seg_cnt[s], P);
    for (int s = 0; c.seg_owner && s < nsegs; s++) {
        int o = c.seg_owner[s];
        if (o < 0 || o >= nsegs)
            return DT_ERR(DT_ERR_INVALID, "segment %d: owner %d out of range [0, %d)", s, o, nsegs);
        if (o != s && (seg_cnt[s] || c.seg_owner[o] != o))
            return DT_ERR(DT_ERR_INVALID, "segment %d computes with segment %d's parameters: it must be empty (has "
                          "%zu) and %d must own itself (owner %d)", s, o, seg_cnt[s], o, c.seg_owner[o]);
    }

    dt_zero *z = calloc(1, sizeof *z);
    if (!z) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    z->comm = comm;
    z->ci = ci;
    z->cfg = c;
    z->N = ci.size;
    z->r = ci.rank;
    z->R = ri.size;
    z->P = P;
    z->S = (P + (size_t)z->N - 1) / (size_t)z->N;
    z->lo = (size_t)z->r * z->S < P ? (size_t)z->r * z->S : P;
    z->hi = z->lo + z->S < P ? z->lo + z->S : P;
    z->nsegs = nsegs;
    z->dev = dev;
    z->co = (dt_coll_opts){.mem = dev ? DT_MEM_DEVICE : DT_MEM_HOST, .stream = dev ? c.stream : NULL};
    z->gco = z->co;
    z->gco.wire = (dt_wire)c.wire;
    z->rco = (dt_coll_opts){.mem = DT_MEM_HOST, .wire = (dt_wire)c.wire};
    z->params = c.stage < 3 ? params : NULL;
    z->grads = c.stage == 1 ? grads : NULL;
    z->off = malloc(sizeof(size_t) * (size_t)nsegs);
    z->cnt = malloc(sizeof(size_t) * (size_t)nsegs);
    z->ddp_seg = malloc(sizeof(int) * (size_t)nsegs);
    z->owner = malloc(sizeof(int) * (size_t)nsegs);
    z->umin = malloc(sizeof(int) * (size_t)nsegs);
    z->umax = malloc(sizeof(int) * (size_t)nsegs);
    z->sp = calloc((size_t)nsegs, sizeof *z->sp);
    z->sg = calloc((size_t)nsegs, sizeof *z->sg);
#define FAIL(x) do { rc = (x); dt_zero_free(z); return rc; } while (0)
    if (!z->off || !z->cnt || !z->ddp_seg || !z->owner || !z->umin || !z->umax || !z->sp || !z->sg)
        FAIL(DT_ERR(DT_ERR_NOMEM, "out of memory"));
    memcpy(z->off, seg_off, sizeof(size_t) * (size_t)nsegs);
    memcpy(z->cnt, seg_cnt, sizeof(size_t) * (size_t)nsegs);
    for (int s = 0; s < nsegs; s++) {
        z->owner[s] = c.seg_owner ? c.seg_owner[s] : s;
        z->umin[s] = z->umax[s] = s;
        z->sp[s].seg = z->sg[s].seg = -1;
    }
    for (int s = 0; s < nsegs; s++) {
        int o = z->owner[s];
        if (s < z->umin[o]) z->umin[o] = s;
        if (s > z->umax[o]) z->umax[o] = s;
    }
    for (int s = 0; s < nsegs; s++) if (seg_cnt[s] > z->maxseg) z->maxseg = seg_cnt[s];
    for (int i = 0; i < 2; i++) { z->gb[i].seg = -1; z->pb[i].seg = -1; }

    /* everyone starts from the root's parameters (with replicas: first every
     * replica from replica 0, then within each from its comm rank 0) */
    if (c.replicas && (rc = dt_broadcast_ex(params, params, P, DT_F32, dt_comm_world_rank_of(c.replicas, 0), c.replicas,
                                            &z->co, NULL)))
        FAIL(rc);
    if ((rc = dt_broadcast_ex(params, params, P, DT_F32, dt_comm_world_rank_of(comm, 0), comm, &z->co, NULL)))
        FAIL(rc);
    size_t n = z->hi - z->lo;
    if (c.stage == 3 || dev) { /* the optimizer's slice: on the host */
        z->p_shard = malloc(sizeof(float) * (n ? n : 1));
        if (!z->p_shard) FAIL(DT_ERR(DT_ERR_NOMEM, "out of memory for the parameter shard"));
        if (dev) rc = dcopy(z, z->p_shard, params + z->lo, n);
        else if (n) memcpy(z->p_shard, params + z->lo, n * sizeof(float));
        if (rc) FAIL(rc);
        z->own_p = 1;
        mem_buf(DT_MEM_PARAMS, n, 1);
    } else {
        z->p_shard = params + z->lo;
    }
    if (c.stage == 3 && dev) { /* the slice on the device: the gathers' source */
        if (!(z->p_dev = buf_alloc(z, n))) FAIL(DT_ERR(DT_ERR_NOMEM, "out of device memory for the parameter shard"));
        if (n && (rc = dt_dev()->memcpy_async(z->p_dev, params + z->lo, n * sizeof(float), z->co.stream))) FAIL(rc);
        if ((rc = dt_dev()->stream_sync(z->co.stream))) FAIL(rc);
    }
    if (dev && c.stage >= 2 && !(z->acc_host = malloc(sizeof(float) * (z->maxseg ? z->maxseg : 1))))
        FAIL(DT_ERR(DT_ERR_NOMEM, "out of memory"));
    if (c.stage >= 2 || dev) {
        z->g_shard = calloc(n ? n : 1, sizeof(float));
        if (!z->g_shard) FAIL(DT_ERR(DT_ERR_NOMEM, "out of memory for the gradient shard"));
        z->own_g = 1;
        mem_buf(DT_MEM_GRADS, n, 1);
    } else {
        z->g_shard = grads + z->lo;
    }
    if (c.stage >= 2)
        for (int i = 0; i < 2; i++) {
            z->gb[i].buf = buf_alloc(z, z->maxseg);
            if (!z->gb[i].buf) FAIL(DT_ERR(DT_ERR_NOMEM, "out of memory for gradient layer buffers"));
            mem_buf(DT_MEM_COMM, z->maxseg, 1);
        }
    if (c.stage == 3)
        for (int i = 0; i < 2; i++) {
            z->pb[i].buf = buf_alloc(z, z->maxseg);
            if (!z->pb[i].buf) FAIL(DT_ERR(DT_ERR_NOMEM, "out of memory for gathered-parameter buffers"));
            mem_buf(DT_MEM_GATHERED, z->maxseg, 1);
        }
    for (int s = 0; c.stage >= 2 && s < nsegs; s++) { /* the shared segments' own buffers */
        if (!z->cnt[s] || z->umin[s] == z->umax[s]) continue;
        z->sg[s].buf = buf_alloc(z, z->cnt[s]);
        if (!z->sg[s].buf) FAIL(DT_ERR(DT_ERR_NOMEM, "out of memory for a shared segment's gradient buffer"));
        mem_buf(DT_MEM_COMM, z->cnt[s], 1);
        if (c.stage < 3) continue;
        z->sp[s].buf = buf_alloc(z, z->cnt[s]);
        if (!z->sp[s].buf) FAIL(DT_ERR(DT_ERR_NOMEM, "out of memory for a shared segment's parameter buffer"));
        mem_buf(DT_MEM_GATHERED, z->cnt[s], 1);
    }
    if ((rc = dt_optim_create(ocfg, n, &z->opt))) FAIL(rc);
    dt_mem_add(DT_MEM_OPTIM, (long long)dt_optim_state_bytes(z->opt));

    if (c.stage == 1) { /* gradient averaging through the data-parallel buckets */
        dt_ddp_segment *ds = malloc(sizeof *ds * (size_t)nsegs);
        if (!ds) FAIL(DT_ERR(DT_ERR_NOMEM, "out of memory"));
        int m = 0;
        for (int s = 0; s < nsegs; s++) {
            z->ddp_seg[s] = -1;
            if (!seg_cnt[s]) continue;
            z->ddp_seg[s] = m;
            ds[m++] = (dt_ddp_segment){params + seg_off[s], grads + seg_off[s], seg_cnt[s]};
        }
        dt_ddp_config dc;
        dt_ddp_config_default(&dc);
        dc.bucket_cap_bytes = c.bucket_cap_bytes;
        dc.first_bucket_bytes = c.first_bucket_bytes;
        dc.overlap = c.overlap;
        dc.root = dt_comm_world_rank_of(comm, 0);
        dc.broadcast_buffers = 0;
        dc.average = c.average;
        dc.wire = c.wire;
        dc.mem = z->co.mem;
        dc.stream = z->co.stream;
        rc = m ? dt_ddp_create(comm, ds, m, NULL, 0, &dc, &z->ddp) : DT_ERR(DT_ERR_INVALID, "all segments are empty");
        free(ds);
        if (rc) FAIL(rc);
    }
#undef FAIL
    *out = z;
    return DT_OK;
}

int dt_zero_shard(const dt_zero *z, size_t *lo, size_t *hi) {
    if (!z) return DT_ERR(DT_ERR_INVALID, "zero is NULL");
    if (lo) *lo = z->lo;
    if (hi) *hi = z->hi;
    return DT_OK;
}
float *dt_zero_param_shard(dt_zero *z) { return z ? z->p_shard : NULL; }
float *dt_zero_grad_shard(dt_zero *z) { return z ? z->g_shard : NULL; }
dt_optim *dt_zero_optim(dt_zero *z) { return z ? z->opt : NULL; }

static int check_seg(const dt_zero *z, int seg, const char *fn) {
    if (!z) return dt_error(DT_ERR_INVALID, fn, "zero is NULL");
    if (seg < 0 || seg >= z->nsegs) return dt_error(DT_ERR_INVALID, fn, "segment %d out of range [0, %d)", seg, z->nsegs);
    return DT_OK;
}

int dt_zero_begin_step(dt_zero *z, int sync) {
    if (!z) return DT_ERR(DT_ERR_INVALID, "zero is NULL");
    if (z->in_step) return DT_ERR(DT_ERR_STATE, "dt_zero_begin_step twice without dt_zero_finish");
    z->in_step = 1;
    z->sync = sync != 0;
    if (z->ddp) {
        int rc = dt_ddp_set_grad_sync(z->ddp, z->sync);
        if (!rc) rc = dt_ddp_begin_step(z->ddp);
        return rc;
    }
    return DT_OK;
}

/* ---- stage 1/2: waiting for re-shared parameters ---- */
static int wait_chunks(dt_zero *z, size_t a, size_t b) {
    int rc = DT_OK, k = 0;
    for (int i = 0; i < z->nchunks; i++) {
        chunk *c = &z->chunks[i];
        if (c->a < b && a < c->b) {
            int w = dt_work_wait(c->w);
            if (!rc) rc = w;
            dt_work_free(c->w);
        } else {
            z->chunks[k++] = *c;
        }
    }
    z->nchunks = k;
    return rc;
}

/* ---- stage 3: gathering a segment's parameters ---- */
static int gather_into(dt_zero *z, layerbuf *lb, int seg) {
    size_t a = z->off[seg], b = a + z->cnt[seg];
    lb->seg = seg;
    FOR_PIECES(z, a, b, o, pa, pb) {
        if (lb->pending.n >= MAXW) return DT_ERR(DT_ERR_INTERNAL, "too many owner pieces for one layer");
        const float *src = o != z->r ? NULL : z->dev ? z->p_dev + (pa - z->lo) : z->p_shard + (pa - z->lo);
        int rc = dt_broadcast_ex(src, lb->buf + (pa - a), pb - pa, DT_F32, owner_world(z, o), z->comm, &z->co,
                                 &lb->pending.w[lb->pending.n]);
        if (rc) return rc;
        lb->pending.n++;
    }
    return DT_OK;
}

static layerbuf *find_pb(dt_zero *z, int seg) {
    for (int i = 0; i < 2; i++) if (z->pb[i].seg == seg) return &z->pb[i];
    return NULL;
}

/* gather seg (unless prefetched), prefetch `next` (>= 0), wait for seg */
static int stage3_acquire(dt_zero *z, int seg, int next, float **params) {
    layerbuf *lb = find_pb(z, seg);
    int rc;
    if (!lb) {
        lb = z->pb[0].seg < 0 ? &z->pb[0] : z->pb[1].seg < 0 ? &z->pb[1] : NULL;
        if (!lb) { /* both hold other layers (a stale prefetch): reuse the first */
            lb = &z->pb[0];
            if ((rc = wait_list(&lb->pending))) return rc;
        }
        if ((rc = gather_into(z, lb, seg))) return rc;
    }
    if (next >= 0 && z->cfg.prefetch && !find_pb(z, next)) {
        layerbuf *other = lb == &z->pb[0] ? &z->pb[1] : &z->pb[0];
        if (other->seg < 0 && (rc = gather_into(z, other, next))) return rc;
    }
    if ((rc = wait_list(&lb->pending))) return rc;
    *params = lb->buf;
    return DT_OK;
}

static void stage3_release(dt_zero *z, int seg) {
    layerbuf *lb = find_pb(z, seg);
    if (lb && lb->pending.n == 0) lb->seg = -1;
}

static int is_shared(const dt_zero *z, int s) { return z->umin[s] != z->umax[s]; }

/* The segment to prefetch after layer `seg` in direction dir: the owner of
 * the next layer that computes with parameters, unless that owner is shared
 * (gathered on demand into its own buffer). -1: none. */
static int next_nonempty(const dt_zero *z, int seg, int dir) {
    for (int s = seg + dir; s >= 0 && s < z->nsegs; s += dir) {
        int o = z->owner[s];
        if (!z->cnt[o]) continue;
        return is_shared(z, o) ? -1 : o;
    }
    return -1;
}

static int prefetch(dt_zero *z, int next) {
    if (next < 0 || !z->cfg.prefetch || find_pb(z, next)) return DT_OK;
    layerbuf *lb = z->pb[0].seg < 0 ? &z->pb[0] : z->pb[1].seg < 0 ? &z->pb[1] : NULL;
    return lb ? gather_into(z, lb, next) : DT_OK;
}

/* A shared segment's parameters, resident in its own buffer from its first
 * user of a pass to its last (stage 3). */
static int shared_acquire(dt_zero *z, int o, int next, float **params) {
    layerbuf *b = &z->sp[o];
    int rc;
    if (b->seg != o && (rc = gather_into(z, b, o))) return rc;
    if ((rc = prefetch(z, next))) return rc;
    if ((rc = wait_list(&b->pending))) return rc;
    *params = b->buf;
    return DT_OK;
}

static void shared_release(dt_zero *z, int o) {
    if (z->sp[o].pending.n == 0) z->sp[o].seg = -1;
}

int dt_zero_pre_forward(dt_zero *z, int seg, float **params) {
    int rc = check_seg(z, seg, __func__);
    if (rc) return rc;
    if (!params) return DT_ERR(DT_ERR_INVALID, "params is NULL");
    *params = NULL;
    const int o = z->owner[seg];
    if (!z->cnt[o]) return DT_OK;
    if (z->cfg.stage < 3) {
        *params = z->params + z->off[o];
        return wait_chunks(z, z->off[o], z->off[o] + z->cnt[o]);
    }
    if (is_shared(z, o)) return shared_acquire(z, o, next_nonempty(z, seg, +1), params);
    return stage3_acquire(z, o, next_nonempty(z, seg, +1), params);
}

int dt_zero_post_forward(dt_zero *z, int seg) {
    int rc = check_seg(z, seg, __func__);
    if (rc) return rc;
    const int o = z->owner[seg];
    if (z->cfg.stage < 3 || !z->cnt[o]) return DT_OK;
    if (!is_shared(z, o)) stage3_release(z, o);
    else if (seg == z->umax[o]) shared_release(z, o); /* the pass's last user */
    return DT_OK;
}

int dt_zero_pre_backward(dt_zero *z, int seg, float **params, float **grads) {
    int rc = check_seg(z, seg, __func__);
    if (rc) return rc;
    if (!params || !grads) return DT_ERR(DT_ERR_INVALID, "NULL output pointer");
    *params = *grads = NULL;
    const int o = z->owner[seg];
    if (!z->cnt[o]) return DT_OK;
    if (z->cfg.stage < 3) *params = z->params + z->off[o];
    else if (is_shared(z, o)) rc = shared_acquire(z, o, next_nonempty(z, seg, -1), params);
    else rc = stage3_acquire(z, o, next_nonempty(z, seg, -1), params);
    if (rc) return rc;
    if (z->cfg.stage == 1) { *grads = z->grads + z->off[o]; return DT_OK; }
    if (is_shared(z, o)) { /* one buffer from the first user to grad_ready(o) */
        layerbuf *g = &z->sg[o];
        if (g->seg != o) {
            if ((rc = wait_grads(z, g))) return rc;
            if ((rc = zero_buf(z, g->buf, z->cnt[o]))) return rc;
            g->seg = o;
        }
        *grads = g->buf;
        return DT_OK;
    }
    /* a free gradient layer buffer: the older one once its reduces are done */
    layerbuf *g = z->gb[0].seg < 0 && !z->gb[0].pending.n ? &z->gb[0]
                : z->gb[1].seg < 0 && !z->gb[1].pending.n ? &z->gb[1] : NULL;
    if (!g) {
        g = z->gb[0].pending.n ? &z->gb[0] : &z->gb[1];
        if ((rc = wait_grads(z, g))) return rc;
    }
    g->seg = seg;
    if ((rc = zero_buf(z, g->buf, z->cnt[seg]))) return rc;
    *grads = g->buf;
    return DT_OK;
}

int dt_zero_grad_ready(dt_zero *z, int seg) {
    int rc = check_seg(z, seg, __func__);
    if (rc) return rc;
    if (!z->in_step) return DT_ERR(DT_ERR_STATE, "dt_zero_grad_ready outside a step");
    if (!z->cnt[seg]) return DT_OK;
    if (z->owner[seg] != seg) return DT_ERR(DT_ERR_INVALID, "segment %d owns no parameters (segment %d does)", seg, z->owner[seg]);
    if (z->ddp) return dt_ddp_grad_ready(z->ddp, z->ddp_seg[seg]);
    layerbuf *g = is_shared(z, seg) ? (z->sg[seg].seg == seg ? &z->sg[seg] : NULL)
                : z->gb[0].seg == seg ? &z->gb[0] : z->gb[1].seg == seg ? &z->gb[1] : NULL;
    if (!g) return DT_ERR(DT_ERR_STATE, "segment %d has no gradient buffer (pre_backward not called)", seg);
    size_t a = z->off[seg], b = a + z->cnt[seg];
    FOR_PIECES(z, a, b, o, pa, pb) {
        if (g->pending.n >= MAXW) return DT_ERR(DT_ERR_INTERNAL, "too many owner pieces for one layer");
        dt_work **w = &g->pending.w[g->pending.n];
        if (o == z->r && z->dev) { /* reduced in place here, added into the host shard once done */
            float *lp = g->buf + (pa - a);
            rc = dt_reduce_ex(lp, lp, pb - pa, DT_F32, DT_SUM, owner_world(z, o), z->comm, &z->gco, w);
            g->acc_src = lp;
            g->acc_off = pa - z->lo;
            g->acc_n = pb - pa;
        } else if (o == z->r) { /* the shard accumulates: own contribution = shard + local gradient */
            float *sp = z->g_shard + (pa - z->lo);
            const float *lp = g->buf + (pa - a);
            for (size_t i = 0; i < pb - pa; i++) sp[i] += lp[i];
            rc = dt_reduce_ex(sp, sp, pb - pa, DT_F32, DT_SUM, owner_world(z, o), z->comm, &z->gco, w);
        } else {
            rc = dt_reduce_ex(g->buf + (pa - a), NULL, pb - pa, DT_F32, DT_SUM, owner_world(z, o), z->comm, &z->gco, w);
        }
        if (rc) return rc;
        g->pending.n++;
    }
    g->seg = -1; /* free once pending completes */
    return DT_OK;
}

int dt_zero_post_backward(dt_zero *z, int seg) {
    int rc = check_seg(z, seg, __func__);
    if (rc) return rc;
    const int o = z->owner[seg];
    if (z->cfg.stage < 3 || !z->cnt[o]) return DT_OK;
    if (!is_shared(z, o)) stage3_release(z, o);
    else if (seg == z->umin[o]) shared_release(z, o); /* the backward's last user */
    return DT_OK;
}

int dt_zero_finish(dt_zero *z) {
    if (!z) return DT_ERR(DT_ERR_INVALID, "zero is NULL");
    if (!z->in_step) return DT_ERR(DT_ERR_STATE, "dt_zero_finish outside a step");
    z->in_step = 0;
    if (z->ddp) return dt_ddp_finish(z->ddp);
    int rc = DT_OK;
    for (int i = 0; i < 2; i++) {
        int w = wait_grads(z, &z->gb[i]);
        if (!rc) rc = w;
        z->gb[i].seg = -1;
    }
    for (int s = 0; s < z->nsegs; s++) {
        if (!z->sg[s].buf) continue;
        int w = wait_grads(z, &z->sg[s]);
        if (!rc) rc = w;
        z->sg[s].seg = -1;
    }
    return rc;
}

/* device: the updated host slice back to the device (the working copy for
 * stages 1/2, the gathers' source for stage 3) */
static int push_slice(dt_zero *z) {
    if (!z->dev) return DT_OK;
    return dcopy(z, z->cfg.stage == 3 ? z->p_dev : z->params + z->lo, z->p_shard, z->hi - z->lo);
}

static int reshare_params(dt_zero *z) {
    /* each owner broadcasts its updated slice, in chunks */
    size_t cap = z->cfg.bucket_cap_bytes / sizeof(float);
    if (cap == 0) cap = z->maxseg ? z->maxseg : 1;
    for (int o = 0; o < z->N; o++) {
        size_t a = (size_t)o * z->S, b = a + z->S < z->P ? a + z->S : z->P;
        for (size_t c = a; c < b; c += cap) {
            size_t e = c + cap < b ? c + cap : b;
            if (z->nchunks == z->capchunks) {
                int nc = z->capchunks ? 2 * z->capchunks : 64;
                chunk *p = realloc(z->chunks, sizeof(chunk) * (size_t)nc);
                if (!p) return DT_ERR(DT_ERR_NOMEM, "out of memory");
                z->chunks = p;
                z->capchunks = nc;
            }
            chunk *ch = &z->chunks[z->nchunks];
            int rc = dt_broadcast_ex(z->params + c, z->params + c, e - c, DT_F32, owner_world(z, o), z->comm, &z->co,
                                     &ch->w);
            if (rc) return rc;
            ch->a = c;
            ch->b = e;
            z->nchunks++;
        }
    }
    return DT_OK;
}

int dt_zero_step(dt_zero *z, float lr, double max_norm, double *norm_out) {
    if (!z) return DT_ERR(DT_ERR_INVALID, "zero is NULL");
    if (z->in_step) return DT_ERR(DT_ERR_STATE, "dt_zero_step inside a micro-step (call dt_zero_finish first)");
    size_t n = z->hi - z->lo;
    int rc;
    /* device, stage 1: this rank's slice of the averaged gradients, after
     * the buckets (the stream waited for them at finish) */
    if (z->dev && z->cfg.stage == 1 && (rc = dcopy(z, z->g_shard, z->grads + z->lo, n))) return rc;
    /* hybrid sharding: the shard summed over the replicas (the same n on
     * each): the leg between hosts, compressed with cfg.wire */
    if (z->R > 1 && n && (rc = dt_allreduce_ex(z->g_shard, z->g_shard, n, DT_F32, DT_SUM, z->cfg.replicas, &z->rco, NULL)))
        return rc;
    if (z->cfg.average && (z->cfg.stage >= 2 || z->R > 1)) /* stage 1: DDP already divided by N */
        dt_grad_scale(z->g_shard, n, 1.0f / (float)(z->cfg.stage >= 2 ? z->N * z->R : z->R));
    if (norm_out || max_norm > 0) { /* a pass over the gradients and an allreduce: only when asked */
        double sq = dt_grad_sqnorm(z->g_shard, n);
        if ((rc = dt_allreduce(&sq, &sq, 1, DT_F64, DT_SUM, z->comm))) return rc;
        double norm = sqrt(sq);
        if (norm_out) *norm_out = norm;
        if (max_norm > 0) {
            double coef = max_norm / (norm + 1e-6);
            if (coef < 1.0) dt_grad_scale(z->g_shard, n, (float)coef);
        }
    }
    if ((rc = dt_optim_step(z->opt, z->p_shard, z->g_shard, lr))) return rc;
    if (z->cfg.stage >= 2) memset(z->g_shard, 0, n * sizeof(float));
    if ((rc = push_slice(z))) return rc;
    if (z->cfg.stage < 3) return reshare_params(z);
    return DT_OK;
}

int dt_zero_gather_range(dt_zero *z, size_t offset, size_t count, float *dst, int root) {
    if (!z) return DT_ERR(DT_ERR_INVALID, "zero is NULL");
    if (offset > z->P || count > z->P - offset) return DT_ERR(DT_ERR_INVALID, "range [%zu, +%zu) outside [0, %zu)", offset, count, z->P);
    int me = z->ci.world_rank == root, rc;
    if (me && !dst && count) return DT_ERR(DT_ERR_INVALID, "dst is NULL on the root");
    if (z->cfg.stage < 3) {
        if ((rc = wait_chunks(z, offset, offset + count))) return rc;
        if (me && count && z->dev) return dcopy(z, dst, z->params + offset, count);
        if (me && count) memcpy(dst, z->params + offset, count * sizeof(float));
        return DT_OK;
    }
    FOR_PIECES(z, offset, offset + count, o, pa, pb) {
        int ow = owner_world(z, o);
        if (ow == root) {
            if (me) memcpy(dst + (pa - offset), z->p_shard + (pa - z->lo), (pb - pa) * sizeof(float));
        } else if (me) {
            if ((rc = dt_recv(dst + (pa - offset), pb - pa, DT_F32, ow, z->comm))) return rc;
        } else if (o == z->r) {
            if ((rc = dt_send(z->p_shard + (pa - z->lo), pb - pa, DT_F32, root, z->comm))) return rc;
        }
    }
    return DT_OK;
}

int dt_zero_load_param_shard(dt_zero *z, const float *slice) {
    if (!z || (!slice && z->hi > z->lo)) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    if (z->cfg.stage < 3) {
        int rc = wait_chunks(z, 0, z->P);
        if (rc) return rc;
    }
    if (z->hi > z->lo) memmove(z->p_shard, slice, (z->hi - z->lo) * sizeof(float));
    int rc = push_slice(z);
    if (rc) return rc;
    return z->cfg.stage < 3 ? reshare_params(z) : DT_OK;
}
