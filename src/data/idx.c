/* src/data/idx.c - IDX file reader (MNIST / Fashion-MNIST format), gzip or
 * plain (zlib's gzread passes uncompressed files through unchanged).
 *
 * IDX: a big-endian header, magic 0x0000TTDD (TT = element type, 0x08 for
 * unsigned bytes; DD = number of dimensions), then DD big-endian u32 sizes,
 * then the elements row-major. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "core/error.h"
#include "dtrain/data.h"

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_MAX_SIDE 16384u
#define IDX_MAX_COUNT 0x7fffffffu
#define READ_CHUNK (1u << 30)

/* Errors from the helpers are reported under the public entry point's name. */
#define IDX_ERR(status, ...) dt_error((status), "dt_idx_load", __VA_ARGS__)

/* Message for the last zlib error on f (errno text for system errors), without
 * the "path: " prefix zlib puts in front. */
static const char *gz_msg(gzFile f, const char *path, int *code) {
    int err = Z_OK;
    const char *m = gzerror(f, &err);
    if (code) *code = err;
    if (err == Z_ERRNO) return strerror(errno);
    if (!m || !*m) return "unknown zlib error";
    size_t pl = strlen(path);
    if (strncmp(m, path, pl) == 0 && m[pl] == ':' && m[pl + 1] == ' ') m += pl + 2;
    return m;
}

static int open_file(const char *path, gzFile *out) {
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return IDX_ERR(DT_ERR_IO, "cannot open '%s': %s", path,
                      errno ? strerror(errno) : "gzopen failed (out of memory)");
    gzbuffer(f, 1u << 17);
    *out = f;
    return DT_OK;
}

/* Read up to len bytes; *got receives the count. DT_ERR_IO on a read error. */
static int read_some(gzFile f, const char *path, const char *what, void *buf, uint64_t len,
                     uint64_t *got) {
    *got = 0;
    while (*got < len) {
        uint64_t want = len - *got;
        unsigned chunk = want > READ_CHUNK ? READ_CHUNK : (unsigned)want;
        int r = gzread(f, (unsigned char *)buf + *got, chunk);
        if (r < 0)
            return IDX_ERR(DT_ERR_IO, "'%s': corrupt or unreadable file (in the %s, after %llu bytes): %s", path, what,
                          (unsigned long long)*got, gz_msg(f, path, NULL));
        if (r == 0) break;
        *got += (uint64_t)r;
    }
    return DT_OK;
}

/* Reads and checks the header; dims receives the (magic & 0xff) sizes. */
static int read_header(gzFile f, const char *path, uint32_t want_magic, const char *what,
                       uint32_t *dims) {
    const int ndims = (int)(want_magic & 0xffu);
    unsigned char h[4 + 4 * 3];
    const uint64_t hlen = 4 + 4 * (uint64_t)ndims;
    uint64_t got = 0;
    int rc = read_some(f, path, "header", h, hlen, &got);
    if (rc != DT_OK) return rc;
    if (got < 4)
        return IDX_ERR(DT_ERR_IO, "'%s': truncated header: expected %llu bytes, got %llu (empty or "
                      "not an IDX file)", path, (unsigned long long)hlen, (unsigned long long)got);
    uint32_t magic = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
    if (magic != want_magic) {
        const char *hint = "";
        if (magic == IDX_MAGIC_IMAGES) hint = "; this looks like an IDX image file";
        else if (magic == IDX_MAGIC_LABELS) hint = "; this looks like an IDX label file";
        return IDX_ERR(DT_ERR_IO, "'%s': bad magic 0x%08x, expected 0x%08x (IDX %s file: unsigned "
                      "bytes, %d dimension%s)%s", path, (unsigned)magic, (unsigned)want_magic,
                      what, ndims, ndims == 1 ? "" : "s", hint);
    }
    if (got < hlen)
        return IDX_ERR(DT_ERR_IO, "'%s': truncated header: expected %llu bytes, got %llu", path,
                      (unsigned long long)hlen, (unsigned long long)got);
    for (int d = 0; d < ndims; d++) {
        const unsigned char *p = h + 4 + 4 * d;
        dims[d] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    }
    return DT_OK;
}

/* Reads exactly len data bytes into a new buffer (grown as data arrives, so a
 * corrupt header announcing a huge size fails as truncated, not by allocating
 * it), then checks that the file ends there. */
static int read_data(gzFile f, const char *path, const char *what, uint64_t len, uint8_t **out) {
    *out = NULL;
    uint64_t cap = len < (1u << 20) ? len : (1u << 20), got = 0;
    uint8_t *buf = malloc(cap ? (size_t)cap : 1);
    if (!buf) return IDX_ERR(DT_ERR_NOMEM, "'%s': cannot allocate %llu bytes", path,
                            (unsigned long long)cap);
    while (got < len) {
        if (got == cap) {
            uint64_t ncap = cap * 2 < len ? cap * 2 : len;
            uint8_t *nb = (ncap <= SIZE_MAX) ? realloc(buf, (size_t)ncap) : NULL;
            if (!nb) {
                free(buf);
                return IDX_ERR(DT_ERR_NOMEM, "'%s': cannot allocate %llu bytes for %s data", path,
                              (unsigned long long)ncap, what);
            }
            buf = nb;
            cap = ncap;
        }
        uint64_t n = 0;
        char phrase[32];
        snprintf(phrase, sizeof phrase, "%s data", what);
        int rc = read_some(f, path, phrase, buf + got, cap - got, &n);
        if (rc != DT_OK) {
            free(buf);
            return rc;
        }
        got += n;
        if (got < cap) break; /* end of file */
    }
    if (got < len) {
        int code = Z_OK;
        const char *m = gz_msg(f, path, &code);
        free(buf);
        return IDX_ERR(DT_ERR_IO, "'%s': truncated file: expected %llu bytes of %s data, got %llu%s%s",
                      path, (unsigned long long)len, what, (unsigned long long)got,
                      code != Z_OK ? "; zlib: " : "", code != Z_OK ? m : "");
    }
    unsigned char extra[1];
    int r = gzread(f, extra, 1);
    if (r != 0) {
        int code = Z_OK;
        const char *m = r < 0 ? gz_msg(f, path, &code) : "";
        free(buf);
        if (r < 0)
            return IDX_ERR(DT_ERR_IO, "'%s': corrupt file after the %llu bytes of %s data: %s",
                          path, (unsigned long long)len, what, m);
        return IDX_ERR(DT_ERR_IO, "'%s': unexpected trailing data after the %llu bytes of %s data "
                      "announced by the header", path, (unsigned long long)len, what);
    }
    *out = buf;
    return DT_OK;
}

int dt_idx_load_ex(const char *images_path, const char *labels_path, int num_classes,
                   dt_dataset *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!images_path || !labels_path || !out)
        return DT_ERR(DT_ERR_INVALID, "images_path, labels_path or out is NULL");
    if (num_classes < 0 || num_classes > 256)
        return DT_ERR(DT_ERR_INVALID, "num_classes=%d must be in [1, 256] (or 0 to compute it)",
                      num_classes);

    gzFile fi = NULL, fl = NULL;
    uint8_t *images = NULL, *labels = NULL;
    uint32_t idims[3] = {0, 0, 0}, ldims[1] = {0};
    int rc = open_file(images_path, &fi);
    if (rc == DT_OK) rc = read_header(fi, images_path, IDX_MAGIC_IMAGES, "image", idims);
    if (rc != DT_OK) goto done;
    if (idims[0] == 0 || idims[0] > IDX_MAX_COUNT || idims[1] == 0 || idims[1] > IDX_MAX_SIDE ||
        idims[2] == 0 || idims[2] > IDX_MAX_SIDE) {
        rc = DT_ERR(DT_ERR_IO, "'%s': absurd image dimensions %u x %u x %u (count must be in "
                    "[1, %u], rows and cols in [1, %u])", images_path, (unsigned)idims[0],
                    (unsigned)idims[1], (unsigned)idims[2], IDX_MAX_COUNT, IDX_MAX_SIDE);
        goto done;
    }
    rc = open_file(labels_path, &fl);
    if (rc == DT_OK) rc = read_header(fl, labels_path, IDX_MAGIC_LABELS, "label", ldims);
    if (rc != DT_OK) goto done;
    if (ldims[0] != idims[0]) {
        rc = DT_ERR(DT_ERR_IO, "count mismatch: '%s' has %u images but '%s' has %u labels",
                    images_path, (unsigned)idims[0], labels_path, (unsigned)ldims[0]);
        goto done;
    }
    const uint64_t count = idims[0];
    rc = read_data(fi, images_path, "image", count * idims[1] * idims[2], &images);
    if (rc == DT_OK) rc = read_data(fl, labels_path, "label", count, &labels);
    if (rc != DT_OK) goto done;

    int maxl = 0;
    for (uint64_t i = 0; i < count; i++) {
        if (num_classes > 0 && labels[i] >= num_classes) {
            rc = DT_ERR(DT_ERR_IO, "'%s': label %d of sample %llu is out of range for %d classes",
                        labels_path, labels[i], (unsigned long long)i, num_classes);
            goto done;
        }
        if (labels[i] > maxl) maxl = labels[i];
    }
    out->count = (int64_t)count;
    out->rows = (int)idims[1];
    out->cols = (int)idims[2];
    out->num_classes = num_classes > 0 ? num_classes : maxl + 1;
    out->images = images;
    out->labels = labels;
    images = labels = NULL;
done:
    free(images);
    free(labels);
    if (fi) gzclose(fi);
    if (fl) gzclose(fl);
    return rc;
}

int dt_idx_load(const char *images_path, const char *labels_path, dt_dataset *out) {
    return dt_idx_load_ex(images_path, labels_path, 0, out);
}

/* dir/name.gz if it exists, else dir/name. */
static int pick(char *buf, size_t cap, const char *dir, const char *name) {
    int n = snprintf(buf, cap, "%s/%s.gz", dir, name);
    if (n < 0 || (size_t)n >= cap) return DT_ERR(DT_ERR_INVALID, "directory name too long: '%s'", dir);
    if (access(buf, F_OK) != 0) {
        char plain[4096];
        snprintf(plain, sizeof plain, "%s/%s", dir, name);
        if (access(plain, F_OK) == 0) memcpy(buf, plain, strlen(plain) + 1);
    }
    return DT_OK;
}

int dt_fashion_mnist_load(const char *dir, int train, dt_dataset *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!out) return DT_ERR(DT_ERR_INVALID, "out is NULL");
    if (!dir) dir = DT_FASHION_MNIST_DIR;
    const char *set = train ? "train" : "t10k";
    char img[4096], lbl[4096], name[64];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", set);
    int rc = pick(img, sizeof img, dir, name);
    if (rc != DT_OK) return rc;
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", set);
    rc = pick(lbl, sizeof lbl, dir, name);
    if (rc != DT_OK) return rc;
    rc = dt_idx_load_ex(img, lbl, DT_FASHION_MNIST_CLASSES, out);
    if (rc != DT_OK) return rc;
    if (out->rows != 28 || out->cols != 28) {
        int r = out->rows, c = out->cols;
        dt_dataset_free(out);
        return DT_ERR(DT_ERR_IO, "'%s': Fashion-MNIST images must be 28 x 28, got %d x %d", img, r,
                      c);
    }
    return DT_OK;
}
