/* src/train/trainer.c - the trainer's set-up: model, data source, parallel
 * strategy, optimizer schedule, hooks; evaluation, parameter gathering and
 * the memory table (see dtrain/train.h). The loop is in train_fit.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "core/mem.h"
#include "dtrain/coll.h"
#include "dtrain/nn.h"
#include "dtrain/reliability.h"
#include "dtrain/trace.h"
#include "dtrain/train.h"
#include "dtrain/weights.h"
#include "train/trainer_internal.h"

/* ---- hooks: the timeline around each layer, the strategy's work ---------------------- */

static int h_pre_fwd(void *ctx, int layer) {
    dt_trainer *t = ctx;
    if (t->tracing) t->t_layer = dt_trace_now_us();
    return dt_strategy_pre_forward(t->st, layer);
}

static int h_pre_bwd(void *ctx, int layer) {
    dt_trainer *t = ctx;
    if (t->tracing) t->t_layer = dt_trace_now_us();
    return dt_strategy_pre_backward(t->st, layer);
}

static void layer_event(dt_trainer *t, const char *what, int layer) {
    char name[48];
    snprintf(name, sizeof name, "%s %s", what, dt_model_layer_name(t->model, layer));
    dt_trace_event(name, what, DT_TRACE_COMPUTE, t->t_layer, dt_trace_now_us());
}

static int h_post_fwd(void *ctx, int layer) {
    dt_trainer *t = ctx;
    if (t->tracing) layer_event(t, "forward", layer);
    return dt_strategy_post_forward(t->st, layer);
}

static int h_post_bwd(void *ctx, int layer) {
    dt_trainer *t = ctx;
    if (t->tracing) layer_event(t, "backward", layer);
    return dt_strategy_post_backward(t->st, layer);
}

static int h_grad_ready(void *ctx, int layer) { return dt_strategy_grad_ready(((dt_trainer *)ctx)->st, layer); }

static int h_sync_stats(void *ctx, float *buf, size_t n) {
    return dt_strategy_sync_stats(((dt_trainer *)ctx)->st, buf, n);
}

/* ---- the layer table: the model's calls for the strategy ------------------------------- */

static int tb_set_params(void *m, int l, float *p) { return dt_model_set_layer_params(m, l, p); }
static int tb_set_grads(void *m, int l, float *g) { return dt_model_set_layer_grads(m, l, g); }
static int tb_use_grads(void *m, float *g) { return dt_model_use_grad_buffer(m, g); }
static int tb_release(void *m, int p, int g) { return dt_model_release_flat(m, p, g); }
static void tb_zero_grad(void *m) { dt_model_zero_grad(m); }
static int tb_from_copy(void *m) { return dt_model_params_from_copy(m); }
static int tb_set_params16(void *m, int l, const uint16_t *p) { return dt_model_set_layer_params16(m, l, p); }
static int tb_layers_bf16(void *m) { return dt_model_layers_bf16(m); }
static int tb_set_hooks(void *m, const dt_layer_hooks *h) {
    dt_model_hooks mh = {.ctx = h->ctx, .pre_forward = h->pre_forward, .post_forward = h->post_forward,
                         .pre_backward = h->pre_backward, .grad_ready = h->grad_ready,
                         .post_backward = h->post_backward, .sync_stats = h->sync_stats};
    return dt_model_set_hooks(m, &mh);
}
static int tb_seed_dropout(void *m, uint64_t seed) { return dt_model_seed_dropout(m, seed); }
static float *tb_flat_grads(void *m) { return dt_model_grads(m); }

/* a micro-step on the model: the loss and the predictions are read after the
 * backward (a device model's forward and backward are enqueued without a
 * wait between them) */
static int tb_train_pass(void *m, const void *x, const int32_t *y, int B, float scale, float *loss, int *correct,
                         double *bwd_t0) {
    double cd = 0;
    int rc = dt_model_forward(m, x, y, B, 1, NULL);
    if (rc) return rc;
    *bwd_t0 = dt_trace_now_us();
    /* every row of the forward: B x its T (dt_model_forward's) */
    if ((rc = dt_model_backward_scaled(m, scale)) || (rc = dt_model_loss(m, loss)) ||
        (rc = dt_model_row_stats(m, (long)B * dt_model_forward_len(m), &cd, NULL)))
        return rc;
    *correct = (int)cd;
    return DT_OK;
}

/* --dp-threads: a replica is a model of the same config; its part of a pass
 * reads the loss and the predictions before the backward */
static int tb_replica_create(void *m, void **out) {
    dt_model_config cfg = *dt_model_get_config(m);
    char name[64];
    snprintf(name, sizeof name, "%s", cfg.name);
    cfg.name = name;
    dt_model *r = NULL;
    int rc = dt_model_create(&cfg, &r);
    *out = r;
    return rc;
}
static void tb_replica_free(void *m) { dt_model_free(m); }
static int tb_replica_pass(void *m, const void *x, const int32_t *y, int B, float scale, float *loss, int *correct) {
    int rc = dt_model_forward(m, x, y, B, 1, loss);
    if (!rc && (rc = dt_model_correct(m, y, B)) >= 0) {
        *correct = rc;
        rc = DT_OK;
    }
    if (!rc) rc = dt_model_backward_scaled(m, scale);
    return rc;
}

static int build_table(dt_trainer *t) {
    dt_model *m = t->model;
    const int L = dt_model_num_layers(m);
    t->l_off = malloc(sizeof(size_t) * (size_t)L);
    t->l_cnt = malloc(sizeof(size_t) * (size_t)L);
    t->l_owner = malloc(sizeof(int) * (size_t)L);
    if (!t->l_off || !t->l_cnt || !t->l_owner) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    for (int l = 0; l < L; l++) {
        dt_model_layer_params(m, l, &t->l_off[l], &t->l_cnt[l]);
        t->l_owner[l] = dt_model_layer_param_owner(m, l);
    }
    t->table = (dt_layer_table){.nlayers = L, .offset = t->l_off, .count = t->l_cnt, .owner = t->l_owner,
                                .num_params = dt_model_num_params(m), .params = dt_model_params(m),
                                .grads = dt_model_grads(m), .buffers = dt_model_buffers(m),
                                .num_buffers = dt_model_num_buffers(m), .device = dt_model_device(m),
                                .stream = dt_model_stream(m), .precision = dt_model_precision(m), .model = m,
                                .set_layer_params = tb_set_params, .set_layer_grads = tb_set_grads,
                                .use_grad_buffer = tb_use_grads, .release_flat = tb_release,
                                .zero_grad = tb_zero_grad, .params_bf16 = dt_model_compute_copy(m),
                                .params_from_copy = tb_from_copy, .set_layer_params16 = tb_set_params16,
                                .layers_bf16 = tb_layers_bf16, .set_hooks = tb_set_hooks,
                                .seed_dropout = tb_seed_dropout, .train_pass = tb_train_pass,
                                .x_bytes = 4 * (size_t)t->io.x_size * (size_t)t->positions,
                                .y_elems = (size_t)t->positions, .replica_create = tb_replica_create,
                                .replica_free = tb_replica_free, .flat_grads = tb_flat_grads,
                                .replica_pass = tb_replica_pass};
    /* weight decay as the family trains (nanoGPT: matrices only) */
    const int ns = dt_model_num_slices(m);
    t->no_decay = malloc(sizeof *t->no_decay * (size_t)(ns ? ns : 1));
    if (!t->no_decay) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < ns; i++) {
        const dt_param_slice *sl = dt_model_slice(m, i);
        if (sl->ndim < t->fam->decay_min_ndim) t->no_decay[t->n_no_decay++] = (dt_optim_range){sl->offset, sl->count};
    }
    return DT_OK;
}

/* ---- set-up ---------------------------------------------------------------------------- */

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
    /* the strategy, with --dp-threads N replicas of the model in this
     * process; a launch or config that does not fit it (DT_ERR_INVALID,
     * parallel/strategy.h ERRORS) is the input's fault: exit 2 */
    dt_strategy_args sa = {.comm = t->comm, .dist = &o->dist, .optim = &oc, .no_decay = t->no_decay,
                           .n_no_decay = t->n_no_decay, .table = &t->table, .replicas = o->dp_threads};
    if ((rc = dt_strategy_create(&sa, &t->st))) return rc == DT_ERR_INVALID ? dt_trainer_mark_input(rc) : rc;
    dt_lr_schedule_default(&t->sched, (float)oc.lr);
    t->sched.warmup_steps = o->warmup_steps;
    t->sched.min_lr = (float)o->min_lr;
    return DT_OK;
}

static int setup_schedule(dt_trainer *t) {
    const dt_train_options *o = &t->o;
    long per_epoch = (long)(t->src->ops->batches_left(t->src) / o->accum_steps);
    long total = per_epoch * o->epochs;
    if (o->max_steps >= 0 && o->max_steps < total) total = o->max_steps;
    t->planned_steps = total;
    if (strcmp(o->schedule, "cosine") == 0) {
        t->sched.decay = DT_LR_COSINE;
        t->sched.total_steps = total > o->warmup_steps ? total : o->warmup_steps + 1;
    }
    return dt_lr_schedule_validate(&t->sched);
}

/* --device cuda: this rank's GPU is local_rank % the devices it sees (the
 * model and optimizer are created on it) */
static int setup_device(dt_trainer *t, int *device, int *precision) {
    int rc = dt_device_kind_parse(t->o.device, device);
    if (!rc) rc = dt_precision_parse(t->o.precision, precision);
    if (rc || *device != DT_DEVICE_CUDA) return rc;
    char why[512];
    int n = dt_cuda_device_count(why, sizeof why);
    if (n == 0) return DT_ERR(DT_ERR_UNSUPPORTED, "--device cuda, but rank %d has no CUDA device: %s", t->ci.rank, why);
    dt_comm_info wi;
    if ((rc = dt_comm_info_get(dt_comm_world(), &wi))) return rc;
    t->cuda_dev = wi.local_rank % n;
    return dt_cuda_use_device(t->cuda_dev);
}

static int setup_model(dt_trainer *t) {
    dt_model_config mc;
    int rc = dt_model_config_default(&mc, dt_train_model_name(&t->o));
    if (!rc) rc = t->fam->configure(&mc, &t->o);
    if (!rc) rc = setup_device(t, &mc.device, &mc.precision);
    if (!rc && *t->o.init_from) rc = dt_trainer_init_config(t, &mc); /* the file's sizes */
    /* a size that cannot make a model is the flags' fault: exit 2 */
    if (!rc && (rc = dt_model_create(&mc, &t->model))) return rc == DT_ERR_INVALID ? dt_trainer_mark_input(rc) : rc;
    if (!rc) rc = dt_model_seed_dropout(t->model, t->o.seed * 1000003ull + (uint64_t)t->ci.rank);
    if (!rc) rc = dt_model_get_io(t->model, &t->io);
    /* the T of every forward (dt_model_forward): --seq-len, or the block size */
    t->positions = rc ? 1 : dt_model_forward_len(t->model);
    return rc;
}

static int setup_buffers(dt_trainer *t) {
    const dt_train_options *o = &t->o;
    t->eval_batch = t->fam->eval_batch > 0 ? t->fam->eval_batch : o->batch_size;
    int cap = o->batch_size > t->eval_batch ? o->batch_size : t->eval_batch;
    size_t per_x = (size_t)t->io.x_size * (size_t)t->positions;
    t->x = malloc(4 * (size_t)cap * per_x); /* float32 or int32 */
    t->y = malloc(sizeof(int32_t) * (size_t)cap * (size_t)t->positions);
    t->eval_idx = malloc(sizeof(int64_t) * (size_t)cap);
    if (!t->x || !t->y || !t->eval_idx) return DT_ERR(DT_ERR_NOMEM, "out of memory for batch buffers");
    t->cap = cap;
    /* the activations of the largest batch the model will see (its forward
     * allocates them), and for gpt what recomputation changes */
    size_t act = 0;
    int T = t->positions, rc; /* 1 for a classifier */
    if ((rc = dt_model_activation_bytes(t->model, cap, T, t->o.recompute, &act))) return rc;
    t->mem_act = (long long)act;
    dt_mem_add_on(DT_MEM_ACTIVATIONS, t->mem_act, t->cuda_dev >= 0);
    /* bf16: the compute copy of the parameters the model keeps (2 B each),
     * or under ZeRO-3 one layer's, gathered for its use like the f32 layers
     * (none when the layers are gathered in bf16) */
    int per_layer = 0;
    t->mem_compute = (long long)dt_model_compute_copy_bytes(t->model, &per_layer);
    t->mem_compute_cat = per_layer ? DT_MEM_GATHERED : DT_MEM_PARAMS;
    dt_mem_add_on(t->mem_compute_cat, t->mem_compute, t->cuda_dev >= 0);
    if (t->io.max_seq > 0) {
        if ((rc = dt_model_activation_bytes(t->model, o->batch_size, T, 0, &t->act_bytes[0])) ||
            (rc = dt_model_activation_bytes(t->model, o->batch_size, T, 1, &t->act_bytes[1])))
            return rc;
    }
    return DT_OK;
}

/* The end-of-run sample's prompt fits the vocabulary: text is bytes (256);
 * token ids below it (input errors: exit 2). */
static int check_sample(dt_trainer *t) {
    const dt_train_options *o = &t->o;
    if (t->io.max_seq < 1 || o->sample_length < 1) return DT_OK;
    const int V = t->io.num_classes;
    for (int i = 0; i < o->sample_ntokens; i++)
        if (o->sample_tokens[i] < 0 || o->sample_tokens[i] >= V)
            return dt_trainer_mark_input(DT_ERR(DT_ERR_INVALID, "--sample-tokens: token %d at position %d of the prompt "
                                                "is outside the vocabulary of %d", o->sample_tokens[i], i + 1, V));
    if (V != 256 && !o->sample_ntokens && strcmp(o->sample_prompt, DT_TRAIN_DEFAULT_PROMPT) != 0)
        return dt_trainer_mark_input(DT_ERR(DT_ERR_INVALID, "--sample-prompt is text, but the vocabulary of %d tokens is "
                                            "not bytes (dtrain has no tokenizer): give the prompt's token ids with "
                                            "--sample-tokens", V));
    return DT_OK;
}

/* --dp-threads N: the trainer's flags it cannot be combined with (input
 * errors: exit 2) */
static int check_dp_threads(const dt_train_options *o) {
    if (o->dp_threads < 1)
        return DT_ERR(DT_ERR_INVALID, "dp_threads %d (--dp-threads): must be >= 1", o->dp_threads);
    if (o->dp_threads == 1) return DT_OK;
    if (o->dp_threads > o->batch_size)
        return DT_ERR(DT_ERR_INVALID, "--dp-threads %d is more than --batch-size %d (per rank): a thread would have "
                      "no sample", o->dp_threads, o->batch_size);
    if (o->threads != 1)
        return DT_ERR(DT_ERR_INVALID, "--threads %d with --dp-threads %d: BLAS runs single-threaded inside each "
                      "data-parallel thread (leave --threads at 1)", o->threads, o->dp_threads);
    return DT_OK; /* what the strategy cannot run with replicas, it refuses (setup_optimizer) */
}

/* What a step is worth: its predictions over all ranks, a gpt's FLOPs per
 * token (PaLM's 6P + 12 L C T: forward and backward, attention included, as
 * llm.c and nanoGPT count them) and the devices' peak (mfu) */
static void setup_rates(dt_trainer *t) {
    const dt_train_options *o = &t->o;
    const double ranks = (double)t->st->dp_size;
    t->step_tokens = (long long)o->batch_size * t->positions * o->accum_steps * t->st->dp_size;
    t->flops_per_token = 0;
    if (t->io.max_seq > 0) {
        const dt_model_config *c = dt_model_get_config(t->model);
        t->flops_per_token = 6.0 * (double)dt_model_num_params(t->model) +
                             12.0 * c->n_layer * (double)c->n_embd * (double)t->positions;
    }
    double peak = o->peak_tflops;
    dt_cuda_info info;
    if (peak <= 0 && t->cuda_dev >= 0 && dt_cuda_device_info(t->cuda_dev, &info) == DT_OK)
        peak = dt_cuda_peak_tflops(&info, dt_model_precision(t->model));
    dt_clear_error();
    t->peak_flops = t->flops_per_token > 0 ? peak * 1e12 * ranks : 0;
}

int dt_trainer_create(const dt_train_options *o, dt_trainer **out) {
    dt_trainer_input_clear();
    if (!o || !out) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    *out = NULL;
    dt_trainer *t = calloc(1, sizeof *t);
    if (!t) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    t->cuda_dev = -1;
    t->o = *o;
    t->grad_norm = -1; /* until a step computes it */
    t->comm = o->comm ? o->comm : dt_comm_world();
    int rc = dt_comm_info_get(t->comm, &t->ci);
    if (rc) { free(t); return rc; }
#define FAIL(x) do { rc = (x); if (rc) { dt_trainer_free(t); return rc; } } while (0)
    if (o->batch_size < 1 || o->epochs < 1 || o->accum_steps < 1)
        FAIL(DT_ERR(DT_ERR_INVALID, "batch_size, epochs and accum_steps must be >= 1"));
    FAIL(dt_trainer_mark_input(check_dp_threads(o)));
    if (t->ci.size > 1 && !o->dist.enable_data_parallel)
        FAIL(DT_ERR(DT_ERR_INVALID, "enable_data_parallel is off but %d ranks were launched: nothing would be shared", t->ci.size));
    if (!(t->fam = dt_train_family_of(o->model))) FAIL(DT_ERR_INVALID);
    if (t->ci.size > 1) FAIL(dt_trainer_check_flags(t));
    FAIL(dt_set_num_threads(o->threads));
    FAIL(dt_set_timeout(o->dist.timeout_s)); /* the watchdog's limit on every blocking call */

    /* every rank builds the same model: one failing (out of memory) ends all */
    rc = setup_model(t);
    if (!rc) rc = build_table(t);
    if (!rc && t->init) rc = dt_trainer_init_weights(t); /* --init-from: before the strategy takes the model */
    if (!rc) rc = check_sample(t);
    FAIL(dt_trainer_agree_error(t, rc));
    FAIL(setup_optimizer(t)); /* the strategy: DDP, ZeRO or none, the optimizer, the replicas */

    /* the data, cut into the strategy's data-parallel parts; a data set
     * missing on one host ends every rank, with its message */
    dt_source_args sa = {.o = &t->o, .io = t->io, .seq_len = t->positions, .dp_rank = t->st->dp_rank,
                         .dp_size = t->st->dp_size};
    rc = t->fam->source->open(&sa, &t->src);
    FAIL(dt_trainer_agree_error(t, rc));
    if (t->ci.size > 1) FAIL(dt_trainer_check_data(t));
    FAIL(t->src->ops->begin_epoch(t->src, 0, 0));
    if (t->src->ops->batches_left(t->src) < o->accum_steps)
        FAIL(dt_trainer_mark_input(DT_ERR(DT_ERR_INVALID, "an epoch has %lld batches per rank, fewer than accum_steps %d",
                                          (long long)t->src->ops->batches_left(t->src), o->accum_steps)));
    FAIL(setup_schedule(t));
    FAIL(setup_buffers(t));

    dt_layer_hooks hk = {.ctx = t, .pre_forward = h_pre_fwd, .post_forward = h_post_fwd, .pre_backward = h_pre_bwd,
                         .grad_ready = h_grad_ready, .post_backward = h_post_bwd,
                         .sync_stats = dt_strategy_has_sync_stats(t->st) ? h_sync_stats : NULL};
    FAIL(dt_strategy_set_hooks(t->st, &hk)); /* on the model, or around it on replica 0 */
    if (*o->resume_dir) FAIL(dt_trainer_resume(t, o->resume_dir));
    if (*o->resume_dir && t->ci.size > 1) FAIL(dt_trainer_check_resumed(t));
    /* outputs last: a run refused for its input leaves nothing behind; all
     * of them are still checked before anything is trained */
    FAIL(dt_trainer_check_outputs(t));
    setup_rates(t);
    dt_metrics_memory(&t->metrics, t->step, "start", dt_model_num_params(t->model), t->ci.size, o->dist.zero_opt_level,
                      dt_comm_device_path(dt_comm_world()), t->act_bytes[0], t->act_bytes[1]);
#undef FAIL
    *out = t;
    return DT_OK;
}

void dt_trainer_free(dt_trainer *t) {
    if (!t) return;
    if (t->tracing) dt_trace_close();
    dt_metrics_close(&t->metrics); /* a failed write was already reported by dt_trainer_fit or is moot */
    dt_strategy_free(t->st);
    dt_model_free(t->model);
    dt_weights_close(t->init);
    if (t->src) t->src->ops->close(t->src);
    dt_mem_add_on(DT_MEM_ACTIVATIONS, -t->mem_act, t->cuda_dev >= 0);
    dt_mem_add_on(t->mem_compute_cat, -t->mem_compute, t->cuda_dev >= 0);
    free(t->l_off);
    free(t->l_cnt);
    free(t->l_owner);
    free(t->no_decay);
    free(t->x);
    free(t->y);
    free(t->eval_idx);
    free(t->step_s);
    free(t);
}

dt_model *dt_trainer_model(dt_trainer *t) { return t ? t->model : NULL; }

int dt_trainer_model_meta(const dt_trainer *t, char keys[][16], char vals[][24]) {
    return t->fam->meta(dt_model_get_config(t->model), &t->o, keys, vals); /* the family's keys */
}

/* ---- evaluation -------------------------------------------------------------- */

int dt_trainer_evaluate(dt_trainer *t, double *acc, double *loss) {
    if (!t) return DT_ERR(DT_ERR_INVALID, "trainer is NULL");
    /* data-parallel rank r evaluates samples r, r+N, ...: the evaluation set
     * exactly once overall. Every rank runs the same number of batches (ZeRO-3
     * gathers parameters collectively in forward): ranks with fewer samples
     * pad their last batch with sample 0, whose rows are not counted. */
    double v[3] = {0, 0, 0}; /* correct, count, loss sum (over predictions) */
    const int N = t->st->dp_size, r = t->st->dp_rank, P = t->positions;
    const int64_t n = t->src->ops->eval_count(t->src), per_rank = (n + N - 1) / N;
    for (int64_t i = 0; i < per_rank;) {
        int B = 0, valid = 0;
        for (; B < t->eval_batch && i < per_rank; B++, i++) {
            int64_t s = r + i * N;
            t->eval_idx[B] = s < n ? s : 0;
            if (s < n) valid = B + 1;
        }
        int rc = t->src->ops->eval_batch(t->src, t->eval_idx, B, t->x, t->y);
        if (!rc) rc = dt_model_forward(t->model, t->x, t->y, B, 0, NULL);
        /* the valid rows' predictions (a device model computed them there) */
        double c = 0, l = 0;
        if (!rc) rc = dt_model_row_stats(t->model, (long)valid * P, &c, &l);
        if (rc) return rc;
        v[0] += c;
        v[1] += (double)valid * P;
        v[2] += l;
    }
    if (t->ci.size > 1) {
        int rc = dt_allreduce(v, v, 3, DT_F64, DT_SUM, t->comm);
        if (rc) return rc;
    }
    if (acc) *acc = v[1] > 0 ? v[0] / v[1] : 0;
    if (loss) *loss = v[1] > 0 ? v[2] / v[1] : 0;
    return DT_OK;
}

int dt_trainer_gather_params(dt_trainer *t, float *dst, int root) {
    if (!t) return DT_ERR(DT_ERR_INVALID, "trainer is NULL");
    return dt_strategy_gather(t->st, 0, dt_model_num_params(t->model), dst, root);
}

void dt_trainer_print_memory(dt_trainer *t, FILE *f, const char *when) {
    if (!t || t->ci.rank != 0 || !f) return;
    size_t P = dt_model_num_params(t->model);
    fprintf(f, "memory (%s, rank 0 of %d, %s, ZeRO stage %d%s, P = %zu parameters = %.2f MB):\n", when, t->ci.size,
            dt_strategy_name(t->st), t->o.dist.zero_opt_level,
            t->o.dist.zero_opt_level && t->o.dist.shard_group == DT_SHARD_HOST ? " sharded per host" : "", P,
            4.0 * (double)P / 1e6);
    dt_cuda_info info;
    if (t->cuda_dev >= 0 && dt_cuda_device_info(t->cuda_dev, &info) == DT_OK) {
        /* where these bytes are: the "device B" column (the model, its
         * gradients and activations, the optimizer's state or ZeRO's shard of
         * it; with zero_offload ZeRO's shard and optimizer on the host) */
        fprintf(f, "  on cuda device %d (%s): %s; the device has %.2f GB, %.2f GB in use now (all processes)\n",
                t->cuda_dev, info.name,
                dt_model_precision(t->model) != DT_PRECISION_BF16 ? "fp32"
                : t->mem_compute_cat == DT_MEM_GATHERED && t->mem_compute == 0 /* ZeRO-3 gathers bf16 layers */
                    ? "bf16, gathered holds the layers gathered in bf16"
                : t->mem_compute_cat == DT_MEM_GATHERED
                    ? "bf16, gathered includes the bf16 compute copy of one layer (the largest)"
                : dt_model_params(t->model) == NULL /* ZeRO-1/2: the f32 masters are ZeRO's shards */
                    ? "bf16, params are the bf16 compute copy (2 B per parameter) and ZeRO's f32 master shard"
                    : "bf16, params include the bf16 compute copy (2 B per parameter)",
                (double)info.total_bytes / 1e9, (double)(info.total_bytes - info.free_bytes) / 1e9);
    }
    dt_clear_error();
    /* "device B": the part of "current B" in device memory (dtrain/mem.h) */
    fprintf(f, "  %-11s %14s %14s %8s %14s %14s\n", "category", "current B", "peak B", "x P", "device B", "device peak B");
    long long model_state = 0, model_dev = 0;
    for (int c = 0; c < DT_MEM_NUM; c++) {
        long long cur = dt_mem_current((dt_mem_category)c), pk = dt_mem_peak((dt_mem_category)c);
        long long dcur = dt_mem_device_current((dt_mem_category)c), dpk = dt_mem_device_peak((dt_mem_category)c);
        if (c <= DT_MEM_OPTIM) model_state += cur, model_dev += dcur;
        fprintf(f, "  %-11s %14lld %14lld %8.3f %14lld %14lld\n", dt_mem_category_name((dt_mem_category)c), cur, pk,
                (double)cur / (double)P, dcur, dpk);
    }
    fprintf(f, "  %-11s %14lld %14s %8.3f %14lld\n", "model state", model_state, "", (double)model_state / (double)P,
            model_dev);
    if (t->act_bytes[0])
        fprintf(f, "  activations of a batch of %d x %d: %.2f MB, with --recompute 1 %.2f MB (%.1f%% less; recomputing "
                   "costs about one more forward of the blocks)%s\n", t->o.batch_size, t->positions,
                (double)t->act_bytes[0] / 1e6, (double)t->act_bytes[1] / 1e6,
                100.0 * (1.0 - (double)t->act_bytes[1] / (double)t->act_bytes[0]),
                t->o.recompute ? " [on]" : " [off]");
    fflush(f);
}
