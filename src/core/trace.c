/* src/core/trace.c - Chrome trace event recorder (see dtrain/trace.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/error.h"
#include "dtrain/trace.h"

typedef struct ev { char name[48]; const char *cat; int tid; double ts, dur; } ev;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_on, g_pid;
static char *g_path;
static ev *g_ev;
static size_t g_n, g_cap;

double dt_trace_now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

int dt_trace_open(const char *path, int pid) {
    if (!path || !*path) return DT_ERR(DT_ERR_INVALID, "trace path is NULL or empty");
    FILE *f = fopen(path, "w"); /* fail now, not at the end of training */
    if (!f) return DT_ERR(DT_ERR_IO, "cannot open trace file '%s' for writing: %s", path, strerror(errno));
    fclose(f);
    pthread_mutex_lock(&g_mu);
    free(g_path);
    g_path = strdup(path);
    g_pid = pid;
    g_n = 0;
    g_on = g_path != NULL;
    pthread_mutex_unlock(&g_mu);
    return g_on ? DT_OK : DT_ERR(DT_ERR_NOMEM, "out of memory");
}

int dt_trace_enabled(void) { return g_on; }

void dt_trace_event(const char *name, const char *cat, int tid, double start_us, double end_us) {
    if (!g_on) return;
    pthread_mutex_lock(&g_mu);
    if (g_n == g_cap) {
        size_t nc = g_cap ? g_cap * 2 : 4096;
        ev *p = realloc(g_ev, nc * sizeof *p);
        if (!p) { pthread_mutex_unlock(&g_mu); return; } /* drop the event, keep training */
        g_ev = p;
        g_cap = nc;
    }
    ev *e = &g_ev[g_n++];
    snprintf(e->name, sizeof e->name, "%s", name ? name : "?");
    for (char *q = e->name; *q; q++) /* keep the JSON valid */
        if (*q == '"' || *q == '\\' || (unsigned char)*q < 0x20) *q = '_';
    e->cat = cat ? cat : "dtrain";
    e->tid = tid;
    e->ts = start_us;
    e->dur = end_us > start_us ? end_us - start_us : 0;
    pthread_mutex_unlock(&g_mu);
}

int dt_trace_close(void) {
    pthread_mutex_lock(&g_mu);
    if (!g_on) { pthread_mutex_unlock(&g_mu); return DT_OK; }
    g_on = 0;
    int rc = DT_OK, err = 0;
    errno = 0;
    FILE *f = fopen(g_path, "w");
    if (!f) {
        rc = DT_ERR(DT_ERR_IO, "cannot write trace file '%s': %s", g_path, strerror(errno));
    } else {
        /* every write checked: a full disk must not leave a silently empty file */
#define W(...) do { if (!err && fprintf(f, __VA_ARGS__) < 0) err = errno ? errno : EIO; } while (0)
        W("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
        W("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}},\n", g_pid, g_pid);
        W("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"compute\"}},\n", g_pid);
        W("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"args\":{\"name\":\"communication\"}}", g_pid);
        for (size_t i = 0; i < g_n && !err; i++)
            W(",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}",
              g_ev[i].name, g_ev[i].cat, g_pid, g_ev[i].tid, g_ev[i].ts, g_ev[i].dur);
        W("\n]}\n");
#undef W
        errno = 0;
        if (!err && (fflush(f) != 0 || ferror(f))) err = errno ? errno : EIO;
        errno = 0;
        if (fclose(f) != 0 && !err) err = errno ? errno : EIO;
        if (err) rc = DT_ERR(DT_ERR_IO, "error writing trace file '%s': %s", g_path, strerror(err));
    }
    free(g_ev);
    g_ev = NULL;
    g_n = g_cap = 0;
    free(g_path);
    g_path = NULL;
    pthread_mutex_unlock(&g_mu);
    return rc;
}
