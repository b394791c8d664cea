/* src/data/text.c - text datasets: loading a byte corpus (a file or a
 * directory) or llm.c's token shards (data/shards.c), the train/validation
 * split by position, and windows drawn as a pure function of (seed, split,
 * T, global sample index) through a keyed permutation (see dtrain/text.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "data/shards.h"
#include "dtrain/text.h"

#define MAX_CORPUS ((int64_t)1 << 40)

/* ---- loading ------------------------------------------------------------------- */

static int grow(uint8_t **buf, int64_t *cap, int64_t need) {
    if (need <= *cap) return DT_OK;
    int64_t nc = *cap ? *cap : 1 << 16;
    while (nc < need) nc *= 2;
    uint8_t *nb = realloc(*buf, (size_t)nc);
    if (!nb) return DT_ERR(DT_ERR_NOMEM, "out of memory for %lld bytes of text", (long long)need);
    *buf = nb;
    *cap = nc;
    return DT_OK;
}

/* Append the bytes of a file whose size stat does not know (st_size 0: /proc,
 * /sys and some FUSE files have bytes all the same) to *buf: read to its end,
 * at most MAX_CORPUS bytes in all. */
static int read_unsized(const char *path, FILE *f, uint8_t **buf, int64_t *len, int64_t *cap) {
    for (;;) {
        int rc = grow(buf, cap, *len + (1 << 16) + 1);
        if (rc) return rc;
        size_t got = fread(*buf + *len, 1, (size_t)(*cap - *len - 1), f);
        *len += (int64_t)got;
        if (*len > MAX_CORPUS)
            return DT_ERR(DT_ERR_INVALID, "%s: more than %lld bytes", path, (long long)MAX_CORPUS);
        if (got == 0) break;
    }
    return ferror(f) ? DT_ERR(DT_ERR_IO, "%s: read error after %lld bytes", path, (long long)*len) : DT_OK;
}

/* Append the bytes of file `path` (st_size bytes expected; 0: not known, read
 * to the end) to *buf. */
static int read_file(const char *path, int64_t expect, uint8_t **buf, int64_t *len,
                     int64_t *cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return DT_ERR(DT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    if (expect == 0) {
        int rc = read_unsized(path, f, buf, len, cap);
        fclose(f);
        return rc;
    }
    int rc = grow(buf, cap, *len + expect + 1);
    if (rc) {
        fclose(f);
        return rc;
    }
    size_t got = fread(*buf + *len, 1, (size_t)expect, f);
    int err = ferror(f);
    /* a file that grew since stat: the rest is not read (the size was agreed) */
    fclose(f);
    if (err || (int64_t)got != expect)
        return DT_ERR(DT_ERR_IO, "%s: read %zu of %lld bytes", path, got, (long long)expect);
    *len += expect;
    return DT_OK;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The usable file names of directory `dir`, sorted; *names owned by caller. */
static int list_dir(const char *dir, char ***names, int *n) {
    DIR *d = opendir(dir);
    if (!d) return DT_ERR(DT_ERR_IO, "cannot open directory %s: %s", dir, strerror(errno));
    int cap = 0, rc = DT_OK;
    *names = NULL;
    *n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *nm = e->d_name;
        if (nm[0] == '.' || ends_with(nm, ".dat") || ends_with(nm, ".u8")) continue;
        if (*n == cap) {
            int nc = cap ? 2 * cap : 64;
            char **t = realloc(*names, (size_t)nc * sizeof *t);
            if (!t) {
                rc = DT_ERR(DT_ERR_NOMEM, "out of memory listing %s", dir);
                break;
            }
            *names = t;
            cap = nc;
        }
        if (!((*names)[*n] = strdup(nm))) {
            rc = DT_ERR(DT_ERR_NOMEM, "out of memory listing %s", dir);
            break;
        }
        (*n)++;
    }
    closedir(d);
    if (!rc && *n > 1) qsort(*names, (size_t)*n, sizeof **names, cmp_str);
    return rc;
}

int dt_text_is_tokens(const char *path) { return dt_shards_detect(path); }

/* llm.c's token shards: the stream is the mapped files (training shards, then
 * validation shards); split by val_fraction when no validation shard is named. */
static int load_tokens(const char *path, double val_fraction, dt_text_dataset *out) {
    struct dt_text_shards *sh = NULL;
    int64_t ntrain = 0, total = 0;
    int rc = dt_shards_open(path, &sh, &ntrain, &total);
    if (rc) return rc;
    const int named_val = ntrain < total;
    const int64_t val = named_val ? total - ntrain : (int64_t)((double)total * val_fraction), train = total - val;
    if (train < 2 || ((named_val || val_fraction > 0.0) && val < 2)) {
        dt_shards_free(sh);
        return DT_ERR(DT_ERR_INVALID,
                      "token shards %s are too short: %lld tokens give a training split of %lld and a validation "
                      "split of %lld tokens (each needs at least 2)",
                      path, (long long)total, (long long)train, (long long)val);
    }
    out->shards = sh;
    out->size = total;
    out->train_size = train;
    out->nfiles = sh->n;
    out->vocab_size = DT_TEXT_GPT2_VOCAB;
    return DT_OK;
}

int dt_text_load(const char *path, double val_fraction, dt_text_dataset *out) {
    if (!out) return DT_ERR(DT_ERR_INVALID, "out is NULL");
    memset(out, 0, sizeof *out);
    if (!path) path = DT_FORTUNES_DIR;
    if (!(val_fraction >= 0.0 && val_fraction < 1.0))
        return DT_ERR(DT_ERR_INVALID, "validation fraction %g must be in [0, 1)", val_fraction);
    int tok = dt_shards_detect(path);
    if (tok < 0) return tok;
    if (tok) return load_tokens(path, val_fraction, out);
    struct stat st;
    if (stat(path, &st) != 0)
        return DT_ERR(DT_ERR_IO, "cannot read text corpus %s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    int64_t len = 0, cap = 0;
    int rc = DT_OK, nfiles = 0;
    if (S_ISREG(st.st_mode)) {
        if (st.st_size > MAX_CORPUS)
            return DT_ERR(DT_ERR_INVALID, "%s: %lld bytes is too large", path,
                          (long long)st.st_size);
        rc = read_file(path, (int64_t)st.st_size, &buf, &len, &cap);
        nfiles = 1;
    } else if (S_ISDIR(st.st_mode)) {
        char **names = NULL;
        int n = 0;
        rc = list_dir(path, &names, &n);
        char full[4096];
        for (int i = 0; !rc && i < n; i++) {
            int w = snprintf(full, sizeof full, "%s/%s", path, names[i]);
            if (w < 0 || (size_t)w >= sizeof full) {
                rc = DT_ERR(DT_ERR_IO, "path %s/%s too long", path, names[i]);
                break;
            }
            struct stat fs;
            if (stat(full, &fs) != 0) {
                rc = DT_ERR(DT_ERR_IO, "cannot read %s: %s", full, strerror(errno));
                break;
            }
            if (!S_ISREG(fs.st_mode)) continue; /* subdirectories, devices, ... */
            if (len + (int64_t)fs.st_size > MAX_CORPUS) {
                rc = DT_ERR(DT_ERR_INVALID, "corpus %s is too large (over %lld bytes)", path,
                            (long long)MAX_CORPUS);
                break;
            }
            rc = read_file(full, (int64_t)fs.st_size, &buf, &len, &cap);
            nfiles++;
        }
        for (int i = 0; i < n; i++) free(names[i]);
        free(names);
    } else {
        return DT_ERR(DT_ERR_IO, "text corpus %s is neither a file nor a directory", path);
    }
    if (!rc && len == 0)
        rc = DT_ERR(DT_ERR_INVALID, "text corpus %s is empty: no bytes in %d file(s)", path,
                    nfiles);
    const int64_t val = (int64_t)((double)len * val_fraction), train = len - val;
    if (!rc && (train < 2 || (val_fraction > 0.0 && val < 2)))
        rc = DT_ERR(DT_ERR_INVALID,
                    "text corpus %s is too short: %lld bytes give a training split of %lld and "
                    "a validation split of %lld bytes (each needs at least 2)",
                    path, (long long)len, (long long)train, (long long)val);
    if (rc) {
        free(buf);
        return rc;
    }
    out->data = buf;
    out->size = len;
    out->train_size = train;
    out->nfiles = nfiles;
    out->vocab_size = 256;
    return DT_OK;
}

void dt_text_free(dt_text_dataset *ds) {
    if (!ds) return;
    free(ds->data);
    dt_shards_free(ds->shards);
    memset(ds, 0, sizeof *ds);
}

int dt_text_split_range(const dt_text_dataset *ds, int split, int64_t *offset, int64_t *size) {
    if (!ds || (!ds->data && !ds->shards)) return DT_ERR(DT_ERR_INVALID, "dataset is NULL or not loaded");
    if (split != DT_TEXT_TRAIN && split != DT_TEXT_VAL)
        return DT_ERR(DT_ERR_INVALID, "split %d is not DT_TEXT_TRAIN (0) or DT_TEXT_VAL (1)",
                      split);
    if (offset) *offset = split == DT_TEXT_TRAIN ? 0 : ds->train_size;
    if (size) *size = split == DT_TEXT_TRAIN ? ds->train_size : ds->size - ds->train_size;
    return DT_OK;
}

/* The split's first token in the stream and its size, checked to hold
 * windows of T. */
static int split_for(const dt_text_dataset *ds, int split, int T, int64_t *base,
                     int64_t *size, const char *fn) {
    int64_t off = 0, sz = 0;
    int rc = dt_text_split_range(ds, split, &off, &sz);
    if (rc) return rc;
    const char *nm = split == DT_TEXT_TRAIN ? "training" : "validation";
    if (T < 1) return dt_error(DT_ERR_INVALID, fn, "block size T=%d must be >= 1", T);
    if (sz < (int64_t)T + 1)
        return dt_error(DT_ERR_INVALID, fn,
                        "block size T=%d needs T+1 = %lld %s, the %s split has only %lld", T,
                        (long long)T + 1, ds->data ? "bytes" : "tokens", nm, (long long)sz);
    if (base) *base = off;
    if (size) *size = sz;
    return DT_OK;
}

int64_t dt_text_num_windows(const dt_text_dataset *ds, int split, int T) {
    int64_t sz = 0;
    int rc = split_for(ds, split, T, NULL, &sz, __func__);
    return rc ? rc : sz - T;
}

/* ---- the keyed permutation ------------------------------------------------------------ */

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A bijection of [0, n) keyed by key: a 4-round balanced Feistel network on
 * the smallest domain of 2^(2h) >= n values, cycle-walked into [0, n). */
static uint64_t permute(uint64_t i, uint64_t n, uint64_t key) {
    int h = 1;
    while (h < 32 && ((uint64_t)1 << (2 * h)) < n) h++;
    const uint64_t mask = ((uint64_t)1 << h) - 1;
    do {
        uint64_t l = i >> h, r = i & mask;
        for (uint64_t round = 0; round < 4; round++) {
            uint64_t f = mix64(r ^ mix64(key + round * 0x9e3779b97f4a7c15ull)) & mask;
            uint64_t t = r;
            r = l ^ f;
            l = t;
        }
        i = (l << h) | r;
    } while (i >= n);
    return i;
}

int dt_text_window_start(const dt_text_dataset *ds, int split, int T, uint64_t seed, uint64_t g,
                         int64_t *start) {
    if (!start) return DT_ERR(DT_ERR_INVALID, "start is NULL");
    int64_t sz = 0;
    int rc = split_for(ds, split, T, NULL, &sz, __func__);
    if (rc) return rc;
    const uint64_t w = (uint64_t)(sz - T), epoch = g / w, pos = g % w;
    const uint64_t key = mix64(mix64(seed ^ 0x74657874ull) ^ ((uint64_t)split << 56) ^
                               (uint64_t)T * 0x2545f4914f6cdd1dull) ^
                         mix64(epoch + 0x632be59bd9b4e019ull);
    *start = (int64_t)permute(pos, w, key);
    return DT_OK;
}

/* The window of the stream's tokens [p, p + T] as x and y. */
static int copy_window(const dt_text_dataset *ds, int64_t p, int T, int32_t *x, int32_t *y) {
    if (ds->data) {
        const uint8_t *b = ds->data + p;
        for (int t = 0; t < T; t++) {
            x[t] = b[t];
            y[t] = b[t + 1];
        }
        return DT_OK;
    }
    int rc = dt_shards_read(ds->shards, p, T, ds->vocab_size, x);
    if (!rc) rc = dt_shards_read(ds->shards, p + T, 1, ds->vocab_size, y + T - 1);
    for (int t = 0; !rc && t < T - 1; t++) y[t] = x[t + 1];
    return rc;
}

int dt_text_batch(const dt_text_dataset *ds, int split, int T, uint64_t seed, uint64_t first,
                  int B, int32_t *x, int32_t *y) {
    if (!x || !y) return DT_ERR(DT_ERR_INVALID, "x or y is NULL");
    if (B < 1) return DT_ERR(DT_ERR_INVALID, "batch size B=%d must be >= 1", B);
    int64_t base = 0;
    int rc = split_for(ds, split, T, &base, NULL, __func__);
    if (rc) return rc;
    for (int b = 0; b < B; b++) {
        int64_t s = 0;
        if ((rc = dt_text_window_start(ds, split, T, seed, first + (uint64_t)b, &s))) return rc;
        if ((rc = copy_window(ds, base + s, T, x + (size_t)b * (size_t)T, y + (size_t)b * (size_t)T))) return rc;
    }
    return DT_OK;
}

int dt_text_rank_first(uint64_t batch_first, int global_batch, int rank, int world,
                       uint64_t *first) {
    if (!first) return DT_ERR(DT_ERR_INVALID, "first is NULL");
    if (world < 1 || rank < 0 || rank >= world)
        return DT_ERR(DT_ERR_INVALID, "rank %d is not in [0, world=%d)", rank, world);
    if (global_batch < 1 || global_batch % world != 0)
        return DT_ERR(DT_ERR_INVALID,
                      "global batch %d is not a positive multiple of the %d ranks",
                      global_batch, world);
    *first = batch_first + (uint64_t)rank * (uint64_t)(global_batch / world);
    return DT_OK;
}

int64_t dt_text_num_eval_windows(const dt_text_dataset *ds, int split, int T) {
    int64_t sz = 0;
    int rc = split_for(ds, split, T, NULL, &sz, __func__);
    return rc ? rc : (sz - 1) / T;
}

int dt_text_eval_batch(const dt_text_dataset *ds, int split, int T, int64_t first, int B,
                       int32_t *x, int32_t *y) {
    if (!x || !y) return DT_ERR(DT_ERR_INVALID, "x or y is NULL");
    if (B < 1) return DT_ERR(DT_ERR_INVALID, "batch size B=%d must be >= 1", B);
    int64_t base = 0, sz = 0;
    int rc = split_for(ds, split, T, &base, &sz, __func__);
    if (rc) return rc;
    const int64_t n = (sz - 1) / T;
    if (first < 0 || first > n - B)
        return DT_ERR(DT_ERR_INVALID, "evaluation windows [%lld, %lld) outside [0, %lld)",
                      (long long)first, (long long)first + B, (long long)n);
    for (int b = 0; b < B && !rc; b++)
        rc = copy_window(ds, base + (first + b) * (int64_t)T, T, x + (size_t)b * (size_t)T,
                         y + (size_t)b * (size_t)T);
    return rc;
}
