/* tests/data/test_sampler.c - distributed sampler and batch iterator.
 * Partition logic vs PyTorch's DistributedSampler (expected lists below were
 * printed by /usr/bin/python3 with torch 1.13:
 *   list(DistributedSampler(range(n), num_replicas=R, rank=r, shuffle=False,
 *                           drop_last=dl)) for r in range(R)),
 * and the shuffled case checked structurally (our RNG differs from torch's). */
#include <stdlib.h>
#include <string.h>

#include "dtrain/data.h"
#include "testutil.h"

static int64_t *rank_indices(int64_t n, int R, int r, int shuffle, int dl, uint64_t seed,
                             uint64_t epoch, int64_t *m) {
    dt_sampler s;
    *m = 0;
    if (dt_sampler_init(&s, n, R, r, shuffle, dl, seed) != DT_OK) return NULL;
    dt_sampler_set_epoch(&s, epoch);
    *m = dt_sampler_num_samples(&s);
    int64_t *out = malloc((size_t)(*m > 0 ? *m : 1) * sizeof *out);
    if (out && dt_sampler_indices(&s, out) != DT_OK) {
        free(out);
        return NULL;
    }
    return out;
}

static void test_torch_partition(void) {
    static const struct {
        int64_t n;
        int R, dl;
        int64_t want[5][3];
        int64_t m;
    } cases[] = {
        {10, 4, 0, {{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}}, 3},
        {10, 4, 1, {{0, 4}, {1, 5}, {2, 6}, {3, 7}}, 2},
        {3, 5, 0, {{0}, {1}, {2}, {0}, {1}}, 1},
        {7, 3, 0, {{0, 3, 6}, {1, 4, 0}, {2, 5, 1}}, 3},
        {7, 3, 1, {{0, 3}, {1, 4}, {2, 5}}, 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int r = 0; r < cases[c].R; r++) {
            int64_t m = 0;
            int64_t *got = rank_indices(cases[c].n, cases[c].R, r, 0, cases[c].dl, 1, 0, &m);
            int ok = got && m == cases[c].m;
            for (int64_t k = 0; ok && k < m; k++) ok = got[k] == cases[c].want[r][k];
            CHECK(ok, "torch partition n=%lld R=%d drop_last=%d rank %d", (long long)cases[c].n,
                  cases[c].R, cases[c].dl, r);
            free(got);
        }
    }
}

/* Simulated ranks with independent sampler instances: rank r's k-th index must
 * be P[(r + k R) mod n] where P is the permutation (the R = 1 sampler). */
static void test_shuffled(int64_t n, int R, int dl, uint64_t seed, uint64_t epoch) {
    int64_t mp = 0;
    int64_t *perm = rank_indices(n, 1, 0, 1, 0, seed, epoch, &mp);
    CHECK(perm && mp == n, "R=1 sampler gives all %lld indices", (long long)n);
    if (!perm) return;
    /* P is a permutation of [0, n) */
    char *seen = calloc((size_t)n, 1);
    int perm_ok = seen != NULL;
    for (int64_t i = 0; perm_ok && i < n; i++) {
        perm_ok = perm[i] >= 0 && perm[i] < n && !seen[perm[i]];
        if (perm_ok) seen[perm[i]] = 1;
    }
    CHECK(perm_ok, "epoch permutation is a permutation (n=%lld)", (long long)n);
    const int64_t m = dl ? n / R : (n + R - 1) / R, total = m * R;
    int64_t *count = calloc((size_t)n, sizeof *count);
    int stride_ok = 1, all_m = 1;
    for (int r = 0; r < R; r++) {
        int64_t mr = 0;
        int64_t *ix = rank_indices(n, R, r, 1, dl, seed, epoch, &mr);
        all_m &= ix != NULL && mr == m;
        for (int64_t k = 0; ix && k < mr; k++) {
            stride_ok &= ix[k] == perm[(r + k * R) % n];
            if (count && ix[k] >= 0 && ix[k] < n) count[ix[k]]++;
        }
        free(ix);
    }
    CHECK(all_m, "n=%lld R=%d dl=%d: every rank gets %lld", (long long)n, R, dl, (long long)m);
    CHECK(stride_ok, "n=%lld R=%d dl=%d: rank r takes P[r], P[r+R], ... (wrapped)", (long long)n,
          R, dl);
    /* coverage: drop_last 0 covers every index, total - n of them twice (more
     * when n < R); drop_last 1 gives disjoint parts and drops n - total */
    int64_t covered = 0, dup = 0, sum = 0;
    for (int64_t i = 0; count && i < n; i++) {
        covered += count[i] > 0;
        dup += count[i] > 1 ? count[i] - 1 : 0;
        sum += count[i];
    }
    CHECK(sum == total, "total handed out %lld == %lld", (long long)sum, (long long)total);
    if (dl) {
        CHECK(dup == 0 && covered == total, "drop_last parts are disjoint (n=%lld R=%d)",
              (long long)n, R);
        /* the dropped ones are the tail of the permutation */
        int tail_ok = 1;
        for (int64_t p = total; p < n; p++) tail_ok &= count[perm[p]] == 0;
        CHECK(tail_ok, "drop_last drops the permutation's tail");
    } else {
        CHECK(covered == n && dup == total - n, "parts cover [0,n) with %lld padded repeats "
              "(n=%lld R=%d): covered %lld dup %lld", (long long)(total - n), (long long)n, R,
              (long long)covered, (long long)dup);
        int pad_ok = 1; /* padded repeats are the permutation's head */
        for (int64_t p = n; p < total; p++) pad_ok &= count[perm[p % n]] >= 2;
        CHECK(pad_ok, "padding wraps to the permutation's head");
    }
    free(count);
    free(seen);
    free(perm);
}

static void test_epochs_and_seeds(void) {
    int64_t m1, m2, m3, m4;
    int64_t *a = rank_indices(1000, 1, 0, 1, 0, 42, 0, &m1);
    int64_t *b = rank_indices(1000, 1, 0, 1, 0, 42, 0, &m2);
    int64_t *c = rank_indices(1000, 1, 0, 1, 0, 42, 1, &m3);
    int64_t *d = rank_indices(1000, 1, 0, 1, 0, 43, 0, &m4);
    CHECK(a && b && c && d, "samplers");
    if (a && b && c && d) {
        CHECK(memcmp(a, b, 1000 * sizeof *a) == 0, "same seed and epoch: same order");
        CHECK(memcmp(a, c, 1000 * sizeof *a) != 0, "different epochs: different orders");
        CHECK(memcmp(a, d, 1000 * sizeof *a) != 0, "different seeds: different orders");
        int identity = 1;
        for (int i = 0; i < 1000; i++) identity &= a[i] == i;
        CHECK(!identity, "shuffled order is not the identity");
    }
    free(a); free(b); free(c); free(d);
    int64_t m;
    int64_t *e = rank_indices(100, 1, 0, 0, 0, 42, 5, &m);
    int ok = e && m == 100;
    for (int i = 0; ok && i < 100; i++) ok = e[i] == i;
    CHECK(ok, "shuffle=0: identity order in every epoch");
    free(e);
}

static void test_validation(void) {
    dt_sampler s;
    CHECK_ERR(dt_sampler_init(&s, 0, 1, 0, 1, 0, 1), DT_ERR_INVALID, "n=0 must be >= 1");
    CHECK_ERR(dt_sampler_init(&s, 10, 0, 0, 1, 0, 1), DT_ERR_INVALID, "num_replicas=0");
    CHECK_ERR(dt_sampler_init(&s, 10, 4, 4, 1, 0, 1), DT_ERR_INVALID,
              "rank=4 is outside [0, num_replicas=4)");
    CHECK_ERR(dt_sampler_init(&s, 10, 4, -1, 1, 0, 1), DT_ERR_INVALID, "rank=-1");
    CHECK_ERR(dt_sampler_init(&s, 3, 4, 0, 1, 1, 1), DT_ERR_INVALID,
              "drop_last with n=3 < num_replicas=4");
    CHECK_ERR(dt_sampler_init(&s, 10, 4, 0, 2, 0, 1), DT_ERR_INVALID, "shuffle=2");
    CHECK_ERR(dt_sampler_init(NULL, 10, 4, 0, 1, 0, 1), DT_ERR_INVALID, "NULL");
    CHECK_OK(dt_sampler_init(&s, 3, 4, 3, 1, 0, 1)); /* n < R without drop_last: padding */
    CHECK(dt_sampler_num_samples(&s) == 1 && s.total_size == 4, "n=3 R=4: 1 each");
    CHECK_ERR(dt_sampler_indices(&s, NULL), DT_ERR_INVALID, "NULL");
    CHECK(dt_sampler_num_samples(NULL) < 0, "num_samples(NULL)");
    CHECK_OK(dt_sampler_init(&s, 60000, 7, 6, 1, 1, 1));
    CHECK(dt_sampler_num_samples(&s) == 8571 && s.total_size == 59997, "60000 / 7 drop_last");
    CHECK_OK(dt_sampler_init(&s, 60000, 7, 6, 1, 0, 1));
    CHECK(dt_sampler_num_samples(&s) == 8572 && s.total_size == 60004, "60000 / 7 padded");
}

static void test_batch_iter(void) {
    dt_sampler s;
    dt_batch_iter it;
    const int64_t *ix = NULL;
    int B = -1;
    CHECK_OK(dt_sampler_init(&s, 10, 1, 0, 1, 0, 7));
    int64_t all[10];
    CHECK_OK(dt_sampler_indices(&s, all));

    CHECK_OK(dt_batch_iter_init(&it, &s, 4, 0));
    CHECK(dt_batch_iter_num_batches(&it) == 3, "10 / 4 -> 3 batches");
    int sizes[4] = {0}, nb = 0, same = 1;
    int64_t pos = 0;
    while (dt_batch_iter_next(&it, &ix, &B) == 1 && nb < 4) {
        sizes[nb++] = B;
        for (int b = 0; b < B; b++) same &= ix[b] == all[pos++];
    }
    CHECK(nb == 3 && sizes[0] == 4 && sizes[1] == 4 && sizes[2] == 2 && same,
          "batches 4,4,2 in sampler order (got %d batches)", nb);
    CHECK(dt_batch_iter_next(&it, &ix, &B) == 0 && B == 0 && ix == NULL, "stays at end");

    /* next epoch */
    dt_sampler_set_epoch(&s, 1);
    CHECK_OK(dt_batch_iter_reset(&it, &s));
    CHECK(dt_batch_iter_next(&it, &ix, &B) == 1 && B == 4, "reset rewinds");
    int64_t e1[10];
    CHECK_OK(dt_sampler_indices(&s, e1));
    CHECK(memcmp(ix, e1, 4 * sizeof *ix) == 0 && memcmp(e1, all, sizeof all) != 0,
          "reset takes the new epoch's order");
    dt_sampler other; /* an epoch longer than the iterator has room for: it grows */
    CHECK_OK(dt_sampler_init(&other, 11, 1, 0, 1, 0, 7));
    CHECK_OK(dt_batch_iter_reset(&it, &other));
    CHECK(dt_batch_iter_num_batches(&it) == 3 && it.count == 11, "reset to 11 indices");
    dt_batch_iter_free(&it);
    CHECK(it.indices == NULL, "free zeroes");
    dt_batch_iter_free(&it);

    CHECK_OK(dt_batch_iter_init(&it, &s, 4, 1));
    CHECK(dt_batch_iter_num_batches(&it) == 2, "drop_last: 2 batches");
    nb = 0;
    while (dt_batch_iter_next(&it, &ix, &B) == 1) {
        nb++;
        CHECK(B == 4, "full batches only");
    }
    CHECK(nb == 2, "drop_last drops the partial batch");
    dt_batch_iter_free(&it);

    CHECK_OK(dt_batch_iter_init(&it, &s, 100, 0));
    CHECK(dt_batch_iter_num_batches(&it) == 1 && dt_batch_iter_next(&it, &ix, &B) == 1 && B == 10,
          "one short batch");
    dt_batch_iter_free(&it);
    CHECK_OK(dt_batch_iter_init(&it, &s, 100, 1));
    CHECK(dt_batch_iter_num_batches(&it) == 0 && dt_batch_iter_next(&it, &ix, &B) == 0,
          "no batch with drop_last");
    dt_batch_iter_free(&it);

    /* data parallel: 3 ranks, n = 10 -> 4 each (padded), B = 3 -> 2 batches each */
    for (int r = 0; r < 3; r++) {
        CHECK_OK(dt_sampler_init(&s, 10, 3, r, 1, 0, 9));
        CHECK_OK(dt_batch_iter_init(&it, &s, 3, 0));
        CHECK(dt_batch_iter_num_batches(&it) == 2, "rank %d: 2 batches", r);
        dt_batch_iter_free(&it);
    }
    CHECK_ERR(dt_batch_iter_init(&it, &s, 0, 0), DT_ERR_INVALID, "batch_size=0");
    CHECK_ERR(dt_batch_iter_init(&it, &s, 2, 3), DT_ERR_INVALID, "drop_last=3");
    CHECK_ERR(dt_batch_iter_next(NULL, &ix, &B), DT_ERR_INVALID, "NULL");
}

/* ---- epochs interrupted and resumed in another layout ---------------------------- */

/* The batches of one rank for the current epoch of s, as the trainer takes
 * them: whole optimizer steps of `accum` micro-batches of B, `steps` of them
 * (all that fit if steps < 0). Appends the indices to seen[] (counts per
 * sample) and, if seq, to seq[*nseq]; returns the number of indices taken. */
static int64_t take(const dt_sampler *s, int B, int accum, long steps, int *seen, int64_t *seq, int64_t *nseq) {
    dt_batch_iter it;
    if (dt_batch_iter_init(&it, s, B, s->drop_last) != DT_OK) return -1;
    long nsteps = (long)(dt_batch_iter_num_batches(&it) / accum);
    if (steps >= 0 && steps < nsteps) nsteps = steps;
    const int64_t *ix;
    int b;
    for (long k = 0; k < nsteps * accum; k++) {
        if (dt_batch_iter_next(&it, &ix, &b) != 1) break;
        for (int j = 0; j < b; j++) {
            seen[ix[j]]++;
            if (seq) seq[(*nseq)++] = ix[j];
        }
    }
    int64_t taken = it.pos;
    dt_batch_iter_free(&it);
    return taken;
}

/* One epoch of n samples: `steps` steps at layout (R1, B1, accum1), a checkpoint
 * (the position every rank reports), then the rest of the epoch at (R2, B2, 1).
 * Checked against the uninterrupted epoch at (R1, B1, 1):
 *   padded (drop_last 0): no sample of the uninterrupted epoch is lost, and
 *   exactly pos + R2 * ceil((n - pos) / R2) indices are handed out (the
 *   resumed part padded to a multiple of R2, nothing else repeated);
 *   cut (drop_last 1): nothing repeats, and exactly the resumed part's cut
 *   tail and partial batches are left out;
 *   with (R2, B2) == (R1, B1) every rank sees exactly the indices, in the
 *   order, of the uninterrupted epoch. */
static int g_resume_cases;
static void check_resume(int64_t n, int shuffle, int dl, int R1, int B1, int accum1, long steps, int R2, int B2,
                         uint64_t epoch) {
    int *seen = calloc((size_t)n, sizeof *seen), *full = calloc((size_t)n, sizeof *full);
    int64_t *seq_a = malloc(sizeof(int64_t) * (size_t)(n + 8) * 2), *seq_b = malloc(sizeof(int64_t) * (size_t)(n + 8) * 2);
    if (!seen || !full || !seq_a || !seq_b) { CHECK(0, "oom"); goto out; }
    char what[160];
    snprintf(what, sizeof what, "n=%lld shuffle=%d drop_last=%d: %d ranks x B %d (accum %d), %ld steps -> %d ranks x B %d",
             (long long)n, shuffle, dl, R1, B1, accum1, steps, R2, B2);
    int64_t pos = -1;
    int bad = 0;
    for (int r = 0; r < R1; r++) {
        dt_sampler s;
        if (dt_sampler_init(&s, n, R1, r, shuffle, dl, 99) != DT_OK) { CHECK(0, "%s: init", what); goto out; }
        dt_sampler_set_epoch(&s, epoch);
        int64_t taken = take(&s, B1, accum1, steps, seen, NULL, NULL);
        int64_t p = dt_sampler_position(&s, taken);
        if (pos >= 0 && p != pos) bad++; /* every rank must report the same position */
        pos = p;
        take(&s, B1, 1, -1, full, NULL, NULL); /* the uninterrupted epoch */
    }
    CHECK(bad == 0 && pos >= 0, "%s: ranks disagree on the position", what);
    for (int r = 0; r < R2; r++) {
        dt_sampler s;
        if (dt_sampler_init(&s, n, R2, r, shuffle, dl, 99) != DT_OK) { CHECK(0, "%s: init 2", what); goto out; }
        dt_sampler_set_epoch(&s, epoch);
        CHECK_OK(dt_sampler_set_start(&s, pos));
        take(&s, B2, 1, -1, seen, NULL, NULL);
    }
    int64_t lost = 0, over = 0, total = 0, twice = 0;
    for (int64_t i = 0; i < n; i++) {
        if (full[i] && !seen[i]) lost++;
        if (seen[i] > 1) over += seen[i] - 1;
        twice += seen[i] > 2;
        total += seen[i];
    }
    int64_t m = pos < n ? n - pos : 0, per = dl ? m / R2 : (m + R2 - 1) / R2;
    if (!dl) {
        /* padded: nothing of the uninterrupted epoch lost; exactly pos indices
         * before the checkpoint and the rest padded to a multiple of R2 */
        CHECK(lost == 0 && total == pos + per * R2 && (twice == 0 || n < R1 || n < R2),
              "%s: %lld lost, %lld indices (want %lld), %lld seen 3+ times", what, (long long)lost, (long long)total,
              (long long)(pos + per * R2), (long long)twice);
    } else {
        /* cut: nothing twice; the resumed part drops its cut tail and partial batches only */
        int64_t want = pos + R2 * (int64_t)B2 * (per / B2);
        CHECK(over == 0 && total == want, "%s: %lld repeated, %lld indices (want %lld)", what, (long long)over,
              (long long)total, (long long)want);
    }
    /* the same layout: bit-identical order per rank */
    if (R2 == R1 && B2 == B1 && accum1 == 1) {
        for (int r = 0; r < R1; r++) {
            int64_t na = 0, nb = 0;
            dt_sampler s;
            dt_sampler_init(&s, n, R1, r, shuffle, dl, 99);
            dt_sampler_set_epoch(&s, epoch);
            take(&s, B1, 1, -1, full, seq_a, &na);
            take(&s, B1, 1, steps, seen, seq_b, &nb);
            dt_sampler_set_start(&s, pos);
            take(&s, B1, 1, -1, seen, seq_b, &nb);
            CHECK(na == nb && memcmp(seq_a, seq_b, sizeof(int64_t) * (size_t)na) == 0,
                  "%s: rank %d's order differs from the uninterrupted epoch's", what, r);
        }
    }
    g_resume_cases++;
out:
    free(seen);
    free(full);
    free(seq_a);
    free(seq_b);
}

static void test_resume_layouts(void) {
    /* the case: 2048 samples, 2 ranks x 32, checkpoint at step 20 of 32 */
    for (int R2 = 1; R2 <= 4; R2++)
        for (int b = 0; b < 3; b++) {
            static const int Bs[3] = {32, 16, 128};
            check_resume(2048, 1, 0, 2, 32, 1, 20, R2, Bs[b], 0);
        }
    /* every layout pair, stops anywhere, both tails, accumulation before the stop */
    const int64_t ns[] = {97, 1000, 1001};
    const int Bs[] = {1, 7, 32};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int R1 = 1; R1 <= 4; R1++)
            for (int R2 = 1; R2 <= 4; R2++)
                for (int dl = 0; dl <= 1; dl++)
                    for (size_t b1 = 0; b1 < 3; b1++)
                        for (size_t b2 = 0; b2 < 3; b2++)
                            for (long st = 0; st < 40; st += 13)
                                check_resume(ns[i], (int)((i + b1) % 2), dl, R1, Bs[b1], 1 + (int)(b2 % 2), st, R2,
                                             Bs[b2], i);
    CHECK(g_resume_cases == 12 + 3 * 16 * 2 * 9 * 4, "%d resume cases ran", g_resume_cases);
    /* a resumed epoch resumed again (4 -> 3 -> 1 ranks): the position carries on */
    int seen[500] = {0};
    int64_t pos = 0;
    for (int r = 0; r < 4; r++) {
        dt_sampler s;
        dt_sampler_init(&s, 500, 4, r, 1, 0, 5);
        dt_sampler_set_epoch(&s, 3);
        pos = dt_sampler_position(&s, take(&s, 8, 1, 5, seen, NULL, NULL));
    }
    CHECK(pos == 160, "4 ranks x 5 steps of 8: position %lld", (long long)pos);
    for (int r = 0; r < 3; r++) {
        dt_sampler s;
        dt_sampler_init(&s, 500, 3, r, 1, 0, 5);
        dt_sampler_set_epoch(&s, 3);
        dt_sampler_set_start(&s, 160);
        pos = dt_sampler_position(&s, take(&s, 10, 1, 4, seen, NULL, NULL));
    }
    CHECK(pos == 280, "then 3 ranks x 4 steps of 10: position %lld", (long long)pos);
    dt_sampler s;
    dt_sampler_init(&s, 500, 1, 0, 1, 0, 5);
    dt_sampler_set_epoch(&s, 3);
    dt_sampler_set_start(&s, 280);
    take(&s, 64, 1, -1, seen, NULL, NULL);
    int ok = 1;
    for (int i = 0; i < 500; i++) ok &= seen[i] == 1;
    CHECK(ok, "4 -> 3 -> 1 ranks: every sample exactly once");
    /* past the end: an empty epoch; validation */
    CHECK_OK(dt_sampler_set_start(&s, 500));
    CHECK(dt_sampler_num_samples(&s) == 0 && s.total_size == 500, "start = n: nothing left");
    CHECK_OK(dt_sampler_set_start(&s, 503));
    CHECK(dt_sampler_num_samples(&s) == 0, "start beyond n (padding consumed): nothing left");
    dt_batch_iter it;
    const int64_t *ix;
    int B;
    CHECK_OK(dt_batch_iter_init(&it, &s, 8, 0));
    CHECK(dt_batch_iter_num_batches(&it) == 0 && dt_batch_iter_next(&it, &ix, &B) == 0, "an empty epoch");
    dt_sampler_set_epoch(&s, 4);
    CHECK(s.start == 0 && dt_sampler_num_samples(&s) == 500, "the next epoch starts at 0");
    CHECK_OK(dt_batch_iter_reset(&it, &s));
    CHECK(dt_batch_iter_num_batches(&it) == 63, "and has all its batches");
    dt_batch_iter_free(&it);
    CHECK_ERR(dt_sampler_set_start(&s, -1), DT_ERR_INVALID, "start position -1");
    CHECK_ERR(dt_sampler_set_start(NULL, 0), DT_ERR_INVALID, "NULL");
    CHECK(dt_sampler_position(&s, 501) < 0, "position: taken beyond num_samples");
    CHECK(dt_sampler_position(&s, 500) == 500, "position after the whole epoch at 1 rank");
}

int main(void) {
    test_validation();
    test_torch_partition();
    const int64_t ns[] = {1, 2, 7, 10, 97, 1000, 60000};
    const int Rs[] = {1, 2, 3, 4, 8};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t j = 0; j < sizeof Rs / sizeof Rs[0]; j++)
            for (int dl = 0; dl <= 1; dl++) {
                if (dl && ns[i] < Rs[j]) continue;
                test_shuffled(ns[i], Rs[j], dl, 1234, (uint64_t)(i + j));
            }
    test_epochs_and_seeds();
    test_batch_iter();
    test_resume_layouts();
    return dt_test_finish("data_sampler");
}
