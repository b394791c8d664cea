/* dev_ddp: data parallelism on (fake) device memory equals the host path
 * (ddp_case.h): over the fake device transport (stream-ordered: each bucket
 * ordered after its backward by an event, the backward stream made to wait
 * at finish, no host wait) and, with --staged, over staging; buckets of
 * several sizes, overlapped or not, and the memory kind left to the
 * collectives (auto). Checks the stream plumbing with the fake runtime's
 * counters. */
#define _POSIX_C_SOURCE 200809L
#include "ddp_case.h"
#include "fake_devnet.h"
#include "fake_alloc.h"
#include "fake_device.h"

int main(int argc, char **argv) {
    int staged = argc > 1 && strcmp(argv[1], "--staged") == 0;
    fake_dev_install(1);
    if (!staged) fake_devnet_install();
    coll_init();
    void *st = fake_dev_stream(5);
    static const size_t caps[] = {0, 4096, (size_t)64 << 10, (size_t)25 << 20};
    for (int c = 0; c < 4; c++)
        for (int ov = 0; ov < 2; ov++) {
            fake_dev_stats s;
            fake_dev_stats_reset();
            int nb = ddp_case(&FAKE, DT_MEM_DEVICE, st, NULL, caps[c], ov);
            fake_dev_stats_get(&s);
            /* per step and bucket: the communication stream waits for backward,
             * the backward stream for the reduction */
            if (!staged || W == 1)
                CHECK(s.stream_waits == 2 * 2 * nb, "cap %zu overlap %d: %ld stream waits for %d buckets, want %d",
                      caps[c], ov, s.stream_waits, nb, 4 * nb);
        }
    ddp_case(&FAKE, DT_MEM_AUTO, NULL, NULL, 4096, 1);
    CHECK_OK(dt_finalize());
    return dt_test_finish("dev_ddp");
}
