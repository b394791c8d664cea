/* bench/programs/step_clock.h - the clocks and the sort comparator of the
 * single-process step benchmarks (nn_step_bench.c, gpt_step_bench.c). */
#ifndef DT_BENCH_STEP_CLOCK_H
#define DT_BENCH_STEP_CLOCK_H
#include <time.h>

static inline double clk(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
/* Wall time, and this thread's CPU time (robust when other processes compete
 * for the cores; with 1 BLAS thread all work runs on this thread). */
static inline double now(void) { return clk(CLOCK_MONOTONIC); }
static inline double cpu(void) { return clk(CLOCK_THREAD_CPUTIME_ID); }

/* qsort comparator for doubles, ascending */
static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
#endif
