/* src/train/trainer_internal.h - internal: the trainer object, shared by
 * trainer.c (set-up and loop) and train_ckpt.c (checkpoints, model export). */
#ifndef DT_TRAIN_TRAINER_INTERNAL_H
#define DT_TRAIN_TRAINER_INTERNAL_H

#include <stdio.h>
#include "dtrain/data.h"
#include "dtrain/ddp.h"
#include "dtrain/optim.h"
#include "dtrain/train.h"
#include "dtrain/zero.h"
#include "train/metrics.h"

struct dt_trainer {
    dt_train_options o;
    dt_comm *comm;
    dt_comm_info ci;
    int dp;                  /* gradients averaged over comm (size > 1) */
    dt_dataset train, test;
    dt_model *model;
    dt_optim *opt;
    dt_lr_schedule sched;
    dt_ddp *ddp;
    float *shared_grads;     /* the model's gradients, from dt_comm_alloc_shared (DDP) */
    dt_zero *zero;           /* ZeRO stage >= 1 (then opt is NULL) */
    long long mem_model[2];  /* bytes of the model's own params/grads registered */
    int *layer_seg;          /* [layers] DDP segment of each layer, -1 if none */
    size_t *seg_off, *seg_cnt; /* [segments] each DDP segment's range in the flat buffers */
    int nlayers;
    dt_sampler sampler;
    dt_batch_iter it;
    float *x;                /* [cap, 784] batch images */
    int32_t *y;              /* [cap] batch labels */
    int cap;
    long step;
    int epoch;               /* current epoch (0-based) */
    int epoch_over;          /* the current epoch is complete: a checkpoint is at the next one's start */
    int64_t resume_pos;      /* the resumed epoch starts at this sample of its global order */
    dt_metrics metrics;      /* --json (rank 0) */
    int tracing;
    double t_layer;          /* start of the current layer (trace) */
    double bwd_t0, bwd_t1;   /* backward interval of the current step */
    double hidden_sum, comm_sum; /* overlap accounting over synced steps */
    double hidden_opt_sum;       /* ... hidden behind the per-bucket optimizer steps */
    double opt_t0, opt_t1;       /* this step's per-bucket optimizer interval (opt_t0 < 0: none) */
    double grad_norm;        /* of the last step, before clipping; -1 if not computed */
    long planned_steps;      /* optimizer steps the run will make if not stopped */
    double *step_s;          /* per-step wall times */
    long nstep_s, cap_step_s;
};

/* train_ckpt.c: the first failing rank's status and message on every rank
 * (collective). */
int dt_trainer_agree_error(dt_trainer *t, int rc);
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
/* trainer.c: where the run is: the epoch and the samples of its global order
 * consumed (the start of the next epoch once one is complete). */
void dt_trainer_position(const dt_trainer *t, uint64_t *epoch, uint64_t *samples);

#endif
