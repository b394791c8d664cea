/* gpu_coll: collectives on CUDA device memory, against the host references
 * of tests/coll (bitwise, except where NCCL reduces floats between several
 * ranks: within a few units in the last place). Every collective x dtype x op
 * x in place x root on the world and every rank_list group of this world
 * size, blocking, with the memory kind found (auto) and said (DT_MEM_DEVICE
 * on a stream of its own); large calls; fused lists and one tensor per rank;
 * asynchronous calls (event completion, dt_work_stream_wait, dt_coll_sync);
 * what counts as device memory (pinned host memory does not: under the tcp
 * bootstrap with several processes it is refused; managed memory does); host
 * and device buffers in one call. Prints the path of each communicator (nccl,
 * staged, local). Skipped (77) without a device.
 * Run by the GPU suite (tests/gpu/run_gpu_suite.sh) at 1 rank over NCCL
 * (standalone, mpirun, torchrun-style tcp bootstrap) and at 2 and 4 ranks
 * sharing the GPU (staged over MPI; over NCCL if it accepts them). */
#define _POSIX_C_SOURCE 200809L
#include "dev_common.h"
#include "gpu_common.h"

static const dev_alloc CUDA = {gpu_alloc, gpu_release, gpu_h2d, gpu_d2h};

static void async_jobs(const tcomm *t, cudaStream_t st) {
    dt_coll_opts o = {.mem = DT_MEM_DEVICE, .stream = st};
    dev_job d[4];
    dt_work *w[4];
    for (int i = 0; i < 4; i++) {
        job_init(&d[i].j, i % 2 ? J_AG : J_AR, t, DT_F32, DT_SUM, 4096 + (size_t)i, i == 3, -1, -1, 60 + (uint64_t)i);
        CHECK_OK(dev_job_submit(&d[i], &CUDA, &o, &w[i]));
    }
    CHECK_OK(dt_work_wait(w[0]));
    cudaStream_t other;
    gpu_check(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), "cudaStreamCreate");
    CHECK_OK(dt_work_stream_wait(w[1], other));
    gpu_check(cudaStreamSynchronize(other), "cudaStreamSynchronize");
    CHECK_OK(dt_coll_sync());
    for (int i = 0; i < 4; i++) {
        int done = 0;
        CHECK(dt_work_test(w[i], &done) == DT_OK && done, "async %d on %s not complete after dt_coll_sync", i, t->name);
        dt_work_free(w[i]);
        dev_job_fetch(&d[i], &CUDA);
        CHECK(job_verify(&d[i].j), "async job %d on %s", i, t->name);
        job_free(&d[i].j);
    }
    gpu_check(cudaStreamDestroy(other), "cudaStreamDestroy");
}

/* Two allocations back to back: cudaMalloc hands out small ones from one
 * chunk (the fake does too), and CUDA refuses a copy that spans two of them,
 * so the staged path must copy each buffer apart (it copied "touching"
 * buffers as one range: cudaErrorInvalidValue on an H100). Both orders of
 * sendbuf and recvbuf, blocking and on a stream; says whether they touched. */
static void back_to_back(dt_comm *w, cudaStream_t st) {
    enum { N = 1024 };
    static float h[N];
    float *a = gpu_alloc(N * sizeof(float)), *b = gpu_alloc(N * sizeof(float));
    int touch = (char *)a + sizeof h == (char *)b || (char *)b + sizeof h == (char *)a;
    if (ME == 0) printf("gpu_coll: %d ranks: two %zu-byte allocations %s\n", W, sizeof h, touch ? "touch" : "do not touch");
    dt_coll_opts on_st = {.mem = DT_MEM_DEVICE, .stream = st};
    for (int v = 0; v < 4; v++) {
        float *s = v % 2 ? b : a, *r = v % 2 ? a : b;
        for (int i = 0; i < N; i++) h[i] = (float)((ME + 1) * (i % 5 + 1));
        gpu_h2d(s, h, sizeof h);
        if (v < 2) CHECK_OK(dt_allreduce(s, r, N, DT_F32, DT_SUM, w));
        else CHECK_OK(dt_allreduce_ex(s, r, N, DT_F32, DT_SUM, w, &on_st, NULL));
        gpu_d2h(h, r, sizeof h);
        int wrong = 0;
        for (int i = 0; i < N; i++) wrong += h[i] != (float)(W * (W + 1) / 2 * (i % 5 + 1));
        CHECK(wrong == 0, "allreduce between two allocations back to back (%s, %s): %d of %d wrong",
              v % 2 ? "recvbuf first" : "sendbuf first", v < 2 ? "blocking" : "on a stream", wrong, N);
    }
    gpu_release(a);
    gpu_release(b);
}

static void kinds(dt_comm *w) {
    /* pinned host memory is host memory; managed memory is device memory */
    float *pinned, *managed, *dev, h[8] = {0};
    gpu_check(cudaHostAlloc((void **)&pinned, 64, 0), "cudaHostAlloc");
    gpu_check(cudaMallocManaged((void **)&managed, 64, cudaMemAttachGlobal), "cudaMallocManaged");
    dev = gpu_alloc(64);
    for (int i = 0; i < 8; i++) pinned[i] = managed[i] = 1.0f;
    if (W == 1 || strcmp(dt_comm_backend(w), "void") != 0) {
        CHECK_OK(dt_allreduce(pinned, pinned, 8, DT_F32, DT_SUM, w));
        CHECK(pinned[0] == (float)W, "pinned host buffer: %g, want %d", pinned[0], W);
    } else { /* the tcp bootstrap without MPI: host memory has no transport between processes */
        CHECK_ERR(dt_allreduce(pinned, pinned, 8, DT_F32, DT_SUM, w), DT_ERR_UNSUPPORTED, "moves no data between processes");
    }
    CHECK_OK(dt_allreduce(managed, managed, 8, DT_F32, DT_SUM, w));
    CHECK(managed[3] == (float)W, "managed buffer: %g, want %d", managed[3], W);
    CHECK_ERR(dt_allreduce(dev, h, 8, DT_F32, DT_SUM, w), DT_ERR_INVALID,
              "host and device buffers in one call: sendbuf is device memory (device");
    CHECK_ERR(dt_allreduce(pinned, dev, 8, DT_F32, DT_SUM, w), DT_ERR_INVALID, "sendbuf is host memory, recvbuf is device memory");
    cudaFreeHost(pinned);
    cudaFree(managed);
    gpu_release(dev);
}

int main(void) {
    gpu_require("gpu_coll");
    coll_init();
    tcomm tc[8];
    int nc = setup_comms(tc);
    const char *wp = dt_comm_device_path(dt_comm_world());
    if (W > 1 && strcmp(wp, "staged") == 0 && strcmp(dt_comm_backend(dt_comm_world()), "void") == 0) {
        if (ME == 0) printf("gpu_coll: skipped: %d processes without their own GPUs and without MPI: device memory "
                            "would be staged through the host, which needs the mpi transport\n", W);
        dt_finalize();
        return 77;
    }
    if (ME == 0)
        for (int c = 0; c < nc; c++)
            printf("gpu_coll: %d ranks: %-16s path %s\n", W, tc[c].name, dt_comm_device_path(tc[c].comm));
    coll_tolerant = W > 2 && strcmp(wp, "nccl") == 0;
    static const size_t counts[] = {0, 1, 7, 1000};
    cudaStream_t st;
    gpu_check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
    dt_coll_opts autok = DT_COLL_OPTS_INIT, dev = {.mem = DT_MEM_DEVICE, .stream = st};
    dev_suite(tc, nc, &CUDA, &autok, counts, 4);
    dev_suite(tc, nc, &CUDA, &dev, counts + 2, 2);
    /* large: several MiB, odd counts */
    dev_job d;
    for (int c = 0; c < nc; c++)
        for (int op = 0; op < DT_NUM_OPS; op++) {
            job_init(&d.j, J_AR, &tc[c], DT_F32, (dt_op)op, (1u << 20) + 3, op % 2, -1, -1, 70);
            run_dev_job(&d, &CUDA, &dev);
        }
    job_init(&d.j, J_AR, &tc[0], DT_BF16, DT_SUM, (1u << 21) + 5, 0, -1, -1, 71);
    run_dev_job(&d, &CUDA, &dev);
    job_init(&d.j, J_RS, &tc[0], DT_F16, DT_MAX, (1u << 18) + 1, 1, -1, -1, 72);
    run_dev_job(&d, &CUDA, &dev);
    job_init(&d.j, J_AG, &tc[0], DT_I64, DT_SUM, (1u << 18) + 1, 0, -1, -1, 73);
    run_dev_job(&d, &CUDA, &dev);
    for (int c = 0; c < nc; c++) {
        dev_lists(&tc[c], &CUDA, &dev);
        async_jobs(&tc[c], st);
    }
    back_to_back(dt_comm_world(), st);
    kinds(dt_comm_world());
    gpu_check(cudaStreamDestroy(st), "cudaStreamDestroy");
    CHECK_OK(dt_finalize());
    return dt_test_finish("gpu_coll");
}
