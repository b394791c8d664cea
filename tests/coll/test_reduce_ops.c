/* coll_reduce: allreduce, reduce_scatter and reduce, with every op x every dtype x
 * (in-place, out-of-place) x counts {0, 1, 7, 1000} x every root, on the world and
 * on every sub-communicator of this world size; plus counts above the
 * shared-memory allreduce's threshold (every dtype x op) and over several of
 * its chunks, and large counts (2^20 + 3). All
 * results are compared bitwise with references computed from every member's
 * known inputs. COLL_BIG_COMMS=K runs the sections above the threshold on
 * the first K communicators only (the world first; the references of those
 * sections are most of the run time): tests/multihost sets 1. */
#define _POSIX_C_SOURCE 200809L
#include "coll_common.h"

int main(void) {
    coll_init();
    tcomm tc[8];
    int nc = setup_comms(tc);
    static const size_t counts[] = {0, 1, 7, 1000};
    job_t j;
    for (int c = 0; c < nc; c++)
        for (int dt = 0; dt < DT_NUM_DTYPES; dt++)
            for (int ip = 0; ip < 2; ip++)
                for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
                    for (int op = 0; op < DT_NUM_OPS; op++) {
                        job_init(&j, J_AR, &tc[c], (dt_dtype)dt, (dt_op)op, counts[k], ip, -1, -1, 0);
                        run_job(&j);
                        job_init(&j, J_RS, &tc[c], (dt_dtype)dt, (dt_op)op, counts[k], ip, -1, -1, 0);
                        run_job(&j);
                        for (int m = 0; m < tc[c].n; m++) {
                            job_init(&j, J_RED, &tc[c], (dt_dtype)dt, (dt_op)op, counts[k], ip,
                                     tc[c].mem[m], -1, 0);
                            run_job(&j);
                        }
                    }
                }
    const char *bc = getenv("COLL_BIG_COMMS");
    int nbig = bc && atoi(bc) > 0 && atoi(bc) < nc ? atoi(bc) : nc;
    /* Above the shared-memory allreduce's threshold (and the 64 KiB inline
     * check limit) for every dtype: 70001 elements; then 4 MiB and a
     * remainder for the dtypes it reduces natively (several chunks when run
     * with a small DTRAIN_SHM_CHUNK_BYTES, tests/coll/CMakeLists.txt). */
    for (int c = 0; c < nbig; c++)
        for (int dt = 0; dt < DT_NUM_DTYPES; dt++)
            for (int ip = 0; ip < 2; ip++)
                for (int op = 0; op < DT_NUM_OPS; op++) {
                    job_init(&j, J_AR, &tc[c], (dt_dtype)dt, (dt_op)op, 70001, ip, -1, -1, 3);
                    run_job(&j);
                }
    static const dt_dtype native[] = {DT_F32, DT_F64, DT_I8, DT_U8, DT_I32, DT_I64};
    for (int c = 0; c < (nbig > 1 ? 2 : 1); c++)
        for (size_t d = 0; d < sizeof native / sizeof native[0]; d++)
            for (int op = 0; op < DT_NUM_OPS; op++) {
                size_t n2 = ((size_t)2 << 20) / dt_dtype_size(native[d]) * 2 + 9;
                job_init(&j, J_AR, &tc[c], native[d], (dt_op)op, n2, (op + (int)d) % 2, -1, -1, 4);
                run_job(&j);
            }
    /* Large counts (odd, so any chunking leaves a remainder). */
    const size_t big = (1u << 20) + 3;
    for (int c = 0; c < (nbig > 1 ? 2 : 1); c++)
        for (int ip = 0; ip < 2; ip++) {
            job_init(&j, J_AR, &tc[c], DT_F32, DT_SUM, big, ip, -1, -1, 1);
            run_job(&j);
        }
    job_init(&j, J_AR, &tc[0], DT_F16, DT_SUM, big, 0, -1, -1, 1);
    run_job(&j);
    job_init(&j, J_AR, &tc[0], DT_BF16, DT_AVG, big, 1, -1, -1, 1);
    run_job(&j);
    job_init(&j, J_AR, &tc[0], DT_I8, DT_AVG, big, 0, -1, -1, 1);
    run_job(&j);
    /* 16-bit reductions beyond 2^22 elements (any widening chunk boundary) */
    const size_t huge16 = (1u << 22) + 5;
    job_init(&j, J_AR, &tc[0], DT_F16, DT_SUM, huge16, 0, -1, -1, 2);
    run_job(&j);
    job_init(&j, J_RED, &tc[0], DT_BF16, DT_SUM, huge16, 1, W - 1, -1, 2);
    run_job(&j);
    job_init(&j, J_RS, &tc[0], DT_F32, DT_SUM, (1u << 18) + 1, 0, -1, -1, 1);
    run_job(&j);
    job_init(&j, J_RS, &tc[0], DT_F16, DT_MAX, (1u << 18) + 1, 1, -1, -1, 1);
    run_job(&j);
    job_init(&j, J_RED, &tc[0], DT_F32, DT_SUM, big, 0, W - 1, -1, 1);
    run_job(&j);
    job_init(&j, J_RED, &tc[0], DT_F16, DT_SUM, big, 1, 0, -1, 1);
    run_job(&j);
    CHECK_OK(dt_finalize());
    return dt_test_finish("coll_reduce");
}
