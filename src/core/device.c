/* src/core/device.c - the device runtime in use (see device.h): this build's
 * (cuda in CUDA builds, else "none"), or a test's; the cached probe, event
 * waits, the blocking events, the pool of work events and the pinned staging
 * buffer. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "core/device.h"
#include "core/error.h"

/* ---- none: a build without CUDA ------------------------------------------ */
#ifndef DTRAIN_HAVE_CUDA

static const char *const NO_CUDA = "this build of dtrain has no CUDA (configured with DTRAIN_WITH_CUDA=OFF, or "
                                   "without the CUDA toolkit and NCCL found)";

static int none_count(int *n, char *why, size_t cap) {
    *n = 0;
    snprintf(why, cap, "%s", NO_CUDA);
    return DT_OK;
}
static int none_classify(const void *p, int *is_dev, int *dev) {
    *is_dev = 0;
    *dev = -1;
    return DT_OK;
}
static int none_unsupported(const char *call) { return dt_error(DT_ERR_UNSUPPORTED, call, "%s", NO_CUDA); }
static int none_get_device(int *dev) { *dev = -1; return none_unsupported("dt_dev get_device"); }
static int none_set_device(int dev) { return none_unsupported("dt_dev set_device"); }
static int none_identity(int dev, unsigned char id[16]) { return none_unsupported("dt_dev identity"); }
static int none_memcpy(void *d, const void *s, size_t n, void *st) { return none_unsupported("dt_dev memcpy"); }
static int none_stream_sync(void *st) { return none_unsupported("cudaStreamSynchronize"); }
static int none_stream_create(void **st) { return none_unsupported("cudaStreamCreate"); }
static void none_stream_destroy(void *st) {}
static int none_dev_alloc(size_t n, void **p) { *p = NULL; return none_unsupported("cudaMalloc"); }
static void none_dev_free(void *p) {}
static int none_memset(void *p, int v, size_t n, void *st) { return none_unsupported("cudaMemsetAsync"); }
static int none_host_alloc(size_t n, void **p) { return none_unsupported("cudaHostAlloc"); }
static void none_host_free(void *p) {}
static int none_event_create(void **ev) { return none_unsupported("cudaEventCreate"); }
static void none_event_destroy(void *ev) {}
static int none_event_record(void *ev, void *st) { return none_unsupported("cudaEventRecord"); }
static int none_event_query(void *ev) { return none_unsupported("cudaEventQuery"); }
static int none_stream_wait(void *st, void *ev) { return none_unsupported("cudaStreamWaitEvent"); }

static const dt_dev_ops dev_none = {
    .name = "none",
    .is_cuda = 0,
    .count = none_count,
    .classify = none_classify,
    .get_device = none_get_device,
    .set_device = none_set_device,
    .identity = none_identity,
    .memcpy_async = none_memcpy,
    .stream_sync = none_stream_sync,
    .stream_create = none_stream_create,
    .stream_destroy = none_stream_destroy,
    .dev_alloc = none_dev_alloc,
    .dev_free = none_dev_free,
    .memset_async = none_memset,
    .host_alloc = none_host_alloc,
    .host_free = none_host_free,
    .event_create = none_event_create,
    .event_destroy = none_event_destroy,
    .event_record = none_event_record,
    .event_query = none_event_query,
    .stream_wait_event = none_stream_wait,
};

#define BUILD_OPS (&dev_none)
#else
extern const dt_dev_ops dt_dev_cuda;
#define BUILD_OPS (&dt_dev_cuda)
#endif

/* ---- the runtime in use and the probe --------------------------------------- */

static const dt_dev_ops *g_test_ops;
static const dt_dev_ops *g_ops = BUILD_OPS;
/* what dt_dev() hands out after a probe: g_ops, whose dev_free also forgets
 * the known device buffers (an address freed may come back as another
 * device's memory, or as host memory) */
static dt_dev_ops g_view;
static int g_count;
static int g_pool_closed; /* the event pool (below): dt_dev_release ran, dt_dev_probe not since */
static char g_why[512] = "dt_init has not run";

const dt_dev_ops *dt_dev(void) { return g_view.name ? &g_view : g_ops; }

static void free_and_forget(void *p) {
    dt_dev_known_forget_all();
    g_ops->dev_free(p);
}

void dt_dev_use_for_testing(const dt_dev_ops *ops) { g_test_ops = ops; }

void dt_dev_probe(void) {
    g_ops = g_test_ops ? g_test_ops : BUILD_OPS;
    g_view = *g_ops;
    g_view.dev_free = free_and_forget;
    dt_dev_known_forget_all();
    int n = 0;
    g_why[0] = '\0';
    if (g_ops->count(&n, g_why, sizeof g_why) != DT_OK || n < 0) n = 0;
    if (n == 0 && !g_why[0]) snprintf(g_why, sizeof g_why, "the %s runtime reports no device", g_ops->name);
    if (n > 0) g_why[0] = '\0';
    g_count = n;
    g_pool_closed = 0;
}

int dt_dev_count(void) { return g_count; }

const char *dt_dev_absent_reason(void) { return g_why; }

int dt_dev_is_device(const void *p, int *dev) {
    *dev = -1;
    if (g_count == 0 || !p) return 0;
    int is = 0, rc = g_ops->classify(p, &is, dev);
    if (rc) return rc;
    return is != 0;
}

int dt_dev_fail(const char *call, const char *what) { return dt_error(DT_ERR_BACKEND, call, "%s", what); }

/* ---- waiting ------------------------------------------------------------------ */

int dt_dev_event_wait(void *ev, int (*poll)(void *arg), void *arg) {
    long sleep_ns = 1000;
    for (int spins = 0;; spins++) {
        int rc = g_ops->event_query(ev);
        if (rc != DT_DEV_PENDING) return rc;
        if (poll && (rc = poll(arg)) != DT_OK) return rc;
        if (spins < 200) { sched_yield(); continue; }
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 50000) sleep_ns *= 2;
    }
}

/* ---- cached resources ---------------------------------------------------------- */

#define MAX_DEVICES 64
static void *g_blocking_ev[MAX_DEVICES];
static const dt_dev_ops *g_blocking_ops; /* the runtime that created them */
static void *g_stage;
static size_t g_stage_cap;

/* Events of finished work handles, per device, for the next asynchronous
 * call (creating and destroying a CUDA event per call cost about as much as
 * enqueueing a small NCCL allreduce). Any thread frees work: a mutex. */
#define POOL_CAP 32
static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static void *g_pool[MAX_DEVICES][POOL_CAP];
static int g_pool_n[MAX_DEVICES];
static const dt_dev_ops *g_pool_ops; /* the runtime of the pooled events */

static void *pool_take(int dev) {
    void *ev = NULL;
    if (dev < 0 || dev >= MAX_DEVICES) return NULL;
    pthread_mutex_lock(&g_pool_mu);
    if (g_pool_ops == g_ops && g_pool_n[dev] > 0) ev = g_pool[dev][--g_pool_n[dev]];
    pthread_mutex_unlock(&g_pool_mu);
    return ev;
}

void dt_dev_event_put(int dev, void *ev) {
    if (!ev) return;
    pthread_mutex_lock(&g_pool_mu);
    int kept = 0;
    if (dev >= 0 && dev < MAX_DEVICES && g_count > 0 && !g_pool_closed && (!g_pool_ops || g_pool_ops == g_ops) &&
        g_pool_n[dev] < POOL_CAP) {
        g_pool_ops = g_ops;
        g_pool[dev][g_pool_n[dev]++] = ev;
        kept = 1;
    }
    pthread_mutex_unlock(&g_pool_mu);
    if (!kept) g_ops->event_destroy(ev);
}

int dt_dev_event_on(int dev, void **ev) {
    if ((*ev = pool_take(dev)) != NULL) return DT_OK;
    int cur = -1, rc = g_ops->get_device(&cur);
    if (rc) return rc;
    if (cur != dev && (rc = g_ops->set_device(dev))) return rc;
    rc = g_ops->event_create(ev);
    if (cur != dev) g_ops->set_device(cur);
    return rc;
}

int dt_dev_blocking_event(int dev, void **ev) {
    if (dev < 0 || dev >= MAX_DEVICES)
        return dt_error(DT_ERR_UNSUPPORTED, "dt_dev_blocking_event", "device %d is beyond the %d devices dtrain handles",
                        dev, MAX_DEVICES);
    if (!g_blocking_ev[dev]) {
        int rc = dt_dev_event_on(dev, &g_blocking_ev[dev]);
        if (rc) return rc;
        g_blocking_ops = g_ops;
    }
    *ev = g_blocking_ev[dev];
    return DT_OK;
}

void *dt_dev_staging(size_t bytes) {
    if (bytes <= g_stage_cap && g_stage) return g_stage;
    size_t cap = g_stage_cap ? g_stage_cap : 1 << 20;
    while (cap < bytes) cap = cap > ((size_t)-1) / 2 ? bytes : cap * 2;
    void *p = NULL;
    if (g_ops->host_alloc(cap, &p) != DT_OK) return NULL;
    if (g_stage) g_ops->host_free(g_stage);
    g_stage = p;
    g_stage_cap = cap;
    return g_stage;
}

void dt_dev_release(void) {
    dt_dev_known_forget_all();
    const dt_dev_ops *o = g_blocking_ops ? g_blocking_ops : g_ops;
    for (int d = 0; d < MAX_DEVICES; d++)
        if (g_blocking_ev[d]) {
            o->event_destroy(g_blocking_ev[d]);
            g_blocking_ev[d] = NULL;
        }
    g_blocking_ops = NULL;
    pthread_mutex_lock(&g_pool_mu);
    for (int d = 0; d < MAX_DEVICES; d++)
        while (g_pool_n[d] > 0) g_pool_ops->event_destroy(g_pool[d][--g_pool_n[d]]);
    g_pool_ops = NULL;
    g_pool_closed = 1;
    pthread_mutex_unlock(&g_pool_mu);
    if (g_stage) g_ops->host_free(g_stage);
    g_stage = NULL;
    g_stage_cap = 0;
}
