/* src/parallel/strategy.c - the table of parallel strategies and the calls
 * the trainer makes (see strategy.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/device.h"
#include "core/error.h"
#include "core/mem.h"
#include "dtrain/trace.h"
#include "parallel/replicas.h"
#include "parallel/strategy.h"

/* ---- the table: the first entry whose predicate holds is used ---------------- */

static int is_zero(const dt_config *d, int size, int stage) {
    (void)size;
    return d->zero_opt_level == stage;
}
static int sel_zero1(const dt_config *d, int size) { return is_zero(d, size, 1); }
static int sel_zero2(const dt_config *d, int size) { return is_zero(d, size, 2); }
static int sel_zero3(const dt_config *d, int size) { return is_zero(d, size, 3); }
static int sel_ddp(const dt_config *d, int size) { return size > 1 && d->enable_data_parallel; }
static int sel_none(const dt_config *d, int size) { (void)d; return size == 1; }

static const struct {
    int (*selects)(const dt_config *dist, int size);
    const dt_strategy_ops *ops;
} k_strategies[] = {
    /* ZeRO shards over the data-parallel ranks, also over one (the trainer's
     * flag checks refuse zero_opt_level > 0 without data parallelism) */
    {sel_zero1, &dt_strategy_zero1},
    {sel_zero2, &dt_strategy_zero2},
    {sel_zero3, &dt_strategy_zero3},
    {sel_ddp, &dt_strategy_ddp},
    {sel_none, &dt_strategy_none},
};
#define NSTRAT ((int)(sizeof k_strategies / sizeof k_strategies[0]))

static const dt_strategy_ops *select_ops(const dt_config *dist, int size) {
    for (int i = 0; i < NSTRAT; i++)
        if (k_strategies[i].selects(dist, size)) return k_strategies[i].ops;
    return NULL;
}

const char *dt_strategy_select(const dt_config *dist, int size) {
    const dt_strategy_ops *ops = dist ? select_ops(dist, size) : NULL;
    return ops ? ops->name : "?";
}

int dt_strategy_create(const dt_strategy_args *a, dt_strategy **out) {
    if (!out) return DT_ERR(DT_ERR_INVALID, "out is NULL");
    *out = NULL;
    if (!a || !a->comm || !a->dist || !a->optim || !a->table || (a->n_no_decay && !a->no_decay))
        return DT_ERR(DT_ERR_INVALID, "NULL argument");
    const dt_layer_table *t = a->table;
    if (t->nlayers < 1 || !t->offset || !t->count || !t->owner || !t->params || !t->grads || !t->set_layer_params ||
        !t->set_layer_grads || !t->use_grad_buffer || !t->release_flat || !t->zero_grad || !t->set_hooks ||
        !t->seed_dropout || !t->train_pass)
        return DT_ERR(DT_ERR_INVALID, "incomplete layer table (%d layers)", t->nlayers);
    dt_comm_info ci;
    int rc = dt_comm_info_get(a->comm, &ci);
    if (rc) return rc;
    const dt_strategy_ops *ops = select_ops(a->dist, ci.size);
    if (!ops)
        return DT_ERR(DT_ERR_INVALID, "no parallel strategy for %d ranks with enable_data_parallel %d and "
                      "zero_opt_level %d", ci.size, a->dist->enable_data_parallel, a->dist->zero_opt_level);
    if (a->replicas < 0) return DT_ERR(DT_ERR_INVALID, "replicas %d: must be >= 1", a->replicas);
    /* the same answer on every rank (the same config): no collective yet */
    if (a->replicas > 1 && ops->refuse_replicas) return ops->refuse_replicas(a);
    dt_strategy *s = calloc(1, sizeof *s);
    if (!s) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    s->ops = ops;
    s->comm = a->comm;
    s->ci = ci;
    s->table = *t;
    s->dp_size = ci.size;
    s->dp_rank = ci.rank;
    s->sync_bn = a->dist->sync_bn && ci.size > 1;
    if ((rc = ops->create(s, a)) || (a->replicas > 1 && (rc = dt_replicas_create(&s->table, a->replicas, &s->replicas)))) {
        dt_strategy_free(s);
        return rc;
    }
    *out = s;
    return DT_OK;
}

void dt_strategy_free(dt_strategy *s) {
    if (!s) return;
    dt_replicas_free(s->replicas); /* they read the strategy's parameters: first */
    if (s->ops->destroy) s->ops->destroy(s);
    free(s);
}

const char *dt_strategy_name(const dt_strategy *s) { return s ? s->ops->name : "?"; }

/* ---- calls ------------------------------------------------------------------ */

#define HOOK(fn)                                                   \
    int dt_strategy_##fn(void *ctx, int layer) {                   \
        dt_strategy *s = ctx;                                      \
        return s->ops->fn ? s->ops->fn(s, layer) : DT_OK;          \
    }
HOOK(pre_forward)
HOOK(post_forward)
HOOK(pre_backward)
HOOK(grad_ready)
HOOK(post_backward)
#undef HOOK

int dt_strategy_sync_stats(void *ctx, float *buf, size_t n) {
    dt_strategy *s = ctx;
    return s->ops->sync_stats ? s->ops->sync_stats(s, buf, n) : DT_OK;
}

int dt_strategy_has_sync_stats(const dt_strategy *s) { return s && s->sync_bn && s->ops->sync_stats; }

int dt_strategy_set_hooks(dt_strategy *s, const dt_layer_hooks *h) {
    if (!s || !h) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    return s->replicas ? dt_replicas_set_hooks(s->replicas, h) : s->table.set_hooks(s->table.model, h);
}

int dt_strategy_seed_dropout(dt_strategy *s, uint64_t seed) {
    if (!s) return DT_ERR(DT_ERR_INVALID, "strategy is NULL");
    int rc = s->table.seed_dropout(s->table.model, seed);
    if (!rc && s->replicas) rc = dt_replicas_seed_dropout(s->replicas, seed);
    return rc;
}

int dt_strategy_pass(dt_strategy *s, const void *x, const int32_t *y, int B, float scale, float *loss, int *correct,
                     double *bwd_t0) {
    if (!s || !bwd_t0) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    if (!s->replicas) return s->table.train_pass(s->table.model, x, y, B, scale, loss, correct, bwd_t0);
    /* forward and backward on the threads, their gradients summed; then the
     * strategy sees every layer's gradient ready, in backward order (its
     * cross-rank reduction runs once per process) */
    *bwd_t0 = dt_trace_now_us();
    int rc = dt_replicas_pass(s->replicas, x, y, B, scale, loss, correct);
    for (int layer = s->table.nlayers - 1; !rc && layer >= 0; layer--)
        if (s->table.count[layer]) rc = dt_strategy_grad_ready(s, layer);
    return rc;
}

int dt_strategy_replica_count(const dt_strategy *s) { return s ? dt_replicas_count(s->replicas) : 1; }

int dt_strategy_begin_micro(dt_strategy *s, int m, int k) {
    return s->ops->begin_micro ? s->ops->begin_micro(s, m, k) : DT_OK;
}

int dt_strategy_finish_micro(dt_strategy *s, int m, int k, dt_strategy_step *st, double bwd_t0, double bwd_t1) {
    return s->ops->finish_micro ? s->ops->finish_micro(s, m, k, st, bwd_t0, bwd_t1) : DT_OK;
}

int dt_strategy_update(dt_strategy *s, dt_strategy_step *st) { return s->ops->step(s, st); }

int dt_strategy_gather(dt_strategy *s, size_t offset, size_t count, float *dst, int root) {
    if (!s) return DT_ERR(DT_ERR_INVALID, "strategy is NULL");
    if (offset > s->table.num_params || count > s->table.num_params - offset)
        return DT_ERR(DT_ERR_INVALID, "range [%zu, +%zu) outside [0, %zu)", offset, count, s->table.num_params);
    return s->ops->gather(s, offset, count, dst, root);
}

int dt_strategy_state_get(dt_strategy *s, dt_strategy_state *st) { return s->ops->state(s, st); }

int dt_strategy_load(dt_strategy *s, dt_strategy_read_fn read, void *ctx) { return s->ops->load(s, read, ctx); }

void dt_strategy_overlap(const dt_strategy *s, double *hidden, double *hidden_compute) {
    *hidden = *hidden_compute = -1;
    if (s && s->ops->overlap) s->ops->overlap(s, hidden, hidden_compute);
}

/* ---- helpers for the strategies --------------------------------------------- */

int dt_strategy_make_optim(const dt_strategy_args *a, size_t base, size_t n, int on_device, dt_optim **out) {
    const int dev = on_device && a->table->device == DT_DEVICE_CUDA;
    int rc = dt_optim_create_on(a->optim, n, dev ? DT_DEVICE_CUDA : DT_DEVICE_CPU, dev ? a->table->stream : NULL, out);
    if (!rc && a->n_no_decay) rc = dt_optim_set_no_decay(*out, base, a->no_decay, a->n_no_decay);
    if (rc) {
        dt_optim_free(*out);
        *out = NULL;
        return rc;
    }
    dt_mem_add_on(DT_MEM_OPTIM, (long long)dt_optim_state_bytes(*out), dev);
    return DT_OK;
}

void dt_strategy_free_optim(dt_optim *opt) {
    if (!opt) return;
    dt_mem_add_on(DT_MEM_OPTIM, -(long long)dt_optim_state_bytes(opt), dt_optim_device(opt) == DT_DEVICE_CUDA);
    dt_optim_free(opt);
}

int dt_strategy_clip_full(const dt_optim *opt, float *g, size_t n, dt_strategy_step *st) {
    st->norm = -1;
    if (!st->want_norm && st->clip <= 0) return DT_OK;
    /* the gradients are identical on every rank here: the local norm is global */
    double sq;
    int rc = dt_optim_grad_sqnorm(opt, g, n, &sq);
    if (rc) return rc;
    st->norm = sqrt(sq);
    if (st->clip > 0 && st->clip / (st->norm + 1e-6) < 1.0)
        rc = dt_optim_grad_scale(opt, g, n, (float)(st->clip / (st->norm + 1e-6)));
    return rc;
}

int dt_strategy_to_host(const dt_strategy *s, float *dst, const float *src, size_t n) {
    if (!n) return DT_OK;
    if (s->table.device != DT_DEVICE_CUDA) {
        memcpy(dst, src, n * sizeof(float));
        return DT_OK;
    }
    int rc = dt_dev()->memcpy_async(dst, src, n * sizeof(float), s->table.stream);
    return rc ? rc : dt_dev()->stream_sync(s->table.stream);
}

void dt_strategy_partition(const dt_strategy *s, size_t *lo, size_t *hi) {
    size_t P = s->table.num_params, N = (size_t)s->ci.size, S = (P + N - 1) / N;
    *lo = (size_t)s->ci.rank * S < P ? (size_t)s->ci.rank * S : P;
    *hi = *lo + S < P ? *lo + S : P;
}
