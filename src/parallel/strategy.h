/* src/parallel/strategy.h - internal: the parallel strategies behind one
 * interface (what the trainer calls; src/train/trainer.c).
 *
 * A strategy decides where a model's parameters, gradients and optimizer
 * state live on this rank and what is communicated when: "none" (one
 * process, everything local), "ddp" (data parallel: gradients averaged in
 * overlapped buckets, dtrain/ddp.h), "zero1" / "zero2" / "zero3" (ZeRO
 * sharding, dtrain/zero.h). It is made from the model's LAYER TABLE (the
 * layout contract of dtrain/model.h: each layer's range of the flat vector,
 * the layer whose parameters it computes with, the flat buffers and the
 * model's calls: redirection, hooks, the micro-step's pass, replicas; given
 * as function pointers so that this layer does not import the models) and the dist config; it creates and owns the
 * optimizer (the whole vector, or this rank's shard).
 *
 * ADDING A STRATEGY: one file defining a dt_strategy_ops, and one entry in
 * k_strategies (strategy.c) with the predicate that selects it from the dist
 * config and the world size (the first match wins). The trainer needs no
 * change.
 * REPLICAS (the in-process dimension: dtrain-train --dp-threads N): N model
 * replicas in this process over shared parameters, each run by a thread
 * (replicas.h). dt_strategy_create makes them when a->replicas > 1, through
 * the table's replica calls (the model is seen only through the table);
 * replica 0 is the table's model. Each micro-step's forward and backward is
 * dt_strategy_pass: with one replica the table's train_pass on the model,
 * with N the threads' pass (gradients summed into replica 0's in a fixed
 * order) followed by grad_ready replayed for every layer (in backward
 * order), so that the strategy's cross-rank work runs once per process: the
 * threads of a process train as one thread would on the whole micro-batch.
 * A strategy takes part only if it keeps the parameters in the table's flat
 * buffer and reduces whole gradients after grad_ready (none, ddp); one that
 * moves them per layer refuses with refuse_replicas (ZeRO).
 * ERRORS: dt_strategy_create returns DT_ERR_INVALID when the launch or the
 * config does not fit the strategy (ZeRO with replicas; hybrid sharding over
 * hosts with different numbers of ranks); the trainer reports those as
 * input errors (dtrain-train exits 2).
 * Hybrid sharding (dist.shard_group host: ZeRO within a host, replicated
 * across hosts) is the ZeRO strategies' own: sub-communicators made in
 * create (dt_zero_hybrid_comms); state() says which shard this rank holds
 * (lo, hi) and which part of it it writes to a checkpoint (the replicas of a
 * shard write one part each); load() reads what it holds from any
 * checkpoint layout.
 *
 * CALL ORDER (one optimizer step of k micro-steps, m = 0..k-1):
 *   seed_dropout -> begin_micro(m, k) -> pass (the model's forward/backward
 *   with the hooks below) -> finish_micro(m, k, &step) ... -> step(&step)
 * The trainer installs its model hooks once (dt_strategy_set_hooks); they
 * call the strategy's (dtrain/model.h order), dt_strategy_pre_forward etc.:
 * each points the layer's OWNER (table.owner[layer]) at the memory the
 * strategy chose, through the table's set_layer_params/grads.
 * All functions return DT_OK or a negative dt_status with the message set;
 * every collective one must be called by every rank of the communicator in
 * the same order. */
#ifndef DT_PARALLEL_STRATEGY_H
#define DT_PARALLEL_STRATEGY_H

#include <stddef.h>
#include <stdint.h>
#include "dtrain/comm.h"
#include "dtrain/config.h"
#include "dtrain/optim.h"

/* The model's hooks as the strategy installs them (dtrain/model.h's
 * dt_model_hooks, field for field; the table's set_hooks converts). */
typedef struct dt_layer_hooks {
    void *ctx;
    int (*pre_forward)(void *ctx, int layer);
    int (*post_forward)(void *ctx, int layer);
    int (*pre_backward)(void *ctx, int layer);
    int (*grad_ready)(void *ctx, int layer);
    int (*post_backward)(void *ctx, int layer);
    int (*sync_stats)(void *ctx, float *buf, size_t n);
} dt_layer_hooks;

/* The model as strategies see it (dtrain/model.h's layout contract). The
 * arrays and pointers must outlive the strategy. */
typedef struct dt_layer_table {
    int nlayers;
    const size_t *offset, *count; /* [nlayers] each layer's range of the flat vector */
    const int *owner;             /* [nlayers] layer whose parameters it computes with
                                   * (itself, or e.g. 0 for gpt's tied head) */
    size_t num_params;
    float *params, *grads;        /* the model's flat buffers (as at create) */
    float *buffers;               /* non-parameter buffers (batch norm), kept equal on */
    size_t num_buffers;           /* every rank; may be NULL / 0 */
    /* the model's calls (dt_model_set_layer_params, _set_layer_grads,
     * _use_grad_buffer, _release_flat, _zero_grad) on `model` */
    int device;                   /* DT_DEVICE_CUDA: params, grads and buffers are device
                                   * memory of the current device, and the model computes
                                   * on `stream` (what data parallelism orders its buckets
                                   * after; NULL: the default stream) */
    void *stream;
    int precision;                /* DT_PRECISION_BF16: the model computes with bf16 copies of
                                   * its parameters (ZeRO then re-shares and gathers them in
                                   * bf16 over a device transport: lossless for it) */
    void *model;
    int (*set_layer_params)(void *model, int layer, float *p);
    int (*set_layer_grads)(void *model, int layer, float *g);
    int (*use_grad_buffer)(void *model, float *g);
    int (*release_flat)(void *model, int params, int grads);
    void (*zero_grad)(void *model);
    /* optional (NULL: none): the model's bf16 copy of all its parameters
     * (dt_model_compute_copy, memory as params), and the switch to computing
     * from it once the f32 params are freed (dt_model_params_from_copy):
     * ZeRO stages 1/2 keep the f32 master as shards then */
    uint16_t *params_bf16;
    int (*params_from_copy)(void *model);
    /* optional (NULL: none): a bf16 model's layers given in bf16
     * (dt_model_set_layer_params16) and the switch to taking every layer so
     * (dt_model_layers_bf16): ZeRO-3 gathers bf16 layers then */
    int (*set_layer_params16)(void *model, int layer, const uint16_t *p);
    int (*layers_bf16)(void *model);
    /* the model's hooks (dt_model_set_hooks) and dropout stream (dt_model_seed_dropout) */
    int (*set_hooks)(void *model, const dt_layer_hooks *h);
    int (*seed_dropout)(void *model, uint64_t seed);
    /* one micro-batch of B samples, forward (training) and backward with the
     * loss scaled by `scale`: *loss the mean loss, *correct the correct
     * predictions, read after the backward (a device model enqueues both
     * without a wait); *bwd_t0 when the backward began (trace clock, us) */
    int (*train_pass)(void *model, const void *x, const int32_t *y, int B, float scale, float *loss, int *correct,
                      double *bwd_t0);
    /* ---- for replicas (a->replicas > 1; may be NULL otherwise) ---- */
    size_t x_bytes, y_elems;      /* one sample's input bytes and labels (int32) */
    /* a new model of the same config, with its own (initial) parameters */
    int (*replica_create)(void *model, void **out);
    void (*replica_free)(void *model);
    /* the current flat gradient buffer of a model (dt_model_grads) */
    float *(*flat_grads)(void *model);
    /* a replica's part of a pass: forward (training) with *loss the mean
     * loss and *correct the correct predictions read before the backward,
     * then the backward scaled by `scale` */
    int (*replica_pass)(void *model, const void *x, const int32_t *y, int B, float scale, float *loss, int *correct);
} dt_layer_table;

typedef struct dt_strategy_args {
    dt_comm *comm;                   /* the ranks that train together */
    const dt_config *dist;           /* buckets, overlap, broadcast_buffers, sync_bn, zero level,
                                      * shard group */
    const dt_optim_config *optim;    /* the optimizer of the whole vector / the shard */
    const dt_optim_range *no_decay;  /* global ranges without weight decay (dt_optim_set_no_decay) */
    int n_no_decay;
    const dt_layer_table *table;
    int replicas;                    /* model replicas in this process (REPLICAS above): 1 (or 0): the
                                      * table's model alone; > 1 needs the table's replica calls */
} dt_strategy_args;

/* One optimizer step, shared by finish_micro and step. */
typedef struct dt_strategy_step {
    float lr;        /* this step's learning rate */
    double clip;     /* > 0: clip the global gradient norm to this */
    int want_norm;   /* compute the global gradient norm (also implied by clip > 0):
                      * then no parameter may be updated before step() */
    double norm;     /* out (step): the norm before clipping; -1 if not computed */
    double opt_t0;   /* out: when this step's optimizer work began (trace clock, us);
                      * < 0 until then (finish_micro may start it: DDP's per-bucket steps) */
} dt_strategy_step;

/* The optimizer state this rank holds, for checkpoints. */
typedef struct dt_strategy_state {
    size_t lo, hi;           /* the range [lo, hi) of the flat vector it holds */
    const float *params;     /* the current parameters of [lo, hi) */
    dt_optim *opt;           /* their optimizer state (state element i <-> lo + i) */
    size_t save_lo, save_hi; /* the part of it this rank writes: [save_lo, save_hi) */
} dt_strategy_state;

/* Reads elements [offset, offset + count) of a checkpoint's state vector
 * ("params", "exp_avg", ...) into dst. */
typedef int (*dt_strategy_read_fn)(void *ctx, const char *vector, size_t offset, size_t count, float *dst);

typedef struct dt_strategy dt_strategy;

/* A strategy's functions. NULL hooks are no-ops. */
typedef struct dt_strategy_ops {
    const char *name;
    /* NULL: the strategy runs with in-process replicas (REPLICAS above); else
     * called instead of create when a->replicas > 1: returns the refusal
     * (DT_ERR_INVALID with the reason) */
    int (*refuse_replicas)(const dt_strategy_args *a);
    /* Collective. Sets s->impl; s->comm, s->ci, s->table, dp_size/rank are
     * filled before. On failure the caller calls destroy. */
    int (*create)(dt_strategy *s, const dt_strategy_args *a);
    void (*destroy)(dt_strategy *s);
    /* model hooks */
    int (*pre_forward)(dt_strategy *s, int layer);
    int (*post_forward)(dt_strategy *s, int layer);
    int (*pre_backward)(dt_strategy *s, int layer);
    int (*grad_ready)(dt_strategy *s, int layer);
    int (*post_backward)(dt_strategy *s, int layer);
    /* sum buf[0..n) over the data-parallel ranks (synchronised batch norm);
     * NULL: batch statistics stay local */
    int (*sync_stats)(dt_strategy *s, float *buf, size_t n);
    int (*begin_micro)(dt_strategy *s, int m, int k);
    /* bwd_t0/t1: the micro-step's backward interval (overlap statistics) */
    int (*finish_micro)(dt_strategy *s, int m, int k, dt_strategy_step *st, double bwd_t0, double bwd_t1);
    /* after the last micro-step: clip, update, zero the gradients */
    int (*step)(dt_strategy *s, dt_strategy_step *st);
    /* the global range [offset, offset + count) of the parameters into dst on
     * world rank root (dst may be NULL elsewhere); collective */
    int (*gather)(dt_strategy *s, size_t offset, size_t count, float *dst, int root);
    int (*state)(dt_strategy *s, dt_strategy_state *st);
    /* a checkpoint's parameters and optimizer state into what this rank holds */
    int (*load)(dt_strategy *s, dt_strategy_read_fn read, void *ctx);
    /* fraction of the gradient communication hidden behind backward (and
     * behind backward or early optimizer work); -1: not measured */
    void (*overlap)(const dt_strategy *s, double *hidden, double *hidden_compute);
} dt_strategy_ops;

struct dt_strategy {
    const dt_strategy_ops *ops;
    dt_comm *comm;
    dt_comm_info ci;
    dt_layer_table table;
    int dp_size, dp_rank; /* the batch is cut into dp_size parts; this rank trains part dp_rank */
    int sync_bn;          /* dist.sync_bn with more than one data-parallel rank */
    struct dt_replicas *replicas; /* a->replicas > 1: the replicas and their threads; else NULL */
    void *impl;
};

/* The strategy the dist config selects for a world of `size` ranks: its name
 * ("none", "ddp", "zero1", ...). */
const char *dt_strategy_select(const dt_config *dist, int size);
/* Create the strategy selected for a->comm (collective), with a->replicas
 * replicas of the model in this process. Registers the bytes it holds
 * (parameters, gradients, optimizer state, buffers; the replicas' gradients)
 * with dtrain/mem.h and releases them in dt_strategy_free. DT_ERR_INVALID:
 * the launch or config does not fit (ERRORS above), or a bad argument. */
int dt_strategy_create(const dt_strategy_args *a, dt_strategy **out);
void dt_strategy_free(dt_strategy *s);
const char *dt_strategy_name(const dt_strategy *s);

/* The model hooks, for dt_model_hooks (ctx = the strategy). */
int dt_strategy_pre_forward(void *s, int layer);
int dt_strategy_post_forward(void *s, int layer);
int dt_strategy_pre_backward(void *s, int layer);
int dt_strategy_grad_ready(void *s, int layer);
int dt_strategy_post_backward(void *s, int layer);
int dt_strategy_sync_stats(void *s, float *buf, size_t n);
int dt_strategy_has_sync_stats(const dt_strategy *s);

/* The model's hooks h (the trainer's: tracing around the calls above) on
 * the table's model; with replicas, on replica 0 through the replicas'
 * wrappers (replicas.h: grad_ready replayed by dt_strategy_pass, sync_stats
 * summed over the threads first). */
int dt_strategy_set_hooks(dt_strategy *s, const dt_layer_hooks *h);
/* The dropout streams of a micro-step: the model's from seed, replica i's
 * from seed ^ i * 0x9e3779b97f4a7c15. */
int dt_strategy_seed_dropout(dt_strategy *s, uint64_t seed);
/* One micro-step's forward and backward over the micro-batch x / y of B
 * samples (between begin_micro and finish_micro), gradients += scale *
 * d(mean loss)/d params: *loss the mean loss, *correct the correct
 * predictions, *bwd_t0 when the backward began (see REPLICAS above). */
int dt_strategy_pass(dt_strategy *s, const void *x, const int32_t *y, int B, float scale, float *loss, int *correct,
                     double *bwd_t0);
/* the replicas in this process (1: the model alone) */
int dt_strategy_replica_count(const dt_strategy *s);

int dt_strategy_begin_micro(dt_strategy *s, int m, int k);
int dt_strategy_finish_micro(dt_strategy *s, int m, int k, dt_strategy_step *st, double bwd_t0, double bwd_t1);
int dt_strategy_update(dt_strategy *s, dt_strategy_step *st);
int dt_strategy_gather(dt_strategy *s, size_t offset, size_t count, float *dst, int root);
int dt_strategy_state_get(dt_strategy *s, dt_strategy_state *st);
int dt_strategy_load(dt_strategy *s, dt_strategy_read_fn read, void *ctx);
void dt_strategy_overlap(const dt_strategy *s, double *hidden, double *hidden_compute);

/* ---- for the strategies' own files ---------------------------------------- */
extern const dt_strategy_ops dt_strategy_none, dt_strategy_ddp, dt_strategy_zero1, dt_strategy_zero2,
    dt_strategy_zero3;
/* An optimizer over [base, base + n) with the no-decay ranges, its state on
 * the table's device (on_device != 0: a device table's parameters are
 * stepped where they live) or on the host, its bytes registered
 * (DT_MEM_OPTIM). */
int dt_strategy_make_optim(const dt_strategy_args *a, size_t base, size_t n, int on_device, dt_optim **out);
void dt_strategy_free_optim(dt_optim *opt);
/* Global gradient clipping of a full, replicated gradient vector (the
 * strategies that hold every gradient), where opt's state lives: norm into
 * st->norm when asked. */
int dt_strategy_clip_full(const dt_optim *opt, float *g, size_t n, dt_strategy_step *st);
/* n floats from the table's memory (params: device memory for a device
 * table) into host dst, in the model's stream order; returns when dst holds
 * them. */
int dt_strategy_to_host(const dt_strategy *s, float *dst, const float *src, size_t n);
/* The checkpoint partition of this rank: [r*S, (r+1)*S), S = ceil(P/N). */
void dt_strategy_partition(const dt_strategy *s, size_t *lo, size_t *hi);

#endif
