/* fakegpu_smallcall: what a repeated small call on device memory over NCCL
 * asks of CUDA, counted by the fake (fakegpu.h, "Calls"), and the known
 * device buffers behind it (core/device.h, coll.h "Device memory"):
 *  - a DT_MEM_DEVICE call on buffers seen before makes no
 *    cudaPointerGetAttributes, no allocation and no event creation: the
 *    asynchronous form one cudaEventRecord beside ncclAllReduce, the blocking
 *    form that and the wait's queries; single buffers, in place, lists;
 *  - DT_MEM_AUTO still classifies every buffer (it decides the path), a host
 *    buffer is never remembered, a new buffer is classified once;
 *  - what is forgotten: everything when dtrain frees device memory (an
 *    address freed by dtrain and handed out again on another device is
 *    refused), at dt_finalize (a new world on another device refuses the old
 *    device's buffers); DTRAIN_DEVICE_BUFFER_CACHE=0 classifies every call
 *    (an address the caller freed and got back on another device is refused
 *    there; with the cache on it goes to NCCL as it is, which the fake
 *    refuses); a malformed DTRAIN_DEVICE_BUFFER_CACHE fails dt_init;
 *  - managed memory is remembered as such; every single-buffer kind repeated
 *    is answered from the call memo with the same results, and a call that
 *    differs in one argument is checked again (refused where wrong);
 *  - handles kept for the next call: 40 outstanding (more than are kept),
 *    then 40 again without creating an event; one freed after dt_finalize;
 *  - threads calling at once on their own buffers, while another frees
 *    memory through dtrain (forgetting everything), all get right results.
 * One process, two fake devices (DTRAIN_FAKEGPU_DEVICES=2), the world on
 * device 0: the nccl path. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "core/device.h"
#include "fakegpu.h"
#include "testutil.h"

enum { N = 1024 }; /* 4 KB of f32 */

static void cu(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "fakegpu_smallcall: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

static float *dev_buf(void) {
    float *p = NULL;
    cu(cudaMalloc((void **)&p, N * sizeof(float)), "cudaMalloc");
    return p;
}

static void fill(float *d, float base) {
    float h[N];
    for (int i = 0; i < N; i++) h[i] = base + (float)(i % 7);
    cu(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}

/* d holds base + i % 7 (one rank: the allreduce is a copy) */
static int holds(const float *d, float base) {
    float h[N];
    cu(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    for (int i = 0; i < N; i++)
        if (h[i] != base + (float)(i % 7)) return 0;
    return 1;
}

/* ---- the calls made between mark() and since() ---- */
static fk_call g_before[FK_MAX_COUNTED];
static int g_nbefore;
typedef struct calls {
    fk_call f[FK_MAX_COUNTED];
    int n;
    long cuda, nccl;
} calls;

static void mark(void) {
    g_nbefore = fk_calls_snapshot(g_before, FK_MAX_COUNTED);
    if (g_nbefore > FK_MAX_COUNTED) g_nbefore = FK_MAX_COUNTED;
}

static void since(calls *c) {
    long t[FK_LIB_N];
    c->n = (int)fk_calls_since(g_before, g_nbefore, c->f, FK_MAX_COUNTED, t);
    c->cuda = t[FK_LIB_CUDA];
    c->nccl = t[FK_LIB_NCCL];
}

static long of(const calls *c, const char *name) {
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->f[i].name, name) == 0) return c->f[i].n;
    return 0;
}

static void print(const char *what, const calls *c) {
    printf("fakegpu_smallcall: %s: cuda %ld, nccl %ld:", what, c->cuda, c->nccl);
    for (int i = 0; i < c->n; i++) printf(" %s %ld", c->f[i].name, c->f[i].n);
    printf("\n");
}

enum { REPS = 50 };

/* repeated calls on buffers seen before */
static void repeated(dt_comm *w, cudaStream_t st) {
    float *s = dev_buf(), *r = dev_buf(), *t = dev_buf();
    fill(s, 1.0f);
    dt_coll_opts o = {.mem = DT_MEM_DEVICE, .stream = st};
    calls c;
    mark();
    CHECK_OK(dt_allreduce_ex(s, r, N, DT_F32, DT_SUM, w, &o, NULL));
    since(&c);
    CHECK(of(&c, "cudaPointerGetAttributes") == 2, "first call: %ld classifications, want 2",
          of(&c, "cudaPointerGetAttributes"));
    CHECK(holds(r, 1.0f), "first call's result");
    dt_work *first = NULL; /* the first handle's event is created */
    CHECK_OK(dt_allreduce_ex(s, r, N, DT_F32, DT_SUM, w, &o, &first));
    dt_work_free(first);

    mark();
    for (int i = 0; i < REPS; i++) {
        dt_work *wk = NULL;
        CHECK_OK(dt_allreduce_ex(s, r, N, DT_F32, DT_SUM, w, &o, &wk));
        dt_work_free(wk);
    }
    since(&c);
    print("asynchronous, repeated", &c);
    CHECK(c.cuda == REPS && of(&c, "cudaEventRecord") == REPS,
          "asynchronous: %ld CUDA calls (%ld cudaEventRecord, %ld cudaPointerGetAttributes, %ld cudaEventCreateWithFlags, "
          "%ld cudaMalloc), want only one cudaEventRecord per call", c.cuda, of(&c, "cudaEventRecord"),
          of(&c, "cudaPointerGetAttributes"), of(&c, "cudaEventCreateWithFlags"), of(&c, "cudaMalloc"));
    CHECK(c.nccl == REPS && of(&c, "ncclAllReduce") == REPS, "asynchronous: %ld NCCL calls, want one ncclAllReduce each",
          c.nccl);
    cu(cudaStreamSynchronize(st), "cudaStreamSynchronize");
    CHECK(holds(r, 1.0f), "asynchronous result");

    mark();
    for (int i = 0; i < REPS; i++) CHECK_OK(dt_allreduce_ex(s, r, N, DT_F32, DT_SUM, w, &o, NULL));
    since(&c);
    print("blocking, repeated", &c);
    long waits = of(&c, "cudaEventQuery") + of(&c, "cudaGetLastError");
    CHECK(of(&c, "cudaEventRecord") == REPS && c.cuda - waits == REPS,
          "blocking: %ld CUDA calls besides the wait's queries, want one cudaEventRecord per call", c.cuda - waits);
    CHECK(of(&c, "ncclAllReduce") == REPS && c.nccl - of(&c, "ncclCommGetAsyncError") == REPS,
          "blocking: %ld NCCL calls besides the wait's polls, want one ncclAllReduce each",
          c.nccl - of(&c, "ncclCommGetAsyncError"));

    /* in place, and a list of three views: nothing classified again */
    mark();
    CHECK_OK(dt_allreduce_ex(r, r, N, DT_F32, DT_SUM, w, &o, NULL));
    dt_tensor in[3] = {{s, 100, DT_F32}, {s + 100, 24, DT_F32}, {t, N, DT_F32}};
    CHECK_OK(dt_allreduce_list_ex(in, in, 3, DT_SUM, w, &o, NULL)); /* t: new */
    since(&c);
    CHECK(of(&c, "cudaPointerGetAttributes") == 2, "in place and a list with two new views: %ld classifications, "
          "want 2", of(&c, "cudaPointerGetAttributes"));
    mark();
    for (int i = 0; i < REPS; i++) CHECK_OK(dt_allreduce_list_ex(in, in, 3, DT_SUM, w, &o, NULL));
    since(&c);
    CHECK(of(&c, "cudaPointerGetAttributes") == 0 && of(&c, "cudaMalloc") == 0,
          "repeated list: %ld classifications, %ld cudaMalloc", of(&c, "cudaPointerGetAttributes"), of(&c, "cudaMalloc"));
    CHECK(holds(r, 1.0f), "in place result");

    /* DT_MEM_AUTO decides the path: every buffer, every call */
    mark();
    for (int i = 0; i < REPS; i++) CHECK_OK(dt_allreduce(s, r, N, DT_F32, DT_SUM, w));
    since(&c);
    CHECK(of(&c, "cudaPointerGetAttributes") == 2 * REPS, "auto: %ld classifications, want %d",
          of(&c, "cudaPointerGetAttributes"), 2 * REPS);

    /* a host buffer is never remembered: refused every time, asking each time */
    float h[N];
    for (int k = 0; k < 2; k++) {
        mark();
        CHECK_ERR(dt_allreduce_ex(h, h, N, DT_F32, DT_SUM, w, &o, NULL), DT_ERR_INVALID,
                  "opts->mem is DT_MEM_DEVICE but sendbuf is host memory");
        since(&c);
        CHECK(of(&c, "cudaPointerGetAttributes") == 2, "host buffers, try %d: %ld classifications", k,
              of(&c, "cudaPointerGetAttributes"));
    }
    /* managed memory: remembered as such */
    float *m = NULL;
    cu(cudaMallocManaged((void **)&m, N * sizeof(float), cudaMemAttachGlobal), "cudaMallocManaged");
    CHECK_OK(dt_allreduce_ex(s, m, N, DT_F32, DT_SUM, w, &o, NULL));
    mark();
    CHECK_OK(dt_allreduce_ex(s, m, N, DT_F32, DT_SUM, w, &o, NULL));
    since(&c);
    CHECK(of(&c, "cudaPointerGetAttributes") == 0, "managed, again: %ld classifications",
          of(&c, "cudaPointerGetAttributes"));
    CHECK(holds(m, 1.0f), "into managed memory");
    cu(cudaFree(m), "cudaFree");
    cu(cudaFree(s), "cudaFree");
    cu(cudaFree(r), "cudaFree");
    cu(cudaFree(t), "cudaFree");
}

/* every single-buffer kind, three times with the same arguments: the second
 * and third are answered from the known buffers and the call memo, with the
 * first one's results; a call differing in one argument is checked again */
static void kinds(dt_comm *w, cudaStream_t st) {
    dt_coll_opts o = {.mem = DT_MEM_DEVICE, .stream = st};
    float *s = dev_buf(), *r = dev_buf();
    fill(s, 5.0f);
    for (int k = 0; k < 7; k++) {
        calls c;
        for (int rep = 0; rep < 3; rep++) {
            if (rep == 1) mark();
            cu(cudaMemset(r, 0, N * sizeof(float)), "cudaMemset");
            int rc;
            switch (k) {
            case 0: rc = dt_reduce_scatter_ex(s, r, N, DT_F32, DT_SUM, w, &o, NULL); break;
            case 1: rc = dt_allgather_ex(s, r, N, DT_F32, w, &o, NULL); break;
            case 2: rc = dt_broadcast_ex(s, r, N, DT_F32, 0, w, &o, NULL); break;
            case 3: rc = dt_reduce_ex(s, r, N, DT_F32, DT_MAX, 0, w, &o, NULL); break;
            case 4: rc = dt_gather_ex(s, r, N, DT_F32, 0, w, &o, NULL); break;
            case 5: rc = dt_scatter_ex(s, r, N, DT_F32, 0, w, &o, NULL); break;
            default: rc = dt_all_to_all_ex(s, r, N, DT_F32, w, &o, NULL); break;
            }
            CHECK(rc == DT_OK, "kind %d, call %d: %s", k, rep, dt_last_error());
            CHECK(holds(r, 5.0f), "kind %d, call %d: result", k, rep);
        }
        since(&c);
        CHECK(of(&c, "cudaPointerGetAttributes") == 0, "kind %d repeated: %ld classifications", k,
              of(&c, "cudaPointerGetAttributes"));
    }
    /* the same buffers, one argument changed: checked again, as ever */
    CHECK_OK(dt_allreduce_ex(s, r, N, DT_F32, DT_SUM, w, &o, NULL));
    CHECK_ERR(dt_allreduce_ex(s, r, N, DT_F32, (dt_op)99, w, &o, NULL), DT_ERR_INVALID, "unknown reduction op 99");
    CHECK_ERR(dt_allreduce_ex(s, r, N, (dt_dtype)42, DT_SUM, w, &o, NULL), DT_ERR_INVALID, "unknown dtype 42");
    CHECK_ERR(dt_allreduce_ex(s, r, (size_t)-1 / 2, DT_F32, DT_SUM, w, &o, NULL), DT_ERR_INVALID,
              "overflows the address space");
    CHECK_ERR(dt_allreduce_ex(s, s + 1, N, DT_F32, DT_SUM, w, &o, NULL), DT_ERR_INVALID, "overlap");
    CHECK_ERR(dt_broadcast_ex(s, r, N, DT_F32, 3, w, &o, NULL), DT_ERR_INVALID, "root 3 is out of range");
    dt_coll_opts wire = o;
    wire.wire = DT_WIRE_BF16;
    for (int i = 0; i < 2; i++)
        CHECK_ERR(dt_allreduce_ex(s, r, N, DT_I32, DT_SUM, w, &wire, NULL), DT_ERR_INVALID,
                  "a bf16 wire carries f32, f16 or bf16 data, not i32");
    CHECK_OK(dt_allreduce_ex(s, r, N / 2, DT_F32, DT_SUM, w, &o, NULL));
    CHECK_OK(dt_allreduce_ex(s, r, N, DT_F32, DT_SUM, w, &o, NULL));
    CHECK(holds(r, 5.0f), "after the refused calls");
    cu(cudaFree(s), "cudaFree");
    cu(cudaFree(r), "cudaFree");
}

/* handles kept for the next call: more outstanding than the pool keeps, and
 * one freed after dt_finalize */
static void handles(cudaStream_t st) {
    enum { H = 40 };
    dt_comm *w = dt_comm_world();
    dt_coll_opts o = {.mem = DT_MEM_DEVICE, .stream = st};
    float *s = dev_buf(), *r = dev_buf();
    fill(s, 6.0f);
    dt_work *wk[H];
    calls c;
    for (int round = 0; round < 2; round++) {
        mark();
        for (int i = 0; i < H; i++) CHECK_OK(dt_allreduce_ex(s, r, N, DT_F32, DT_SUM, w, &o, &wk[i]));
        since(&c);
        if (round == 1)
            CHECK(of(&c, "cudaEventCreateWithFlags") == 0, "%d handles again: %ld events created", H,
                  of(&c, "cudaEventCreateWithFlags"));
        CHECK_OK(dt_work_wait(wk[H - 1]));
        for (int i = 0; i < H; i++) dt_work_free(wk[i]);
    }
    CHECK_OK(dt_coll_sync());
    CHECK(holds(r, 6.0f), "after %d handles", H);
    /* a handle that outlives dt_finalize is released, not kept */
    dt_work *late = NULL;
    CHECK_OK(dt_allreduce_ex(s, r, N, DT_F32, DT_SUM, w, &o, &late));
    CHECK_OK(dt_finalize());
    dt_work_free(late);
    /* the memo of the last session does not answer (nor touch the old world) */
    CHECK_ERR(dt_allreduce_ex(s, r, N, DT_F32, DT_SUM, w, &o, NULL), DT_ERR_STATE, "dtrain is not initialised");
    CHECK_OK(dt_init());
    w = dt_comm_world();
    dt_work *again = NULL;
    CHECK_OK(dt_allreduce_ex(s, r, N, DT_F32, DT_SUM, w, &o, &again));
    CHECK_OK(dt_work_wait(again));
    dt_work_free(again);
    CHECK(holds(r, 6.0f), "in the next session");
    cu(cudaFree(s), "cudaFree");
    cu(cudaFree(r), "cudaFree");
}

/* what is forgotten: dtrain's frees, and an address handed out again */
static void forgotten(dt_comm *w, cudaStream_t st) {
    dt_coll_opts o = {.mem = DT_MEM_DEVICE, .stream = st};
    float *s = dev_buf(), *r = dev_buf(), *p = NULL;
    fill(s, 2.0f);
    CHECK_OK(dt_allreduce_ex(s, r, N, DT_F32, DT_SUM, w, &o, NULL));
    /* dtrain frees device memory: every buffer is asked about again */
    CHECK_OK(dt_dev()->dev_alloc(N * sizeof(float), (void **)&p));
    CHECK_OK(dt_allreduce_ex(s, p, N, DT_F32, DT_SUM, w, &o, NULL));
    fk_malloc_reuse();
    dt_dev()->dev_free(p);
    calls c;
    mark();
    CHECK_OK(dt_allreduce_ex(s, r, N, DT_F32, DT_SUM, w, &o, NULL));
    since(&c);
    CHECK(of(&c, "cudaPointerGetAttributes") == 2, "after dtrain freed memory: %ld classifications, want 2",
          of(&c, "cudaPointerGetAttributes"));
    /* ... and the freed address, back as device 1's memory, is refused */
    float *q = NULL;
    cu(cudaSetDevice(1), "cudaSetDevice 1");
    cu(cudaMalloc((void **)&q, N * sizeof(float)), "cudaMalloc on device 1");
    cu(cudaSetDevice(0), "cudaSetDevice 0");
    CHECK(q == p, "the fake handed the freed address out again (%p, %p)", (void *)q, (void *)p);
    CHECK_ERR(dt_allreduce_ex(s, q, N, DT_F32, DT_SUM, w, &o, NULL), DT_ERR_INVALID,
              "recvbuf is on device 1, but the communicator's nccl communicator is on device 0");

    /* the caller frees r and gets its address back on device 1: dtrain cannot
     * see that free; the known r goes to NCCL as it is (the fake's NCCL
     * refuses memory of another device; a GPU's may not) */
    CHECK_OK(dt_allreduce_ex(s, r, N, DT_F32, DT_SUM, w, &o, NULL));
    fk_malloc_reuse();
    cu(cudaFree(r), "cudaFree");
    float *r1 = NULL;
    cu(cudaSetDevice(1), "cudaSetDevice 1");
    cu(cudaMalloc((void **)&r1, N * sizeof(float)), "cudaMalloc on device 1");
    cu(cudaSetDevice(0), "cudaSetDevice 0");
    CHECK(r1 == r, "the fake handed the caller's freed address out again");
    mark();
    CHECK_ERR(dt_allreduce_ex(s, r1, N, DT_F32, DT_SUM, w, &o, NULL), DT_ERR_BACKEND,
              "is memory of device 1, the communicator's is 0");
    since(&c);
    CHECK(of(&c, "cudaPointerGetAttributes") == 0, "a known address: %ld classifications", of(&c, "cudaPointerGetAttributes"));
    cu(cudaFree(q), "cudaFree");
    cu(cudaFree(r1), "cudaFree");
    cu(cudaFree(s), "cudaFree");
}

/* DTRAIN_DEVICE_BUFFER_CACHE=0: the same reuse is refused by dtrain's check */
static void cache_off(void) {
    setenv("DTRAIN_DEVICE_BUFFER_CACHE", "maybe", 1);
    CHECK_ERR(dt_init(), DT_ERR_INVALID, "dt_init: DTRAIN_DEVICE_BUFFER_CACHE='maybe' is not a boolean");
    setenv("DTRAIN_DEVICE_BUFFER_CACHE", "0", 1);
    CHECK_OK(dt_init());
    dt_comm *w = dt_comm_world();
    cudaStream_t st;
    cu(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
    dt_coll_opts o = {.mem = DT_MEM_DEVICE, .stream = st};
    float *s = dev_buf(), *r = dev_buf();
    fill(s, 3.0f);
    calls c;
    mark();
    for (int i = 0; i < REPS; i++) CHECK_OK(dt_allreduce_ex(s, r, N, DT_F32, DT_SUM, w, &o, NULL));
    since(&c);
    CHECK(of(&c, "cudaPointerGetAttributes") == 2 * REPS, "cache off: %ld classifications, want %d",
          of(&c, "cudaPointerGetAttributes"), 2 * REPS);
    fk_malloc_reuse();
    cu(cudaFree(r), "cudaFree");
    float *r1 = NULL;
    cu(cudaSetDevice(1), "cudaSetDevice 1");
    cu(cudaMalloc((void **)&r1, N * sizeof(float)), "cudaMalloc on device 1");
    cu(cudaSetDevice(0), "cudaSetDevice 0");
    CHECK(r1 == r, "the fake handed the freed address out again");
    CHECK_ERR(dt_allreduce_ex(s, r1, N, DT_F32, DT_SUM, w, &o, NULL), DT_ERR_INVALID,
              "recvbuf is on device 1, but the communicator's nccl communicator is on device 0");
    cu(cudaFree(r1), "cudaFree");
    cu(cudaFree(s), "cudaFree");
    cu(cudaStreamDestroy(st), "cudaStreamDestroy");
    CHECK_OK(dt_finalize());
    unsetenv("DTRAIN_DEVICE_BUFFER_CACHE");
}

/* a new world on device 1 refuses a buffer of device 0 known before */
static void new_session(void) {
    CHECK_OK(dt_init());
    float *s = dev_buf();
    fill(s, 4.0f);
    dt_coll_opts o = {.mem = DT_MEM_DEVICE};
    CHECK_OK(dt_allreduce_ex(s, s, N, DT_F32, DT_SUM, dt_comm_world(), &o, NULL));
    CHECK_OK(dt_finalize());
    cu(cudaSetDevice(1), "cudaSetDevice 1");
    CHECK_OK(dt_init());
    CHECK_ERR(dt_allreduce_ex(s, s, N, DT_F32, DT_SUM, dt_comm_world(), &o, NULL), DT_ERR_INVALID,
              "sendbuf is on device 0, but the communicator's nccl communicator is on device 1");
    CHECK_OK(dt_finalize());
    cu(cudaSetDevice(0), "cudaSetDevice 0");
    cu(cudaFree(s), "cudaFree");
}

/* ---- threads ---- */
typedef struct job {
    dt_comm *w;
    float base;
    int bad;
} job;

static void *caller(void *arg) {
    job *j = arg;
    cudaStream_t st;
    cu(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
    dt_coll_opts o = {.mem = DT_MEM_DEVICE, .stream = st};
    float *s = dev_buf(), *r = dev_buf();
    fill(s, j->base);
    for (int i = 0; i < 200 && !j->bad; i++) {
        dt_work *wk = NULL;
        if (dt_allreduce_ex(s, r, N, DT_F32, DT_SUM, j->w, &o, i % 3 ? &wk : NULL) != DT_OK) j->bad = 1;
        if (wk && (i % 2 ? dt_work_wait(wk) : DT_OK) != DT_OK) j->bad = 1;
        dt_work_free(wk);
    }
    cu(cudaStreamSynchronize(st), "cudaStreamSynchronize");
    if (!holds(r, j->base)) j->bad = 1;
    cu(cudaFree(s), "cudaFree");
    cu(cudaFree(r), "cudaFree");
    cu(cudaStreamDestroy(st), "cudaStreamDestroy");
    return NULL;
}

static volatile int g_stop;
static void *freer(void *arg) {
    int *bad = arg;
    while (!g_stop) {
        void *p = NULL;
        if (dt_dev()->dev_alloc(256, &p) != DT_OK) { *bad = 1; break; }
        dt_dev()->dev_free(p);
    }
    return NULL;
}

static void threads(dt_comm *w) {
    enum { T = 4 };
    pthread_t th[T], f;
    job j[T];
    int fbad = 0;
    g_stop = 0;
    pthread_create(&f, NULL, freer, &fbad);
    for (int i = 0; i < T; i++) {
        j[i] = (job){w, 10.0f * (float)(i + 1), 0};
        pthread_create(&th[i], NULL, caller, &j[i]);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        CHECK(!j[i].bad, "thread %d: a call failed or its result is wrong (%s)", i, dt_last_error());
    }
    g_stop = 1;
    pthread_join(f, NULL);
    CHECK(!fbad, "the freeing thread's dev_alloc failed");
}

int main(void) {
    setenv("DTRAIN_FAKEGPU_DEVICES", "2", 0);
    CHECK_OK(dt_init());
    dt_comm *w = dt_comm_world();
    CHECK(strcmp(dt_comm_device_path(w), "nccl") == 0, "path '%s', want nccl", dt_comm_device_path(w));
    cudaStream_t st;
    cu(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
    repeated(w, st);
    kinds(w, st);
    forgotten(w, st);
    threads(w);
    handles(st);
    cu(cudaStreamDestroy(st), "cudaStreamDestroy");
    CHECK_OK(dt_finalize());
    cache_off();
    new_session();
    return dt_test_finish("fakegpu_smallcall");
}
