/* dev_unit: the device path's pure functions and its argument checks, in one
 * process without a GPU: the primitives of every collective (plans), the
 * buffers a call uses (regions), the check channel chosen, the job-wide
 * verdict on the device transport (dt_dev_decide); then, through the public
 * API on the fake runtime: memory-kind classification (mixed buffers named,
 * DT_MEM_DEVICE checked, bad kinds), that the host path asks nothing of the
 * device runtime (DT_MEM_HOST, or no device), streams with host buffers, and
 * device memory in a process without a device; an asynchronous call whose
 * handle gets no event, and the handle kept for the next call. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include "coll/coll_internal.h"
#include "core/error.h"
#include "fake_device.h"
#include "runtime/runtime.h"
#include "dtrain/zero.h"
#include "testutil.h"

static dt_comm g_c;

static dt_coll_desc desc(int kind, int P, int r, const void *s, void *v, size_t count, int root) {
    g_c.info.size = P;
    g_c.info.rank = r;
    g_c.info.world_size = P;
    return (dt_coll_desc){.kind = kind, .comm = &g_c, .send = s, .recv = v, .count = count, .dtype = DT_F32,
                          .op = DT_SUM, .root = root};
}

static int plan(const dt_coll_desc *d, dt_prim *p) { return dt_dev_plan(d, (void *)0x5000, p, 64); }

#define PRIM(i, k, pe, s, r, c) CHECK(p[i].kind == (k) && p[i].peer == (pe) && p[i].send == (const void *)(s) && \
    p[i].recv == (void *)(r) && p[i].count == (c), "%s: prim %d = (%d, peer %d, %p -> %p, %zu)", what, i, p[i].kind, \
    p[i].peer, p[i].send, (void *)p[i].recv, p[i].count)

static void test_plans(void) {
    dt_prim p[64];
    char *S = (char *)0x100000, *V = (char *)0x200000;
    const char *what;
    int n;
    dt_coll_desc d;
    /* gather, root 2 of 4, count 10 (40 bytes a block) */
    what = "gather root";
    d = desc(DT_COLL_GATHER, 4, 2, S, V, 10, 2);
    n = plan(&d, p);
    CHECK(n == 4, "%s: %d prims", what, n);
    PRIM(0, DT_PRIM_COPY, -1, S, V + 80, 10);
    PRIM(1, DT_PRIM_RECV, 0, NULL, V, 10);
    PRIM(2, DT_PRIM_RECV, 1, NULL, V + 40, 10);
    PRIM(3, DT_PRIM_RECV, 3, NULL, V + 120, 10);
    what = "gather root in place";
    d = desc(DT_COLL_GATHER, 4, 2, V + 80, V, 10, 2);
    n = plan(&d, p);
    CHECK(n == 3 && p[0].kind == DT_PRIM_RECV, "%s: %d prims", what, n);
    what = "gather non-root";
    d = desc(DT_COLL_GATHER, 4, 1, S, NULL, 10, 2);
    n = plan(&d, p);
    CHECK(n == 1, "%s: %d prims", what, n);
    PRIM(0, DT_PRIM_SEND, 2, S, NULL, 10);
    /* scatter, root 0 of 3 */
    what = "scatter root";
    d = desc(DT_COLL_SCATTER, 3, 0, S, V, 5, 0);
    n = plan(&d, p);
    CHECK(n == 3, "%s: %d prims", what, n);
    PRIM(0, DT_PRIM_COPY, -1, S, V, 5);
    PRIM(1, DT_PRIM_SEND, 1, S + 20, NULL, 5);
    PRIM(2, DT_PRIM_SEND, 2, S + 40, NULL, 5);
    what = "scatter root in place";
    d = desc(DT_COLL_SCATTER, 3, 1, S, S + 20, 5, 1);
    n = plan(&d, p);
    CHECK(n == 2 && p[0].kind == DT_PRIM_SEND && p[0].peer == 0 && p[1].peer == 2, "%s: %d prims", what, n);
    what = "scatter non-root";
    d = desc(DT_COLL_SCATTER, 3, 2, NULL, V, 5, 0);
    n = plan(&d, p);
    CHECK(n == 1, "%s: %d prims", what, n);
    PRIM(0, DT_PRIM_RECV, 0, NULL, V, 5);
    /* all_to_all, rank 1 of 3 */
    what = "all_to_all";
    d = desc(DT_COLL_ALL_TO_ALL, 3, 1, S, V, 4, 0);
    n = plan(&d, p);
    CHECK(n == 5, "%s: %d prims", what, n);
    PRIM(0, DT_PRIM_COPY, -1, S + 16, V + 16, 4);
    PRIM(1, DT_PRIM_SEND, 0, S, NULL, 4);
    PRIM(2, DT_PRIM_RECV, 0, NULL, V, 4);
    PRIM(3, DT_PRIM_SEND, 2, S + 32, NULL, 4);
    PRIM(4, DT_PRIM_RECV, 2, NULL, V + 32, 4);
    what = "all_to_all in place";
    d = desc(DT_COLL_ALL_TO_ALL, 3, 1, V, V, 4, 0);
    CHECK(dt_dev_plan_scratch(&d) == 48, "in-place all_to_all scratch %zu, want 48", dt_dev_plan_scratch(&d));
    n = plan(&d, p);
    CHECK(n == 5, "%s: %d prims", what, n);
    PRIM(0, DT_PRIM_COPY, -1, V, 0x5000, 12);
    PRIM(1, DT_PRIM_SEND, 0, 0x5000, NULL, 4);
    PRIM(2, DT_PRIM_RECV, 0, NULL, V, 4);
    PRIM(3, DT_PRIM_SEND, 2, 0x5000 + 32, NULL, 4);
    what = "all_to_all of one";
    d = desc(DT_COLL_ALL_TO_ALL, 1, 0, V, V, 4, 0);
    CHECK(plan(&d, p) == 0 && dt_dev_plan_scratch(&d) == 0, "%s", what);
    /* rooted collectives: NCCL's own; the root is a group rank */
    what = "reduce non-root";
    d = desc(DT_COLL_REDUCE, 4, 3, S, V, 7, 1);
    CHECK(plan(&d, p) == 1, "%s", what);
    PRIM(0, DT_PRIM_REDUCE, 1, S, NULL, 7);
    what = "broadcast non-root";
    d = desc(DT_COLL_BROADCAST, 4, 3, NULL, V, 7, 1);
    CHECK(plan(&d, p) == 1, "%s", what);
    PRIM(0, DT_PRIM_BROADCAST, 1, V, V, 7);
    what = "barrier";
    d = desc(DT_COLL_BARRIER, 4, 0, NULL, NULL, 0, 0);
    CHECK(plan(&d, p) == 1 && p[0].kind == DT_PRIM_BARRIER, "%s", what);
    what = "send";
    d = desc(DT_COLL_SEND, 4, 0, S, NULL, 3, 2);
    CHECK(plan(&d, p) == 1, "%s", what);
    PRIM(0, DT_PRIM_SEND, 2, S, NULL, 3);
    /* lists */
    float *b = (float *)0x300000, *o = (float *)0x400000;
    dt_tensor in[4] = {{b, 10, DT_F32}, {b + 10, 0, DT_F32}, {b + 10, 6, DT_F32}, {b + 16, 4, DT_F64}};
    dt_tensor out[4] = {{o, 10, DT_F32}, {o + 10, 0, DT_F32}, {o + 10, 6, DT_F32}, {o + 16, 4, DT_F64}};
    d = desc(DT_COLL_ALLREDUCE_LIST, 2, 0, NULL, NULL, 0, 0);
    d.in = in; d.out = out; d.n = 4;
    what = "allreduce_list merged by dtype";
    n = plan(&d, p);
    CHECK(n == 2, "%s: %d prims", what, n);
    PRIM(0, DT_PRIM_ALLREDUCE, -1, b, o, 16);
    PRIM(1, DT_PRIM_ALLREDUCE, -1, b + 16, o + 16, 4);
    what = "allreduce_list in place";
    d.out = in;
    n = plan(&d, p);
    CHECK(n == 2 && p[0].count == 16 && p[0].send == p[0].recv, "%s: %d prims", what, n);
    what = "allreduce_list overlapping";
    dt_tensor sh[2] = {{b + 5, 5, DT_F32}, {b + 10, 5, DT_F32}};
    d.out = sh; d.in = (dt_tensor[]){{b, 5, DT_F32}, {b + 5, 5, DT_F32}}; d.n = 2;
    n = plan(&d, p);
    CHECK(n == 2 && p[0].count == 5 && p[1].count == 5, "%s: %d prims", what, n);
    what = "allgather_list";
    d = desc(DT_COLL_ALLGATHER_LIST, 2, 0, NULL, NULL, 0, 0);
    d.in = in; d.out = out; d.n = 3;
    n = plan(&d, p);
    CHECK(n == 3 && p[2].kind == DT_PRIM_ALLGATHER && p[2].count == 6, "%s: %d prims", what, n);
    /* one tensor per rank */
    dt_tensor pr[3] = {{b, 4, DT_F32}, {b + 4, 4, DT_F32}, {b + 8, 4, DT_F32}};
    d = desc(DT_COLL_REDUCE_SCATTER_PER_RANK, 3, 1, NULL, o, 4, 0);
    d.in = pr; d.n = 3;
    what = "per_rank contiguous";
    n = plan(&d, p);
    CHECK(n == 1, "%s: %d prims", what, n);
    PRIM(0, DT_PRIM_REDUCE_SCATTER, -1, b, o, 4);
    what = "per_rank in place";
    d.recv = b + 4;
    n = plan(&d, p);
    CHECK(n == 3, "%s: %d prims", what, n);
    PRIM(0, DT_PRIM_REDUCE, 0, b, NULL, 4);
    PRIM(1, DT_PRIM_REDUCE, 1, b + 4, b + 4, 4);
    PRIM(2, DT_PRIM_REDUCE, 2, b + 8, NULL, 4);
    what = "per_rank scattered";
    pr[2].data = o + 100;
    d.recv = o;
    n = plan(&d, p);
    CHECK(n == 3 && p[1].recv == (void *)o && p[2].send == (const void *)(o + 100), "%s: %d prims", what, n);
    /* a plan longer than the room: the count, then the whole plan */
    d = desc(DT_COLL_ALL_TO_ALL, 40, 3, S, V, 1, 0);
    CHECK(dt_dev_plan(&d, NULL, p, 4) == 79, "all_to_all of 40: %d prims, want 79", dt_dev_plan(&d, NULL, p, 4));
}

static void test_regions(void) {
    dt_region r[8];
    char *V = (char *)0x200000;
    dt_coll_desc d = desc(DT_COLL_ALLGATHER, 4, 3, V + 120, V, 10, 0);
    int n = dt_coll_regions(&d, r, 8);
    CHECK(n == 2 && r[0].bytes == 40 && r[0].in && r[1].bytes == 160 && r[1].out && !r[1].in,
          "allgather in place: %d regions", n);
    d = desc(DT_COLL_REDUCE, 4, 0, V, V + 8, 2, 1);
    n = dt_coll_regions(&d, r, 8);
    CHECK(n == 1 && r[0].in, "reduce off root: %d regions (the receive buffer is not used)", n);
    d = desc(DT_COLL_BROADCAST, 4, 0, V, V + 64, 0, 1);
    n = dt_coll_regions(&d, r, 8);
    CHECK(n == 1 && r[0].out && r[0].bytes == 0 && r[0].p == V + 64, "broadcast off root, count 0: %d regions", n);
    d = desc(DT_COLL_BARRIER, 4, 0, NULL, NULL, 0, 0);
    CHECK(dt_coll_regions(&d, r, 8) == 0, "barrier: no regions");
    d = desc(DT_COLL_SCATTER, 2, 1, NULL, V, 3, 0);
    n = dt_coll_regions(&d, r, 8);
    CHECK(n == 1 && r[0].out && strcmp(r[0].name, "recvbuf") == 0, "scatter off root: %d regions", n);
}

static void test_channels(void) {
    /* host transport's when it has one; the bootstrap for the whole world
     * (not point to point); else the device transport's */
    CHECK(dt_fp_device_channel(1, 1, 0) == 0 && dt_fp_device_channel(1, 0, 1) == 0, "host check first");
    CHECK(dt_fp_device_channel(0, 1, 0) == 1, "world without a host check: the bootstrap");
    CHECK(dt_fp_device_channel(0, 1, 1) == 2 && dt_fp_device_channel(0, 0, 0) == 2, "else the device transport");
    dt_fp_device_channel_for_testing(1);
    CHECK(dt_fp_device_channel(1, 0, 0) == 0, "forcing the bootstrap where it cannot serve: not taken");
    CHECK(dt_fp_device_channel(1, 1, 0) == 1, "forcing the bootstrap where it can");
    dt_fp_device_channel_for_testing(-1);
}

static dt_dev_info info(int path, int ndev, int dev, int ok, uint64_t host, int gpu) {
    dt_dev_info i;
    memset(&i, 0, sizeof i);
    i.path = path; i.ndev = ndev; i.dev = dev; i.probe_ok = ok; i.hostkey = host;
    i.id[0] = (unsigned char)gpu;
    return i;
}

static void test_decide(void) {
    char why[300];
    int path;
    dt_dev_info a[4] = {info(0, 1, 0, 1, 1, 0), info(0, 1, 0, 1, 2, 0), info(0, 2, 1, 1, 2, 1), info(0, 1, 0, 1, 3, 0)};
    CHECK(dt_dev_decide(a, 4, "nccl", &path, why, sizeof why) == 1 && path == DT_DEVPATH_AUTO,
          "a GPU of its own per rank (same GPU index on other hosts): nccl (%s)", why);
    a[3].hostkey = 2;
    CHECK(dt_dev_decide(a, 4, "nccl", &path, why, sizeof why) == 0 && strstr(why, "ranks 1 and 3 use the same GPU"),
          "two ranks on one GPU: staged (%s)", why);
    a[0].path = DT_DEVPATH_NCCL;
    CHECK(dt_dev_decide(a, 4, "nccl", &path, why, sizeof why) == 1 && path == DT_DEVPATH_NCCL,
          "forced: the transport is tried (%s)", why);
    a[2].path = DT_DEVPATH_STAGED;
    CHECK(dt_dev_decide(a, 4, "nccl", &path, why, sizeof why) == 0 && path == DT_DEVPATH_STAGED,
          "staged on one rank: staged everywhere");
    a[2].path = 0;
    a[3].hostkey = 3;
    a[1].ndev = 0;
    CHECK(dt_dev_decide(a, 4, "nccl", &path, why, sizeof why) == 0 && strstr(why, "rank 1 has no CUDA device"),
          "a rank without a device (%s)", why);
    a[1].ndev = 1;
    a[2].probe_ok = 0;
    CHECK(dt_dev_decide(a, 4, "nccl", &path, why, sizeof why) == 0 && strstr(why, "nccl cannot run on rank 2"),
          "a rank where the transport cannot run (%s)", why);
    CHECK(dt_dev_decide(a, 4, NULL, &path, why, sizeof why) == 0 && strstr(why, "no device transport"),
          "no transport in the build (%s)", why);
}

/* through the API, on the fake runtime */
static void test_classify(void) {
    fake_dev_install(1);
    CHECK_OK(dt_init());
    dt_comm *w = dt_comm_world();
    CHECK(strcmp(dt_comm_device_path(w), "local") == 0, "standalone with a device, no transport: '%s'",
          dt_comm_device_path(w));
    float *d = fake_dev_malloc(64, 0), h[16] = {0};
    fake_dev_stats st;
    CHECK_ERR(dt_allreduce(d, h, 4, DT_F32, DT_SUM, w), DT_ERR_INVALID,
              "dt_allreduce: host and device buffers in one call: sendbuf is device memory (device 0), recvbuf is host memory");
    CHECK_ERR(dt_allgather(h, d, 4, DT_F32, w), DT_ERR_INVALID, "sendbuf is host memory, recvbuf is device memory (device 0)");
    dt_tensor in[2] = {{d, 4, DT_F32}, {h, 4, DT_F32}};
    CHECK_ERR(dt_allreduce_list(in, in, 2, DT_SUM, w), DT_ERR_INVALID,
              "in[0] is device memory (device 0), in[1] is host memory");
    dt_coll_opts dev = {.mem = DT_MEM_DEVICE}, host = {.mem = DT_MEM_HOST}, bad = {.mem = (dt_mem_kind)7};
    CHECK_ERR(dt_allreduce_ex(h, h, 4, DT_F32, DT_SUM, w, &dev, NULL), DT_ERR_INVALID,
              "opts->mem is DT_MEM_DEVICE but sendbuf is host memory");
    CHECK_ERR(dt_broadcast_ex(h, h, 4, DT_F32, 0, w, &bad, NULL), DT_ERR_INVALID, "opts->mem is 7: not a memory kind");
    /* compressed wires on device memory: one rank has nothing to compress (the
     * values stay exact); integer data takes no wire */
    dt_coll_opts dwire = {.mem = DT_MEM_DEVICE, .wire = DT_WIRE_BF16};
    float one[4] = {1.0f + 0x1p-20f, -3.0f, 1e-30f, 7.0f}, back[4];
    memcpy(d, one, sizeof one); /* this fake's device memory is host memory */
    CHECK_OK(dt_allreduce_ex(d, d, 4, DT_F32, DT_SUM, w, &dwire, NULL));
    CHECK_OK(dt_reduce_ex(d, d, 4, DT_F32, DT_AVG, 0, w, &dwire, NULL));
    memcpy(back, d, sizeof back);
    CHECK(memcmp(one, back, sizeof one) == 0, "one rank, bf16 wire: the values changed (%g -> %g)", one[0], back[0]);
    CHECK_ERR(dt_allreduce_ex(d, d, 4, DT_I32, DT_SUM, w, &dwire, NULL), DT_ERR_INVALID,
              "a bf16 wire carries f32, f16 or bf16 data, not i32");
    /* a broadcast takes a wire on device memory only (over a device transport) */
    dt_coll_opts hwire = {.mem = DT_MEM_HOST, .wire = DT_WIRE_BF16};
    CHECK_ERR(dt_broadcast_ex(h, h, 4, DT_F32, 0, w, &hwire, NULL), DT_ERR_UNSUPPORTED,
              "dt_broadcast_ex: a broadcast with a bf16 wire (opts.wire) moves device memory over a device transport "
              "only: this call's buffers are host memory");
    CHECK_OK(dt_broadcast_ex(d, d, 4, DT_F32, 0, w, &dwire, NULL)); /* one rank: nothing moves */
    CHECK_ERR(dt_allgather_ex(d, d, 4, DT_F32, w, &dwire, NULL), DT_ERR_INVALID,
              "only allreduce and reduce_scatter (and their lists), reduce and broadcast take a wire type");
    /* ZeRO 2-3 with compressed gradients on device memory: created (the
     * runtime here has no CUDA kernels, so the shard is offloaded) */
    for (int stage = 2; stage <= 3; stage++) {
        dt_zero_config zc;
        dt_zero_config_default(&zc);
        zc.stage = stage;
        zc.wire = DT_WIRE_BF16;
        zc.offload = 1;
        dt_optim_config oc;
        CHECK_OK(dt_optim_config_default(&oc, DT_OPTIM_SGD));
        size_t zoff[1] = {0}, zcnt[1] = {16};
        dt_zero *z = NULL;
        CHECK_OK(dt_zero_create(w, &zc, 16, zoff, zcnt, 1, d, NULL, &oc, &z));
        CHECK(z != NULL, "stage %d: created", stage);
        dt_zero_free(z);
    }
    /* the host fast path: no classification at all */
    fake_dev_stats_reset();
    CHECK_OK(dt_allreduce_ex(h, h, 16, DT_F32, DT_SUM, w, &host, NULL));
    fake_dev_stats_get(&st);
    CHECK(st.classify == 0, "DT_MEM_HOST classified %ld buffers", st.classify);
    fake_dev_stats_reset();
    CHECK_OK(dt_allreduce(h, h + 8, 8, DT_F32, DT_SUM, w));
    fake_dev_stats_get(&st);
    CHECK(st.classify == 2, "auto with a device: %ld classifications, want 2", st.classify);
    /* a stream with host buffers is synchronised first */
    dt_coll_opts hs = {.mem = DT_MEM_AUTO, .stream = fake_dev_stream(4)};
    fake_dev_stats_reset();
    CHECK_OK(dt_allreduce_ex(h, h, 16, DT_F32, DT_SUM, w, &hs, NULL));
    fake_dev_stats_get(&st);
    CHECK(st.stream_sync == 1, "host buffers with a stream: %ld syncs, want 1", st.stream_sync);
    /* device memory on a communicator of one: a copy on the stream */
    for (int i = 0; i < 4; i++) d[i] = (float)i;
    CHECK_OK(dt_allreduce(d, d + 4, 4, DT_F32, DT_SUM, w));
    CHECK(d[7] == 3.0f, "local copy on one rank: %g", d[7]);
    fake_dev_free(d);
    CHECK_OK(dt_finalize());

    /* a process without a device: auto asks nothing, device memory is refused */
    fake_dev_install(0);
    CHECK_OK(dt_init());
    w = dt_comm_world();
    CHECK(strcmp(dt_comm_device_path(w), "none") == 0, "no device: '%s'", dt_comm_device_path(w));
    fake_dev_stats_reset();
    CHECK_OK(dt_allreduce(h, h, 16, DT_F32, DT_SUM, w));
    fake_dev_stats_get(&st);
    CHECK(st.classify == 0, "auto without a device classified %ld buffers", st.classify);
    CHECK_ERR(dt_allreduce_ex(h, h, 4, DT_F32, DT_SUM, w, &dev, NULL), DT_ERR_UNSUPPORTED,
              "needs a CUDA device, and this process has none: the fake runtime was installed with no device");
    CHECK_OK(dt_finalize());

    /* this build's own runtime: no GPU on a test machine without one */
    dt_dev_use_for_testing(NULL);
    CHECK_OK(dt_init());
    w = dt_comm_world();
    if (strcmp(dt_comm_device_path(w), "none") == 0) {
        CHECK_ERR(dt_allreduce_ex(h, h, 4, DT_F32, DT_SUM, w, &dev, NULL), DT_ERR_UNSUPPORTED,
                  "needs a CUDA device, and this process has none");
        dt_clear_error();
        dt_allreduce_ex(h, h, 4, DT_F32, DT_SUM, w, &dev, NULL);
        printf("dev_unit: this build's runtime without a device: %s\n", dt_last_error());
    } else {
        printf("dev_unit: this process has a CUDA device (path %s): the no-device checks are skipped\n",
               dt_comm_device_path(w));
    }
    CHECK_OK(dt_finalize());
}

/* DTRAIN_DEVICE_PATH: forced nccl where it cannot run, malformed values */
static void test_setting(void) {
    float h[4] = {0};
    setenv("DTRAIN_DEVICE_PATH", "sometimes", 1);
    CHECK_ERR(dt_init(), DT_ERR_INVALID, "DTRAIN_DEVICE_PATH='sometimes' is not a device path (expected auto, nccl or staged)");
    fake_dev_install(1);
    setenv("DTRAIN_DEVICE_PATH", "nccl", 1);
#ifdef DTRAIN_HAVE_CUDA
    CHECK_ERR(dt_init(), DT_ERR_UNSUPPORTED, "DTRAIN_DEVICE_PATH=nccl, but nccl cannot run on rank 0; here: "
              "NCCL needs the CUDA runtime; the device runtime in use is 'fake'");
#else
    CHECK_ERR(dt_init(), DT_ERR_UNSUPPORTED, "DTRAIN_DEVICE_PATH=nccl, but this build has no device transport");
#endif
    CHECK(!dt_is_initialized(), "a failed dt_init leaves dtrain uninitialised");
    setenv("DTRAIN_DEVICE_PATH", "staged", 1);
    CHECK_OK(dt_init());
    CHECK_OK(dt_allreduce(h, h, 4, DT_F32, DT_SUM, dt_comm_world()));
    CHECK_OK(dt_finalize());
    unsetenv("DTRAIN_DEVICE_PATH");
    dt_dev_use_for_testing(NULL);
}

/* the fake runtime whose event creations fail after the first `g_events_ok` */
static int g_events_ok;
static int failing_ecreate(void **ev) {
    if (g_events_ok-- > 0) return fake_dev_ops.event_create(ev);
    return DT_ERR(DT_ERR_NOMEM, "fake: no event (as told)");
}

/* an asynchronous call whose handle gets no event: refused, and the engine
 * left free for the next call; then the handle pool: a handle freed and the
 * next call needs no new event */
static void test_handle_errors(void) {
    static dt_dev_ops ops;
    ops = fake_dev_ops;
    ops.event_create = failing_ecreate;
    fake_dev_install(1);
    dt_dev_use_for_testing(&ops);
    CHECK_OK(dt_init());
    dt_comm *w = dt_comm_world();
    float *d = fake_dev_malloc(64, 0);
    dt_coll_opts o = {.mem = DT_MEM_DEVICE, .stream = fake_dev_stream(2)};
    g_events_ok = 1; /* the blocking calls' event */
    CHECK_OK(dt_allreduce_ex(d, d + 8, 8, DT_F32, DT_SUM, w, &o, NULL));
    dt_work *wk = (dt_work *)0x1;
    CHECK_ERR(dt_allreduce_ex(d, d + 8, 8, DT_F32, DT_SUM, w, &o, &wk), DT_ERR_NOMEM, "fake: no event (as told)");
    CHECK(wk == NULL, "no handle on failure");
    CHECK_OK(dt_allreduce_ex(d, d + 8, 8, DT_F32, DT_SUM, w, &o, NULL)); /* not left inside the engine */
    g_events_ok = 1;
    CHECK_OK(dt_allreduce_ex(d, d + 8, 8, DT_F32, DT_SUM, w, &o, &wk));
    CHECK_OK(dt_work_wait(wk));
    dt_work_free(wk);
    CHECK_OK(dt_allreduce_ex(d, d + 8, 8, DT_F32, DT_SUM, w, &o, &wk)); /* the kept handle: no event to make */
    CHECK_OK(dt_work_wait(wk));
    dt_work_free(wk);
    fake_dev_free(d);
    CHECK_OK(dt_finalize());
    dt_dev_use_for_testing(NULL);
}

int main(void) {
    test_plans();
    test_regions();
    test_channels();
    test_decide();
    test_classify();
    test_setting();
    test_handle_errors();
    return dt_test_finish("dev_unit");
}
