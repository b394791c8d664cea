/* src/train/source_images.c - the Fashion-MNIST data source (see source.h):
 * the training and test sets, the distributed sampler and its batches. */
#include <stdlib.h>
#include "core/error.h"
#include "dtrain/data.h"
#include "train/source.h"

typedef struct images {
    dt_dataset train, test;
    dt_sampler sampler;
    dt_batch_iter it;
    int batch;
} images;

static images *I(const dt_source *s) { return s->impl; }

static void images_close(dt_source *s) {
    if (!s) return;
    images *d = I(s);
    if (d) {
        dt_batch_iter_free(&d->it);
        dt_dataset_free(&d->train);
        dt_dataset_free(&d->test);
        free(d);
    }
    free(s);
}

static int limit(dt_dataset *ds, long n) {
    if (n <= 0 || n >= ds->count) return DT_OK;
    dt_dataset sub;
    int rc = dt_dataset_subset(ds, n, &sub);
    if (rc) return rc;
    dt_dataset_free(ds);
    *ds = sub;
    return DT_OK;
}

static int images_open(const dt_source_args *a, dt_source **out) {
    const dt_train_options *o = a->o;
    dt_source *s = calloc(1, sizeof *s);
    images *d = calloc(1, sizeof *d);
    if (!s || !d) {
        free(s);
        free(d);
        return DT_ERR(DT_ERR_NOMEM, "out of memory");
    }
    s->ops = &dt_source_fashion_mnist;
    s->impl = d;
    d->batch = o->batch_size;
    const char *dir = *o->data_dir ? o->data_dir : DT_FASHION_MNIST_DIR;
    int rc = dt_fashion_mnist_load(dir, 1, &d->train);
    if (!rc) rc = dt_fashion_mnist_load(dir, 0, &d->test);
    if (!rc) rc = limit(&d->train, o->train_limit);
    if (!rc) rc = limit(&d->test, o->test_limit);
    if (!rc && d->train.count < a->dp_size)
        rc = DT_ERR(DT_ERR_INVALID, "%lld training samples cannot feed %d ranks", (long long)d->train.count,
                    a->dp_size);
    if (!rc)
        rc = dt_sampler_init(&d->sampler, d->train.count, a->dp_size, a->dp_rank, o->shuffle, o->drop_last, o->seed);
    if (!rc) rc = dt_batch_iter_init(&d->it, &d->sampler, o->batch_size, o->drop_last);
    if (rc) {
        images_close(s);
        return rc;
    }
    *out = s;
    return DT_OK;
}

static int64_t images_train_count(const dt_source *s) { return I(s)->train.count; }
static int64_t images_eval_count(const dt_source *s) { return I(s)->test.count; }

static int images_begin_epoch(dt_source *s, uint64_t epoch, int64_t start) {
    images *d = I(s);
    dt_sampler_set_epoch(&d->sampler, epoch);
    int rc = start > 0 ? dt_sampler_set_start(&d->sampler, start) : DT_OK;
    return rc ? rc : dt_batch_iter_reset(&d->it, &d->sampler);
}

static int64_t images_batches_left(const dt_source *s) {
    const images *d = I(s);
    int64_t consumed = (d->it.pos + d->batch - 1) / d->batch;
    return dt_batch_iter_num_batches(&d->it) - consumed;
}

static int images_next(dt_source *s, void *x, int32_t *y, int *B) {
    images *d = I(s);
    const int64_t *idx;
    int rc = dt_batch_iter_next(&d->it, &idx, B);
    if (rc <= 0) return rc;
    rc = dt_dataset_batch(&d->train, idx, *B, x, y, NULL);
    return rc ? rc : 1;
}

static int64_t images_position(const dt_source *s) {
    const images *d = I(s);
    return dt_sampler_position(&d->sampler, d->it.pos);
}

static int images_eval_batch(dt_source *s, const int64_t *idx, int B, void *x, int32_t *y) {
    return dt_dataset_batch(&I(s)->test, idx, B, x, y, NULL);
}

const dt_source_ops dt_source_fashion_mnist = {
    .name = "fashion-mnist",
    .default_path = DT_FASHION_MNIST_DIR,
    .open = images_open,
    .close = images_close,
    .train_count = images_train_count,
    .eval_count = images_eval_count,
    .begin_epoch = images_begin_epoch,
    .batches_left = images_batches_left,
    .next = images_next,
    .position = images_position,
    .eval_batch = images_eval_batch,
};
