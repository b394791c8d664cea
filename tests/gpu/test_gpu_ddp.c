/* gpu_ddp: data parallelism on CUDA device memory equals the host path
 * (tests/device/ddp_case.h): backward's gradients on a stream of the
 * caller's, buckets reduced on the wrapper's communication stream ordered by
 * events, the caller's stream made to wait at finish; several bucket sizes,
 * overlapped or not; and the memory kind left to the collectives (auto, the
 * default stream). Averaged gradients and broadcast parameters bitwise equal
 * to the host wrapper's. Skipped (77) without a device. */
#define _POSIX_C_SOURCE 200809L
#include "ddp_case.h"
#include "gpu_common.h"

static const dev_alloc CUDA = {gpu_alloc, gpu_release, gpu_h2d, gpu_d2h};

static void sync_stream(void *s) { gpu_check(cudaStreamSynchronize((cudaStream_t)s), "cudaStreamSynchronize"); }

int main(void) {
    gpu_require("gpu_ddp");
    coll_init();
    if (W > 1 && strcmp(dt_comm_device_path(dt_comm_world()), "staged") == 0 &&
        strcmp(dt_comm_backend(dt_comm_world()), "void") == 0) {
        if (ME == 0) printf("gpu_ddp: skipped: %d processes sharing a GPU without MPI\n", W);
        dt_finalize();
        return 77;
    }
    if (ME == 0) printf("gpu_ddp: %d ranks, device path %s\n", W, dt_comm_device_path(dt_comm_world()));
    coll_tolerant = W > 2 && strcmp(dt_comm_device_path(dt_comm_world()), "nccl") == 0;
    cudaStream_t st;
    gpu_check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
    static const size_t caps[] = {0, 4096, (size_t)64 << 10, (size_t)25 << 20};
    for (int c = 0; c < 4; c++)
        for (int ov = 0; ov < 2; ov++) ddp_case(&CUDA, DT_MEM_DEVICE, st, sync_stream, caps[c], ov);
    ddp_case(&CUDA, DT_MEM_AUTO, NULL, NULL, 4096, 1);
    gpu_check(cudaStreamDestroy(st), "cudaStreamDestroy");
    CHECK_OK(dt_finalize());
    return dt_test_finish("gpu_ddp");
}
