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
 * silently fell back to MPI fails too. Then the same with inputs in
 * dt_comm_alloc_shared memory (one region per communicator), which on one
 * host take the single-copy paths (any group size): reduce_scatter in place
 * and into plain memory, allgather in place, broadcast in place and into
 * plain memory off the root at another offset; and an allgather from plain
 * memory into the region, which does not. */
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

/* kind J_RS / J_AG / J_BC of n per rank on the region `mem` of t (in place,
 * or from / into a plain buffer), its result and its path checked */
static void on_region(const tcomm *t, char *mem, int kind, dt_dtype dt, dt_op op, size_t n, int ip) {
    size_t es = dt_dtype_size(dt), p = (size_t)t->n, g = (size_t)t->grank;
    int root = t->mem[t->n - 1];
    uint64_t salt = hash4(77, (uint64_t)kind, n, (uint64_t)dt * 8 + (uint64_t)op);
    gen_kind gk = kind == J_RS ? gen_for(op) : GEN_RAW;
    char *res = NULL, *own = malloc(p * n * es + 1), *want = malloc(p * n * es + 1);
    size_t bytes = kind == J_BC ? n * es : p * n * es, nres = kind == J_RS ? n : kind == J_AG ? p * n : n;
    int region = 1, rc;
    char what[200];
    snprintf(what, sizeof what, "%s on dt_comm_alloc_shared memory comm=%.60s %s%s%s count=%zu %s", job_names[kind],
             t->name, dt_dtype_name(dt), kind == J_RS ? " op=" : "", kind == J_RS ? dt_op_name(op) : "", n,
             ip == 1 ? "in-place" : ip == 2 ? "from the region" : "out-of-place");
    pm_snap before = pm_now();
    if (kind == J_RS) {
        gen_buf(dt, gk, ME, 0, p * n, salt, mem);
        res = ip ? mem + g * n * es : own;
        pm_snap b2 = pm_now();
        before = b2;
        rc = dt_reduce_scatter(mem, res, p * n, dt, op, t->comm);
        expect_reduce(dt, op, t, g * n, n, salt, want);
    } else if (kind == J_AG) { /* ip 0: plain -> region; 1: in place in the region; 2: region -> plain */
        char *in = ip == 1 ? mem + g * n * es : ip == 2 ? mem : own, *outp = ip == 2 ? own : mem;
        memset(outp, 0xee, p * n * es);
        gen_buf(dt, gk, ME, 0, n, salt, in);
        region = ip != 0; /* the single-copy path needs the input there */
        before = pm_now();
        rc = dt_allgather(in, outp, n, dt, t->comm);
        res = outp;
        for (size_t q = 0; q < p; q++) gen_buf(dt, gk, t->mem[q], 0, n, salt, want + q * n * es);
    } else { /* the root's input in the region; the outputs there (ip) or plain */
        char *outp = ip ? mem : own;
        if (ME == root) gen_buf(dt, gk, ME, 0, n, salt, mem);
        memset(outp == mem && ME == root ? own : outp, 0xee, n * es);
        before = pm_now();
        rc = dt_broadcast(ME == root ? mem : NULL, outp, n, dt, root, t->comm);
        res = outp;
        gen_buf(dt, gk, root, 0, n, salt, want);
    }
    CHECK(rc == DT_OK, "%s -> %s: %s", what, dt_status_str(rc), dt_last_error());
    if (rc == DT_OK && same_elems(what, dt, res, want, nres)) {
        int path = pm_expect_at(t, kind == J_RS ? PM_RS : kind == J_AG ? PM_AG : PM_BC, dt, op, bytes, 0, region);
        if (pm_took(&before, path, what)) dt_test_passed++;
    }
    free(own);
    free(want);
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
    /* dt_comm_alloc_shared memory: one region per communicator, reused */
    const size_t rn = (size_t)150001; /* per rank: above 512 KiB in all for f32 at 2 ranks */
    for (int c = 0; c < nc; c++) {
        const tcomm *t = &tc[c];
        char *mem = NULL;
        CHECK_OK(dt_comm_alloc_shared(t->comm, rn * (size_t)t->n * 4, (void **)&mem));
        if (!mem) continue;
        for (int ip = 0; ip < 2; ip++) {
            on_region(t, mem, J_RS, DT_F32, DT_SUM, rn, ip);
            on_region(t, mem, J_RS, DT_I32, ip ? DT_MAX : DT_PROD, rn, ip);
            on_region(t, mem, J_RS, DT_F64, DT_AVG, rn / 2, ip);
            on_region(t, mem, J_BC, DT_F32, DT_SUM, rn * (size_t)t->n, ip);
            on_region(t, mem, J_BC, DT_I64, DT_SUM, rn * (size_t)t->n / 2, ip);
        }
        for (int ip = 0; ip < 3; ip++) {
            on_region(t, mem, J_AG, DT_F32, DT_SUM, rn, ip);
            on_region(t, mem, J_AG, DT_U8, DT_SUM, rn * 4, ip);
        }
        CHECK_OK(dt_comm_free_shared(t->comm, mem));
    }
    pm_free();
    CHECK_OK(dt_finalize());
    return dt_test_finish("coll_paths");
}
