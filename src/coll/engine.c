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
    struct dt_work *dnext, *dprev; /* the list of device work not known complete (dt_coll_sync) */
    int linked;            /* on that list */
    int lists_cap;         /* tensors lists holds (pooled handles keep it) */
    unsigned session;      /* g_session when made: pooled only within it */
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static dt_work *g_head, *g_tail;
static int g_busy;            /* some thread is inside the transport */
static int g_thread_on, g_stop;
static pthread_t g_thread;
static dt_work *g_dev_works; /* stream-ordered device work not known complete */
static int g_waiting;         /* threads in cv_wait */

/* g_cv, under g_mu: a wake-up costs nothing when nobody waits */
static void cv_wait(void) {
    g_waiting++;
    pthread_cond_wait(&g_cv, &g_mu);
    g_waiting--;
}
static void cv_wake(void) {
    if (g_waiting) pthread_cond_broadcast(&g_cv);
}

/* Handles of stream-ordered device work, kept with their events (and list
 * copies) by dt_work_free for the next call on the same device: a calloc, a
 * free and an event from the device's pool per call cost as much as the rest
 * of dtrain's host work. Under g_mu; emptied by dt_engine_shutdown, after
 * which (g_session moves on) handles of that session are freed, not kept. */
#define POOL_DEVICES 64
#define POOL_CAP 32
static dt_work *g_pool[POOL_DEVICES];
static int g_pool_n[POOL_DEVICES];
static unsigned g_session;

static void dev_link(dt_work *w) {
    w->dprev = NULL;
    w->dnext = g_dev_works;
    if (g_dev_works) g_dev_works->dprev = w;
    g_dev_works = w;
    w->linked = 1;
}

static void dev_unlink_locked(dt_work *w) {
    if (w->linked) {
        if (w->dprev) w->dprev->dnext = w->dnext;
        else g_dev_works = w->dnext;
        if (w->dnext) w->dnext->dprev = w->dprev;
        w->dnext = w->dprev = NULL;
        w->linked = 0;
    }
    w->ev_done = 1;
}

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
        while (!g_stop && (!g_head || g_busy)) cv_wait();
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
        cv_wake();
    }
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

static void enqueue(dt_work *w) {
    w->next = NULL;
    if (g_tail) g_tail->next = w; else g_head = w;
    g_tail = w;
    cv_wake();
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
            cv_wake();
            pthread_mutex_unlock(&g_mu);
            return rc;
        }
        if (g_thread_on) { /* queue behind pending async work and wait */
            dt_work w;
            memset(&w, 0, sizeof w);
            w.desc = *desc;
            enqueue(&w);
            while (!w.done) cv_wait();
            pthread_mutex_unlock(&g_mu);
            return report(&w);
        }
        cv_wait(); /* another caller thread is inside */
    }
}

/* Asynchronous execution puts a second thread into the transport; the
 * transport says whether it may (MPI: at least MPI_THREAD_SERIALIZED).
 * Otherwise async work runs at submission. */
static int async_possible(const dt_comm *c) { return !c->ops->async_ok || c->ops->async_ok(c); }

/* handles with events, released for good (their events to the device's pool) */
static void drop_all(dt_work *w) {
    while (w) {
        dt_work *next = w->next;
        dt_dev_event_put(w->desc.device, w->event);
        free(w->lists);
        free(w);
        w = next;
    }
}

/* d's lists copied into w (grown as needed): w->desc.in / out point there */
static int copy_lists(dt_work *w, const dt_coll_desc *d) {
    if (d->n <= 0 || !d->in) return DT_OK;
    if (d->n > w->lists_cap) {
        dt_tensor *l = malloc(sizeof(dt_tensor) * 2 * (size_t)d->n);
        if (!l) return DT_ERR(DT_ERR_NOMEM, "out of memory for a list of %d tensors", d->n);
        free(w->lists);
        w->lists = l;
        w->lists_cap = d->n;
    }
    memcpy(w->lists, d->in, sizeof(dt_tensor) * (size_t)d->n);
    if (d->out) memcpy(w->lists + d->n, d->out, sizeof(dt_tensor) * (size_t)d->n);
    w->desc.in = w->lists;
    w->desc.out = d->out ? w->lists + d->n : NULL; /* NULL: per-rank reduce_scatter */
    return DT_OK;
}

/* A handle of stream-ordered device work on `dev`: a pooled one (its event
 * and list copy kept, the rest reset) or a new one with an event of dev. */
static int ordered_handle(dt_work *pooled, int dev, dt_work **out) {
    dt_work *w = pooled;
    if (w) { /* as it was left: unlinked, its event, lists and session kept */
        w->status = 0;
        w->done = 0;
        w->msg[0] = '\0';
        w->next = NULL;
        w->ev_done = 0;
        *out = w;
        return DT_OK;
    }
    if (!(w = calloc(1, sizeof *w))) return DT_ERR(DT_ERR_NOMEM, "out of memory for a work handle");
    int rc = dt_dev_event_on(dev, &w->event);
    if (rc) {
        free(w);
        return rc;
    }
    w->session = g_session;
    *out = w;
    return DT_OK;
}

/* Stream-ordered device work (a device transport, or a group of one):
 * enqueued now on the caller's stream, in the exclusive section, complete on
 * its event. One lock to enter (taking a pooled handle), one to leave
 * (listing the handle for dt_coll_sync). */
static int submit_ordered(const dt_coll_desc *desc, dt_work **work) {
    int dev = desc->device;
    dt_work *pooled = NULL;
    pthread_mutex_lock(&g_mu);
    while (g_busy || g_head) cv_wait();
    g_busy = 1;
    if (dev >= 0 && dev < POOL_DEVICES && g_pool[dev]) {
        pooled = g_pool[dev];
        g_pool[dev] = pooled->next;
        g_pool_n[dev]--;
    }
    pthread_mutex_unlock(&g_mu);
    dt_work *w = NULL;
    int rc = ordered_handle(pooled, dev, &w);
    if (!rc) {
        w->desc = *desc;
        rc = copy_lists(w, desc);
        if (rc) dt_work_free(w);
    }
    if (rc) {
        dt_engine_exclusive_end();
        return rc;
    }
    w->desc.event = w->event;
    w->t_start = dt_trace_now_us();
    rc = dt_coll_execute(&w->desc, &w->hdr);
    w->t_end = w->t_start; /* when its event completes (dev_test, dev_wait) */
    if (rc) {
        w->t_end = dt_trace_now_us();
        snprintf(w->msg, sizeof w->msg, "%s", dt_last_error());
    }
    w->status = rc;
    w->done = 1;
    w->ev_done = rc != DT_OK;
    pthread_mutex_lock(&g_mu);
    if (!w->ev_done) dev_link(w);
    g_busy = 0;
    cv_wake();
    pthread_mutex_unlock(&g_mu);
    *work = w;
    return DT_OK;
}

int dt_engine_submit(const dt_coll_desc *desc, dt_work **work) {
    if (desc->mem == DT_MEM_DEVICE && dt_dev_stream_ordered(desc)) return submit_ordered(desc, work);
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
    if (desc->mem == DT_MEM_DEVICE) { /* staged: complete on return */
        w->t_start = dt_trace_now_us();
        int rc = run_exclusive(&w->desc, &w->hdr);
        w->t_end = dt_trace_now_us();
        if (rc) snprintf(w->msg, sizeof w->msg, "%s", dt_last_error());
        w->status = rc;
        w->done = 1;
        w->ev_done = 1;
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
    while (g_busy || g_head) cv_wait();
    g_busy = 1;
    pthread_mutex_unlock(&g_mu);
}

void dt_engine_exclusive_end(void) {
    pthread_mutex_lock(&g_mu);
    g_busy = 0;
    cv_wake();
    pthread_mutex_unlock(&g_mu);
}

static int dev_wait(dt_work *w);

int dt_engine_sync(void) {
    pthread_mutex_lock(&g_mu);
    while (g_head || (g_busy && g_thread_on)) cv_wait();
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
    cv_wake();
    pthread_mutex_unlock(&g_mu);
    if (on) pthread_join(g_thread, NULL);
    g_thread_on = 0;
    g_stop = 0;
    /* the pooled handles: their events back to the device's pool (freed with
     * it); handles of this session freed later are not kept */
    pthread_mutex_lock(&g_mu);
    dt_work *all = NULL;
    for (int d = 0; d < POOL_DEVICES; d++) {
        while (g_pool[d]) {
            dt_work *w = g_pool[d];
            g_pool[d] = w->next;
            w->next = all;
            all = w;
        }
        g_pool_n[d] = 0;
    }
    g_session++;
    pthread_mutex_unlock(&g_mu);
    drop_all(all);
    dt_fusion_release();
    dt_dev_path_release();
    dt_fp_release();
    return DT_OK;
}

/* ---- stream-ordered device work ------------------------------------------------ */

static void dev_unlink(dt_work *w) {
    pthread_mutex_lock(&g_mu);
    dev_unlink_locked(w);
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
    while (!work->done) cv_wait();
    pthread_mutex_unlock(&g_mu);
    return report(work);
}

void dt_work_free(dt_work *work) {
    if (!work) return;
    if (work->event) { /* stream-ordered: released without waiting, kept for the next call */
        int dev = work->desc.device, kept = 0;
        pthread_mutex_lock(&g_mu);
        dev_unlink_locked(work);
        if (work->session == g_session && dev >= 0 && dev < POOL_DEVICES && g_pool_n[dev] < POOL_CAP) {
            work->next = g_pool[dev];
            g_pool[dev] = work;
            g_pool_n[dev]++;
            kept = 1;
        }
        pthread_mutex_unlock(&g_mu);
        if (kept) return;
        work->next = NULL;
        drop_all(work);
        return;
    }
    pthread_mutex_lock(&g_mu);
    while (!work->done) cv_wait();
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
