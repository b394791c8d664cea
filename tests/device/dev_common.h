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

/* Tensors packed in one allocation start at multiples of 16 bytes, as an
 * allocator would place them: NCCL's kernels load whole elements, so a device
 * tensor must be aligned to its element size (coll.h, "Device memory"). */
static inline size_t pad16(size_t bytes) { return (bytes + 15) & ~(size_t)15; }

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

/* allreduce_list, allgather_list, reduce_scatter_fused over tensors in one
 * device buffer (back to back, as DDP buckets) and scattered ones, mixed
 * dtypes; reduce_scatter_per_rank contiguous, in place and scattered. */
static inline void dev_lists(const tcomm *t, const dev_alloc *a, const dt_coll_opts *o) {
    enum { NT = 5 };
    static const dt_dtype dts[NT] = {DT_F32, DT_F32, DT_I32, DT_F16, DT_F32};
    static const size_t cnt[NT] = {7, 0, 33, 5, 100};
    size_t n = (size_t)t->n, g = (size_t)t->grank;
    for (int which = 0; which < 3; which++)
        for (int packed = 0; packed < 2; packed++) {
            dt_tensor in[NT], out[NT];
            char *hin[NT], *hout[NT], *din[NT], *dout[NT];
            char *pool_in = NULL, *pool_out = NULL;
            size_t off_in = 0, off_out = 0, need_in = 0, need_out = 0;
            for (int i = 0; i < NT; i++) {
                size_t es = dt_dtype_size(dts[i]);
                need_in += pad16((which == 2 ? n : 1) * cnt[i] * es);
                need_out += pad16((which == 1 ? n : 1) * cnt[i] * es);
            }
            if (packed) { pool_in = a->alloc(need_in); pool_out = a->alloc(need_out); }
            for (int i = 0; i < NT; i++) {
                size_t es = dt_dtype_size(dts[i]);
                size_t ic = (which == 2 ? n : 1) * cnt[i], oc = (which == 1 ? n : 1) * cnt[i];
                hin[i] = calloc(ic * es + 1, 1);
                hout[i] = calloc(oc * es + 1, 1);
                dt_op op = which == 1 ? DT_SUM : DT_MAX;
                gen_buf(dts[i], which == 1 ? GEN_RAW : gen_for(op), ME, 0, ic, (uint64_t)(i + 1) * 77, hin[i]);
                din[i] = packed ? pool_in + off_in : a->alloc(ic * es);
                dout[i] = packed ? pool_out + off_out : a->alloc(oc * es);
                off_in += pad16(ic * es);
                off_out += pad16(oc * es);
                a->h2d(din[i], hin[i], ic * es);
                in[i] = (dt_tensor){din[i], ic, dts[i]};
                out[i] = (dt_tensor){dout[i], oc, dts[i]};
            }
            int rc = which == 0 ? dt_allreduce_list_ex(in, out, NT, DT_MAX, t->comm, o, NULL)
                   : which == 1 ? dt_allgather_list_ex(in, out, NT, t->comm, o, NULL)
                                : dt_reduce_scatter_fused_ex(in, out, NT, DT_MAX, t->comm, o, NULL);
            CHECK(rc == DT_OK, "list %d packed %d on %s: %s", which, packed, t->name, dt_last_error());
            for (int i = 0; rc == DT_OK && i < NT; i++) {
                size_t es = dt_dtype_size(dts[i]), c = cnt[i];
                size_t oc = (which == 1 ? n : 1) * c;
                char *want = malloc(oc * es + 1), what[160];
                if (which == 1)
                    for (size_t k = 0; k < n; k++)
                        gen_buf(dts[i], GEN_RAW, t->mem[k], 0, c, (uint64_t)(i + 1) * 77, want + k * c * es);
                else
                    expect_reduce(dts[i], DT_MAX, t, which == 2 ? g * c : 0, c, (uint64_t)(i + 1) * 77, want);
                snprintf(what, sizeof what, "list %d packed %d on %.60s tensor %d", which, packed, t->name, i);
                a->d2h(hout[i], dout[i], oc * es);
                same_elems(what, dts[i], hout[i], want, oc);
                free(want);
            }
            for (int i = 0; i < NT; i++) {
                free(hin[i]);
                free(hout[i]);
                if (!packed) { a->release(din[i]); a->release(dout[i]); }
            }
            if (packed) { a->release(pool_in); a->release(pool_out); }
        }
    /* one tensor per rank: back to back, in place, scattered */
    for (int mode = 0; mode < 3; mode++) {
        size_t c = 9, es = 4;
        char *block = a->alloc(n * c * es), *host = malloc(c * es);
        dt_tensor in[64], out;
        for (size_t k = 0; k < n; k++) {
            char *p = mode == 2 ? a->alloc(c * es) : block + k * c * es;
            gen_buf(DT_F32, GEN_SUM, ME, k * c, c, 501, host);
            a->h2d(p, host, c * es);
            in[k] = (dt_tensor){p, c, DT_F32};
        }
        char *res = mode == 1 ? in[g].data : a->alloc(c * es);
        out = (dt_tensor){res, c, DT_F32};
        int rc = dt_reduce_scatter_per_rank_ex(in, (int)n, &out, DT_SUM, t->comm, o, NULL);
        CHECK(rc == DT_OK, "per_rank mode %d on %s: %s", mode, t->name, dt_last_error());
        float want[9];
        expect_reduce(DT_F32, DT_SUM, t, g * c, c, 501, want);
        char what[96];
        snprintf(what, sizeof what, "per_rank mode %d on %.60s", mode, t->name);
        a->d2h(host, res, c * es);
        if (rc == DT_OK) same_elems(what, DT_F32, host, want, c);
        if (mode == 2) for (size_t k = 0; k < n; k++) a->release(in[k].data);
        if (mode != 1) a->release(res);
        a->release(block);
        free(host);
    }
}


#endif
