/* src/coll/engine.c - the communication engine: submission-ordered execution
 * of collectives, a background thread for asynchronous work, work handles. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coll/engine.h"
#include "watchdog/watchdog.h"
#include "core/device.h"
#include "core/error.h"
#include "dtrain/trace.h"

struct dt_work {
    dt_coll_desc desc;
    dt_tensor *lists;      /* owned copies of desc.in / desc.out for list ops */
    int status;
    int done;              /* executed (device transports: enqueued) */
    double t_start, t_end; /* execution interval, trace clock (us) */
    char msg[1024];         /* dt_last_error() of the failed call (same size as its buffer) */
    struct dt_work *next;
    /* stream-ordered device work: complete when its event is */
    void *event;
    int ev_done;
    dt_fp_hdr hdr;         /* the call, for the watchdog while a host waits on it */
    struct dt_work *dnext; /* the list of device work not known complete (dt_coll_sync) */
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static dt_work *g_head, *g_tail;
static int g_busy;            /* some thread is inside the transport */
static int g_thread_on, g_stop;
static pthread_t g_thread;
static dt_work *g_dev_works; /* stream-ordered device work not known complete */

static void run_item(dt_work *w) {
    dt_clear_error();
    w->t_start = dt_trace_now_us();
    int rc = dt_coll_execute(&w->desc, NULL);
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

/* Device work runs on the caller's thread (its stream and device are the
 * caller's), after everything queued before it. */
static int run_exclusive(const dt_coll_desc *desc, dt_fp_hdr *hdr) {
    dt_engine_exclusive_begin();
    int rc = dt_coll_execute(desc, hdr);
    dt_engine_exclusive_end();
    return rc;
}

int dt_engine_run(const dt_coll_desc *desc) {
    if (desc->mem == DT_MEM_DEVICE) return run_exclusive(desc, NULL);
    pthread_mutex_lock(&g_mu);
    for (;;) {
        if (!g_busy && !g_head) {
            g_busy = 1;
            pthread_mutex_unlock(&g_mu);
            int rc = dt_coll_execute(desc, NULL);
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
    if (desc->mem == DT_MEM_DEVICE) {
        /* enqueued now on the caller's stream (a device transport: complete
         * on the event), or staged: complete on return */
        int rc = DT_OK;
        if (dt_dev_stream_ordered(desc) && (rc = dt_dev_event_on(desc->device, &w->event))) {
            free(w->lists);
            free(w);
            return rc;
        }
        w->desc.event = w->event;
        w->t_start = dt_trace_now_us();
        rc = run_exclusive(&w->desc, &w->hdr);
        w->t_end = dt_trace_now_us();
        if (rc) snprintf(w->msg, sizeof w->msg, "%s", dt_last_error());
        w->status = rc;
        w->done = 1;
        w->ev_done = rc != DT_OK || !w->event;
        if (!w->ev_done) {
            pthread_mutex_lock(&g_mu);
            w->dnext = g_dev_works;
            g_dev_works = w;
            pthread_mutex_unlock(&g_mu);
        }
        *work = w;
        return DT_OK;
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

static int dev_wait(dt_work *w);

int dt_engine_sync(void) {
    pthread_mutex_lock(&g_mu);
    while (g_head || (g_busy && g_thread_on)) pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    int rc = DT_OK;
    for (;;) { /* device work: dev_wait takes each off the list */
        pthread_mutex_lock(&g_mu);
        dt_work *w = g_dev_works;
        pthread_mutex_unlock(&g_mu);
        if (!w) break;
        int r = dev_wait(w);
        if (!rc) rc = r;
    }
    return rc;
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
    dt_dev_path_release();
    dt_fp_release();
    return DT_OK;
}

/* ---- stream-ordered device work ------------------------------------------------ */

static void dev_unlink(dt_work *w) {
    pthread_mutex_lock(&g_mu);
    for (dt_work **p = &g_dev_works; *p; p = &(*p)->dnext)
        if (*p == w) { *p = w->dnext; break; }
    w->ev_done = 1;
    pthread_mutex_unlock(&g_mu);
}

static int dev_poll(void *arg) {
    dt_comm *c = arg;
    return c->dev ? c->dev->async_error(c) : DT_OK;
}

/* The host waits for w's event: in the engine's exclusive section, published
 * to the watchdog as the call itself (a stall there gets the usual report). */
static int dev_wait(dt_work *w) {
    if (w->ev_done) return w->status;
    dt_engine_exclusive_begin();
    const dt_fp_hdr *h = &w->hdr;
    dt_wd_op_begin(h->cid, h->kind, h->seq, h->dtype, h->count, h->root, h->op, h->nlist);
    int rc = dt_dev_event_wait(w->event, dev_poll, w->desc.comm);
    dt_wd_op_end();
    dt_engine_exclusive_end();
    w->t_end = dt_trace_now_us();
    if (rc) {
        snprintf(w->msg, sizeof w->msg, "%s", dt_last_error());
        w->status = rc;
    }
    dev_unlink(w);
    return w->status;
}

/* 1 if w's event has completed (unlinked then), 0 if not; <0 on an error
 * (recorded in w). */
static int dev_test(dt_work *w) {
    if (w->ev_done) return 1;
    int rc = dt_dev()->event_query(w->event);
    if (rc == DT_DEV_PENDING) return 0;
    if (rc) {
        snprintf(w->msg, sizeof w->msg, "%s", dt_last_error());
        w->status = rc;
    }
    w->t_end = dt_trace_now_us();
    dev_unlink(w);
    return 1;
}

int dt_work_stream_wait(dt_work *work, void *stream) {
    if (!work) return DT_ERR(DT_ERR_INVALID, "work is NULL");
    if (!work->event) return dt_work_wait(work);
    if (work->status) return report(work);
    int rc = dt_dev()->stream_wait_event(stream, work->event);
    return rc;
}

int dt_work_test(dt_work *work, int *done) {
    if (!work || !done) return DT_ERR(DT_ERR_INVALID, "NULL %s", work ? "done" : "work");
    if (work->event) { /* enqueued at submission: done is set */
        *done = dev_test(work);
        return *done ? report(work) : DT_OK;
    }
    pthread_mutex_lock(&g_mu);
    int d = work->done;
    pthread_mutex_unlock(&g_mu);
    *done = d;
    return d ? report(work) : DT_OK;
}

int dt_work_wait(dt_work *work) {
    if (!work) return DT_ERR(DT_ERR_INVALID, "work is NULL");
    if (work->event) {
        dev_wait(work);
        return report(work);
    }
    pthread_mutex_lock(&g_mu);
    while (!work->done) pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    return report(work);
}

void dt_work_free(dt_work *work) {
    if (!work) return;
    if (work->event) { /* stream-ordered: released without waiting */
        if (!work->ev_done) dev_unlink(work);
        dt_dev_event_put(work->desc.device, work->event);
        free(work->lists);
        free(work);
        return;
    }
    pthread_mutex_lock(&g_mu);
    while (!work->done) pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    free(work->lists);
    free(work);
}

int dt_work_times(const dt_work *work, double *start_us, double *end_us) {
    if (!work || !start_us || !end_us) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    pthread_mutex_lock(&g_mu);
    int d = work->done && (!work->event || work->ev_done);
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
