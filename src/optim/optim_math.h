/* src/optim/optim_math.h - internal: the optimizers' per-element arithmetic,
 * once, for the host (C) and the device (CUDA) kernels: every expression is
 * optim.c's, in its order, so that a device step built without fused
 * multiply-adds (--fmad=false) gives the host's bits. tests/optim checks
 * these functions against dt_optim_step on the host. */
#ifndef DT_OPTIM_MATH_H
#define DT_OPTIM_MATH_H

#include <math.h>

#if defined(__CUDACC__)
#define DT_HD __host__ __device__ __forceinline__
#else
#define DT_HD static inline
#endif

/* Adam / AdamW, one element (see dt_optim_kernels.adam for the
 * coefficients): p, m, v in place. */
DT_HD void dt_adam_update(float *p, float g, float *m, float *v, float decay, float l2, float b1, float c1,
                          float b2, float c2, float bc2_sqrt, float eps, float neg_step) {
    float pi = *p * decay;
    float gi = l2 != 0.0f ? g + l2 * pi : g;
    float mi = *m * b1 + c1 * gi;
    float vi = *v * b2 + c2 * gi * gi;
    float denom = sqrtf(vi) / bc2_sqrt + eps;
    *m = mi;
    *v = vi;
    *p = pi + neg_step * mi / denom;
}

/* SGD, one element: momentum 0 (buf unused), the first step with momentum
 * (first != 0: buf = d), or the later ones. */
DT_HD void dt_sgd_update(float *p, float g, float *buf, float lr, float wd, float mom, int nesterov, int first) {
    float d = wd != 0.0f ? g + wd * *p : g;
    float u = d;
    if (mom != 0.0f) {
        float b = first ? d : *buf * mom + d;
        *buf = b;
        u = nesterov ? d + mom * b : b;
    }
    *p = *p + -lr * u;
}

#endif
