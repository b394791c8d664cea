/* src/data/dataset.c - dataset lifetime, subsets, normalisation and batching. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dtrain/data.h"

void dt_dataset_free(dt_dataset *ds) {
    if (!ds) return;
    free(ds->images);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}

int dt_dataset_subset(const dt_dataset *src, int64_t n, dt_dataset *out) {
    if (out && out != src) memset(out, 0, sizeof *out);
    if (!src || !out || out == src)
        return DT_ERR(DT_ERR_INVALID, "src or out is NULL, or out == src");
    if (!src->images || !src->labels || src->rows < 1 || src->cols < 1)
        return DT_ERR(DT_ERR_INVALID, "src is not a loaded dataset");
    if (n < 1 || n > src->count)
        return DT_ERR(DT_ERR_INVALID, "subset size n=%lld must be in [1, %lld]", (long long)n,
                      (long long)src->count);
    const size_t per = (size_t)src->rows * (size_t)src->cols;
    uint8_t *im = malloc((size_t)n * per), *lb = malloc((size_t)n);
    if (!im || !lb) {
        free(im);
        free(lb);
        return DT_ERR(DT_ERR_NOMEM, "cannot allocate a subset of %lld samples", (long long)n);
    }
    memcpy(im, src->images, (size_t)n * per);
    memcpy(lb, src->labels, (size_t)n);
    out->count = n;
    out->rows = src->rows;
    out->cols = src->cols;
    out->num_classes = src->num_classes;
    out->images = im;
    out->labels = lb;
    return DT_OK;
}

dt_normalize dt_normalize_fashion_mnist(void) {
    dt_normalize n = {DT_FASHION_MNIST_MEAN, DT_FASHION_MNIST_STD};
    return n;
}

static void gather(float *restrict x, const uint8_t *restrict px, const float *restrict lut,
                   size_t len) {
    for (size_t i = 0; i < len; i++) x[i] = lut[px[i]];
}

int dt_dataset_batch(const dt_dataset *ds, const int64_t *indices, int B, float *x, int32_t *y,
                     const dt_normalize *norm) {
    if (!ds || !indices || !x) return DT_ERR(DT_ERR_INVALID, "ds, indices or x is NULL");
    if (B < 0) return DT_ERR(DT_ERR_INVALID, "batch size B=%d must be >= 0", B);
    if (!ds->images || !ds->labels) return DT_ERR(DT_ERR_INVALID, "ds is not a loaded dataset");
    const dt_normalize nm = norm ? *norm : dt_normalize_fashion_mnist();
    if (!isfinite(nm.mean) || !isfinite(nm.std) || !(nm.std > 0.0f))
        return DT_ERR(DT_ERR_INVALID, "invalid normalisation mean=%g std=%g (std must be > 0)",
                      (double)nm.mean, (double)nm.std);
    for (int b = 0; b < B; b++)
        if (indices[b] < 0 || indices[b] >= ds->count)
            return DT_ERR(DT_ERR_INVALID, "indices[%d]=%lld is out of range [0, %lld)", b,
                          (long long)indices[b], (long long)ds->count);
    float lut[256];
    for (int v = 0; v < 256; v++) lut[v] = ((float)v / 255.0f - nm.mean) / nm.std;
    const size_t per = (size_t)ds->rows * (size_t)ds->cols;
    for (int b = 0; b < B; b++) {
        const size_t i = (size_t)indices[b];
        gather(x + (size_t)b * per, ds->images + i * per, lut, per);
        if (y) y[b] = ds->labels[i];
    }
    return DT_OK;
}
