/* tests/device/fake_device.c - see fake_device.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/error.h"
#include "fake_device.h"

#define MAXA 8192
typedef struct { char *p; size_t n; int dev; } alloc_t;
static alloc_t g_a[MAXA];
static int g_na;
static int g_ndev = 1;
static _Thread_local int g_cur;
static fake_dev_stats g_st;
static int g_delay = 3;
static char g_streams[16];

typedef struct fake_ev { int magic, pending, recorded, done; } fake_ev;
#define EV_MAGIC 0x45564e54

void fake_dev_install(int ndev) {
    g_ndev = ndev;
    dt_dev_use_for_testing(&fake_dev_ops);
}

void *fake_dev_malloc(size_t bytes, int dev) {
    if (g_na == MAXA) return NULL;
    char *p = malloc(bytes + 64);
    if (!p) return NULL;
    memset(p, 0x5a, bytes + 64);
    g_a[g_na++] = (alloc_t){p, bytes + 64, dev};
    return p;
}

void fake_dev_free(void *p) {
    for (int i = 0; i < g_na; i++)
        if (g_a[i].p == p) {
            free(p);
            g_a[i] = g_a[--g_na];
            return;
        }
}

void fake_dev_stats_get(fake_dev_stats *s) { *s = g_st; }
void fake_dev_stats_reset(void) { memset(&g_st, 0, sizeof g_st); }
void fake_dev_set_event_delay(int q) { g_delay = q; }
void *fake_dev_stream(int i) { return &g_streams[i & 15]; }

int fake_dev_event_done(void *ev) {
    fake_ev *e = ev;
    return e && e->magic == EV_MAGIC && e->recorded && e->done;
}

static int find(const void *p) {
    const char *q = p;
    for (int i = 0; i < g_na; i++)
        if (q >= g_a[i].p && q < g_a[i].p + g_a[i].n) return i;
    return -1;
}

static int stream_ok(void *s) {
    return !s || ((char *)s >= g_streams && (char *)s < g_streams + sizeof g_streams);
}

static int f_count(int *n, char *why, size_t cap) {
    *n = g_ndev;
    if (!g_ndev) snprintf(why, cap, "the fake runtime was installed with no device");
    return DT_OK;
}
static int f_classify(const void *p, int *is, int *dev) {
    g_st.classify++;
    int i = find(p);
    *is = i >= 0;
    *dev = i >= 0 ? g_a[i].dev : -1;
    return DT_OK;
}
static int f_get(int *dev) { *dev = g_cur; return DT_OK; }
static int f_set(int dev) {
    if (dev < 0 || dev >= g_ndev) return DT_ERR(DT_ERR_BACKEND, "fake: no device %d", dev);
    g_cur = dev;
    return DT_OK;
}
/* every process its own GPU, unless FAKE_DEV_SHARED=1 (then the ranks of a
 * host share device 0, as processes on a one-GPU machine do) */
static int f_identity(int dev, unsigned char id[16]) {
    memset(id, 0, 16);
    id[0] = (unsigned char)dev;
    id[1] = 0xfa;
    const char *sh = getenv("FAKE_DEV_SHARED");
    if (!sh || strcmp(sh, "1") != 0) {
        uint32_t pid = (uint32_t)getpid();
        memcpy(id + 4, &pid, sizeof pid);
    }
    return DT_OK;
}
static int f_memcpy(void *d, const void *s, size_t n, void *st) {
    if (!stream_ok(st)) return DT_ERR(DT_ERR_BACKEND, "fake: %p is not a stream", st);
    g_st.copies++;
    if (n) memmove(d, s, n);
    return DT_OK;
}
static int f_sync(void *st) {
    if (!stream_ok(st)) return DT_ERR(DT_ERR_BACKEND, "fake: %p is not a stream", st);
    g_st.stream_sync++;
    return DT_OK;
}
static int f_screate(void **st) { *st = fake_dev_stream(15); return DT_OK; }
static void f_sdestroy(void *st) {}
static int f_dalloc(size_t n, void **p) {
    *p = fake_dev_malloc(n, g_cur);
    return *p ? DT_OK : DT_ERR(DT_ERR_NOMEM, "fake: no device memory");
}
static int f_memset(void *p, int v, size_t n, void *st) {
    if (!stream_ok(st)) return DT_ERR(DT_ERR_BACKEND, "fake: %p is not a stream", st);
    if (n && find(p) < 0) return DT_ERR(DT_ERR_BACKEND, "fake: memset of %p, not device memory", p);
    g_st.copies++;
    if (n) memset(p, v, n);
    return DT_OK;
}
static int f_halloc(size_t n, void **p) {
    *p = malloc(n ? n : 1);
    return *p ? DT_OK : DT_ERR(DT_ERR_NOMEM, "fake: no pinned memory");
}
static void f_hfree(void *p) { free(p); }
static int f_ecreate(void **ev) {
    fake_ev *e = calloc(1, sizeof *e);
    if (!e) return DT_ERR(DT_ERR_NOMEM, "fake: no event");
    e->magic = EV_MAGIC;
    *ev = e;
    return DT_OK;
}
static void f_edestroy(void *ev) {
    fake_ev *e = ev;
    if (e) e->magic = 0;
    free(e);
}
static int f_record(void *ev, void *st) {
    fake_ev *e = ev;
    if (!e || e->magic != EV_MAGIC) return DT_ERR(DT_ERR_BACKEND, "fake: %p is not an event", ev);
    if (!stream_ok(st)) return DT_ERR(DT_ERR_BACKEND, "fake: %p is not a stream", st);
    g_st.records++;
    e->recorded = 1;
    e->done = 0;
    e->pending = g_delay;
    return DT_OK;
}
static int f_query(void *ev) {
    fake_ev *e = ev;
    if (!e || e->magic != EV_MAGIC) return DT_ERR(DT_ERR_BACKEND, "fake: %p is not an event", ev);
    g_st.queries++;
    if (e->pending > 0) { e->pending--; return DT_DEV_PENDING; }
    e->done = 1;
    return DT_OK;
}
static int f_swait(void *st, void *ev) {
    fake_ev *e = ev;
    if (!e || e->magic != EV_MAGIC) return DT_ERR(DT_ERR_BACKEND, "fake: %p is not an event", ev);
    if (!stream_ok(st)) return DT_ERR(DT_ERR_BACKEND, "fake: %p is not a stream", st);
    g_st.stream_waits++;
    return DT_OK;
}

const dt_dev_ops fake_dev_ops = {
    .name = "fake",
    .is_cuda = 0,
    .count = f_count,
    .classify = f_classify,
    .get_device = f_get,
    .set_device = f_set,
    .identity = f_identity,
    .memcpy_async = f_memcpy,
    .stream_sync = f_sync,
    .stream_create = f_screate,
    .stream_destroy = f_sdestroy,
    .dev_alloc = f_dalloc,
    .dev_free = fake_dev_free,
    .memset_async = f_memset,
    .host_alloc = f_halloc,
    .host_free = f_hfree,
    .event_create = f_ecreate,
    .event_destroy = f_edestroy,
    .event_record = f_record,
    .event_query = f_query,
    .stream_wait_event = f_swait,
};
