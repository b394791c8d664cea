/* gpu_coll: collectives on CUDA device memory, against the host references
 * of tests/coll (bitwise, except where NCCL reduces floats between several
 * ranks: within a few units in the last place). Every collective x dtype x op
 * x in place x root on the world and every rank_list group of this world
 * size, blocking, with the memory kind found (auto) and said (DT_MEM_DEVICE
 * on a stream of its own); large calls; fused lists and one tensor per rank;
 * asynchronous calls (event completion, dt_work_stream_wait, dt_coll_sync);
 * what counts as device memory (pinned host memory does not: under the tcp
 * bootstrap with several processes it is refused; managed memory does); host
 * and device buffers in one call; compressed wires (bf16, f16: allreduce,
 * reduce_scatter, reduce, a fused list; within the rounding bound, the same
 * bits on every rank, compressed over NCCL). Prints the path of each communicator (nccl,
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

/* ---- compressed wires on device memory (coll.h) ------------------------------------
 * x_k[i], rank k's value: spread over five decades, both signs, so that a
 * 16-bit wire rounds nearly every one (f16 range kept). */
static float wire_x(int k, size_t i) {
    uint32_t h = (uint32_t)(k * 7919 + 1) * 2654435761u ^ (uint32_t)i * 40503u;
    h ^= h >> 13;
    h *= 2246822519u;
    h ^= h >> 16;
    float m = 1.0f + (float)(h & 0xffff) / 65536.0f;
    static const float dec[5] = {0.001f, 0.01f, 0.1f, 1.0f, 10.0f};
    return (h & 0x10000 ? -m : m) * dec[(h >> 17) % 5] * (float)(1 + (h >> 20) % 7);
}

/* One call's check on every element: within the bound of a sum of P values
 * each rounded to the wire, summed over at most P roundings in the wire type
 * (NCCL's ring: one per hop) and rounded back: (1+u)^(P+2) - 1 of the sum of
 * magnitudes (u = 2^-8 bf16, 2^-11 f16), plus f32's own; the result the same
 * bits on every rank; and (over NCCL, where no window reduces in f32) some
 * element not the f32 sum, so the wire did compress. Returns whether any
 * element differs from the f32 sum. */
static int wire_check(const tcomm *t, const char *what, int wire, dt_op op, const float *res, size_t n, size_t first,
                      int root_only) {
    int P = t->n;
    double u = wire == DT_WIRE_BF16 ? 1.0 / 256 : 1.0 / 2048, rel = pow(1 + u, P + 2) - 1 + P * 0x1p-23;
    size_t bad = 0, differ = 0, at = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double exact = 0, mag = 0, f = 0;
        float fs = 0.0f;
        for (int k = 0; k < P; k++) {
            float x = wire_x(t->mem[k], first + i);
            double xv = x;
            if (op == DT_MAX) exact = k == 0 || xv > exact ? xv : exact;
            else exact += xv;
            mag += fabs(xv);
            fs += x;
        }
        f = op == DT_AVG ? (double)(fs / (float)P) : op == DT_MAX ? exact : (double)fs;
        if (op == DT_AVG) { exact /= P; mag /= P; }
        double err = fabs((double)res[i] - exact), lim = op == DT_MAX ? u * fabs(exact) : rel * mag;
        if (err > lim) { if (!bad) at = i; bad++; }
        if (lim > 0 && err / lim > worst) worst = err / lim;
        differ += (double)res[i] != f;
    }
    CHECK(bad == 0, "%s on %s (%s wire): %zu of %zu beyond the bound (first at %zu; worst %.2f of it)", what, t->name,
          wire == DT_WIRE_BF16 ? "bf16" : "f16", bad, n, at, worst);
    /* the same bits on every rank of the group (root_only: only the root has it) */
    if (!root_only && n) {
        uint64_t hsh = 1469598103934665603ull, mx = 0, mn = 0;
        const unsigned char *b = (const unsigned char *)res;
        for (size_t i = 0; i < n * sizeof(float); i++) hsh = (hsh ^ b[i]) * 1099511628211ull;
        /* on device memory: under the tcp bootstrap host memory has no transport */
        uint64_t *dh = gpu_alloc(2 * sizeof(uint64_t)), two[2] = {hsh, hsh};
        gpu_h2d(dh, two, sizeof two);
        CHECK_OK(dt_allreduce(dh, dh, 1, DT_I64, DT_MAX, t->comm));
        CHECK_OK(dt_allreduce(dh + 1, dh + 1, 1, DT_I64, DT_MIN, t->comm));
        gpu_d2h(two, dh, sizeof two);
        gpu_release(dh);
        mx = two[0];
        mn = two[1];
        CHECK(mx == mn, "%s on %s: the ranks' results differ", what, t->name);
    }
    return differ > 0;
}

static void wires(const tcomm *tc, int nc, cudaStream_t st) {
    static const size_t counts[] = {1, 7, 1000, 65537};
    for (int c = 0; c < nc; c++) {
        const tcomm *t = &tc[c];
        if (!t->comm) continue;
        int P = t->n, r = dt_comm_rank(t->comm);
        int nccl = P > 1 && strcmp(dt_comm_device_path(t->comm), "nccl") == 0, compressed = 0;
        size_t most = 65537 * (size_t)P;
        float *h = malloc(most * sizeof(float)), *d = gpu_alloc(most * sizeof(float)), *e = gpu_alloc(most * sizeof(float));
        CHECK(h != NULL, "out of memory");
        for (int wi = 0; wi < 2; wi++) {
            int wire = wi ? DT_WIRE_F16 : DT_WIRE_BF16;
            dt_coll_opts o = {.mem = DT_MEM_DEVICE, .stream = st, .wire = (dt_wire)wire};
            for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
                size_t n = counts[ci];
                static const dt_op ops[] = {DT_SUM, DT_AVG, DT_MAX};
                for (int oi = 0; oi < 3; oi++) {
                    int inplace = (int)((ci + (size_t)oi) % 2);
                    for (size_t i = 0; i < n; i++) h[i] = wire_x(dt_comm_world_rank_of(t->comm, r), i);
                    gpu_h2d(d, h, n * sizeof(float));
                    dt_work *w = NULL;
                    CHECK_OK(dt_allreduce_ex(d, inplace ? d : e, n, DT_F32, ops[oi], t->comm, &o, oi == 1 ? &w : NULL));
                    if (w) { CHECK_OK(dt_work_wait(w)); dt_work_free(w); }
                    gpu_check(cudaStreamSynchronize(st), "cudaStreamSynchronize");
                    gpu_d2h(h, inplace ? d : e, n * sizeof(float));
                    compressed |= wire_check(t, "allreduce", wire, ops[oi], h, n, 0, 0);
                }
                /* reduce_scatter: n per rank; reduce to the last rank, in place */
                for (size_t i = 0; i < n * (size_t)P; i++) h[i] = wire_x(dt_comm_world_rank_of(t->comm, r), i);
                gpu_h2d(d, h, n * (size_t)P * sizeof(float));
                CHECK_OK(dt_reduce_scatter_ex(d, e, n * (size_t)P, DT_F32, DT_SUM, t->comm, &o, NULL)); /* count: the whole */
                gpu_check(cudaStreamSynchronize(st), "cudaStreamSynchronize");
                gpu_d2h(h, e, n * sizeof(float));
                compressed |= wire_check(t, "reduce_scatter", wire, DT_SUM, h, n, n * (size_t)r, 1);
                for (size_t i = 0; i < n; i++) h[i] = wire_x(dt_comm_world_rank_of(t->comm, r), i);
                gpu_h2d(d, h, n * sizeof(float));
                int root = dt_comm_world_rank_of(t->comm, P - 1);
                CHECK_OK(dt_reduce_ex(d, d, n, DT_F32, DT_AVG, root, t->comm, &o, NULL));
                gpu_check(cudaStreamSynchronize(st), "cudaStreamSynchronize");
                if (r == P - 1) {
                    gpu_d2h(h, d, n * sizeof(float));
                    compressed |= wire_check(t, "reduce", wire, DT_AVG, h, n, 0, 1);
                }
            }
            /* a list of three tensors, the first two back to back (one fused call) */
            size_t n0 = 300, n1 = 5000, n2 = 77;
            dt_tensor in[3] = {{d, n0, DT_F32}, {d + n0, n1, DT_F32}, {e, n2, DT_F32}};
            for (size_t i = 0; i < n0 + n1; i++) h[i] = wire_x(dt_comm_world_rank_of(t->comm, r), i);
            gpu_h2d(d, h, (n0 + n1) * sizeof(float));
            for (size_t i = 0; i < n2; i++) h[i] = wire_x(dt_comm_world_rank_of(t->comm, r), n0 + n1 + i);
            gpu_h2d(e, h, n2 * sizeof(float));
            CHECK_OK(dt_allreduce_list_ex(in, in, 3, DT_SUM, t->comm, &o, NULL));
            gpu_check(cudaStreamSynchronize(st), "cudaStreamSynchronize");
            gpu_d2h(h, d, (n0 + n1) * sizeof(float));
            gpu_d2h(h + n0 + n1, e, n2 * sizeof(float));
            compressed |= wire_check(t, "allreduce_list", wire, DT_SUM, h, n0 + n1 + n2, 0, 0);
            /* broadcast: the root keeps its f32, the others receive it rounded to
             * the wire (over a device transport only: staged, refused) */
            {
                size_t n = 4099;
                int root = dt_comm_world_rank_of(t->comm, P - 1), me_root = r == P - 1;
                for (size_t i = 0; i < n; i++) h[i] = wire_x(7, i);
                gpu_h2d(d, h, n * sizeof(float));
                int rc = dt_broadcast_ex(d, d, n, DT_F32, root, t->comm, &o, NULL);
                if (P > 1 && !nccl) {
                    CHECK(rc == DT_ERR_UNSUPPORTED && strstr(dt_last_error(), "device transport only"),
                          "staged broadcast with a wire on %s: %s, want DT_ERR_UNSUPPORTED", t->name, dt_last_error());
                } else {
                    CHECK(rc == DT_OK, "broadcast with a wire on %s: %s", t->name, dt_last_error());
                    gpu_check(cudaStreamSynchronize(st), "cudaStreamSynchronize");
                    gpu_d2h(h, d, n * sizeof(float));
                    size_t bad = 0;
                    for (size_t i = 0; i < n; i++) {
                        float x = wire_x(7, i);
                        float want = me_root ? x : wire == DT_WIRE_BF16 ? dt_bf16_to_f32(dt_f32_to_bf16(x))
                                                                        : dt_f16_to_f32(dt_f32_to_f16(x));
                        bad += memcmp(&h[i], &want, sizeof want) != 0;
                    }
                    CHECK(bad == 0, "broadcast with a wire on %s (%s): %zu of %zu not the root's value%s", t->name,
                          me_root ? "root" : "receiver", bad, n, me_root ? "" : " rounded to the wire");
                    compressed |= !me_root && P > 1;
                }
            }
            /* integers take no wire */
            CHECK_ERR(dt_allreduce_ex(d, d, 4, DT_I32, DT_SUM, t->comm, &o, NULL), DT_ERR_INVALID, "wire");
        }
        if (ME == 0 || r == 0)
            printf("gpu_coll: %d ranks: %-16s compressed wires: %s\n", W, t->name,
                   compressed ? "rounded (16 bits between processes)" : "exact (no value was rounded)");
        CHECK(!nccl || compressed, "%s over nccl: every result is the f32 sum: the wire did not compress", t->name);
        CHECK(P > 1 || !compressed, "%s: one rank, and a result differs from its input", t->name);
        free(h);
        gpu_release(d);
        gpu_release(e);
    }
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
    wires(tc, nc, st);
    kinds(dt_comm_world());
    gpu_check(cudaStreamDestroy(st), "cudaStreamDestroy");
    CHECK_OK(dt_finalize());
    return dt_test_finish("gpu_coll");
}
