/* src/train/trainer.c - the training loop: data, model, optimizer, data
 * parallelism, metrics, JSON lines, timeline (see dtrain/train.h). */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/error.h"
#include "dtrain/coll.h"
#include "dtrain/data.h"
#include "dtrain/ddp.h"
#include "dtrain/mem.h"
#include "dtrain/nn.h"
#include "dtrain/optim.h"
#include "dtrain/reliability.h"
#include "dtrain/trace.h"
#include "dtrain/train.h"
#include "dtrain/zero.h"
#include "train/trainer_internal.h"



static volatile sig_atomic_t g_stop_requested;

void dt_trainer_request_stop(void) { g_stop_requested = 1; }

/* 1 if any rank was asked to stop (all ranks get the same answer). */
static int stop_agreed(dt_trainer *t, int *rc) {
    int v = g_stop_requested ? 1 : 0;
    if (t->ci.size > 1 && (*rc = dt_allreduce(&v, &v, 1, DT_I32, DT_MAX, t->comm))) return 1;
    return v;
}

/* ---- hooks ---------------------------------------------------------------- */

static int h_pre_fwd(void *ctx, int layer) {
    dt_trainer *t = ctx;
    if (t->tracing) t->t_layer = dt_trace_now_us();
    if (!t->zero) return 0;
    float *p;
    int rc = dt_zero_pre_forward(t->zero, layer, &p);
    if (!rc && p) rc = dt_model_set_layer_params(t->model, layer, p);
    return rc;
}

static int h_pre_bwd(void *ctx, int layer) {
    dt_trainer *t = ctx;
    if (t->tracing) t->t_layer = dt_trace_now_us();
    if (!t->zero) return 0;
    float *p, *g;
    int rc = dt_zero_pre_backward(t->zero, layer, &p, &g);
    if (!rc && p) rc = dt_model_set_layer_params(t->model, layer, p);
    if (!rc && g) rc = dt_model_set_layer_grads(t->model, layer, g);
    return rc;
}

static void layer_event(dt_trainer *t, const char *what, int layer) {
    char name[48];
    snprintf(name, sizeof name, "%s %s", what, dt_model_layer_name(t->model, layer));
    dt_trace_event(name, what, DT_TRACE_COMPUTE, t->t_layer, dt_trace_now_us());
}

static int h_post_fwd(void *ctx, int layer) {
    dt_trainer *t = ctx;
    if (t->tracing) layer_event(t, "forward", layer);
    return t->zero ? dt_zero_post_forward(t->zero, layer) : 0;
}

static int h_post_bwd(void *ctx, int layer) {
    dt_trainer *t = ctx;
    if (t->tracing) layer_event(t, "backward", layer);
    return t->zero ? dt_zero_post_backward(t->zero, layer) : 0;
}

static int h_grad_ready(void *ctx, int layer) {
    dt_trainer *t = ctx;
    if (t->zero) return dt_zero_grad_ready(t->zero, layer);
    if (!t->ddp || t->layer_seg[layer] < 0) return 0;
    return dt_ddp_grad_ready(t->ddp, t->layer_seg[layer]);
}

static int h_sync_stats(void *ctx, float *buf, size_t n) {
    dt_trainer *t = ctx;
    return dt_allreduce(buf, buf, n, DT_F32, DT_SUM, t->comm);
}

/* ---- set-up ---------------------------------------------------------------- */

static int setup_zero(dt_trainer *t, const dt_optim_config *oc) {
    int L = t->nlayers;
    size_t *off = malloc(sizeof(size_t) * (size_t)L), *cnt = malloc(sizeof(size_t) * (size_t)L);
    if (!off || !cnt) { free(off); free(cnt); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    for (int l = 0; l < L; l++) dt_model_layer_params(t->model, l, &off[l], &cnt[l]);
    dt_zero_config zc;
    dt_zero_config_default(&zc);
    zc.stage = t->o.dist.zero_opt_level;
    zc.bucket_cap_bytes = (size_t)(t->o.dist.bucket_size_mb * 1048576.0);
    zc.first_bucket_bytes = (size_t)(t->o.dist.first_bucket_mb * 1048576.0);
    zc.overlap = t->o.dist.overlap;
    zc.wire = t->o.dist.grad_comm_dtype;
    zc.average = 0; /* backward is pre-scaled by 1/size (train_step) */
    int rc = dt_zero_create(t->comm, &zc, dt_model_num_params(t->model), off, cnt, L, dt_model_params(t->model),
                            zc.stage == 1 ? dt_model_grads(t->model) : NULL, oc, &t->zero);
    free(off);
    free(cnt);
    if (rc) return rc;
    /* stages 2 and 3 never use the model's full gradient buffer, stage 3 not its
     * parameter buffer either: the model releases them */
    if (zc.stage >= 2) {
        rc = dt_model_release_flat(t->model, zc.stage == 3, 1);
        if (rc) return rc;
        t->mem_model[1] = 0;
        if (zc.stage == 3) t->mem_model[0] = 0;
    }
    /* batch-norm buffers start identical too */
    size_t nb = dt_model_num_buffers(t->model);
    return nb ? dt_broadcast(dt_model_buffers(t->model), dt_model_buffers(t->model), nb, DT_F32,
                             dt_comm_world_rank_of(t->comm, 0), t->comm)
              : DT_OK;
}

static int setup_optimizer(dt_trainer *t) {
    const dt_train_options *o = &t->o;
    dt_optim_kind kind;
    int rc = dt_optim_kind_parse(o->optimizer, &kind);
    if (rc) return rc;
    dt_optim_config oc;
    dt_optim_config_default(&oc, kind);
    oc.lr = o->lr > 0 ? o->lr : (kind == DT_OPTIM_SGD ? 0.01 : 1e-3);
    if (kind == DT_OPTIM_SGD) { oc.momentum = o->momentum; oc.nesterov = o->nesterov; }
    if (o->weight_decay >= 0) oc.weight_decay = o->weight_decay;
    if (o->dist.zero_opt_level > 0) {
        rc = setup_zero(t, &oc);
    } else {
        rc = dt_optim_create(&oc, dt_model_num_params(t->model), &t->opt);
        if (!rc) dt_mem_add(DT_MEM_OPTIM, (long long)dt_optim_state_bytes(t->opt));
    }
    if (rc) return rc;
    dt_lr_schedule_init(&t->sched, (float)oc.lr);
    t->sched.warmup_steps = o->warmup_steps;
    t->sched.min_lr = (float)o->min_lr;
    long per_epoch = dt_batch_iter_num_batches(&t->it) / o->accum_steps;
    long total = per_epoch * o->epochs;
    if (o->max_steps > 0 && o->max_steps < total) total = o->max_steps;
    t->planned_steps = total;
    if (strcmp(o->schedule, "cosine") == 0) {
        t->sched.decay = DT_LR_COSINE;
        t->sched.total_steps = total > o->warmup_steps ? total : o->warmup_steps + 1;
    }
    return dt_lr_schedule_validate(&t->sched);
}

static int setup_ddp(dt_trainer *t) {
    int L = t->nlayers, nseg = 0;
    /* Gradients in memory the ranks share (on one host): the buckets, views
     * at the same offsets on every rank, are then reduced straight between
     * the ranks' gradient buffers (comm.h). Collective, like dt_ddp_create. */
    void *sg = NULL;
    int rc = dt_comm_alloc_shared(t->comm, dt_model_num_params(t->model) * sizeof(float), &sg);
    if (rc) return rc;
    t->shared_grads = sg;
    if ((rc = dt_model_use_grad_buffer(t->model, sg))) return rc;
    dt_ddp_segment *segs = malloc(sizeof *segs * (size_t)L);
    if (!segs) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    float *p = dt_model_params(t->model), *g = dt_model_grads(t->model);
    for (int l = 0; l < L; l++) {
        size_t off, cnt;
        dt_model_layer_params(t->model, l, &off, &cnt);
        t->layer_seg[l] = -1;
        if (!cnt) continue;
        t->layer_seg[l] = nseg;
        t->seg_off[nseg] = off;
        t->seg_cnt[nseg] = cnt;
        segs[nseg++] = (dt_ddp_segment){p + off, g + off, cnt};
    }
    dt_ddp_buffer buf = {dt_model_buffers(t->model), dt_model_num_buffers(t->model)};
    dt_ddp_config dc;
    dt_ddp_config_default(&dc);
    dc.bucket_cap_bytes = (size_t)(t->o.dist.bucket_size_mb * 1048576.0);
    dc.first_bucket_bytes = (size_t)(t->o.dist.first_bucket_mb * 1048576.0);
    dc.overlap = t->o.dist.overlap;
    dc.broadcast_buffers = t->o.dist.broadcast_buffers && !t->o.dist.sync_bn;
    dc.root = dt_comm_world_rank_of(t->comm, 0);
    dc.average = 0; /* backward is pre-scaled by 1/size (train_step) */
    dc.wire = t->o.dist.grad_comm_dtype;
    rc = dt_ddp_create(t->comm, segs, nseg, &buf, buf.count ? 1 : 0, &dc, &t->ddp);
    free(segs);
    return rc;
}

int dt_trainer_create(const dt_train_options *o, dt_trainer **out) {
    if (!o || !out) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    *out = NULL;
    dt_trainer *t = calloc(1, sizeof *t);
    if (!t) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    t->o = *o;
    t->comm = o->comm ? o->comm : dt_comm_world();
    int rc = dt_comm_info_get(t->comm, &t->ci);
    if (rc) { free(t); return rc; }
#define FAIL(x) do { rc = (x); if (rc) { dt_trainer_free(t); return rc; } } while (0)
    if (o->batch_size < 1 || o->epochs < 1 || o->accum_steps < 1)
        FAIL(DT_ERR(DT_ERR_INVALID, "batch_size, epochs and accum_steps must be >= 1"));
    t->dp = t->ci.size > 1 && o->dist.enable_data_parallel;
    if (t->ci.size > 1 && !o->dist.enable_data_parallel)
        FAIL(DT_ERR(DT_ERR_INVALID, "enable_data_parallel is off but %d ranks were launched: nothing would be shared", t->ci.size));
    if (t->ci.size > 1) FAIL(dt_trainer_check_flags(t));
    FAIL(dt_trainer_check_outputs(t)); /* before anything is trained */
    FAIL(dt_set_num_threads(o->threads));
    FAIL(dt_set_timeout(o->dist.timeout_s)); /* the watchdog's limit on every blocking call */

    /* a data set missing on one host ends every rank, with its message */
    rc = dt_fashion_mnist_load(o->data_dir, 1, &t->train);
    if (!rc) rc = dt_fashion_mnist_load(o->data_dir, 0, &t->test);
    FAIL(dt_trainer_agree_error(t, rc));
    if (o->train_limit > 0 && o->train_limit < t->train.count) {
        dt_dataset s;
        FAIL(dt_dataset_subset(&t->train, o->train_limit, &s));
        dt_dataset_free(&t->train);
        t->train = s;
    }
    if (o->test_limit > 0 && o->test_limit < t->test.count) {
        dt_dataset s;
        FAIL(dt_dataset_subset(&t->test, o->test_limit, &s));
        dt_dataset_free(&t->test);
        t->test = s;
    }
    if (t->ci.size > 1) FAIL(dt_trainer_check_data(t));
    if (t->train.count < t->ci.size)
        FAIL(DT_ERR(DT_ERR_INVALID, "%lld training samples cannot feed %d ranks", (long long)t->train.count, t->ci.size));
    FAIL(dt_sampler_init(&t->sampler, t->train.count, t->ci.size, t->ci.rank, o->shuffle, o->drop_last, o->seed));
    FAIL(dt_batch_iter_init(&t->it, &t->sampler, o->batch_size, o->drop_last));
    if (dt_batch_iter_num_batches(&t->it) < o->accum_steps)
        FAIL(DT_ERR(DT_ERR_INVALID, "an epoch has %lld batches per rank, fewer than accum_steps %d",
                    (long long)dt_batch_iter_num_batches(&t->it), o->accum_steps));

    dt_model_config mc;
    FAIL(dt_model_config_init(&mc, o->model));
    if (o->hidden1) mc.hidden1 = o->hidden1;
    if (o->hidden2) mc.hidden2 = o->hidden2;
    if (o->dropout >= 0) mc.dropout = o->dropout;
    mc.seed = o->seed;
    FAIL(dt_model_create(&mc, &t->model));
    FAIL(dt_model_seed_dropout(t->model, o->seed * 1000003ull + (uint64_t)t->ci.rank));
    t->nlayers = dt_model_num_layers(t->model);
    t->layer_seg = malloc(sizeof(int) * (size_t)t->nlayers);
    t->seg_off = malloc(sizeof(size_t) * (size_t)t->nlayers);
    t->seg_cnt = malloc(sizeof(size_t) * (size_t)t->nlayers);
    if (!t->layer_seg || !t->seg_off || !t->seg_cnt) FAIL(DT_ERR(DT_ERR_NOMEM, "out of memory"));
    for (int l = 0; l < t->nlayers; l++) t->layer_seg[l] = -1;
    t->mem_model[0] = t->mem_model[1] = (long long)(dt_model_num_params(t->model) * sizeof(float));
    if (t->dp && o->dist.zero_opt_level == 0) FAIL(setup_ddp(t));
    FAIL(setup_optimizer(t)); /* ZeRO (stage >= 1) replaces DDP and the optimizer */
    dt_mem_add(DT_MEM_PARAMS, t->mem_model[0]);
    dt_mem_add(DT_MEM_GRADS, t->mem_model[1]);

    int cap = o->batch_size > 500 ? o->batch_size : 500; /* eval batches of 500 */
    t->x = malloc(sizeof(float) * (size_t)cap * 784);
    t->y = malloc(sizeof(int32_t) * (size_t)cap);
    if (!t->x || !t->y) FAIL(DT_ERR(DT_ERR_NOMEM, "out of memory for batch buffers"));
    t->cap = cap;

    dt_model_hooks hk = {.ctx = t, .pre_forward = h_pre_fwd, .post_forward = h_post_fwd, .pre_backward = h_pre_bwd,
                         .grad_ready = h_grad_ready, .post_backward = h_post_bwd,
                         .sync_stats = (t->dp && o->dist.sync_bn) ? h_sync_stats : NULL};
    FAIL(dt_model_set_hooks(t->model, &hk));
    if (*o->resume_dir) FAIL(dt_trainer_resume(t, o->resume_dir));
    if (*o->resume_dir && t->ci.size > 1) FAIL(dt_trainer_check_resumed(t));
    dtm_memory(&t->metrics, "start", dt_model_num_params(t->model), t->ci.size, o->dist.zero_opt_level);
#undef FAIL
    *out = t;
    return DT_OK;
}

void dt_trainer_free(dt_trainer *t) {
    if (!t) return;
    if (t->tracing) dt_trace_close();
    dtm_close(&t->metrics); /* a failed write was already reported by dt_trainer_fit or is moot */
    dt_ddp_free(t->ddp);
    dt_zero_free(t->zero);
    if (t->opt) dt_mem_add(DT_MEM_OPTIM, -(long long)dt_optim_state_bytes(t->opt));
    dt_optim_destroy(t->opt);
    dt_mem_add(DT_MEM_PARAMS, -t->mem_model[0]);
    dt_mem_add(DT_MEM_GRADS, -t->mem_model[1]);
    dt_model_free(t->model);
    if (t->shared_grads) dt_comm_free_shared(t->comm, t->shared_grads);
    dt_batch_iter_free(&t->it);
    dt_dataset_free(&t->train);
    dt_dataset_free(&t->test);
    free(t->layer_seg);
    free(t->seg_off);
    free(t->seg_cnt);
    free(t->x);
    free(t->y);
    free(t->step_s);
    free(t);
}

dt_model *dt_trainer_model(dt_trainer *t) { return t ? t->model : NULL; }

/* ---- evaluation -------------------------------------------------------------- */

static int sum_over_ranks(dt_trainer *t, double *v, int n) {
    if (t->ci.size == 1) return DT_OK;
    return dt_allreduce(v, v, (size_t)n, DT_F64, DT_SUM, t->comm);
}

int dt_trainer_evaluate(dt_trainer *t, double *acc, double *loss) {
    if (!t) return DT_ERR(DT_ERR_INVALID, "trainer is NULL");
    /* rank r evaluates samples r, r+N, ...: the test set exactly once overall.
     * Every rank runs the same number of batches (ZeRO-3 gathers parameters
     * collectively in forward): ranks with fewer samples pad their last batch
     * with sample 0, whose row is not counted. */
    double v[3] = {0, 0, 0}; /* correct, count, loss sum */
    int64_t idx[500];
    int N = t->ci.size, C = dt_model_num_classes(t->model);
    int64_t per_rank = (t->test.count + N - 1) / N;
    for (int64_t i = 0; i < per_rank;) {
        int B = 0, valid = 0;
        for (; B < 500 && i < per_rank; B++, i++) {
            int64_t s = t->ci.rank + i * N;
            idx[B] = s < t->test.count ? s : 0;
            if (s < t->test.count) valid = B + 1;
        }
        int rc = dt_dataset_batch(&t->test, idx, B, t->x, t->y, NULL);
        if (!rc) rc = dt_model_forward(t->model, t->x, t->y, B, 0, NULL);
        if (rc) return rc;
        const float *lp = dt_model_logits(t->model); /* [B, C] log-probabilities */
        for (int b = 0; b < valid; b++) {
            const float *row = lp + (size_t)b * C;
            int best = 0;
            for (int c = 1; c < C; c++) if (row[c] > row[best]) best = c;
            v[0] += best == t->y[b];
            v[1] += 1;
            v[2] -= row[t->y[b]];
        }
    }
    int rc = sum_over_ranks(t, v, 3);
    if (rc) return rc;
    if (acc) *acc = v[1] > 0 ? v[0] / v[1] : 0;
    if (loss) *loss = v[1] > 0 ? v[2] / v[1] : 0;
    return DT_OK;
}

int dt_trainer_gather_params(dt_trainer *t, float *dst, int root) {
    if (!t) return DT_ERR(DT_ERR_INVALID, "trainer is NULL");
    size_t n = dt_model_num_params(t->model);
    if (t->zero) return dt_zero_gather_range(t->zero, 0, n, dst, root);
    if (t->ci.world_rank == root) {
        if (!dst) return DT_ERR(DT_ERR_INVALID, "dst is NULL on the root");
        memcpy(dst, dt_model_params(t->model), n * sizeof(float));
    }
    return DT_OK;
}

void dt_trainer_print_memory(dt_trainer *t, FILE *f, const char *when) {
    if (!t || t->ci.rank != 0) return;
    size_t P = dt_model_num_params(t->model);
    if (f) {
        fprintf(f, "memory (%s, rank 0 of %d, ZeRO stage %d, P = %zu parameters = %.2f MB):\n", when, t->ci.size,
                t->o.dist.zero_opt_level, P, 4.0 * (double)P / 1e6);
        fprintf(f, "  %-10s %14s %14s %8s\n", "category", "current B", "peak B", "x P");
        long long model_state = 0;
        for (int c = 0; c < DT_MEM_NUM; c++) {
            long long cur = dt_mem_current((dt_mem_category)c), pk = dt_mem_peak((dt_mem_category)c);
            if (c <= DT_MEM_OPTIM) model_state += cur;
            fprintf(f, "  %-10s %14lld %14lld %8.3f\n", dt_mem_category_name((dt_mem_category)c), cur, pk, (double)cur / (double)P);
        }
        fprintf(f, "  %-10s %14lld %14s %8.3f\n", "model state", model_state, "", (double)model_state / (double)P);
        fflush(f);
    }
}

/* ---- training --------------------------------------------------------------- */

void dt_trainer_position(const dt_trainer *t, uint64_t *epoch, uint64_t *samples) {
    *epoch = (uint64_t)t->epoch;
    if (t->resume_pos > 0) *samples = (uint64_t)t->resume_pos; /* resumed, not trained since */
    else if (t->epoch_over) *samples = 0;
    else *samples = (uint64_t)dt_sampler_position(&t->sampler, t->it.pos);
}

/* The end of a run: the JSON lines file and this rank's timeline are closed
 * and every failed write of their lives reported (after the model and the
 * checkpoint were saved: nothing of the training is lost to a full disk). */
static int close_outputs(dt_trainer *t) {
    int rc = dtm_close(&t->metrics);
    if (t->tracing) {
        t->tracing = 0;
        int trc = dt_trace_close();
        if (!rc) rc = trc;
    }
    return rc;
}

static uint64_t o_seed(const dt_trainer *t) { return t->o.seed; }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void account_overlap(dt_trainer *t) {
    int nb = dt_ddp_num_buckets(t->ddp);
    for (int b = 0; b < nb; b++) {
        double s, e;
        if (dt_ddp_bucket_times(t->ddp, b, &s, &e) || e <= s) continue;
        double lo = s > t->bwd_t0 ? s : t->bwd_t0, hi = e < t->bwd_t1 ? e : t->bwd_t1;
        t->comm_sum += e - s;
        if (hi > lo) t->hidden_sum += hi - lo;
        /* and behind the per-bucket optimizer steps, when they ran (after backward) */
        double lo2 = s > t->opt_t0 ? s : t->opt_t0, hi2 = e < t->opt_t1 ? e : t->opt_t1;
        if (t->opt_t0 >= 0 && hi2 > lo2) t->hidden_opt_sum += hi2 - lo2;
    }
}

/* dt_ddp_finish_each callback: step the optimizer on a reduced bucket's
 * parameters while the later buckets are still being reduced. */
typedef struct bucket_step {
    dt_trainer *t;
    float lr;
    double t0; /* first bucket's step start (trace clock) */
} bucket_step;

static int step_bucket(void *user, int first, int last) {
    bucket_step *bs = user;
    dt_trainer *t = bs->t;
    float *p = dt_model_params(t->model), *g = dt_model_grads(t->model);
    if (bs->t0 < 0) bs->t0 = dt_trace_now_us();
    for (int s = first; s <= last; s++) {
        int rc = dt_optim_step_range(t->opt, p + t->seg_off[s], g + t->seg_off[s], bs->lr, t->seg_off[s], t->seg_cnt[s]);
        if (rc) return rc;
    }
    return DT_OK;
}

static void progress(const dt_trainer *t, int epoch, long done, long total, double loss) {
    int w = 30, f = total ? (int)(w * done / total) : w;
    char bar[32];
    for (int i = 0; i < w; i++) bar[i] = i < f ? '#' : '.';
    bar[w] = '\0';
    printf("\repoch %d/%d [%s] %3ld%% loss %.4f", epoch + 1, t->o.epochs, bar, total ? 100 * done / total : 100, loss);
    fflush(stdout);
}

/* One optimizer step over accum_steps micro-batches. Returns 1 if a step was
 * taken, 0 at the end of the epoch, or a negative status. */
static int train_step(dt_trainer *t, double *loss_sum, double *correct, double *count, double *step_loss) {
    const int k = t->o.accum_steps;
    int64_t consumed = (t->it.pos + t->o.batch_size - 1) / t->o.batch_size;
    if (dt_batch_iter_num_batches(&t->it) - consumed < k) return 0; /* epoch ends: no partial step */
    double t0 = dt_trace_now_us();
    *step_loss = 0;
    float lr = dt_lr_at(&t->sched, t->step);
    /* the gradient norm costs a pass over the gradients: computed when
     * clipping, and on the last planned step for the result */
    int want_norm = t->o.clip_grad_norm > 0 || t->step + 1 >= t->planned_steps;
    if (!want_norm) t->grad_norm = -1;
    /* data parallel with overlap and no norm to take first: each bucket's
     * parameters are stepped as soon as its reduction completes */
    bucket_step bs = {t, lr, -1.0};
    int step_in_finish = t->ddp && t->o.dist.overlap && !want_norm;
    for (int m = 0; m < k; m++) {
        const int64_t *idx;
        int B;
        int rc = dt_batch_iter_next(&t->it, &idx, &B);
        if (rc <= 0) return rc < 0 ? rc : DT_ERR(DT_ERR_INTERNAL, "batch iterator ended inside a step");
        rc = dt_dataset_batch(&t->train, idx, B, t->x, t->y, NULL);
        if (rc) return rc;
        /* the dropout stream depends only on (seed, rank, step, micro-step): a
         * resumed run draws the same masks as an uninterrupted one */
        rc = dt_model_seed_dropout(t->model, (o_seed(t) * 0x9e3779b97f4a7c15ull) ^
                                                 ((uint64_t)t->ci.world_rank << 48) ^ ((uint64_t)t->step * 64 + (uint64_t)m));
        if (rc) return rc;
        if (t->ddp) {
            if ((rc = dt_ddp_set_grad_sync(t->ddp, m == k - 1))) return rc;
            if ((rc = dt_ddp_begin_step(t->ddp))) return rc;
        }
        if (t->zero && (rc = dt_zero_begin_step(t->zero, m == k - 1))) return rc;
        float l;
        if ((rc = dt_model_forward(t->model, t->x, t->y, B, 1, &l))) return rc;
        int c = dt_model_correct(t->model, t->y, B);
        if (c < 0) return c;
        *loss_sum += (double)l * B;
        *correct += c;
        *count += B;
        *step_loss += l / k;
        t->bwd_t0 = dt_trace_now_us();
        /* mean over k micro-batches, and over the ranks when the buckets sum */
        float scale = 1.0f / (float)k / (float)(t->ddp || t->zero ? t->ci.size : 1);
        if ((rc = dt_model_backward_scaled(t->model, scale))) return rc;
        t->bwd_t1 = dt_trace_now_us();
        if (t->ddp) {
            if (m == k - 1 && step_in_finish) rc = dt_ddp_finish_each(t->ddp, step_bucket, &bs);
            else rc = dt_ddp_finish(t->ddp);
            if (rc) return rc;
            t->opt_t0 = m == k - 1 && step_in_finish ? bs.t0 : -1;
            t->opt_t1 = dt_trace_now_us();
            if (m == k - 1 && t->step > 0) account_overlap(t);
        }
        if (t->zero && (rc = dt_zero_finish(t->zero))) return rc;
    }
    double o0 = dt_trace_now_us();
    int rc;
    if (step_in_finish) {
        if (bs.t0 >= 0) o0 = bs.t0;
        if ((rc = dt_optim_step_finish(t->opt))) return rc;
        dt_model_zero_grad(t->model);
    } else if (t->zero) {
        if ((rc = dt_zero_step(t->zero, lr, t->o.clip_grad_norm, want_norm ? &t->grad_norm : NULL))) return rc;
        if (t->o.dist.zero_opt_level == 1) dt_model_zero_grad(t->model);
    } else {
        size_t n = dt_model_num_params(t->model);
        float *g = dt_model_grads(t->model);
        /* gradients are identical on every rank here: the local norm is global */
        if (want_norm) t->grad_norm = sqrt(dt_grad_sqnorm(g, n));
        if (t->o.clip_grad_norm > 0 && t->o.clip_grad_norm / (t->grad_norm + 1e-6) < 1.0)
            dt_grad_scale(g, n, (float)(t->o.clip_grad_norm / (t->grad_norm + 1e-6)));
        if ((rc = dt_optim_step(t->opt, dt_model_params(t->model), g, lr))) return rc;
        dt_model_zero_grad(t->model);
    }
    double t1 = dt_trace_now_us();
    if (t->tracing) dt_trace_event("optimizer step", "optimizer", DT_TRACE_COMPUTE, o0, t1);
    if (t->nstep_s == t->cap_step_s) {
        long nc = t->cap_step_s ? 2 * t->cap_step_s : 1024;
        double *p = realloc(t->step_s, sizeof(double) * (size_t)nc);
        if (!p) return DT_ERR(DT_ERR_NOMEM, "out of memory");
        t->step_s = p;
        t->cap_step_s = nc;
    }
    t->step_s[t->nstep_s++] = (t1 - t0) * 1e-6;
    dtm_step(&t->metrics, t->step + 1, (int)t->sampler.epoch, dt_sampler_position(&t->sampler, t->it.pos), *step_loss,
             lr, (t1 - t0) * 1e-6);
    t->step++;
    return 1;
}

int dt_trainer_fit(dt_trainer *t, dt_train_result *res) {
    if (!t) return DT_ERR(DT_ERR_INVALID, "trainer is NULL");
    const dt_train_options *o = &t->o;
    int rank0 = t->ci.rank == 0, bar = rank0 && !o->quiet && isatty(STDOUT_FILENO);
    /* NaN until an epoch of this run trains a step (a resumed run may have nothing left) */
    dt_train_result r = {.last_loss = NAN, .train_acc = NAN, .test_acc = -1, .comm_hidden = -1,
                         .comm_hidden_compute = -1};
    long steps_per_epoch = dt_batch_iter_num_batches(&t->it) / o->accum_steps;
    int rc = DT_OK;
    for (int e = t->epoch; e < o->epochs && (o->max_steps <= 0 || t->step < o->max_steps); e++) {
        t->epoch = e;
        t->epoch_over = 0;
        dt_sampler_set_epoch(&t->sampler, (uint64_t)e);
        if (t->resume_pos > 0) { /* resumed mid-epoch: at that sample, in this run's layout */
            rc = dt_sampler_set_start(&t->sampler, t->resume_pos);
            t->resume_pos = 0;
            if (rc) return rc;
        }
        if ((rc = dt_batch_iter_reset(&t->it, &t->sampler))) return rc;
        steps_per_epoch = dt_batch_iter_num_batches(&t->it) / o->accum_steps;
        double v[3] = {0, 0, 0}, t0 = dt_trace_now_us(), sl = 0;
        int epoch_complete = 0;
        long done = 0;
        for (;;) {
            if (o->max_steps > 0 && t->step >= o->max_steps) break;
            if (stop_agreed(t, &rc)) {
                if (rc) return rc;
                if (bar) printf("\n");
                r.steps = t->step;
                if (res) *res = r;
                return DT_ERR(DT_ERR_STATE, "stopped by request (signal) after step %ld; nothing was left half-written", t->step);
            }
            int got = train_step(t, &v[0], &v[1], &v[2], &sl);
            if (got < 0) return got;
            if (!got) { epoch_complete = 1; break; }
            done++;
            if (bar && (done % 10 == 0 || done == steps_per_epoch)) progress(t, e, done, steps_per_epoch, sl);
            if (*o->checkpoint_dir && o->checkpoint_every > 0 && t->step % o->checkpoint_every == 0 &&
                (rc = dt_trainer_save_checkpoint(t, o->checkpoint_dir)))
                return rc;
        }
        if (epoch_complete) { /* a checkpoint from here on starts at the next epoch */
            t->epoch = e + 1;
            t->epoch_over = 1;
        }
        /* nothing of this epoch was left (resumed at its end, or --max-steps
         * reached): no line of zeros, no evaluation (the same on every rank) */
        if (done == 0) continue;
        double secs = (dt_trace_now_us() - t0) * 1e-6;
        if ((rc = sum_over_ranks(t, v, 3))) return rc;
        r.epochs = e + 1;
        r.last_loss = v[2] > 0 ? v[0] / v[2] : 0;
        r.train_acc = v[2] > 0 ? v[1] / v[2] : 0;
        r.samples_per_s = secs > 0 ? v[2] / secs : 0;
        double tl = 0;
        if (o->eval && (rc = dt_trainer_evaluate(t, &r.test_acc, &tl))) return rc;
        if (bar) printf("\n");
        if (rank0 && !o->quiet) {
            printf("epoch %d/%d  loss %.4f  train_acc %.2f%%  %.0f samples/s", e + 1, o->epochs, r.last_loss,
                   100 * r.train_acc, r.samples_per_s);
            if (o->eval) printf("  test_loss %.4f  test_acc %.2f%%", tl, 100 * r.test_acc);
            printf("  (%.1f s)\n", secs);
            fflush(stdout);
        }
        dtm_epoch(&t->metrics, e + 1, t->step, r.last_loss, r.train_acc, r.samples_per_s, secs, o->eval, tl,
                  r.test_acc);
    }
    r.steps = t->step;
    if (*o->checkpoint_dir && (o->checkpoint_every <= 0 || t->step % o->checkpoint_every != 0)) {
        /* the final state */
        if ((rc = dt_trainer_save_checkpoint(t, o->checkpoint_dir))) return rc;
    }
    if (*o->save_model && (rc = dt_trainer_save_model(t, o->save_model))) return rc;
    if (t->nstep_s) {
        double *s = malloc(sizeof(double) * (size_t)t->nstep_s);
        if (s) {
            memcpy(s, t->step_s, sizeof(double) * (size_t)t->nstep_s);
            qsort(s, (size_t)t->nstep_s, sizeof(double), cmp_double);
            r.median_step_s = s[t->nstep_s / 2];
            free(s);
        }
    }
    if (t->ddp && t->comm_sum > 0) {
        r.comm_hidden = t->hidden_sum / t->comm_sum;
        r.comm_hidden_compute = (t->hidden_sum + t->hidden_opt_sum) / t->comm_sum;
    }
    r.grad_norm = t->grad_norm;
    if (res) *res = r;
    dtm_memory(&t->metrics, "end", dt_model_num_params(t->model), t->ci.size, o->dist.zero_opt_level);
    dtm_summary(&t->metrics, r.steps, t->ci.size, o->dist.zero_opt_level, r.median_step_s, r.comm_hidden,
                r.comm_hidden_compute, r.grad_norm, r.test_acc);
    return close_outputs(t);
}
