/* tests/device/zero_case.h - ZeRO stages 1-3 on device memory against the
 * same steps on host memory (dtrain/zero.h, "Device memory"): a host and a
 * device ZeRO over the same communicator, same segments (empty ones and one
 * spanning several owners among them, and an empty one computing with
 * segment 0's parameters: a shared segment), AdamW with weight decay and gradient
 * clipping, several steps of two micro-steps. Each rank's gradients are its
 * own small integers plus a term of the parameters the hooks handed out, so
 * a parameter that was gathered or re-shared wrong changes the gradients.
 * Checked bitwise, device against host: the parameters every hook hands out
 * (stage 3: gathered on the device), the gradient and parameter slices, the
 * gradient norm (with the shard on the device, offload 0: within 1e-12
 * relative, the device optimizer adding the squares in another order), the
 * caller's full device vector (stages 1, 2), and dt_zero_gather_range. The
 * device ZeRO keeps its shard and optimizer on the host (offload 1: the fake
 * device runtime of tests/device, whose memory no kernel can reach) or on
 * the device (offload 0: CUDA, or the fake CUDA runtime of tests/fakegpu):
 * dt_zero_shard_mem must say which. Shared by the fake-device test and the
 * GPU test. */
#ifndef DT_ZERO_CASE_H
#define DT_ZERO_CASE_H

#include <math.h>
#include "dev_common.h"
#include "dtrain/zero.h"

#define ZNSEG 6

/* gradients of segment s for a pass: from the rank, step, micro-step and the
 * parameters p the hook handed out (read back to the host) */
static inline void zero_grads(float *g, const float *p, size_t n, int s, int step, int micro) {
    for (size_t k = 0; k < n; k++)
        g[k] = (float)((ME + 1) * (int)(k % 7) + step - 2 * s + micro) + (p[k] > 0.0f ? 0.25f : -0.25f);
}

/* n floats of a shard of dz (device memory when its shard is there) into host dst */
static inline const float *zero_shard_host(const dev_alloc *a, const dt_zero *dz, const float *p, float *dst, size_t n) {
    if (dt_zero_shard_mem(dz) != DT_MEM_DEVICE) return p;
    if (n) a->d2h(dst, p, n * sizeof(float));
    return dst;
}

/* one stage over comm (replicas: hybrid sharding's cfg.replicas, or NULL);
 * stream: the device ZeRO's cfg.stream; offload: its cfg.offload; returns 1
 * when all matched */
static inline int zero_case_on(const dev_alloc *a, dt_comm *comm, dt_comm *replicas, int stage, void *stream, size_t cap,
                               int offload) {
    static const size_t cnt[ZNSEG] = {300, 0, 7001, 33, 0, 1000};
    static const int own[ZNSEG] = {0, 1, 2, 3, 0, 5}; /* segment 4 computes with 0's (a tied head) */
    size_t off[ZNSEG], P = 0;
    for (int s = 0; s < ZNSEG; s++) { off[s] = P; P += cnt[s]; }
    size_t B = P * sizeof(float);
    float *hp = malloc(B), *hg = calloc(P, sizeof(float)), *tmp = malloc(B), *tmp2 = malloc(B);
    float *dp = a->alloc(B), *dg = stage == 1 ? a->alloc(B) : NULL;
    for (size_t k = 0; k < P; k++) hp[k] = (float)(ME * 3 + (int)(k % 11)) * 0.125f - 0.5f; /* root's wins */
    a->h2d(dp, hp, B);
    if (dg) a->h2d(dg, hg, B);
    dt_zero_config hc;
    dt_zero_config_default(&hc);
    hc.stage = stage;
    hc.bucket_cap_bytes = cap;
    hc.first_bucket_bytes = cap / 2;
    hc.mem = DT_MEM_HOST;
    hc.seg_owner = own;
    hc.replicas = replicas;
    dt_zero_config dc = hc;
    dc.mem = DT_MEM_DEVICE;
    dc.stream = stream;
    dc.offload = offload;
    dt_optim_config oc;
    CHECK_OK(dt_optim_config_default(&oc, DT_OPTIM_ADAMW));
    oc.weight_decay = 0.01;
    dt_zero *hz = NULL, *dz = NULL;
    CHECK_OK(dt_zero_create(comm, &hc, P, off, cnt, ZNSEG, hp, stage == 1 ? hg : NULL, &oc, &hz));
    CHECK_OK(dt_zero_create(comm, &dc, P, off, cnt, ZNSEG, dp, dg, &oc, &dz));
    int ok = hz && dz;
    CHECK(!dz || dt_zero_shard_mem(dz) == (offload ? DT_MEM_HOST : DT_MEM_DEVICE),
          "zero-%d offload %d: dt_zero_shard_mem %d", stage, offload, (int)dt_zero_shard_mem(dz));
    CHECK(!dz || dt_optim_device(dt_zero_optim(dz)) == (offload ? DT_DEVICE_CPU : DT_DEVICE_CUDA),
          "zero-%d offload %d: the optimizer on device %d", stage, offload, dt_optim_device(dt_zero_optim(dz)));
    CHECK(dt_zero_shard_mem(hz) == DT_MEM_HOST && dt_zero_shard_mem(NULL) == DT_MEM_HOST, "host shards are host memory");
    float *sh = malloc(B);
    char what[128];
    for (int step = 0; ok && step < 3; step++) {
        for (int micro = 0; ok && micro < 2; micro++) {
            int sync = stage > 1 || micro == 1;
            CHECK_OK(dt_zero_begin_step(hz, sync));
            CHECK_OK(dt_zero_begin_step(dz, sync));
            for (int s = 0; s < ZNSEG; s++) {
                float *h = NULL, *d = NULL;
                size_t n = cnt[own[s]];
                CHECK_OK(dt_zero_pre_forward(hz, s, &h));
                CHECK_OK(dt_zero_pre_forward(dz, s, &d));
                if (n && h && d) {
                    a->d2h(tmp, d, n * sizeof(float));
                    snprintf(what, sizeof what, "zero-%d step %d.%d forward params of segment %d (device vs host)", stage, step, micro, s);
                    ok &= same_elems(what, DT_F32, tmp, h, n);
                } else {
                    CHECK(!n == !h && !n == !d, "zero-%d segment %d: params %p / %p for count %zu", stage, s, (void *)h, (void *)d, n);
                }
                CHECK_OK(dt_zero_post_forward(hz, s));
                CHECK_OK(dt_zero_post_forward(dz, s));
            }
            for (int s = ZNSEG - 1; s >= 0; s--) {
                float *h = NULL, *hgr = NULL, *d = NULL, *dgr = NULL;
                size_t n = cnt[own[s]];
                CHECK_OK(dt_zero_pre_backward(hz, s, &h, &hgr));
                CHECK_OK(dt_zero_pre_backward(dz, s, &d, &dgr));
                if (n && h && hgr && d && dgr) {
                    a->d2h(tmp, d, n * sizeof(float));
                    snprintf(what, sizeof what, "zero-%d step %d.%d backward params of segment %d (device vs host)", stage, step, micro, s);
                    ok &= same_elems(what, DT_F32, tmp, h, n);
                    /* stage 1 accumulates into the caller's buffer; 2/3 hand out zeroed
                     * ones (a shared owner's: accumulated into by its users) */
                    a->d2h(tmp2, dgr, n * sizeof(float));
                    snprintf(what, sizeof what, "zero-%d step %d.%d gradient buffer of segment %d at pre_backward", stage, step, micro, s);
                    ok &= same_elems(what, DT_F32, tmp2, hgr, n);
                    zero_grads(tmp, h, n, s, step, micro);
                    for (size_t k = 0; k < n; k++) hgr[k] += tmp[k];
                    a->h2d(dgr, hgr, n * sizeof(float));
                }
                CHECK_OK(dt_zero_grad_ready(hz, s));
                CHECK_OK(dt_zero_grad_ready(dz, s));
                CHECK_OK(dt_zero_post_backward(hz, s));
                CHECK_OK(dt_zero_post_backward(dz, s));
            }
            CHECK_OK(dt_zero_finish(hz));
            CHECK_OK(dt_zero_finish(dz));
        }
        size_t lo, hi, dlo, dhi;
        CHECK_OK(dt_zero_shard(hz, &lo, &hi));
        CHECK_OK(dt_zero_shard(dz, &dlo, &dhi));
        CHECK(lo == dlo && hi == dhi, "zero-%d: shards [%zu, %zu) vs [%zu, %zu)", stage, lo, hi, dlo, dhi);
        double hn = -1, dn = -2;
        CHECK_OK(dt_zero_step(hz, 1e-2f, 1e3, &hn));
        CHECK_OK(dt_zero_step(dz, 1e-2f, 1e3, &dn));
        CHECK(offload ? hn == dn : fabs(hn - dn) <= 1e-12 * hn,
              "zero-%d step %d: gradient norm %.17g on the device, %.17g on the host", stage, step, dn, hn);
        snprintf(what, sizeof what, "zero-%d step %d parameter slice (device vs host)", stage, step);
        ok &= same_elems(what, DT_F32, zero_shard_host(a, dz, dt_zero_param_shard(dz), sh, hi - lo),
                         dt_zero_param_shard(hz), hi - lo);
        snprintf(what, sizeof what, "zero-%d step %d gradient slice (device vs host)", stage, step);
        ok &= same_elems(what, DT_F32, zero_shard_host(a, dz, dt_zero_grad_shard(dz), sh, hi - lo),
                         dt_zero_grad_shard(hz), hi - lo);
        if (stage == 1) { /* the caller zeroes its full gradient buffer between steps */
            memset(hg, 0, B);
            a->h2d(dg, hg, B);
        }
    }
    /* the whole vector, consolidated on comm's first rank (hybrid: each replica's) */
    int root = dt_comm_world_rank_of(comm, 0);
    CHECK_OK(dt_zero_gather_range(hz, 0, P, ME == root ? tmp2 : NULL, root));
    CHECK_OK(dt_zero_gather_range(dz, 0, P, ME == root ? tmp : NULL, root));
    if (ME == root) {
        snprintf(what, sizeof what, "zero-%d gathered parameters (device vs host)", stage);
        ok &= same_elems(what, DT_F32, tmp, tmp2, P);
    }
    if (stage < 3) { /* the caller's device vector holds every owner's update */
        float *t = NULL;
        for (int s = 0; s < ZNSEG; s++) {
            CHECK_OK(dt_zero_pre_forward(hz, s, &t));
            CHECK_OK(dt_zero_pre_forward(dz, s, &t));
        }
        a->d2h(tmp, dp, B);
        snprintf(what, sizeof what, "zero-%d caller's device parameters after the last step (vs host)", stage);
        ok &= same_elems(what, DT_F32, tmp, hp, P);
    }
    /* a loaded slice reaches the device (stage 3: the next gather) */
    size_t lo = 0, hi = 0;
    CHECK_OK(dt_zero_shard(dz, &lo, &hi));
    for (size_t k = 0; k < hi - lo; k++) tmp2[k] = (float)(lo + k) * 0.5f;
    CHECK_OK(dt_zero_load_param_shard(hz, tmp2));
    CHECK_OK(dt_zero_load_param_shard(dz, tmp2));
    CHECK_OK(dt_zero_gather_range(dz, 0, P, ME == root ? tmp : NULL, root));
    if (ME == root) {
        for (size_t k = 0; k < P; k++) tmp2[k] = (float)k * 0.5f;
        snprintf(what, sizeof what, "zero-%d parameters after dt_zero_load_param_shard on every rank", stage);
        ok &= same_elems(what, DT_F32, tmp, tmp2, P);
    }
    dt_zero_free(hz);
    dt_zero_free(dz);
    free(hp); free(hg); free(tmp); free(tmp2); free(sh);
    a->release(dp);
    if (dg) a->release(dg);
    return ok;
}

static inline int zero_case(const dev_alloc *a, int stage, void *stream, size_t cap, int offload) {
    return zero_case_on(a, dt_comm_world(), NULL, stage, stream, cap, offload);
}

/* hybrid sharding at 4 ranks (else 1 without testing): sharded over the
 * pairs [0,1] and [2,3], each shard replicated over [0,2] / [1,3] */
static inline int zero_hybrid_case(const dev_alloc *a, int stage, void *stream, int offload) {
    if (W != 4) return 1;
    dt_comm *shard = NULL, *rep = NULL;
    CHECK_OK(dt_comm_from_rank_list_str("[[0,1],[2,3]]", &shard));
    CHECK_OK(dt_comm_from_rank_list_str("[[0,2],[1,3]]", &rep));
    return shard && rep && zero_case_on(a, shard, rep, stage, stream, 0, offload);
}

/* the device ZeRO's refusals: host params under DT_MEM_DEVICE, mixed kinds,
 * an offload that is not 0 or 1 */
static inline void zero_errors(const dev_alloc *a) {
    size_t off[1] = {0}, cnt[1] = {64};
    float hp[64] = {0}, hg[64] = {0};
    float *dp = a->alloc(sizeof hp), *dg = a->alloc(sizeof hg);
    dt_optim_config oc;
    dt_optim_config_default(&oc, DT_OPTIM_SGD);
    dt_zero_config c;
    dt_zero_config_default(&c);
    dt_zero *z = NULL;
    c.mem = DT_MEM_DEVICE;
    CHECK_ERRF(dt_zero_create(dt_comm_world(), &c, 64, off, cnt, 1, hp, hg, &oc, &z), DT_ERR_INVALID,
               "dt_zero_create", "DT_MEM_DEVICE but params");
    c.mem = DT_MEM_AUTO;
    CHECK_ERRF(dt_zero_create(dt_comm_world(), &c, 64, off, cnt, 1, dp, hg, &oc, &z), DT_ERR_INVALID,
               "dt_zero_create", "params (device memory) and grads (host memory)");
    c.offload = 2;
    CHECK_ERRF(dt_zero_create(dt_comm_world(), &c, 64, off, cnt, 1, dp, dg, &oc, &z), DT_ERR_INVALID,
               "dt_zero_create", "cfg.offload 2");
    c.offload = 0;
    c.mem = (dt_mem_kind)7;
    CHECK_ERRF(dt_zero_create(dt_comm_world(), &c, 64, off, cnt, 1, hp, hg, &oc, &z), DT_ERR_INVALID,
               "dt_zero_create", "cfg.mem 7");
    CHECK(z == NULL, "a refused dt_zero_create left *out %p", (void *)z);
    a->release(dp);
    a->release(dg);
}

#endif
