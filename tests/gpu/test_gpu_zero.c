/* gpu_zero: ZeRO stages 1-3 on CUDA device memory equal the host path
 * (tests/device/zero_case.h): parameters broadcast and gathered on the
 * device, layer gradients reduced from device buffers, on a stream of the
 * caller's and on the default stream; the shard and optimizer on the device
 * (the default) and on the host (offload); at 4 ranks also hybrid sharding
 * (2 shards of 2, replicated: the shard's sum across replicas on the device);
 * mixed precision (cfg.params_bf16 at stages 1/2: the f32 masters on the
 * device, a bf16 copy written and re-shared from them; cfg.gather_bf16 at
 * stage 3: bf16 layers gathered from them) against the host's f32 steps; and
 * the device ZeRO's refusals.
 * Skipped (77) without a device. */
#define _POSIX_C_SOURCE 200809L
#include "gpu_common.h"
#include "zero_case.h"

static const dev_alloc CUDA = {gpu_alloc, gpu_release, gpu_h2d, gpu_d2h};

/* Mixed precision on the device against a host ZeRO in f32: stages 1/2 with
 * cfg.params_bf16, stage 3 with cfg.gather_bf16 (a segment computing with
 * segment 0's parameters among them). The caller's f32 device vector is
 * released right after create; the device hooks hand out no f32 parameters;
 * after each of 3 steps the device master slice is the host's slice, bit for
 * bit (no clipping: the device norm's double sum may differ in its last
 * bits); the device bf16 values (stages 1/2: the copy, once the hooks
 * waited; stage 3: each gathered layer, forward and backward) are the host's
 * f32 rounded, every element; the gathered f32 vectors agree. 1 when all
 * matched. */
#define MNSEG 6
static size_t layer16_wrong(dt_zero *dz, int s, const float *h, uint16_t *c16, size_t n) {
    const uint16_t *d16 = dt_zero_params_bf16(dz, s);
    size_t bad = (d16 != NULL) != (n != 0);
    if (d16 && n) gpu_d2h(c16, d16, n * 2);
    for (size_t k = 0; d16 && h && k < n; k++) bad += c16[k] != dt_f32_to_bf16(h[k]);
    return bad;
}

static int master_case(int stage, cudaStream_t st) {
    static const size_t cnt[MNSEG] = {300, 0, 7001, 33, 1000, 0};
    static const int own[MNSEG] = {0, 1, 2, 3, 4, 0};
    size_t off[MNSEG], P = 0;
    for (int s = 0; s < MNSEG; s++) { off[s] = P; P += cnt[s]; }
    const size_t B = P * sizeof(float);
    float *hp = malloc(B), *hg = calloc(P, sizeof(float)), *tmp = malloc(B), *tmp2 = malloc(B);
    uint16_t *c16 = malloc(P * 2);
    float *dp = gpu_alloc(B), *dg = stage == 1 ? gpu_alloc(B) : NULL;
    uint16_t *d16 = gpu_alloc(P * 2);
    for (size_t k = 0; k < P; k++) hp[k] = (float)(ME * 3 + (int)(k % 11)) * 0.1f - 0.5f, c16[k] = 0x7fa5;
    gpu_h2d(dp, hp, B);
    gpu_h2d(d16, c16, P * 2);
    if (dg) gpu_h2d(dg, hg, B);
    dt_zero_config hc;
    dt_zero_config_default(&hc);
    hc.stage = stage;
    hc.bucket_cap_bytes = (size_t)4 << 10;
    hc.mem = DT_MEM_HOST;
    hc.seg_owner = own;
    dt_zero_config dc = hc;
    dc.mem = DT_MEM_DEVICE;
    dc.stream = st;
    if (stage < 3) dc.params_bf16 = d16;
    else dc.gather_bf16 = 1;
    dt_optim_config oc;
    CHECK_OK(dt_optim_config_default(&oc, DT_OPTIM_ADAMW));
    oc.weight_decay = 0.01f;
    dt_zero *hz = NULL, *dz = NULL;
    CHECK_OK(dt_zero_create(dt_comm_world(), &hc, P, off, cnt, MNSEG, hp, stage == 1 ? hg : NULL, &oc, &hz));
    CHECK_OK(dt_zero_create(dt_comm_world(), &dc, P, off, cnt, MNSEG, dp, dg, &oc, &dz));
    gpu_release(dp); /* the f32 vector is read at create only */
    int ok = hz && dz;
    size_t lo = 0, hi = 0, bad = 0;
    if (ok) CHECK_OK(dt_zero_shard(dz, &lo, &hi));
    for (int step = 0; ok && step < 3; step++) {
        CHECK_OK(dt_zero_begin_step(hz, 1));
        CHECK_OK(dt_zero_begin_step(dz, 1));
        for (int s = 0; s < MNSEG; s++) {
            float *h = NULL, *d = (float *)&d;
            CHECK_OK(dt_zero_pre_forward(hz, s, &h));
            CHECK_OK(dt_zero_pre_forward(dz, s, &d));
            CHECK(d == NULL, "zero-%d in bf16: pre_forward handed out f32 parameters %p", stage, (void *)d);
            if (stage == 3) bad += layer16_wrong(dz, s, h, c16 + off[own[s]], cnt[own[s]]);
            CHECK_OK(dt_zero_post_forward(hz, s));
            CHECK_OK(dt_zero_post_forward(dz, s));
        }
        if (stage < 3) {
            gpu_d2h(c16, d16, P * 2);
            for (size_t k = 0; k < P; k++) bad += c16[k] != dt_f32_to_bf16(hp[k]);
        }
        for (int s = MNSEG - 1; s >= 0; s--) {
            float *h = NULL, *hgr = NULL, *d = NULL, *dgr = NULL;
            const int o = own[s];
            CHECK_OK(dt_zero_pre_backward(hz, s, &h, &hgr));
            CHECK_OK(dt_zero_pre_backward(dz, s, &d, &dgr));
            if (stage == 3) bad += layer16_wrong(dz, s, h, c16 + off[o], cnt[o]);
            if (cnt[o] && hgr && dgr) { /* from the bf16 values the model computes with */
                for (size_t k = 0; k < cnt[o]; k++)
                    hgr[k] += (float)((ME + 1) * (int)(k % 7) + step - 2 * s) + dt_bf16_to_f32(c16[off[o] + k]);
                gpu_h2d(dgr, hgr, cnt[o] * sizeof(float));
            }
            CHECK_OK(dt_zero_grad_ready(hz, s));
            CHECK_OK(dt_zero_grad_ready(dz, s));
            CHECK_OK(dt_zero_post_backward(hz, s));
            CHECK_OK(dt_zero_post_backward(dz, s));
        }
        CHECK_OK(dt_zero_finish(hz));
        CHECK_OK(dt_zero_finish(dz));
        CHECK_OK(dt_zero_step(hz, 1e-2f, 0, NULL));
        CHECK_OK(dt_zero_step(dz, 1e-2f, 0, NULL));
        if (hi > lo) gpu_d2h(tmp, dt_zero_param_shard(dz), (hi - lo) * sizeof(float));
        ok &= same_elems("bf16: the device master slice (vs the host's)", DT_F32, tmp, dt_zero_param_shard(hz), hi - lo);
        if (stage == 1) {
            memset(hg, 0, B);
            gpu_h2d(dg, hg, B);
        }
    }
    for (int s = 0; ok && s < MNSEG; s++) {
        float *t, *h;
        CHECK_OK(dt_zero_pre_forward(hz, s, &h));
        CHECK_OK(dt_zero_pre_forward(dz, s, &t));
        if (stage == 3) bad += layer16_wrong(dz, s, h, c16 + off[own[s]], cnt[own[s]]);
        CHECK_OK(dt_zero_post_forward(hz, s));
        CHECK_OK(dt_zero_post_forward(dz, s));
    }
    if (stage < 3) {
        gpu_d2h(c16, d16, P * 2);
        for (size_t k = 0; ok && k < P; k++) bad += c16[k] != dt_f32_to_bf16(hp[k]);
    }
    CHECK(bad == 0, "zero-%d in bf16 on the device: %zu bf16 parameters are not the host's f32 rounded", stage, bad);
    int root = dt_comm_world_rank_of(dt_comm_world(), W - 1);
    CHECK_OK(dt_zero_gather_range(hz, 0, P, ME == root ? tmp2 : NULL, root));
    CHECK_OK(dt_zero_gather_range(dz, 0, P, ME == root ? tmp : NULL, root));
    if (ok && ME == root) ok &= same_elems("bf16: the gathered f32 parameters (device vs host)", DT_F32, tmp, tmp2, P);
    dt_zero_free(hz);
    dt_zero_free(dz);
    gpu_release(d16);
    if (dg) gpu_release(dg);
    free(hp), free(hg), free(tmp), free(tmp2), free(c16);
    return ok && bad == 0;
}

int main(void) {
    gpu_require("gpu_zero");
    coll_init();
    if (W > 1 && strcmp(dt_comm_device_path(dt_comm_world()), "staged") == 0 &&
        strcmp(dt_comm_backend(dt_comm_world()), "void") == 0) {
        if (ME == 0) printf("gpu_zero: skipped: %d processes sharing a GPU without MPI\n", W);
        dt_finalize();
        return 77;
    }
    if (ME == 0) printf("gpu_zero: %d ranks, device path %s\n", W, dt_comm_device_path(dt_comm_world()));
    /* NCCL's sums between more than two ranks may round differently from the host's */
    coll_tolerant = W > 2 && strcmp(dt_comm_device_path(dt_comm_world()), "nccl") == 0;
    cudaStream_t st;
    gpu_check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
    for (int stage = 1; stage <= 3; stage++) {
        for (int offload = 0; offload <= 1; offload++) {
            CHECK(zero_case(&CUDA, stage, st, 0, offload), "zero-%d offload %d, per-layer buckets: device differs from host",
                  stage, offload);
            CHECK(zero_case(&CUDA, stage, NULL, (size_t)16 << 10, offload),
                  "zero-%d offload %d, 16 KiB buckets: device differs from host", stage, offload);
            CHECK(zero_hybrid_case(&CUDA, stage, st, offload),
                  "zero-%d offload %d, hybrid sharding (2 x 2): device differs from host", stage, offload);
        }
    }
    for (int stage = 1; stage <= 3; stage++)
        CHECK(master_case(stage, st), "zero-%d in bf16 (params_bf16, gather_bf16) on the device: not the host's f32 "
              "steps", stage);
    { /* offload keeps the f32 working copy on the device: no master shards to write a bf16 copy from */
        size_t off[1] = {0}, cnt[1] = {64};
        float *dp = gpu_alloc(64 * sizeof(float));
        uint16_t *d16 = gpu_alloc(64 * 2);
        dt_zero_config zc;
        dt_zero_config_default(&zc);
        zc.stage = 2;
        zc.offload = 1;
        zc.params_bf16 = d16;
        dt_optim_config oc;
        CHECK_OK(dt_optim_config_default(&oc, DT_OPTIM_SGD));
        dt_zero *z = NULL;
        CHECK_ERR(dt_zero_create(dt_comm_world(), &zc, 64, off, cnt, 1, dp, NULL, &oc, &z), DT_ERR_INVALID,
                  "cfg.params_bf16 with cfg.offload 1");
        CHECK(z == NULL, "a refused dt_zero_create leaves *out NULL");
        zc.params_bf16 = NULL;
        zc.stage = 3;
        zc.gather_bf16 = 1;
        CHECK_ERR(dt_zero_create(dt_comm_world(), &zc, 64, off, cnt, 1, dp, NULL, &oc, &z), DT_ERR_INVALID,
                  "gather_bf16 1 with cfg.offload 1");
        CHECK(z == NULL, "a refused dt_zero_create leaves *out NULL");
        gpu_release(dp);
        gpu_release(d16);
    }
    zero_errors(&CUDA);
    gpu_check(cudaStreamDestroy(st), "cudaStreamDestroy");
    CHECK_OK(dt_finalize());
    return dt_test_finish("gpu_zero");
}
