/* src/train/source_text.c - the byte-level text source (see source.h and
 * dtrain/text.h): random windows of the training split as a pure function
 * of (seed, T, global sample index), and a fixed set of validation windows. */
#include <stdlib.h>
#include "core/error.h"
#include "dtrain/text.h"
#include "train/source.h"
#include "train/trainer_internal.h"

typedef struct text {
    dt_text_dataset ds;
    int T, batch, dp_rank, dp_size;
    uint64_t seed;
    int64_t windows;     /* W: windows of the training split */
    int64_t per_epoch;   /* samples per epoch: W or --train-limit */
    int64_t eval_windows;/* non-overlapping validation windows */
    int64_t eval_n;      /* evaluation samples: all of them or --test-limit */
    uint64_t epoch;
    int64_t pos;         /* samples of the epoch's global order consumed */
} text;

static text *X(const dt_source *s) { return s->impl; }

static void text_close(dt_source *s) {
    if (!s) return;
    if (X(s)) dt_text_free(&X(s)->ds);
    free(s->impl);
    free(s);
}

static int text_open(const dt_source_args *a, dt_source **out) {
    const dt_train_options *o = a->o;
    if (a->io.max_seq < 1)
        return DT_ERR(DT_ERR_INVALID, "the text source feeds sequence models, not a model with %d classes and no "
                      "sequence axis", a->io.num_classes);
    dt_source *s = calloc(1, sizeof *s);
    text *d = calloc(1, sizeof *d);
    if (!s || !d) {
        free(s);
        free(d);
        return DT_ERR(DT_ERR_NOMEM, "out of memory");
    }
    s->ops = &dt_source_text;
    s->impl = d;
    d->T = a->seq_len;
    d->batch = o->batch_size;
    d->dp_rank = a->dp_rank;
    d->dp_size = a->dp_size;
    d->seed = o->seed;
    const char *path = *o->data_dir ? o->data_dir : DT_FORTUNES_DIR;
    int rc = dt_text_load(path, DT_TEXT_VAL_FRACTION, &d->ds);
    if (!rc && d->ds.vocab_size > a->io.num_classes)
        rc = DT_ERR(DT_ERR_INVALID, "the data %s has tokens below %d (%s), the model's vocabulary is %d: give "
                    "--vocab-size %d (or a model of that vocabulary to --init-from)", path, d->ds.vocab_size,
                    d->ds.data ? "bytes" : "llm.c's GPT-2 token shards", a->io.num_classes, d->ds.vocab_size);
    if (!rc) {
        d->windows = dt_text_num_windows(&d->ds, DT_TEXT_TRAIN, d->T);
        if (d->windows < 0) rc = (int)d->windows;
    }
    if (!rc) {
        d->eval_windows = dt_text_num_eval_windows(&d->ds, DT_TEXT_VAL, d->T);
        if (d->eval_windows < 0) rc = (int)d->eval_windows;
    }
    if (rc) {
        text_close(s);
        /* an empty or too short corpus, a block size larger than a split:
         * the data does not fit the flags (exit 2) */
        return rc == DT_ERR_INVALID ? dt_trainer_mark_input(rc) : rc;
    }
    d->per_epoch = o->train_limit > 0 && o->train_limit < d->windows ? o->train_limit : d->windows;
    d->eval_n = o->test_limit > 0 && o->test_limit < d->eval_windows ? o->test_limit : d->eval_windows;
    *out = s;
    return DT_OK;
}

static int64_t text_train_count(const dt_source *s) { return X(s)->per_epoch; }
static int64_t text_eval_count(const dt_source *s) { return X(s)->eval_n; }

static int text_begin_epoch(dt_source *s, uint64_t epoch, int64_t start) {
    text *d = X(s);
    d->epoch = epoch;
    d->pos = start < d->per_epoch ? start : d->per_epoch;
    return DT_OK;
}

static int64_t text_batches_left(const dt_source *s) {
    const text *d = X(s);
    return (d->per_epoch - d->pos) / ((int64_t)d->batch * d->dp_size);
}

static int text_next(dt_source *s, void *x, int32_t *y, int *B) {
    text *d = X(s);
    *B = 0;
    if (text_batches_left(s) < 1) return 0;
    const int global = d->batch * d->dp_size;
    /* sample g of the run lies in epoch g / W: the epoch's permutation */
    uint64_t first;
    int rc = dt_text_rank_first(d->epoch * (uint64_t)d->windows + (uint64_t)d->pos, global, d->dp_rank,
                                d->dp_size, &first);
    if (!rc) rc = dt_text_batch(&d->ds, DT_TEXT_TRAIN, d->T, d->seed, first, d->batch, x, y);
    if (rc) return rc;
    d->pos += global;
    *B = d->batch;
    return 1;
}

static int64_t text_position(const dt_source *s) { return X(s)->pos; }

/* evaluation sample i: validation window floor(i * n / eval_n), spread
 * evenly over the split */
static int text_eval_batch(dt_source *s, const int64_t *idx, int B, void *x, int32_t *y) {
    text *d = X(s);
    int32_t *xi = x;
    for (int b = 0; b < B; b++) {
        if (idx[b] < 0 || idx[b] >= d->eval_n)
            return DT_ERR(DT_ERR_INVALID, "evaluation sample %lld out of range [0, %lld)", (long long)idx[b],
                          (long long)d->eval_n);
        int64_t w = (int64_t)((double)idx[b] * (double)d->eval_windows / (double)d->eval_n);
        if (w >= d->eval_windows) w = d->eval_windows - 1;
        int rc = dt_text_eval_batch(&d->ds, DT_TEXT_VAL, d->T, w, 1, xi + (size_t)b * (size_t)d->T,
                                    y + (size_t)b * (size_t)d->T);
        if (rc) return rc;
    }
    return DT_OK;
}

const dt_source_ops dt_source_text = {
    .name = "text",
    .default_path = DT_FORTUNES_DIR,
    .open = text_open,
    .close = text_close,
    .train_count = text_train_count,
    .eval_count = text_eval_count,
    .begin_epoch = text_begin_epoch,
    .batches_left = text_batches_left,
    .next = text_next,
    .position = text_position,
    .eval_batch = text_eval_batch,
};
