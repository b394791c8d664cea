/* dev_fault MODE: device-path jobs that must end by the watchdog (run through
 * tests/fault/expect_fail.sh), on the fake runtime and transport.
 *   async-error  rank 1's device transport reports an asynchronous error (as
 *                NCCL does for a lost peer) while rank 0 waits in a device
 *                allreduce: rank 1's watchdog prints the error, aborts the
 *                transport's communicators, ends the job (exit code 75);
 *   stall        rank 1 skips a device allreduce: rank 0's stall report names
 *                it, as on the host path. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "fake_devnet.h"
#include "fake_device.h"
#include "testutil.h"

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    fake_dev_install(1);
    fake_devnet_install();
    if (dt_init() != DT_OK) { fprintf(stderr, "dt_init: %s\n", dt_last_error()); return 1; }
    dt_comm *w = dt_comm_world();
    int me = dt_comm_rank(w);
    float *a = fake_dev_malloc(4096 * sizeof(float), 0);
    dt_coll_opts o = {.mem = DT_MEM_DEVICE, .stream = fake_dev_stream(1)};
    for (int i = 0; i < 3; i++)
        if (dt_allreduce_ex(a, a, 4096, DT_F32, DT_SUM, w, &o, NULL) != DT_OK) {
            fprintf(stderr, "allreduce: %s\n", dt_last_error());
            return 1;
        }
    if (strcmp(mode, "async-error") == 0 && me == 1) {
        fake_devnet_fail("peer 0 is gone (injected)");
        sleep(60);
    } else if (strcmp(mode, "stall") == 0 && me == 1) {
        sleep(60);
    } else {
        int rc = dt_allreduce_ex(a, a, 4096, DT_F32, DT_SUM, w, &o, NULL);
        fprintf(stderr, "rank %d: allreduce returned %s\n", me, dt_status_str(rc));
        sleep(60);
    }
    return 1;
}
