/* src/coll/engine.c - the communication engine: submission-ordered execution
 * of collectives, a background thread for asynchronous work, work handles. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coll/engine.h"
#include "core/error.h"
#include "dtrain/trace.h"

struct dt_work {
    dt_coll_desc desc;
    dt_tensor *lists;      /* owned copies of desc.in / desc.out for list ops */
    int status;
    int done;
    double t_start, t_end; /* execution interval, trace clock (us) */
    char msg[1024];         /* dt_last_error() of the failed call (same size as its buffer) */
    struct dt_work *next;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static dt_work *g_head, *g_tail;
static int g_busy;            /* some thread is inside the transport */
static int g_thread_on, g_stop;
static pthread_t g_thread;

static void run_item(dt_work *w) {
    dt_clear_error();
    w->t_start = dt_trace_now_us();
    int rc = dt_coll_execute(&w->desc);
    w->t_end = dt_trace_now_us();
    if (rc) snprintf(w->msg, sizeof w->msg, "%s", dt_last_error());
    w->status = rc;
}

static void *engine_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&g_mu);
    for (;;) {
        while (!g_stop && (!g_head || g_busy)) pthread_cond_wait(&g_cv, &g_mu);
        if (!g_head || g_busy) { if (g_stop) break; continue; }
        dt_work *w = g_head;
        g_head = w->next;
        if (!g_head) g_tail = NULL;
        g_busy = 1;
        pthread_mutex_unlock(&g_mu);
        run_item(w);
        pthread_mutex_lock(&g_mu);
        g_busy = 0;
        w->done = 1; /* w may be freed by its owner as soon as we unlock */
        pthread_cond_broadcast(&g_cv);
    }
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

static void enqueue(dt_work *w) {
    w->next = NULL;
    if (g_tail) g_tail->next = w; else g_head = w;
    g_tail = w;
    pthread_cond_broadcast(&g_cv);
}

static int report(const dt_work *w) {
    if (w->status) return dt_error(w->status, dt_op_kind_name((int)w->desc.kind), "%s", w->msg);
    return DT_OK;
}

int dt_engine_run(const dt_coll_desc *desc) {
    pthread_mutex_lock(&g_mu);
    for (;;) {
        if (!g_busy && !g_head) {
            g_busy = 1;
            pthread_mutex_unlock(&g_mu);
            int rc = dt_coll_execute(desc);
            pthread_mutex_lock(&g_mu);
            g_busy = 0;
            pthread_cond_broadcast(&g_cv);
            pthread_mutex_unlock(&g_mu);
            return rc;
        }
        if (g_thread_on) { /* queue behind pending async work and wait */
            dt_work w;
            memset(&w, 0, sizeof w);
            w.desc = *desc;
            enqueue(&w);
            while (!w.done) pthread_cond_wait(&g_cv, &g_mu);
            pthread_mutex_unlock(&g_mu);
            return report(&w);
        }
        pthread_cond_wait(&g_cv, &g_mu); /* another caller thread is inside */
    }
}

/* Asynchronous execution puts a second thread into the transport; the
 * transport says whether it may (MPI: at least MPI_THREAD_SERIALIZED).
 * Otherwise async work runs at submission. */
static int async_possible(const dt_comm *c) { return !c->ops->async_ok || c->ops->async_ok(c); }

int dt_engine_submit(const dt_coll_desc *desc, dt_work **work) {
    dt_work *w = calloc(1, sizeof *w);
    if (!w) return DT_ERR(DT_ERR_NOMEM, "out of memory for a work handle");
    w->desc = *desc;
    if (desc->n > 0 && desc->in) {
        w->lists = malloc(sizeof(dt_tensor) * 2 * (size_t)desc->n);
        if (!w->lists) { free(w); return DT_ERR(DT_ERR_NOMEM, "out of memory for a list of %d tensors", desc->n); }
        memcpy(w->lists, desc->in, sizeof(dt_tensor) * (size_t)desc->n);
        if (desc->out) memcpy(w->lists + desc->n, desc->out, sizeof(dt_tensor) * (size_t)desc->n);
        w->desc.in = w->lists;
        w->desc.out = desc->out ? w->lists + desc->n : NULL; /* NULL: per-rank reduce_scatter */
    }
    if (!async_possible(desc->comm)) {
        w->t_start = dt_trace_now_us();
        int rc = dt_engine_run(&w->desc);
        w->t_end = dt_trace_now_us();
        if (rc) snprintf(w->msg, sizeof w->msg, "%s", dt_last_error());
        w->status = rc;
        w->done = 1;
        *work = w;
        return DT_OK;
    }
    pthread_mutex_lock(&g_mu);
    if (!g_thread_on) {
        g_stop = 0;
        if (pthread_create(&g_thread, NULL, engine_main, NULL) != 0) {
            pthread_mutex_unlock(&g_mu);
            free(w->lists);
            free(w);
            return DT_ERR(DT_ERR_NOMEM, "cannot start the communication thread");
        }
        g_thread_on = 1;
    }
    enqueue(w);
    pthread_mutex_unlock(&g_mu);
    *work = w;
    return DT_OK;
}

void dt_engine_exclusive_begin(void) {
    pthread_mutex_lock(&g_mu);
    while (g_busy || g_head) pthread_cond_wait(&g_cv, &g_mu);
    g_busy = 1;
    pthread_mutex_unlock(&g_mu);
}

void dt_engine_exclusive_end(void) {
    pthread_mutex_lock(&g_mu);
    g_busy = 0;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

int dt_engine_sync(void) {
    pthread_mutex_lock(&g_mu);
    while (g_head || (g_busy && g_thread_on)) pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    return DT_OK;
}

int dt_engine_shutdown(void) {
    dt_engine_sync();
    pthread_mutex_lock(&g_mu);
    int on = g_thread_on;
    g_stop = 1;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    if (on) pthread_join(g_thread, NULL);
    g_thread_on = 0;
    g_stop = 0;
    dt_fusion_release();
    return DT_OK;
}

int dt_work_test(dt_work *work, int *done) {
    if (!work || !done) return DT_ERR(DT_ERR_INVALID, "NULL %s", work ? "done" : "work");
    pthread_mutex_lock(&g_mu);
    int d = work->done;
    pthread_mutex_unlock(&g_mu);
    *done = d;
    return d ? report(work) : DT_OK;
}

int dt_work_wait(dt_work *work) {
    if (!work) return DT_ERR(DT_ERR_INVALID, "work is NULL");
    pthread_mutex_lock(&g_mu);
    while (!work->done) pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    return report(work);
}

void dt_work_free(dt_work *work) {
    if (!work) return;
    pthread_mutex_lock(&g_mu);
    while (!work->done) pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    free(work->lists);
    free(work);
}

int dt_work_times(const dt_work *work, double *start_us, double *end_us) {
    if (!work || !start_us || !end_us) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    pthread_mutex_lock(&g_mu);
    int d = work->done;
    pthread_mutex_unlock(&g_mu);
    if (!d) return DT_ERR(DT_ERR_STATE, "work has not completed");
    *start_us = work->t_start;
    *end_us = work->t_end;
    return DT_OK;
}

int dt_coll_sync(void) {
    if (!dt_is_initialized()) return DT_ERR(DT_ERR_STATE, "dtrain is not initialised");
    return dt_engine_sync();
}
