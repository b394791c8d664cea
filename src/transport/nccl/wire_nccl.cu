/* src/transport/nccl/wire_nccl.cu - the NCCL transport's compressed wire
 * kernels (wire_nccl.h): f32 to a 16-bit wire type and back.
 *
 * Kernels and geometry (WIRE_THREADS-thread blocks, grid-stride over the
 * elements, up to WIRE_MAX_BLOCKS blocks; any grid covers n):
 *   dtk_wire_pack(dst, src, n, wire)             uint16 <- f32
 *   dtk_wire_unpack(dst, src, n, wire, divisor)  f32 <- uint16, / divisor
 * bfloat16 rounding is core/bf16.h's (round to nearest even, a NaN stays a
 * NaN, made quiet: the host's dt_f32_to_bf16); half uses CUDA's
 * __float2half_rn (IEEE round-to-nearest-even). tests/fakegpu/twin_wire.c
 * is their CPU twin. */
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include "core/bf16.h"
#include "core/error.h"
#include "transport/nccl/wire_nccl.h"

#define WIRE_THREADS 256
#define WIRE_MAX_BLOCKS 4096
#define WIRE_BF16 1 /* dt_wire's values (dtrain/dtype.h) */

extern "C" __global__ void dtk_wire_pack(uint16_t *dst, const float *src, size_t n, int wire) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = wire == WIRE_BF16 ? dt_bf16_round(src[i]) : __half_as_ushort(__float2half_rn(src[i]));
}

extern "C" __global__ void dtk_wire_unpack(float *dst, const uint16_t *src, size_t n, int wire, int divisor) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const float q = (float)divisor;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = wire == WIRE_BF16 ? dt_bf16_widen(src[i]) : __half2float(__ushort_as_half(src[i]));
        dst[i] = divisor == 1 ? v : __fdiv_rn(v, q);
    }
}

static unsigned blocks(size_t n) {
    size_t b = (n + WIRE_THREADS - 1) / WIRE_THREADS;
    return (unsigned)(b < 1 ? 1 : b > WIRE_MAX_BLOCKS ? WIRE_MAX_BLOCKS : b);
}

static int launched(const char *kernel) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return DT_OK;
    return dt_error(DT_ERR_BACKEND, kernel, "launch failed: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
}

extern "C" int dt_nccl_wire_pack(uint16_t *dst, const float *src, size_t n, int wire, void *stream) {
    if (n == 0) return DT_OK;
    dtk_wire_pack<<<blocks(n), WIRE_THREADS, 0, (cudaStream_t)stream>>>(dst, src, n, wire);
    return launched("dtk_wire_pack");
}

extern "C" int dt_nccl_wire_unpack(float *dst, const uint16_t *src, size_t n, int wire, int divisor, void *stream) {
    if (n == 0) return DT_OK;
    dtk_wire_unpack<<<blocks(n), WIRE_THREADS, 0, (cudaStream_t)stream>>>(dst, src, n, wire, divisor);
    return launched("dtk_wire_unpack");
}
