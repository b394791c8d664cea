/* tests/fakegpu/fake_rt.h - internal to the fake CUDA runtime's files
 * (fake_cudart.c, fake_launch.c): the device's limits, which the device
 * queries report and the launches enforce, and the calling thread's last
 * error. */
#ifndef DT_FAKE_RT_H
#define DT_FAKE_RT_H

#include <cuda_runtime_api.h>

/* The fake device: an sm_90 part of H100 size. */
enum {
    FK_CC_MAJOR = 9,
    FK_CC_MINOR = 0,
    FK_SM_COUNT = 132,
    FK_WARP = 32,
    FK_MAX_THREADS_PER_BLOCK = 1024,
    FK_MAX_BLOCK_X = 1024,
    FK_MAX_BLOCK_Y = 1024,
    FK_MAX_BLOCK_Z = 64,
    FK_MAX_GRID_X = 2147483647,
    FK_MAX_GRID_Y = 65535,
    FK_MAX_GRID_Z = 65535,
    FK_SMEM_PER_BLOCK = 48 * 1024,        /* without opting in */
    FK_SMEM_PER_BLOCK_OPTIN = 227 * 1024, /* cudaFuncAttributeMaxDynamicSharedMemorySize's limit */
    FK_SMEM_PER_SM = 228 * 1024,
    FK_SMEM_RESERVED_PER_BLOCK = 1024,
    FK_THREADS_PER_SM = 2048,
    FK_BLOCKS_PER_SM = 32,
    FK_REGS_PER_BLOCK = 65536,
    FK_REGS_PER_SM = 65536,
    FK_CONST_MEM = 64 * 1024,
    FK_L2_BYTES = 50 * 1024 * 1024,
};

/* The device memory of each device (cudaMemGetInfo's total). */
#define FK_TOTAL_MEM ((size_t)16 << 30)

/* Records e as the calling thread's last error (cudaGetLastError,
 * cudaPeekAtLastError) unless it is cudaSuccess; returns e. */
cudaError_t fk_error(cudaError_t e);

#endif
