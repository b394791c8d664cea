/* src/nn/gpt_attention.c - causal multi-head self-attention, forward and
 * backward, and the one-query step of generation (conventions in
 * gpt_internal.h).
 *
 * Layout: for batch b and head h, q, k and v are [T,hs] matrices read in
 * place from qkv [B,T,3C] with leading dimension 3C (no transposed copies);
 * the head's output goes to columns [h*hs, (h+1)*hs) of out [B,T,C].
 * Causality by row blocks: the query rows [r0, r1) of one block only meet
 * keys [0, r1), so each block is two sgemm calls over that triangle-shaped
 * strip (scores = q k^T, then y = P v) instead of full T x T products: with
 * 64-row blocks at T = 256 that is 62% of the full work (the exact triangle
 * is 50%), at BLAS speed. The softmax of each row is fused: maximum,
 * exponentials and normalisation in three passes over the row in cache. */
#include <cblas.h>
#include <math.h>
#include <string.h>
#include "nn/gpt_internal.h"

/* Rows of one causal block (also the scratch rows of the backward). */
#define RB GPT_ATT_ROWS

/* softmax over row[0..t], row(t..end) = 0 */
static inline void softmax_causal_row(float *row, int t, int end) {
    float mx = gpt_row_max(row, t + 1);
    float s = gpt_row_exp_sum(row, row, t + 1, mx);
    float inv = 1.0f / s;
    for (int j = 0; j <= t; j++) row[j] *= inv;
    for (int j = t + 1; j < end; j++) row[j] = 0.0f;
}

GPT_SIMD void gpt_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
                           int NH) {
    const int hs = C / NH, ld3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * (size_t)T * (size_t)ld3 + (size_t)h * (size_t)hs;
            const float *k = q + C, *v = q + 2 * C;
            float *P = att + ((size_t)b * (size_t)NH + (size_t)h) * (size_t)T * (size_t)T;
            float *y = out + (size_t)b * (size_t)T * (size_t)C + (size_t)h * (size_t)hs;
            for (int r0 = 0; r0 < T; r0 += RB) {
                const int r1 = r0 + RB < T ? r0 + RB : T, m = r1 - r0;
                float *Pr = P + (size_t)r0 * (size_t)T;
                /* scores[r0:r1, 0:r1] = scale * q[r0:r1] @ k[0:r1]^T */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, r1, hs, scale,
                            q + (size_t)r0 * (size_t)ld3, ld3, k, ld3, 0.0f, Pr, T);
                for (int t = r0; t < r1; t++)
                    softmax_causal_row(P + (size_t)t * (size_t)T, t, r1);
                /* y[r0:r1] = P[r0:r1, 0:r1] @ v[0:r1] */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hs, r1, 1.0f, Pr, T, v,
                            ld3, 0.0f, y + (size_t)r0 * (size_t)C, C);
            }
        }
}

GPT_SIMD void gpt_attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                            const float *att, int B, int T, int C, int NH) {
    const int hs = C / NH, ld3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    const int last0 = ((T - 1) / RB) * RB; /* first row of the last block */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const size_t qoff = (size_t)b * (size_t)T * (size_t)ld3 + (size_t)h * (size_t)hs;
            const float *q = qkv + qoff, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + qoff, *dk = dq + C, *dv = dq + 2 * C;
            const float *P = att + ((size_t)b * (size_t)NH + (size_t)h) * (size_t)T * (size_t)T;
            const float *dy = dout + (size_t)b * (size_t)T * (size_t)C + (size_t)h * (size_t)hs;
            /* last block first: it covers every key row, so its dk/dv products
             * initialise them (beta 0) and the earlier blocks accumulate */
            for (int r0 = last0; r0 >= 0; r0 -= RB) {
                const int r1 = r0 + RB < T ? r0 + RB : T, m = r1 - r0;
                const float beta = r0 == last0 ? 0.0f : 1.0f;
                const float *Pr = P + (size_t)r0 * (size_t)T;
                const float *dyr = dy + (size_t)r0 * (size_t)C;
                /* dv[0:r1] (+)= P[r0:r1, 0:r1]^T @ dy[r0:r1] */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1, hs, m, 1.0f, Pr, T, dyr,
                            C, beta, dv, ld3);
                /* dP[0:m, 0:r1] = dy[r0:r1] @ v[0:r1]^T into the scratch rows */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, r1, hs, 1.0f, dyr, C, v,
                            ld3, 0.0f, scratch, T);
                /* softmax backward: dS = P * (dP - sum_j P dP), causal */
                for (int t = r0; t < r1; t++) {
                    const float *p = P + (size_t)t * (size_t)T;
                    float *d = scratch + (size_t)(t - r0) * (size_t)T;
                    float acc[GPT_LANES] = {0};
                    int j = 0;
                    for (; j + GPT_LANES <= t + 1; j += GPT_LANES)
                        for (int kk = 0; kk < GPT_LANES; kk++) acc[kk] += p[j + kk] * d[j + kk];
                    float sdot = 0.0f;
                    for (; j <= t; j++) sdot += p[j] * d[j];
                    for (int kk = 0; kk < GPT_LANES; kk++) sdot += acc[kk];
                    for (j = 0; j <= t; j++) d[j] = p[j] * (d[j] - sdot);
                    for (j = t + 1; j < r1; j++) d[j] = 0.0f;
                }
                /* dq[r0:r1] = scale * dS @ k[0:r1] */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hs, r1, scale, scratch,
                            T, k, ld3, 0.0f, dq + (size_t)r0 * (size_t)ld3, ld3);
                /* dk[0:r1] (+)= scale * dS^T @ q[r0:r1] */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1, hs, m, scale, scratch, T,
                            q + (size_t)r0 * (size_t)ld3, ld3, beta, dk, ld3);
            }
        }
}

GPT_SIMD void gpt_attention_step(float *out, float *scratch, const float *q, const float *kc,
                        const float *vc, int n, int C, int NH) {
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int h = 0; h < NH; h++) {
        const float *qh = q + (size_t)h * (size_t)hs;
        for (int j = 0; j < n; j++) {
            const float *kj = kc + (size_t)j * (size_t)C + (size_t)h * (size_t)hs;
            float s = 0.0f;
            for (int i = 0; i < hs; i++) s += qh[i] * kj[i];
            scratch[j] = s * scale;
        }
        softmax_causal_row(scratch, n - 1, n);
        float *o = out + (size_t)h * (size_t)hs;
        for (int i = 0; i < hs; i++) o[i] = 0.0f;
        for (int j = 0; j < n; j++) {
            const float *vj = vc + (size_t)j * (size_t)C + (size_t)h * (size_t)hs;
            const float p = scratch[j];
            for (int i = 0; i < hs; i++) o[i] += p * vj[i];
        }
    }
}
