/* bench/dtrain-bench/bench_device.c - dtrain-bench --device: allreduce on CUDA
 * device buffers (CUDA builds), against raw ncclAllReduce on the same
 * buffers (--vs-nccl, where every rank has a GPU of its own: NCCL's own
 * communicator, made here) or MPI_Allreduce on pinned host buffers of the
 * same size (--vs-mpi: what the staged path adds to).
 *
 * Per size: dtrain's asynchronous form (enqueued on a stream, the handle
 * freed at once: stream order, as a training loop uses it) and its blocking
 * form (the host waits for every call); the reference enqueued the same way
 * as the asynchronous form. Each block: a barrier, `iters` calls, the stream
 * synchronised, the time per call = max over ranks; `rounds` blocks of each,
 * alternated, best kept. busbw as nccl-tests (2(n-1)/n x algbw; 0 at one
 * rank, so the ratio is taken on time: ref time / dtrain time = dtrain algbw
 * / ref algbw). Also the host's time per call before the stream is
 * synchronised ("enq": what issuing the calls cost the host, dtrain's async
 * form against raw NCCL's), which bounds small calls when it exceeds the
 * device's time per call; the smallest size's is printed last. Results are
 * checked (small integers: exact sums). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <mpi.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int g_rank, g_size;
static dt_comm *g_w;

static void fail(const char *what, const char *msg) {
    fprintf(stderr, "dtrain-bench --device: rank %d: %s: %s\n", g_rank, what, msg);
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}
#define CU(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) fail(#x, cudaGetErrorString(e_)); } while (0)
#define NC(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) fail(#x, ncclGetErrorString(r_)); } while (0)
#define DT(x) do { if ((x) != DT_OK) fail(#x, dt_last_error()); } while (0)

void bench_device_select(void) {
    const char *v = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!v) v = getenv("LOCAL_RANK");
    if (!v) v = getenv("SLURM_LOCALID");
    int n = 0;
    if (v && cudaGetDeviceCount(&n) == cudaSuccess && n > 0) cudaSetDevice(atoi(v) % n);
    cudaGetLastError();
}

static double tmax(double t) {
    double o = t;
    DT(dt_allreduce(&t, &o, 1, DT_F64, DT_MAX, g_w));
    return o;
}

enum { K_ASYNC, K_BLOCK, K_NCCL, K_MPI };

/* time per call of `iters` calls of `kind`, the stream synchronised; *enq:
 * per call before the synchronisation (the host's issuing) */
static double block(int kind, float *s, float *r, float *hs, float *hr, size_t n, int iters, dt_comm *w,
                    ncclComm_t nc, cudaStream_t st, double *enq) {
    dt_coll_opts o = {.mem = DT_MEM_DEVICE, .stream = st};
    DT(dt_barrier(w));
    double t0 = now_s();
    for (int i = 0; i < iters; i++) {
        dt_work *wk = NULL;
        switch (kind) {
        case K_ASYNC: DT(dt_allreduce_ex(s, r, n, DT_F32, DT_SUM, w, &o, &wk)); dt_work_free(wk); break;
        case K_BLOCK: DT(dt_allreduce_ex(s, r, n, DT_F32, DT_SUM, w, &o, NULL)); break;
        case K_NCCL: NC(ncclAllReduce(s, r, n, ncclFloat32, ncclSum, nc, st)); break;
        default: MPI_Allreduce(hs, hr, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
        }
    }
    double t1 = now_s();
    CU(cudaStreamSynchronize(st));
    double t = tmax((now_s() - t0) / iters);
    *enq = tmax((t1 - t0) / iters);
    return t;
}

int bench_device_main(size_t minb, size_t maxb, size_t factor, int iters, int warmup, int rounds, int vs_nccl,
                      int vs_mpi, dt_comm *w) {
    g_w = w;
    g_rank = dt_comm_rank(w);
    g_size = dt_comm_size(w);
    const char *path = dt_comm_device_path(w);
    if (strcmp(path, "none") == 0) {
        if (g_rank == 0) fprintf(stderr, "dtrain-bench --device: this process has no CUDA device\n");
        return 2;
    }
    int dev = -1;
    CU(cudaGetDevice(&dev));
    int have_nccl_ref = vs_nccl && strcmp(path, "nccl") == 0;
    ncclComm_t nc = NULL;
    if (have_nccl_ref) {
        ncclUniqueId id;
        if (g_rank == 0) NC(ncclGetUniqueId(&id));
        DT(dt_broadcast(&id, &id, sizeof id, DT_U8, 0, w));
        NC(ncclCommInitRank(&nc, g_size, id, g_rank));
    }
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    if (g_rank == 0) {
        printf("# dtrain-bench --device: allreduce f32 sum, %d rank(s), device path %s, device %d%s%s\n", g_size, path,
               dev, vs_nccl && !have_nccl_ref ? " (no raw NCCL reference: the path is not nccl)" : "",
               have_nccl_ref ? ", reference: raw ncclAllReduce on the same buffers" :
               vs_mpi ? ", reference: MPI_Allreduce on pinned host buffers" : "");
        printf("# async: dt_allreduce_ex enqueued on a stream, handle freed (stream order); blocking: the host waits "
               "each call; ratio = ref time / async time (= busbw ratio)\n");
        printf("#  %10s %11s | %9s %8s %8s | %9s %8s | %9s %8s %8s | %6s %5s | %9s %9s\n", "bytes", "count",
               "async us", "algbw", "busbw", "block us", "busbw", "ref us", "algbw", "busbw", "ratio", "wrong",
               "enq us", "ref enq");
    }
    double factor_bus = g_size > 1 ? 2.0 * (g_size - 1) / g_size : 0.0;
    double ratio_min = INFINITY, enq_first[2] = {-1, -1};
    size_t enq_bytes = 0;
    int64_t wrong_total = 0;
    for (size_t b = minb; b <= maxb;) {
        size_t n = b / sizeof(float);
        if (n == 0) n = 1;
        size_t bytes = n * sizeof(float);
        float *s, *r, *hs = NULL, *hr = NULL, *host = malloc(bytes);
        CU(cudaMalloc((void **)&s, bytes));
        CU(cudaMalloc((void **)&r, bytes));
        if (vs_mpi && !have_nccl_ref) {
            CU(cudaHostAlloc((void **)&hs, bytes, 0));
            CU(cudaHostAlloc((void **)&hr, bytes, 0));
        }
        for (size_t i = 0; i < n; i++) host[i] = (float)((g_rank + 1) * (int)(i % 7 + 1));
        CU(cudaMemcpy(s, host, bytes, cudaMemcpyHostToDevice));
        /* a pageable cudaMemcpy may return before its DMA lands, and the calls
         * below run on a non-blocking stream that does not wait for it */
        CU(cudaDeviceSynchronize());
        /* check once: exact small integers */
        DT(dt_allreduce_ex(s, r, n, DT_F32, DT_SUM, w, &(dt_coll_opts){.mem = DT_MEM_DEVICE, .stream = st}, NULL));
        CU(cudaMemcpy(host, r, bytes, cudaMemcpyDeviceToHost));
        int64_t wrong = 0, wsum = 0;
        float ranks = (float)g_size * (float)(g_size + 1) / 2.0f;
        for (size_t i = 0; i < n; i++) wrong += host[i] != ranks * (float)(i % 7 + 1);
        DT(dt_allreduce(&wrong, &wsum, 1, DT_I64, DT_SUM, w));
        wrong_total += wsum;
        int ref = have_nccl_ref ? K_NCCL : (vs_mpi ? K_MPI : -1);
        double enq, best_enq[4] = {INFINITY, INFINITY, INFINITY, INFINITY};
        for (int k = 0; k < 4; k++)
            if (k <= K_BLOCK || k == ref) block(k, s, r, hs, hr, n, warmup, w, nc, st, &enq);
        double best[4] = {INFINITY, INFINITY, INFINITY, INFINITY};
        for (int rd = 0; rd < rounds; rd++)
            for (int k = 0; k < 4; k++) {
                if (k > K_BLOCK && k != ref) continue;
                double t = block(k, s, r, hs, hr, n, iters, w, nc, st, &enq);
                if (t < best[k]) best[k] = t;
                if (enq < best_enq[k]) best_enq[k] = enq;
            }
        if (enq_first[0] < 0) {
            enq_first[0] = best_enq[K_ASYNC];
            enq_first[1] = ref == K_NCCL ? best_enq[K_NCCL] : -1;
            enq_bytes = bytes;
        }
        if (g_rank == 0) {
            double a = (double)bytes / best[K_ASYNC] / 1e9;
            printf("   %10zu %11zu | %9.2f %8.2f %8.2f | %9.2f %8.2f |", bytes, n, best[K_ASYNC] * 1e6, a,
                   a * factor_bus, best[K_BLOCK] * 1e6, (double)bytes / best[K_BLOCK] / 1e9 * factor_bus);
            if (ref >= 0) {
                double rb = (double)bytes / best[ref] / 1e9, ratio = best[ref] / best[K_ASYNC];
                if (ratio < ratio_min) ratio_min = ratio;
                printf(" %9.2f %8.2f %8.2f | %6.3f", best[ref] * 1e6, rb, rb * factor_bus, ratio);
            } else {
                printf(" %9s %8s %8s | %6s", "-", "-", "-", "-");
            }
            printf(" %5lld | %9.2f", (long long)wsum, best_enq[K_ASYNC] * 1e6);
            if (ref == K_NCCL) printf(" %9.2f\n", best_enq[K_NCCL] * 1e6);
            else printf(" %9s\n", "-");
            fflush(stdout);
        }
        CU(cudaFree(s));
        CU(cudaFree(r));
        if (hs) cudaFreeHost(hs);
        if (hr) cudaFreeHost(hr);
        free(host);
        if (b >= maxb) break;
        size_t nb = b * factor;
        if (nb / factor != b || nb > maxb) break;
        b = nb;
    }
    if (g_rank == 0) {
        printf("# Out of bounds values : %lld %s\n", (long long)wrong_total, wrong_total ? "ERROR" : "OK");
        if (isfinite(ratio_min)) printf("# Ratio vs %s (time) : min %.3f\n", have_nccl_ref ? "NCCL" : "MPI", ratio_min);
        if (enq_first[1] >= 0)
            printf("# Enqueue per call at %zu bytes (host) : dtrain %.2f us, NCCL %.2f us, dtrain's own %+.2f us\n", enq_bytes,
                   enq_first[0] * 1e6, enq_first[1] * 1e6, (enq_first[0] - enq_first[1]) * 1e6);
        printf("#\n");
        fflush(stdout);
    }
    if (nc) ncclCommDestroy(nc);
    cudaStreamDestroy(st);
    return wrong_total ? 1 : 0;
}
