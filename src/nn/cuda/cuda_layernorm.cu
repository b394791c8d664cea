/* src/nn/cuda/cuda_layernorm.cu - LayerNorm forward and backward (eps
 * 1e-5, biased variance, statistics in f32: the CPU kernels' formulas,
 * gpt_kernels.c).
 *
 * Geometry: one warp per row, LN_WARPS rows per 256-thread block,
 * ceil(N / LN_WARPS) blocks. A lane walks its row in 16-byte packs when
 * C is a multiple of the pack and every pointer is 16-byte aligned (else
 * element by element); the row's sums are warp reductions (the same order
 * every run). The backward's weight and bias gradients are deterministic
 * column sums (dtk_lnparams_*, cuda_reduce.cu). */
#include "nn/cuda/cuda_common.cuh"

#define LN_WARPS 8
#define LN_EPS 1e-5f

/* out [N,C] (act) = (inp - mean) * rstd * weight + bias; mean, rstd [N] (f32,
 * written); inp [N,C] (act); weight, bias [C] (act) */
template <typename T>
__device__ void ln_fwd(T *__restrict__ out, float *__restrict__ mean, float *__restrict__ rstd,
                       const T *__restrict__ inp, const T *__restrict__ weight, const T *__restrict__ bias, int N,
                       int C) {
    const int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;
    constexpr int P = pack16<T>::n;
    const T *x = inp + (size_t)row * (size_t)C;
    T *o = out + (size_t)row * (size_t)C;
    const bool vec = C % P == 0 && aligned16(inp) && aligned16(out) && aligned16(weight) && aligned16(bias);
    const float invC = 1.0f / (float)C;
    float s = 0.0f;
    if (vec) {
        for (int i = lane * P; i < C; i += 32 * P) {
            pack16<T> a = ld16(x + i);
#pragma unroll
            for (int k = 0; k < P; k++) s += ldf(a.v[k]);
        }
    } else {
        for (int i = lane; i < C; i += 32) s += ldf(x[i]);
    }
    const float m = warp_sum(s) * invC;
    float q = 0.0f;
    if (vec) {
        for (int i = lane * P; i < C; i += 32 * P) {
            pack16<T> a = ld16(x + i);
#pragma unroll
            for (int k = 0; k < P; k++) {
                float d = ldf(a.v[k]) - m;
                q += d * d;
            }
        }
    } else {
        for (int i = lane; i < C; i += 32) {
            float d = ldf(x[i]) - m;
            q += d * d;
        }
    }
    const float r = 1.0f / sqrtf(warp_sum(q) * invC + LN_EPS);
    if (vec) {
        for (int i = lane * P; i < C; i += 32 * P) {
            pack16<T> a = ld16(x + i), w = ld16(weight + i), b = ld16(bias + i), y;
#pragma unroll
            for (int k = 0; k < P; k++) y.v[k] = stf<T>((ldf(a.v[k]) - m) * r * ldf(w.v[k]) + ldf(b.v[k]));
            st16(o + i, y);
        }
    } else {
        for (int i = lane; i < C; i += 32) o[i] = stf<T>((ldf(x[i]) - m) * r * ldf(weight[i]) + ldf(bias[i]));
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

/* dinp [N,C] (act) += (w dy - mean(w dy) - nrm mean(w dy nrm)) rstd, nrm =
 * (inp - mean) rstd: the input gradient (the parameters' are
 * dtk_lnparams_*); dout, inp [N,C] (act); weight [C] (act); mean, rstd [N]
 * (f32) of the forward */
template <typename T>
__device__ void ln_bwd(T *dinp, const T *__restrict__ dout, const T *__restrict__ inp, const T *__restrict__ weight,
                       const float *__restrict__ mean, const float *__restrict__ rstd, int N, int C) {
    const int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;
    constexpr int P = pack16<T>::n;
    const size_t off = (size_t)row * (size_t)C;
    const T *dy = dout + off, *x = inp + off;
    T *dx = dinp + off;
    const bool vec = C % P == 0 && aligned16(dinp) && aligned16(dout) && aligned16(inp) && aligned16(weight);
    const float m = mean[row], r = rstd[row], invC = 1.0f / (float)C;
    float a1 = 0.0f, a2 = 0.0f;
    if (vec) {
        for (int i = lane * P; i < C; i += 32 * P) {
            pack16<T> d = ld16(dy + i), a = ld16(x + i), w = ld16(weight + i);
#pragma unroll
            for (int k = 0; k < P; k++) {
                float dn = ldf(w.v[k]) * ldf(d.v[k]);
                a1 += dn;
                a2 += dn * ((ldf(a.v[k]) - m) * r);
            }
        }
    } else {
        for (int i = lane; i < C; i += 32) {
            float dn = ldf(weight[i]) * ldf(dy[i]);
            a1 += dn;
            a2 += dn * ((ldf(x[i]) - m) * r);
        }
    }
    const float dmean = warp_sum(a1) * invC, dnmean = warp_sum(a2) * invC;
    if (vec) {
        for (int i = lane * P; i < C; i += 32 * P) {
            pack16<T> d = ld16(dy + i), a = ld16(x + i), w = ld16(weight + i), g = ld16_rw(dx + i);
#pragma unroll
            for (int k = 0; k < P; k++) {
                float nrm = (ldf(a.v[k]) - m) * r, dn = ldf(w.v[k]) * ldf(d.v[k]);
                g.v[k] = stf<T>(ldf(g.v[k]) + (dn - dmean - nrm * dnmean) * r);
            }
            st16(dx + i, g);
        }
    } else {
        for (int i = lane; i < C; i += 32) {
            float nrm = (ldf(x[i]) - m) * r, dn = ldf(weight[i]) * ldf(dy[i]);
            dx[i] = stf<T>(ldf(dx[i]) + (dn - dmean - nrm * dnmean) * r);
        }
    }
}

extern "C" __global__ void __launch_bounds__(LN_WARPS * 32)
    dtk_layernorm_fwd_f32(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                          const float *bias, int N, int C) {
    ln_fwd(out, mean, rstd, inp, weight, bias, N, C);
}
extern "C" __global__ void __launch_bounds__(LN_WARPS * 32)
    dtk_layernorm_fwd_bf16(bf16 *out, float *mean, float *rstd, const bf16 *inp, const bf16 *weight,
                           const bf16 *bias, int N, int C) {
    ln_fwd(out, mean, rstd, inp, weight, bias, N, C);
}
extern "C" __global__ void __launch_bounds__(LN_WARPS * 32)
    dtk_layernorm_bwd_f32(float *dinp, const float *dout, const float *inp, const float *weight, const float *mean,
                          const float *rstd, int N, int C) {
    ln_bwd(dinp, dout, inp, weight, mean, rstd, N, C);
}
extern "C" __global__ void __launch_bounds__(LN_WARPS * 32)
    dtk_layernorm_bwd_bf16(bf16 *dinp, const bf16 *dout, const bf16 *inp, const bf16 *weight, const float *mean,
                           const float *rstd, int N, int C) {
    ln_bwd(dinp, dout, inp, weight, mean, rstd, N, C);
}

/* ---- launchers -------------------------------------------------------------------------------- */

extern "C" int gpt_cuda_layernorm_forward(gpt_be *be, void *out, float *mean, float *rstd, const void *inp,
                                          const void *weight, const void *bias, int N, int C) {
    if (N <= 0) return DT_OK;
    const unsigned g = (unsigned)((N + LN_WARPS - 1) / LN_WARPS);
    if (be->prec == GPT_BF16)
        return GPT_LAUNCH(dtk_layernorm_fwd_bf16, g, LN_WARPS * 32, 0, be->stream, (bf16 *)out, mean, rstd,
                          (const bf16 *)inp, (const bf16 *)weight, (const bf16 *)bias, N, C);
    return GPT_LAUNCH(dtk_layernorm_fwd_f32, g, LN_WARPS * 32, 0, be->stream, (float *)out, mean, rstd,
                      (const float *)inp, (const float *)weight, (const float *)bias, N, C);
}

extern "C" int gpt_cuda_layernorm_backward(gpt_be *be, void *dinp, float *dweight, float *dbias, const void *dout,
                                           const void *inp, const void *weight, const float *mean,
                                           const float *rstd, int N, int C) {
    if (N <= 0) return DT_OK;
    const unsigned g = (unsigned)((N + LN_WARPS - 1) / LN_WARPS);
    int rc;
    if (be->prec == GPT_BF16)
        rc = GPT_LAUNCH(dtk_layernorm_bwd_bf16, g, LN_WARPS * 32, 0, be->stream, (bf16 *)dinp, (const bf16 *)dout,
                        (const bf16 *)inp, (const bf16 *)weight, mean, rstd, N, C);
    else
        rc = GPT_LAUNCH(dtk_layernorm_bwd_f32, g, LN_WARPS * 32, 0, be->stream, (float *)dinp, (const float *)dout,
                        (const float *)inp, (const float *)weight, mean, rstd, N, C);
    if (rc) return rc;
    return gpt_cuda_colsum(be, dweight, dbias, dout, C, inp, mean, rstd, N, C);
}
