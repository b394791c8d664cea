/* src/data/sampler.c - distributed sampler (PyTorch DistributedSampler
 * partition logic, dtrain's RNG; epochs that start at a position of their
 * global order, for resuming in any layout) and the batch iterator. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dtrain/data.h"
#include "dtrain/rng.h"

int dt_sampler_init(dt_sampler *s, int64_t n, int num_replicas, int rank, int shuffle,
                    int drop_last, uint64_t seed) {
    if (!s) return DT_ERR(DT_ERR_INVALID, "sampler is NULL");
    if (n < 1) return DT_ERR(DT_ERR_INVALID, "dataset size n=%lld must be >= 1", (long long)n);
    if (num_replicas < 1)
        return DT_ERR(DT_ERR_INVALID, "num_replicas=%d must be >= 1", num_replicas);
    if (rank < 0 || rank >= num_replicas)
        return DT_ERR(DT_ERR_INVALID, "rank=%d is outside [0, num_replicas=%d)", rank,
                      num_replicas);
    if ((shuffle != 0 && shuffle != 1) || (drop_last != 0 && drop_last != 1))
        return DT_ERR(DT_ERR_INVALID, "shuffle=%d and drop_last=%d must be 0 or 1", shuffle,
                      drop_last);
    if (drop_last && n < num_replicas)
        return DT_ERR(DT_ERR_INVALID, "drop_last with n=%lld < num_replicas=%d: every rank would "
                      "get 0 samples", (long long)n, num_replicas);
    s->n = n;
    s->num_replicas = num_replicas;
    s->rank = rank;
    s->shuffle = shuffle;
    s->drop_last = drop_last;
    s->seed = seed;
    s->epoch = 0;
    return dt_sampler_set_start(s, 0);
}

/* num_samples and total_size for the current start. */
static void layout(dt_sampler *s) {
    const int64_t R = s->num_replicas, left = s->start < s->n ? s->n - s->start : 0;
    s->num_samples = s->drop_last ? left / R : left / R + (left % R != 0);
    s->total_size = s->start + s->num_samples * R;
}

void dt_sampler_set_epoch(dt_sampler *s, uint64_t epoch) {
    if (!s) return;
    s->epoch = epoch;
    s->start = 0;
    if (s->num_replicas >= 1) layout(s);
}

int dt_sampler_set_start(dt_sampler *s, int64_t start) {
    if (!s) return DT_ERR(DT_ERR_INVALID, "sampler is NULL");
    if (s->n < 1 || s->num_replicas < 1) return DT_ERR(DT_ERR_INVALID, "sampler is not initialised");
    if (start < 0 || start > INT64_MAX / 2)
        return DT_ERR(DT_ERR_INVALID, "start position %lld is out of range [0, 2^62]", (long long)start);
    s->start = start;
    layout(s);
    return DT_OK;
}

int64_t dt_sampler_position(const dt_sampler *s, int64_t taken) {
    if (!s) return DT_ERR(DT_ERR_INVALID, "sampler is NULL");
    if (taken < 0 || taken > s->num_samples)
        return DT_ERR(DT_ERR_INVALID, "taken=%lld is outside [0, num_samples=%lld]", (long long)taken,
                      (long long)s->num_samples);
    return s->start + taken * s->num_replicas;
}

int64_t dt_sampler_num_samples(const dt_sampler *s) {
    if (!s) return DT_ERR(DT_ERR_INVALID, "sampler is NULL");
    return s->num_samples;
}

int dt_sampler_indices(const dt_sampler *s, int64_t *out) {
    if (!s || !out) return DT_ERR(DT_ERR_INVALID, "sampler or out is NULL");
    if (s->n < 1 || s->num_replicas < 1 || s->rank < 0 || s->rank >= s->num_replicas)
        return DT_ERR(DT_ERR_INVALID, "sampler is not initialised");
    const int64_t n = s->n, R = s->num_replicas, m = s->num_samples, p0 = s->start + s->rank;
    /* position in the (padded or cut) order of this rank's k-th index is
     * start + rank + k*R < total_size; padding wraps: order[p] = order[p mod n]. */
    if (!s->shuffle) {
        for (int64_t k = 0; k < m; k++) out[k] = (p0 + k * R) % n;
        return DT_OK;
    }
    int64_t *perm = malloc((size_t)n * sizeof *perm);
    if (!perm)
        return DT_ERR(DT_ERR_NOMEM, "cannot allocate the permutation of %lld indices",
                      (long long)n);
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    dt_rng rng;
    dt_rng_seed2(&rng, s->seed, s->epoch);
    dt_rng_shuffle_i64(&rng, perm, n);
    for (int64_t k = 0; k < m; k++) out[k] = perm[(p0 + k * R) % n];
    free(perm);
    return DT_OK;
}

int dt_batch_iter_init(dt_batch_iter *it, const dt_sampler *s, int batch_size, int drop_last) {
    if (it) memset(it, 0, sizeof *it);
    if (!it || !s) return DT_ERR(DT_ERR_INVALID, "iterator or sampler is NULL");
    if (batch_size < 1) return DT_ERR(DT_ERR_INVALID, "batch_size=%d must be >= 1", batch_size);
    if (drop_last != 0 && drop_last != 1)
        return DT_ERR(DT_ERR_INVALID, "drop_last=%d must be 0 or 1", drop_last);
    if (s->n < 1 || s->num_replicas < 1) return DT_ERR(DT_ERR_INVALID, "sampler is not initialised");
    int64_t *idx = malloc((size_t)(s->num_samples > 0 ? s->num_samples : 1) * sizeof *idx);
    if (!idx)
        return DT_ERR(DT_ERR_NOMEM, "cannot allocate %lld indices", (long long)s->num_samples);
    int rc = dt_sampler_indices(s, idx);
    if (rc != DT_OK) {
        free(idx);
        return rc;
    }
    it->indices = idx;
    it->count = s->num_samples;
    it->cap = s->num_samples > 0 ? s->num_samples : 1;
    it->pos = 0;
    it->batch_size = batch_size;
    it->drop_last = drop_last;
    return DT_OK;
}

int dt_batch_iter_reset(dt_batch_iter *it, const dt_sampler *s) {
    if (!it || !s || !it->indices)
        return DT_ERR(DT_ERR_INVALID, "iterator (initialised) or sampler is NULL");
    if (s->num_samples > it->cap) { /* a longer epoch than any before */
        int64_t *p = realloc(it->indices, (size_t)s->num_samples * sizeof *p);
        if (!p)
            return DT_ERR(DT_ERR_NOMEM, "cannot allocate %lld indices", (long long)s->num_samples);
        it->indices = p;
        it->cap = s->num_samples;
    }
    int rc = dt_sampler_indices(s, it->indices);
    if (rc != DT_OK) return rc;
    it->count = s->num_samples;
    it->pos = 0;
    return DT_OK;
}

int64_t dt_batch_iter_num_batches(const dt_batch_iter *it) {
    if (!it) return DT_ERR(DT_ERR_INVALID, "iterator is NULL");
    if (it->batch_size < 1) return 0;
    const int64_t b = it->batch_size;
    return it->drop_last ? it->count / b : (it->count + b - 1) / b;
}

int dt_batch_iter_next(dt_batch_iter *it, const int64_t **indices, int *B) {
    if (!it || !indices || !B) return DT_ERR(DT_ERR_INVALID, "iterator, indices or B is NULL");
    *indices = NULL;
    *B = 0;
    const int64_t left = it->count - it->pos;
    if (left <= 0 || it->batch_size < 1) return 0;
    if (left < it->batch_size && it->drop_last) {
        it->pos = it->count;
        return 0;
    }
    const int b = left < it->batch_size ? (int)left : it->batch_size;
    *indices = it->indices + it->pos;
    *B = b;
    it->pos += b;
    return 1;
}

void dt_batch_iter_free(dt_batch_iter *it) {
    if (!it) return;
    free(it->indices);
    memset(it, 0, sizeof *it);
}
