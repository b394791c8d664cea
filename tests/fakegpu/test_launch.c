/* fakegpu_launch: kernel launches on the fake (fakegpu.h) with nvcc-compiled
 * kernels (test_launch_kernels.cu) and twins defined here: a launch runs its
 * twin with the launch's geometry, stream and arguments (through <<<>>> and
 * cudaLaunchKernel); a kernel without a twin, bad geometry, too much shared
 * memory, a dead stream and pointer arguments that are not device memory of
 * the current device fail as CUDA fails, with a line on stderr naming the
 * kernel; cudaGetLastError reports and clears, cudaPeekAtLastError does not
 * clear. Also the runtime calls kernels' launchers make: __constant__
 * variables, cudaFuncSetAttribute/GetAttributes, occupancy, device
 * attributes, cudaMemGetInfo, timing events, stream queries, stream-ordered
 * allocation. Needs DTRAIN_FAKEGPU_DEVICES >= 2. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fakegpu.h"
#include "test_capture.h"
#include "testutil.h"

/* test_launch_kernels.cu */
void fkt_launch_axpy(dim3 grid, dim3 block, size_t shmem, cudaStream_t s, float *y, const float *x, int n, float a);
void fkt_launch_args(cudaStream_t s, int *out, long long v, size_t sz, float f, const int *maybe);
void fkt_launch_no_twin(float *y);
void fkt_launch_tmpl(float *y);
void fkt_launch_scale(float *y, int n);
cudaError_t fkt_set_coef(const float *c);
cudaError_t fkt_get_coef(float *c);
const void *fkt_coef_symbol(void);
const void *fkt_axpy_fn(void);
const void *fkt_no_twin_fn(void);
/* cudart's entry points for nvcc's host code (fake_launch.c) */
cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shmem, void *stream);
unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, cudaStream_t stream);
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **h);
void __cudaUnregisterFatBinary(void **h);
char __cudaInitModule(void **h);
void __cudaRegisterFunction(void **h, const char *hostFun, char *deviceFun, const char *deviceName, int thread_limit,
                            uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);

/* ---- the twins: what they saw -------------------------------------------------------------- */

static struct {
    int calls;
    dim3 grid, block;
    size_t shmem, threads;
    cudaStream_t stream;
    long long v;
    size_t s;
    float f;
    int maybe_null;
} seen;

static void saw(const fk_launch *l) {
    seen.calls++;
    seen.grid = l->grid;
    seen.block = l->block;
    seen.shmem = l->shmem;
    seen.stream = l->stream;
    seen.threads = fk_threads(l);
}

static cudaError_t twin_axpy(const fk_launch *l) {
    saw(l);
    int n = fk_int_arg(l, 2);
    float a = fk_float_arg(l, 3);
    float *y = fk_dev_arg(l, 0, (size_t)n * sizeof(float));
    const float *x = fk_dev_arg(l, 1, (size_t)n * sizeof(float));
    if (!y || !x) return cudaErrorIllegalAddress;
    if (fk_threads(l) < (size_t)n) return cudaErrorInvalidConfiguration; /* would leave elements unwritten */
    for (int i = 0; i < n; i++) y[i] += a * x[i];
    return cudaSuccess;
}

static cudaError_t twin_args(const fk_launch *l) {
    saw(l);
    int *out = fk_dev_arg(l, 0, sizeof(int));
    seen.v = fk_i64_arg(l, 1);
    seen.s = fk_size_arg(l, 2);
    seen.f = fk_float_arg(l, 3);
    seen.maybe_null = fk_ptr_arg_is_null(l, 4);
    const int *maybe = seen.maybe_null ? NULL : fk_dev_arg(l, 4, sizeof(int));
    if (!out || (!seen.maybe_null && !maybe)) return cudaErrorIllegalAddress;
    out[0] = (int)seen.v + (int)seen.s + (int)seen.f + (maybe ? maybe[0] : 0);
    return cudaSuccess;
}

static cudaError_t twin_scale(const fk_launch *l) {
    saw(l);
    int n = fk_int_arg(l, 1);
    float *y = fk_dev_arg(l, 0, (size_t)n * sizeof(float));
    const float *coef = fk_var("fkt_coef", 2 * sizeof(float));
    if (!y || !coef) return cudaErrorIllegalAddress;
    for (int i = 0; i < n; i++) y[i] *= coef[0] + coef[1];
    return cudaSuccess;
}

static const fk_twin k_twins[] = {
    {"fkt_axpy", twin_axpy},
    {"fkt_args", twin_args},
    {"fkt_scale", twin_scale},
    {NULL, NULL},
};

/* ---- the checks ------------------------------------------------------------------------------------ */

enum { N = 1000 };

static void check_tables(void) {
    static const fk_twin null_fn[] = {{"fkt_other", NULL}, {NULL, NULL}};
    CHECK(fk_twins_add(k_twins) == 0, "the test's twins are added");
    cap_begin();
    int rc = fk_twins_add(k_twins);
    const char *msg = cap_end();
    CHECK(rc == -1 && strstr(msg, "kernel fkt_axpy has a twin already"), "a second twin is refused: '%s'", msg);
    CHECK(fk_twins_add(NULL) == -1 && fk_twins_add(null_fn) == -1, "a NULL table and a NULL twin are refused");
}

/* the axpy through <<<>>> and through cudaLaunchKernel, on a stream */
static void check_runs(float *y, float *x, cudaStream_t s) {
    float hy[N], hx[N], back[N];
    for (int i = 0; i < N; i++) {
        hy[i] = (float)i * 0.25f;
        hx[i] = (float)(N - i) * 0.5f;
    }
    cudaMemcpy(y, hy, sizeof hy, cudaMemcpyHostToDevice);
    cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice);
    memset(&seen, 0, sizeof seen);
    fkt_launch_axpy((dim3){(N + 255) / 256, 1, 1}, (dim3){256, 1, 1}, 128, s, y, x, N, 2.0f);
    CHECK(cudaGetLastError() == cudaSuccess && seen.calls == 1, "the <<<>>> launch ran its twin once (%d)",
          seen.calls);
    CHECK(seen.grid.x == 4 && seen.grid.y == 1 && seen.grid.z == 1 && seen.block.x == 256 && seen.block.y == 1 &&
              seen.shmem == 128 && seen.stream == s && seen.threads == 1024,
          "the twin saw the launch's geometry, shared memory and stream");
    cudaMemcpy(back, y, sizeof back, cudaMemcpyDeviceToHost);
    int ok = 1;
    for (int i = 0; i < N; i++) ok &= back[i] == hy[i] + 2.0f * hx[i];
    CHECK(ok, "y += 2 x");
    int n = N;
    float a = -1.0f;
    void *args[] = {&y, &x, &n, &a};
    CHECK(cudaLaunchKernel(fkt_axpy_fn(), (dim3){1, 1, 1}, (dim3){1000, 1, 1}, args, 0, s) == cudaSuccess &&
              seen.calls == 2 && seen.block.x == 1000,
          "cudaLaunchKernel runs the twin");
    cudaMemcpy(back, y, sizeof back, cudaMemcpyDeviceToHost);
    ok = 1;
    for (int i = 0; i < N; i++) ok &= back[i] == hy[i] + 2.0f * hx[i] - hx[i];
    CHECK(ok, "y -= x");
    /* the twin's own verdict: a grid that does not cover n */
    fkt_launch_axpy((dim3){1, 1, 1}, (dim3){256, 1, 1}, 0, s, y, x, N, 1.0f);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "the twin's error is the launch's");
}

static void check_args(int *out, int *one, cudaStream_t s) {
    int h = 0, v1 = 1000;
    cudaMemcpy(one, &v1, sizeof v1, cudaMemcpyHostToDevice);
    fkt_launch_args(s, out, (1LL << 40) + 5, 7, 2.5f, NULL);
    CHECK(cudaGetLastError() == cudaSuccess && seen.v == (1LL << 40) + 5 && seen.s == 7 && seen.f == 2.5f &&
              seen.maybe_null,
          "a long long, a size_t, a float and a NULL pointer arrive (%lld %zu %g %d)", seen.v, seen.s,
          (double)seen.f, seen.maybe_null);
    CHECK(seen.grid.x == 2 && seen.grid.y == 3 && seen.grid.z == 4 && seen.block.x == 8 && seen.block.y == 4 &&
              seen.block.z == 2 && seen.threads == 24 * 64,
          "three-dimensional geometry: %zu threads", seen.threads);
    cudaMemcpy(&h, out, sizeof h, cudaMemcpyDeviceToHost);
    CHECK(h == 5 + 7 + 2, "the twin wrote its output (%d)", h);
    fkt_launch_args(s, out, 1, 2, 3.0f, one);
    cudaMemcpy(&h, out, sizeof h, cudaMemcpyDeviceToHost);
    CHECK(cudaGetLastError() == cudaSuccess && !seen.maybe_null && h == 1006, "a non-NULL pointer (%d)", h);
}

static void check_refusals(float *y, float *x, float *y_dev1, cudaStream_t dead) {
    float host[N] = {0};
    const char *msg;
    cap_begin();
    fkt_launch_no_twin(y);
    msg = cap_end();
    CHECK(cudaPeekAtLastError() == cudaErrorInvalidDeviceFunction &&
              cudaPeekAtLastError() == cudaErrorInvalidDeviceFunction,
          "no twin: cudaErrorInvalidDeviceFunction, and peeking does not clear it");
    CHECK(cudaGetLastError() == cudaErrorInvalidDeviceFunction && cudaGetLastError() == cudaSuccess,
          "cudaGetLastError reports once, then clears");
    CHECK(strstr(msg, "kernel fkt_no_twin has no CPU twin"), "the message names the kernel: '%s'", msg);
    cap_begin();
    fkt_launch_tmpl(y);
    msg = cap_end();
    CHECK(cudaGetLastError() == cudaErrorInvalidDeviceFunction && strstr(msg, "kernel _Z8fkt_tmplIfEvPT_ has no"),
          "a template kernel: its mangled name: '%s'", msg);
    void *args[] = {&y};
    CHECK(cudaLaunchKernel(fkt_no_twin_fn(), (dim3){1, 1, 1}, (dim3){1, 1, 1}, args, 0, NULL) ==
              cudaErrorInvalidDeviceFunction,
          "cudaLaunchKernel of a kernel without a twin");
    cap_begin();
    cudaError_t e = cudaLaunchKernel((const void *)host, (dim3){1, 1, 1}, (dim3){1, 1, 1}, args, 0, NULL);
    msg = cap_end();
    CHECK(e == cudaErrorInvalidDeviceFunction && strstr(msg, "not a registered kernel"),
          "cudaLaunchKernel of something that is not a kernel: '%s'", msg);
    cudaGetLastError();

    /* geometry */
    struct { dim3 g, b; const char *what; } bad[] = {
        {{1, 1, 1}, {1025, 1, 1}, "block.x 1025"},
        {{1, 1, 1}, {32, 32, 2}, "2048 threads"},
        {{1, 1, 1}, {1, 1, 65}, "block.z 65"},
        {{0, 1, 1}, {32, 1, 1}, "grid.x 0"},
        {{4, 65536, 1}, {32, 1, 1}, "grid.y 65536"},
        {{4, 1, 65536}, {32, 1, 1}, "grid.z 65536"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        seen.calls = 0;
        cap_begin();
        fkt_launch_axpy(bad[i].g, bad[i].b, 0, NULL, y, x, N, 1.0f);
        msg = cap_end();
        CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration && seen.calls == 0 &&
                  strstr(msg, "kernel fkt_axpy: grid ("),
              "%s: cudaErrorInvalidConfiguration, the twin not run: '%s'", bad[i].what, msg);
    }
    fkt_launch_axpy((dim3){2147483647u, 65535, 1}, (dim3){1024, 1, 1}, 0, NULL, y, x, N, 0.0f);
    CHECK(cudaGetLastError() == cudaSuccess, "grid (2^31-1, 65535) x 1024 threads is within CUDA's limits");

    /* dynamic shared memory */
    cap_begin();
    fkt_launch_axpy((dim3){4, 1, 1}, (dim3){256, 1, 1}, 64 * 1024, NULL, y, x, N, 0.0f);
    msg = cap_end();
    CHECK(cudaGetLastError() == cudaErrorInvalidValue && strstr(msg, "MaxDynamicSharedMemorySize"),
          "64 KiB of shared memory without opting in: '%s'", msg);
    CHECK(cudaFuncSetAttribute(fkt_axpy_fn(), cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024) == cudaSuccess,
          "opt in to 64 KiB");
    fkt_launch_axpy((dim3){4, 1, 1}, (dim3){256, 1, 1}, 64 * 1024, NULL, y, x, N, 0.0f);
    CHECK(cudaGetLastError() == cudaSuccess, "64 KiB after opting in");
    CHECK(cudaFuncSetAttribute(fkt_axpy_fn(), cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024 + 1) ==
              cudaErrorInvalidValue,
          "more than 227 KiB is refused");
    CHECK(cudaFuncSetAttribute(host, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024) ==
              cudaErrorInvalidDeviceFunction,
          "cudaFuncSetAttribute of something that is not a kernel");
    cudaGetLastError();

    /* pointer arguments */
    cap_begin();
    fkt_launch_axpy((dim3){4, 1, 1}, (dim3){256, 1, 1}, 0, NULL, host, x, N, 1.0f);
    msg = cap_end();
    CHECK(cudaGetLastError() == cudaErrorIllegalAddress && strstr(msg, "kernel fkt_axpy: argument 0") &&
              strstr(msg, "is host memory"),
          "a host pointer is refused by fk_dev_arg: '%s'", msg);
    cap_begin();
    fkt_launch_axpy((dim3){4, 1, 1}, (dim3){256, 1, 1}, 0, NULL, y, x, N + 1, 1.0f);
    msg = cap_end();
    CHECK(cudaGetLastError() == cudaErrorIllegalAddress && strstr(msg, "runs past the end of its allocation"),
          "one element past the allocation: '%s'", msg);
    cap_begin();
    fkt_launch_axpy((dim3){4, 1, 1}, (dim3){256, 1, 1}, 0, NULL, y, y_dev1, N, 1.0f);
    msg = cap_end();
    CHECK(cudaGetLastError() == cudaErrorIllegalAddress && strstr(msg, "argument 1") &&
              strstr(msg, "device memory of device 1, not of the current device 0"),
          "another device's memory: '%s'", msg);
    cap_begin();
    fkt_launch_axpy((dim3){4, 1, 1}, (dim3){256, 1, 1}, 0, dead, y, x, N, 1.0f);
    msg = cap_end();
    CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle && strstr(msg, "stream that is not live"),
          "a destroyed stream: '%s'", msg);
    dim3 g, b;
    size_t sh;
    cudaStream_t st;
    CHECK(__cudaPopCallConfiguration(&g, &b, &sh, &st) == cudaErrorMissingConfiguration,
          "popping a configuration nothing pushed");
    cudaGetLastError();
}

/* a module registered by hand, as nvcc's code does at load, and its end at
 * exit; the configuration stack's depth; the twin tables' limit; no device */
static void check_lifecycle(float *y) {
    static const char stub = 0; /* the "host stub" of the hand-registered kernel */
    int junk = 1234;
    cap_begin();
    void **h = __cudaRegisterFatBinary(&junk);
    const char *msg = cap_end();
    CHECK(h && strstr(msg, "is not nvcc's fat binary wrapper"), "a fat binary without the magic is said: '%s'", msg);
    static char name[] = "fkt_axpy"; /* kept by the fake, as nvcc's string literals are */
    static const char stub2 = 0;
    static char dup_name[] = "fkt_dup";
    static const fk_twin dup[] = {{"fkt_dup", twin_axpy}, {"fkt_dup", twin_axpy}, {NULL, NULL}};
    __cudaRegisterFunction(h, &stub, name, name, -1, NULL, NULL, NULL, NULL, NULL);
    __cudaRegisterFunction(h, &stub2, dup_name, dup_name, -1, NULL, NULL, NULL, NULL, NULL);
    __cudaRegisterFatBinaryEnd(h);
    CHECK(fk_twins_add(dup) == 0, "a table naming one kernel twice is taken");
    cap_begin();
    cudaError_t e = cudaLaunchKernel(&stub2, (dim3){1, 1, 1}, (dim3){32, 1, 1}, NULL, 0, NULL);
    msg = cap_end();
    CHECK(e == cudaErrorInvalidDeviceFunction && strstr(msg, "kernel fkt_dup has 2 twins"),
          "but a kernel with two twins does not run: '%s'", msg);
    CHECK(__cudaInitModule(h) == 1, "the module is live");
    /* a second kernel named fkt_axpy runs fkt_axpy's twin; without arguments the twin is told */
    cap_begin();
    e = cudaLaunchKernel(&stub, (dim3){1, 1, 1}, (dim3){32, 1, 1}, NULL, 0, NULL);
    msg = cap_end();
    CHECK(e == cudaErrorIllegalAddress && strstr(msg, "kernel fkt_axpy: argument 2 was not passed") &&
              strstr(msg, "argument 0 was not passed"),
          "a launch without arguments: the twin's readers say so: '%s'", msg);
    __cudaUnregisterFatBinary(h);
    CHECK(__cudaInitModule(h) == 0, "the module is gone");
    cap_begin();
    e = cudaLaunchKernel(&stub, (dim3){1, 1, 1}, (dim3){32, 1, 1}, NULL, 0, NULL);
    msg = cap_end();
    CHECK(e == cudaErrorInvalidDeviceFunction && strstr(msg, "kernel fkt_axpy after its module was unregistered"),
          "a launch after the module's end: '%s'", msg);
    cudaGetLastError();
    fkt_launch_axpy((dim3){4, 1, 1}, (dim3){256, 1, 1}, 0, NULL, y, y, 10, 0.0f);
    CHECK(cudaGetLastError() == cudaSuccess, "the real fkt_axpy still runs");

    int pushed = 0;
    while (pushed < 64 && __cudaPushCallConfiguration((dim3){1, 1, 1}, (dim3){1, 1, 1}, 0, NULL) == 0) pushed++;
    CHECK(pushed == 16 && cudaGetLastError() == cudaErrorInvalidConfiguration,
          "launches nest 16 deep, the 17th is refused (%d)", pushed);
    dim3 g, b;
    size_t sh;
    cudaStream_t st;
    while (pushed > 0 && __cudaPopCallConfiguration(&g, &b, &sh, &st) == cudaSuccess) pushed--;
    CHECK(pushed == 0, "and pop again");

    static fk_twin extra[16][2];
    static char names[16][24];
    int added = 0;
    for (int i = 0; i < 16; i++) {
        snprintf(names[i], sizeof names[i], "fkt_extra_%d", i);
        extra[i][0] = (fk_twin){names[i], twin_axpy};
        extra[i][1] = (fk_twin){NULL, NULL};
        added += fk_twins_add(extra[i]) == 0;
    }
    CHECK(added == 14, "16 tables at most: the test's two and 14 more (%d)", added);

    CHECK(cudaFuncSetAttribute(fkt_axpy_fn(), cudaFuncAttributePreferredSharedMemoryCarveout, 50) == cudaSuccess &&
              cudaFuncSetAttribute(fkt_axpy_fn(), cudaFuncAttributePreferredSharedMemoryCarveout, 101) ==
                  cudaErrorInvalidValue &&
              cudaFuncSetAttribute(fkt_axpy_fn(), cudaFuncAttributeRequiredClusterWidth, 2) == cudaErrorInvalidValue,
          "the carveout in -1..100, cluster attributes refused");
    setenv("DTRAIN_FAKEGPU_DEVICES", "0", 1);
    fkt_launch_axpy((dim3){4, 1, 1}, (dim3){256, 1, 1}, 0, NULL, y, y, 10, 0.0f);
    CHECK(cudaGetLastError() == cudaErrorNoDevice, "no device: cudaErrorNoDevice");
    setenv("DTRAIN_FAKEGPU_DEVICES", "2", 1);
}

static void check_symbols(float *y, float *dev_coef) {
    const float c[2] = {1.5f, 0.5f};
    float back[2] = {0, 0}, hy[N], res[N];
    for (int i = 0; i < N; i++) hy[i] = (float)i;
    cudaMemcpy(y, hy, sizeof hy, cudaMemcpyHostToDevice);
    CHECK(fkt_set_coef(c) == cudaSuccess && fkt_get_coef(back) == cudaSuccess && back[0] == 1.5f && back[1] == 0.5f,
          "cudaMemcpyToSymbol / FromSymbol through the C++ API");
    fkt_launch_scale(y, N);
    cudaMemcpy(res, y, sizeof res, cudaMemcpyDeviceToHost);
    int ok = cudaGetLastError() == cudaSuccess;
    for (int i = 0; i < N; i++) ok &= res[i] == 2.0f * hy[i];
    CHECK(ok, "the twin read the __constant__ through fk_var");
    const void *sym = fkt_coef_symbol();
    size_t size = 0;
    CHECK(cudaGetSymbolSize(&size, sym) == cudaSuccess && size == 2 * sizeof(float), "the symbol's size");
    CHECK(cudaMemcpyToSymbol(sym, c, 3 * sizeof(float), 0, cudaMemcpyHostToDevice) == cudaErrorInvalidValue &&
              cudaMemcpyToSymbol(sym, c, 2 * sizeof(float), 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
          "past the variable's end");
    CHECK(cudaMemcpy(dev_coef, c, sizeof c, cudaMemcpyHostToDevice) == cudaSuccess &&
              cudaMemcpyToSymbol(sym, dev_coef, sizeof c, 0, cudaMemcpyHostToDevice) ==
                  cudaErrorInvalidMemcpyDirection &&
              cudaMemcpyToSymbol(sym, dev_coef, sizeof c, 0, cudaMemcpyDeviceToDevice) == cudaSuccess &&
              cudaMemcpyFromSymbol(back, sym, sizeof c, 0, cudaMemcpyDeviceToDevice) ==
                  cudaErrorInvalidMemcpyDirection,
          "the copy's direction is checked against the other side's memory");
    CHECK(cudaMemcpyToSymbolAsync(sym, &c[1], sizeof(float), sizeof(float), cudaMemcpyHostToDevice, NULL) ==
              cudaSuccess &&
              cudaMemcpyFromSymbolAsync(back, sym, sizeof c, 0, cudaMemcpyDeviceToHost, NULL) == cudaSuccess &&
              back[0] == 1.5f && back[1] == 0.5f,
          "the asynchronous copies, at an offset");
    CHECK(cudaMemcpyToSymbol(hy, c, sizeof c, 0, cudaMemcpyHostToDevice) == cudaErrorInvalidSymbol,
          "a host array is not a symbol");
    void *addr = y;
    cap_begin();
    cudaError_t e = cudaGetSymbolAddress(&addr, sym);
    const char *msg = cap_end();
    CHECK(e == cudaErrorNotSupported && addr == NULL && strstr(msg, "cudaGetSymbolAddress(fkt_coef): not supported"),
          "cudaGetSymbolAddress is refused clearly: '%s'", msg);
    CHECK(fk_var("fkt_coef", 3 * sizeof(float)) == NULL && fk_var("no_such_var", 1) == NULL,
          "fk_var: too many bytes, an unknown name");
    cudaGetLastError();
}

static void check_runtime(void) {
    int v = -1;
    struct cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0) == cudaSuccess, "properties");
    CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess &&
              v == prop.multiProcessorCount && v == 132,
          "multiprocessors: %d", v);
    CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0) == cudaSuccess && v == 227 * 1024 &&
              (size_t)v == prop.sharedMemPerBlockOptin,
          "opt-in shared memory: %d", v);
    int major = 0, minor = -1, warp = 0;
    CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 1) == cudaSuccess &&
              cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 1) == cudaSuccess &&
              cudaDeviceGetAttribute(&warp, cudaDevAttrWarpSize, 1) == cudaSuccess && major == 9 && minor == 0 &&
              warp == 32,
          "compute capability %d.%d, warp %d", major, minor, warp);
    cap_begin();
    cudaError_t e = cudaDeviceGetAttribute(&v, cudaDevAttrTextureAlignment, 0);
    const char *msg = cap_end();
    CHECK(e == cudaErrorInvalidValue && strstr(msg, "not one the fake knows"), "an attribute the fake does not know");
    CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, 99) == cudaErrorInvalidDevice, "a device that is not");

    struct cudaFuncAttributes fa;
    CHECK(cudaFuncGetAttributes(&fa, fkt_axpy_fn()) == cudaSuccess && fa.maxDynamicSharedSizeBytes == 64 * 1024 &&
              fa.maxThreadsPerBlock == 1024 && fa.binaryVersion == 90,
          "cudaFuncGetAttributes after opting in (%d)", fa.maxDynamicSharedSizeBytes);
    int nb = -1;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, fkt_axpy_fn(), 256, 0) == cudaSuccess && nb == 8,
          "256 threads: 8 blocks per SM (%d)", nb);
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, fkt_axpy_fn(), 64, 60 * 1024) == cudaSuccess && nb == 3,
          "60 KiB of shared memory: 3 blocks per SM (%d)", nb);
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, fkt_axpy_fn(), 64, 65 * 1024) == cudaSuccess && nb == 0,
          "more shared memory than the kernel may have: 0 (%d)", nb);
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, fkt_axpy_fn(), 0, 0) == cudaErrorInvalidValue,
          "block size 0");

    size_t free0, total, free1;
    void *p = NULL;
    CHECK(cudaMemGetInfo(&free0, &total) == cudaSuccess && total == (size_t)16 << 30 && free0 <= total,
          "cudaMemGetInfo: %zu of %zu free", free0, total);
    CHECK(cudaMalloc(&p, 3 << 20) == cudaSuccess && cudaMemGetInfo(&free1, &total) == cudaSuccess &&
              free0 - free1 == (size_t)3 << 20,
          "an allocation of 3 MiB takes 3 MiB (%zu)", free0 - free1);
    cudaFree(p);
    CHECK(cudaMemGetInfo(&free1, &total) == cudaSuccess && free1 == free0, "and gives it back");

    cudaStream_t s, dead;
    cudaEvent_t e0, e1, notime;
    float ms = -1.0f;
    CHECK(cudaStreamCreate(&s) == cudaSuccess && cudaStreamCreate(&dead) == cudaSuccess &&
              cudaStreamDestroy(dead) == cudaSuccess,
          "streams");
    CHECK(cudaStreamQuery(s) == cudaSuccess && cudaStreamQuery(dead) == cudaErrorInvalidResourceHandle,
          "cudaStreamQuery: a live stream is idle, a dead one refused");
    CHECK(cudaMallocAsync(&p, 4096, s) == cudaSuccess && cudaFreeAsync(p, s) == cudaSuccess &&
              cudaMallocAsync(&p, 4096, dead) == cudaErrorInvalidResourceHandle,
          "cudaMallocAsync / cudaFreeAsync on a live stream only");
    CHECK(cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess &&
              cudaEventCreateWithFlags(&notime, cudaEventDisableTiming) == cudaSuccess,
          "events");
    CHECK(cudaEventElapsedTime(&ms, e0, e1) == cudaErrorInvalidResourceHandle, "events not recorded");
    CHECK(cudaEventRecord(e0, s) == cudaSuccess && cudaEventRecord(e1, s) == cudaSuccess &&
              cudaEventElapsedTime(&ms, e0, e1) == cudaErrorNotReady,
          "recorded, not yet seen complete: not ready");
    CHECK(cudaEventSynchronize(e0) == cudaSuccess && cudaEventSynchronize(e1) == cudaSuccess &&
              cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess && ms >= 0.0f && ms < 1000.0f,
          "elapsed %g ms", (double)ms);
    CHECK(cudaEventRecord(notime, s) == cudaSuccess && cudaEventSynchronize(notime) == cudaSuccess &&
              cudaEventElapsedTime(&ms, e0, notime) == cudaErrorInvalidResourceHandle &&
              cudaEventElapsedTime(NULL, e0, e1) == cudaErrorInvalidValue,
          "an event without timing, a NULL result");
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaEventDestroy(notime);
    cudaStreamDestroy(s);
    cudaGetLastError();
}

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) {
        printf("fakegpu_launch: skipped: needs DTRAIN_FAKEGPU_DEVICES >= 2 (this process has %d)\n", ndev);
        return 77;
    }
    check_tables();
    float *y = NULL, *x = NULL, *y_dev1 = NULL, *coef = NULL;
    int *out = NULL, *one = NULL;
    cudaStream_t s, dead;
    CHECK(cudaMalloc((void **)&y, N * sizeof(float)) == cudaSuccess &&
              cudaMalloc((void **)&x, N * sizeof(float)) == cudaSuccess &&
              cudaMalloc((void **)&out, sizeof(int)) == cudaSuccess &&
              cudaMalloc((void **)&one, sizeof(int)) == cudaSuccess &&
              cudaMalloc((void **)&coef, 2 * sizeof(float)) == cudaSuccess,
          "device memory");
    CHECK(cudaSetDevice(1) == cudaSuccess && cudaMalloc((void **)&y_dev1, N * sizeof(float)) == cudaSuccess &&
              cudaSetDevice(0) == cudaSuccess,
          "device memory of device 1");
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess &&
              cudaStreamCreate(&dead) == cudaSuccess && cudaStreamDestroy(dead) == cudaSuccess,
          "streams");
    check_runs(y, x, s);
    check_args(out, one, s);
    check_refusals(y, x, y_dev1, dead);
    check_symbols(y, coef);
    check_lifecycle(y);
    check_runtime();
    cudaStreamDestroy(s);
    cudaFree(y);
    cudaFree(x);
    cudaFree(out);
    cudaFree(one);
    cudaFree(coef);
    cudaFree(y_dev1);
    return dt_test_finish("fakegpu_launch");
}
