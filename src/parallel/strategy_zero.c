/* src/parallel/strategy_zero.c - ZeRO stages 1, 2 and 3 as strategies
 * (dtrain/zero.h): the optimizer state (and, from stage 2, the gradients;
 * at stage 3 the parameters too) sharded over the ranks; the model's tied
 * parameters (gpt's head) are the layer table's owners, handed to ZeRO as
 * its segments' owners. shard_group host: sharded over the ranks of each
 * host and replicated across hosts (dtrain/zero.h's HYBRID SHARDING); the
 * strategy's communicator (the world) still cuts the batches, synchronises
 * batch norm and broadcasts buffers. A device model's shard and optimizer
 * state stay on its device, or with dist.zero_offload on the host
 * (dtrain/zero.h, "Device memory"); a bf16 model's f32 master parameters
 * are ZeRO's shards at every stage (the model computes from its bf16 copy,
 * re-shared in bf16 at stages 1/2); either way the checkpoint code reads
 * and writes them through host copies (train_ckpt.c). */
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "core/mem.h"
#include "dtrain/coll.h"
#include "dtrain/config.h"
#include "dtrain/device.h"
#include "dtrain/mem.h"
#include "dtrain/trace.h"
#include "dtrain/zero.h"
#include "parallel/strategy.h"

typedef struct zs {
    dt_zero *zero;
    int stage;
    dt_comm *shard;   /* the ranks ZeRO shards over: s->comm, or this rank's host */
    int rep_rank, nrep; /* this rank's replica (hybrid: its host's place) and their count */
    long long mem[2]; /* bytes of the model's own flat params / grads registered */
    int dev;          /* ... as device memory (a device model's) */
    int g16;          /* stage 3 gathering bf16 layers (cfg.gather_bf16) */
} zs;

static zs *Z(dt_strategy *s) { return s->impl; }

static void zero_destroy(dt_strategy *s) {
    zs *z = Z(s);
    if (!z) return;
    dt_zero_free(z->zero);
    dt_mem_add_on(DT_MEM_PARAMS, -z->mem[0], z->dev);
    dt_mem_add_on(DT_MEM_GRADS, -z->mem[1], z->dev);
    free(z);
    s->impl = NULL;
}

static int zero_create(dt_strategy *s, const dt_strategy_args *a, int stage) {
    const dt_layer_table *t = &s->table;
    zs *z = calloc(1, sizeof *z);
    if (!z) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    s->impl = z;
    z->stage = stage;
    dt_zero_config zc;
    dt_zero_config_default(&zc);
    zc.stage = stage;
    zc.bucket_cap_bytes = (size_t)(a->dist->bucket_size_mb * 1048576.0);
    zc.first_bucket_bytes = (size_t)(a->dist->first_bucket_mb * 1048576.0);
    zc.wire = a->dist->grad_comm_dtype;
    zc.overlap = a->dist->overlap;
    zc.average = 0; /* the trainer scales backward by 1/dp_size */
    zc.seg_owner = t->owner;
    if (t->device == DT_DEVICE_CUDA) { /* a device model: its parameters move on the device */
        zc.mem = DT_MEM_DEVICE;
        zc.stream = t->stream;
        zc.offload = a->dist->zero_offload; /* the shard and optimizer: the device (0) or the host */
        z->dev = 1;
    }
    z->shard = s->comm;
    z->nrep = 1;
    int rc;
    if (a->dist->shard_group == DT_SHARD_HOST) {
        /* the host's ranks, and across hosts the ranks of the same local
         * rank (made even on one host: one replica, the same code path);
         * hosts with different numbers of ranks: DT_ERR_INVALID, the launch
         * does not fit the config (strategy.h, ERRORS) */
        if ((rc = dt_zero_hybrid_comms(s->comm, &z->shard, &zc.replicas))) return rc;
        z->rep_rank = dt_comm_rank(zc.replicas);
        z->nrep = dt_comm_size(zc.replicas);
    }
    /* mixed precision at stages 1/2 (ZeRO's): the f32 master parameters are
     * ZeRO's shards, the model keeps and computes from its bf16 copy only,
     * which ZeRO writes and re-shares in bf16 (2P + 4P/N bytes, not 4P + 2P;
     * the same bits). Offload keeps the f32 working copy on the device. */
    const int master = stage < 3 && t->params_bf16 && t->params_from_copy && !zc.offload;
    /* ... and at stage 3 the layers are gathered in bf16 (half the buffers
     * and the bytes; no one-layer copy to cast into) */
    z->g16 = stage == 3 && t->precision == DT_PRECISION_BF16 && t->set_layer_params16 && t->layers_bf16 &&
             !zc.offload;
    if (master) zc.params_bf16 = t->params_bf16;
    zc.gather_bf16 = z->g16;
    /* otherwise (offload) a model computing with bf16 copies, on GPUs of their
     * own: its f32 parameters move rounded to bf16 (lossless for it; half the
     * bytes of the re-sharing and the gathers) */
    if (!master && !z->g16 && z->dev && t->precision == DT_PRECISION_BF16 && dt_comm_size(z->shard) > 1 &&
             strcmp(dt_comm_device_path(z->shard), "nccl") == 0)
        zc.param_wire = DT_WIRE_BF16;
    rc = dt_zero_create(z->shard, &zc, t->num_params, t->offset, t->count, t->nlayers, t->params,
                            stage == 1 ? t->grads : NULL, a->optim, &z->zero);
    if (rc) return rc;
    size_t lo, hi;
    dt_zero_shard(z->zero, &lo, &hi);
    if (a->n_no_decay && (rc = dt_optim_set_no_decay(dt_zero_optim(z->zero), lo, a->no_decay, a->n_no_decay)))
        return rc;
    /* the model's own flat buffers: stages 2 and 3 never use the gradient
     * buffer, stage 3 not the parameter buffer either: the model releases them */
    z->mem[0] = stage < 3 && !master ? (long long)(t->num_params * sizeof(float)) : 0;
    z->mem[1] = stage < 2 ? (long long)(t->num_params * sizeof(float)) : 0;
    dt_mem_add_on(DT_MEM_PARAMS, z->mem[0], z->dev);
    dt_mem_add_on(DT_MEM_GRADS, z->mem[1], z->dev);
    if (stage >= 2 && (rc = t->release_flat(t->model, stage == 3, 1))) return rc;
    if (master && (rc = t->params_from_copy(t->model))) return rc;
    if (z->g16 && (rc = t->layers_bf16(t->model))) return rc;
    /* batch-norm buffers start identical too */
    return t->num_buffers ? dt_broadcast(t->buffers, t->buffers, t->num_buffers, DT_F32,
                                         dt_comm_world_rank_of(s->comm, 0), s->comm)
                          : DT_OK;
}

static int zero1_create(dt_strategy *s, const dt_strategy_args *a) { return zero_create(s, a, 1); }
static int zero2_create(dt_strategy *s, const dt_strategy_args *a) { return zero_create(s, a, 2); }
static int zero3_create(dt_strategy *s, const dt_strategy_args *a) { return zero_create(s, a, 3); }

/* ---- hooks: point the layer's owner where ZeRO says --------------------------------- */

/* stage 3 in bf16: the owner's gathered bf16 layer */
static int set_params16(dt_strategy *s, int layer) {
    const uint16_t *p16 = Z(s)->g16 ? dt_zero_params_bf16(Z(s)->zero, layer) : NULL;
    return p16 ? s->table.set_layer_params16(s->table.model, s->table.owner[layer], p16) : DT_OK;
}

static int zero_pre_forward(dt_strategy *s, int layer) {
    float *p;
    int rc = dt_zero_pre_forward(Z(s)->zero, layer, &p);
    if (!rc && p) rc = s->table.set_layer_params(s->table.model, s->table.owner[layer], p);
    return rc ? rc : set_params16(s, layer);
}

static int zero_pre_backward(dt_strategy *s, int layer) {
    float *p, *g;
    int rc = dt_zero_pre_backward(Z(s)->zero, layer, &p, &g);
    const int o = s->table.owner[layer];
    if (!rc && p) rc = s->table.set_layer_params(s->table.model, o, p);
    if (!rc) rc = set_params16(s, layer);
    if (!rc && g) rc = s->table.set_layer_grads(s->table.model, o, g);
    return rc;
}

static int zero_post_forward(dt_strategy *s, int layer) { return dt_zero_post_forward(Z(s)->zero, layer); }
static int zero_grad_ready(dt_strategy *s, int layer) { return dt_zero_grad_ready(Z(s)->zero, layer); }
static int zero_post_backward(dt_strategy *s, int layer) { return dt_zero_post_backward(Z(s)->zero, layer); }

static int zero_sync_stats(dt_strategy *s, float *buf, size_t n) {
    return dt_allreduce(buf, buf, n, DT_F32, DT_SUM, s->comm);
}

/* ---- steps ------------------------------------------------------------------------ */

static int zero_begin_micro(dt_strategy *s, int m, int k) { return dt_zero_begin_step(Z(s)->zero, m == k - 1); }

static int zero_finish_micro(dt_strategy *s, int m, int k, dt_strategy_step *st, double t0, double t1) {
    (void)m, (void)k, (void)st, (void)t0, (void)t1;
    return dt_zero_finish(Z(s)->zero);
}

static int zero_step(dt_strategy *s, dt_strategy_step *st) {
    zs *z = Z(s);
    if (st->opt_t0 < 0) st->opt_t0 = dt_trace_now_us();
    st->norm = -1;
    int want = st->want_norm || st->clip > 0;
    int rc = dt_zero_step(z->zero, st->lr, st->clip, want ? &st->norm : NULL);
    if (!rc && z->stage == 1) s->table.zero_grad(s->table.model); /* the full gradient buffer */
    return rc;
}

/* 1 if world rank w is a member of comm */
static int member(const dt_comm *comm, int w) {
    for (int i = 0, n = dt_comm_size(comm); i < n; i++)
        if (dt_comm_world_rank_of(comm, i) == w) return 1;
    return 0;
}

static int zero_gather(dt_strategy *s, size_t offset, size_t count, float *dst, int root) {
    /* hybrid: root's host holds every shard; the other replicas take no part */
    if (Z(s)->shard != s->comm && !member(Z(s)->shard, root)) return DT_OK;
    return dt_zero_gather_range(Z(s)->zero, offset, count, dst, root);
}

static int zero_state(dt_strategy *s, dt_strategy_state *st) {
    zs *z = Z(s);
    dt_zero_shard(z->zero, &st->lo, &st->hi);
    /* this rank's slice is current even while stages 1/2 re-share it
     * (device memory when the shard is there: the caller copies) */
    st->params = dt_zero_param_shard(z->zero);
    st->opt = dt_zero_optim(z->zero);
    /* hybrid: the replicas hold the same shard; replica k writes the k-th of
     * nrep parts of it (every rank writes about P / world size, as at
     * shard_group world) */
    size_t n = st->hi - st->lo, part = (n + (size_t)z->nrep - 1) / (size_t)z->nrep;
    size_t a = (size_t)z->rep_rank * part < n ? (size_t)z->rep_rank * part : n;
    st->save_lo = st->lo + a;
    st->save_hi = st->lo + (a + part < n ? a + part : n);
    return DT_OK;
}

static int zero_load(dt_strategy *s, dt_strategy_read_fn read, void *ctx) {
    zs *z = Z(s);
    size_t lo, hi;
    dt_zero_shard(z->zero, &lo, &hi);
    /* parameters: this rank's slice, through a host copy into wherever ZeRO
     * keeps it (stages 1/2 then re-share it into every rank's working copy) */
    float *slice = malloc((hi - lo ? hi - lo : 1) * sizeof(float));
    int rc = slice ? read(ctx, "params", lo, hi - lo, slice)
                   : DT_ERR(DT_ERR_NOMEM, "out of memory for %zu parameters", hi - lo);
    /* loading is collective: every rank read its slice, or none loads */
    int bad = rc < 0, arc = dt_allreduce(&bad, &bad, 1, DT_I32, DT_MAX, s->comm);
    if (!rc && arc) rc = arc;
    if (!rc && bad) rc = DT_ERR(DT_ERR_IO, "another rank could not read its parameter slice (see its message)");
    if (!rc) rc = dt_zero_load_param_shard(z->zero, slice);
    free(slice);
    /* the optimizer's state, where it lives (read copies into device memory) */
    dt_optim *opt = dt_zero_optim(z->zero);
    for (int i = 0; !rc && i < dt_optim_num_states(opt); i++) {
        const char *name;
        float *st = dt_optim_state(opt, i, &name);
        rc = read(ctx, name, lo, hi - lo, st);
    }
    return rc;
}

/* in-process replicas would need every layer's parameters and gradients
 * where the replicas share them; ZeRO moves them per layer */
static int zero_refuse_replicas(const dt_strategy_args *a) {
    return DT_ERR(DT_ERR_INVALID, "--dp-threads %d with zero_opt_level %d: ZeRO moves parameters and gradients "
                  "per layer and is not combined with data-parallel threads (use DDP or stage 0)",
                  a->replicas, a->dist->zero_opt_level);
}

#define ZERO_OPS(N)                                                                                       \
    const dt_strategy_ops dt_strategy_zero##N = {                                                         \
        .name = "zero" #N, .refuse_replicas = zero_refuse_replicas, .create = zero##N##_create,           \
        .destroy = zero_destroy,                                                                          \
        .pre_forward = zero_pre_forward, .post_forward = zero_post_forward,                               \
        .pre_backward = zero_pre_backward, .grad_ready = zero_grad_ready,                                 \
        .post_backward = zero_post_backward, .sync_stats = zero_sync_stats,                               \
        .begin_micro = zero_begin_micro, .finish_micro = zero_finish_micro, .step = zero_step,            \
        .gather = zero_gather, .state = zero_state, .load = zero_load,                                    \
    };
ZERO_OPS(1)
ZERO_OPS(2)
ZERO_OPS(3)
