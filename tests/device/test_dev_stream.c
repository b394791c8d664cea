/* dev_stream: the stream-ordered device path without a GPU: the fake device
 * runtime plus a fake device transport over MPI (fake_devnet.h) stand in for
 * CUDA and NCCL, so everything above NCCL's own calls runs: the plans of
 * every collective (gather/scatter/all_to_all as sends and receives, lists,
 * one tensor per rank), the checks over each channel (the host transport's,
 * the bootstrap's, the device transport's) with their mismatch reports, the
 * events of blocking and asynchronous calls (dt_work_test / wait /
 * stream_wait / free, dt_coll_sync), and the device-of-the-communicator
 * check. Results against the host references, bitwise. */
#define _POSIX_C_SOURCE 200809L
#include "coll/coll_internal.h"
#include "dev_common.h"
#include "fake_devnet.h"
#include "fake_alloc.h"
#include "fake_device.h"

static int last_kinds(int *k) { return fake_devnet_last(k, 64); }

static void plans(const tcomm *t, const dt_coll_opts *o) {
    int k[64], n;
    size_t P = (size_t)t->n;
    /* a bucket of views into one buffer: one allreduce */
    float *buf = fake_alloc_dev(sizeof(float) * 30);
    dt_tensor v[3] = {{buf, 10, DT_F32}, {buf + 10, 5, DT_F32}, {buf + 15, 15, DT_F32}};
    for (int i = 0; i < 30; i++) buf[i] = (float)(ME + i);
    CHECK_OK(dt_allreduce_list_ex(v, v, 3, DT_SUM, t->comm, o, NULL));
    n = last_kinds(k);
    CHECK(n == 1 && k[0] == DT_PRIM_ALLREDUCE, "bucket of 3 views on %s: %d primitives (want 1 allreduce)", t->name, n);
    float want = 0;
    for (int m = 0; m < t->n; m++) want += (float)(t->mem[m] + 29);
    CHECK(buf[29] == want, "bucket allreduce on %s: %g, want %g", t->name, buf[29], want);
    fake_dev_free(buf);
    /* in-place all_to_all: a copy to scratch, then a send and a receive per peer */
    int *a = fake_alloc_dev(sizeof(int) * P * 3);
    for (size_t i = 0; i < P * 3; i++) a[i] = ME * 1000 + (int)i;
    CHECK_OK(dt_all_to_all_ex(a, a, 3, DT_I32, t->comm, o, NULL));
    n = last_kinds(k);
    if (P > 1)
        CHECK(n == 1 + 2 * (int)(P - 1) && k[0] == DT_PRIM_COPY, "in-place all_to_all on %s: %d primitives", t->name, n);
    for (size_t b = 0; b < P; b++)
        CHECK(a[b * 3 + 1] == t->mem[b] * 1000 + t->grank * 3 + 1, "in-place all_to_all on %s block %zu: %d", t->name,
              b, a[b * 3 + 1]);
    fake_dev_free(a);
}

static void async_events(const tcomm *t, const dt_coll_opts *o) {
    const char *path = dt_comm_device_path(t->comm);
    int over = t->n > 1 || t->comm == dt_comm_world(); /* the world always has the transport */
    CHECK(strcmp(path, over ? "fakenet" : "local") == 0, "path of %s: %s", t->name, path);
    fake_dev_set_event_delay(5);
    dev_job d;
    job_init(&d.j, J_AR, t, DT_F64, DT_AVG, 100, 0, -1, -1, 31);
    dt_work *w = NULL;
    fake_dev_stats st;
    int rc = dev_job_submit(&d, &FAKE, o, &w);
    CHECK(rc == DT_OK && w, "async allreduce on %s: %s", t->name, dt_last_error());
    int done = -1, polls = 0;
    rc = dt_work_test(w, &done);
    CHECK(rc == DT_OK && done == 0, "a fresh device work must be pending (event delay 5): done %d", done);
    while (rc == DT_OK && !done && polls < 100) { rc = dt_work_test(w, &done); polls++; }
    CHECK(rc == DT_OK && done && polls >= 3, "dt_work_test: done %d after %d polls: %s", done, polls, dt_last_error());
    double t0, t1;
    CHECK(dt_work_times(w, &t0, &t1) == DT_OK && t1 >= t0, "dt_work_times of completed device work");
    CHECK_OK(dt_work_wait(w));
    dt_work_free(w);
    dev_job_fetch(&d, &FAKE);
    CHECK(job_verify(&d.j), "async device allreduce results");
    job_free(&d.j);

    /* stream wait: no host wait, one cudaStreamWaitEvent */
    job_init(&d.j, J_BC, t, DT_I8, DT_SUM, 50, 1, t->mem[t->n - 1], -1, 32);
    rc = dev_job_submit(&d, &FAKE, o, &w);
    fake_dev_stats_reset();
    CHECK(rc == DT_OK && dt_work_stream_wait(w, fake_dev_stream(3)) == DT_OK, "stream wait: %s", dt_last_error());
    fake_dev_stats_get(&st);
    CHECK(st.stream_waits == 1 && st.queries == 0, "dt_work_stream_wait: %ld stream waits, %ld event queries",
          st.stream_waits, st.queries);
    CHECK(dt_work_times(w, &t0, &t1) == DT_ERR_STATE, "times of pending device work: want DT_ERR_STATE");
    dt_work_free(w); /* released without waiting */
    dev_job_fetch(&d, &FAKE);
    CHECK(job_verify(&d.j), "async device broadcast results");
    job_free(&d.j);

    /* many in flight, then dt_coll_sync waits for them all */
    dev_job jobs[6];
    dt_work *ws[6];
    for (int i = 0; i < 6; i++) {
        job_init(&jobs[i].j, J_AR, t, DT_F32, DT_SUM, 10 + (size_t)i, 0, -1, -1, 40 + (uint64_t)i);
        CHECK_OK(dev_job_submit(&jobs[i], &FAKE, o, &ws[i]));
    }
    CHECK_OK(dt_coll_sync());
    for (int i = 0; i < 6; i++) {
        done = 0;
        CHECK(dt_work_test(ws[i], &done) == DT_OK && done, "work %d not complete after dt_coll_sync", i);
        dt_work_free(ws[i]);
        dev_job_fetch(&jobs[i], &FAKE);
        CHECK(job_verify(&jobs[i].j), "work %d results", i);
        job_free(&jobs[i].j);
    }
    fake_dev_set_event_delay(3);
}

/* rank 0 calls with another count: DT_ERR_MISMATCH everywhere, "on device memory" */
static void mismatch(const tcomm *t, const dt_coll_opts *o, const char *label) {
    if (t->n < 2) return;
    int *a = fake_alloc_dev(sizeof(int) * 20);
    size_t n = t->grank == 0 ? 11 : 10;
    dt_clear_error();
    int rc = dt_allreduce_ex(a, a, n, DT_I32, DT_SUM, t->comm, o, NULL);
    CHECK(rc == DT_ERR_MISMATCH && strstr(dt_last_error(), "on device memory"),
          "%s mismatch on %s: %s '%s'", label, t->name, dt_status_str(rc), dt_last_error());
    /* still in step afterwards */
    a[0] = 1;
    CHECK_OK(dt_allreduce_ex(a, a, 1, DT_I32, DT_SUM, t->comm, o, NULL));
    CHECK(a[0] == t->n, "after the mismatch: %d, want %d", a[0], t->n);
    fake_dev_free(a);
}

int main(void) {
    fake_dev_install(2);
    fake_devnet_install();
    coll_init();
    CHECK(strcmp(dt_comm_device_path(dt_comm_world()), "fakenet") == 0, "device path '%s', want fakenet",
          dt_comm_device_path(dt_comm_world()));
    tcomm tc[8];
    int nc = setup_comms(tc);
    static const size_t counts[] = {0, 1, 7, 1000};
    dt_coll_opts o = {.mem = DT_MEM_AUTO, .stream = fake_dev_stream(1)};
    dev_suite(tc, nc, &FAKE, &o, counts, 4);
    for (int c = 0; c < nc; c++) {
        plans(&tc[c], &o);
        async_events(&tc[c], &o);
    }
    /* every check channel that can serve each communicator */
    static const char *const chn[] = {"host transport", "bootstrap", "device transport"};
    for (int ch = 0; ch < 3; ch++) {
        dt_fp_device_channel_for_testing(ch);
        dev_suite(tc, nc, &FAKE, &o, counts + 2, 1);
        for (int c = 0; c < nc; c++) mismatch(&tc[c], &o, chn[ch]);
    }
    dt_fp_device_channel_for_testing(-1);

    /* a rank on host memory, the others on device memory: a mismatch (the
     * kinds meet on the host transport's channel) */
    if (W > 1) {
        int *h = calloc(8, sizeof(int)), *dv = fake_alloc_dev(8 * sizeof(int));
        dt_coll_opts ho = {.mem = DT_MEM_HOST, .stream = NULL};
        dt_clear_error();
        int rc = ME == 0 ? dt_allreduce_ex(h, h, 8, DT_I32, DT_SUM, dt_comm_world(), &ho, NULL)
                         : dt_allreduce_ex(dv, dv, 8, DT_I32, DT_SUM, dt_comm_world(), &o, NULL);
        CHECK(rc == DT_ERR_MISMATCH && strstr(dt_last_error(), "on device memory"), "host vs device: %s '%s'",
              dt_status_str(rc), dt_last_error());
        free(h);
        fake_dev_free(dv);
    }
    /* device memory of another device than the communicator's */
    int *other = fake_dev_malloc(16, 1);
    CHECK_ERR(dt_allreduce_ex(other, other, 4, DT_I32, DT_SUM, dt_comm_world(), &o, NULL), DT_ERR_INVALID,
              "sendbuf is on device 1, but the communicator's fakenet communicator is on device 0");
    fake_dev_free(other);
    /* the transport's asynchronous error ends a blocking call (one rank: no
     * watchdog to end the job first) */
    if (W == 1) {
        int *a = fake_alloc_dev(16);
        fake_devnet_fail("peer 3 vanished");
        CHECK_ERR(dt_allreduce_ex(a, a, 4, DT_I32, DT_SUM, dt_comm_world(), &o, NULL), DT_ERR_BACKEND,
                  "peer 3 vanished");
        fake_devnet_fail("");
        fake_dev_free(a);
    }
    CHECK_OK(dt_finalize());
    return dt_test_finish("dev_stream");
}
