/* tests/device/dev_common.h - the collective tests' jobs (tests/coll/
 * coll_common.h) on device memory: each job's host buffers (inputs, guards,
 * junk) are mirrored into device memory whole, the call is made with the
 * mirrored pointers through the _ex forms, and the device buffers are copied
 * back whole before job_verify checks results, guards and unchanged inputs
 * as for host memory. The device memory comes from a dev_alloc: the fake
 * runtime's (tests/device) or CUDA's (tests/gpu). */
#ifndef DT_DEV_COMMON_H
#define DT_DEV_COMMON_H

#include "coll_common.h"

typedef struct dev_alloc {
    void *(*alloc)(size_t bytes);
    void (*release)(void *p);
    void (*h2d)(void *dst, const void *src, size_t n);
    void (*d2h)(void *dst, const void *src, size_t n);
} dev_alloc;

typedef struct dev_job {
    job_t j;
    char *ds, *dr;     /* device mirrors of j.sbuf / j.rbuf */
    size_t sall, rall; /* their sizes, guards included */
} dev_job;

static inline size_t guarded_size(size_t bytes, dt_dtype dt) { return bytes + GUARD * dt_dtype_size(dt) + 1; }

/* the device address of a host argument (inside sbuf or rbuf, or NULL) */
static inline void *dev_of(const dev_job *d, const void *p) {
    const char *q = p;
    if (!q) return NULL;
    if (d->j.sbuf && q >= d->j.sbuf && q <= d->j.sbuf + d->sall) return d->ds + (q - d->j.sbuf);
    if (d->j.rbuf && q >= d->j.rbuf && q <= d->j.rbuf + d->rall) return d->dr + (q - d->j.rbuf);
    fprintf(stderr, "dev_of: %p is in neither buffer\n", p);
    exit(1);
}

/* The _ex call of job j with arguments s, r. */
static inline int job_submit_ex(job_t *j, const void *s, void *r, const dt_coll_opts *o, dt_work **w) {
    dt_comm *c = j->t->comm;
    size_t cnt = j->count;
    switch (j->kind) {
    case J_AR: return dt_allreduce_ex(s, r, cnt, j->dt, j->op, c, o, w);
    case J_AG: return dt_allgather_ex(s, r, cnt, j->dt, c, o, w);
    case J_RS: return dt_reduce_scatter_ex(s, r, cnt * (size_t)j->t->n, j->dt, j->op, c, o, w);
    case J_RED: return dt_reduce_ex(s, r, cnt, j->dt, j->op, j->root, c, o, w);
    case J_BC: return dt_broadcast_ex(s, r, cnt, j->dt, j->root, c, o, w);
    case J_GA: return dt_gather_ex(s, r, cnt, j->dt, j->root, c, o, w);
    case J_SC: return dt_scatter_ex(s, r, cnt, j->dt, j->root, c, o, w);
    case J_A2A: return dt_all_to_all_ex(s, r, cnt, j->dt, c, o, w);
    case J_BAR: return dt_barrier_ex(c, o, w);
    case J_P2P:
        if (j->role == 1) return dt_send_ex(s, cnt, j->dt, j->peer, c, o, w);
        if (j->role == 2) return dt_recv_ex(r, cnt, j->dt, j->root, c, o, w);
        if (w) *w = NULL;
        return DT_OK;
    default: return DT_ERR_INTERNAL;
    }
}

/* Mirror j's buffers into device memory and submit (w NULL: blocking). */
static inline int dev_job_submit(dev_job *d, const dev_alloc *a, const dt_coll_opts *o, dt_work **w) {
    job_t *j = &d->j;
    d->ds = d->dr = NULL;
    d->sall = j->sbuf ? guarded_size(j->sbytes, j->dt) : 0;
    d->rall = j->rbuf ? guarded_size(j->rbytes, j->dt) : 0;
    if (j->sbuf) { d->ds = a->alloc(d->sall); a->h2d(d->ds, j->sbuf, d->sall); }
    if (j->rbuf) { d->dr = a->alloc(d->rall); a->h2d(d->dr, j->rbuf, d->rall); }
    if ((j->sbuf && !d->ds) || (j->rbuf && !d->dr)) { fprintf(stderr, "device allocation failed\n"); exit(1); }
    return job_submit_ex(j, dev_of(d, j->sarg), dev_of(d, j->rarg), o, w);
}

/* Copy the device buffers back over the host ones and release them. */
static inline void dev_job_fetch(dev_job *d, const dev_alloc *a) {
    if (d->ds) { a->d2h(d->j.sbuf, d->ds, d->sall); a->release(d->ds); }
    if (d->dr) { a->d2h(d->j.rbuf, d->dr, d->rall); a->release(d->dr); }
    d->ds = d->dr = NULL;
}

/* Blocking run on device memory + verification; returns 1 on success. */
static inline int run_dev_job(dev_job *d, const dev_alloc *a, const dt_coll_opts *o) {
    int rc = dev_job_submit(d, a, o, NULL);
    dev_job_fetch(d, a);
    int ok = rc == DT_OK;
    CHECK(ok, "%s (device) -> %s: %s", d->j.what, dt_status_str(rc), dt_last_error());
    if (ok) {
        ok = job_verify(&d->j);
        if (ok) dt_test_passed++;
    }
    job_free(&d->j);
    return ok;
}

/* Every single-buffer collective on every communicator of tc (nc of them),
 * dtype and op, in place or not, counts, every root, and point to point:
 * blocking, on device memory with options o. */
static inline void dev_suite(tcomm *tc, int nc, const dev_alloc *a, const dt_coll_opts *o, const size_t *counts,
                             int ncounts) {
    dev_job d;
    for (int c = 0; c < nc; c++) {
        const tcomm *t = &tc[c];
        for (int dt = 0; dt < DT_NUM_DTYPES; dt++)
            for (int ip = 0; ip < 2; ip++)
                for (int k = 0; k < ncounts; k++) {
                    size_t n = counts[k];
                    for (int op = 0; op < DT_NUM_OPS; op++) {
                        job_init(&d.j, J_AR, t, (dt_dtype)dt, (dt_op)op, n, ip, -1, -1, 11);
                        run_dev_job(&d, a, o);
                        job_init(&d.j, J_RS, t, (dt_dtype)dt, (dt_op)op, n, ip, -1, -1, 11);
                        run_dev_job(&d, a, o);
                        for (int m = 0; m < t->n; m++) {
                            job_init(&d.j, J_RED, t, (dt_dtype)dt, (dt_op)op, n, ip, t->mem[m], -1, 11);
                            run_dev_job(&d, a, o);
                        }
                    }
                    job_init(&d.j, J_AG, t, (dt_dtype)dt, DT_SUM, n, ip, -1, -1, 12);
                    run_dev_job(&d, a, o);
                    job_init(&d.j, J_A2A, t, (dt_dtype)dt, DT_SUM, n, ip, -1, -1, 12);
                    run_dev_job(&d, a, o);
                    for (int m = 0; m < t->n; m++) {
                        int root = t->mem[m];
                        job_init(&d.j, J_BC, t, (dt_dtype)dt, DT_SUM, n, ip, root, -1, 13);
                        run_dev_job(&d, a, o);
                        job_init(&d.j, J_GA, t, (dt_dtype)dt, DT_SUM, n, ip, root, -1, 13);
                        run_dev_job(&d, a, o);
                        job_init(&d.j, J_SC, t, (dt_dtype)dt, DT_SUM, n, ip, root, -1, 13);
                        run_dev_job(&d, a, o);
                    }
                }
        /* point to point between every ordered pair of the group (others sit out) */
        for (int s = 0; s < t->n && t->n > 1; s++)
            for (int r = 0; r < t->n; r++) {
                if (s == r) continue;
                job_init(&d.j, J_P2P, t, DT_F32, DT_SUM, 33, 0, t->mem[s], t->mem[r], 14);
                if (job_active(&d.j)) run_dev_job(&d, a, o);
                else job_free(&d.j);
            }
        job_init(&d.j, J_BAR, t, DT_F32, DT_SUM, 0, 0, -1, -1, 15);
        dt_coll_opts bo = *o;
        bo.mem = DT_MEM_DEVICE; /* a barrier has no buffers to say so */
        run_dev_job(&d, a, &bo);
    }
}

#endif
