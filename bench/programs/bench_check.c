/* bench/programs/bench_check.c - fault_bench_check: cost of the collective
 * fingerprint check, measured with raw MPI_Allreduce, dt_allreduce with the
 * check on and dt_allreduce with the check off interleaved round by round in
 * ONE job (so that load from other processes hits the three alike), f32 sum,
 * out-of-place.
 *   mpirun -np 2 build/tests/fault_bench_check [ROUNDS] [MIN_BYTES] [MAX_BYTES]
 * Per size: the best (lowest) time of each variant over the rounds (per
 * round: max over ranks of the per-iteration mean), and the ratios
 * MPI/on (= busbw on / busbw MPI) and off/on; "sep" is the check on with the
 * inline (piggy-back) path disabled: a separate header exchange, then the
 * native allreduce. A benchmark: tests/bench only runs it briefly. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dtrain/dtrain.h"
#include "transport/settings.h" /* dt_rel_set_for_testing: the check on/off at run time */

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 15;
    size_t minb = argc > 2 ? strtoull(argv[2], NULL, 10) : 4096, maxb = argc > 3 ? strtoull(argv[3], NULL, 10) : (64u << 20);
    if (dt_init()) { fprintf(stderr, "dt_init: %s\n", dt_last_error()); return 1; }
    dt_comm *w = dt_comm_world();
    int me = dt_comm_rank(w);
    MPI_Comm mc;
    MPI_Comm_dup(MPI_COMM_WORLD, &mc);
    size_t lim = dt_rel_inline_max();
    int check0 = dt_check_collectives_enabled();
    float *s = malloc(maxb), *r = malloc(maxb);
    if (!s || !r) return 1;
    for (size_t i = 0; i < maxb / 4; i++) s[i] = (float)(i % 7);
    memset(r, 0, maxb);
    if (me == 0)
        printf("# bench_check: %d ranks, f32 sum, out-of-place, %d rounds interleaved (MPI, check on, check off), inline limit %zu B\n"
               "# %10s %6s %10s %10s %10s %10s %8s %8s %10s %10s\n", dt_comm_size(w), rounds, lim, "bytes", "iters",
               "MPI(us)", "on(us)", "off(us)", "sep(us)", "MPI/on", "off/on", "med on", "med off");
    for (size_t b = minb; b <= maxb; b *= 4) {
        size_t n = b / 4;
        int iters = b <= 16384 ? 400 : b <= 262144 ? 100 : b <= (4u << 20) ? 20 : 4;
        double *t[4];
        for (int m = 0; m < 4; m++) t[m] = malloc(sizeof(double) * (size_t)rounds);
        for (int k = 0; k < rounds; k++)
            for (int m = 0; m < 4; m++) {
                /* same on every rank, between calls */
                if (m > 0) dt_rel_set_for_testing(m != 2, m == 3 ? 0 : lim);
                for (int i = 0; i < 3; i++) /* warm-up */
                    if (m == 0) MPI_Allreduce(s, r, (int)n, MPI_FLOAT, MPI_SUM, mc);
                    else dt_allreduce(s, r, n, DT_F32, DT_SUM, w);
                MPI_Barrier(mc);
                double t0 = MPI_Wtime();
                for (int i = 0; i < iters; i++)
                    if (m == 0) MPI_Allreduce(s, r, (int)n, MPI_FLOAT, MPI_SUM, mc);
                    else if (dt_allreduce(s, r, n, DT_F32, DT_SUM, w)) { fprintf(stderr, "%s\n", dt_last_error()); return 1; }
                double dt = (MPI_Wtime() - t0) / iters * 1e6, mx;
                MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, mc);
                t[m][k] = mx;
            }
        for (int m = 0; m < 4; m++) qsort(t[m], (size_t)rounds, sizeof(double), cmpd);
        if (me == 0)
            printf("  %10zu %6d %10.2f %10.2f %10.2f %10.2f %8.3f %8.3f %10.2f %10.2f\n", b, iters, t[0][0], t[1][0],
                   t[2][0], t[3][0], t[0][0] / t[1][0], t[2][0] / t[1][0], t[1][rounds / 2], t[2][rounds / 2]);
        for (int m = 0; m < 4; m++) free(t[m]);
    }
    dt_rel_set_for_testing(check0, lim);
    MPI_Comm_free(&mc);
    free(s);
    free(r);
    dt_finalize();
    return 0;
}
