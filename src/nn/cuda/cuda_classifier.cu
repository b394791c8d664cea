/* src/nn/cuda/cuda_classifier.cu - softmax cross-entropy over the
 * vocabulary: the forward's log-sum-exp, target logit and hit per row, and
 * the backward's (softmax - onehot) * dscale. Rows have stride ldl >= V
 * (cuda pads to a multiple of 128); the padding columns are never read
 * nor written.
 *
 * Geometry: one block of CE_THREADS threads per row (grid-stride over the
 * rows, min(N, 65535) blocks); a thread walks its columns in 16-byte packs
 * when ldl is a multiple of the pack and the logits are aligned (the last
 * V % P columns one by one), else one by one.
 * Forward: each thread keeps an online softmax pair (gpt_math.h) and its
 * first maximum (value, column); warps, then the block's warps in order,
 * merge them (the earlier column wins a tie). */
#include "nn/cuda/cuda_common.cuh"

#define CE_THREADS 512
#define CE_MAX_BLOCKS 65535

/* (value, column) of a first maximum: b replaces a when larger, or equal
 * and earlier */
__device__ __forceinline__ void argmax_merge(float &av, int &ai, float bv, int bi) {
    if (bv > av || (bv == av && bi < ai)) av = bv, ai = bi;
}

/* lse [N] (f32) = log-sum-exp of each row of logits [N, ldl] (act, columns
 * < V); with targets [N] (int32): tlogit [N] (f32) = the target's logit,
 * hit [N] (int32) = the first maximum is at the target (either may be NULL) */
template <typename T>
__device__ void ce_fwd(float *lse, float *tlogit, int32_t *hit, const T *logits, const int32_t *targets, int N,
                       int V, int ldl) {
    constexpr int P = pack16<T>::n;
    __shared__ float sh_m[CE_THREADS / 32], sh_s[CE_THREADS / 32], sh_bv[CE_THREADS / 32];
    __shared__ int sh_bi[CE_THREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const bool vec = ldl % P == 0 && aligned16(logits);
    const int vend = vec ? V / P * P : 0;
    for (int row = blockIdx.x; row < N; row += gridDim.x) {
        const T *x = logits + (size_t)row * (size_t)ldl;
        dt_softmax_acc a = dt_softmax_empty();
        float bv = -INFINITY;
        int bi = 0x7fffffff;
        for (int i = threadIdx.x * P; i < vend; i += blockDim.x * P) {
            pack16<T> p = ld16(x + i);
#pragma unroll
            for (int k = 0; k < P; k++) {
                const float v = ldf(p.v[k]);
                a = dt_softmax_push(a, v);
                if (v > bv) bv = v, bi = i + k;
            }
        }
        for (int i = vend + threadIdx.x; i < V; i += blockDim.x) {
            const float v = ldf(x[i]);
            a = dt_softmax_push(a, v);
            if (v > bv) bv = v, bi = i;
        }
        a = warp_softmax(a);
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            argmax_merge(bv, bi, ov, oi);
        }
        if (lane == 0) sh_m[warp] = a.m, sh_s[warp] = a.s, sh_bv[warp] = bv, sh_bi[warp] = bi;
        __syncthreads();
        if (threadIdx.x == 0) {
            a = dt_softmax_empty();
            bv = -INFINITY, bi = 0x7fffffff;
            for (int w = 0; w < nw; w++) {
                dt_softmax_acc b;
                b.m = sh_m[w], b.s = sh_s[w];
                a = dt_softmax_merge(a, b);
                argmax_merge(bv, bi, sh_bv[w], sh_bi[w]);
            }
            lse[row] = dt_softmax_lse(a);
            if (targets) {
                const int tg = targets[row];
                if (tlogit) tlogit[row] = ldf(x[tg]);
                if (hit) hit[row] = bi == tg;
            }
        }
        __syncthreads(); /* the shared slots are reused by the next row */
    }
}

/* dlogits [N, ldl] (act, columns < V) = exp(logits [N, ldl] (act) - lse [N]
 * (f32)) * dscale, minus dscale at the target (targets [N], int32); dlogits
 * may equal logits (each element read, then written, by
 * one thread: plain loads) */
template <typename T>
__device__ void ce_bwd(T *dlogits, const T *logits, const float *lse, const int32_t *targets, int N, int V, int ldl,
                       float dscale) {
    constexpr int P = pack16<T>::n;
    const bool vec = ldl % P == 0 && aligned16(logits) && aligned16(dlogits);
    const int vend = vec ? V / P * P : 0;
    for (int row = blockIdx.x; row < N; row += gridDim.x) {
        const T *x = logits + (size_t)row * (size_t)ldl;
        T *d = dlogits + (size_t)row * (size_t)ldl;
        const float l = lse[row];
        const int tg = targets[row];
        for (int i = threadIdx.x * P; i < vend; i += blockDim.x * P) {
            pack16<T> p = ld16_rw(x + i), y;
#pragma unroll
            for (int k = 0; k < P; k++) {
                float g = expf(ldf(p.v[k]) - l) * dscale;
                if (i + k == tg) g -= dscale;
                y.v[k] = stf<T>(g);
            }
            st16(d + i, y);
        }
        for (int i = vend + threadIdx.x; i < V; i += blockDim.x) {
            float g = expf(ldf(x[i]) - l) * dscale;
            if (i == tg) g -= dscale;
            d[i] = stf<T>(g);
        }
    }
}

extern "C" __global__ void __launch_bounds__(CE_THREADS)
    dtk_crossentropy_fwd_f32(float *lse, float *tlogit, int32_t *hit, const float *logits, const int32_t *targets,
                             int N, int V, int ldl) {
    ce_fwd(lse, tlogit, hit, logits, targets, N, V, ldl);
}
extern "C" __global__ void __launch_bounds__(CE_THREADS)
    dtk_crossentropy_fwd_bf16(float *lse, float *tlogit, int32_t *hit, const bf16 *logits, const int32_t *targets,
                              int N, int V, int ldl) {
    ce_fwd(lse, tlogit, hit, logits, targets, N, V, ldl);
}
extern "C" __global__ void __launch_bounds__(CE_THREADS)
    dtk_crossentropy_bwd_f32(float *dlogits, const float *logits, const float *lse, const int32_t *targets, int N,
                             int V, int ldl, float dscale) {
    ce_bwd(dlogits, logits, lse, targets, N, V, ldl, dscale);
}
extern "C" __global__ void __launch_bounds__(CE_THREADS)
    dtk_crossentropy_bwd_bf16(bf16 *dlogits, const bf16 *logits, const float *lse, const int32_t *targets, int N,
                              int V, int ldl, float dscale) {
    ce_bwd(dlogits, logits, lse, targets, N, V, ldl, dscale);
}

/* ---- launchers -------------------------------------------------------------------------------- */

extern "C" int gpt_cuda_crossentropy_forward(gpt_be *be, float *lse, float *tlogit, int32_t *hit,
                                             const void *logits, const int32_t *targets, int N, int V, int ldl) {
    if (N <= 0) return DT_OK;
    const unsigned g = (unsigned)(N < CE_MAX_BLOCKS ? N : CE_MAX_BLOCKS);
    if (be->prec == GPT_BF16)
        return GPT_LAUNCH(dtk_crossentropy_fwd_bf16, g, CE_THREADS, 0, be->stream, lse, tlogit, hit,
                          (const bf16 *)logits, targets, N, V, ldl);
    return GPT_LAUNCH(dtk_crossentropy_fwd_f32, g, CE_THREADS, 0, be->stream, lse, tlogit, hit,
                      (const float *)logits, targets, N, V, ldl);
}

extern "C" int gpt_cuda_crossentropy_backward(gpt_be *be, void *dlogits, const void *logits, const float *lse,
                                              const int32_t *targets, int N, int V, int ldl, float dscale) {
    if (N <= 0) return DT_OK;
    const unsigned g = (unsigned)(N < CE_MAX_BLOCKS ? N : CE_MAX_BLOCKS);
    if (be->prec == GPT_BF16)
        return GPT_LAUNCH(dtk_crossentropy_bwd_bf16, g, CE_THREADS, 0, be->stream, (bf16 *)dlogits,
                          (const bf16 *)logits, lse, targets, N, V, ldl, dscale);
    return GPT_LAUNCH(dtk_crossentropy_bwd_f32, g, CE_THREADS, 0, be->stream, (float *)dlogits,
                      (const float *)logits, lse, targets, N, V, ldl, dscale);
}
