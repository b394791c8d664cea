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
 * model's redirection calls, given as function pointers so that this layer
 * does not import the models) and the dist config; it creates and owns the
 * optimizer (the whole vector, or this rank's shard).
 *
 * ADDING A STRATEGY: one file defining a dt_strategy_ops, and one entry in
 * k_strategies (strategy.c) with the predicate that selects it from the dist
 * config and the world size (the first match wins). The trainer needs no
 * change. Not yet behind it: --dp-threads (N threads of one process, each a
 * model replica over shared parameters), which the trainer still runs
 * beside the strategy (src/train/dp_threads.c).
 * Hybrid sharding (dist.shard_group host: ZeRO within a host, replicated
 * across hosts) is the ZeRO strategies' own: sub-communicators made in
 * create (dt_zero_hybrid_comms); state() says which shard this rank holds
 * (lo, hi) and which part of it it writes to a checkpoint (the replicas of a
 * shard write one part each); load() reads what it holds from any
 * checkpoint layout.
 *
 * CALL ORDER (one optimizer step of k micro-steps, m = 0..k-1):
 *   begin_micro(m, k) -> model forward/backward with the hooks below ->
 *   finish_micro(m, k, &step) ... -> step(&step)
 * The model hooks (dtrain/model.h order) are dt_strategy_pre_forward etc.:
 * each points the layer's OWNER (table.owner[layer]) at the memory the
 * strategy chose, through the table's set_layer_params/grads.
 * All functions return DT_OK or a negative dt_status with the message set;
 * every collective one must be called by every rank of the communicator in
 * the same order. */
#ifndef DT_PARALLEL_STRATEGY_H
#define DT_PARALLEL_STRATEGY_H

#include <stddef.h>
#include "dtrain/comm.h"
#include "dtrain/config.h"
#include "dtrain/optim.h"

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
    void *model;
    int (*set_layer_params)(void *model, int layer, float *p);
    int (*set_layer_grads)(void *model, int layer, float *g);
    int (*use_grad_buffer)(void *model, float *g);
    int (*release_flat)(void *model, int params, int grads);
    void (*zero_grad)(void *model);
} dt_layer_table;

typedef struct dt_strategy_args {
    dt_comm *comm;                   /* the ranks that train together */
    const dt_config *dist;           /* buckets, overlap, broadcast_buffers, sync_bn, zero level,
                                      * shard group */
    const dt_optim_config *optim;    /* the optimizer of the whole vector / the shard */
    const dt_optim_range *no_decay;  /* global ranges without weight decay (dt_optim_set_no_decay) */
    int n_no_decay;
    const dt_layer_table *table;
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
    void *impl;
};

/* The strategy the dist config selects for a world of `size` ranks: its name
 * ("none", "ddp", "zero1", ...). */
const char *dt_strategy_select(const dt_config *dist, int size);
/* Create the strategy selected for a->comm (collective). Registers the bytes
 * it holds (parameters, gradients, optimizer state, buffers) with dtrain/mem.h
 * and releases them in dt_strategy_free. */
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
