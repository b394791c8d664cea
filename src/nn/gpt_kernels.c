/* src/nn/gpt_kernels.c - the gpt family's position-wise kernels: token +
 * position embedding, LayerNorm, linear layers (cblas_sgemm), tanh-GELU,
 * softmax cross-entropy. Conventions in gpt_internal.h.
 *
 * Reductions over a row use 16 independent partial sums so that the
 * compiler can keep them in vector registers without reassociating (the
 * build does not use -ffast-math); element-wise loops are branch-free (the
 * exp is dt_nn_expf), so they vectorise too. */
#include <cblas.h>
#include <math.h>
#include <string.h>
#include "nn/gpt_internal.h"
#include "nn/nn_internal.h"

/* ---- embeddings ----------------------------------------------------------------- */

GPT_SIMD void gpt_encoder_forward(float *out, const int32_t *tok, const float *wte, const float *wpe,
                         int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * (size_t)T + (size_t)t) * (size_t)C;
            const float *we = wte + (size_t)tok[(size_t)b * (size_t)T + (size_t)t] * (size_t)C;
            const float *pe = wpe + (size_t)t * (size_t)C;
            for (int i = 0; i < C; i++) o[i] = we[i] + pe[i];
        }
}

GPT_SIMD void gpt_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tok,
                          int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((size_t)b * (size_t)T + (size_t)t) * (size_t)C;
            float *dwe = dwte + (size_t)tok[(size_t)b * (size_t)T + (size_t)t] * (size_t)C;
            float *dpe = dwpe + (size_t)t * (size_t)C;
            for (int i = 0; i < C; i++) {
                dwe[i] += d[i];
                dpe[i] += d[i];
            }
        }
}

/* ---- LayerNorm -------------------------------------------------------------------- */

GPT_SIMD void gpt_layernorm_forward(float *restrict out, float *restrict mean,
                                    float *restrict rstd, const float *restrict inp,
                                    const float *restrict weight, const float *restrict bias,
                                    int N, int C) {
    const float eps = 1e-5f, invC = 1.0f / (float)C;
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * (size_t)C;
        float *o = out + (size_t)n * (size_t)C;
        float m = gpt_row_sum(x, C) * invC;
        float v = gpt_row_sumsq_centered(x, C, m) * invC;
        float s = 1.0f / sqrtf(v + eps);
        for (int i = 0; i < C; i++) o[i] = (x[i] - m) * s * weight[i] + bias[i];
        mean[n] = m;
        rstd[n] = s;
    }
}

GPT_SIMD void gpt_layernorm_backward(float *restrict dinp, float *restrict dweight,
                                     float *restrict dbias, const float *restrict dout,
                                     const float *restrict inp, const float *restrict weight,
                                     const float *restrict mean, const float *restrict rstd,
                                     int N, int C) {
    const float invC = 1.0f / (float)C;
    for (int n = 0; n < N; n++) {
        const float *dy = dout + (size_t)n * (size_t)C;
        const float *x = inp + (size_t)n * (size_t)C;
        float *dx = dinp + (size_t)n * (size_t)C;
        const float m = mean[n], s = rstd[n];
        /* two reductions: mean of dnorm and of dnorm * norm */
        float a1[GPT_LANES] = {0}, a2[GPT_LANES] = {0};
        int i = 0;
        for (; i + GPT_LANES <= C; i += GPT_LANES)
            for (int k = 0; k < GPT_LANES; k++) {
                float nrm = (x[i + k] - m) * s;
                float dn = weight[i + k] * dy[i + k];
                a1[k] += dn;
                a2[k] += dn * nrm;
            }
        float dmean = 0.0f, dnmean = 0.0f;
        for (; i < C; i++) {
            float nrm = (x[i] - m) * s;
            float dn = weight[i] * dy[i];
            dmean += dn;
            dnmean += dn * nrm;
        }
        for (int k = 0; k < GPT_LANES; k++) {
            dmean += a1[k];
            dnmean += a2[k];
        }
        dmean *= invC;
        dnmean *= invC;
        for (i = 0; i < C; i++) {
            float nrm = (x[i] - m) * s;
            float dn = weight[i] * dy[i];
            dbias[i] += dy[i];
            dweight[i] += nrm * dy[i];
            dx[i] += (dn - dmean - nrm * dnmean) * s;
        }
    }
}

/* ---- linear layers ------------------------------------------------------------------ */

GPT_SIMD void gpt_matmul_forward(float *out, const float *resid, const float *inp, const float *weight,
                        const float *bias, int N, int C, int OC) {
    /* prefill out with resid + bias, then out += inp @ weight^T in one sgemm */
    float beta = 1.0f;
    if (resid && bias) {
        for (int n = 0; n < N; n++) {
            float *o = out + (size_t)n * (size_t)OC;
            const float *r = resid + (size_t)n * (size_t)OC;
            for (int i = 0; i < OC; i++) o[i] = r[i] + bias[i];
        }
    } else if (resid) {
        if (resid != out) memcpy(out, resid, (size_t)N * (size_t)OC * sizeof(float));
    } else if (bias) {
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * (size_t)OC, bias, (size_t)OC * sizeof(float));
    } else {
        beta = 0.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C,
                beta, out, OC);
}

GPT_SIMD void gpt_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC) {
    if (dinp) /* dinp[N,C] = dout[N,OC] @ weight[OC,C] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight,
                    C, 0.0f, dinp, C);
    /* dweight[OC,C] += dout^T[OC,N] @ inp[N,C] */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f,
                dweight, C);
    if (dbias)
        for (int n = 0; n < N; n++) {
            const float *d = dout + (size_t)n * (size_t)OC;
            for (int o = 0; o < OC; o++) dbias[o] += d[o];
        }
}

/* ---- GELU (tanh approximation) ---------------------------------------------------------
 * 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3):
 * one exp and one division, no tanhf call, the same function. */

#define GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_K1 0.044715f

GPT_SIMD void gpt_gelu_forward(float *out, const float *inp, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_K0 * (x + GELU_K1 * x * x * x);
        out[i] = x / (1.0f + dt_nn_expf(-2.0f * u));
    }
}

GPT_SIMD void gpt_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_K0 * (x + GELU_K1 * x * x * x);
        float e = dt_nn_expf(-2.0f * u);
        float s = 1.0f / (1.0f + e); /* sigmoid(2u) = (1 + tanh u) / 2 */
        /* 1 - s without cancellation: e s while e < 1 (s near 1) */
        float s1 = e < 1.0f ? e * s : 1.0f - s;
        float du = GELU_K0 * (1.0f + 3.0f * GELU_K1 * x * x);
        /* d/dx [x s] = s + x * s (1 - s) * 2 du */
        dinp[i] = dout[i] * (s + 2.0f * x * s * s1 * du);
    }
}

/* ---- softmax cross-entropy ---------------------------------------------------------------- */

/* 1 if x's first maximum (value mx) is at t: x[t] == mx and no earlier x[i]
 * equals it (the scan runs only for rows that hit). */
static inline int row_first_max_at(const float *x, float mx, int t) {
    if (x[t] != mx) return 0;
    for (int i = 0; i < t; i++)
        if (x[i] == mx) return 0;
    return 1;
}

GPT_SIMD void gpt_crossentropy_forward(float *lse, float *tlogit, int32_t *hit, const float *logits,
                                       const int32_t *targets, int N, int V, int ldl) {
    for (int n = 0; n < N; n++) {
        const float *x = logits + (size_t)n * (size_t)ldl;
        float mx = gpt_row_max(x, V);
        /* sum of exp(x - max) without storing it */
        float acc[GPT_LANES] = {0};
        int i = 0;
        for (; i + GPT_LANES <= V; i += GPT_LANES)
            for (int k = 0; k < GPT_LANES; k++) acc[k] += dt_nn_expf(x[i + k] - mx);
        float s = 0.0f;
        for (; i < V; i++) s += dt_nn_expf(x[i] - mx);
        for (int k = 0; k < GPT_LANES; k++) s += acc[k];
        lse[n] = mx + logf(s);
        if (!targets) continue;
        tlogit[n] = x[targets[n]];
        hit[n] = row_first_max_at(x, mx, targets[n]);
    }
}

GPT_SIMD void gpt_crossentropy_backward(float *dlogits, const float *logits, const float *lse,
                                        const int32_t *targets, int N, int V, int ldl, float dscale) {
    for (int n = 0; n < N; n++) {
        const float *x = logits + (size_t)n * (size_t)ldl;
        float *d = dlogits + (size_t)n * (size_t)ldl;
        const float l = lse[n];
        for (int i = 0; i < V; i++) d[i] = dt_nn_expf(x[i] - l) * dscale;
        d[targets[n]] -= dscale;
    }
}

GPT_SIMD void gpt_log_softmax(float *logp, const float *logits, const float *lse, int N, int V, int ldl) {
    for (int n = 0; n < N; n++) {
        const float *x = logits + (size_t)n * (size_t)ldl;
        float *o = logp + (size_t)n * (size_t)V;
        for (int i = 0; i < V; i++) o[i] = x[i] - lse[n];
    }
}
