/* src/parallel/zero.c - ZeRO stages 1-3 over a sharded flat vector (see
 * dtrain/zero.h): create and free, the layer hooks (stage 3's gathers, the
 * gradient layer buffers and their reductions to the owners), the
 * micro-steps. This rank's shard, the step and the re-sharing are
 * zero_shard.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/device.h"
#include "core/error.h"
#include "parallel/zero_internal.h"

void dt_zero_config_default(dt_zero_config *c) {
    if (!c) return;
    *c = (dt_zero_config){.stage = 1, .bucket_cap_bytes = (size_t)25 << 20,
                          .first_bucket_bytes = (size_t)1 << 20, .overlap = 1, .prefetch = 1, .average = 1,
                          .mem = DT_MEM_AUTO, .stream = NULL};
}

int zero_wait_list(wlist *l) {
    int rc = DT_OK;
    for (int i = 0; i < l->n; i++) {
        int w = dt_work_wait(l->w[i]);
        if (!rc) rc = w;
        dt_work_free(l->w[i]);
    }
    l->n = 0;
    return rc;
}

int zero_owner_world(const dt_zero *z, int o) { return dt_comm_world_rank_of(z->comm, o); }

void zero_mem(dt_mem_category c, size_t n, int device, int sign) {
    dt_mem_add_on(c, sign * (long long)(n * sizeof(float)), device);
}

/* Device copies on the configured stream, complete when they return. */
int zero_dcopy(const dt_zero *z, void *dst, const void *src, size_t n) {
    if (!n) return DT_OK;
    int rc = dt_dev()->memcpy_async(dst, src, n * sizeof(float), z->co.stream);
    return rc ? rc : dt_dev()->stream_sync(z->co.stream);
}

/* a buffer of n parameters (gather_bf16: bf16) in floats, for allocation and accounting */
static size_t pfl(const dt_zero *z, size_t n) { return z->cfg.gather_bf16 ? (n + 1) / 2 : n; }

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

void dt_zero_free(dt_zero *z) {
    if (!z) return;
    for (int i = 0; i < 2; i++) {
        zero_wait_list(&z->gb[i].pending);
        zero_wait_list(&z->pb[i].pending);
        if (z->gb[i].buf) { buf_free(z, z->gb[i].buf); zero_mem(DT_MEM_COMM, z->maxbuf, z->dev, -1); }
        if (z->pb[i].buf) { buf_free(z, z->pb[i].buf); zero_mem(DT_MEM_GATHERED, pfl(z, z->maxbuf), z->dev, -1); }
    }
    for (int s = 0; s < z->nsegs && z->sp && z->sg; s++) {
        zero_wait_list(&z->sp[s].pending);
        zero_wait_list(&z->sg[s].pending);
        if (z->sp[s].buf) { buf_free(z, z->sp[s].buf); zero_mem(DT_MEM_GATHERED, pfl(z, z->cnt[s]), z->dev, -1); }
        if (z->sg[s].buf) { buf_free(z, z->sg[s].buf); zero_mem(DT_MEM_COMM, z->cnt[s], z->dev, -1); }
    }
    free(z->sp);
    free(z->sg);
    free(z->owner);
    free(z->umin);
    free(z->umax);
    for (int i = 0; i < z->nchunks; i++) { dt_work_wait(z->chunks[i].w); dt_work_free(z->chunks[i].w); }
    free(z->chunks);
    dt_ddp_free(z->ddp);
    zero_shard_free(z);
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
    if (c.param_wire != DT_WIRE_NATIVE && c.param_wire != DT_WIRE_BF16 && c.param_wire != DT_WIRE_F16)
        return DT_ERR(DT_ERR_INVALID, "unknown parameter wire type %d (valid: DT_WIRE_NATIVE 0, DT_WIRE_BF16 1, "
                      "DT_WIRE_F16 2)", c.param_wire);
    if (c.param_wire != DT_WIRE_NATIVE && ci.size > 1 && (!dev || strcmp(dt_comm_device_path(comm), "nccl") != 0))
        return DT_ERR(DT_ERR_UNSUPPORTED, "cfg.param_wire %d: parameters travel in 16 bits between GPUs over a device "
                      "transport only, and these are %s (use DT_WIRE_NATIVE)", c.param_wire,
                      dev ? "device memory staged through the host" : "host memory");
    if (c.offload != 0 && c.offload != 1)
        return DT_ERR(DT_ERR_INVALID, "cfg.offload %d (valid: 0, the shard and optimizer where the parameters are; 1, "
                      "on the host)", c.offload);
    if (dev && !c.offload && !dt_dev()->is_cuda) /* the device optimizer's kernels are CUDA's */
        return DT_ERR(DT_ERR_UNSUPPORTED, "params are device memory of the '%s' runtime, where the optimizer has no "
                      "kernels (CUDA's only): set cfg.offload 1 to keep the shard and optimizer on the host",
                      dt_dev()->name);
    if (c.gather_bf16 && (c.stage != 3 || (dev && c.offload) || c.gather_bf16 != 1))
        return DT_ERR(DT_ERR_INVALID, "cfg.gather_bf16 %d with %s: bf16 gathers from the f32 master slices are for "
                      "stage 3 with the shard where the parameters are (stages 1/2: see params_bf16)", c.gather_bf16,
                      c.stage != 3 ? "stage 1 or 2" : c.gather_bf16 != 1 ? "a value other than 0 or 1" : "cfg.offload 1");
    if (c.params_bf16 && (c.stage == 3 || (dev && c.offload)))
        return DT_ERR(DT_ERR_INVALID, "cfg.params_bf16 with %s: the bf16 copy written from ZeRO's f32 master slices "
                      "is for stages 1 and 2 with the shard where the parameters are (stage 3 gathers each layer; "
                      "set params_bf16 NULL)", c.stage == 3 ? "stage 3" : "cfg.offload 1");
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
    z->where = !dev ? ZW_HOST : c.offload ? ZW_OFFLOAD : ZW_DEVICE;
    z->co = (dt_coll_opts){.mem = dev ? DT_MEM_DEVICE : DT_MEM_HOST, .stream = dev ? c.stream : NULL};
    z->gco = z->co;
    z->gco.wire = (dt_wire)c.wire;
    z->pco = z->co;
    z->pco.wire = (dt_wire)c.param_wire;
    /* the shard's allreduce across replicas: where the shard is */
    z->rco = z->where == ZW_DEVICE ? z->gco : (dt_coll_opts){.mem = DT_MEM_HOST, .wire = (dt_wire)c.wire};
    z->p16 = c.params_bf16;
    z->params = c.stage < 3 && !z->p16 ? params : NULL;
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
    /* the two rotating layer buffers serve the segments only their own layer
     * uses: a shared one (gpt's embedding, also the tied head's) has its own
     * buffers, so they are the size of the largest other (a block, not the
     * vocabulary's embedding) */
    for (int s = 0; s < nsegs; s++)
        if (z->umin[s] == z->umax[s] && seg_cnt[s] > z->maxbuf) z->maxbuf = seg_cnt[s];
    for (int i = 0; i < 2; i++) { z->gb[i].seg = -1; z->pb[i].seg = -1; }

    /* everyone starts from the root's parameters (with replicas: first every
     * replica from replica 0, then within each from its comm rank 0) */
    if (c.replicas && (rc = dt_broadcast_ex(params, params, P, DT_F32, dt_comm_world_rank_of(c.replicas, 0), c.replicas,
                                            &z->co, NULL)))
        FAIL(rc);
    if ((rc = dt_broadcast_ex(params, params, P, DT_F32, dt_comm_world_rank_of(comm, 0), comm, &z->co, NULL)))
        FAIL(rc);
    if ((rc = zero_shard_create(z, params, grads, ocfg))) FAIL(rc);
    /* mixed precision: every rank's bf16 copy from the broadcast parameters
     * (the caller may release them once create returns) */
    if (z->p16 && ((rc = dt_optim_params_to_bf16(z->opt, z->p16, params, P)) ||
                   (dev && (rc = dt_dev()->stream_sync(z->co.stream)))))
        FAIL(rc);
    if (c.stage >= 2)
        for (int i = 0; i < 2; i++) {
            z->gb[i].buf = buf_alloc(z, z->maxbuf);
            if (!z->gb[i].buf) FAIL(DT_ERR(DT_ERR_NOMEM, "out of memory for gradient layer buffers"));
            zero_mem(DT_MEM_COMM, z->maxbuf, dev, 1);
        }
    if (c.stage == 3)
        for (int i = 0; i < 2; i++) {
            z->pb[i].buf = buf_alloc(z, pfl(z, z->maxbuf));
            if (!z->pb[i].buf) FAIL(DT_ERR(DT_ERR_NOMEM, "out of memory for gathered-parameter buffers"));
            zero_mem(DT_MEM_GATHERED, pfl(z, z->maxbuf), dev, 1);
        }
    for (int s = 0; c.stage >= 2 && s < nsegs; s++) { /* the shared segments' own buffers */
        if (!z->cnt[s] || z->umin[s] == z->umax[s]) continue;
        z->sg[s].buf = buf_alloc(z, z->cnt[s]);
        if (!z->sg[s].buf) FAIL(DT_ERR(DT_ERR_NOMEM, "out of memory for a shared segment's gradient buffer"));
        zero_mem(DT_MEM_COMM, z->cnt[s], dev, 1);
        if (c.stage < 3) continue;
        z->sp[s].buf = buf_alloc(z, pfl(z, z->cnt[s]));
        if (!z->sp[s].buf) FAIL(DT_ERR(DT_ERR_NOMEM, "out of memory for a shared segment's parameter buffer"));
        zero_mem(DT_MEM_GATHERED, pfl(z, z->cnt[s]), dev, 1);
    }

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

/* ---- stage 3: gathering a segment's parameters ---- */
static int gather_into(dt_zero *z, layerbuf *lb, int seg) {
    size_t a = z->off[seg], b = a + z->cnt[seg];
    lb->seg = seg;
    FOR_PIECES(z, a, b, o, pa, pb) {
        if (lb->pending.n >= MAXW) return DT_ERR(DT_ERR_INTERNAL, "too many owner pieces for one layer");
        int rc;
        if (z->cfg.gather_bf16) { /* the owner rounds its master piece into place, then sends it from there */
            uint16_t *dst = (uint16_t *)(void *)lb->buf + (pa - a);
            if (o == z->r && (rc = dt_optim_params_to_bf16(z->opt, dst, z->p_shard + (pa - z->lo), pb - pa))) return rc;
            rc = dt_broadcast_ex(o == z->r ? dst : NULL, dst, pb - pa, DT_BF16, zero_owner_world(z, o), z->comm, &z->co,
                                 &lb->pending.w[lb->pending.n]);
        } else {
            const float *src = o != z->r ? NULL : zero_gather_src(z) + (pa - z->lo);
            rc = dt_broadcast_ex(src, lb->buf + (pa - a), pb - pa, DT_F32, zero_owner_world(z, o), z->comm, &z->pco,
                                 &lb->pending.w[lb->pending.n]);
        }
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
            if ((rc = zero_wait_list(&lb->pending))) return rc;
        }
        if ((rc = gather_into(z, lb, seg))) return rc;
    }
    if (next >= 0 && z->cfg.prefetch && !find_pb(z, next)) {
        layerbuf *other = lb == &z->pb[0] ? &z->pb[1] : &z->pb[0];
        if (other->seg < 0 && (rc = gather_into(z, other, next))) return rc;
    }
    if ((rc = zero_wait_list(&lb->pending))) return rc;
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
    if ((rc = zero_wait_list(&b->pending))) return rc;
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
    if (z->cfg.stage < 3) { /* params_bf16: the caller computes from its bf16 copy */
        *params = z->params ? z->params + z->off[o] : NULL;
        return zero_wait_chunks(z, z->off[o], z->off[o] + z->cnt[o]);
    }
    rc = is_shared(z, o) ? shared_acquire(z, o, next_nonempty(z, seg, +1), params)
                         : stage3_acquire(z, o, next_nonempty(z, seg, +1), params);
    if (z->cfg.gather_bf16) *params = NULL; /* bf16: dt_zero_params_bf16 */
    return rc;
}

const uint16_t *dt_zero_params_bf16(const dt_zero *z, int seg) {
    if (!z || !z->cfg.gather_bf16 || seg < 0 || seg >= z->nsegs) return NULL;
    const int o = z->owner[seg];
    if (!z->cnt[o]) return NULL;
    const layerbuf *b = is_shared(z, o) ? (z->sp[o].seg == o ? &z->sp[o] : NULL) : find_pb((dt_zero *)z, o);
    return b && b->pending.n == 0 ? (const uint16_t *)(const void *)b->buf : NULL;
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
    if (z->cfg.stage < 3) *params = z->params ? z->params + z->off[o] : NULL;
    else if (is_shared(z, o)) rc = shared_acquire(z, o, next_nonempty(z, seg, -1), params);
    else rc = stage3_acquire(z, o, next_nonempty(z, seg, -1), params);
    if (z->cfg.gather_bf16) *params = NULL; /* bf16: dt_zero_params_bf16 */
    if (rc) return rc;
    if (z->cfg.stage == 1) { *grads = z->grads + z->off[o]; return DT_OK; }
    if (is_shared(z, o)) { /* one buffer from the first user to grad_ready(o) */
        layerbuf *g = &z->sg[o];
        if (g->seg != o) {
            if ((rc = zero_wait_grads(z, g))) return rc;
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
        if ((rc = zero_wait_grads(z, g))) return rc;
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
        if (o == z->r)
            rc = zero_shard_reduce(z, g, a, pa, pb, w);
        else
            rc = dt_reduce_ex(g->buf + (pa - a), NULL, pb - pa, DT_F32, DT_SUM, zero_owner_world(z, o), z->comm, &z->gco, w);
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
        int w = zero_wait_grads(z, &z->gb[i]);
        if (!rc) rc = w;
        z->gb[i].seg = -1;
    }
    for (int s = 0; s < z->nsegs; s++) {
        if (!z->sg[s].buf) continue;
        int w = zero_wait_grads(z, &z->sg[s]);
        if (!rc) rc = w;
        z->sg[s].seg = -1;
    }
    return rc;
}
