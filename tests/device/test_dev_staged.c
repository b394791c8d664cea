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

/* allreduce_list, allgather_list, reduce_scatter_fused over tensors in one
 * device buffer (back to back, as DDP buckets) and scattered ones, mixed
 * dtypes; reduce_scatter_per_rank contiguous, in place and scattered. */
static void lists(const tcomm *t, const dt_coll_opts *o) {
    enum { NT = 5 };
    static const dt_dtype dts[NT] = {DT_F32, DT_F32, DT_I32, DT_F16, DT_F32};
    static const size_t cnt[NT] = {7, 0, 33, 5, 100};
    size_t n = (size_t)t->n, g = (size_t)t->grank;
    for (int which = 0; which < 3; which++)
        for (int packed = 0; packed < 2; packed++) {
            dt_tensor in[NT], out[NT];
            char *hin[NT], *hout[NT], *din[NT], *dout[NT];
            char *pool_in = NULL, *pool_out = NULL;
            size_t off_in = 0, off_out = 0, need_in = 0, need_out = 0;
            for (int i = 0; i < NT; i++) {
                size_t es = dt_dtype_size(dts[i]);
                need_in += (which == 2 ? n : 1) * cnt[i] * es;
                need_out += (which == 1 ? n : 1) * cnt[i] * es;
            }
            if (packed) { pool_in = f_alloc(need_in); pool_out = f_alloc(need_out); }
            for (int i = 0; i < NT; i++) {
                size_t es = dt_dtype_size(dts[i]);
                size_t ic = (which == 2 ? n : 1) * cnt[i], oc = (which == 1 ? n : 1) * cnt[i];
                hin[i] = calloc(ic * es + 1, 1);
                hout[i] = calloc(oc * es + 1, 1);
                dt_op op = which == 1 ? DT_SUM : DT_MAX;
                gen_buf(dts[i], which == 1 ? GEN_RAW : gen_for(op), ME, 0, ic, (uint64_t)(i + 1) * 77, hin[i]);
                din[i] = packed ? pool_in + off_in : f_alloc(ic * es);
                dout[i] = packed ? pool_out + off_out : f_alloc(oc * es);
                off_in += ic * es;
                off_out += oc * es;
                memcpy(din[i], hin[i], ic * es);
                in[i] = (dt_tensor){din[i], ic, dts[i]};
                out[i] = (dt_tensor){dout[i], oc, dts[i]};
            }
            int rc = which == 0 ? dt_allreduce_list_ex(in, out, NT, DT_MAX, t->comm, o, NULL)
                   : which == 1 ? dt_allgather_list_ex(in, out, NT, t->comm, o, NULL)
                                : dt_reduce_scatter_fused_ex(in, out, NT, DT_MAX, t->comm, o, NULL);
            CHECK(rc == DT_OK, "list %d packed %d on %s: %s", which, packed, t->name, dt_last_error());
            for (int i = 0; rc == DT_OK && i < NT; i++) {
                size_t es = dt_dtype_size(dts[i]), c = cnt[i];
                size_t oc = (which == 1 ? n : 1) * c;
                char *want = malloc(oc * es + 1), what[160];
                if (which == 1)
                    for (size_t k = 0; k < n; k++)
                        gen_buf(dts[i], GEN_RAW, t->mem[k], 0, c, (uint64_t)(i + 1) * 77, want + k * c * es);
                else
                    expect_reduce(dts[i], DT_MAX, t, which == 2 ? g * c : 0, c, (uint64_t)(i + 1) * 77, want);
                snprintf(what, sizeof what, "list %d packed %d on %.60s tensor %d", which, packed, t->name, i);
                same_elems(what, dts[i], dout[i], want, oc);
                free(want);
            }
            for (int i = 0; i < NT; i++) {
                free(hin[i]);
                free(hout[i]);
                if (!packed) { fake_dev_free(din[i]); fake_dev_free(dout[i]); }
            }
            if (packed) { fake_dev_free(pool_in); fake_dev_free(pool_out); }
        }
    /* one tensor per rank: back to back, in place, scattered */
    for (int mode = 0; mode < 3; mode++) {
        size_t c = 9, es = 4;
        char *block = f_alloc(n * c * es);
        dt_tensor in[64], out;
        for (size_t k = 0; k < n; k++) {
            char *p = mode == 2 ? f_alloc(c * es) : block + k * c * es;
            gen_buf(DT_F32, GEN_SUM, ME, k * c, c, 501, p);
            in[k] = (dt_tensor){p, c, DT_F32};
        }
        char *res = mode == 1 ? in[g].data : f_alloc(c * es);
        out = (dt_tensor){res, c, DT_F32};
        int rc = dt_reduce_scatter_per_rank_ex(in, (int)n, &out, DT_SUM, t->comm, o, NULL);
        CHECK(rc == DT_OK, "per_rank mode %d on %s: %s", mode, t->name, dt_last_error());
        float want[9];
        expect_reduce(DT_F32, DT_SUM, t, g * c, c, 501, want);
        char what[96];
        snprintf(what, sizeof what, "per_rank mode %d on %.60s", mode, t->name);
        if (rc == DT_OK) same_elems(what, DT_F32, res, want, c);
        if (mode == 2) for (size_t k = 0; k < n; k++) fake_dev_free(in[k].data);
        if (mode != 1) fake_dev_free(res);
        fake_dev_free(block);
    }
}

int main(void) {
    fake_dev_install(1);
    coll_init();
    const char *want_path = W > 1 ? "staged" : "local"; /* a world of one copies on the stream */
    CHECK(strcmp(dt_comm_device_path(dt_comm_world()), want_path) == 0, "device path '%s', want %s",
          dt_comm_device_path(dt_comm_world()), want_path);
    tcomm tc[8];
    int nc = setup_comms(tc);
    static const size_t counts[] = {0, 1, 7, 1000};
    dt_coll_opts autok = DT_COLL_OPTS_INIT, dev = {DT_MEM_DEVICE, fake_dev_stream(1)};
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

    for (int c = 0; c < nc; c++) lists(&tc[c], &autok);
    CHECK_OK(dt_coll_sync());
    CHECK_OK(dt_finalize());
    return dt_test_finish("dev_staged");
}
