/* tests/data/test_idx.c - IDX loading from small files this test writes into a
 * temporary directory (gzip and plain), every error path, subsets, batching. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "dtrain/data.h"
#include "testutil.h"

static char dir[64];
static char made[64][256]; /* files written (removed at the end); stable paths */
static int nmade;

/* dir/name in a rotating buffer (for names that are not written). */
static const char *path_of(const char *name) {
    static char pbuf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(pbuf[k], sizeof pbuf[k], "%s/%s", dir, name);
    return pbuf[k];
}

/* The stable storage for dir/name (the same pointer for the same name). */
static const char *slot(const char *name) {
    const char *p = path_of(name);
    for (int i = 0; i < nmade; i++)
        if (strcmp(made[i], p) == 0) return made[i];
    if (nmade == 64) return p;
    snprintf(made[nmade], sizeof made[0], "%s", p);
    return made[nmade++];
}

/* Write bytes to dir/name, gzip-compressed if gz. Returns the path. */
static const char *write_file(const char *name, const unsigned char *data, size_t len, int gz) {
    const char *p = slot(name);
    int ok = 0;
    if (gz) {
        gzFile f = gzopen(p, "wb");
        if (f) {
            ok = len == 0 || gzwrite(f, data, (unsigned)len) == (int)len;
            ok &= gzclose(f) == Z_OK;
        }
    } else {
        FILE *f = fopen(p, "wb");
        if (f) {
            ok = fwrite(data, 1, len, f) == len;
            ok &= fclose(f) == 0;
        }
    }
    CHECK(ok, "cannot write %s", p);
    return p;
}

static size_t put_u32(unsigned char *b, uint32_t v) {
    b[0] = (unsigned char)(v >> 24);
    b[1] = (unsigned char)(v >> 16);
    b[2] = (unsigned char)(v >> 8);
    b[3] = (unsigned char)v;
    return 4;
}

static unsigned char buf[1 << 16];

/* IDX image file: magic, count, rows, cols, then `ndata` pixels (i*37+11)&255. */
static const char *images(const char *name, uint32_t magic, uint32_t count, uint32_t rows,
                          uint32_t cols, size_t ndata, int gz) {
    size_t n = 0;
    n += put_u32(buf + n, magic);
    n += put_u32(buf + n, count);
    n += put_u32(buf + n, rows);
    n += put_u32(buf + n, cols);
    for (size_t i = 0; i < ndata && n < sizeof buf; i++) buf[n++] = (unsigned char)(i * 37 + 11);
    return write_file(name, buf, n, gz);
}

static const char *labels(const char *name, uint32_t magic, uint32_t count, const uint8_t *lab,
                          size_t nlab, int gz) {
    size_t n = 0;
    n += put_u32(buf + n, magic);
    n += put_u32(buf + n, count);
    memcpy(buf + n, lab, nlab);
    return write_file(name, buf, n + nlab, gz);
}

static const uint8_t LAB[5] = {3, 1, 4, 1, 5};

static void check_small(const dt_dataset *d, const char *what) {
    int ok = d->count == 5 && d->rows == 3 && d->cols == 4 && d->images && d->labels;
    for (int i = 0; ok && i < 60; i++) ok = d->images[i] == (uint8_t)(i * 37 + 11);
    for (int i = 0; ok && i < 5; i++) ok = d->labels[i] == LAB[i];
    CHECK(ok, "%s: content", what);
}

static void test_load_ok(void) {
    dt_dataset a, b, c;
    const char *ip = images("img", 0x803, 5, 3, 4, 60, 0);
    const char *lp = labels("lab", 0x801, 5, LAB, 5, 0);
    CHECK_OK(dt_idx_load(ip, lp, &a));
    check_small(&a, "plain");
    CHECK(a.num_classes == 6, "computed num_classes = max label + 1 = 6, got %d", a.num_classes);
    const char *igz = images("img.gz", 0x803, 5, 3, 4, 60, 1);
    const char *lgz = labels("lab.gz", 0x801, 5, LAB, 5, 1);
    CHECK_OK(dt_idx_load_ex(igz, lgz, 10, &b));
    check_small(&b, "gzip");
    CHECK(b.num_classes == 10, "declared num_classes");
    CHECK(a.images && b.images && memcmp(a.images, b.images, 60) == 0 &&
              memcmp(a.labels, b.labels, 5) == 0, "gzip and plain load the same bytes");
    CHECK_OK(dt_idx_load(igz, lp, &c)); /* mixed */
    check_small(&c, "mixed");
    dt_dataset_free(&c);

    /* subset */
    CHECK_OK(dt_dataset_subset(&a, 2, &c));
    CHECK(c.count == 2 && c.rows == 3 && c.cols == 4 && c.num_classes == 6 &&
              memcmp(c.images, a.images, 24) == 0 && c.labels[1] == 1, "subset");
    dt_dataset_free(&c);
    CHECK_ERR(dt_dataset_subset(&a, 6, &c), DT_ERR_INVALID, "n=6 must be in [1, 5]");
    CHECK(c.images == NULL && c.count == 0, "failed subset zeroes out");
    CHECK_ERR(dt_dataset_subset(&a, 0, &c), DT_ERR_INVALID, "n=0");
    CHECK_ERR(dt_dataset_subset(&a, 2, &a), DT_ERR_INVALID, "out == src");

    /* batching: [B][1][rows][cols], x = (v/255 - mean) / std in float */
    const int64_t idx[3] = {4, 0, 4};
    float x[3 * 12];
    int32_t y[3] = {-1, -1, -1};
    CHECK_OK(dt_dataset_batch(&a, idx, 3, x, y, NULL));
    int ok = y[0] == 5 && y[1] == 3 && y[2] == 5;
    for (int bi = 0; bi < 3; bi++)
        for (int p = 0; p < 12; p++) {
            uint8_t v = a.images[idx[bi] * 12 + p];
            float want = ((float)v / 255.0f - 0.2860f) / 0.3530f;
            ok &= x[bi * 12 + p] == want;
        }
    CHECK(ok, "batch with default (Fashion-MNIST) normalisation");
    dt_normalize raw = {0.0f, 1.0f};
    CHECK_OK(dt_dataset_batch(&a, idx, 1, x, NULL, &raw));
    CHECK(x[0] == (float)a.images[48] / 255.0f && x[11] == (float)a.images[59] / 255.0f,
          "batch with mean 0 std 1 gives pixel / 255");
    dt_normalize nm = dt_normalize_fashion_mnist();
    CHECK(nm.mean == 0.2860f && nm.std == 0.3530f, "default normalisation constants");
    const int64_t bad[2] = {1, 7};
    x[0] = 42.0f;
    CHECK_ERR(dt_dataset_batch(&a, bad, 2, x, y, NULL), DT_ERR_INVALID,
              "indices[1]=7 is out of range [0, 5)");
    CHECK(x[0] == 42.0f, "failed batch writes nothing");
    const int64_t neg[1] = {-1};
    CHECK_ERR(dt_dataset_batch(&a, neg, 1, x, y, NULL), DT_ERR_INVALID, "indices[0]=-1");
    dt_normalize zero = {0.5f, 0.0f};
    CHECK_ERR(dt_dataset_batch(&a, idx, 1, x, y, &zero), DT_ERR_INVALID, "std must be > 0");
    CHECK_ERR(dt_dataset_batch(&a, idx, -1, x, y, NULL), DT_ERR_INVALID, "B=-1");
    CHECK_OK(dt_dataset_batch(&a, idx, 0, x, y, NULL));
    CHECK_ERR(dt_dataset_batch(NULL, idx, 1, x, y, NULL), DT_ERR_INVALID, "NULL");

    dt_dataset_free(&a);
    dt_dataset_free(&b);
    CHECK(a.images == NULL && a.count == 0, "free zeroes");
    dt_dataset_free(&a); /* twice is fine */
    dt_dataset_free(NULL);
}

/* Expects failure with DT_ERR_IO and a message containing sub, and a zeroed out. */
#define LOAD_ERR(ip, lp, ncls, sub) do { dt_dataset d_; memset(&d_, 0x5a, sizeof d_); \
    CHECK_ERR(dt_idx_load_ex((ip), (lp), (ncls), &d_), DT_ERR_IO, (sub)); \
    CHECK(d_.images == NULL && d_.labels == NULL && d_.count == 0, "out zeroed on error"); \
    } while (0)

static void test_errors(void) {
    const char *ip = images("img", 0x803, 5, 3, 4, 60, 0);
    const char *lp = labels("lab", 0x801, 5, LAB, 5, 0);
    char msg[512];

    /* missing files */
    const char *nope = path_of("nope.gz");
    snprintf(msg, sizeof msg, "cannot open '%s': No such file or directory", nope);
    LOAD_ERR(nope, lp, 0, msg);
    LOAD_ERR(ip, nope, 0, msg);
    LOAD_ERR(dir, lp, 0, dir); /* a directory: open or read error naming it */

    /* wrong magic */
    const char *wm = images("wrongmagic", 0x801, 5, 3, 4, 60, 0);
    snprintf(msg, sizeof msg, "'%s': bad magic 0x00000801, expected 0x00000803", wm);
    LOAD_ERR(wm, lp, 0, msg);
    LOAD_ERR(wm, lp, 0, "looks like an IDX label file");
    LOAD_ERR(ip, ip, 0, "bad magic 0x00000803, expected 0x00000801");
    const char *junk = labels("junk.gz", 0x12345678, 5, LAB, 5, 1);
    LOAD_ERR(ip, junk, 0, "bad magic 0x12345678, expected 0x00000801 (IDX label file");

    /* truncated header / data */
    const char *empty = write_file("empty", buf, 0, 0);
    LOAD_ERR(empty, lp, 0, "truncated header: expected 16 bytes, got 0");
    images("tmp", 0x803, 5, 3, 4, 0, 0); /* 16 bytes of header in buf */
    const char *th = write_file("trunc_header", buf, 10, 0);
    snprintf(msg, sizeof msg, "'%s': truncated header: expected 16 bytes, got 10", th);
    LOAD_ERR(th, lp, 0, msg);
    const char *td = images("trunc_data", 0x803, 5, 3, 4, 50, 0);
    snprintf(msg, sizeof msg, "'%s': truncated file: expected 60 bytes of image data, got 50", td);
    LOAD_ERR(td, lp, 0, msg);
    const char *tdz = images("trunc_data.gz", 0x803, 5, 3, 4, 50, 1);
    LOAD_ERR(tdz, lp, 0, "truncated file: expected 60 bytes of image data, got 50");
    const char *tl = labels("trunc_lab", 0x801, 5, LAB, 3, 0);
    LOAD_ERR(ip, tl, 0, "truncated file: expected 5 bytes of label data, got 3");
    /* a gzip stream cut short: fewer bytes than announced, whatever zlib says */
    {
        static const uint8_t zeros[200];
        const char *l200 = labels("lab200", 0x801, 200, zeros, 200, 0); /* before buf is reused */
        const char *full = images("full.gz", 0x803, 200, 28, 28, 200 * 784, 1);
        FILE *f = fopen(full, "rb");
        size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
        if (f) fclose(f);
        CHECK(n > 100, "read back %s", full);
        const char *cut = write_file("cut.gz", buf, n / 2, 0);
        LOAD_ERR(cut, l200, 0, "expected 156800 bytes of image data, got");
        /* corrupt the gzip CRC: everything decompresses, the check fails */
        buf[n - 6] ^= 0xff;
        const char *crc = write_file("crc.gz", buf, n, 0);
        snprintf(msg, sizeof msg, "'%s': corrupt", crc);
        LOAD_ERR(crc, l200, 0, msg);
        LOAD_ERR(crc, l200, 0, "incorrect data check");
    }
    /* a huge announced count fails as truncated, without allocating it */
    const char *huge = images("huge", 0x803, 0x7fffffffu, 1, 1, 100, 0);
    const char *lhuge = labels("lab_huge", 0x801, 0x7fffffffu, LAB, 5, 0);
    LOAD_ERR(huge, lhuge, 0, "expected 2147483647 bytes of image data, got 100");
    /* trailing data */
    const char *tr = images("trailing", 0x803, 5, 3, 4, 61, 0);
    snprintf(msg, sizeof msg, "'%s': unexpected trailing data after the 60 bytes", tr);
    LOAD_ERR(tr, lp, 0, msg);

    /* absurd dimensions */
    LOAD_ERR(images("zero_rows", 0x803, 5, 0, 4, 0, 0), lp, 0, "absurd image dimensions 5 x 0 x 4");
    LOAD_ERR(images("wide", 0x803, 5, 3, 70000, 0, 0), lp, 0, "absurd image dimensions 5 x 3 x 70000");
    LOAD_ERR(images("zero_count", 0x803, 0, 3, 4, 0, 0), lp, 0, "absurd image dimensions 0 x 3 x 4");
    LOAD_ERR(images("neg_count", 0x803, 0x80000000u, 3, 4, 0, 0), lp, 0, "absurd image dimensions");

    /* count mismatch */
    const char *l4 = labels("lab4", 0x801, 4, LAB, 4, 0);
    snprintf(msg, sizeof msg, "count mismatch: '%s' has 5 images but '%s' has 4 labels", ip, l4);
    LOAD_ERR(ip, l4, 0, msg);

    /* label out of range for declared classes */
    const uint8_t big[5] = {3, 1, 12, 1, 5};
    const char *lb = labels("lab_big", 0x801, 5, big, 5, 0);
    snprintf(msg, sizeof msg, "'%s': label 12 of sample 2 is out of range for 10 classes", lb);
    LOAD_ERR(ip, lb, 10, msg);
    dt_dataset d;
    CHECK_OK(dt_idx_load(ip, lb, &d));
    CHECK(d.num_classes == 13, "computed classes with label 12");
    dt_dataset_free(&d);
    CHECK_ERR(dt_idx_load_ex(ip, lp, 300, &d), DT_ERR_INVALID, "num_classes=300");
    CHECK_ERR(dt_idx_load(NULL, lp, &d), DT_ERR_INVALID, "NULL");
    CHECK_ERR(dt_idx_load(ip, lp, NULL), DT_ERR_INVALID, "NULL");
}

static void test_fashion_dir(void) {
    dt_dataset d;
    /* 3 samples of 28 x 28 under the Fashion-MNIST names, gzip for train ... */
    const uint8_t lab[3] = {9, 0, 3};
    images("train-images-idx3-ubyte.gz", 0x803, 3, 28, 28, 3 * 784, 1);
    labels("train-labels-idx1-ubyte.gz", 0x801, 3, lab, 3, 1);
    CHECK_OK(dt_fashion_mnist_load(dir, 1, &d));
    CHECK(d.count == 3 && d.rows == 28 && d.cols == 28 && d.num_classes == 10 &&
              d.labels[0] == 9 && d.images[783] == (uint8_t)(783 * 37 + 11), "fashion dir (gz)");
    dt_dataset_free(&d);
    /* ... test set missing ... */
    snprintf((char *)buf, sizeof buf, "cannot open '%s/t10k-images-idx3-ubyte.gz'", dir);
    CHECK_ERR(dt_fashion_mnist_load(dir, 0, &d), DT_ERR_IO, (char *)buf);
    /* ... then present uncompressed (the fallback name) */
    images("t10k-images-idx3-ubyte", 0x803, 3, 28, 28, 3 * 784, 0);
    labels("t10k-labels-idx1-ubyte", 0x801, 3, lab, 3, 0);
    CHECK_OK(dt_fashion_mnist_load(dir, 0, &d));
    CHECK(d.count == 3 && d.labels[2] == 3, "fashion dir (plain)");
    dt_dataset_free(&d);
    /* wrong image size and an 11th class */
    images("t10k-images-idx3-ubyte", 0x803, 3, 28, 27, 3 * 756, 0);
    CHECK_ERR(dt_fashion_mnist_load(dir, 0, &d), DT_ERR_IO, "must be 28 x 28, got 28 x 27");
    CHECK(d.images == NULL, "zeroed after the size error");
    const uint8_t lab11[3] = {9, 10, 3};
    labels("train-labels-idx1-ubyte.gz", 0x801, 3, lab11, 3, 1);
    CHECK_ERR(dt_fashion_mnist_load(dir, 1, &d), DT_ERR_IO,
              "label 10 of sample 1 is out of range for 10 classes");
}

int main(void) {
    snprintf(dir, sizeof dir, "%s", "/tmp/dtrain_idx_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_load_ok();
    test_errors();
    test_fashion_dir();
    for (int i = 0; i < nmade; i++) unlink(made[i]);
    CHECK(rmdir(dir) == 0, "temp dir %s removed (all files cleaned up)", dir);
    return dt_test_finish("data_idx");
}
