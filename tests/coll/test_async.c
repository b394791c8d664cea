/* coll_async: every asynchronous form (wait and test() polling), batches of
 * several submissions completed in order (wait in order / poll the last: all
 * earlier ones must then be done / dt_coll_sync), blocking calls after pending
 * async work (order preserved), dt_work_free without a wait, list forms whose
 * dt_tensor arrays are destroyed right after submission, many outstanding
 * operations, and dt_finalize with work still pending. */
#define _POSIX_C_SOURCE 200809L
#include "coll_common.h"

/* Polls until done (at most ~120 s); returns the final status, *done set. */
static int poll_work(dt_work *w, int *done) {
    int st = DT_OK;
    *done = 0;
    for (long spins = 0; spins < 2400000 && !*done; spins++) {
        st = dt_work_test(w, done);
        if (!*done) {
            if (st != DT_OK) return st;
            sleep_us(50);
        }
    }
    return st;
}

static void run_async(job_t *j, int poll) {
    dt_work *w = NULL;
    int rc = job_submit(j, &w);
    int active = job_active(j);
    CHECK(rc == DT_OK && (w != NULL || !active), "%s async submit -> %s: %s", j->what,
          dt_status_str(rc), dt_last_error());
    if (rc != DT_OK || !active || !w) { job_free(j); return; }
    if (poll) {
        int done = 0, st = poll_work(w, &done);
        CHECK(done && st == DT_OK, "%s: polling ended with done=%d status %s: %s", j->what, done,
              dt_status_str(st), dt_last_error());
        int d2 = 0;
        st = dt_work_test(w, &d2);
        CHECK(st == DT_OK && d2 == 1, "%s: test after completion: done=%d status %s", j->what, d2,
              dt_status_str(st));
        CHECK_OK(dt_work_wait(w)); /* waiting on completed work returns its status */
    } else {
        int st = dt_work_wait(w);
        CHECK(st == DT_OK, "%s: dt_work_wait -> %s: %s", j->what, dt_status_str(st), dt_last_error());
        int d2 = 0;
        st = dt_work_test(w, &d2);
        CHECK(st == DT_OK && d2 == 1, "%s: test after wait: done=%d status %s", j->what, d2,
              dt_status_str(st));
    }
    dt_work_free(w);
    if (job_verify(j)) dt_test_passed++;
    job_free(j);
}

/* A mixed batch over all communicators. Returns the number of jobs. */
static int build_batch(job_t *jobs, tcomm *tc, int nc, uint64_t salt) {
    int nj = 0;
    for (int c = 0; c < nc; c++) {
        const tcomm *t = &tc[c];
        int first = t->mem[0], last = t->mem[t->n - 1];
        job_init(&jobs[nj++], J_AR, t, DT_F32, DT_SUM, 7, 0, -1, -1, salt);
        job_init(&jobs[nj++], J_AG, t, DT_I32, DT_SUM, 7, 1, -1, -1, salt);
        job_init(&jobs[nj++], J_RS, t, DT_F16, DT_SUM, 3, 0, -1, -1, salt);
        job_init(&jobs[nj++], J_RED, t, DT_I64, DT_MAX, 5, 0, last, -1, salt);
        job_init(&jobs[nj++], J_BC, t, DT_BF16, DT_SUM, 9, 1, first, -1, salt);
        job_init(&jobs[nj++], J_GA, t, DT_U8, DT_SUM, 4, 0, first, -1, salt);
        job_init(&jobs[nj++], J_SC, t, DT_I8, DT_SUM, 6, 1, last, -1, salt);
        job_init(&jobs[nj++], J_A2A, t, DT_F64, DT_SUM, 5, 0, -1, -1, salt);
        job_init(&jobs[nj++], J_BAR, t, DT_F32, DT_SUM, 0, 0, -1, -1, salt);
        if (t->n > 1) {
            job_init(&jobs[nj++], J_P2P, t, DT_F32, DT_SUM, 1000, 0, first, last, salt);
            job_init(&jobs[nj++], J_P2P, t, DT_U8, DT_SUM, 33, 0, last, first, salt);
        }
        job_init(&jobs[nj++], J_AR, t, DT_F16, DT_AVG, 1000, 1, -1, -1, salt);
    }
    return nj;
}

/* mode 0: wait in order; 1: poll the last active job, then every earlier one must
 * already be complete; 2: dt_coll_sync, then every job must be complete. */
static void batch(tcomm *tc, int nc, int mode) {
    job_t jobs[128];
    dt_work *w[128];
    int nj = build_batch(jobs, tc, nc, 100 + (uint64_t)mode);
    int last = -1, sub_ok = 1;
    for (int i = 0; i < nj; i++) {
        w[i] = NULL;
        int rc = job_submit(&jobs[i], &w[i]);
        if (rc != DT_OK || (job_active(&jobs[i]) && !w[i])) {
            CHECK(0, "batch %d: submit %s -> %s: %s", mode, jobs[i].what, dt_status_str(rc),
                  dt_last_error());
            sub_ok = 0;
        }
        if (w[i]) last = i;
    }
    if (!sub_ok) { fprintf(stderr, "cannot continue\n"); exit(1); }
    if (mode == 1 && last >= 0) {
        int done = 0, st = poll_work(w[last], &done);
        CHECK(done && st == DT_OK, "batch: polling the last job: done=%d %s", done, dt_status_str(st));
        int early = 0;
        for (int i = 0; i < last; i++) {
            if (!w[i]) continue;
            int d = 0;
            st = dt_work_test(w[i], &d);
            if (!d || st != DT_OK) early++;
        }
        CHECK(early == 0, "batch: %d jobs submitted before the last were not complete when it was",
              early);
    }
    if (mode == 2) {
        CHECK_OK(dt_coll_sync());
        int pending = 0;
        for (int i = 0; i < nj; i++) {
            if (!w[i]) continue;
            int d = 0, st = dt_work_test(w[i], &d);
            if (!d || st != DT_OK) pending++;
        }
        CHECK(pending == 0, "%d jobs not complete after dt_coll_sync", pending);
    }
    for (int i = 0; i < nj; i++) {
        if (!w[i]) { job_free(&jobs[i]); continue; }
        int st = dt_work_wait(w[i]);
        CHECK(st == DT_OK, "batch %d: %s -> %s: %s", mode, jobs[i].what, dt_status_str(st),
              dt_last_error());
        dt_work_free(w[i]);
        if (job_verify(&jobs[i])) dt_test_passed++;
        job_free(&jobs[i]);
    }
}

/* Async work pending, then blocking calls that read its output: the blocking call
 * must wait for the pending work first (same order on every rank). */
static void mixed(const tcomm *t) {
    float x[5], y[5];
    for (int i = 0; i < 5; i++) x[i] = (float)(ME + 1) * (float)(i + 1);
    float s = 0; /* sum over members of (m+1) */
    for (int m = 0; m < t->n; m++) s += (float)(t->mem[m] + 1);
    dt_work *w = NULL;
    CHECK_OK(dt_allreduce_async(x, x, 5, DT_F32, DT_SUM, t->comm, &w));
    CHECK_OK(dt_allreduce(x, y, 5, DT_F32, DT_SUM, t->comm));
    int d = 0;
    CHECK(w && dt_work_test(w, &d) == DT_OK && d == 1,
          "%s: async work not complete after a later blocking call returned", t->name);
    int ok = 1;
    for (int i = 0; i < 5; i++)
        ok &= x[i] == s * (float)(i + 1) && y[i] == (float)t->n * s * (float)(i + 1);
    CHECK(ok, "%s: async then blocking allreduce: x[1]=%g y[1]=%g, want %g %g", t->name,
          (double)x[1], (double)y[1], (double)(s * 2), (double)((float)t->n * s * 2));
    dt_work_free(w);

    /* async broadcast from the last member, then a blocking allreduce of it */
    int root = t->mem[t->n - 1];
    int64_t v[3] = {ME == root ? 11 : -1, ME == root ? 22 : -1, ME == root ? 33 : -1}, r[3];
    CHECK_OK(dt_broadcast_async(v, v, 3, DT_I64, root, t->comm, &w));
    CHECK_OK(dt_allreduce(v, r, 3, DT_I64, DT_SUM, t->comm));
    CHECK(v[0] == 11 && v[2] == 33 && r[0] == 11 * t->n && r[2] == 33 * t->n,
          "%s: async broadcast then blocking allreduce: v0=%lld r0=%lld", t->name,
          (long long)v[0], (long long)r[0]);
    dt_work_free(w);

    /* several async, then a blocking barrier, then all must be complete */
    dt_work *ws[6];
    int32_t a[6];
    for (int k = 0; k < 6; k++) {
        a[k] = ME + k;
        CHECK_OK(dt_allreduce_async(&a[k], &a[k], 1, DT_I32, DT_MAX, t->comm, &ws[k]));
    }
    CHECK_OK(dt_barrier(t->comm));
    int pending = 0, maxm = t->mem[t->n - 1];
    for (int k = 0; k < 6; k++) {
        int dd = 0;
        if (dt_work_test(ws[k], &dd) != DT_OK || !dd) pending++;
        dt_work_free(ws[k]);
    }
    CHECK(pending == 0, "%s: %d async works still pending after a blocking barrier", t->name, pending);
    int okk = 1;
    for (int k = 0; k < 6; k++) okk &= a[k] == maxm + k;
    CHECK(okk, "%s: async max results wrong after barrier: a0=%d want %d", t->name, a[0], maxm);
}

/* dt_work_free on running work waits for it. */
static void free_without_wait(const tcomm *t) {
    job_t j;
    job_init(&j, J_AR, t, DT_I32, DT_SUM, 1000, 0, -1, -1, 77);
    dt_work *w = NULL;
    CHECK_OK(job_submit(&j, &w));
    dt_work_free(w);
    if (job_verify(&j)) dt_test_passed++;
    job_free(&j);
    dt_work_free(NULL); /* no-op */
}

/* List forms: the dt_tensor arrays are copied at submission, so they may be
 * scribbled over and freed before the work completes. */
static void lists_async(const tcomm *t) {
    enum { NT = 5 };
    static const size_t counts[NT] = {3, 0, 1000, 1, 17};
    static const dt_dtype dts[NT] = {DT_F32, DT_I32, DT_F16, DT_I64, DT_F32};
    size_t n = (size_t)t->n, g = (size_t)t->grank;
    for (int which = 0; which < 3; which++) {
        dt_tensor *in = malloc(sizeof(dt_tensor) * NT), *out = malloc(sizeof(dt_tensor) * NT);
        char *ib[NT], *ob[NT];
        for (int i = 0; i < NT; i++) {
            size_t es = dt_dtype_size(dts[i]), c = counts[i];
            size_t ic = which == 2 ? n * c : c, oc = which == 1 ? n * c : c;
            ib[i] = malloc(ic * es + 1);
            ob[i] = malloc(oc * es + 1);
            gen_buf(dts[i], which == 1 ? GEN_RAW : GEN_SUM, ME, 0, ic, 500 + (uint64_t)i, ib[i]);
            in[i] = (dt_tensor){ib[i], ic, dts[i]};
            out[i] = (dt_tensor){ob[i], oc, dts[i]};
        }
        dt_work *w = NULL;
        int rc = which == 0 ? dt_allreduce_list_async(in, out, NT, DT_SUM, t->comm, &w)
               : which == 1 ? dt_allgather_list_async(in, out, NT, t->comm, &w)
                            : dt_reduce_scatter_fused_async(in, out, NT, DT_SUM, t->comm, &w);
        CHECK(rc == DT_OK, "%s: list async %d submit -> %s: %s", t->name, which, dt_status_str(rc),
              dt_last_error());
        memset(in, 0xff, sizeof(dt_tensor) * NT); /* the library must have its own copy */
        memset(out, 0xff, sizeof(dt_tensor) * NT);
        free(in);
        free(out);
        if (rc == DT_OK) {
            CHECK_OK(dt_work_wait(w));
            dt_work_free(w);
            for (int i = 0; i < NT; i++) {
                size_t es = dt_dtype_size(dts[i]), c = counts[i];
                char what[512];
                snprintf(what, sizeof what, "%s_list_async comm=%s tensor %d dtype=%s count=%zu",
                         which == 0 ? "allreduce" : which == 1 ? "allgather" : "reduce_scatter",
                         t->name, i, dt_dtype_name(dts[i]), c);
                char *want = malloc(n * c * es + 1);
                if (which == 0) expect_reduce(dts[i], DT_SUM, t, 0, c, 500 + (uint64_t)i, want);
                else if (which == 2) expect_reduce(dts[i], DT_SUM, t, g * c, c, 500 + (uint64_t)i, want);
                else
                    for (size_t k = 0; k < n; k++)
                        gen_buf(dts[i], GEN_RAW, t->mem[k], 0, c, 500 + (uint64_t)i, want + k * c * es);
                if (same_elems(what, dts[i], ob[i], want, which == 1 ? n * c : c)) dt_test_passed++;
                free(want);
            }
        }
        for (int i = 0; i < NT; i++) { free(ib[i]); free(ob[i]); }
    }
}

/* Many small operations outstanding at once. */
static void many(const tcomm *t) {
    enum { M = 200 };
    int64_t v[M];
    dt_work *w[M];
    int64_t s = 0;
    for (int m = 0; m < t->n; m++) s += t->mem[m] + 1;
    for (int k = 0; k < M; k++) {
        v[k] = (ME + 1) * (int64_t)(k + 1);
        w[k] = NULL;
        CHECK_OK(dt_allreduce_async(&v[k], &v[k], 1, DT_I64, DT_SUM, t->comm, &w[k]));
    }
    CHECK_OK(dt_coll_sync());
    int bad = 0;
    for (int k = 0; k < M; k++) {
        bad += v[k] != s * (k + 1);
        dt_work_free(w[k]);
    }
    CHECK(bad == 0, "%s: %d of %d outstanding allreduces wrong", t->name, bad, M);
}

/* Submission must not wait for the peers: rank 0 submits while the others are
 * still sleeping (0.5 s); its submit must return long before they arrive. */
static void truly_async(void) {
    if (W < 2) return;
    int32_t x = 1;
    dt_work *w = NULL;
    if (ME != 0) sleep_us(500000);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_OK(dt_allreduce_async(&x, &x, 1, DT_I32, DT_SUM, dt_comm_world(), &w));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double el = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (ME == 0)
        CHECK(el < 0.25, "dt_allreduce_async took %.3f s to return while peers were late: "
              "the work is not running in the background", el);
    CHECK_OK(dt_work_wait(w));
    CHECK(x == W, "allreduce after late submission gave %d, want %d", x, W);
    dt_work_free(w);
}

int main(void) {
    coll_init();
    truly_async();
    tcomm tc[8];
    int nc = setup_comms(tc);
    CHECK_OK(dt_coll_sync()); /* nothing pending */
    job_t j;
    for (int c = 0; c < nc; c++) {
        const tcomm *t = &tc[c];
        for (int dt = 0; dt < DT_NUM_DTYPES; dt++)
            for (int ip = 0; ip < 2; ip++) {
                int poll = (dt + ip) % 2;
                size_t cnt = (dt % 2) ? 7 : 1000;
                int first = t->mem[0], last = t->mem[t->n - 1];
                dt_op op = (dt_op)((dt + ip) % DT_NUM_OPS);
                job_init(&j, J_AR, t, (dt_dtype)dt, op, cnt, ip, -1, -1, 3); run_async(&j, poll);
                job_init(&j, J_RS, t, (dt_dtype)dt, op, cnt, ip, -1, -1, 3); run_async(&j, !poll);
                job_init(&j, J_RED, t, (dt_dtype)dt, op, cnt, ip, last, -1, 3); run_async(&j, poll);
                job_init(&j, J_RED, t, (dt_dtype)dt, op, cnt, ip, first, -1, 3); run_async(&j, !poll);
                job_init(&j, J_AG, t, (dt_dtype)dt, op, cnt, ip, -1, -1, 3); run_async(&j, poll);
                job_init(&j, J_BC, t, (dt_dtype)dt, op, cnt, ip, first, -1, 3); run_async(&j, !poll);
                job_init(&j, J_BC, t, (dt_dtype)dt, op, cnt, ip, last, -1, 3); run_async(&j, poll);
                job_init(&j, J_GA, t, (dt_dtype)dt, op, cnt, ip, last, -1, 3); run_async(&j, !poll);
                job_init(&j, J_SC, t, (dt_dtype)dt, op, cnt, ip, first, -1, 3); run_async(&j, poll);
                job_init(&j, J_A2A, t, (dt_dtype)dt, op, cnt, ip, -1, -1, 3); run_async(&j, !poll);
                job_init(&j, J_BAR, t, (dt_dtype)dt, op, 0, 0, -1, -1, 3); run_async(&j, poll);
                if (!ip && t->n > 1)
                    for (int a = 0; a < t->n; a++) {
                        int b = (a + 1) % t->n;
                        job_init(&j, J_P2P, t, (dt_dtype)dt, op, cnt, 0, t->mem[a], t->mem[b], 3);
                        run_async(&j, (poll + a) % 2);
                    }
            }
    }
    for (int mode = 0; mode < 3; mode++) batch(tc, nc, mode);
    /* creating a communicator (collective over the world) while async work is
     * pending on the world: both complete, nothing mixes */
    {
        int32_t x[64];
        for (int i = 0; i < 64; i++) x[i] = ME * 64 + i;
        dt_work *w = NULL;
        CHECK_OK(dt_allreduce_async(x, x, 64, DT_I32, DT_MAX, dt_comm_world(), &w));
        dt_comm *nc2 = NULL;
        CHECK_OK(dt_comm_from_rank_list_str(W >= 2 ? "[[0],[1]]" : "[[0]]", &nc2));
        CHECK_OK(dt_work_wait(w));
        dt_work_free(w);
        int ok = 1;
        for (int i = 0; i < 64; i++) ok &= x[i] == (W - 1) * 64 + i;
        CHECK(ok, "async allreduce around a communicator creation: x[0]=%d want %d", x[0], (W - 1) * 64);
        CHECK(nc2 != NULL && dt_comm_size(nc2) == 1, "communicator created during async work");
    }
    for (int c = 0; c < nc; c++) {
        mixed(&tc[c]);
        free_without_wait(&tc[c]);
        lists_async(&tc[c]);
        many(&tc[c]);
    }
    /* dt_finalize waits for outstanding work: the result must be in place after it. */
    {
        int32_t x[100];
        for (int i = 0; i < 100; i++) x[i] = ME + i;
        dt_work *w = NULL;
        CHECK_OK(dt_allreduce_async(x, x, 100, DT_I32, DT_SUM, dt_comm_world(), &w));
        CHECK_OK(dt_finalize());
        int ok = 1;
        for (int i = 0; i < 100; i++) ok &= x[i] == W * (W - 1) / 2 + W * i;
        CHECK(ok, "allreduce pending at dt_finalize: x[0]=%d want %d", x[0], W * (W - 1) / 2);
        dt_work_free(w); /* complete: freeing it after dt_finalize only releases memory */
    }
    return dt_test_finish("coll_async");
}
