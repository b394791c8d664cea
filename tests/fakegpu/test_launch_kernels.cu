/* tests/fakegpu/test_launch_kernels.cu - the kernels of fakegpu_launch
 * (test_launch.c), compiled by nvcc as dtrain's own kernels are: their host
 * code registers them with the runtime at load and launches them with
 * <<<...>>>, which the fake turns into runs of the CPU twins test_launch.c
 * defines (the device code here never runs). Plain C entry points for the C
 * test. */
#include <cuda_runtime.h>
#include <stddef.h>

/* y[i] += a x[i] for i < n (the twin: fkt_axpy in test_launch.c) */
extern "C" __global__ void fkt_axpy(float *y, const float *x, int n, float a) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) y[i] += a * x[i];
}

/* one argument of each kind; maybe may be NULL */
extern "C" __global__ void fkt_args(int *out, long long v, size_t s, float f, const int *maybe) {
    if (threadIdx.x == 0) out[0] = (int)v + (int)s + (int)f + (maybe ? maybe[0] : 0);
}

/* no twin anywhere */
extern "C" __global__ void fkt_no_twin(float *y) { y[0] = 1.0f; }

/* no twin, and a C++ (mangled) name */
template <typename T> __global__ void fkt_tmpl(T *y) { y[0] = T(1); }

/* y[i] *= fkt_coef[0] + fkt_coef[1] (the twin reads the fake's copy, fk_var) */
__constant__ float fkt_coef[2];
extern "C" __global__ void fkt_scale(float *y, int n) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) y[i] *= fkt_coef[0] + fkt_coef[1];
}

extern "C" {

void fkt_launch_axpy(dim3 grid, dim3 block, size_t shmem, cudaStream_t s, float *y, const float *x, int n, float a) {
    fkt_axpy<<<grid, block, shmem, s>>>(y, x, n, a);
}

void fkt_launch_args(cudaStream_t s, int *out, long long v, size_t sz, float f, const int *maybe) {
    fkt_args<<<dim3(2, 3, 4), dim3(8, 4, 2), 0, s>>>(out, v, sz, f, maybe);
}

void fkt_launch_no_twin(float *y) { fkt_no_twin<<<1, 1>>>(y); }

void fkt_launch_tmpl(float *y) { fkt_tmpl<float><<<1, 1>>>(y); }

void fkt_launch_scale(float *y, int n) { fkt_scale<<<(n + 127) / 128, 128>>>(y, n); }

/* what the launcher code of a kernel would do: the C++ symbol API */
cudaError_t fkt_set_coef(const float *c) { return cudaMemcpyToSymbol(fkt_coef, c, 2 * sizeof(float)); }
cudaError_t fkt_get_coef(float *c) { return cudaMemcpyFromSymbol(c, fkt_coef, 2 * sizeof(float)); }
const void *fkt_coef_symbol(void) { return (const void *)&fkt_coef; }

/* the kernels' host stubs, for cudaLaunchKernel and the cudaFunc* calls */
const void *fkt_axpy_fn(void) { return (const void *)fkt_axpy; }
const void *fkt_no_twin_fn(void) { return (const void *)fkt_no_twin; }

}
