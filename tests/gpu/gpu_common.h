/* tests/gpu/gpu_common.h - shared by the GPU tests: the skip (exit 77 with
 * the reason; DTRAIN_GPU_REQUIRE=1 makes it a failure, for the GPU suite on a
 * machine that has one), the device of this rank, and CUDA's device memory
 * as the device-test harness's allocator (tests/device/dev_common.h). */
#ifndef DT_GPU_COMMON_H
#define DT_GPU_COMMON_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exits 77 (skipped) naming why when this process sees no CUDA device;
 * otherwise makes device (launcher's local rank) % count current. */
static inline void gpu_require(const char *test) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        const char *req = getenv("DTRAIN_GPU_REQUIRE");
        int must = req && strcmp(req, "1") == 0;
        printf("%s: %s: no CUDA device: %s\n", test, must ? "FAILED" : "skipped",
               e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found none");
        exit(must ? 1 : 77);
    }
    const char *v = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!v) v = getenv("LOCAL_RANK");
    if (!v) v = getenv("SLURM_LOCALID");
    if (cudaSetDevice(v ? atoi(v) % n : 0) != cudaSuccess) {
        printf("%s: FAILED: cudaSetDevice\n", test);
        exit(1);
    }
}

static inline void gpu_check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

static inline void *gpu_alloc(size_t n) {
    void *p = NULL;
    gpu_check(cudaMalloc(&p, n ? n : 1), "cudaMalloc");
    return p;
}
static inline void gpu_release(void *p) { gpu_check(cudaFree(p), "cudaFree"); }
/* cudaMemcpy from pageable memory may return before its DMA has landed, and
 * it is ordered only with the legacy default stream: the tests then hand the
 * buffer to calls on streams created cudaStreamNonBlocking, which would race
 * with it (seen on an H100: the last chunk of a 4 MiB fill landed after NCCL
 * had written the result). The device is synchronised after each fill and
 * before each read, so the data is where the next call on any stream looks. */
static inline void gpu_h2d(void *d, const void *s, size_t n) {
    gpu_check(cudaMemcpy(d, s, n, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    gpu_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after H2D");
}
static inline void gpu_d2h(void *d, const void *s, size_t n) {
    gpu_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize before D2H");
    gpu_check(cudaMemcpy(d, s, n, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}

#endif
