/* mh_progress [ITERS]: MPI's progress while ranks wait in dtrain's
 * shared-memory window, run by tests/multihost (2 hosts x 2 ranks, the
 * window and the two-level path at every size).
 *
 * Each iteration: a reduce to the last rank (MPI_Reduce across the hosts),
 * then an allreduce (two-level: the window within each host first). The
 * leaves of MPI_Reduce's tree return from it while their data may still sit
 * in MPI's transport, which sends it only while the process is inside MPI;
 * they then wait in the window's barrier for host-mates that wait inside
 * MPI_Reduce for that data. Before the window's barrier called into MPI
 * (shm_mpi.c, mpi_progress), this hung now and then until the watchdog's
 * timeout (seen in CI, then 1 run in about 50 of tests/coll/test_assoc.c
 * under ASan on the loaded 2-core VM). Many iterations raise the chance to
 * meet it; a hang ends in the watchdog's STALL report (exit 75).
 *
 * Every result is checked: element i of the reduce on the root is the mean
 * over the ranks of (rank + 1) * (i % 7 + iteration), of the allreduce the
 * maximum, (size - 1) * (i % 7) + iteration (exact in float32 at these sizes). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include "testutil.h"

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 400;
    CHECK_OK(dt_init());
    dt_comm *w = dt_comm_world();
    int n = dt_comm_size(w), me = dt_comm_rank(w), root = n - 1;
    size_t count = 20011; /* 80 KB: MPI_Reduce's binomial tree, the two-level allreduce */
    float *x = malloc(count * sizeof *x), *y = malloc(count * sizeof *y);
    CHECK(x && y, "out of memory");
    size_t bad = 0;
    for (int it = 0; it < iters && x && y; it++) {
        for (size_t i = 0; i < count; i++) x[i] = (float)((me + 1) * ((int)(i % 7) + it));
        CHECK_OK(dt_reduce(x, y, count, DT_F32, DT_AVG, root, w));
        for (size_t i = 0; me == root && i < count; i++) {
            double want = (double)((int)(i % 7) + it) * (n + 1) / 2.0;
            bad += y[i] != (float)want;
        }
        for (size_t i = 0; i < count; i++) x[i] = (float)(me * (int)(i % 7) + it);
        CHECK_OK(dt_allreduce(x, y, count, DT_F32, DT_MAX, w));
        for (size_t i = 0; i < count; i++) bad += y[i] != (float)((n - 1) * (int)(i % 7) + it);
    }
    CHECK(bad == 0, "%zu elements differ from the exact results over %d iterations", bad, iters);
    if (bad == 0) dt_test_passed++;
    free(x);
    free(y);
    CHECK_OK(dt_finalize());
    return dt_test_finish("mh_progress");
}
