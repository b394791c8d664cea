/* bench/programs/c_allreduce_small.c - the C side of bench/py_overhead.py:
 * the median time of one small float32 dt_allreduce (and of MPI_Allreduce on
 * the same buffers), measured call by call on every rank, reported by rank 0.
 *
 *   mpirun -np 2 build/bin/c_allreduce_small [--bytes 4096] [--iters 20000]
 *                                           [--warmup 1000] [--rounds 5] [--block 50]
 *
 * Each round times `iters` dtrain calls then `iters` MPI calls (after a
 * barrier) in blocks of `block` consecutive calls (default 50): a block's time
 * divided by its calls is one sample, so that everything the loop does counts
 * (timing single calls of a collective on one rank hides the caller's own
 * overhead: the peer is then already waiting). The best per-round median of
 * the samples of each is printed as
 *   dtrain_us=<median> mpi_us=<median> bytes=<n> ranks=<size> iters=<n> rounds=<n> block=<n>
 * Started without a launcher it runs standalone (void backend: dt_allreduce is
 * a copy, no MPI; mpi_us=-1), which isolates the per-call cost of the API.
 * Built by tests/python/CMakeLists.txt (it links the shared libdtrain, as the
 * Python front does). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "dtrain/dtrain.h"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

int main(int argc, char **argv) {
    long bytes = 4096, iters = 20000, warmup = 1000, rounds = 5, block = 50;
    for (int i = 1; i + 1 < argc; i += 2) {
        long v = strtol(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "--bytes")) bytes = v;
        else if (!strcmp(argv[i], "--iters")) iters = v;
        else if (!strcmp(argv[i], "--warmup")) warmup = v;
        else if (!strcmp(argv[i], "--rounds")) rounds = v;
        else if (!strcmp(argv[i], "--block")) block = v;
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    if (bytes < 4 || iters < 1 || warmup < 0 || rounds < 1 || block < 1) {
        fprintf(stderr, "bad options\n");
        return 2;
    }
    int rc = dt_init();
    if (rc) { fprintf(stderr, "dt_init: %s\n", dt_last_error()); return 1; }
    dt_comm *w = dt_comm_world();
    /* standalone (void backend: no launcher) MPI is not initialised: dtrain only */
    int use_mpi = strcmp(dt_comm_backend(w), "mpi") == 0;
    size_t n = (size_t)bytes / sizeof(float);
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    long nblocks = iters / block > 0 ? iters / block : 1;
    double *t = malloc((size_t)nblocks * sizeof *t);
    if (!x || !y || !t) { fprintf(stderr, "out of memory\n"); return 1; }
    for (size_t i = 0; i < n; i++) x[i] = (float)(i % 7);
    double best_dt = 1e30, best_mpi = 1e30;
    for (long r = 0; r < rounds; r++) {
        for (long i = 0; i < warmup; i++) dt_allreduce(x, y, n, DT_F32, DT_SUM, w);
        dt_barrier(w);
        for (long b = 0; b < nblocks; b++) {
            double t0 = now_us();
            for (long i = 0; i < block; i++) rc |= dt_allreduce(x, y, n, DT_F32, DT_SUM, w);
            t[b] = (now_us() - t0) / (double)block;
            if (rc) { fprintf(stderr, "dt_allreduce: %s\n", dt_last_error()); return 1; }
        }
        double m = median(t, (int)nblocks);
        if (m < best_dt) best_dt = m;
        if (!use_mpi) continue;
        for (long i = 0; i < warmup; i++)
            MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        for (long b = 0; b < nblocks; b++) {
            double t0 = now_us();
            for (long i = 0; i < block; i++)
                MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            t[b] = (now_us() - t0) / (double)block;
        }
        m = median(t, (int)nblocks);
        if (m < best_mpi) best_mpi = m;
    }
    if (dt_comm_rank(w) == 0)
        printf("dtrain_us=%.3f mpi_us=%.3f bytes=%ld ranks=%d iters=%ld rounds=%ld block=%ld\n",
               best_dt, use_mpi ? best_mpi : -1.0, bytes, dt_comm_size(w), nblocks * block,
               rounds, block);
    free(x);
    free(y);
    free(t);
    return dt_finalize() ? 1 : 0;
}
