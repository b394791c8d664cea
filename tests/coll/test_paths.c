/* coll_paths: allreduce, reduce_scatter, allgather, broadcast and reduce at
 * sizes that take dtrain's own data paths (coll.h): through the shared-memory
 * window on one host, the two-level path across hosts (tests/multihost runs
 * this file on two). Every dtype x op x (in place, out of place), on the
 * world and every sub-communicator of this world size, counts odd (33331
 * per rank: every chunk of a small DTRAIN_SHM_CHUNK_BYTES ends mid-block),
 * then 2^18 + 3 per rank (f32, several default chunks); exact data, results
 * compared bitwise with references from every member's known inputs, guards
 * after every buffer, inputs of out-of-place calls unchanged. Each call's
 * data path (the transport's counters) must be the one the test's own model
 * predicts from the hosts and the settings (path_model.h), so a call that
 * silently fell back to MPI fails too. */
#define _POSIX_C_SOURCE 200809L
#include "coll_common.h"
#include "path_model.h"

static const int kinds[] = {J_AR, J_RS, J_AG, J_BC, J_RED};
static const int pm_of[] = {[J_AR] = PM_AR, [J_RS] = PM_RS, [J_AG] = PM_AG, [J_BC] = PM_BC, [J_RED] = PM_RED};

/* Run one job, check its result and its path. */
static void one(const tcomm *t, int kind, dt_dtype dt, dt_op op, size_t n, int ip, int root) {
    job_t j;
    job_init(&j, kind, t, dt, op, n, ip, root, -1, 11);
    size_t es = dt_dtype_size(dt), p = (size_t)t->n;
    size_t bytes = (kind == J_RS || kind == J_AG) ? n * p * es : n * es;
    int want = pm_expect(t, pm_of[kind], dt, op, bytes, 0);
    char what[400];
    snprintf(what, sizeof what, "%s (%zu bytes)", j.what, bytes);
    pm_snap before = pm_now();
    if (run_job(&j)) pm_took(&before, want, what);
}

int main(void) {
    coll_init();
    tcomm tc[8];
    int nc = setup_comms(tc);
    pm_init();
    const size_t n = 33331;
    for (int c = 0; c < nc; c++) {
        const tcomm *t = &tc[c];
        for (int dt = 0; dt < DT_NUM_DTYPES; dt++)
            for (int ip = 0; ip < 2; ip++)
                for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
                    int kind = kinds[k];
                    int nops = (kind == J_AG || kind == J_BC) ? 1 : DT_NUM_OPS;
                    for (int op = 0; op < nops; op++) {
                        if (kind == J_BC || kind == J_RED) { /* the first and the last member as root */
                            one(t, kind, (dt_dtype)dt, (dt_op)op, n, ip, t->mem[0]);
                            if (t->n > 1) one(t, kind, (dt_dtype)dt, (dt_op)op, n, ip, t->mem[t->n - 1]);
                        } else {
                            one(t, kind, (dt_dtype)dt, (dt_op)op, n, ip, -1);
                        }
                    }
                }
    }
    /* several default (1 MiB) chunks per call, on the world */
    const size_t big = ((size_t)1 << 18) + 3;
    for (int ip = 0; ip < 2; ip++)
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
            one(&tc[0], kinds[k], DT_F32, DT_SUM, big, ip, kinds[k] == J_BC || kinds[k] == J_RED ? W - 1 : -1);
    pm_free();
    CHECK_OK(dt_finalize());
    return dt_test_finish("coll_paths");
}
