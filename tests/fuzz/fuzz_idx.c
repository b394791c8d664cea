/* tests/fuzz/fuzz_idx.c - the IDX reader (dtrain/data.h: dt_idx_load_ex).
 *
 * Input layout:
 *   byte 0      flags: bits 0-3 num_classes (0..15; 0 = computed), bit 6 gzip the
 *               label file, bit 7 gzip the image file
 *   bytes 1-2   k, little-endian: the image file gets the next min(k, rest) bytes
 *   rest        image file bytes, then label file bytes
 * Both files are written to a private temporary directory and loaded. On success
 * the dataset must be consistent (dimensions in range, labels < num_classes) and
 * is batched, subset and freed; on failure a message must have been recorded and
 * the output zeroed. */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include "dtrain/data.h"
#include "dtrain/status.h"
#include "fuzz_common.h"

static char g_dir[64], g_img[96], g_lbl[96];

static void cleanup(void) {
    if (!g_dir[0]) return;
    unlink(g_img);
    unlink(g_lbl);
    rmdir(g_dir);
}

static void setup(void) {
    if (g_dir[0]) return;
    /* tmpfs when there is one: a file system round trip per input is the cost */
    snprintf(g_dir, sizeof g_dir, "%s/dt_fuzz_idx_XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(g_dir)) { perror("mkdtemp"); abort(); }
    snprintf(g_img, sizeof g_img, "%s/images", g_dir);
    snprintf(g_lbl, sizeof g_lbl, "%s/labels", g_dir);
    atexit(cleanup);
}

static void write_file(const char *path, const uint8_t *p, size_t n, int gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb1");
        if (!f) abort();
        if (n && gzwrite(f, p, (unsigned)n) != (int)n) abort();
        if (gzclose(f) != Z_OK) abort();
        return;
    }
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(p, 1, n, f) != n) abort();
    if (fclose(f) != 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    setup();
    const int flags = data[0];
    const int num_classes = flags & 15;
    size_t k = (size_t)data[1] | (size_t)data[2] << 8;
    const uint8_t *rest = data + 3;
    size_t n = size - 3;
    if (k > n) k = n;
    write_file(g_img, rest, k, flags & 0x80);
    write_file(g_lbl, rest + k, n - k, flags & 0x40);

    dt_dataset ds;
    memset(&ds, 0x5a, sizeof ds);
    dt_clear_error();
    int rc = dt_idx_load_ex(g_img, g_lbl, num_classes, &ds);
    if (rc != DT_OK) {
        FUZZ_CHECK(rc < 0, "status %d", rc);
        FUZZ_CHECK(dt_last_error()[0] != '\0', "failure without a message (status %d)", rc);
        FUZZ_CHECK(ds.images == NULL && ds.labels == NULL && ds.count == 0, "output not zeroed on failure");
        return 0;
    }
    FUZZ_CHECK(ds.count >= 1 && ds.rows >= 1 && ds.cols >= 1 && ds.rows <= 16384 && ds.cols <= 16384,
               "dims %lld x %d x %d", (long long)ds.count, ds.rows, ds.cols);
    FUZZ_CHECK(ds.num_classes >= 1 && ds.num_classes <= 256, "num_classes %d", ds.num_classes);
    if (num_classes) FUZZ_CHECK(ds.num_classes == num_classes, "num_classes %d, declared %d", ds.num_classes, num_classes);
    for (int64_t i = 0; i < ds.count; i++)
        FUZZ_CHECK(ds.labels[i] < ds.num_classes, "label %d of %lld >= %d", ds.labels[i], (long long)i, ds.num_classes);
    /* touch every pixel: a short image buffer shows up under ASan / valgrind */
    unsigned sum = 0;
    for (int64_t i = 0; i < ds.count * ds.rows * ds.cols; i++) sum += ds.images[i];
    (void)sum;

    /* batch the first and last samples (small images only, to keep runs fast) */
    if ((int64_t)ds.rows * ds.cols <= 4096) {
        int64_t idx[2] = {0, ds.count - 1};
        float *x = malloc(sizeof(float) * 2 * (size_t)ds.rows * (size_t)ds.cols);
        int32_t y[2];
        FUZZ_CHECK(x != NULL, "malloc");
        FUZZ_CHECK(dt_dataset_batch(&ds, idx, 2, x, y, NULL) == DT_OK, "batch: %s", dt_last_error());
        FUZZ_CHECK(y[0] == ds.labels[0] && y[1] == ds.labels[ds.count - 1], "batch labels");
        idx[1] = ds.count; /* out of range: must be refused */
        FUZZ_CHECK(dt_dataset_batch(&ds, idx, 2, x, y, NULL) == DT_ERR_INVALID, "index out of range accepted");
        free(x);
    }
    dt_dataset sub;
    FUZZ_CHECK(dt_dataset_subset(&ds, 1, &sub) == DT_OK, "subset: %s", dt_last_error());
    FUZZ_CHECK(sub.count == 1 && sub.labels[0] == ds.labels[0], "subset content");
    dt_dataset_free(&sub);
    dt_dataset_free(&ds);
    FUZZ_CHECK(ds.images == NULL && ds.count == 0, "dt_dataset_free did not zero");
    return 0;
}
