/* src/core/trace.c - Chrome trace event recorder (see dtrain/trace.h). The
 * events are written by jansson (the project's one JSON library; core sits
 * below src/io, so it calls jansson itself), one event per line. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jansson.h>
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
    snprintf(e->name, sizeof e->name, "%s", name ? name : "?"); /* jansson escapes it when written */
    e->cat = cat ? cat : "dtrain";
    e->tid = tid;
    e->ts = start_us;
    e->dur = end_us > start_us ? end_us - start_us : 0;
    pthread_mutex_unlock(&g_mu);
}

/* Microseconds as "%.3f" shows them (the file's nanosecond resolution). */
static double to_ns(double us) {
    char b[64];
    snprintf(b, sizeof b, "%.3f", us);
    return strtod(b, NULL);
}

/* e's name, escaped by jansson; a name cut inside a UTF-8 sequence (events
 * keep 47 bytes) has its non-ASCII bytes replaced by '_'. */
static int set_name(json_t *s, const char *name) {
    if (json_string_set(s, name) == 0) return 0;
    char b[sizeof ((ev *)0)->name];
    snprintf(b, sizeof b, "%s", name);
    for (char *q = b; *q; q++)
        if ((unsigned char)*q >= 0x80) *q = '_';
    return json_string_set(s, b);
}

/* One line of the file: ",\n" (unless first) and v, compact. Reals: ts and
 * dur to the nanosecond, 15 significant digits (exact below 1e12 us, 11.6
 * days of uptime), 17 above. Returns 0 or an errno. */
static int put_line(FILE *f, const json_t *v, int first, double biggest) {
    errno = 0;
    size_t flags = JSON_COMPACT | JSON_REAL_PRECISION(biggest < 1e12 ? 15 : 17);
    if ((!first && fputs(",\n", f) < 0) || json_dumpf(v, f, flags) != 0) return errno ? errno : EIO;
    return 0;
}

/* The file: {"displayTimeUnit":"ms","traceEvents":[ one event per line ]}. */
static int write_events(FILE *f) {
    int err = 0;
    char rank[32];
    snprintf(rank, sizeof rank, "rank %d", g_pid);
    json_t *meta[3] = {
        json_pack("{s:s, s:s, s:i, s:{s:s}}", "name", "process_name", "ph", "M", "pid", g_pid, "args", "name", rank),
        json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "thread_name", "ph", "M", "pid", g_pid, "tid", 0, "args",
                  "name", "compute"),
        json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "thread_name", "ph", "M", "pid", g_pid, "tid", 1, "args",
                  "name", "communication")};
    json_t *e = json_pack("{s:s, s:s, s:s, s:i, s:i, s:f, s:f}", "name", "", "cat", "", "ph", "X", "pid", g_pid,
                          "tid", 0, "ts", 0.0, "dur", 0.0);
    if (!meta[0] || !meta[1] || !meta[2] || !e) err = ENOMEM;
    errno = 0;
    if (!err && fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f) < 0) err = errno ? errno : EIO;
    for (int k = 0; k < 3 && !err; k++) err = put_line(f, meta[k], k == 0, 0);
    for (size_t i = 0; i < g_n && !err; i++) {
        const ev *v = &g_ev[i];
        double ts = to_ns(v->ts), dur = to_ns(v->dur);
        if (set_name(json_object_get(e, "name"), v->name) || json_string_set(json_object_get(e, "cat"), v->cat) ||
            json_integer_set(json_object_get(e, "tid"), v->tid) || json_real_set(json_object_get(e, "ts"), ts) ||
            json_real_set(json_object_get(e, "dur"), dur))
            err = ENOMEM;
        else
            err = put_line(f, e, 0, fabs(ts) > fabs(dur) ? fabs(ts) : fabs(dur));
    }
    errno = 0;
    if (!err && fputs("\n]}\n", f) < 0) err = errno ? errno : EIO;
    for (int k = 0; k < 3; k++) json_decref(meta[k]);
    json_decref(e);
    return err;
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
        err = write_events(f);
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
