/* src/optim/cuda/optim_cuda.cu - the optimizer's element kernels on CUDA
 * device memory (dt_optim_kernels_cuda, optim_kernels.h).
 *
 * adam and sgd compute optim_math.h's per-element functions, the host's
 * exact arithmetic: this file is built with --fmad=false (no contraction
 * into fused multiply-adds) and CUDA's sqrtf and division are correctly
 * rounded by default, so a device step gives dt_optim_step's bits.
 *
 * Kernels and geometry (EL_THREADS-thread blocks):
 *   dtk_adam, dtk_sgd, dtk_scale,  grid-stride over the elements (float4
 *   dtk_add
 *                                  when every pointer is 16-byte aligned),
 *                                  any grid; up to EL_MAX_BLOCKS blocks
 *   dtk_sqnorm_part                SQ_THREADS threads x G blocks, G a
 *                                  function of n only: thread t of block b
 *                                  sums g[i]^2 in double over i = b*256 + t
 *                                  + k*G*256 in increasing k; the block adds
 *                                  its 256 sums by a halving tree into
 *                                  part[b]
 *   dtk_sqnorm_final               one block: the same over part[0, G)
 *                                  into part[G], copied to the host.
 * The order depends only on n: the same bits every run, on every device.
 * The partial sums live in a per-device buffer made on first use (never
 * freed); a mutex serialises sqnorm calls, which wait for their result. */
#include <pthread.h>
#include <stdint.h>
#include "core/bf16.h"
#include "core/error.h"
#include "optim/optim_kernels.h"
#include "optim/optim_math.h"

#define EL_THREADS 256
#define SQ_THREADS 256
#define SQ_MAX_BLOCKS 1024
#define SQ_MAX_DEVICES 64

static int launched(const char *kernel) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return DT_OK;
    return dt_error(DT_ERR_BACKEND, kernel, "launch failed: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
}

static int fail(cudaError_t e, const char *call) {
    cudaGetLastError();
    return dt_error(DT_ERR_BACKEND, call, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
}

__device__ __forceinline__ bool all_aligned(const void *a, const void *b, const void *c, const void *d) {
    return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d) & 15u) == 0;
}

/* blocks for n elements: one thread per float4, at most EL_MAX_BLOCKS
 * (8 per SM of a 132-SM H100; the loops stride over the rest) */
#define EL_MAX_BLOCKS 1056
static unsigned el_grid(size_t n) {
    size_t need = (n / 4 + EL_THREADS) / EL_THREADS;
    return (unsigned)(need < EL_MAX_BLOCKS ? need : EL_MAX_BLOCKS);
}

/* ---- adam, sgd, scale ----------------------------------------------------------------------- */

extern "C" __global__ void __launch_bounds__(EL_THREADS)
    dtk_adam(float *p, const float *g, float *m, float *v, size_t n, float decay, float l2, float b1, float c1,
             float b2, float c2, float bc2_sqrt, float eps, float neg_step) {
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    const size_t nv = all_aligned(p, g, m, v) ? n / 4 : 0;
    for (size_t i = tid; i < nv; i += step) {
        float4 pp = reinterpret_cast<float4 *>(p)[i], mm = reinterpret_cast<float4 *>(m)[i];
        float4 vv = reinterpret_cast<float4 *>(v)[i], gg = reinterpret_cast<const float4 *>(g)[i];
        dt_adam_update(&pp.x, gg.x, &mm.x, &vv.x, decay, l2, b1, c1, b2, c2, bc2_sqrt, eps, neg_step);
        dt_adam_update(&pp.y, gg.y, &mm.y, &vv.y, decay, l2, b1, c1, b2, c2, bc2_sqrt, eps, neg_step);
        dt_adam_update(&pp.z, gg.z, &mm.z, &vv.z, decay, l2, b1, c1, b2, c2, bc2_sqrt, eps, neg_step);
        dt_adam_update(&pp.w, gg.w, &mm.w, &vv.w, decay, l2, b1, c1, b2, c2, bc2_sqrt, eps, neg_step);
        reinterpret_cast<float4 *>(p)[i] = pp;
        reinterpret_cast<float4 *>(m)[i] = mm;
        reinterpret_cast<float4 *>(v)[i] = vv;
    }
    for (size_t i = nv * 4 + tid; i < n; i += step)
        dt_adam_update(&p[i], g[i], &m[i], &v[i], decay, l2, b1, c1, b2, c2, bc2_sqrt, eps, neg_step);
}

/* buf may be NULL (momentum 0) */
extern "C" __global__ void __launch_bounds__(EL_THREADS)
    dtk_sgd(float *p, const float *g, float *buf, size_t n, float lr, float wd, float mom, int nesterov,
            int first) {
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    float dummy = 0.0f;
    for (size_t i = tid; i < n; i += step)
        dt_sgd_update(&p[i], g[i], buf ? &buf[i] : &dummy, lr, wd, mom, nesterov, first);
}

extern "C" __global__ void __launch_bounds__(EL_THREADS) dtk_scale(float *g, size_t n, float s) {
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    const size_t nv = ((uintptr_t)g & 15u) == 0 ? n / 4 : 0;
    for (size_t i = tid; i < nv; i += step) {
        float4 x = reinterpret_cast<float4 *>(g)[i];
        x.x *= s, x.y *= s, x.z *= s, x.w *= s;
        reinterpret_cast<float4 *>(g)[i] = x;
    }
    for (size_t i = nv * 4 + tid; i < n; i += step) g[i] *= s;
}

extern "C" __global__ void __launch_bounds__(EL_THREADS) dtk_add(float *g, const float *src, size_t n) {
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    const size_t nv = (((uintptr_t)g | (uintptr_t)src) & 15u) == 0 ? n / 4 : 0;
    for (size_t i = tid; i < nv; i += step) {
        float4 x = reinterpret_cast<float4 *>(g)[i];
        const float4 y = reinterpret_cast<const float4 *>(src)[i];
        x.x += y.x, x.y += y.y, x.z += y.z, x.w += y.w;
        reinterpret_cast<float4 *>(g)[i] = x;
    }
    for (size_t i = nv * 4 + tid; i < n; i += step) g[i] += src[i];
}

/* dst[i] = src[i] rounded to bf16, nearest even (core/bf16.h: the host's bits) */
extern "C" __global__ void __launch_bounds__(EL_THREADS) dtk_to_bf16(uint16_t *dst, const float *src, size_t n) {
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = tid; i < n; i += step) dst[i] = dt_bf16_round(src[i]);
}

/* ---- squared norm ------------------------------------------------------------------------------- */

/* the block's SQ_THREADS values in sh added by a halving tree; sh[0] */
__device__ void block_tree(double *sh) {
    for (int s = SQ_THREADS / 2; s > 0; s >>= 1) {
        __syncthreads();
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    }
    __syncthreads();
}

extern "C" __global__ void __launch_bounds__(SQ_THREADS) dtk_sqnorm_part(double *part, const float *g, size_t n) {
    __shared__ double sh[SQ_THREADS];
    const size_t step = (size_t)gridDim.x * SQ_THREADS;
    double a = 0.0;
    for (size_t i = (size_t)blockIdx.x * SQ_THREADS + threadIdx.x; i < n; i += step) {
        const double x = (double)g[i];
        a += x * x;
    }
    sh[threadIdx.x] = a;
    block_tree(sh);
    if (threadIdx.x == 0) part[blockIdx.x] = sh[0];
}

/* part[nb] = the sum of part[0, nb) */
extern "C" __global__ void __launch_bounds__(SQ_THREADS) dtk_sqnorm_final(double *part, int nb) {
    __shared__ double sh[SQ_THREADS];
    double a = 0.0;
    for (int i = threadIdx.x; i < nb; i += SQ_THREADS) a += part[i];
    sh[threadIdx.x] = a;
    block_tree(sh);
    if (threadIdx.x == 0) part[nb] = sh[0];
}

static pthread_mutex_t sq_mu = PTHREAD_MUTEX_INITIALIZER;
static double *sq_buf[SQ_MAX_DEVICES];

static int sqnorm_locked(cudaStream_t st, const float *g, size_t n, double *out) {
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return fail(e, "cudaGetDevice");
    if (dev < 0 || dev >= SQ_MAX_DEVICES)
        return dt_error(DT_ERR_UNSUPPORTED, "sqnorm", "device %d: at most %d devices", dev, SQ_MAX_DEVICES);
    if (!sq_buf[dev] && (e = cudaMalloc((void **)&sq_buf[dev], (SQ_MAX_BLOCKS + 1) * sizeof(double))) != cudaSuccess) {
        sq_buf[dev] = NULL;
        return fail(e, "cudaMalloc (sqnorm's partial sums)");
    }
    const size_t need = (n + SQ_THREADS - 1) / SQ_THREADS;
    const int nb = (int)(need < SQ_MAX_BLOCKS ? need : SQ_MAX_BLOCKS);
    dtk_sqnorm_part<<<nb, SQ_THREADS, 0, st>>>(sq_buf[dev], g, n);
    int rc = launched("dtk_sqnorm_part");
    if (rc) return rc;
    dtk_sqnorm_final<<<1, SQ_THREADS, 0, st>>>(sq_buf[dev], nb);
    if ((rc = launched("dtk_sqnorm_final"))) return rc;
    if ((e = cudaMemcpyAsync(out, sq_buf[dev] + nb, sizeof(double), cudaMemcpyDeviceToHost, st)) != cudaSuccess)
        return fail(e, "cudaMemcpyAsync (sqnorm's result)");
    if ((e = cudaStreamSynchronize(st)) != cudaSuccess) return fail(e, "cudaStreamSynchronize (sqnorm)");
    return DT_OK;
}

/* ---- the table's entries -------------------------------------------------------------------------- */

static int k_adam(void *stream, float *p, const float *g, float *m, float *v, size_t n, float decay, float l2,
                  float b1, float c1, float b2, float c2, float bc2_sqrt, float eps, float neg_step) {
    if (n == 0) return DT_OK;
    dtk_adam<<<el_grid(n), EL_THREADS, 0, (cudaStream_t)stream>>>(p, g, m, v, n, decay, l2, b1, c1, b2, c2, bc2_sqrt,
                                                                 eps, neg_step);
    return launched("dtk_adam");
}

static int k_sgd(void *stream, float *p, const float *g, float *buf, size_t n, float lr, float wd, float mom,
                 int nesterov, int first) {
    if (n == 0) return DT_OK;
    dtk_sgd<<<el_grid(n), EL_THREADS, 0, (cudaStream_t)stream>>>(p, g, mom != 0.0f ? buf : NULL, n, lr, wd, mom,
                                                                nesterov, first);
    return launched("dtk_sgd");
}

static int k_sqnorm(void *stream, const float *g, size_t n, double *out) {
    *out = 0.0;
    if (n == 0) return DT_OK;
    pthread_mutex_lock(&sq_mu);
    int rc = sqnorm_locked((cudaStream_t)stream, g, n, out);
    pthread_mutex_unlock(&sq_mu);
    return rc;
}

static int k_scale(void *stream, float *g, size_t n, float s) {
    if (n == 0) return DT_OK;
    dtk_scale<<<el_grid(n), EL_THREADS, 0, (cudaStream_t)stream>>>(g, n, s);
    return launched("dtk_scale");
}

static int k_add(void *stream, float *g, const float *src, size_t n) {
    if (n == 0) return DT_OK;
    dtk_add<<<el_grid(n), EL_THREADS, 0, (cudaStream_t)stream>>>(g, src, n);
    return launched("dtk_add");
}

static int k_to_bf16(void *stream, uint16_t *dst, const float *src, size_t n) {
    if (n == 0) return DT_OK;
    dtk_to_bf16<<<el_grid(4 * n), EL_THREADS, 0, (cudaStream_t)stream>>>(dst, src, n);
    return launched("dtk_to_bf16");
}

extern "C" const dt_optim_kernels dt_optim_kernels_cuda = {"cuda", k_adam, k_sgd, k_sqnorm, k_scale, k_add,
                                                           k_to_bf16};
