/* tests/fakegpu/fakegpu.h - a CPU stand-in for the parts of CUDA's runtime
 * (libcudart), of cuBLASLt (libcublasLt) and of NCCL (libnccl) that dtrain
 * calls, for tests on machines without a GPU. Test programs link it in place
 * of the real libraries (the dtrain_fakegpu archive: the library's objects and
 * the fake's), so that dtrain's own CUDA and NCCL code (src/core/cuda,
 * src/transport/nccl, the kernels' launchers in src/nn/cuda, src/optim/cuda)
 * runs unchanged against it: the real headers' declarations, implemented
 * here. Kernels run as CPU twins (below); cuBLASLt's matmul runs on OpenBLAS
 * with dtrain's CPU GELU, bit for bit what the CPU GPT computes for f32
 * (fake_cublaslt_matmul.c says what is supported and how).
 *
 * It is strict where the real libraries are, and stricter where a mistake on
 * a GPU would be undefined behaviour:
 *  - device memory (cudaMalloc) is host memory that the host cannot touch:
 *    the pointer handed out is a PROT_NONE reservation, so host code that
 *    reads or writes through a device pointer faults as it would on a GPU;
 *    the fake's copies and collectives reach the memory through a shadow
 *    mapping. New device memory holds a junk pattern (0xA5), not zeros.
 *  - copies check their direction against the memory kinds, every buffer is
 *    checked to lie inside one allocation, streams and events are checked
 *    to be live handles;
 *  - NCCL calls take device memory of the communicator's device only, and
 *    refuse two ranks on one device (NCCL's "Duplicate GPU") unless
 *    NCCL_MULTI_RANK_GPU_ENABLE=1.
 * Streams run at once: every call completes before it returns; an event
 * reports "not ready" to the first query after each record, so that waiting
 * code really polls.
 *
 * Collectives between processes (each process one rank, as with NCCL) go
 * through a shared-memory segment per communicator (fake_shm.c): ranks copy
 * chunks into slots and reduce in rank order, so every rank gets the same
 * bits. Reductions follow NCCL's definitions: f16/bf16 in float, rounded
 * after each step; avg of floats multiplies by 1/n before summing, avg of
 * integers divides the sum.
 *
 * Settings (environment):
 *   DTRAIN_FAKEGPU_DEVICES   devices per process (default 1; 0: none, as
 *                            without a GPU)
 *   DTRAIN_FAKEGPU_FAIL      "RANK:N": the world communicator of rank RANK
 *                            reports an asynchronous error (ncclSystemError)
 *                            after its N-th collective call
 *   DTRAIN_FAKEGPU_LT_NOALGO cuBLASLt problems the heuristic finds no
 *                            algorithm for, as a real library may: a
 *                            comma-separated list of gelu_aux (the GELU
 *                            epilogues that keep their input in aux),
 *                            bf16_f32 (bf16 A and B with an f32 D); with
 *                            `status` in the list the refusal is
 *                            CUBLAS_STATUS_NOT_SUPPORTED, else success with
 *                            a count of 0 (cuBLASLt documents both). Read at
 *                            each heuristic call; fk_lt_refused() counts them.
 */
#ifndef DT_FAKEGPU_H
#define DT_FAKEGPU_H

#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stddef.h>

/* The memory kinds of the fake: cudaMemoryType's values. */
enum { FK_UNREG = 0, FK_HOST = 1, FK_DEVICE = 2, FK_MANAGED = 3 };

/* What p..p+bytes is: its kind and device, and an address the host may use
 * (the shadow of device memory). 0 if the range lies inside one allocation of
 * the fake (or is unregistered host memory: kind FK_UNREG, host = p); -1 if it
 * starts inside an allocation and runs past its end. */
int fk_mem(const void *p, size_t bytes, int *kind, int *dev, void **host);
/* The allocation of the fake that holds p: where the caller's addresses
 * start (*base), the bytes asked for (*len), the host address of its bytes
 * (*shadow), its kind and device. 0, or -1 if p is in none. */
int fk_region(const void *p, void **base, size_t *len, void **shadow, int *kind, int *dev);
/* 1 if s is the default stream or a live stream of the fake; counts a use
 * of s (every call that enqueues work on s or makes it wait calls it). */
int fk_stream_ok(cudaStream_t s);
/* How often stream s was used (FK_STREAM_USES: copies, memsets, launches,
 * NCCL calls, event records and waits on it) or synchronized
 * (FK_STREAM_SYNCS: cudaStreamSynchronize); -1 for a handle that is no
 * stream. NULL and cudaStreamLegacy count as one (the legacy default stream),
 * cudaStreamPerThread on its own. What tests ask to see which stream a caller
 * ordered its work on (the Python front's device arrays). */
enum { FK_STREAM_USES = 0, FK_STREAM_SYNCS = 1 };
long fk_stream_count(cudaStream_t s, int what);
/* The next cudaMalloc (of this process, on the current device) hands out the
 * address the last cudaFree of device memory released, if the size fits, as
 * a real allocator may: for tests of what remembers an address past its free. */
void fk_malloc_reuse(void);
/* The next cudaMalloc (of this process) is refused with
 * cudaErrorMemoryAllocation, as a full device refuses it: for tests of what
 * a failed allocation leaves. */
void fk_malloc_fail_next(void);
/* The calling thread's current device; the number of devices. */
int fk_current_device(void);
int fk_device_count(void);


/* ---- calls ----------------------------------------------------------------------------
 * Every CUDA runtime and NCCL function of the fake (not the launches, not
 * cuBLASLt) counts its calls (fake_calls.c): what tests and benchmarks read to
 * say which calls a dtrain call made, e.g. "a repeated allreduce makes no
 * cudaPointerGetAttributes". Counters are process-wide, any thread. */
enum { FK_LIB_CUDA = 0, FK_LIB_NCCL = 1, FK_LIB_N = 2 };
typedef struct fk_counter {
    const char *name;        /* the function's */
    int lib;                 /* FK_LIB_* */
#ifdef __cplusplus
    long n;                  /* C++ (the emulated kernels, tests/fakegpu/emu) only includes the declarations */
#else
    _Atomic long n;
#endif
    struct fk_counter *next; /* the list of functions called so far */
} fk_counter;
/* One count for c (registered on its first). */
void fk_count(fk_counter *c);
/* At the top of each counted function of the fake. */
#define FK_COUNTED(lib)                                                  \
    static fk_counter fk_counter_ = {__func__, (lib), 0, NULL};         \
    fk_count(&fk_counter_)
/* A function's count. */
typedef struct fk_call {
    const char *name;
    int lib;
    long n;
} fk_call;
#define FK_MAX_COUNTED 128
/* Calls of `name` so far (0: never called). */
long fk_calls(const char *name);
/* Every function called so far with its count, into out[0..cap); returns
 * how many there are. */
int fk_calls_snapshot(fk_call *out, int cap);
/* The calls made since `before` (a snapshot of nbefore counts): the
 * functions whose count changed, with the difference, into out[0..cap)
 * (returns how many); total[FK_LIB_N] (if not NULL): the calls of each
 * library. */
long fk_calls_since(const fk_call *before, int nbefore, fk_call *out, int cap, long *total);
/* The cuBLASLt heuristic calls refused so far as DTRAIN_FAKEGPU_LT_NOALGO
 * asked (process-wide). */
long fk_lt_refused(void);

/* ---- kernels: launches run their CPU twins ---------------------------------------
 * nvcc compiles a launch `k<<<grid, block, shmem, stream>>>(args)` into calls
 * of cudart's launch entry points (__cudaPushCallConfiguration, then
 * __cudaGetKernel / __cudaLaunchKernel, or cudaLaunchKernel); kernels are
 * registered by name at load (__cudaRegisterFunction). The fake implements
 * those: a launch looks the kernel's registered name up among the TWINS and
 * runs that twin on the CPU, at once (streams run at once). Kernels with a
 * twin are declared extern "C" so that the name is the plain one. A launch of
 * a kernel without a twin fails with cudaErrorInvalidDeviceFunction (and the
 * fake says which kernel on stderr).
 *
 * Before the twin, a launch checks as CUDA does: a live stream
 * (cudaErrorInvalidResourceHandle), the geometry (no dimension 0; a block of
 * at most 1024 threads, x, y <= 1024, z <= 64; a grid x < 2^31, y, z <=
 * 65535: cudaErrorInvalidConfiguration), the dynamic shared memory (48 KiB,
 * or what cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize)
 * allowed, up to 227 KiB: cudaErrorInvalidValue). Every failure, the twin's
 * included, is the calling thread's last error (cudaGetLastError,
 * cudaPeekAtLastError), as a launch's is: nvcc's <<<>>> code ignores the
 * launch's return value. The fake does not know a kernel's static shared
 * memory or registers, and runs no device code: a twin is what is tested. */

/* One launch as its twin sees it: args[i] points at the value of argument i. */
typedef struct fk_launch {
    const char *name;
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
    void **args;
} fk_launch;

/* A kernel's CPU twin: computes what the kernel computes, on the shadows of
 * the device memory its arguments point at. Returns cudaSuccess, or the error
 * a GPU would report for the launch: cudaErrorIllegalAddress for a pointer
 * argument that is not device memory of the current device with room for
 * what the kernel touches (fk_dev_arg), cudaErrorInvalidConfiguration for a
 * geometry that does not cover the problem (a launcher bug a GPU would show
 * as unwritten outputs). */
typedef cudaError_t (*fk_twin_fn)(const fk_launch *l);
typedef struct fk_twin {
    const char *name; /* the kernel's registered (extern "C") name */
    fk_twin_fn fn;
} fk_twin;
/* The twins' tables, each ending with {NULL, NULL} (the kernels' own files
 * define them: tests/fakegpu/twin_*.c). */
extern const fk_twin fk_twins_gpt[];
extern const fk_twin fk_twins_optim[];
/* The f32 -> bf16 cast's twin (dst, src, n; dt_f32_to_bf16 per element):
 * src/nn's dtk_cast_f32_bf16 and src/optim's dtk_to_bf16 (twin_gpt.c). */
cudaError_t fk_twin_cast_f32_bf16(const fk_launch *l);
extern const fk_twin fk_twins_wire[];
/* The tables a launch searches (twin_tables.c): NULL-terminated. A new
 * table is one file twin_NAME.c in tests/fakegpu (dt_fakegpu compiles every
 * twin_*.c) and one line in this list. A test program adds tables of its own
 * with fk_twins_add. A kernel has at most one twin: a launch of a kernel
 * whose name is in two tables fails (cudaErrorInvalidDeviceFunction). */
extern const fk_twin *const fk_twin_tables[];
/* What follows "dtrain fakegpu N" in the device's name (cudaGetDeviceProperties):
 * "" where the twins run (twin_tables.c), " (emulated kernels)" where the
 * kernels' own bodies run on the CPU instead (emu/: tests say which they
 * are on by it). */
extern const char fk_device_name_suffix[];
/* Adds a table (ending with {NULL, NULL}; it must stay valid while kernels
 * run) that launches search after fk_twin_tables. 0, or -1 with the reason
 * on stderr: a name that has a twin already, a NULL twin, more than 16
 * tables. */
int fk_twins_add(const fk_twin *table);

/* Argument i of a launch as device memory of the current device holding at
 * least `bytes` from the pointer on (0: any): the host address of its shadow,
 * or NULL (with the reason on stderr) when it is not. A NULL pointer argument
 * gives NULL without a message: check with fk_ptr_arg_is_null first where
 * NULL is allowed. */
void *fk_dev_arg(const fk_launch *l, int i, size_t bytes);
int fk_ptr_arg_is_null(const fk_launch *l, int i);
/* Argument i read as a value of its type. */
int fk_int_arg(const fk_launch *l, int i);
long long fk_i64_arg(const fk_launch *l, int i);
size_t fk_size_arg(const fk_launch *l, int i);
float fk_float_arg(const fk_launch *l, int i);
/* Threads in the launch (grid x block, all three dimensions). */
size_t fk_threads(const fk_launch *l);

/* The fake's copy of the __device__ or __constant__ variable registered as
 * `name` (at file scope: its plain name), holding at least `bytes`; NULL
 * (with the reason on stderr) if there is none. One copy per process, shared
 * by all devices; zeroed at load (an initialiser in the variable's
 * definition lives in the device image, which the fake does not read):
 * cudaMemcpyToSymbol and cudaMemcpyFromSymbol copy into and out of it.
 * cudaGetSymbolAddress is not supported (cudaErrorNotSupported). */
void *fk_var(const char *name, size_t bytes);

#endif
