/* src/core/bf16.h - internal: bfloat16 rounding and widening, once for the
 * host (C: core/dtype.c's dt_f32_to_bf16, the MPI transport's compressed
 * wire, the fake GPU's twins) and CUDA device code (the gpt kernels, the
 * NCCL transport's wire kernels).
 *
 * Round to nearest, ties to even, on the integer bits: a NaN stays a NaN,
 * made quiet (its top mantissa bit set); a value past the largest bfloat16
 * rounds to infinity. tests/core's core_half checks the rounding against a
 * reference computed in double on every bfloat16, every midpoint and its
 * neighbours, and random floats.
 *
 * Compiled by a C compiler every function is static inline (so loops over
 * them vectorise); by nvcc it is __host__ __device__ (DT_HD). */
#ifndef DT_CORE_BF16_H
#define DT_CORE_BF16_H

#include <stdint.h>
#include <string.h>

#ifndef DT_HD
#if defined(__CUDACC__)
#define DT_HD __host__ __device__ __forceinline__
#else
#define DT_HD static inline
#endif
#endif

/* the bits of a binary32, and back */
DT_HD uint32_t dt_f32_as_u32(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

DT_HD float dt_u32_as_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* f rounded to bfloat16 (the top 16 bits of a binary32) */
DT_HD uint16_t dt_bf16_round(float f) {
    uint32_t u = dt_f32_as_u32(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* the float a bfloat16 stands for (exact) */
DT_HD float dt_bf16_widen(uint16_t h) { return dt_u32_as_f32((uint32_t)h << 16); }

#endif
