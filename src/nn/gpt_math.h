/* src/nn/gpt_math.h - internal: the gpt kernels' scalar arithmetic, once
 * for the host (C: tests, the fake GPU's twins) and the CUDA kernels
 * (src/nn/cuda/): the tanh-GELU and its derivative, and the online
 * softmax's (max, sum) pairs; with core/bf16.h's bfloat16 rounding. tests/nn's
 * test_gpt_math checks them against dtrain's CPU definitions.
 *
 * Compiled by a C compiler every function is static inline; by nvcc it is
 * __host__ __device__ (DT_HD, as in optim/optim_math.h). */
#ifndef DT_NN_GPT_MATH_H
#define DT_NN_GPT_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "core/bf16.h" /* DT_HD; bfloat16 rounding and widening (dt_bf16_round, dt_bf16_widen) */

/* ---- tanh-GELU --------------------------------------------------------------------
 * gelu(x) = 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3):
 * the CPU kernels' formulas (gpt_kernels.c) with the C library's (device:
 * CUDA's) expf in place of dt_nn_expf, so a result is within a few ulp of
 * gpt_gelu_forward's / gpt_gelu_backward's. */
#define DT_GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define DT_GELU_K1 0.044715f

DT_HD float dt_gelu_tanh(float x) {
    float u = DT_GELU_K0 * (x + DT_GELU_K1 * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
}

/* dout * gelu'(x) */
DT_HD float dt_gelu_tanh_grad(float x, float dout) {
    float u = DT_GELU_K0 * (x + DT_GELU_K1 * x * x * x);
    float e = expf(-2.0f * u);
    float s = 1.0f / (1.0f + e);          /* sigmoid(2u) */
    float s1 = e < 1.0f ? e * s : 1.0f - s; /* 1 - s without cancellation */
    float du = DT_GELU_K0 * (1.0f + 3.0f * DT_GELU_K1 * x * x);
    return dout * (s + 2.0f * x * s * s1 * du);
}

/* ---- online softmax ---------------------------------------------------------------
 * A row's log-sum-exp in one pass: a pair (m, s) stands for the values seen
 * so far as their maximum m and s = sum of exp(x - m). Pairs of disjoint
 * parts merge (in any grouping: the result changes only by rounding), so
 * threads, warps and blocks each keep one and combine them. The empty pair
 * is (-inf, 0); -inf values add nothing; a NaN value makes s NaN. */
typedef struct dt_softmax_acc {
    float m; /* maximum of the values seen (-inf: none) */
    float s; /* sum of exp(x - m) over them */
} dt_softmax_acc;

DT_HD dt_softmax_acc dt_softmax_empty(void) {
    dt_softmax_acc a;
    a.m = -INFINITY;
    a.s = 0.0f;
    return a;
}

/* a with the value x added */
DT_HD dt_softmax_acc dt_softmax_push(dt_softmax_acc a, float x) {
    if (x > a.m) {
        a.s = a.s * expf(a.m - x) + 1.0f; /* a.m = -inf: 0 * 0 + 1 */
        a.m = x;
    } else if (x != -INFINITY) {
        a.s += expf(x - a.m);
    }
    return a;
}

/* the pair of the union of a's and b's values. Symmetric to the bit
 * (merge(a, b) == merge(b, a), also where a compiler contracts into a fused
 * multiply-add): the pair with the larger maximum keeps its sum, the other's
 * is scaled and added; so the lanes of a warp that merge with each other
 * (butterfly shuffles) all end with the same pair. */
DT_HD dt_softmax_acc dt_softmax_merge(dt_softmax_acc a, dt_softmax_acc b) {
    if (b.m > a.m) {
        dt_softmax_acc t = a;
        a = b;
        b = t;
    }
    if (a.m == -INFINITY) return a; /* both empty */
    a.s = a.s + b.s * expf(b.m - a.m); /* b empty: + 0 * 0 */
    return a;
}

/* log(sum of exp(x)) over the values (-inf for none) */
DT_HD float dt_softmax_lse(dt_softmax_acc a) { return a.m + logf(a.s); }

#endif
