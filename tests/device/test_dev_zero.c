/* dev_zero: ZeRO stages 1-3 on (fake) device memory equal the host path
 * (zero_case.h): over the fake device transport (stream-ordered) and, with
 * --staged, over host staging; per-layer and larger buckets; the shard and
 * optimizer on the host (offload 1: this fake runtime's memory has no
 * kernels; the device shard is tests/fakegpu's fakegpu_zero); and the device
 * ZeRO's refusals, the device shard's on this runtime among them. */
#define _POSIX_C_SOURCE 200809L
#include "fake_devnet.h"
#include "fake_alloc.h"
#include "fake_device.h"
#include "zero_case.h"

int main(int argc, char **argv) {
    int staged = argc > 1 && strcmp(argv[1], "--staged") == 0;
    fake_dev_install(1);
    if (!staged) fake_devnet_install();
    coll_init();
    for (int stage = 1; stage <= 3; stage++) {
        CHECK(zero_case(&FAKE, stage, fake_dev_stream(5), 0, 1), "zero-%d, per-layer buckets: device differs from host", stage);
        CHECK(zero_case(&FAKE, stage, NULL, (size_t)16 << 10, 1), "zero-%d, 16 KiB buckets: device differs from host", stage);
        CHECK(zero_hybrid_case(&FAKE, stage, fake_dev_stream(5), 1), "zero-%d, hybrid (2 x 2): device differs from host", stage);
    }
    zero_errors(&FAKE);
    /* the shard on the device needs the optimizer's kernels: CUDA's, not this runtime's */
    {
        size_t off[1] = {0}, cnt[1] = {64};
        float *dp = FAKE.alloc(64 * sizeof(float)), *dg = FAKE.alloc(64 * sizeof(float));
        dt_optim_config oc;
        dt_optim_config_default(&oc, DT_OPTIM_ADAMW);
        dt_zero_config c;
        dt_zero_config_default(&c);
        CHECK(c.offload == 0, "offload defaults to 0 (the device), got %d", c.offload);
        dt_zero *z = NULL;
        CHECK_ERRF(dt_zero_create(dt_comm_world(), &c, 64, off, cnt, 1, dp, dg, &oc, &z), DT_ERR_UNSUPPORTED,
                   "dt_zero_create", "set cfg.offload 1");
        CHECK(z == NULL, "a refused dt_zero_create left *out %p", (void *)z);
        FAKE.release(dp);
        FAKE.release(dg);
    }
    CHECK_OK(dt_finalize());
    return dt_test_finish("dev_zero");
}
