/* gpu_zero: ZeRO stages 1-3 on CUDA device memory equal the host path
 * (tests/device/zero_case.h): parameters broadcast and gathered on the
 * device, layer gradients reduced from device buffers, on a stream of the
 * caller's and on the default stream; the shard and optimizer on the device
 * (the default) and on the host (offload); at 4 ranks also hybrid sharding
 * (2 shards of 2, replicated: the shard's sum across replicas on the device);
 * and the device ZeRO's refusals.
 * Skipped (77) without a device. */
#define _POSIX_C_SOURCE 200809L
#include "gpu_common.h"
#include "zero_case.h"

static const dev_alloc CUDA = {gpu_alloc, gpu_release, gpu_h2d, gpu_d2h};

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
    zero_errors(&CUDA);
    gpu_check(cudaStreamDestroy(st), "cudaStreamDestroy");
    CHECK_OK(dt_finalize());
    return dt_test_finish("gpu_zero");
}
