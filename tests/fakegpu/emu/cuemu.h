/* tests/fakegpu/emu/cuemu.h - what a kernel file of src/nn/cuda,
 * src/optim/cuda or src/transport/nccl needs to compile as host C++ (g++)
 * so that its kernels' OWN BODIES run on the CPU: force-included (-include)
 * before the file, which emu_transform.sh has copied with its launches'
 * <<<...>>> removed and its names prefixed (emu_dtk_*, emu_gpt_cuda_*, ...).
 *
 * Every CUDA thread of a block is a fiber (cuemu_sched.cc); a fiber runs
 * until it reaches __syncthreads() or a warp shuffle, where the scheduler
 * checks what the hardware assumes (every thread of the block at the same
 * barrier, all 32 lanes of the warp at the same shuffle with a full mask)
 * and releases them together. __shared__ variables are function statics:
 * the blocks of a launch run one after the other on one host thread, so a
 * static is the running block's shared memory. Fences are no-ops and
 * atomics plain read-modify-writes (nothing runs concurrently). */
#ifndef DT_CUEMU_H
#define DT_CUEMU_H

#include <cuda_runtime.h> /* host-compiler mode: the types (dim3, int4, ...), no device built-ins */
#include <math.h>
#include <stdint.h>
#include <string.h>

#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

namespace cuemu {
uint3 thread_idx();
uint3 block_idx();
dim3 block_dim();
dim3 grid_dim();
void barrier(const char *file, int line);
uint32_t shfl_xor(unsigned mask, uint32_t v, int lane_mask, const char *file, int line);
} // namespace cuemu

#define threadIdx (::cuemu::thread_idx())
#define blockIdx (::cuemu::block_idx())
#define blockDim (::cuemu::block_dim())
#define gridDim (::cuemu::grid_dim())
#define __syncthreads() ::cuemu::barrier(__FILE__, __LINE__)
#define __threadfence() ((void)0)

template <typename T> static inline T cuemu_shfl_xor(unsigned mask, T v, int o, const char *file, int line) {
    static_assert(sizeof(T) == 4, "32-bit shuffles only");
    uint32_t u;
    memcpy(&u, &v, 4);
    u = ::cuemu::shfl_xor(mask, u, o, file, line);
    memcpy(&v, &u, 4);
    return v;
}
#define __shfl_xor_sync(mask, v, o) cuemu_shfl_xor((mask), (v), (o), __FILE__, __LINE__)

static inline int4 __ldg(const int4 *p) { return *p; }
static inline float __ldcg(const float *p) { return *p; }
static inline unsigned atomicAdd(unsigned *p, unsigned v) {
    unsigned o = *p;
    *p = o + v;
    return o;
}
static inline int min(int a, int b) { return a < b ? a : b; }
/* IEEE division, correctly rounded (the host's: SSE, no flush to zero) */
static inline float __fdiv_rn(float a, float b) { return a / b; }

#endif
