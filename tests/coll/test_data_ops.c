/* coll_move: allgather, broadcast, gather, scatter, all_to_all, send/recv and
 * barrier, with every dtype x (in-place, out-of-place) x counts {0, 1, 7, 1000} x
 * every root (and every ordered pair for send/recv), on the world and on every
 * sub-communicator of this world size; plus large counts. Data are arbitrary bit
 * patterns (NaNs included) and must arrive bit for bit. Off root the unused
 * buffer is NULL for every other root. */
#define _POSIX_C_SOURCE 200809L
#include "coll_common.h"

int main(void) {
    coll_init();
    tcomm tc[8];
    int nc = setup_comms(tc);
    static const size_t counts[] = {0, 1, 7, 1000};
    job_t j;
    for (int c = 0; c < nc; c++) {
        const tcomm *t = &tc[c];
        for (int dt = 0; dt < DT_NUM_DTYPES; dt++) {
            for (int ip = 0; ip < 2; ip++)
                for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
                    size_t n = counts[k];
                    job_init(&j, J_AG, t, (dt_dtype)dt, DT_SUM, n, ip, -1, -1, 0);
                    run_job(&j);
                    job_init(&j, J_A2A, t, (dt_dtype)dt, DT_SUM, n, ip, -1, -1, 0);
                    run_job(&j);
                    for (int m = 0; m < t->n; m++) {
                        job_init(&j, J_BC, t, (dt_dtype)dt, DT_SUM, n, ip, t->mem[m], -1, 0);
                        run_job(&j);
                        job_init(&j, J_GA, t, (dt_dtype)dt, DT_SUM, n, ip, t->mem[m], -1, 0);
                        run_job(&j);
                        job_init(&j, J_SC, t, (dt_dtype)dt, DT_SUM, n, ip, t->mem[m], -1, 0);
                        run_job(&j);
                    }
                    if (ip) continue;
                    for (int a = 0; a < t->n; a++)
                        for (int b = 0; b < t->n; b++) {
                            if (a == b) continue;
                            job_init(&j, J_P2P, t, (dt_dtype)dt, DT_SUM, n, 0, t->mem[a], t->mem[b], 0);
                            if (job_active(&j)) run_job(&j);
                            else job_free(&j);
                        }
                }
            job_init(&j, J_BAR, t, (dt_dtype)dt, DT_SUM, 0, 0, -1, -1, 0);
            run_job(&j);
        }
    }
    /* Large counts. */
    const size_t big = (1u << 20) + 3, quarter = (1u << 18) + 1;
    for (int c = 0; c < (nc > 1 ? 2 : 1); c++) {
        const tcomm *t = &tc[c];
        job_init(&j, J_AG, t, DT_F32, DT_SUM, quarter, 0, -1, -1, 1);
        run_job(&j);
        job_init(&j, J_AG, t, DT_F16, DT_SUM, quarter, 1, -1, -1, 1);
        run_job(&j);
        job_init(&j, J_BC, t, DT_F32, DT_SUM, big, 0, t->mem[t->n - 1], -1, 1);
        run_job(&j);
        job_init(&j, J_BC, t, DT_I8, DT_SUM, big, 1, t->mem[0], -1, 1);
        run_job(&j);
        job_init(&j, J_GA, t, DT_F64, DT_SUM, quarter / 2, 1, t->mem[0], -1, 1);
        run_job(&j);
        job_init(&j, J_SC, t, DT_F64, DT_SUM, quarter / 2, 0, t->mem[t->n - 1], -1, 1);
        run_job(&j);
        job_init(&j, J_A2A, t, DT_F32, DT_SUM, (1u << 16) + 1, 1, -1, -1, 1);
        run_job(&j);
        if (t->n > 1) {
            job_init(&j, J_P2P, t, DT_F32, DT_SUM, big, 0, t->mem[t->n - 1], t->mem[0], 1);
            if (job_active(&j)) run_job(&j);
            else job_free(&j);
        }
    }
    CHECK_OK(dt_finalize());
    return dt_test_finish("coll_move");
}
