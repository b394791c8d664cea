/* DDP wrapper on synthetic segments: initial broadcast, bucket layout, averaged
 * gradients (contiguous views and scattered tensors), ordered flush of buckets
 * that never completed, no_sync accumulation, overlap on/off equivalence,
 * buffer broadcast, finish_each (per-bucket completion callbacks), error paths. Values are small integers / powers of two so
 * every expected average is exact. Compressed buckets (cfg.wire bf16 / f16,
 * the config's grad_comm_dtype): values that do not fit 16 bits, every
 * average within coll.h's allreduce bound of the float64 one and the same
 * bits on every rank; an unknown wire refused. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include "dtrain/coll.h"
#include "dtrain/ddp.h"
#include "comm/comm_internal.h" /* dt_fnv1a */
#include "testutil.h"

#define NSEG 6
static const size_t counts[NSEG] = {300, 7, 70000, 1, 40000, 513};

static float grad_val(int rank, int seg, size_t i) { return (float)((rank + 1) * 4 + seg + (int)(i % 3)); }

/* average over ranks 0..n-1 of grad_val */
static float avg_val(int n, int seg, size_t i) {
    float s = 0;
    for (int r = 0; r < n; r++) s += grad_val(r, seg, i);
    return s / (float)n;
}

static int check_avg(const dt_ddp_segment *segs, int n, float scale, const char *what) {
    int bad = 0;
    for (int s = 0; s < NSEG; s++)
        for (size_t i = 0; i < segs[s].count; i++)
            if (segs[s].grad[i] != scale * avg_val(n, s, i)) { bad++; break; }
    CHECK(bad == 0, "%s: %d segments with wrong averaged gradients", what, bad);
    return bad;
}

static void fill_grads(dt_ddp_segment *segs, int rank, float add) {
    for (int s = 0; s < NSEG; s++)
        for (size_t i = 0; i < segs[s].count; i++) segs[s].grad[i] = add * segs[s].grad[i] + grad_val(rank, s, i);
}

static void run_step(dt_ddp *d, dt_ddp_segment *segs, int rank, int skip) {
    CHECK_OK(dt_ddp_begin_step(d));
    for (int s = NSEG - 1; s >= 0; s--) { /* backward order */
        for (size_t i = 0; i < segs[s].count; i++) segs[s].grad[i] = grad_val(rank, s, i);
        if (s != skip) CHECK_OK(dt_ddp_grad_ready(d, s));
    }
    CHECK_OK(dt_ddp_finish(d));
}

/* Gradients that 16-bit floats cannot hold: mixed signs and scales. */
static float wire_val(int rank, int seg, size_t i) {
    unsigned h = (unsigned)(rank * 7919 + seg * 104729) ^ (unsigned)(i * 2654435761u);
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    return ((float)(h % 20001) - 10000.0f) / 997.0f * (1.0f + (float)(i % 5) / 3.0f);
}

/* cfg.wire: average of wire_val over the ranks within coll.h's allreduce
 * bound ((1+u)^(L+1) - 1 + P 2^-23) sum_r |x_r| / P (L = ceil(log2 P): the
 * flat path's levels, at least the two-level path's), the same bits on every
 * rank (a hash of the result, min and max over the group). */
static void test_wire(dt_comm *w, dt_ddp_segment *segs, int rank, int n, int wire) {
    const char *wn = wire == DT_WIRE_BF16 ? "bf16" : "f16";
    double u = wire == DT_WIRE_BF16 ? 0x1p-8 : 0x1p-11;
    int L = 0;
    while ((1 << L) < n) L++;
    double rel = pow(1 + u, L + 1) - 1 + n * 0x1p-23;
    size_t caps[2] = {0, 200000};
    for (int c = 0; c < 2; c++) {
        dt_ddp_config cfg;
        dt_ddp_config_default(&cfg);
        cfg.bucket_cap_bytes = caps[c];
        cfg.first_bucket_bytes = caps[c] / 2;
        cfg.wire = wire;
        dt_ddp *d = NULL;
        CHECK_OK(dt_ddp_create(w, segs, NSEG, NULL, 0, &cfg, &d));
        if (!d) continue;
        CHECK_OK(dt_ddp_begin_step(d));
        for (int s = NSEG - 1; s >= 0; s--) {
            for (size_t i = 0; i < segs[s].count; i++) segs[s].grad[i] = wire_val(rank, s, i);
            CHECK_OK(dt_ddp_grad_ready(d, s));
        }
        CHECK_OK(dt_ddp_finish(d));
        dt_ddp_free(d);
        long long bad = 0;
        uint64_t h = DT_FNV_BASIS;
        double worst = 0;
        for (int s = 0; s < NSEG; s++)
            for (size_t i = 0; i < segs[s].count; i++) {
                double exact = 0, mag = 0;
                for (int r = 0; r < n; r++) { exact += wire_val(r, s, i); mag += fabs(wire_val(r, s, i)); }
                exact /= n;
                mag /= n;
                double err = fabs(segs[s].grad[i] - exact);
                if (!(err <= rel * mag)) bad++;
                if (mag > 0 && err / mag > worst) worst = err / mag;
                h = dt_fnv1a(h, &segs[s].grad[i], sizeof(float));
            }
        CHECK(bad == 0, "wire %s, cap %zu: %lld averages outside the bound %.3g (worst %.3g of sum |x|/P)", wn, caps[c],
              bad, rel, worst);
        CHECK(dt_test_same_on_all(h, w) == 1, "wire %s, cap %zu: the averaged gradients differ across ranks (or %s)", wn,
              caps[c], dt_last_error());
        /* one bucket per segment: the small ones travel in messages (below the
         * window's threshold), so some average must show the wire's rounding,
         * far above f32's own (at most P 2^-23) */
        if (c == 0 && n > 1)
            CHECK(worst > 8 * n * 0x1p-23, "wire %s: every average within f32 rounding (worst %.3g), as if nothing was compressed",
                  wn, worst);
        if (rank == 0 && c == 0) printf("ddp wire %s at %d ranks: worst error %.3g of sum|x|/P (bound %.3g)\n", wn, n, worst, rel);
    }
}

/* dt_ddp_finish_each: which buckets were reported, in what order, and whether
 * each bucket's gradients were already averaged when it was */
typedef struct each_log {
    int calls, next_last, covered[NSEG], averaged, stop_at;
    const dt_ddp_segment *segs;
    int n;
} each_log;

static int on_bucket(void *user, int first, int last) {
    each_log *l = user;
    l->calls++;
    if (last != l->next_last) l->next_last = -100; /* out of order */
    else l->next_last = first - 1;
    for (int s = first; s <= last; s++) {
        l->covered[s]++;
        for (size_t i = 0; i < l->segs[s].count; i += 97)
            if (l->segs[s].grad[i] != avg_val(l->n, s, i)) { l->averaged = 0; break; }
    }
    return l->calls == l->stop_at ? DT_ERR_INTERNAL : DT_OK;
}

static void test_finish_each(dt_ddp *d, const dt_ddp_segment *segs, int rank, int n) {
    for (int stop = 0; stop < 2; stop++) {
        each_log l = {.next_last = NSEG - 1, .averaged = 1, .stop_at = stop ? 1 : -1, .segs = segs, .n = n};
        CHECK_OK(dt_ddp_begin_step(d));
        for (int s = NSEG - 1; s >= 0; s--) {
            for (size_t i = 0; i < segs[s].count; i++) segs[s].grad[i] = grad_val(rank, s, i);
            CHECK_OK(dt_ddp_grad_ready(d, s));
        }
        int rc = dt_ddp_finish_each(d, on_bucket, &l);
        if (stop) {
            CHECK(rc == DT_ERR_INTERNAL && l.calls == 1, "finish_each: the callback's error stops the calls (rc %d, %d calls)", rc, l.calls);
            check_avg(segs, n, 1.0f, "finish_each after a stopped callback");
            continue;
        }
        CHECK_OK(rc);
        CHECK(l.calls == dt_ddp_num_buckets(d) && l.next_last == -1, "finish_each: %d calls for %d buckets, order %s",
              l.calls, dt_ddp_num_buckets(d), l.next_last == -1 ? "ok" : "wrong");
        int once = 1;
        for (int s = 0; s < NSEG; s++) once &= l.covered[s] == 1;
        CHECK(once, "finish_each: every segment reported exactly once");
        CHECK(l.averaged, "finish_each: a bucket was reported before its gradients were averaged");
    }
    /* no_sync: nothing reduced, no calls */
    each_log l = {.next_last = NSEG - 1, .averaged = 1, .stop_at = -1, .segs = segs, .n = n};
    CHECK_OK(dt_ddp_set_grad_sync(d, 0));
    CHECK_OK(dt_ddp_begin_step(d));
    for (int s = NSEG - 1; s >= 0; s--) CHECK_OK(dt_ddp_grad_ready(d, s));
    CHECK_OK(dt_ddp_finish_each(d, on_bucket, &l));
    CHECK(l.calls == 0, "finish_each under no_sync called back %d times", l.calls);
    CHECK_OK(dt_ddp_set_grad_sync(d, 1));
    CHECK_ERR(dt_ddp_finish_each(d, on_bucket, &l), DT_ERR_STATE, "outside a step");
    CHECK_ERR(dt_ddp_finish_each(NULL, on_bucket, &l), DT_ERR_INVALID, "NULL");
}

int main(void) {
    CHECK_OK(dt_init());
    dt_comm *w = dt_comm_world();
    int rank = dt_comm_rank(w), n = dt_comm_size(w);
    dt_test_rank = rank;

    size_t total = 0;
    for (int s = 0; s < NSEG; s++) total += counts[s];
    float *params = malloc(total * sizeof(float)), *grads = malloc(total * sizeof(float));
    float bn[4] = {(float)rank, (float)rank, 1, 2};
    dt_ddp_segment flat[NSEG], scattered[NSEG];
    size_t off = 0;
    for (int s = 0; s < NSEG; s++) {
        flat[s] = (dt_ddp_segment){params + off, grads + off, counts[s]};
        scattered[s] = (dt_ddp_segment){malloc(counts[s] * 4), malloc(counts[s] * 4), counts[s]};
        for (size_t i = 0; i < counts[s]; i++) { params[off + i] = (float)(rank * 1000 + (int)i % 17); scattered[s].param[i] = (float)rank; }
        off += counts[s];
    }
    dt_ddp_buffer buf = {bn, 4};

    /* defaults: first bucket >= 1 MiB, later 25 MiB */
    dt_ddp *d = NULL;
    CHECK_OK(dt_ddp_create(w, flat, NSEG, &buf, 1, NULL, &d));
    int bad = 0;
    off = 0;
    for (int s = 0; s < NSEG; s++, off += counts[s - 1])
        for (size_t i = 0; i < counts[s]; i++) bad += params[off + i] != (float)((int)i % 17);
    CHECK(bad == 0, "parameters not broadcast from rank 0 (%d wrong)", bad);
    CHECK(bn[0] == 0 && bn[1] == 0, "buffers not broadcast at creation");
    int nb = dt_ddp_num_buckets(d);
    CHECK(nb == 1, "default caps: 110821 floats = 443 KB fit in one bucket, got %d", nb);
    run_step(d, flat, rank, -1);
    check_avg(flat, n, 1.0f, "flat default");
    bn[0] = rank == 0 ? 42.0f : -1.0f;
    CHECK_OK(dt_ddp_begin_step(d));
    CHECK(bn[0] == 42, "buffers re-broadcast from root at begin_step (got %g)", bn[0]);
    CHECK_ERR(dt_ddp_begin_step(d), DT_ERR_STATE, "twice");
    CHECK_ERR(dt_ddp_grad_ready(d, NSEG), DT_ERR_INVALID, "out of range");
    CHECK_OK(dt_ddp_grad_ready(d, 2));
    CHECK_ERR(dt_ddp_grad_ready(d, 2), DT_ERR_STATE, "twice");
    CHECK_OK(dt_ddp_finish(d));
    CHECK_ERR(dt_ddp_finish(d), DT_ERR_STATE, "outside a step");
    dt_ddp_free(d);

    /* small caps: several buckets; overlap on and off; one bucket per segment */
    size_t caps[3] = {0, 4096, 200000};
    for (int c = 0; c < 3; c++) {
        for (int ov = 0; ov < 2; ov++) {
            dt_ddp_config cfg;
            dt_ddp_config_default(&cfg);
            cfg.bucket_cap_bytes = caps[c];
            cfg.first_bucket_bytes = caps[c] / 2;
            cfg.overlap = ov;
            CHECK_OK(dt_ddp_create(w, c == 1 ? scattered : flat, NSEG, NULL, 0, &cfg, &d));
            int nbk = dt_ddp_num_buckets(d), covered = 0, prev_first = NSEG;
            for (int b = 0; b < nbk; b++) {
                int f, l; size_t bytes;
                CHECK_OK(dt_ddp_bucket_info(d, b, &f, &l, &bytes));
                CHECK(l == prev_first - 1, "bucket %d must continue in reverse order (last %d, expected %d)", b, l, prev_first - 1);
                covered += l - f + 1;
                prev_first = f;
            }
            CHECK(covered == NSEG, "buckets cover %d of %d segments", covered, NSEG);
            if (caps[c] == 0) CHECK(nbk == NSEG, "cap 0: one bucket per segment, got %d", nbk);
            run_step(d, c == 1 ? scattered : flat, rank, -1);
            check_avg(c == 1 ? scattered : flat, n, 1.0f, "caps/overlap");
            /* a segment that never reports ready: flushed at finish, still averaged */
            run_step(d, c == 1 ? scattered : flat, rank, 3);
            check_avg(c == 1 ? scattered : flat, n, 1.0f, "unready segment flushed");
            dt_ddp_free(d);
        }
    }

    /* no_sync: two accumulation steps without communication, then a synced one */
    CHECK_OK(dt_ddp_create(w, flat, NSEG, NULL, 0, NULL, &d));
    CHECK_OK(dt_ddp_set_grad_sync(d, 0));
    for (int s = 0; s < NSEG; s++)
        for (size_t i = 0; i < counts[s]; i++) flat[s].grad[i] = 0;
    for (int k = 0; k < 3; k++) {
        if (k == 2) CHECK_OK(dt_ddp_set_grad_sync(d, 1));
        CHECK_OK(dt_ddp_begin_step(d));
        if (k == 0) CHECK_ERR(dt_ddp_set_grad_sync(d, 1), DT_ERR_STATE, "middle of a step");
        fill_grads(flat, rank, 1.0f);
        for (int s = NSEG - 1; s >= 0; s--) CHECK_OK(dt_ddp_grad_ready(d, s));
        if (k < 2) {
            /* still local: equals (k+1) * own value */
            CHECK(flat[2].grad[5] == (float)(k + 1) * grad_val(rank, 2, 5), "no_sync step %d communicated", k);
        }
        CHECK_OK(dt_ddp_finish(d));
    }
    check_avg(flat, n, 3.0f, "no_sync accumulation");
    dt_ddp_free(d);

    /* finish_each over 3 buckets (64 KiB caps) */
    dt_ddp_config c64;
    dt_ddp_config_default(&c64);
    c64.bucket_cap_bytes = (size_t)64 << 10;
    c64.first_bucket_bytes = 0;
    CHECK_OK(dt_ddp_create(w, flat, NSEG, NULL, 0, &c64, &d));
    if (d) {
        CHECK(dt_ddp_num_buckets(d) == 3, "64 KiB caps: %d buckets, want 3", dt_ddp_num_buckets(d));
        test_finish_each(d, flat, rank, n);
        dt_ddp_free(d);
    }

    /* compressed buckets */
    test_wire(w, flat, rank, n, DT_WIRE_BF16);
    test_wire(w, scattered, rank, n, DT_WIRE_F16);

    /* errors */
    CHECK_ERR(dt_ddp_create(w, NULL, 0, NULL, 0, NULL, &d), DT_ERR_INVALID, "at least one segment");
    dt_ddp_segment badseg = {NULL, grads, 5};
    CHECK_ERR(dt_ddp_create(w, &badseg, 1, NULL, 0, NULL, &d), DT_ERR_INVALID, "NULL param");
    dt_ddp_config cfg;
    dt_ddp_config_default(&cfg);
    cfg.root = n + 3;
    CHECK_ERR(dt_ddp_create(w, flat, NSEG, NULL, 0, &cfg, &d), DT_ERR_INVALID, "not a member");
    dt_ddp_config_default(&cfg);
    cfg.wire = 7;
    CHECK_ERR(dt_ddp_create(w, flat, NSEG, NULL, 0, &cfg, &d), DT_ERR_INVALID, "unknown gradient wire type 7");
    CHECK_ERR(dt_ddp_grad_ready(NULL, 0), DT_ERR_INVALID, "NULL");
    /* ranks describing different models are caught, on every rank */
    if (n > 1) CHECK_ERR(dt_ddp_create(w, flat, rank == 0 ? NSEG : NSEG - 1, NULL, 0, NULL, &d), DT_ERR_MISMATCH, "different models");

    for (int s = 0; s < NSEG; s++) { free(scattered[s].param); free(scattered[s].grad); }
    free(params);
    free(grads);
    CHECK_OK(dt_finalize());
    return dt_test_finish("parallel_ddp");
}
