/* dtrain/model.h - the models of the training core (single process).
 *
 * A dt_model is a sequential stack of layers (nn.h kernels) ending in
 * log-softmax + mean NLL loss, for inputs x [B,1,28,28] (Fashion-MNIST) and
 * 10 classes. Built-in models ("name" in dt_model_config):
 *
 *   "mlp"   flatten, fc1 784->hidden1, relu, fc2 hidden1->hidden2, relu,
 *           fc3 hidden2->10                        (default hidden 1024, 1024)
 *   "lenet" as RAF's dist_example (input 1 channel): conv1 5x5 1->6 pad 2 no
 *           bias, bn1 BatchNorm2d(6), sigmoid, avgpool 2x2/2, flatten,
 *           linear1 1176->10
 *   "cnn"   conv1 3x3 1->hidden1 pad 1 no bias, bn1, relu, maxpool 2,
 *           conv2 3x3 hidden1->hidden2 pad 1 no bias, bn2, relu, maxpool 2,
 *           flatten, fc1 hidden2*49->hidden3, relu, dropout(p), fc2 hidden3->10
 *           (default 32, 64, 128, p = 0.25)
 *
 * LAYOUT CONTRACT (public: data parallelism and ZeRO shard/bucket these):
 *  - All parameters live in ONE contiguous float buffer (dt_model_params),
 *    gradients in a second buffer with the identical layout
 *    (dt_model_grads), and non-parameter buffers (batch-norm running_mean /
 *    running_var; num_batches_tracked is not kept) in a third flat buffer
 *    (dt_model_buffers).
 *  - Layers are numbered 0..L-1 in forward order, parameterless layers
 *    (activations, pools, flatten, dropout) included. The parameters of one
 *    layer are contiguous, and layers are laid out in forward order, so
 *    layer l owns [offset, offset+count) of the flat vector
 *    (dt_model_layer_params; count 0 for a parameterless layer).
 *  - Within a layer, tensors follow PyTorch's state_dict order (weight, then
 *    bias; batch norm: weight, bias; buffers running_mean, running_var), each
 *    row-major in PyTorch's shape ([OC,C] for linear, [OC,C,KH,KW] for conv).
 *  - Each tensor is described by a dt_param_slice named with the state_dict
 *    key of the equivalent PyTorch module (tests/reference/torch_models.py),
 *    e.g. "fc1.weight", "conv1.weight", "bn1.running_mean".
 *  - The buffers are 64-byte aligned; offsets are in elements, not bytes.
 *
 * Initialisation follows PyTorch's defaults, seeded by cfg.seed through
 * dt_rng (layer l uses the stream dt_rng_seed2(seed, l): weight values are
 * drawn first, then bias): weights of linear/conv ~ U(-1/sqrt(fan_in),
 * +1/sqrt(fan_in)) (= kaiming_uniform with a = sqrt(5)), biases ~ the same
 * bound; batch norm weight 1, bias 0, running_mean 0, running_var 1.
 * The values are NOT bit-identical to PyTorch's (different RNG).
 *
 * Memory: activations and workspaces are allocated for the largest batch
 * seen (grown on demand by dt_model_forward); a warm model does no
 * allocation per step. A model is not thread-safe: one thread at a time.
 *
 * All int functions return DT_OK (or a count) or a negative dt_status with a
 * message in dt_last_error(); pointer-returning functions return NULL on
 * error with the message set.
 */
#ifndef DTRAIN_MODEL_H
#define DTRAIN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_model dt_model;

#define DT_SLICE_NAME_MAX 64

/* One named tensor inside a flat buffer. */
typedef struct dt_param_slice {
    char name[DT_SLICE_NAME_MAX]; /* state_dict key, e.g. "fc1.weight" */
    int ndim;                     /* 1..4 */
    int64_t shape[4];             /* PyTorch shape; entries past ndim are 0 */
    size_t offset;                /* first element in the flat buffer */
    size_t count;                 /* number of elements (product of shape) */
    int layer;                    /* owning layer index */
} dt_param_slice;

typedef struct dt_model_config {
    const char *name; /* "mlp" | "lenet" | "cnn" */
    int hidden1;      /* mlp: width of fc1 (1024);  cnn: conv1 channels (32) */
    int hidden2;      /* mlp: width of fc2 (1024);  cnn: conv2 channels (64) */
    int hidden3;      /* cnn: width of fc1 (128);   unused by mlp/lenet */
    float dropout;    /* cnn: dropout probability in [0,1) (0.25); must be in
                         [0,1) for every model, used by cnn only */
    uint64_t seed;    /* weight initialisation and the dropout stream */
} dt_model_config;

/* Fill *cfg with the defaults of model `name` (the values in parentheses
 * above, seed 0). cfg->name points to a static string. DT_ERR_INVALID for
 * NULL arguments or an unknown name. Sizes used by a model must be > 0:
 * a zero or negative size is DT_ERR_INVALID at dt_model_create. */
int dt_model_config_init(dt_model_config *cfg, const char *name);

/* Build a model: parameters initialised, gradients zeroed, buffers at their
 * initial values. On success *out owns everything; release with
 * dt_model_free. DT_ERR_INVALID on a bad config; DT_ERR_NOMEM. */
int dt_model_create(const dt_model_config *cfg, dt_model **out);
/* Release a model (NULL is a no-op). Redirected parameter/gradient memory
 * (dt_model_set_layer_params/grads) belongs to the caller and is not freed. */
void dt_model_free(dt_model *m);

/* The model name ("mlp", ...); "?" for NULL. */
const char *dt_model_name(const dt_model *m);
/* Per-sample input elements (784) and number of classes (10); negative
 * status for NULL. */
int dt_model_input_size(const dt_model *m);
int dt_model_num_classes(const dt_model *m);

/* ---- flat buffers ----------------------------------------------------------
 * Sizes in elements; 0 for NULL. The pointers stay valid for the model's
 * life (NULL for a NULL model). */
size_t dt_model_num_params(const dt_model *m);
float *dt_model_params(dt_model *m);  /* [num_params] */
float *dt_model_grads(dt_model *m);   /* [num_params], same layout */
size_t dt_model_num_buffers(const dt_model *m);
float *dt_model_buffers(dt_model *m); /* [num_buffers] (NULL-free even if 0) */

/* ---- named slices ------------------------------------------------------------
 * Parameter slices index the params/grads buffers; buffer slices the
 * buffers buffer. Both tables are in layout order. */
int dt_model_num_slices(const dt_model *m);
const dt_param_slice *dt_model_slice(const dt_model *m, int i);
int dt_model_num_buffer_slices(const dt_model *m);
const dt_param_slice *dt_model_buffer_slice(const dt_model *m, int i);
/* Look a state_dict key up in both tables. Returns the slice and sets
 * *is_buffer (may be NULL) to 0 for a parameter, 1 for a buffer; NULL with
 * DT_ERR_INVALID recorded when absent. */
const dt_param_slice *dt_model_find_slice(const dt_model *m, const char *name,
                                          int *is_buffer);

/* ---- layers ------------------------------------------------------------------ */

int dt_model_num_layers(const dt_model *m);
/* Module name ("fc1", "bn1", "relu1", "flatten", ...) and kind ("linear",
 * "conv2d", "batchnorm2d", "batchnorm1d", "relu", "gelu", "sigmoid", "tanh",
 * "avgpool2d", "maxpool2d", "flatten", "dropout"); NULL on a bad index. */
const char *dt_model_layer_name(const dt_model *m, int layer);
const char *dt_model_layer_kind(const dt_model *m, int layer);
/* Range [*offset, *offset + *count) of layer's parameters in the flat
 * params/grads vector (count 0 for parameterless layers; offset is then
 * where the next parameters start). Either output may be NULL. */
int dt_model_layer_params(const dt_model *m, int layer, size_t *offset, size_t *count);
/* Same for the non-parameter buffers. */
int dt_model_layer_buffers(const dt_model *m, int layer, size_t *offset, size_t *count);
/* Per-sample element count of layer's output. 0 on a bad index. */
size_t dt_model_layer_output_size(const dt_model *m, int layer);

/* ---- parameter redirection (ZeRO-3) ------------------------------------------
 * Set where layer's parameters (resp. gradients) live: ptr must hold the
 * layer's `count` floats in the layer's internal layout (the same as its
 * range of the flat vector). NULL restores the default (the model's flat
 * buffer at the layer's offset). The memory stays the caller's. Every
 * forward/backward reads the current pointer of each layer when it starts
 * that layer (after the layer's pre_* hook returns), so hooks may redirect.
 * DT_ERR_INVALID for a bad layer index, or a non-NULL ptr for a layer
 * without parameters. */
int dt_model_set_layer_params(dt_model *m, int layer, float *ptr);
int dt_model_set_layer_grads(dt_model *m, int layer, float *ptr);
/* Free the model's own flat parameter (params != 0) and/or gradient
 * (grads != 0) buffer, for ZeRO stages that keep only shards: afterwards
 * dt_model_params/dt_model_grads return NULL and every layer with parameters
 * must be redirected (dt_model_set_layer_params/grads) before a pass touches
 * it; dt_model_zero_grad must not be used for released gradients. */
int dt_model_release_flat(dt_model *m, int params, int grads);
/* Move the flat gradient buffer into caller memory: grads must hold
 * num_params floats (e.g. from dt_comm_alloc_shared, so that data-parallel
 * allreduces reduce straight between the ranks' gradient buffers). The
 * current gradients are copied there (zeros after dt_model_release_flat),
 * the model's own buffer is freed, and dt_model_grads returns grads from now
 * on. The memory stays the caller's: it must outlive the model's use of it
 * and the model never frees it. Layers redirected with
 * dt_model_set_layer_grads keep their pointers. DT_ERR_INVALID on NULL. */
int dt_model_use_grad_buffer(dt_model *m, float *grads);

/* Current parameter / gradient location of layer (NULL if the layer has no
 * parameters or the index is bad). */
float *dt_model_layer_param_ptr(dt_model *m, int layer);
float *dt_model_layer_grad_ptr(dt_model *m, int layer);

/* ---- hooks ----------------------------------------------------------------------
 * Every callback may be NULL. A callback returning non-zero aborts the
 * forward/backward: a negative value is returned unchanged (the callback's
 * own dt_last_error() message is kept), a positive value becomes
 * DT_ERR_STATE. After an aborted pass there is no valid forward state.
 *
 * Call order, forward (train or eval), for layer = 0 .. L-1:
 *     pre_forward(layer); <layer computes>; post_forward(layer)
 * then the loss is computed (no hook).
 * Backward, for layer = L-1 .. 0:
 *     pre_backward(layer); <layer computes its gradients>;
 *     grad_ready(layer)    -- only for layers with parameters: the layer's
 *                             parameter gradients are final for this
 *                             backward and will not be touched again, so
 *                             communication may start while the remaining
 *                             layers run;
 *     post_backward(layer)
 * Layer 0 computes no input gradient.
 *
 * sync_stats(ctx, buf, n): sum buf[0..n) over ranks in place (synchronised
 * batch norm). NULL = ordinary, local batch norm. When set, each batch-norm
 * layer in a TRAIN forward makes two calls ([sum x per channel, count] with
 * n = C+1, then [sum (x-mean)^2 per channel] with n = C) and in backward one
 * call ([sum dy, sum dy*xhat per channel, count], n = 2C+1; batch-norm
 * parameter gradients stay local sums); the global
 * statistics are then used. Eval passes never call it. Every rank must run
 * the same sequence of passes. With data parallelism and per-rank mean loss,
 * averaging the parameter gradients over ranks then gives the gradient of
 * the global-batch mean loss (as torch SyncBatchNorm + DDP). */
typedef struct dt_model_hooks {
    void *ctx;
    int (*pre_forward)(void *ctx, int layer);
    int (*post_forward)(void *ctx, int layer);
    int (*pre_backward)(void *ctx, int layer);
    int (*grad_ready)(void *ctx, int layer);
    int (*post_backward)(void *ctx, int layer);
    int (*sync_stats)(void *ctx, float *buf, size_t n);
} dt_model_hooks;

/* Install hooks (copied); NULL removes all hooks. */
int dt_model_set_hooks(dt_model *m, const dt_model_hooks *hooks);

/* Re-seed the dropout stream (e.g. seed + rank for data parallelism). The
 * stream starts as dt_rng_seed2(cfg.seed, 0x64726f70) and advances with
 * every train forward. */
int dt_model_seed_dropout(dt_model *m, uint64_t seed);

/* ---- training step ----------------------------------------------------------------- */

/* Forward a batch. x [B,1,28,28] (= [B,784]) and labels [B] (each in [0,10))
 * are copied, so the caller's arrays may change afterwards.
 * train != 0: batch norm uses batch statistics and updates its running
 * statistics; dropout is active. train == 0: running statistics, no dropout.
 * labels may be NULL: then no loss is computed and *loss (if loss != NULL)
 * is set to NAN. loss may be NULL. B >= 1. A backward is possible only
 * after a train forward with labels. */
int dt_model_forward(dt_model *m, const float *x, const int32_t *labels, int B, int train,
                     float *loss);
/* [B,10] LOG-PROBABILITIES (log_softmax of the last layer) of the last
 * forward; NULL before any forward. Valid until the next forward. */
const float *dt_model_logits(const dt_model *m);
/* [B,10] raw scores (output of the last layer, pre-softmax). */
const float *dt_model_scores(const dt_model *m);
/* Batch size of the last forward (0 if none). */
int dt_model_batch_size(const dt_model *m);
/* [B, dt_model_layer_output_size(layer)] output of layer in the last
 * forward (NULL on a bad index or before any forward). */
const float *dt_model_layer_output(const dt_model *m, int layer);
/* Number of rows b < B whose argmax (first maximum) of the last forward
 * equals labels[b]. B must equal the last forward's batch size. */
int dt_model_correct(const dt_model *m, const int32_t *labels, int B);

/* After a train forward with labels: grads += d(mean loss)/d(params), at
 * each layer's current gradient location. DT_ERR_STATE without such a
 * forward, or when that forward was already back-propagated. */
int dt_model_backward(dt_model *m);
/* The same with the loss scaled: grads += scale * d(mean loss)/d(params)
 * (e.g. 1/k for gradient accumulation over k micro-batches). */
int dt_model_backward_scaled(dt_model *m, float scale);
/* Zero every layer's gradients at their current location (NULL: no-op). */
void dt_model_zero_grad(dt_model *m);

#ifdef __cplusplus
}
#endif
#endif
