/* src/nn/cuda/cuda_elementwise.cu - element-wise kernels: tanh-GELU
 * forward and backward (gpt_math.h's arithmetic), the f32 -> bf16 cast of
 * the master parameters.
 *
 * Geometry: grid-stride loops (any grid covers the problem), 256 threads,
 * gpt_cuda_grid's blocks; 16-byte packs when every pointer is 16-byte
 * aligned, single elements otherwise and for the tail. */
#include "nn/cuda/cuda_common.cuh"

#define EW_THREADS 256

/* ---- GELU ------------------------------------------------------------------------------ */

/* out [n] (act) = gelu(inp [n] (act)); out may equal inp (each element is read, then
 * written, by one thread: plain loads, not the read-only path) */
template <typename T> __device__ void gelu_fwd(T *out, const T *inp, size_t n) {
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    constexpr int P = pack16<T>::n;
    const size_t nv = aligned16(out) && aligned16(inp) ? n / P : 0;
    for (size_t i = tid; i < nv; i += step) {
        pack16<T> x = ld16_rw(inp + i * P), y;
#pragma unroll
        for (int k = 0; k < P; k++) y.v[k] = stf<T>(dt_gelu_tanh(ldf(x.v[k])));
        st16(out + i * P, y);
    }
    for (size_t i = nv * P + tid; i < n; i += step) out[i] = stf<T>(dt_gelu_tanh(ldf(inp[i])));
}

/* dinp [n] (act) = gelu'(inp [n]) * dout [n] (act); dinp may equal dout */
template <typename T> __device__ void gelu_bwd(T *dinp, const T *inp, const T *dout, size_t n) {
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    constexpr int P = pack16<T>::n;
    const size_t nv = aligned16(dinp) && aligned16(inp) && aligned16(dout) ? n / P : 0;
    for (size_t i = tid; i < nv; i += step) {
        pack16<T> x = ld16(inp + i * P), d = ld16_rw(dout + i * P), y;
#pragma unroll
        for (int k = 0; k < P; k++) y.v[k] = stf<T>(dt_gelu_tanh_grad(ldf(x.v[k]), ldf(d.v[k])));
        st16(dinp + i * P, y);
    }
    for (size_t i = nv * P + tid; i < n; i += step) dinp[i] = stf<T>(dt_gelu_tanh_grad(ldf(inp[i]), ldf(dout[i])));
}

extern "C" __global__ void __launch_bounds__(EW_THREADS) dtk_gelu_fwd_f32(float *out, const float *inp, size_t n) {
    gelu_fwd(out, inp, n);
}
extern "C" __global__ void __launch_bounds__(EW_THREADS) dtk_gelu_fwd_bf16(bf16 *out, const bf16 *inp, size_t n) {
    gelu_fwd(out, inp, n);
}
extern "C" __global__ void __launch_bounds__(EW_THREADS) dtk_gelu_bwd_f32(float *dinp, const float *inp,
                                                                           const float *dout, size_t n) {
    gelu_bwd(dinp, inp, dout, n);
}
extern "C" __global__ void __launch_bounds__(EW_THREADS) dtk_gelu_bwd_bf16(bf16 *dinp, const bf16 *inp,
                                                                            const bf16 *dout, size_t n) {
    gelu_bwd(dinp, inp, dout, n);
}

/* ---- the cast of the master parameters ------------------------------------------------------ */

/* dst [n] (bf16) = src [n] (f32) rounded to nearest even */
extern "C" __global__ void __launch_bounds__(EW_THREADS) dtk_cast_f32_bf16(bf16 *dst, const float *src, size_t n) {
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    /* 8 floats (two 16-byte loads) -> 8 bf16 (one 16-byte store) */
    const size_t nv = aligned16(dst) && aligned16(src) ? n / 8 : 0;
    for (size_t i = tid; i < nv; i += step) {
        pack16<float> a = ld16(src + i * 8), b = ld16(src + i * 8 + 4);
        pack16<bf16> y;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            y.v[k] = dt_bf16_round(a.v[k]);
            y.v[k + 4] = dt_bf16_round(b.v[k]);
        }
        st16(dst + i * 8, y);
    }
    for (size_t i = nv * 8 + tid; i < n; i += step) dst[i] = dt_bf16_round(src[i]);
}

/* ---- launchers ---------------------------------------------------------------------------------- */

extern "C" int gpt_cuda_gelu_forward(gpt_be *be, void *out, const void *inp, size_t n) {
    if (n == 0) return DT_OK;
    const unsigned g = gpt_cuda_grid(be, n / (be->prec == GPT_BF16 ? 8 : 4) + 1, EW_THREADS);
    if (be->prec == GPT_BF16)
        return GPT_LAUNCH(dtk_gelu_fwd_bf16, g, EW_THREADS, 0, be->stream, (bf16 *)out, (const bf16 *)inp, n);
    return GPT_LAUNCH(dtk_gelu_fwd_f32, g, EW_THREADS, 0, be->stream, (float *)out, (const float *)inp, n);
}

extern "C" int gpt_cuda_gelu_backward(gpt_be *be, void *dinp, const void *inp, const void *dout, size_t n) {
    if (n == 0) return DT_OK;
    const unsigned g = gpt_cuda_grid(be, n / (be->prec == GPT_BF16 ? 8 : 4) + 1, EW_THREADS);
    if (be->prec == GPT_BF16)
        return GPT_LAUNCH(dtk_gelu_bwd_bf16, g, EW_THREADS, 0, be->stream, (bf16 *)dinp, (const bf16 *)inp,
                          (const bf16 *)dout, n);
    return GPT_LAUNCH(dtk_gelu_bwd_f32, g, EW_THREADS, 0, be->stream, (float *)dinp, (const float *)inp,
                      (const float *)dout, n);
}

extern "C" int gpt_cuda_cast(gpt_be *be, void *dst, const float *src, size_t n) {
    if (n == 0) return DT_OK;
    if (be->prec == GPT_F32) { /* not called for f32 (gpt_backend.h); a copy if it is */
        GPT_CU(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, be->stream), "cudaMemcpyAsync");
        return DT_OK;
    }
    const unsigned g = gpt_cuda_grid(be, n / 8 + 1, EW_THREADS);
    return GPT_LAUNCH(dtk_cast_f32_bf16, g, EW_THREADS, 0, be->stream, (bf16 *)dst, src, n);
}
