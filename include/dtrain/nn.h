/* dtrain/nn.h - neural-network layers: float32 forward and backward kernels.
 *
 * Conventions (those of llm.c's train_gpt2.c and of PyTorch):
 *  - Every tensor is a plain row-major float array; image tensors are NCHW.
 *    The shape of each pointer is written next to it, e.g. inp [B,C,H,W].
 *  - layer_forward(out, ..., inp, ...) WRITES (=) its outputs.
 *  - layer_backward(dinp, dweight, dbias, ..., dout, ...) ACCUMULATES (+=)
 *    into every gradient it writes: callers zero gradient buffers first (or
 *    rely on accumulation, e.g. for gradient accumulation over micro-batches).
 *    Any gradient output may be NULL: it is then not computed (e.g. dinp of
 *    the first layer, or the parameter gradients of a frozen layer).
 *  - Output buffers must not overlap input buffers unless a function says
 *    otherwise.
 *  - Dimensions are int (they reach BLAS as int); products of dimensions are
 *    computed in size_t. Element counts of element-wise ops are size_t.
 *  - Every function returns DT_OK or a negative dt_status (DT_ERR_INVALID for
 *    NULL required pointers, non-positive dimensions, inconsistent shapes),
 *    with a message in dt_last_error(). Nothing is written on an error
 *    detected up front. No function allocates memory: callers pass
 *    workspaces where one is needed.
 *  - BLAS: GEMMs go to OpenBLAS (cblas_sgemm). Unless dt_set_num_threads()
 *    was called, the first call of a GEMM-using function (or dt_model_create)
 *    sets OpenBLAS to 1 thread per process.
 */
#ifndef DTRAIN_NN_H
#define DTRAIN_NN_H

#include <stddef.h>
#include <stdint.h>
#include "dtrain/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- threads ------------------------------------------------------------ */

/* Number of threads the BLAS uses in this process (n >= 1, else
 * DT_ERR_INVALID). The default, applied on first use, is 1. */
int dt_set_num_threads(int n);
/* Current BLAS thread count (after applying the default if needed). */
int dt_get_num_threads(void);

/* A reduction callback: sum buf[0..n) over all participating processes,
 * in place, and return 0 (or a negative dt_status, which aborts the caller
 * and is returned by it unchanged). Used for synchronised batch norm; the
 * model's dt_model_hooks.sync_stats has this type. */
typedef int (*dt_sum_fn)(void *ctx, float *buf, size_t n);

/* ---- linear: out = inp @ weight^T + bias -------------------------------- */

/* out    [B,OC]  written
 * work   [B*OC]  optional scratch (may be NULL); when given, a faster GEMM
 *                 ordering is used for wide layers (OC > B). Must not
 *                 overlap anything else.
 * inp    [B,C]
 * weight [OC,C]  (PyTorch nn.Linear layout)
 * bias   [OC]    or NULL (no bias) */
int dt_linear_forward(float *out, float *work, const float *inp, const float *weight,
                      const float *bias, int B, int C, int OC);
/* dinp [B,C] += dout @ weight; dweight [OC,C] += dout^T @ inp;
 * dbias [OC] += sum over rows of dout. dinp/dweight/dbias may each be NULL.
 * dout [B,OC], inp [B,C] (the forward input), weight [OC,C]. */
int dt_linear_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                       const float *inp, const float *weight, int B, int C, int OC);

/* ---- conv2d (im2col + GEMM), cross-correlation like PyTorch ------------- */

typedef struct dt_conv2d_desc {
    int C, H, W;          /* input channels, height, width (per sample) */
    int OC;               /* output channels */
    int KH, KW;           /* kernel height, width */
    int stride_h, stride_w; /* >= 1 */
    int pad_h, pad_w;     /* zero padding on each side, >= 0 */
} dt_conv2d_desc;

/* Output spatial size: OH = (H + 2*pad_h - KH)/stride_h + 1 (floor), same
 * for OW. DT_ERR_INVALID if the descriptor is invalid or the output is empty.
 * OH/OW may be NULL (validation only). */
int dt_conv2d_out_hw(const dt_conv2d_desc *d, int *OH, int *OW);
/* Floats of workspace that dt_conv2d_forward/backward need:
 * C*KH*KW*OH*OW (one sample's column matrix); 0 if d is invalid. */
size_t dt_conv2d_workspace_size(const dt_conv2d_desc *d);

/* out    [B,OC,OH,OW]  written
 * work   [dt_conv2d_workspace_size(d)]  scratch
 * inp    [B,C,H,W]
 * weight [OC,C,KH,KW]  (PyTorch nn.Conv2d layout)
 * bias   [OC] or NULL */
int dt_conv2d_forward(float *out, float *work, const float *inp, const float *weight,
                      const float *bias, int B, const dt_conv2d_desc *d);
/* dinp [B,C,H,W] += ...; dweight [OC,C,KH,KW] += ...; dbias [OC] += ...
 * (each may be NULL). dout [B,OC,OH,OW], inp [B,C,H,W] (the forward input),
 * weight [OC,C,KH,KW], work as for forward. */
int dt_conv2d_backward(float *dinp, float *dweight, float *dbias, float *work,
                       const float *dout, const float *inp, const float *weight, int B,
                       const dt_conv2d_desc *d);

/* ---- batch norm over [B,C,S] (S = H*W for BatchNorm2d, 1 for BatchNorm1d) */

/* Forward. y = (x - mean) * rstd * weight + bias per channel c, where
 * rstd = 1/sqrt(var + eps).
 *  train != 0: mean/var are the biased statistics of the batch (over B and
 *    S; with `sync` over all processes' batches, see below). If running_mean
 *    and running_var are non-NULL they are updated like PyTorch:
 *    running = (1-momentum)*running + momentum*stat, using the UNBIASED
 *    variance (N/(N-1) * var, N = total count per channel) for running_var.
 *    N must be > 1 (DT_ERR_INVALID otherwise, like PyTorch).
 *  train == 0: mean/var are running_mean/running_var (both required).
 * out          [B,C,S]  written
 * save_mean    [C]  written: the mean used (needed by backward)
 * save_rstd    [C]  written: the rstd used (needed by backward)
 * inp          [B,C,S]
 * weight, bias [C]  affine parameters, or NULL for gamma = 1 / beta = 0
 * running_mean, running_var [C]  non-parameter buffers (may be NULL in train)
 * work         [2*C+1] scratch, required only when sync != NULL
 * sync, sync_ctx: if sync != NULL (train only), per-channel statistics are
 *    summed over processes: first [sum_c x (C), count], then
 *    [sum_c (x-mean)^2 (C)] (two calls, a numerically stable two-pass
 *    variance). Every process must make the same calls in the same order.
 * Statistics are accumulated in double precision. */
int dt_batchnorm_forward(float *out, float *save_mean, float *save_rstd, const float *inp,
                         const float *weight, const float *bias, float *running_mean,
                         float *running_var, float *work, int B, int C, int S, int train,
                         float momentum, float eps, dt_sum_fn sync, void *sync_ctx);
/* Backward, with xhat = (inp - save_mean) * save_rstd:
 *  dbias  [C] += sum dout;  dweight [C] += sum dout * xhat   (local sums)
 *  train != 0 (statistics came from the batch):
 *    dinp += weight*rstd * (dout - mean(dout) - xhat * mean(dout*xhat)),
 *    the means over the total count; with sync != NULL (and dinp != NULL)
 *    the two per-channel sums and the count, [sum dout (C), sum dout*xhat
 *    (C), count], are summed over processes in ONE call before use, while
 *    dweight/dbias receive the LOCAL sums (data parallelism averages them).
 *  train == 0: dinp += weight*rstd*dout.
 * dout [B,C,S]; inp [B,C,S] the forward input; weight [C] or NULL;
 * save_mean/save_rstd [C] from the forward; work [2*C+1] scratch (always
 * required). */
int dt_batchnorm_backward(float *dinp, float *dweight, float *dbias, float *work,
                          const float *dout, const float *inp, const float *weight,
                          const float *save_mean, const float *save_rstd, int B, int C,
                          int S, int train, dt_sum_fn sync, void *sync_ctx);

/* ---- element-wise activations (n elements) --------------------------------
 * Forward: out may equal inp (in place). Backward: dinp += dout * f'(.). */
int dt_relu_forward(float *out, const float *inp, size_t n);
int dt_relu_backward(float *dinp, const float *dout, const float *out, size_t n);
/* GELU, exact (erf) form: x * 0.5 * (1 + erf(x / sqrt(2))). Backward needs
 * the forward INPUT. */
int dt_gelu_forward(float *out, const float *inp, size_t n);
int dt_gelu_backward(float *dinp, const float *dout, const float *inp, size_t n);
/* Sigmoid 1/(1+exp(-x)), vectorised (relative error < 1e-6 against double;
 * exactly 0 for x < -87.33 and 1 for large x; NaN propagates); backward uses
 * the forward output. */
int dt_sigmoid_forward(float *out, const float *inp, size_t n);
int dt_sigmoid_backward(float *dinp, const float *dout, const float *out, size_t n);
/* tanh; backward uses the forward output. */
int dt_tanh_forward(float *out, const float *inp, size_t n);
int dt_tanh_backward(float *dinp, const float *dout, const float *out, size_t n);

/* ---- pooling (no padding, floor output size like PyTorch) ---------------- */

typedef struct dt_pool2d_desc {
    int C, H, W;            /* input channels, height, width */
    int KH, KW;             /* window */
    int stride_h, stride_w; /* >= 1 (PyTorch's default stride is the kernel) */
} dt_pool2d_desc;

/* OH = (H - KH)/stride_h + 1, OW likewise; DT_ERR_INVALID if invalid or
 * empty. OH/OW may be NULL. */
int dt_pool2d_out_hw(const dt_pool2d_desc *d, int *OH, int *OW);
/* Average pool: out [B,C,OH,OW] = mean of each KHxKW window of inp [B,C,H,W]. */
int dt_avgpool2d_forward(float *out, const float *inp, int B, const dt_pool2d_desc *d);
/* dinp [B,C,H,W] += dout [B,C,OH,OW] / (KH*KW) spread over each window. */
int dt_avgpool2d_backward(float *dinp, const float *dout, int B, const dt_pool2d_desc *d);
/* Max pool: out [B,C,OH,OW]; argmax [B,C,OH,OW] receives the index (h*W + w,
 * within the sample's channel plane) of the chosen element; ties pick the
 * first in row-major window order, NaN wins (as PyTorch). */
int dt_maxpool2d_forward(float *out, int32_t *argmax, const float *inp, int B,
                         const dt_pool2d_desc *d);
/* dinp [B,C,H,W] += dout routed to the argmax positions. */
int dt_maxpool2d_backward(float *dinp, const float *dout, const int32_t *argmax, int B,
                          const dt_pool2d_desc *d);

/* ---- flatten (a reshape: [B,C,H,W] -> [B,C*H*W]) ------------------------- */

/* out = inp (a copy; nothing is done when out == inp). */
int dt_flatten_forward(float *out, const float *inp, size_t n);
/* dinp += dout (n elements; dinp must not equal dout). */
int dt_flatten_backward(float *dinp, const float *dout, size_t n);

/* ---- dropout (inverted scaling) ------------------------------------------ */

/* mask [n] = 0 with probability p, else 1/(1-p); draws one dt_rng_uniform
 * per element in order (element dropped when u < p). p in [0,1]; p == 1
 * gives an all-zero mask. */
int dt_dropout_mask(float *mask, size_t n, float p, dt_rng *rng);
/* out [n] = inp * mask (out may equal inp). In eval mode dropout is the
 * identity: callers skip it (or copy). */
int dt_dropout_forward(float *out, const float *inp, const float *mask, size_t n);
/* dinp [n] += dout * mask. */
int dt_dropout_backward(float *dinp, const float *dout, const float *mask, size_t n);

/* ---- log-softmax, NLL and cross-entropy (rows of V classes) -------------- */

/* out [B,V] = inp - logsumexp(inp) per row (out may equal inp). */
int dt_log_softmax_forward(float *out, const float *inp, int B, int V);
/* dinp [B,V] += dout - exp(out) * rowsum(dout), out = the forward output. */
int dt_log_softmax_backward(float *dinp, const float *dout, const float *out, int B, int V);
/* *loss = -(1/B) * sum_b logp[b, labels[b]] (mean reduction; every label
 * must be in [0,V), else DT_ERR_INVALID; no ignore_index). Summed in double. */
int dt_nll_loss_forward(float *loss, const float *logp, const int32_t *labels, int B,
                        int V);
/* dlogp [B,V]: dlogp[b, labels[b]] += -dloss / B. */
int dt_nll_loss_backward(float *dlogp, const int32_t *labels, int B, int V, float dloss);
/* Fused: logp [B,V] = log_softmax(logits); *loss = nll(logp, labels). */
int dt_cross_entropy_forward(float *loss, float *logp, const float *logits,
                             const int32_t *labels, int B, int V);
/* dlogits [B,V] += dloss/B * (exp(logp) - onehot(labels)). */
int dt_cross_entropy_backward(float *dlogits, const float *logp, const int32_t *labels,
                              int B, int V, float dloss);

#ifdef __cplusplus
}
#endif
#endif
