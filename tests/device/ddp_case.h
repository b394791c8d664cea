/* tests/device/ddp_case.h - data parallelism on device memory against the same
 * steps on host memory (dtrain/ddp.h, "Device memory"): segments of several
 * sizes, a host wrapper and a device wrapper over the same communicator, two
 * steps (each rank's gradients its own exact small integers, so averages are
 * exact), then the averaged gradients and the broadcast parameters compared
 * bitwise. Shared by the fake-device test and the GPU test. */
#ifndef DT_DDP_CASE_H
#define DT_DDP_CASE_H

#include "dev_common.h"

#define DDP_NSEG 5

/* mem/stream: the device wrapper's settings; returns the number of buckets */
static inline int ddp_case(const dev_alloc *a, dt_mem_kind mem, void *stream, void (*sync)(void *), size_t cap,
                           int overlap) {
    static const size_t sizes[DDP_NSEG] = {100, 5000, 33, 70000, 1};
    float *hp[DDP_NSEG], *hg[DDP_NSEG], *dp[DDP_NSEG], *dg[DDP_NSEG], *back[DDP_NSEG];
    dt_ddp_segment hs[DDP_NSEG], ds[DDP_NSEG];
    for (int i = 0; i < DDP_NSEG; i++) {
        size_t n = sizes[i], b = n * sizeof(float);
        hp[i] = malloc(b); hg[i] = malloc(b); back[i] = malloc(b);
        for (size_t k = 0; k < n; k++) hp[i][k] = (float)(ME * 1000 + (int)(k % 97) + i);
        dp[i] = a->alloc(b); dg[i] = a->alloc(b);
        a->h2d(dp[i], hp[i], b);
        hs[i] = (dt_ddp_segment){hp[i], hg[i], n};
        ds[i] = (dt_ddp_segment){dp[i], dg[i], n};
    }
    dt_ddp_config hc, dc;
    dt_ddp_config_default(&hc);
    hc.bucket_cap_bytes = cap;
    hc.first_bucket_bytes = cap / 4;
    hc.overlap = overlap;
    hc.mem = DT_MEM_HOST;
    dc = hc;
    dc.mem = mem;
    dc.stream = stream;
    dt_ddp *hd = NULL, *dd = NULL;
    CHECK_OK(dt_ddp_create(dt_comm_world(), hs, DDP_NSEG, NULL, 0, &hc, &hd));
    CHECK_OK(dt_ddp_create(dt_comm_world(), ds, DDP_NSEG, NULL, 0, &dc, &dd));
    if (!hd || !dd) return 0;
    for (int step = 0; step < 2; step++) {
        CHECK_OK(dt_ddp_begin_step(hd));
        CHECK_OK(dt_ddp_begin_step(dd));
        for (int i = DDP_NSEG - 1; i >= 0; i--) { /* backward: last segment first */
            size_t n = sizes[i];
            for (size_t k = 0; k < n; k++) hg[i][k] = (float)((ME + 1) * (int)(k % 13) + step - 2 * i);
            a->h2d(dg[i], hg[i], n * sizeof(float));
            CHECK_OK(dt_ddp_grad_ready(hd, i));
            CHECK_OK(dt_ddp_grad_ready(dd, i));
        }
        CHECK_OK(dt_ddp_finish(hd));
        CHECK_OK(dt_ddp_finish(dd));
        if (sync) sync(stream);
        for (int i = 0; i < DDP_NSEG; i++) {
            char what[96];
            a->d2h(back[i], dg[i], sizes[i] * sizeof(float));
            snprintf(what, sizeof what, "ddp step %d segment %d gradients (device vs host)", step, i);
            same_elems(what, DT_F32, back[i], hg[i], sizes[i]);
            a->d2h(back[i], dp[i], sizes[i] * sizeof(float));
            snprintf(what, sizeof what, "ddp step %d segment %d parameters (device vs host)", step, i);
            same_elems(what, DT_F32, back[i], hp[i], sizes[i]);
        }
    }
    int nb = dt_ddp_num_buckets(dd);
    dt_ddp_free(hd);
    dt_ddp_free(dd);
    for (int i = 0; i < DDP_NSEG; i++) {
        free(hp[i]); free(hg[i]); free(back[i]);
        a->release(dp[i]); a->release(dg[i]);
    }
    return nb;
}

#endif
