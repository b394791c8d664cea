/* src/nn/cuda/cuda_encoder.cu - the token + position embedding, forward and
 * a deterministic backward.
 *
 * Forward (dtk_encoder_fwd_*): out[n,:] = wte[tok[n],:] + wpe[t,:]; a block
 * per row (grid-stride over the N rows, up to 8 blocks per SM), a thread per
 * 16-byte pack of the row (element by element when C is not a multiple of
 * the pack or a pointer is not aligned).
 *
 * Backward: the tokens' positions are bucketed on the host (a counting sort
 * of tok_host: positions in increasing order within each token) and
 * uploaded as one index; then
 *  - dtk_encoder_bwd_wte_*: one block per distinct token, its threads over
 *    the channels; each channel adds its token's rows in position order
 *    onto dwte (x = dwte; x += dout[p0]; x += dout[p1]; ...);
 *  - dtk_encoder_bwd_wpe_*: one block per position t, threads over the
 *    channels; x = dwpe[t]; x += dout[b,t] for b = 0..B-1.
 * Both are the CPU kernel's order of additions (gpt_encoder_backward walks
 * (b, t) in order): f32 gives its bits, and every run the same. */
#include <stdlib.h>
#include <string.h>
#include "nn/cuda/cuda_common.cuh"

#define ENC_THREADS 256

/* out [B*T, C] (act) = wte [V, C] (act) at tok [B*T] (int32) + wpe [>=T, C] (act) */
template <typename T>
__device__ void enc_fwd(T *__restrict__ out, const int32_t *__restrict__ tok, const T *__restrict__ wte,
                        const T *__restrict__ wpe, int B, int T_, int C) {
    constexpr int P = pack16<T>::n;
    const int N = B * T_;
    const bool vec = C % P == 0 && aligned16(out) && aligned16(wte) && aligned16(wpe);
    const int w = vec ? P : 1;
    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        const int t = n % T_;
        const T *we = wte + (size_t)tok[n] * (size_t)C, *pe = wpe + (size_t)t * (size_t)C;
        T *o = out + (size_t)n * (size_t)C;
        for (int c = threadIdx.x * w; c < C; c += blockDim.x * w) {
            if (vec) {
                pack16<T> a = ld16(we + c), b = ld16(pe + c), y;
#pragma unroll
                for (int k = 0; k < P; k++) y.v[k] = stf<T>(ldf(a.v[k]) + ldf(b.v[k]));
                st16(o + c, y);
            } else {
                o[c] = stf<T>(ldf(we[c]) + ldf(pe[c]));
            }
        }
    }
}

/* dwte [V, C] (f32) += the rows of dout [B*T, C] (act) by token; idx
 * (int32): uniq[U] tokens, start[U+1] offsets into pos, pos[N] positions n
 * = b*T + t, grouped by token (increasing within a group) */
template <typename T>
__device__ void enc_bwd_wte(float *__restrict__ dwte, const T *__restrict__ dout, const int32_t *__restrict__ idx,
                            int U, int C) {
    const int u = blockIdx.x;
    if (u >= U) return;
    const int32_t *start = idx + U, *pos = idx + 2 * U + 1;
    const int p0 = start[u], p1 = start[u + 1];
    float *d = dwte + (size_t)idx[u] * (size_t)C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float x = d[c];
        for (int p = p0; p < p1; p++) x += ldf(dout[(size_t)pos[p] * (size_t)C + c]);
        d[c] = x;
    }
}

/* dwpe [>=T, C] (f32) += the sum over b of dout [B, T, C] (act) at t */
template <typename T>
__device__ void enc_bwd_wpe(float *__restrict__ dwpe, const T *__restrict__ dout, int B, int T_, int C) {
    const int t = blockIdx.x;
    if (t >= T_) return;
    float *d = dwpe + (size_t)t * (size_t)C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float x = d[c];
        for (int b = 0; b < B; b++) x += ldf(dout[((size_t)b * (size_t)T_ + (size_t)t) * (size_t)C + c]);
        d[c] = x;
    }
}

extern "C" __global__ void __launch_bounds__(ENC_THREADS)
    dtk_encoder_fwd_f32(float *out, const int32_t *tok, const float *wte, const float *wpe, int B, int T, int C) {
    enc_fwd(out, tok, wte, wpe, B, T, C);
}
extern "C" __global__ void __launch_bounds__(ENC_THREADS)
    dtk_encoder_fwd_bf16(bf16 *out, const int32_t *tok, const bf16 *wte, const bf16 *wpe, int B, int T, int C) {
    enc_fwd(out, tok, wte, wpe, B, T, C);
}
extern "C" __global__ void __launch_bounds__(ENC_THREADS)
    dtk_encoder_bwd_wte_f32(float *dwte, const float *dout, const int32_t *idx, int U, int C) {
    enc_bwd_wte(dwte, dout, idx, U, C);
}
extern "C" __global__ void __launch_bounds__(ENC_THREADS)
    dtk_encoder_bwd_wte_bf16(float *dwte, const bf16 *dout, const int32_t *idx, int U, int C) {
    enc_bwd_wte(dwte, dout, idx, U, C);
}
extern "C" __global__ void __launch_bounds__(ENC_THREADS)
    dtk_encoder_bwd_wpe_f32(float *dwpe, const float *dout, int B, int T, int C) {
    enc_bwd_wpe(dwpe, dout, B, T, C);
}
extern "C" __global__ void __launch_bounds__(ENC_THREADS)
    dtk_encoder_bwd_wpe_bf16(float *dwpe, const bf16 *dout, int B, int T, int C) {
    enc_bwd_wpe(dwpe, dout, B, T, C);
}

/* ---- launchers ------------------------------------------------------------------------------------ */

extern "C" int gpt_cuda_encoder_forward(gpt_be *be, void *out, const int32_t *tok, const void *wte, const void *wpe,
                                        int B, int T, int C) {
    const size_t N = (size_t)B * (size_t)T;
    if (N == 0 || C <= 0) return DT_OK;
    /* a block per row (grid-stride), a thread per pack of the row */
    const int P = be->prec == GPT_BF16 ? 8 : 4, per = (C + P - 1) / P;
    const int threads = per < ENC_THREADS ? (per + 31) / 32 * 32 : ENC_THREADS;
    const unsigned g = gpt_cuda_grid(be, N * (size_t)threads, threads);
    if (be->prec == GPT_BF16)
        return GPT_LAUNCH(dtk_encoder_fwd_bf16, g, threads, 0, be->stream, (bf16 *)out, tok, (const bf16 *)wte,
                          (const bf16 *)wpe, B, T, C);
    return GPT_LAUNCH(dtk_encoder_fwd_f32, g, threads, 0, be->stream, (float *)out, tok, (const float *)wte,
                      (const float *)wpe, B, T, C);
}

/* grow a host int32 buffer to n elements */
static int host_fit(int32_t **p, size_t *cap, size_t n) {
    if (*cap >= n) return DT_OK;
    int32_t *q = (int32_t *)realloc(*p, n * sizeof(int32_t));
    if (!q) return dt_error(DT_ERR_NOMEM, "encoder_backward", "%zu bytes of host memory (token index)",
                            n * sizeof(int32_t));
    *p = q;
    *cap = n;
    return DT_OK;
}

/* The index of tok_host[N] in be->enc_host: uniq[U], start[U+1], pos[N]
 * (counting sort by token, stable); returns U, or a negative status. */
static int bucket(gpt_be *be, const int32_t *tok, int N) {
    int32_t maxtok = 0;
    for (int n = 0; n < N; n++) maxtok = tok[n] > maxtok ? tok[n] : maxtok;
    int rc = host_fit(&be->enc_count, &be->enc_count_cap, (size_t)maxtok + 1);
    if (!rc) rc = host_fit(&be->enc_host, &be->enc_host_cap, 3 * (size_t)N + 1);
    if (rc) return rc;
    int32_t *cnt = be->enc_count;
    memset(cnt, 0, ((size_t)maxtok + 1) * sizeof(int32_t));
    for (int n = 0; n < N; n++) cnt[tok[n]]++;
    int U = 0;
    for (int32_t v = 0; v <= maxtok; v++) U += cnt[v] > 0;
    int32_t *uniq = be->enc_host, *start = uniq + U, *pos = start + U + 1;
    /* cnt[v] becomes token v's next slot in pos */
    int u = 0, at = 0;
    for (int32_t v = 0; v <= maxtok; v++) {
        if (!cnt[v]) continue;
        uniq[u] = v;
        start[u++] = at;
        int c = cnt[v];
        cnt[v] = at;
        at += c;
    }
    start[U] = at;
    for (int n = 0; n < N; n++) pos[cnt[tok[n]]++] = n;
    return U;
}

extern "C" int gpt_cuda_encoder_backward(gpt_be *be, float *dwte, float *dwpe, const void *dout, const int32_t *tok,
                                         const int32_t *tok_host, int B, int T, int C) {
    (void)tok; /* the host copy is indexed */
    const int N = B * T;
    if (N <= 0 || C <= 0) return DT_OK;
    const int U = bucket(be, tok_host, N);
    if (U < 0) return U;
    const size_t len = 2 * (size_t)U + 1 + (size_t)N;
    if (be->enc_dev_cap < len) { /* grows with B*T: only when a batch is larger than any before */
        if (be->enc_dev) {
            GPT_CU(cudaStreamSynchronize(be->stream), "cudaStreamSynchronize");
            cudaFree(be->enc_dev);
            be->enc_dev = NULL;
            be->enc_dev_cap = 0;
        }
        const size_t cap = 3 * (size_t)N + 1;
        cudaError_t e = cudaMalloc((void **)&be->enc_dev, cap * sizeof(int32_t));
        if (e != cudaSuccess) {
            be->enc_dev = NULL;
            cudaGetLastError();
            return dt_error(e == cudaErrorMemoryAllocation ? DT_ERR_NOMEM : DT_ERR_BACKEND, "cudaMalloc",
                            "encoder_backward: the token index, %zu bytes: %s", cap * sizeof(int32_t),
                            cudaGetErrorString(e));
        }
        be->enc_dev_cap = cap;
    }
    /* pageable source: staged before the call returns, so enc_host may be
     * rewritten by the next call */
    GPT_CU(cudaMemcpyAsync(be->enc_dev, be->enc_host, len * sizeof(int32_t), cudaMemcpyHostToDevice, be->stream),
           "cudaMemcpyAsync (encoder_backward: token index)");
    const int threads = C < ENC_THREADS ? (C + 31) / 32 * 32 : ENC_THREADS;
    int rc;
    if (be->prec == GPT_BF16) {
        rc = GPT_LAUNCH(dtk_encoder_bwd_wte_bf16, (unsigned)U, threads, 0, be->stream, dwte, (const bf16 *)dout,
                        be->enc_dev, U, C);
        if (!rc)
            rc = GPT_LAUNCH(dtk_encoder_bwd_wpe_bf16, (unsigned)T, threads, 0, be->stream, dwpe, (const bf16 *)dout,
                            B, T, C);
    } else {
        rc = GPT_LAUNCH(dtk_encoder_bwd_wte_f32, (unsigned)U, threads, 0, be->stream, dwte, (const float *)dout,
                        be->enc_dev, U, C);
        if (!rc)
            rc = GPT_LAUNCH(dtk_encoder_bwd_wpe_f32, (unsigned)T, threads, 0, be->stream, dwpe, (const float *)dout,
                            B, T, C);
    }
    return rc;
}
