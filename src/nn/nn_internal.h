/* src/nn/nn_internal.h - internal helpers shared by the nn kernels. */
#ifndef DT_NN_INTERNAL_H
#define DT_NN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include "dtrain/nn.h"

/* Applies the default BLAS thread count (1) once per process unless
 * dt_set_num_threads() was called first. Thread-safe. */
void dt_nn_blas_init(void);

/* Sum of x[0..n) in double, with independent partial sums (vectorisable). */
double dt_nn_sum_f64(const float *x, size_t n);
/* Sum of (x[i]-c)^2 in double. */
double dt_nn_sumsq_centered_f64(const float *x, size_t n, double c);
/* Sum of a[i]*b[i] in double. */
double dt_nn_dot_f64(const float *a, const float *b, size_t n);
/* One pass: *sum = sum g[i], *dot = sum g[i]*(x[i]-c), in double. */
void dt_nn_sum_and_dot_centered_f64(const float *g, const float *x, size_t n, double c,
                                    double *sum, double *dot);

/* Backward kernels with an input-gradient mode: acc != 0 accumulates into
 * dinp (the public contract, what the public functions do), acc == 0
 * OVERWRITES dinp, which then need not be initialised (the model uses it to
 * skip zeroing activation gradients). Parameter gradients always
 * accumulate. Arguments are checked as by the public functions. */
int dt_nn_linear_backward_ex(float *dinp, float *dweight, float *dbias, const float *dout,
                             const float *inp, const float *weight, int B, int C, int OC,
                             int acc);
int dt_nn_conv2d_backward_ex(float *dinp, float *dweight, float *dbias, float *work,
                             const float *dout, const float *inp, const float *weight, int B,
                             const dt_conv2d_desc *d, int acc);
int dt_nn_batchnorm_backward_ex(float *dinp, float *dweight, float *dbias, float *work,
                                const float *dout, const float *inp, const float *weight,
                                const float *save_mean, const float *save_rstd, int B, int C,
                                int S, int train, dt_sum_fn sync, void *sync_ctx, int acc);
int dt_nn_relu_backward_ex(float *dinp, const float *dout, const float *out, size_t n,
                           int acc);
int dt_nn_gelu_backward_ex(float *dinp, const float *dout, const float *inp, size_t n,
                           int acc);
int dt_nn_sigmoid_backward_ex(float *dinp, const float *dout, const float *out, size_t n,
                              int acc);
int dt_nn_tanh_backward_ex(float *dinp, const float *dout, const float *out, size_t n,
                           int acc);
int dt_nn_avgpool2d_backward_ex(float *dinp, const float *dout, int B, const dt_pool2d_desc *d,
                                int acc);
int dt_nn_maxpool2d_backward_ex(float *dinp, const float *dout, const int32_t *argmax, int B,
                                const dt_pool2d_desc *d, int acc);
int dt_nn_dropout_backward_ex(float *dinp, const float *dout, const float *mask, size_t n,
                              int acc);
/* dinp (+)= dout (flatten, inactive dropout) */
int dt_nn_identity_backward_ex(float *dinp, const float *dout, size_t n, int acc);

/* exp for float, vectorisable (no library call, no branches on the data):
 * Cody-Waite range reduction and the classic Cephes degree-7 polynomial;
 * a few ulp at most (tests/nn checks it against double exp). Returns +inf
 * above 88.72, 0 below -87.33 (results under FLT_MIN flush to 0), NaN for
 * NaN. */
static inline float dt_nn_expf(float x) {
    /* hi/lo keep every intermediate finite and normal (no overflow or
     * underflow even on the clamped path, which the compiler may fold) */
    const float hi = 88.72f, lo = -87.33f;
    /* clamp; a NaN x fails both tests and becomes hi, so that nothing below
     * converts a NaN to int (the NaN is restored at the end) */
    float xc = x < hi ? x : hi;
    xc = xc > lo ? xc : lo;
    /* k = round(x / ln2) by the 1.5*2^23 trick (round-to-nearest mode; no
     * library call, no branch, exact for |k| < 2^22) */
    const float log2e = 1.44269504088896341f, shifter = 12582912.0f;
    const float ln2_hi = 0.693145751953125f, ln2_lo = 1.428606765330187045e-06f;
    float kf = (xc * log2e + shifter) - shifter;
    float r = xc - kf * ln2_hi;
    r = r - kf * ln2_lo;
    /* exp(r) for |r| <= ln2/2 (Cephes expf polynomial) */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* scale by 2^k in two steps, so that k in [-150, 128] stays representable */
    int32_t k = (int32_t)kf;
    int32_t k1 = k >> 1, k2 = k - k1;
    uint32_t b1 = (uint32_t)(k1 + 127) << 23, b2 = (uint32_t)(k2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    float y = p * s1 * s2;
    y = x > hi ? INFINITY : y;
    y = x < lo ? 0.0f : y;
    return x != x ? x : y;
}

#endif
