/* src/nn/cuda/cuda_common.cuh - internal to the CUDA gpt backend: the
 * instance (struct gpt_be), the launchers every file defines (the entries
 * of gpt_backend_cuda, gpt_cuda.cu), and the device helpers the kernels
 * share: element loads and stores in both precisions, 16-byte packs, warp
 * reductions, the launch check.
 *
 * Every kernel is `extern "C" __global__` with a plain name dtk_<op>_<prec>
 * (prec f32 or bf16) wrapping one template body, so that a fake runtime
 * can find its CPU twin by name (tests/fakegpu/twin_gpt.c). Launchers
 * check every launch (cudaGetLastError) and return DT_OK or
 * dt_error(DT_ERR_BACKEND, "<kernel>", ...). */
#ifndef DT_NN_CUDA_COMMON_CUH
#define DT_NN_CUDA_COMMON_CUH

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"
#include "nn/gpt_backend.h"
#include "nn/gpt_math.h"

/* bfloat16 elements are their bits (gpt_backend.h, dtrain/dtype.h) */
typedef uint16_t bf16;

/* ---- the instance ---------------------------------------------------------------- */

/* cuBLASLt plans kept per instance (cuda_matmul.cu) */
struct lt_plan;
#define GPT_CUDA_PLANS 48

struct gpt_be {
    gpt_prec prec;
    int device;
    int sm_count;
    cudaStream_t stream;
    cublasLtHandle_t lt;
    void *lt_ws;       /* cuBLASLt workspace */
    size_t lt_ws_bytes;
    struct lt_plan *plans; /* [GPT_CUDA_PLANS] */
    int plan_next;     /* the next slot to replace when full */
    int gelu_unfused;  /* cuBLASLt had no fused GELU epilogue: matmul, then GELU */
    /* deterministic column reductions (cuda_reduce.cu): partial sums and one
     * arrival counter per column tile, zero between launches */
    float *red;
    size_t red_floats;
    unsigned *red_count;
    int red_count_n;
    /* encoder backward: the positions bucketed by token (host, then device) */
    int32_t *enc_host;
    size_t enc_host_cap; /* int32 elements */
    int32_t *enc_count;  /* host: per token counts */
    size_t enc_count_cap;
    int32_t *enc_dev;
    size_t enc_dev_cap;
};

/* bytes of one activation element */
static inline size_t gpt_cuda_es(const gpt_be *be) { return be->prec == GPT_BF16 ? 2 : 4; }
static inline size_t gpt_cuda_align256(size_t b) { return (b + 255) & ~(size_t)255; }

/* ---- errors ------------------------------------------------------------------------ */

/* after a launch: DT_OK, or the launch error named by the kernel */
static inline int gpt_cuda_launched(const char *kernel) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return DT_OK;
    return dt_error(DT_ERR_BACKEND, kernel, "launch failed: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
}

/* a CUDA runtime call's failure, named by the call */
static inline int gpt_cuda_fail(cudaError_t e, const char *call) {
    cudaGetLastError(); /* a non-sticky error is reported once, here */
    return dt_error(DT_ERR_BACKEND, call, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
}
#define GPT_CU(call, name)                                   \
    do {                                                     \
        cudaError_t e_ = (call);                             \
        if (e_ != cudaSuccess) return gpt_cuda_fail(e_, name); \
    } while (0)

/* launch kernel k<<<grid, block, shmem, stream>>>(args) and check it */
#define GPT_LAUNCH(k, grid, block, shmem, stream, ...) \
    (k<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__), gpt_cuda_launched(#k))

/* blocks for a grid-stride loop over `work` items of `threads`-thread
 * blocks: enough to fill the device (8 blocks per SM), no more than needed */
static inline unsigned gpt_cuda_grid(const gpt_be *be, size_t work, int threads) {
    size_t need = (work + (size_t)threads - 1) / (size_t)threads;
    size_t fill = (size_t)be->sm_count * 8;
    size_t g = need < fill ? need : fill;
    return (unsigned)(g ? g : 1);
}

/* ---- device helpers ------------------------------------------------------------------ */

#ifdef __CUDACC__
/* load as float, store from float (bf16: rounded to nearest even) */
__device__ __forceinline__ float ldf(float x) { return x; }
__device__ __forceinline__ float ldf(bf16 x) { return dt_bf16_widen(x); }
template <typename T> __device__ __forceinline__ T stf(float x);
template <> __device__ __forceinline__ float stf<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 stf<bf16>(float x) { return dt_bf16_round(x); }

/* 16 bytes of elements: 4 f32 or 8 bf16 */
template <typename T> struct alignas(16) pack16 {
    static constexpr int n = 16 / (int)sizeof(T);
    T v[16 / sizeof(T)];
};
template <typename T> __device__ __forceinline__ pack16<T> ld16(const T *p) {
    pack16<T> r;
    *reinterpret_cast<int4 *>(&r) = __ldg(reinterpret_cast<const int4 *>(p));
    return r;
}
/* the same for data written earlier by this kernel (no read-only cache) */
template <typename T> __device__ __forceinline__ pack16<T> ld16_rw(const T *p) {
    pack16<T> r;
    *reinterpret_cast<int4 *>(&r) = *reinterpret_cast<const int4 *>(p);
    return r;
}
template <typename T> __device__ __forceinline__ void st16(T *p, const pack16<T> &v) {
    *reinterpret_cast<int4 *>(p) = *reinterpret_cast<const int4 *>(&v);
}
__device__ __forceinline__ bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* the warp's online softmax pairs merged (every lane gets the result) */
__device__ __forceinline__ dt_softmax_acc warp_softmax(dt_softmax_acc a) {
    for (int o = 16; o > 0; o >>= 1) {
        dt_softmax_acc b;
        b.m = __shfl_xor_sync(0xffffffffu, a.m, o);
        b.s = __shfl_xor_sync(0xffffffffu, a.s, o);
        a = dt_softmax_merge(a, b);
    }
    return a;
}
#endif

/* ---- the launchers (the table's entries) --------------------------------------------- */
extern "C" {
/* gpt_cuda.cu */
int gpt_cuda_cast(gpt_be *be, void *dst, const float *src, size_t n);
/* cuda_encoder.cu */
int gpt_cuda_encoder_forward(gpt_be *be, void *out, const int32_t *tok, const void *wte, const void *wpe, int B,
                             int T, int C);
int gpt_cuda_encoder_backward(gpt_be *be, float *dwte, float *dwpe, const void *dout, const int32_t *tok,
                              const int32_t *tok_host, int B, int T, int C);
/* cuda_layernorm.cu */
int gpt_cuda_layernorm_forward(gpt_be *be, void *out, float *mean, float *rstd, const void *inp,
                               const void *weight, const void *bias, int N, int C);
int gpt_cuda_layernorm_backward(gpt_be *be, void *dinp, float *dweight, float *dbias, const void *dout,
                                const void *inp, const void *weight, const float *mean, const float *rstd, int N,
                                int C);
/* cuda_matmul.cu */
int gpt_cuda_matmul_forward(gpt_be *be, void *out, const void *resid, const void *inp, const void *weight,
                            const void *bias, int N, int C, int OC, int ldo);
int gpt_cuda_matmul_gelu_forward(gpt_be *be, void *out, void *pre, const void *inp, const void *weight,
                                 const void *bias, int N, int C, int OC);
int gpt_cuda_matmul_backward(gpt_be *be, void *dinp, float *dweight, float *dbias, const void *dout,
                             const void *inp, const void *weight, int N, int C, int OC, int lddo);
/* cuda_elementwise.cu */
int gpt_cuda_gelu_forward(gpt_be *be, void *out, const void *inp, size_t n);
int gpt_cuda_gelu_backward(gpt_be *be, void *dinp, const void *inp, const void *dout, size_t n);
/* cuda_attention.cu */
void gpt_cuda_attention_sizes(int B, int T, int C, int NH, gpt_prec prec, size_t *saved, size_t *scratch);
int gpt_cuda_attention_forward(gpt_be *be, void *out, void *saved, void *scratch, const void *qkv, int B, int T,
                               int C, int NH);
int gpt_cuda_attention_backward(gpt_be *be, void *dqkv, void *scratch, const void *dout, const void *qkv,
                                const void *saved, int B, int T, int C, int NH);
int gpt_cuda_attention_step(gpt_be *be, void *out, void *scratch, const void *q, const void *kc, const void *vc,
                            int n, int C, int NH);
/* cuda_classifier.cu */
int gpt_cuda_crossentropy_forward(gpt_be *be, float *lse, float *tlogit, int32_t *hit, const void *logits,
                                  const int32_t *targets, int N, int V, int ldl);
int gpt_cuda_crossentropy_backward(gpt_be *be, void *dlogits, const void *logits, const float *lse,
                                   const int32_t *targets, int N, int V, int ldl, float dscale);
}

/* ---- shared internals ---------------------------------------------------------------- */

/* cuda_matmul.cu: one cuBLASLt product D = alpha op(A) op(B) + beta C
 * (column-major, as cuBLASLt sees it), optionally batched (strides in
 * elements) and with an epilogue (bias, GELU with its input kept in aux). */
typedef struct gpt_lt_mm {
    int m, n, k;
    const void *A; int lda; int ta; /* op(A) [m x k]: A is [k x m] (ta) or [m x k] */
    const void *B; int ldb; int tb; /* op(B) [k x n]: B is [n x k] (tb) or [k x n] */
    void *D; int ldd;               /* [m x n] */
    const void *C;                  /* beta != 0: [m x n] with ldd (may equal D); else unused */
    float alpha, beta;
    cudaDataType_t ab_type, d_type; /* A and B; C and D */
    const void *bias;               /* [m] of ab_type, or NULL */
    void *aux; int ldaux;           /* GELU's input [m x n] (d_type), or NULL */
    int batch;                      /* 0 or 1: not batched */
    long long sa, sb, sd;
} gpt_lt_mm;
/* DT_OK; DT_ERR_UNSUPPORTED if cuBLASLt has no algorithm for it (callers
 * may fall back); DT_ERR_BACKEND naming `what` and the cuBLASLt call. */
int gpt_cuda_lt(gpt_be *be, const char *what, const gpt_lt_mm *mm);
void gpt_cuda_lt_release(gpt_be *be);

/* cuda_reduce.cu: out0[c] += sum over rows n of x[n*ld + c] (f32), c < OC;
 * with inp/mean/rstd (LayerNorm's parameter gradients): out0 = dweight +=
 * sum dy * (inp - mean) * rstd, out1 = dbias += sum dy. Deterministic. */
int gpt_cuda_colsum(gpt_be *be, float *out0, float *out1, const void *x, int ld, const void *inp,
                    const float *mean, const float *rstd, int N, int OC);

#endif
