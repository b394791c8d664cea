/* fakegpu_smallcall_bench: the host cost of a small allreduce on device
 * memory, dtrain over NCCL against raw ncclAllReduce, on the fake runtime
 * (one rank, its own device: the nccl path). What the fake can measure is the
 * host work per call: the instructions of dtrain's path beside NCCL's enqueue
 * (count them with callgrind, below) and the CUDA and NCCL calls each call
 * makes (the fake's counters). Wall time on the fake is no GPU's: the GPU
 * suite's dtrain-bench --device --vs-nccl times the real thing.
 *
 *   fakegpu_smallcall_bench [--calls N] [--bytes B] [--warmup W] MODE...
 *
 * MODE: nccl (ncclAllReduce on the same buffers and stream, on an NCCL
 * communicator of its own), async (dt_allreduce_ex with DT_MEM_DEVICE on a
 * stream, the handle freed at once: stream order, as dtrain-bench --device
 * and a training loop use it), blocking (the same without a handle: the host
 * waits), auto (dt_allreduce: DT_MEM_AUTO, the default stream, blocking).
 * Each mode: W calls first (the shape seen before), then N calls in
 * smallcall_loop(), timed; prints ns per call and the CUDA and NCCL calls
 * per call. Instructions per call:
 *
 *   valgrind --tool=callgrind --toggle-collect=smallcall_loop \
 *       build/tests/fakegpu_smallcall_bench --calls 2000 async
 *
 * (the Ir total / N; the same for nccl). Results are checked once per mode. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "dtrain/dtrain.h"
#include "fakegpu.h"

static void die(const char *what, const char *msg) {
    fprintf(stderr, "fakegpu_smallcall_bench: %s: %s\n", what, msg);
    exit(1);
}
#define CU(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) die(#x, cudaGetErrorString(e_)); } while (0)
#define NC(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) die(#x, ncclGetErrorString(r_)); } while (0)
#define DT(x) do { if ((x) != DT_OK) die(#x, dt_last_error()); } while (0)

enum { M_NCCL, M_ASYNC, M_BLOCKING, M_AUTO, M_N };
static const char *const mode_name[M_N] = {"nccl", "async", "blocking", "auto"};

typedef struct run {
    int mode;
    float *s, *r;
    size_t n;
    cudaStream_t st;
    ncclComm_t nc;
    dt_comm *w;
} run;

static void one(const run *x) {
    dt_coll_opts o = {.mem = DT_MEM_DEVICE, .stream = x->st};
    dt_work *wk = NULL;
    switch (x->mode) {
    case M_NCCL: NC(ncclAllReduce(x->s, x->r, x->n, ncclFloat32, ncclSum, x->nc, x->st)); break;
    case M_ASYNC:
        DT(dt_allreduce_ex(x->s, x->r, x->n, DT_F32, DT_SUM, x->w, &o, &wk));
        dt_work_free(wk);
        break;
    case M_BLOCKING: DT(dt_allreduce_ex(x->s, x->r, x->n, DT_F32, DT_SUM, x->w, &o, NULL)); break;
    default: DT(dt_allreduce(x->s, x->r, x->n, DT_F32, DT_SUM, x->w)); break;
    }
}

/* The measured calls (callgrind --toggle-collect=smallcall_loop). */
__attribute__((noinline)) void smallcall_loop(const run *x, long calls);
__attribute__((noinline)) void smallcall_loop(const run *x, long calls) {
    for (long i = 0; i < calls; i++) one(x);
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void check(const run *x, const float *want) {
    size_t bytes = x->n * sizeof(float);
    float *h = malloc(bytes);
    if (!h) die("malloc", "out of memory");
    CU(cudaStreamSynchronize(x->st));
    CU(cudaMemcpy(h, x->r, bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < x->n; i++)
        if (h[i] != want[i]) die(mode_name[x->mode], "wrong result");
    free(h);
}

int main(int argc, char **argv) {
    long calls = 2000, warmup = 20;
    size_t bytes = 4096;
    int modes[M_N], nm = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc) calls = atol(argv[++i]);
        else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc) warmup = atol(argv[++i]);
        else if (strcmp(argv[i], "--bytes") == 0 && i + 1 < argc) bytes = (size_t)atol(argv[++i]);
        else {
            int m = 0;
            while (m < M_N && strcmp(argv[i], mode_name[m]) != 0) m++;
            if (m == M_N || nm == M_N) {
                fprintf(stderr, "usage: %s [--calls N] [--bytes B] [--warmup W] nccl|async|blocking|auto...\n", argv[0]);
                return 2;
            }
            modes[nm++] = m;
        }
    }
    if (nm == 0) for (int m = 0; m < M_N; m++) modes[nm++] = m;
    if (calls < 1 || bytes < sizeof(float)) die("arguments", "--calls >= 1 and --bytes >= 4");
    setenv("DTRAIN_FAKEGPU_DEVICES", "1", 0);
    DT(dt_init());
    run x = {.w = dt_comm_world(), .n = bytes / sizeof(float)};
    if (strcmp(dt_comm_device_path(x.w), "nccl") != 0) die("dt_init", "the device path is not nccl");
    ncclUniqueId id;
    NC(ncclGetUniqueId(&id));
    NC(ncclCommInitRank(&x.nc, 1, id, 0));
    CU(cudaStreamCreateWithFlags(&x.st, cudaStreamNonBlocking));
    CU(cudaMalloc((void **)&x.s, x.n * sizeof(float)));
    CU(cudaMalloc((void **)&x.r, x.n * sizeof(float)));
    float *h = malloc(x.n * sizeof(float));
    if (!h) die("malloc", "out of memory");
    for (size_t i = 0; i < x.n; i++) h[i] = (float)(i % 13);
    CU(cudaMemcpy(x.s, h, x.n * sizeof(float), cudaMemcpyHostToDevice));
    printf("# fakegpu_smallcall_bench: allreduce f32 sum of %zu bytes, 1 rank on the fake device, %ld calls "
           "after %ld\n", x.n * sizeof(float), calls, warmup);
    printf("# %-8s %10s  %s\n", "mode", "ns/call", "CUDA and NCCL calls per call");
    for (int k = 0; k < nm; k++) {
        x.mode = modes[k];
        CU(cudaMemset(x.r, 0, x.n * sizeof(float)));
        for (long i = 0; i < warmup; i++) one(&x);
        check(&x, h);
        fk_call before[FK_MAX_COUNTED], diff[FK_MAX_COUNTED];
        int nb = fk_calls_snapshot(before, FK_MAX_COUNTED);
        double t0 = now_ns();
        smallcall_loop(&x, calls);
        double t1 = now_ns();
        long total[FK_LIB_N];
        int nd = (int)fk_calls_since(before, nb < FK_MAX_COUNTED ? nb : FK_MAX_COUNTED, diff, FK_MAX_COUNTED, total);
        printf("  %-8s %10.0f  cuda %.2f, nccl %.2f:", mode_name[x.mode], (t1 - t0) / (double)calls,
               (double)total[FK_LIB_CUDA] / (double)calls, (double)total[FK_LIB_NCCL] / (double)calls);
        for (int i = 0; i < nd; i++) printf(" %s %.2f", diff[i].name, (double)diff[i].n / (double)calls);
        printf("\n");
    }
    free(h);
    CU(cudaFree(x.s));
    CU(cudaFree(x.r));
    CU(cudaStreamDestroy(x.st));
    NC(ncclCommDestroy(x.nc));
    DT(dt_finalize());
    return 0;
}
