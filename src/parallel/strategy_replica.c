/* src/parallel/strategy_replica.c - the strategies that keep a full replica
 * of the model's state on every rank: "none" (one process) and "ddp" (data
 * parallel: gradients averaged in buckets overlapped with backward,
 * dtrain/ddp.h; with overlap and no gradient norm to take first, each
 * bucket's parameters are stepped as soon as that bucket is reduced). */
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "core/mem.h"
#include "dtrain/coll.h"
#include "dtrain/ddp.h"
#include "dtrain/trace.h"
#include "parallel/strategy.h"

typedef struct replica {
    dt_optim *opt;           /* over the whole vector */
    float *params, *grads;   /* the model's flat buffers (grads: shared memory for ddp) */
    long long mem[2];        /* bytes registered as params, grads */
    /* ddp */
    dt_ddp *ddp;
    float *shared_grads;     /* from dt_comm_alloc_shared */
    int *layer_seg;          /* [layers] DDP segment of each layer, -1 if none */
    size_t *seg_off, *seg_cnt; /* [segments] */
    int overlap;             /* dist.overlap */
    int stepped;             /* this step's optimizer work ran per bucket in finish_micro */
    int synced_steps;        /* synced micro-steps seen (the first is not counted in the statistics) */
    double hidden_sum, comm_sum, hidden_opt_sum;
} replica;

static replica *R(dt_strategy *s) { return s->impl; }

static void replica_destroy(dt_strategy *s) {
    replica *r = R(s);
    if (!r) return;
    dt_ddp_free(r->ddp);
    dt_strategy_free_optim(r->opt);
    dt_mem_add_on(DT_MEM_PARAMS, -r->mem[0], s->table.device == DT_DEVICE_CUDA);
    dt_mem_add_on(DT_MEM_GRADS, -r->mem[1], s->table.device == DT_DEVICE_CUDA);
    /* the model keeps pointing at the shared gradients: it is not used after
     * its strategy is gone (the trainer frees both together) */
    if (r->shared_grads) dt_comm_free_shared(s->comm, r->shared_grads);
    free(r->layer_seg);
    free(r->seg_off);
    free(r->seg_cnt);
    free(r);
    s->impl = NULL;
}

static int replica_init(dt_strategy *s, const dt_strategy_args *a) {
    replica *r = calloc(1, sizeof *r);
    if (!r) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    s->impl = r;
    r->params = s->table.params;
    r->grads = s->table.grads;
    size_t P = s->table.num_params;
    r->mem[0] = r->mem[1] = (long long)(P * sizeof(float));
    dt_mem_add_on(DT_MEM_PARAMS, r->mem[0], s->table.device == DT_DEVICE_CUDA);
    dt_mem_add_on(DT_MEM_GRADS, r->mem[1], s->table.device == DT_DEVICE_CUDA);
    return dt_strategy_make_optim(a, 0, P, 1, &r->opt); /* where the parameters are */
}

static int none_create(dt_strategy *s, const dt_strategy_args *a) { return replica_init(s, a); }

static int replica_step(dt_strategy *s, dt_strategy_step *st) {
    replica *r = R(s);
    int rc;
    if (st->opt_t0 < 0) st->opt_t0 = dt_trace_now_us();
    if (r->stepped) { /* every bucket was stepped in finish_micro */
        r->stepped = 0;
        st->norm = -1;
        rc = dt_optim_step_finish(r->opt);
    } else {
        size_t n = s->table.num_params;
        rc = dt_strategy_clip_full(r->opt, r->grads, n, st);
        if (!rc) rc = dt_optim_step(r->opt, r->params, r->grads, st->lr);
    }
    s->table.zero_grad(s->table.model);
    return rc;
}

static int replica_gather(dt_strategy *s, size_t offset, size_t count, float *dst, int root) {
    if (s->ci.world_rank != root) return DT_OK;
    if (!dst && count) return DT_ERR(DT_ERR_INVALID, "dst is NULL on the root");
    return dt_strategy_to_host(s, dst, R(s)->params + offset, count);
}

static int replica_state(dt_strategy *s, dt_strategy_state *st) {
    replica *r = R(s);
    st->lo = 0;
    st->hi = s->table.num_params;
    st->params = r->params;
    st->opt = r->opt;
    /* the state is replicated: each rank saves its partition of it, so that
     * every strategy writes the same layout */
    dt_strategy_partition(s, &st->save_lo, &st->save_hi);
    return DT_OK;
}

static int read_states(dt_optim *opt, size_t lo, size_t n, dt_strategy_read_fn read, void *ctx) {
    int rc = DT_OK;
    for (int i = 0; !rc && i < dt_optim_num_states(opt); i++) {
        const char *name;
        float *st = dt_optim_state(opt, i, &name);
        rc = read(ctx, name, lo, n, st);
    }
    return rc;
}

static int replica_load(dt_strategy *s, dt_strategy_read_fn read, void *ctx) {
    replica *r = R(s);
    size_t P = s->table.num_params;
    int rc = read(ctx, "params", 0, P, r->params);
    return rc ? rc : read_states(r->opt, 0, P, read, ctx);
}

const dt_strategy_ops dt_strategy_none = {
    .name = "none",
    .create = none_create,
    .destroy = replica_destroy,
    .step = replica_step,
    .gather = replica_gather,
    .state = replica_state,
    .load = replica_load,
};

/* ---- ddp ----------------------------------------------------------------------- */

static int ddp_create(dt_strategy *s, const dt_strategy_args *a) {
    const dt_layer_table *t = &s->table;
    const int L = t->nlayers;
    int rc = replica_init(s, a);
    if (rc) return rc;
    replica *r = R(s);
    /* Host gradients in memory the ranks share (on one host): the buckets,
     * views at the same offsets on every rank, are then reduced straight
     * between the ranks' gradient buffers (comm.h). Collective, like
     * dt_ddp_create. A device model's stay where they are: its buckets are
     * reduced on the device (dtrain/ddp.h's device mode). */
    const int dev = t->device == DT_DEVICE_CUDA;
    if (!dev) {
        void *sg = NULL;
        if ((rc = dt_comm_alloc_shared(s->comm, t->num_params * sizeof(float), &sg))) return rc;
        r->shared_grads = sg;
        if ((rc = t->use_grad_buffer(t->model, sg))) return rc;
        r->grads = sg;
    }
    r->overlap = a->dist->overlap;
    r->layer_seg = malloc(sizeof(int) * (size_t)L);
    r->seg_off = malloc(sizeof(size_t) * (size_t)L);
    r->seg_cnt = malloc(sizeof(size_t) * (size_t)L);
    dt_ddp_segment *segs = malloc(sizeof *segs * (size_t)L);
    if (!r->layer_seg || !r->seg_off || !r->seg_cnt || !segs) {
        free(segs);
        return DT_ERR(DT_ERR_NOMEM, "out of memory");
    }
    int nseg = 0;
    for (int l = 0; l < L; l++) {
        r->layer_seg[l] = -1;
        if (!t->count[l]) continue;
        r->layer_seg[l] = nseg;
        r->seg_off[nseg] = t->offset[l];
        r->seg_cnt[nseg] = t->count[l];
        segs[nseg++] = (dt_ddp_segment){r->params + t->offset[l], r->grads + t->offset[l], t->count[l]};
    }
    dt_ddp_buffer buf = {t->buffers, t->num_buffers};
    dt_ddp_config dc;
    dt_ddp_config_default(&dc);
    dc.bucket_cap_bytes = (size_t)(a->dist->bucket_size_mb * 1048576.0);
    dc.first_bucket_bytes = (size_t)(a->dist->first_bucket_mb * 1048576.0);
    dc.wire = a->dist->grad_comm_dtype;
    dc.overlap = a->dist->overlap;
    dc.broadcast_buffers = a->dist->broadcast_buffers && !a->dist->sync_bn;
    dc.root = dt_comm_world_rank_of(s->comm, 0);
    dc.average = 0; /* the trainer scales backward by 1/dp_size */
    if (dev) {
        dc.mem = DT_MEM_DEVICE;
        dc.stream = t->stream;
    }
    rc = dt_ddp_create(s->comm, segs, nseg, &buf, buf.count ? 1 : 0, &dc, &r->ddp);
    free(segs);
    return rc;
}

static int ddp_grad_ready(dt_strategy *s, int layer) {
    replica *r = R(s);
    return r->layer_seg[layer] < 0 ? DT_OK : dt_ddp_grad_ready(r->ddp, r->layer_seg[layer]);
}

static int ddp_sync_stats(dt_strategy *s, float *buf, size_t n) {
    return dt_allreduce(buf, buf, n, DT_F32, DT_SUM, s->comm);
}

static int ddp_begin_micro(dt_strategy *s, int m, int k) {
    replica *r = R(s);
    int rc = dt_ddp_set_grad_sync(r->ddp, m == k - 1);
    return rc ? rc : dt_ddp_begin_step(r->ddp);
}

/* dt_ddp_finish_each callback: step the optimizer on a reduced bucket's
 * parameters while the later buckets are still being reduced. */
typedef struct bucket_step {
    replica *r;
    dt_strategy_step *st;
} bucket_step;

static int step_bucket(void *user, int first, int last) {
    bucket_step *bs = user;
    replica *r = bs->r;
    if (bs->st->opt_t0 < 0) bs->st->opt_t0 = dt_trace_now_us();
    for (int s = first; s <= last; s++) {
        int rc = dt_optim_step_range(r->opt, r->params + r->seg_off[s], r->grads + r->seg_off[s], bs->st->lr,
                                     r->seg_off[s], r->seg_cnt[s]);
        if (rc) return rc;
    }
    return DT_OK;
}

static void account_overlap(replica *r, double bwd_t0, double bwd_t1, double opt_t0, double opt_t1) {
    int nb = dt_ddp_num_buckets(r->ddp);
    for (int b = 0; b < nb; b++) {
        double s, e;
        if (dt_ddp_bucket_times(r->ddp, b, &s, &e) || e <= s) continue;
        double lo = s > bwd_t0 ? s : bwd_t0, hi = e < bwd_t1 ? e : bwd_t1;
        r->comm_sum += e - s;
        if (hi > lo) r->hidden_sum += hi - lo;
        /* and behind the per-bucket optimizer steps, when they ran (after backward) */
        double lo2 = s > opt_t0 ? s : opt_t0, hi2 = e < opt_t1 ? e : opt_t1;
        if (opt_t0 >= 0 && hi2 > lo2) r->hidden_opt_sum += hi2 - lo2;
    }
}

static int ddp_finish_micro(dt_strategy *s, int m, int k, dt_strategy_step *st, double bwd_t0, double bwd_t1) {
    replica *r = R(s);
    const int last = m == k - 1;
    /* with overlap and no norm to take first, each bucket's parameters are
     * stepped as soon as its reduction completes */
    const int early = last && r->overlap && st->clip <= 0 && !st->want_norm;
    int rc;
    if (early) {
        bucket_step bs = {r, st};
        rc = dt_ddp_finish_each(r->ddp, step_bucket, &bs);
        r->stepped = !rc;
    } else {
        rc = dt_ddp_finish(r->ddp);
    }
    if (rc) return rc;
    if (last && r->synced_steps++ > 0) account_overlap(r, bwd_t0, bwd_t1, early ? st->opt_t0 : -1, dt_trace_now_us());
    return DT_OK;
}

static void ddp_overlap(const dt_strategy *s, double *hidden, double *hidden_compute) {
    const replica *r = s->impl;
    if (r->comm_sum <= 0) return;
    *hidden = r->hidden_sum / r->comm_sum;
    *hidden_compute = (r->hidden_sum + r->hidden_opt_sum) / r->comm_sum;
}

const dt_strategy_ops dt_strategy_ddp = {
    .name = "ddp",
    .create = ddp_create,
    .destroy = replica_destroy,
    .grad_ready = ddp_grad_ready,
    .sync_stats = ddp_sync_stats,
    .begin_micro = ddp_begin_micro,
    .finish_micro = ddp_finish_micro,
    .step = replica_step,
    .gather = replica_gather,
    .state = replica_state,
    .load = replica_load,
    .overlap = ddp_overlap,
};
