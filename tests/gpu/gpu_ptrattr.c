/* gpu_ptrattr: what finding the memory kind costs (coll.h, "Device memory"):
 * ns per cudaPointerGetAttributes on a malloc'd host pointer, a pinned one
 * and a device one, and ns per dt_allreduce of one f32 element on host memory
 * at one rank with the memory kind found (the plain call, auto: two
 * classifications) and said (DT_MEM_HOST: none), in alternated rounds. Prints
 * the figures; fails only if a call fails. Skipped (77) without a device. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>
#include "gpu_common.h"
#include "testutil.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double attr_ns(const void *p, int n) {
    struct cudaPointerAttributes a;
    double t0 = now();
    for (int i = 0; i < n; i++)
        if (cudaPointerGetAttributes(&a, p) != cudaSuccess) return -1;
    return (now() - t0) / n * 1e9;
}

int main(void) {
    gpu_require("gpu_ptrattr");
    enum { N = 200000 };
    float *h = malloc(4096), *pin, *d;
    gpu_check(cudaHostAlloc((void **)&pin, 4096, 0), "cudaHostAlloc");
    d = gpu_alloc(4096);
    attr_ns(h, 1000);
    printf("gpu_ptrattr: cudaPointerGetAttributes: host %.1f ns, pinned host %.1f ns, device %.1f ns per call\n",
           attr_ns(h, N), attr_ns(pin, N), attr_ns(d, N));
    CHECK_OK(dt_init());
    dt_comm *w = dt_comm_world();
    dt_coll_opts host = {.mem = DT_MEM_HOST, .stream = NULL};
    double best[2] = {1e9, 1e9};
    for (int round = 0; round < 6; round++)
        for (int k = 0; k < 2; k++) {
            double t0 = now();
            for (int i = 0; i < N; i++) {
                int rc = k ? dt_allreduce_ex(h, h + 1, 1, DT_F32, DT_SUM, w, &host, NULL)
                           : dt_allreduce(h, h + 1, 1, DT_F32, DT_SUM, w);
                if (rc) { CHECK_OK(rc); return dt_test_finish("gpu_ptrattr"); }
            }
            double t = (now() - t0) / N * 1e9;
            if (t < best[k]) best[k] = t;
        }
    printf("gpu_ptrattr: dt_allreduce of 1 f32 on host memory, 1 rank: auto %.1f ns, DT_MEM_HOST %.1f ns per call "
           "(auto - host = %.1f ns: two classifications)\n", best[0], best[1], best[0] - best[1]);
    dt_test_passed++;
    CHECK_OK(dt_finalize());
    free(h);
    cudaFreeHost(pin);
    gpu_release(d);
    return dt_test_finish("gpu_ptrattr");
}
