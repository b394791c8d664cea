/* src/train/trainer_internal.h - internal: the trainer object, shared by
 * trainer.c (set-up, evaluation), train_fit.c (the training loop),
 * train_ckpt.c (checkpoints, model export), train_checks.c and
 * train_errors.c (errors across the ranks). */
#ifndef DT_TRAIN_TRAINER_INTERNAL_H
#define DT_TRAIN_TRAINER_INTERNAL_H

#include <stdio.h>
#include "dtrain/optim.h"
#include "dtrain/train.h"
#include "parallel/strategy.h"
#include "train/metrics.h"
#include "train/source.h"

struct dt_trainer {
    dt_train_options o;
    dt_comm *comm;
    dt_comm_info ci;
    const dt_train_family *fam; /* the model family's data and config */
    dt_model *model;
    int cuda_dev;            /* --device cuda: this rank's CUDA device; else -1 */
    long long step_tokens;   /* predictions of one optimizer step over all ranks (gpt: tokens) */
    double flops_per_token;  /* gpt: 6P + 12 L C T (forward and backward); 0 for classifiers */
    double peak_flops;       /* all data-parallel ranks' devices' peak FLOP/s; 0: unknown (no mfu) */
    struct dt_weights *init; /* --init-from's file while the trainer is set up; NULL otherwise */
    dt_model_io io;
    int positions;           /* predictions per sample: max(1, io.max_seq) */
    dt_source *src;          /* the training and evaluation data */
    dt_strategy *st;         /* where parameters, gradients and optimizer state live; with
                              * --dp-threads N, the replicas of the model in this process */
    dt_layer_table table;    /* the model's layers, for the strategy */
    size_t *l_off, *l_cnt;   /* [layers] */
    int *l_owner;            /* [layers] */
    dt_optim_range *no_decay;/* tensors without weight decay (global ranges) */
    int n_no_decay;
    dt_lr_schedule sched;
    void *x;                 /* [cap, x_size * positions] batch inputs (float32 or int32) */
    int32_t *y;              /* [cap, positions] batch labels */
    int64_t *eval_idx;       /* [cap] */
    int cap, eval_batch;
    long step;
    int epoch;               /* current epoch (0-based) */
    int epoch_over;          /* the current epoch is complete: a checkpoint is at the next one's start */
    int64_t resume_pos;      /* the resumed epoch starts at this sample of its global order */
    dt_metrics metrics;      /* --json (rank 0) */
    int tracing;
    double t_layer;          /* start of the current layer (trace) */
    double grad_norm;        /* of the last step, before clipping; -1 if not computed */
    long nonfinite_step;     /* the first step (1-based) with a non-finite loss or gradient norm
                              * on this rank, 0 if none: nothing is saved after it */
    char nonfinite_what[64]; /* what was not finite, with its value */
    long planned_steps;      /* optimizer steps the run will make if not stopped */
    double *step_s;          /* per-step wall times */
    long nstep_s, cap_step_s;
    long long mem_act;       /* activation bytes registered (DT_MEM_ACTIVATIONS) */
    long long mem_compute;   /* bf16 compute copy of the parameters registered (in mem_compute_cat: */
    int mem_compute_cat;     /* DT_MEM_PARAMS, or DT_MEM_GATHERED for ZeRO-3's one layer at a time) */
    size_t act_bytes[2];     /* activations of a training batch, recompute off / on (0: n/a) */
};

/* train_errors.c: the first failing rank's status and message on every rank
 * (collective); a failure some rank marked as bad input (dt_trainer_mark_input)
 * stays marked on every rank. */
int dt_trainer_agree_error(dt_trainer *t, int rc);
/* train_errors.c: mark rc (returned) as the input not fitting the flags: exit
 * 2; whether a failure was so marked (this thread, since the last clear). */
int dt_trainer_mark_input(int rc);
int dt_trainer_input_marked(void);
void dt_trainer_input_clear(void);
/* train_checks.c, before training (each collective; every rank gets the same
 * status and a message naming what differs):
 *   the flags and dist config that shape the collectives agree across ranks;
 *   the data sets loaded have the same sizes; the resumed step and position
 *   agree; every output path is usable (rank 0: checkpoint directory,
 *   --save-model target, JSON lines file opened; every rank: its timeline). */
int dt_trainer_check_flags(dt_trainer *t);
int dt_trainer_check_data(dt_trainer *t);
int dt_trainer_check_resumed(dt_trainer *t);
int dt_trainer_check_outputs(dt_trainer *t);
/* train_ckpt.c: --save-format hf's directory exists (created if missing)
 * and can take model.safetensors and config.json. */
int dt_trainer_check_hf_dir(const char *dir);
/* train_init.c, --init-from (dtrain/train.h, INIT FROM): open the file and
 * take the model's sizes from it (gpt; flags that contradict it refused);
 * then, once the model exists, its parameters read into the model (through
 * dt_trainer_set_params) and the file closed. Input errors are marked. */
int dt_trainer_init_config(dt_trainer *t, dt_model_config *mc);
int dt_trainer_init_weights(dt_trainer *t);
/* train_init.c: write a full parameter vector (host floats, layout order)
 * and the buffers into the model, before the strategy exists: the one
 * place that does (where a device model uploads). */
int dt_trainer_set_params(dt_trainer *t, const float *params, const float *buffers);
/* train_sample.c: the end-of-run sample of a generative model (gpt): the
 * parameters gathered to rank 0, which continues the prompt, prints the
 * text (a byte vocabulary) or the token ids, and writes the JSON record.
 * Collective. */
int dt_trainer_sample(dt_trainer *t);
/* Where the run is: the epoch and the samples of its global order consumed
 * (the start of the next epoch once one is complete). */
static inline void dt_trainer_position(const dt_trainer *t, uint64_t *epoch, uint64_t *samples) {
    *epoch = (uint64_t)t->epoch;
    if (t->resume_pos > 0) *samples = (uint64_t)t->resume_pos; /* resumed, not trained since */
    else if (t->epoch_over) *samples = 0;
    else *samples = (uint64_t)t->src->ops->position(t->src);
}
/* trainer.c: the model sizes that checkpoints record and resume checks,
 * as (key, value) pairs (the family's meta, source.h); returns the count
 * (<= DT_TRAIN_META_MAX). */
int dt_trainer_model_meta(const dt_trainer *t, char keys[][16], char vals[][24]);

#endif
