/* dtrain/optim.h - optimizers (SGD, Adam, AdamW), learning-rate schedules and
 * gradient helpers.
 *
 * Sharding model. An optimizer instance owns the state for ONE contiguous range
 * of `n` float elements and nothing else: dt_optim_step() is given pointers to
 * that range of the parameter and gradient buffers. A full model is stepped by
 * one instance over the whole flat buffer, or (ZeRO) by one instance per shard
 * over its own sub-range; every update is element-wise, so stepping a buffer in
 * pieces gives bit-for-bit the same result as stepping it whole.
 *
 * State layout. Each state is one flat float buffer of `n` elements laid out
 * like the parameter range (element i of a state belongs to params[i]):
 *   SGD, momentum == 0   no state
 *   SGD, momentum  > 0   0: "momentum_buffer"
 *   Adam, AdamW          0: "exp_avg", 1: "exp_avg_sq"
 * plus one step counter per instance (the number of dt_optim_step calls so far).
 * Checkpointing / resharding saves and restores those buffers (dt_optim_state)
 * and the counter (dt_optim_get_step / dt_optim_set_step).
 *
 * Semantics are exactly those of PyTorch's torch.optim (1.13 / 2.x single-tensor
 * path, maximize=False, dampening=0, amsgrad=False): element-wise math in
 * float32, scalar coefficients (1 - beta, bias corrections, lr / (1 - beta1^t),
 * 1 - lr * weight_decay) computed in double as PyTorch does in Python and
 * rounded to float once. Results agree with PyTorch's CPU kernels to a few
 * float ulps (PyTorch uses fused multiply-add in places; this code does not).
 * With t = step number after increment (1 on the first step), g = gradient,
 * p = parameter, lr = the learning rate passed to dt_optim_step:
 *
 *   SGD:   d = g + weight_decay * p
 *          if momentum != 0:
 *              buf = (t == 1) ? d : momentum * buf + d
 *              d   = nesterov ? d + momentum * buf : buf
 *          p = p - lr * d
 *   Adam:  g = g + weight_decay * p                        (L2 penalty)
 *          m = beta1 * m + (1 - beta1) * g
 *          v = beta2 * v + (1 - beta2) * g * g
 *          p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 *   AdamW: p = p * (1 - lr * weight_decay)                 (decoupled decay)
 *          then the Adam update above without the L2 term.
 *
 * "t == 1" is decided by the step counter: a momentum buffer is (re)initialised
 * from the gradient whenever the counter is 0 before the step, which is what
 * PyTorch does for a missing buffer. Restore the counter together with the
 * buffers when loading a checkpoint.
 *
 * All functions returning int return DT_OK or a negative dt_status with a
 * message for dt_last_error(). */
#ifndef DTRAIN_OPTIM_H
#define DTRAIN_OPTIM_H

#include <stddef.h>
#include <stdint.h>
#include "dtrain/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- configuration ------------------------------------------------------ */

typedef enum dt_optim_kind {
    DT_OPTIM_SGD = 0,
    DT_OPTIM_ADAM = 1,
    DT_OPTIM_ADAMW = 2
} dt_optim_kind;

typedef struct dt_optim_config {
    dt_optim_kind kind;
    /* Hyperparameters are doubles, like PyTorch's Python floats: the
     * coefficients 1 - beta and beta^t are computed from them in double, so
     * beta2 = 0.999 gives exactly PyTorch's 1 - beta2 (a float 0.999f would be
     * off by 1.3e-5 relative). */
    double lr;           /* base learning rate (the value a schedule starts from);
                          * dt_optim_step takes the lr of each step explicitly */
    double weight_decay; /* SGD/Adam: L2 added to the gradient; AdamW: decoupled */
    /* SGD only (ignored, not validated, for Adam/AdamW) */
    double momentum;     /* [0, 1); 0 = plain SGD */
    int nesterov;        /* 0/1; requires momentum > 0 */
    /* Adam/AdamW only (ignored, not validated, for SGD) */
    double beta1, beta2; /* each in [0, 1) */
    double eps;          /* > 0, added after the square root */
} dt_optim_config;

/* Fill *cfg with PyTorch's defaults for `kind`:
 *   all:   lr 1e-3 (torch.optim's default; SGD's in PyTorch >= 2.2)
 *   SGD:   momentum 0, nesterov 0, weight_decay 0
 *   Adam:  beta1 0.9, beta2 0.999, eps 1e-8, weight_decay 0
 *   AdamW: beta1 0.9, beta2 0.999, eps 1e-8, weight_decay 0.01
 * (fields of the other kinds get the same neutral values: momentum 0,
 * nesterov 0, betas 0.9/0.999, eps 1e-8). DT_ERR_INVALID if cfg is NULL or
 * kind unknown. */
int dt_optim_config_default(dt_optim_config *cfg, dt_optim_kind kind);

/* Parse "sgd", "adam", "adamw" (case-insensitive) into *kind.
 * DT_ERR_INVALID (message lists the valid names) otherwise. */
int dt_optim_kind_parse(const char *name, dt_optim_kind *kind);
/* "sgd", "adam", "adamw"; "?" if unknown. */
const char *dt_optim_kind_name(dt_optim_kind kind);

/* Check a configuration. DT_ERR_INVALID with a message naming the field for:
 * unknown kind; lr < 0 or not finite; weight_decay < 0 or not finite; (SGD)
 * momentum outside [0, 1), nesterov not 0/1, nesterov with momentum 0;
 * (Adam/AdamW) beta1 or beta2 outside [0, 1), eps <= 0 or not finite. */
int dt_optim_config_validate(const dt_optim_config *cfg);

/* ---- optimizer instances ------------------------------------------------ */

typedef struct dt_optim dt_optim;

/* Create an optimizer owning the state for `n` elements (n == 0 is allowed:
 * an empty shard). States start at zero, the step counter at 0. The config is
 * validated and copied. *out is set to NULL on failure. Errors:
 * DT_ERR_INVALID (NULL arguments, invalid config), DT_ERR_NOMEM. Free with
 * dt_optim_free. */
int dt_optim_create(const dt_optim_config *cfg, size_t n, dt_optim **out);
/* The same with the state on `device` (dtrain/device.h): DT_DEVICE_CPU is
 * dt_optim_create; DT_DEVICE_CUDA keeps the state in device memory of the
 * calling thread's current CUDA device, and every step, state access and
 * gradient helper of the instance then takes DEVICE pointers (params,
 * grads: device memory of that device) and enqueues its kernels on `stream`
 * (a cudaStream_t; NULL: the default stream) without waiting, except
 * dt_optim_grad_sqnorm, which returns the value. The arithmetic is the
 * host's, element for element (the device kernels compute the same float32
 * operations in the same order without fused multiply-adds): a device step
 * gives the host step's bits. DT_ERR_UNSUPPORTED without CUDA or a device;
 * DT_ERR_NOMEM naming the state that did not fit. */
int dt_optim_create_on(const dt_optim_config *cfg, size_t n, int device, void *stream, dt_optim **out);
/* Where the instance's state lives (DT_DEVICE_CPU for NULL). */
int dt_optim_device(const dt_optim *opt);
/* Free the instance and its state buffers; NULL is a no-op. */
void dt_optim_free(dt_optim *opt);

/* One update of params[0..n) from grads[0..n) with learning rate `lr` (the
 * value for this step, e.g. dt_lr_at(schedule, step); the config's lr is not
 * used here), then increments the step counter. params and grads must not
 * overlap each other (they may be NULL only when n == 0). Errors
 * (DT_ERR_INVALID, nothing modified): NULL opt/params/grads, overlapping
 * buffers, lr < 0 or not finite. Non-finite gradients are not checked: they
 * propagate into params and state as in PyTorch. */
int dt_optim_step(dt_optim *opt, float *params, const float *grads, float lr);

/* dt_optim_step restricted to elements [offset, offset + count) of the
 * instance: params and grads point at the range's first element, the state
 * used is the instance's at the same offset, and the step counter is NOT
 * advanced: after the ranges of one step (each element in at most one) call
 * dt_optim_step_finish once. Each element gets exactly the value
 * dt_optim_step gives it (same t, same arithmetic). Lets a data-parallel
 * trainer update a gradient bucket's parameters as soon as its reduction
 * completes, while later buckets are still in flight. Errors
 * (DT_ERR_INVALID, nothing modified): as dt_optim_step, and a range outside
 * [0, n). */
int dt_optim_step_range(dt_optim *opt, float *params, const float *grads, float lr, size_t offset,
                        size_t count);
/* Advance the step counter after the dt_optim_step_range calls of one step. */
int dt_optim_step_finish(dt_optim *opt);

/* ---- parameter groups without weight decay ------------------------------
 * PyTorch trains GPTs with two parameter groups (nanoGPT's
 * configure_optimizers): weight_decay on the matrices, 0 on biases and
 * LayerNorm parameters. An instance gets the second group as a list of
 * element ranges: their elements are updated exactly as by a param group with
 * weight_decay = 0 (SGD/Adam: no L2 term; AdamW: no decoupled decay, the
 * parameter is multiplied by nothing), every other element with the config's
 * weight_decay. A range is a GLOBAL range [offset, offset + count) of the flat
 * vector; `base` is the global index of the instance's element 0 (a ZeRO
 * shard's first element, 0 for a whole model): the instance keeps the parts
 * that fall inside [base, base + n) and ignores the rest, so every shard is
 * given the same list. Ranges may come in any order and may touch; they must
 * not overlap. Replaces any earlier list; nranges 0 clears it. Errors
 * (DT_ERR_INVALID, the list unchanged): NULL opt, NULL ranges with nranges >
 * 0, nranges < 0, overlapping ranges, an offset + count that overflows;
 * DT_ERR_NOMEM. */
typedef struct dt_optim_range {
    size_t offset;
    size_t count;
} dt_optim_range;
int dt_optim_set_no_decay(dt_optim *opt, size_t base, const dt_optim_range *ranges, int nranges);
/* Elements of the instance without weight decay (0 for NULL). */
size_t dt_optim_no_decay_count(const dt_optim *opt);

/* Zero all state buffers and the step counter (the config is kept). */
int dt_optim_reset(dt_optim *opt);

/* The instance's copy of its config, or NULL for NULL opt. */
const dt_optim_config *dt_optim_get_config(const dt_optim *opt);
/* Number of elements the instance owns (0 for NULL). */
size_t dt_optim_numel(const dt_optim *opt);

/* Number of state buffers (0, 1 or 2; see the table at the top); negative
 * dt_status for NULL opt. */
int dt_optim_num_states(const dt_optim *opt);
/* State buffer i (0 <= i < num_states): a pointer to n floats owned by the
 * instance (device memory for a device instance), valid until dt_optim_free
 * (never NULL on success, also when n == 0). Read it to checkpoint, write it to restore. *name (if name is not
 * NULL) receives its PyTorch name ("momentum_buffer", "exp_avg",
 * "exp_avg_sq"), a static string. Returns NULL (and sets dt_last_error) for
 * NULL opt or i out of range. */
float *dt_optim_state(dt_optim *opt, int i, const char **name);
/* Total bytes of the state buffers: num_states * n * sizeof(float). */
size_t dt_optim_state_bytes(const dt_optim *opt);

/* Steps taken so far (PyTorch's state['step'] for Adam/AdamW); negative
 * dt_status for NULL opt. */
long dt_optim_get_step(const dt_optim *opt);
/* Set the step counter (restoring a checkpoint). The next dt_optim_step uses
 * t = step + 1 in the bias corrections; with step == 0 the next SGD step
 * re-initialises the momentum buffer from the gradient. DT_ERR_INVALID for
 * NULL opt or step < 0. */
int dt_optim_set_step(dt_optim *opt, long step);

/* ---- learning-rate schedules -------------------------------------------- */

typedef enum dt_lr_decay {
    DT_LR_CONSTANT = 0, /* base_lr after warm-up */
    DT_LR_COSINE = 1    /* cosine from base_lr to min_lr over [warmup, total) */
} dt_lr_decay;

typedef struct dt_lr_schedule {
    float base_lr;      /* >= 0 */
    float min_lr;       /* cosine floor, 0 <= min_lr <= base_lr */
    long warmup_steps;  /* W >= 0; 0 = no warm-up */
    float warmup_start; /* fraction f in [0, 1] of base_lr at step 0 */
    long total_steps;   /* T, cosine only: T > W */
    dt_lr_decay decay;
} dt_lr_schedule;

/* Fill *s with a constant schedule at base_lr: no warm-up, min_lr 0,
 * warmup_start 0, total_steps 0. */
void dt_lr_schedule_default(dt_lr_schedule *s, float base_lr);
/* DT_ERR_INVALID with a message naming the field for: NULL s, base_lr < 0 or
 * not finite, min_lr outside [0, base_lr], warmup_steps < 0, warmup_start
 * outside [0, 1], unknown decay, cosine with total_steps <= warmup_steps. */
int dt_lr_schedule_validate(const dt_lr_schedule *s);

/* Learning rate for step s (0-based: s steps already taken, so dt_lr_at(.., 0)
 * is the lr of the first update). Computed in double, returned as float:
 *   s < 0 is treated as 0.
 *   warm-up, s < W:        lr = base * (f + (1 - f) * s / W)
 *   constant, s >= W:      lr = base
 *   cosine,   W <= s < T:  lr = min + (base - min) * (1 + cos(pi * (s - W) / (T - W))) / 2
 *   cosine,   s >= T:      lr = min
 * With f = 0 the first update uses lr 0 and step W is the first at base_lr.
 * Precondition: dt_lr_schedule_validate(s) == DT_OK (otherwise the value is
 * unspecified but finite-safe; NULL s gives 0). */
float dt_lr_at(const dt_lr_schedule *s, long step);

/* ---- gradient helpers ---------------------------------------------------- */

/* The gradient helpers below for gradients that live where opt's state
 * lives (host memory, or device memory for a device instance, in its
 * stream's order): *out = the sum of squares of g[0..n) (a device instance's
 * waits for the value and accumulates in double in a fixed order: the same
 * bits run to run, not necessarily dt_grad_sqnorm's), and g *= s.
 * DT_ERR_INVALID for NULL opt/out or NULL g with n > 0. */
int dt_optim_grad_sqnorm(const dt_optim *opt, const float *g, size_t n, double *out);
int dt_optim_grad_scale(const dt_optim *opt, float *g, size_t n, float s);
/* g[i] += src[i] for i in [0, n) where opt's state lives (one float add per
 * element: a device instance's gives the host loop's bits), e.g. a reduced
 * gradient piece added into a gradient shard. src may be g itself and must
 * not overlap it otherwise. DT_ERR_INVALID for NULL opt, or NULL g or src
 * with n > 0. */
int dt_optim_grad_add(const dt_optim *opt, float *g, const float *src, size_t n);
/* dst[i] = src[i] rounded to bfloat16 (round to nearest, ties to even:
 * dt_f32_to_bf16's bits, a device instance's kernel too) for i in [0, n),
 * where opt's state lives: the bf16 copy a mixed-precision model computes
 * with, written from the f32 master parameters the optimizer steps (ZeRO's
 * cfg.params_bf16). dst (n bf16 values) must not overlap src. DT_ERR_INVALID
 * for NULL opt, or NULL dst or src with n > 0. */
int dt_optim_params_to_bf16(const dt_optim *opt, uint16_t *dst, const float *src, size_t n);

/* Sum of squares of g[0..n), accumulated in double (8 interleaved partial sums
 * over consecutive elements, then added in a fixed order: the result depends
 * only on the values and n, not on the build's vectorisation). 0 for n == 0 or
 * NULL g. sqrt of it is the L2 norm; sum the values of all shards/ranks before
 * the sqrt for the global norm. */
double dt_grad_sqnorm(const float *g, size_t n);
/* g[i] *= s for i in [0, n) (gradient clipping / averaging). No-op for n == 0
 * or NULL g. */
void dt_grad_scale(float *g, size_t n, float s);

#ifdef __cplusplus
}
#endif
#endif
