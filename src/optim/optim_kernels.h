/* src/optim/optim_kernels.h - internal: the optimizer's element-wise kernels
 * on device memory (the host's are in optim.c and grad.c), as one table per
 * backend: cuda/optim_cuda.cu is the one entry today; a new device backend
 * is one folder and one entry in dt_optim_kernels_for (optim_device.c).
 *
 * Every kernel computes EXACTLY the host arithmetic of optim.c (the same
 * float32 operations in the same order per element, no contraction into
 * fused multiply-adds: the CUDA file is built with --fmad=false), so a
 * device step gives the host step's bits; optim_math.h holds that
 * arithmetic once, for both. Pointers are device memory of the current
 * device; each call is enqueued on `stream` (a cudaStream_t, NULL: the
 * default stream) and returns DT_OK or a negative dt_status naming the
 * kernel and the launch error. */
#ifndef DT_OPTIM_KERNELS_H
#define DT_OPTIM_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_optim_kernels {
    const char *name; /* "cuda" */
    /* Adam / AdamW over n elements: p, m, v updated in place from g, with the
     * coefficients optim.c's step_piece computes (decay: AdamW's 1 - lr*wd,
     * 1 for Adam; l2: Adam's weight decay, 0 for AdamW; c1 = 1 - b1, c2 = 1 -
     * b2; bc2_sqrt = sqrt(1 - b2^t); neg_step = -lr / (1 - b1^t)), per
     * element dt_adam_update (optim_math.h). */
    int (*adam)(void *stream, float *p, const float *g, float *m, float *v, size_t n, float decay, float l2,
                float b1, float c1, float b2, float c2, float bc2_sqrt, float eps, float neg_step);
    /* SGD: momentum == 0: buf unused (may be NULL); first != 0: the first step
     * with momentum (buf = d); per element dt_sgd_update (optim_math.h). */
    int (*sgd)(void *stream, float *p, const float *g, float *buf, size_t n, float lr, float wd, float mom,
               int nesterov, int first);
    /* *out (host) = sum of g[i]^2 over [0, n) accumulated in double, in an
     * order that depends only on n (the same bits run to run); waits for the
     * result. */
    int (*sqnorm)(void *stream, const float *g, size_t n, double *out);
    /* g[i] *= s */
    int (*scale)(void *stream, float *g, size_t n, float s);
    /* g[i] += src[i] (one float add per element: the host loop's bits);
     * src may be g itself, or lie apart from it */
    int (*add)(void *stream, float *g, const float *src, size_t n);
    /* dst[i] (bf16 bits) = src[i] rounded to nearest even (core/bf16.h's
     * dt_bf16_round: the host's bits) */
    int (*to_bf16)(void *stream, uint16_t *dst, const float *src, size_t n);
} dt_optim_kernels;

/* The kernels for device memory of this build (NULL with DT_ERR_UNSUPPORTED
 * and the reason in a build without CUDA). */
const dt_optim_kernels *dt_optim_kernels_device(void);
#ifdef DTRAIN_HAVE_CUDA
extern const dt_optim_kernels dt_optim_kernels_cuda;
#endif

#ifdef __cplusplus
}
#endif
#endif
