/* src/parallel/replicas.c - the strategies' in-process dimension: model
 * replicas over shared parameters, a thread per replica, batch-norm
 * statistics and gradients summed between the threads in a fixed order (see
 * replicas.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "core/mem.h"
#include "dtrain/mem.h"
#include "parallel/replicas.h"

/* A barrier that a failing thread can break (pthread_barrier_t cannot be
 * abandoned): wait returns 0 when all `n` arrived, -1 when the pass failed. */
typedef struct gbarrier {
    int count;
    unsigned gen;
} gbarrier;

typedef struct worker {
    struct dt_replicas *g;
    int i;
    void *m;          /* the replica (the table's model for i = 0) */
    pthread_t th;
    int started;
    /* results of the last pass */
    int rc;           /* 0, a negative status (msg set), or 1: stopped by another thread's failure */
    int aborted;      /* a barrier of this pass was broken by another thread's failure */
    char msg[512];
    float loss;
    int correct;
} worker;

struct dt_replicas {
    int n;
    worker *w;        /* [n]; w[0] is the calling thread, on replica 0 */
    const dt_layer_table *t; /* the model's calls */
    dt_layer_hooks hooks0;
    size_t P, x_bytes, y_elems;
    long long grad_bytes;
    pthread_mutex_t mu;
    pthread_cond_t job_cv, done_cv, bar_cv;
    unsigned job_gen; /* bumped per pass */
    int stop, done, failed;
    gbarrier sbar, abar; /* the active threads (statistics), all threads (before the reduction) */
    /* the pass under way */
    const unsigned char *x;
    const int32_t *y;
    int B, active;
    float scale;
    float *g0;        /* replica 0's gradients */
    /* the statistics sum: each active thread's buffer, the sum */
    float **sbuf;     /* [n] */
    double *ssum;
    float *sout;
    size_t scap;
    int srcc;         /* sync_across's status */
};

/* ---- synchronisation ------------------------------------------------------------ */

static int bar_wait(dt_replicas *g, gbarrier *b, int n) {
    pthread_mutex_lock(&g->mu);
    if (g->failed) {
        pthread_mutex_unlock(&g->mu);
        return -1;
    }
    unsigned gen = b->gen;
    if (++b->count == n) {
        b->count = 0;
        b->gen++;
        pthread_cond_broadcast(&g->bar_cv);
        pthread_mutex_unlock(&g->mu);
        return 0;
    }
    while (gen == b->gen && !g->failed) pthread_cond_wait(&g->bar_cv, &g->mu);
    int r = gen == b->gen ? -1 : 0;
    pthread_mutex_unlock(&g->mu);
    return r;
}

static void fail(dt_replicas *g, worker *w, int rc) {
    w->rc = rc;
    snprintf(w->msg, sizeof w->msg, "%s", dt_last_error());
    pthread_mutex_lock(&g->mu);
    g->failed = 1;
    pthread_cond_broadcast(&g->bar_cv);
    pthread_mutex_unlock(&g->mu);
}

/* sync_stats of every replica: buf summed over the active threads (in thread
 * order, in double), then over the ranks (hooks0.sync_stats, on thread 0). */
static int th_sync_stats(void *ctx, float *buf, size_t n) {
    worker *w = ctx;
    dt_replicas *g = w->g;
    g->sbuf[w->i] = buf;
    if (bar_wait(g, &g->sbar, g->active)) return w->aborted = 1;
    if (w->i == 0) {
        g->srcc = DT_OK;
        if (n > g->scap) {
            double *s = realloc(g->ssum, n * sizeof(double));
            if (s) g->ssum = s;
            float *o = s ? realloc(g->sout, n * sizeof(float)) : NULL;
            if (o) g->sout = o;
            if (!s || !o) g->srcc = DT_ERR(DT_ERR_NOMEM, "out of memory for batch-norm statistics");
            else g->scap = n;
        }
        for (size_t e = 0; !g->srcc && e < n; e++) {
            double s = 0;
            for (int j = 0; j < g->active; j++) s += (double)g->sbuf[j][e];
            g->sout[e] = (float)s;
        }
        if (!g->srcc && g->hooks0.sync_stats) g->srcc = g->hooks0.sync_stats(g->hooks0.ctx, g->sout, n);
    }
    if (bar_wait(g, &g->sbar, g->active)) return w->aborted = 1;
    if (g->srcc) {
        if (w->i == 0) return g->srcc;
        return w->aborted = 1;
    }
    memcpy(buf, g->sout, n * sizeof(float));
    /* nobody may start the next sum before every thread copied this one */
    return bar_wait(g, &g->sbar, g->active) ? (w->aborted = 1) : DT_OK;
}

/* replica 0's hooks: the caller's, except grad_ready (replayed after the
 * reduction) and sync_stats (the threads' sum) */
static int h0_pre_fwd(void *ctx, int l) {
    dt_replicas *g = ((worker *)ctx)->g;
    return g->hooks0.pre_forward ? g->hooks0.pre_forward(g->hooks0.ctx, l) : DT_OK;
}
static int h0_post_fwd(void *ctx, int l) {
    dt_replicas *g = ((worker *)ctx)->g;
    return g->hooks0.post_forward ? g->hooks0.post_forward(g->hooks0.ctx, l) : DT_OK;
}
static int h0_pre_bwd(void *ctx, int l) {
    dt_replicas *g = ((worker *)ctx)->g;
    return g->hooks0.pre_backward ? g->hooks0.pre_backward(g->hooks0.ctx, l) : DT_OK;
}
static int h0_post_bwd(void *ctx, int l) {
    dt_replicas *g = ((worker *)ctx)->g;
    return g->hooks0.post_backward ? g->hooks0.post_backward(g->hooks0.ctx, l) : DT_OK;
}

/* replica 0's hooks: the wrappers above around g->hooks0 */
static int install0(dt_replicas *g) {
    dt_layer_hooks h = {.ctx = &g->w[0], .pre_forward = h0_pre_fwd, .post_forward = h0_post_fwd,
                        .pre_backward = h0_pre_bwd, .post_backward = h0_post_bwd, .sync_stats = th_sync_stats};
    return g->t->set_hooks(g->w[0].m, &h);
}

/* ---- one thread's part of a pass ------------------------------------------------- */

static void slice_of(int B, int n, int i, int *off, int *cnt) {
    int q = B / n, r = B % n;
    *cnt = q + (i < r);
    *off = i * q + (i < r ? i : r);
}

static void run_part(dt_replicas *g, worker *w) {
    int off, cnt, rc = DT_OK;
    slice_of(g->B, g->n, w->i, &off, &cnt);
    w->rc = DT_OK;
    w->aborted = 0;
    w->loss = 0;
    w->correct = 0;
    if (cnt > 0) {
        const int32_t *y = g->y + (size_t)off * g->y_elems;
        rc = g->t->replica_pass(w->m, g->x + (size_t)off * g->x_bytes, y, cnt, g->scale * (float)cnt / (float)g->B,
                                &w->loss, &w->correct);
        if (rc && w->aborted) { /* stopped in a barrier by another thread's failure */
            w->rc = 1;
            return;
        }
        if (rc) {
            fail(g, w, rc);
            return;
        }
    }
    if (bar_wait(g, &g->abar, g->n)) {
        w->rc = 1;
        return;
    }
    /* the reduction: this thread's slice of the flat vector, replicas in order */
    size_t chunk = (g->P + (size_t)g->n - 1) / (size_t)g->n;
    chunk = (chunk + 15) & ~(size_t)15;
    size_t lo = chunk * (size_t)w->i < g->P ? chunk * (size_t)w->i : g->P;
    size_t hi = lo + chunk < g->P ? lo + chunk : g->P;
    float *g0 = g->g0;
    for (int j = 1; j < g->n; j++) {
        float *gj = g->t->flat_grads(g->w[j].m);
        for (size_t e = lo; e < hi; e++) g0[e] += gj[e];
        memset(gj + lo, 0, (hi - lo) * sizeof(float));
    }
}

static void *worker_main(void *arg) {
    worker *w = arg;
    dt_replicas *g = w->g;
    unsigned seen = 0;
    for (;;) {
        pthread_mutex_lock(&g->mu);
        while (!g->stop && g->job_gen == seen) pthread_cond_wait(&g->job_cv, &g->mu);
        int stop = g->stop;
        seen = g->job_gen;
        pthread_mutex_unlock(&g->mu);
        if (stop) return NULL;
        run_part(g, w);
        pthread_mutex_lock(&g->mu);
        g->done++;
        pthread_cond_signal(&g->done_cv);
        pthread_mutex_unlock(&g->mu);
    }
}

/* ---- public ------------------------------------------------------------------------ */

int dt_replicas_count(const dt_replicas *g) { return g ? g->n : 1; }

int dt_replicas_create(const dt_layer_table *t, int n, dt_replicas **out) {
    if (!out) return DT_ERR(DT_ERR_INVALID, "out is NULL");
    *out = NULL;
    if (!t || !t->model) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    if (n < 2) return DT_ERR(DT_ERR_INVALID, "data-parallel threads %d: must be >= 2", n);
    if (!t->replica_create || !t->replica_free || !t->flat_grads || !t->replica_pass || !t->set_hooks ||
        !t->seed_dropout || !t->release_flat || !t->set_layer_params || !t->x_bytes || !t->y_elems)
        return DT_ERR(DT_ERR_INVALID, "the layer table lacks the replica calls (%d replicas)", n);
    const size_t P = t->num_params;
    if (!P || !t->flat_grads(t->model)) return DT_ERR(DT_ERR_INVALID, "model without a flat gradient buffer");
    dt_replicas *g = calloc(1, sizeof *g);
    if (!g) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    g->n = n;
    g->t = t;
    g->P = P;
    g->x_bytes = t->x_bytes;
    g->y_elems = t->y_elems;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->job_cv, NULL);
    pthread_cond_init(&g->done_cv, NULL);
    pthread_cond_init(&g->bar_cv, NULL);
    g->w = calloc((size_t)g->n, sizeof *g->w);
    g->sbuf = calloc((size_t)g->n, sizeof *g->sbuf);
    if (!g->w || !g->sbuf) {
        dt_replicas_free(g);
        return DT_ERR(DT_ERR_NOMEM, "out of memory");
    }
    int rc = DT_OK;
    for (int i = 0; i < g->n && !rc; i++) {
        worker *w = &g->w[i];
        w->g = g;
        w->i = i;
        if (i == 0) { /* the table's model (hooks0 none until dt_replicas_set_hooks) */
            w->m = t->model;
            rc = install0(g);
            continue;
        }
        if ((rc = t->replica_create(t->model, &w->m))) break;
        /* its parameters are replica 0's (its own are released) */
        rc = t->release_flat(w->m, 1, 0);
        for (int l = 0; !rc && l < t->nlayers; l++) {
            if (!t->count[l]) continue;
            if (t->owner[l] != l) continue; /* reads its owner's */
            rc = t->set_layer_params(w->m, l, t->params + t->offset[l]);
        }
        dt_layer_hooks h = {.ctx = w, .sync_stats = th_sync_stats};
        if (!rc) rc = t->set_hooks(w->m, &h);
        if (!rc) {
            g->grad_bytes += (long long)(P * sizeof(float));
            dt_mem_add(DT_MEM_GRADS, (long long)(P * sizeof(float)));
        }
    }
    for (int i = 1; i < g->n && !rc; i++) {
        if (pthread_create(&g->w[i].th, NULL, worker_main, &g->w[i])) {
            rc = DT_ERR(DT_ERR_INTERNAL, "pthread_create failed for data-parallel thread %d of %d", i, g->n);
            break;
        }
        g->w[i].started = 1;
    }
    if (rc) {
        dt_replicas_free(g);
        return rc;
    }
    *out = g;
    return DT_OK;
}

void dt_replicas_free(dt_replicas *g) {
    if (!g) return;
    if (g->w) {
        pthread_mutex_lock(&g->mu);
        g->stop = 1;
        pthread_cond_broadcast(&g->job_cv);
        pthread_mutex_unlock(&g->mu);
        for (int i = 1; i < g->n; i++) {
            if (g->w[i].started) pthread_join(g->w[i].th, NULL);
            if (g->w[i].m) g->t->replica_free(g->w[i].m);
        }
    }
    dt_mem_add(DT_MEM_GRADS, -g->grad_bytes);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->job_cv);
    pthread_cond_destroy(&g->done_cv);
    pthread_cond_destroy(&g->bar_cv);
    free(g->w);
    free(g->sbuf);
    free(g->ssum);
    free(g->sout);
    free(g);
}

int dt_replicas_set_hooks(dt_replicas *g, const dt_layer_hooks *hooks0) {
    if (!g || !hooks0) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    g->hooks0 = *hooks0;
    return install0(g);
}

int dt_replicas_seed_dropout(dt_replicas *g, uint64_t seed) {
    if (!g) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    for (int i = 1; i < g->n; i++) {
        int rc = g->t->seed_dropout(g->w[i].m, seed ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull));
        if (rc) return rc;
    }
    return DT_OK;
}

int dt_replicas_pass(dt_replicas *g, const void *x, const int32_t *y, int B, float scale, float *loss,
                     int *correct) {
    if (!g || !x || !y || !loss || !correct) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    if (B < 1) return DT_ERR(DT_ERR_INVALID, "batch %d: must be >= 1", B);
    float *g0 = g->t->flat_grads(g->w[0].m);
    if (!g0) return DT_ERR(DT_ERR_STATE, "replica 0 has no flat gradient buffer");
    pthread_mutex_lock(&g->mu);
    g->x = x;
    g->y = y;
    g->B = B;
    g->active = B < g->n ? B : g->n;
    g->scale = scale;
    g->g0 = g0;
    g->failed = 0;
    g->done = 0;
    g->sbar.count = g->abar.count = 0;
    g->job_gen++;
    pthread_cond_broadcast(&g->job_cv);
    pthread_mutex_unlock(&g->mu);
    run_part(g, &g->w[0]);
    pthread_mutex_lock(&g->mu);
    while (g->done < g->n - 1) pthread_cond_wait(&g->done_cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    double l = 0;
    int c = 0;
    for (int i = 0; i < g->n; i++) {
        worker *w = &g->w[i];
        if (w->rc < 0) return DT_ERR(w->rc, "data-parallel thread %d of %d: %s", i, g->n, w->msg);
        int off, cnt;
        slice_of(B, g->n, i, &off, &cnt);
        l += (double)w->loss * cnt / B;
        c += w->correct;
    }
    for (int i = 0; i < g->n; i++)
        if (g->w[i].rc) return DT_ERR(DT_ERR_INTERNAL, "data-parallel thread %d of %d stopped without an error", i, g->n);
    *loss = (float)l;
    *correct = c;
    return DT_OK;
}
