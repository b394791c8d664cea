/* dev_zero: ZeRO stages 1-3 on (fake) device memory equal the host path
 * (zero_case.h): over the fake device transport (stream-ordered) and, with
 * --staged, over host staging; per-layer and larger buckets; and the device
 * ZeRO's refusals. */
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
        CHECK(zero_case(&FAKE, stage, fake_dev_stream(5), 0), "zero-%d, per-layer buckets: device differs from host", stage);
        CHECK(zero_case(&FAKE, stage, NULL, (size_t)16 << 10), "zero-%d, 16 KiB buckets: device differs from host", stage);
    }
    zero_errors(&FAKE);
    CHECK_OK(dt_finalize());
    return dt_test_finish("dev_zero");
}
