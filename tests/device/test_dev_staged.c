/* dev_staged: device memory over host staging, without a GPU: the fake device
 * runtime (fake_device.h) holds the "device" buffers, no device transport is
 * installed, so every device call takes the staged path (pinned copies, the
 * host path, copies back). Every collective x dtype x op x in place x root on
 * the world and every sub-communicator, against the host references,
 * blocking with the memory kind found (auto) and said (DT_MEM_DEVICE), a
 * stream given; asynchronous calls (complete on return); fused lists and
 * one tensor per rank; the staged path's stream use. */
#define _POSIX_C_SOURCE 200809L
#include "dev_common.h"
#include "fake_device.h"

static void *f_alloc(size_t n) { return fake_dev_malloc(n, 0); }
static void f_h2d(void *d, const void *s, size_t n) { memcpy(d, s, n); }
static void f_d2h(void *d, const void *s, size_t n) { memcpy(d, s, n); }
static const dev_alloc FAKE = {f_alloc, fake_dev_free, f_h2d, f_d2h};

int main(void) {
    fake_dev_install(1);
    coll_init();
    const char *want_path = W > 1 ? "staged" : "local"; /* a world of one copies on the stream */
    CHECK(strcmp(dt_comm_device_path(dt_comm_world()), want_path) == 0, "device path '%s', want %s",
          dt_comm_device_path(dt_comm_world()), want_path);
    tcomm tc[8];
    int nc = setup_comms(tc);
    static const size_t counts[] = {0, 1, 7, 1000};
    dt_coll_opts autok = DT_COLL_OPTS_INIT, dev = {.mem = DT_MEM_DEVICE, .stream = fake_dev_stream(1)};
    dev_suite(tc, nc, &FAKE, &autok, counts, 4);
    dev_suite(tc, 1, &FAKE, &dev, counts + 2, 1);

    /* the plain call finds device memory itself; the stream is synchronised
     * before the host reads and before returning */
    dev_job d;
    fake_dev_stats st;
    job_init(&d.j, J_AR, &tc[0], DT_F32, DT_SUM, 1000, 0, -1, -1, 21);
    fake_dev_stats_reset();
    int rc = dev_job_submit(&d, &FAKE, &dev, NULL);
    fake_dev_stats_get(&st);
    dev_job_fetch(&d, &FAKE);
    CHECK(rc == DT_OK && job_verify(&d.j), "staged allreduce: %s", dt_last_error());
    if (W > 1)
        CHECK(st.stream_sync == 2 && st.copies == 2, "staged allreduce: %ld stream syncs, %ld copies (want 2, 2)",
              st.stream_sync, st.copies);
    else /* local: one copy on the stream, then the host waits for its event */
        CHECK(st.stream_sync == 0 && st.copies == 1 && st.records == 1 && st.queries >= 1,
              "local allreduce: %ld syncs, %ld copies, %ld records, %ld queries", st.stream_sync, st.copies,
              st.records, st.queries);
    job_free(&d.j);

    /* asynchronous staged work is complete when submission returns (local
     * work completes on its event: polled here until it does) */
    job_init(&d.j, J_AG, &tc[0], DT_I64, DT_SUM, 77, 1, -1, -1, 22);
    dt_work *w = NULL;
    rc = dev_job_submit(&d, &FAKE, &dev, &w);
    CHECK(rc == DT_OK && w, "async staged allgather: %s", dt_last_error());
    int done = 0, polls = 0;
    CHECK(dt_work_test(w, &done) == DT_OK && done == (W > 1), "async staged work complete at once: done %d", done);
    while (!done && polls++ < 100) dt_work_test(w, &done);
    CHECK(done, "local async work never completed");
    CHECK(dt_work_stream_wait(w, fake_dev_stream(2)) == DT_OK, "stream wait: %s", dt_last_error());
    dt_work_free(w);
    dev_job_fetch(&d, &FAKE);
    CHECK(job_verify(&d.j), "async staged allgather results");
    job_free(&d.j);

    for (int c = 0; c < nc; c++) dev_lists(&tc[c], &FAKE, &autok);
    CHECK_OK(dt_coll_sync());
    CHECK_OK(dt_finalize());
    return dt_test_finish("dev_staged");
}
