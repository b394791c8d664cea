/* src/io/safetensors.c - strict .safetensors reader and streaming writer. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "dtrain/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/json.h"
#include "io/fileio.h"
#include "io/safetensors_internal.h"
#include "core/error.h"

static const char *const k_st_names[DT_NUM_DTYPES] = {"F32", "F64", "F16", "BF16", "I8", "U8", "I32", "I64"};
/* Names of the specification this build does not read. */
static const char *const k_st_unsupported[] = {"BOOL", "U16", "I16", "U32", "U64", "F8_E5M2", "F8_E4M3"};

const char *dt_st_dtype_name(dt_dtype d) {
    return (unsigned)d < DT_NUM_DTYPES ? k_st_names[d] : "?";
}

#define BE_CHECK()                                                                     \
    do {                                                                               \
        if (!dtio_little_endian())                                                     \
            return DT_ERR(DT_ERR_UNSUPPORTED, "safetensors needs a little-endian host"); \
    } while (0)

int dtst_tensor_bytes(dt_dtype dtype, int ndim, const int64_t *shape, uint64_t *out) {
    uint64_t n = dt_dtype_size(dtype);
    if (!n || ndim < 0 || ndim > DT_ST_MAX_DIMS) return -1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return -1;
        uint64_t s = (uint64_t)shape[d];
        if (s && n > UINT64_MAX / s) return -1;
        n *= s;
    }
    *out = n;
    return 0;
}

uint64_t dt_st_nbytes(const dt_st_info *t) {
    uint64_t n;
    if (!t) { DT_ERR(DT_ERR_INVALID, "NULL info"); return 0; }
    if (dtst_tensor_bytes(t->dtype, t->ndim, t->shape, &n)) {
        DT_ERR(DT_ERR_INVALID, "tensor '%s': invalid dtype/ndim/shape or size overflow", t->name ? t->name : "(null)");
        return 0;
    }
    return n;
}

/* ===================================================================== reader */
void dt_st_close(dt_st_file *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    for (int k = 0; k < f->nshard; k++) dt_st_close(f->shard[k]);
    free(f->shard);
    json_decref(f->doc);
    free(f->t);
    free(f->by_name);
    free(f->meta);
    free(f->fname);
    free(f);
}

static int cmp_tensor_off(const void *a, const void *b) {
    const st_tensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->doc_order < y->doc_order ? -1 : x->doc_order > y->doc_order;
}

static _Thread_local const st_tensor *tl_sort_tensors;
static int cmp_name_idx(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return strcmp(tl_sort_tensors[x].name, tl_sort_tensors[y].name);
}
static int cmp_meta(const void *a, const void *b) {
    return strcmp(((const st_meta *)a)->key, ((const st_meta *)b)->key);
}

#define NAMEFMT "%.200s"

static int parse_tensor(const char *fname, const char *name, const json_t *v, st_tensor *t) {
    t->name = name;
    if (!json_is_object(v))
        return DT_ERR(DT_ERR_IO, "%s: tensor '" NAMEFMT "': entry is not a JSON object", fname, name);
    const char *key;
    json_t *x;
    json_object_foreach((json_t *)v, key, x) {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return DT_ERR(DT_ERR_IO, "%s: tensor '" NAMEFMT "': unknown field '" NAMEFMT "'", fname, name, key);
    }
    const json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
                 *of = json_object_get(v, "data_offsets");
    if (!dt || !sh || !of)
        return DT_ERR(DT_ERR_IO, "%s: tensor '" NAMEFMT "': missing field '%s'", fname, name,
                      !dt ? "dtype" : !sh ? "shape" : "data_offsets");
    const char *dts = json_string_value(dt);
    if (!dts) return DT_ERR(DT_ERR_IO, "%s: tensor '" NAMEFMT "': dtype is not a string", fname, name);
    int found = -1;
    for (int d = 0; d < DT_NUM_DTYPES; d++)
        if (strcmp(dts, k_st_names[d]) == 0) found = d;
    if (found < 0) {
        for (size_t k = 0; k < sizeof k_st_unsupported / sizeof *k_st_unsupported; k++)
            if (strcmp(dts, k_st_unsupported[k]) == 0)
                return DT_ERR(DT_ERR_UNSUPPORTED, "%s: tensor '" NAMEFMT "': dtype %s is not supported by dtrain",
                              fname, name, dts);
        return DT_ERR(DT_ERR_IO, "%s: tensor '" NAMEFMT "': unknown dtype '" NAMEFMT "'", fname, name, dts);
    }
    t->dtype = (dt_dtype)found;
    if (!json_is_array(sh))
        return DT_ERR(DT_ERR_IO, "%s: tensor '" NAMEFMT "': shape is not an array", fname, name);
    size_t nd = json_array_size(sh);
    if (nd > DT_ST_MAX_DIMS)
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: tensor '" NAMEFMT "': %zu dimensions (at most %d supported)", fname,
                      name, nd, DT_ST_MAX_DIMS);
    t->ndim = (int)nd;
    for (size_t d = 0; d < nd; d++) {
        uint64_t dim; /* jansson reads integers up to INT64_MAX */
        if (dtj_u64(json_array_get(sh, d), &dim))
            return DT_ERR(DT_ERR_IO, "%s: tensor '" NAMEFMT "': shape[%zu] is not a non-negative integer", fname,
                          name, d);
        t->shape[d] = (int64_t)dim;
    }
    if (!json_is_array(of) || json_array_size(of) != 2 || dtj_u64(json_array_get(of, 0), &t->begin) ||
        dtj_u64(json_array_get(of, 1), &t->end))
        return DT_ERR(DT_ERR_IO, "%s: tensor '" NAMEFMT "': data_offsets is not [begin, end] (non-negative integers)",
                      fname, name);
    if (t->end < t->begin)
        return DT_ERR(DT_ERR_IO, "%s: tensor '" NAMEFMT "': data_offsets [%llu, %llu] end before begin", fname,
                      name, (unsigned long long)t->begin, (unsigned long long)t->end);
    uint64_t nb;
    if (dtst_tensor_bytes(t->dtype, t->ndim, t->shape, &nb))
        return DT_ERR(DT_ERR_IO, "%s: tensor '" NAMEFMT "': shape size overflows", fname, name);
    if (nb != t->end - t->begin)
        return DT_ERR(DT_ERR_IO,
                      "%s: tensor '" NAMEFMT "': shape/size mismatch: dtype %s and shape give %llu bytes but "
                      "data_offsets [%llu, %llu] span %llu",
                      fname, name, k_st_names[t->dtype], (unsigned long long)nb, (unsigned long long)t->begin,
                      (unsigned long long)t->end, (unsigned long long)(t->end - t->begin));
    return DT_OK;
}

/* Validates the first len bytes (>= 8 + N) of a file of file_size bytes. */
static int parse_image(dt_st_file *f, const unsigned char *buf, size_t len, uint64_t file_size) {
    const char *fname = f->fname;
    f->file_size = file_size;
    if (file_size < 8 || len < 8)
        return DT_ERR(DT_ERR_IO, "%s: truncated: %llu bytes, a safetensors file starts with an 8-byte header length",
                      fname, (unsigned long long)(file_size < len ? file_size : len));
    uint64_t hn = dtio_get_u64(buf);
    if (hn > DT_ST_MAX_HEADER)
        return DT_ERR(DT_ERR_IO, "%s: header length %llu too large (limit %llu)", fname, (unsigned long long)hn,
                      (unsigned long long)DT_ST_MAX_HEADER);
    if (hn > file_size - 8)
        return DT_ERR(DT_ERR_IO, "%s: header length %llu exceeds the file size (%llu bytes)", fname,
                      (unsigned long long)hn, (unsigned long long)file_size);
    if (hn < 2) return DT_ERR(DT_ERR_IO, "%s: header length %llu too small", fname, (unsigned long long)hn);
    if (len - 8 < hn)
        return DT_ERR(DT_ERR_INVALID, "%s: buffer has %zu bytes, the header needs %llu", fname, len,
                      (unsigned long long)(hn + 8));
    const char *h = (const char *)buf + 8;
    if (h[0] != '{') return DT_ERR(DT_ERR_IO, "%s: header does not start with '{'", fname);
    char jerr[256];
    f->doc = dtj_parse(h, (size_t)hn, jerr, sizeof jerr);
    if (!f->doc) return DT_ERR(DT_ERR_IO, "%s: invalid header JSON %s", fname, jerr);
    const json_t *root = f->doc;
    if (!json_is_object(root)) return DT_ERR(DT_ERR_IO, "%s: header is not a JSON object", fname);
    size_t nroot = json_object_size(root);
    if (nroot > (size_t)INT32_MAX) return DT_ERR(DT_ERR_IO, "%s: too many tensors", fname);
    f->data_start = 8 + hn;
    f->t = malloc((nroot ? nroot : 1) * sizeof *f->t);
    f->by_name = malloc((nroot ? nroot : 1) * sizeof *f->by_name);
    if (!f->t || !f->by_name) return DT_ERR(DT_ERR_NOMEM, "%s: out of memory", fname);
    const json_t *md = NULL;
    int n = 0;
    size_t k = 0;
    const char *key;
    json_t *v;
    /* keys are unique (the parser refuses duplicates) and hold no NUL */
    json_object_foreach((json_t *)root, key, v) {
        if (strcmp(key, "__metadata__") == 0) {
            md = v;
            k++;
            continue;
        }
        st_tensor *t = &f->t[n];
        memset(t, 0, sizeof *t);
        t->shard = t->src = -1;
        t->doc_order = k++;
        int rc = parse_tensor(fname, key, v, t);
        if (rc) return rc;
        n++;
    }
    f->n = n;
    if (md) {
        int rc = dtst_take_meta(f, md, DT_ERR_IO);
        if (rc) return rc;
    }
    qsort(f->t, (size_t)n, sizeof *f->t, cmp_tensor_off);
    uint64_t expect = 0;
    for (int i = 0; i < n; i++) {
        const st_tensor *t = &f->t[i];
        if (t->begin < expect)
            return DT_ERR(DT_ERR_IO, "%s: tensor '" NAMEFMT "' data_offsets [%llu, %llu] overlap tensor '" NAMEFMT
                          "' (which ends at %llu)", fname, t->name, (unsigned long long)t->begin,
                          (unsigned long long)t->end, f->t[i - 1].name, (unsigned long long)expect);
        if (t->begin > expect)
            return DT_ERR(DT_ERR_IO, "%s: gap in the data section: tensor '" NAMEFMT "' starts at %llu, expected %llu",
                          fname, t->name, (unsigned long long)t->begin, (unsigned long long)expect);
        expect = t->end;
    }
    uint64_t have = file_size - f->data_start;
    if (expect > have)
        return DT_ERR(DT_ERR_IO, "%s: truncated: the tensors need %llu bytes of data, the file has %llu", fname,
                      (unsigned long long)expect, (unsigned long long)have);
    if (expect < have)
        return DT_ERR(DT_ERR_IO, "%s: %llu unexpected bytes after the last tensor (data section %llu, tensors %llu)",
                      fname, (unsigned long long)(have - expect), (unsigned long long)have,
                      (unsigned long long)expect);
    dtst_sort_names(f);
    return DT_OK;
}

void dtst_sort_names(dt_st_file *f) {
    for (int i = 0; i < f->n; i++) f->by_name[i] = i;
    tl_sort_tensors = f->t;
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_name_idx);
    tl_sort_tensors = NULL;
}

void dtst_sort_meta(dt_st_file *f) { qsort(f->meta, (size_t)f->nmeta, sizeof *f->meta, cmp_meta); }

int dtst_take_meta(dt_st_file *f, const json_t *md, int status) {
    if (!json_is_object(md)) return DT_ERR(status, "%s: __metadata__ is not a JSON object", f->fname);
    f->meta = malloc((json_object_size(md) ? json_object_size(md) : 1) * sizeof *f->meta);
    if (!f->meta) return DT_ERR(DT_ERR_NOMEM, "%s: out of memory", f->fname);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)md, key, v) {
        if (!json_is_string(v))
            return DT_ERR(status, "%s: __metadata__ entry '" NAMEFMT "' is not a string", f->fname, key);
        f->meta[f->nmeta].key = key;
        f->meta[f->nmeta++].value = json_string_value(v);
    }
    dtst_sort_meta(f);
    return DT_OK;
}

dt_st_file *dtst_new_file(const char *fname) {
    dt_st_file *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->fd = -1;
    f->fname = dtio_cat(fname, "");
    if (!f->fname) { free(f); return NULL; }
    return f;
}

int dt_st_parse_header(const void *buf, size_t len, uint64_t file_size, dt_st_file **out) {
    BE_CHECK();
    if (!out || (!buf && len)) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    *out = NULL;
    if (len > file_size) return DT_ERR(DT_ERR_INVALID, "buffer (%zu bytes) larger than file_size", len);
    dt_st_file *f = dtst_new_file("<memory>");
    if (!f) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    int rc = parse_image(f, buf, len, file_size);
    if (rc) { dt_st_close(f); return rc; }
    *out = f;
    return DT_OK;
}

int dt_st_open_memory(const void *buf, size_t len, dt_st_file **out) {
    int rc = dt_st_parse_header(buf, len, len, out);
    if (rc) return rc;
    (*out)->mem = buf;
    (*out)->has_data = 1;
    return DT_OK;
}

int dtst_open_file(const char *path, dt_st_file **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return DT_ERR(DT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return DT_ERR(DT_ERR_IO, "%s: not a regular file", path);
    }
    dt_st_file *f = dtst_new_file(path);
    if (!f) { close(fd); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    f->fd = fd;
    f->file_size = (uint64_t)st.st_size;
    *out = f;
    return DT_OK;
}

int dt_st_open(const char *path, dt_st_file **out) {
    BE_CHECK();
    if (!path || !out) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    *out = NULL;
    dt_st_file *f;
    int rc = dtst_open_file(path, &f);
    if (rc) return rc;
    const int fd = f->fd;
    uint64_t size = f->file_size;
    unsigned char head[8];
    long long got = dtio_pread_all(fd, head, 8, 0);
    if (got < 0) { dt_st_close(f); return DT_ERR(DT_ERR_IO, "%s: read error: %s", path, strerror(errno)); }
    if (got < 8) {
        rc = parse_image(f, head, (size_t)got, (uint64_t)got);
        dt_st_close(f);
        return rc;
    }
    uint64_t hn = dtio_get_u64(head);
    if (hn > DT_ST_MAX_HEADER || hn > size - 8 || hn < 2) { /* let parse_image word the error */
        rc = parse_image(f, head, 8, size);
        dt_st_close(f);
        return rc;
    }
    unsigned char *buf = malloc((size_t)hn + 8);
    if (!buf) { dt_st_close(f); return DT_ERR(DT_ERR_NOMEM, "%s: out of memory for a %llu-byte header", path,
                                              (unsigned long long)hn); }
    got = dtio_pread_all(fd, buf, (size_t)hn + 8, 0);
    if (got != (long long)hn + 8) {
        free(buf);
        dt_st_close(f);
        return DT_ERR(DT_ERR_IO, "%s: truncated while reading the header", path);
    }
    rc = parse_image(f, buf, (size_t)hn + 8, size);
    free(buf); /* the DOM copied every string it keeps */
    if (rc) { dt_st_close(f); return rc; }
    f->has_data = 1;
    *out = f;
    return DT_OK;
}

int dt_st_num_tensors(const dt_st_file *f) { return f ? f->n : DT_ERR(DT_ERR_INVALID, "NULL file"); }

int dt_st_tensor_info(const dt_st_file *f, int i, dt_st_info *info, uint64_t *nbytes, uint64_t *offset) {
    if (!f || !info) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    if (i < 0 || i >= f->n) return DT_ERR(DT_ERR_INVALID, "%s: tensor index %d out of range [0, %d)", f->fname, i, f->n);
    const st_tensor *t = &f->t[i];
    memset(info, 0, sizeof *info);
    info->name = t->name;
    info->dtype = t->dtype;
    info->ndim = t->ndim;
    memcpy(info->shape, t->shape, sizeof t->shape);
    if (nbytes) *nbytes = t->end - t->begin;
    if (offset) *offset = (t->shard >= 0 ? f->shard[t->shard]->data_start : f->data_start) + t->begin;
    return DT_OK;
}

int dt_st_find(const dt_st_file *f, const char *name) {
    if (!f || !name) return -1;
    int lo = 0, hi = f->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(f->t[f->by_name[mid]].name, name);
        if (c == 0) return f->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

int dt_st_read(dt_st_file *f, int i, void *dst, size_t dst_bytes) {
    if (!f) return DT_ERR(DT_ERR_INVALID, "NULL file");
    if (i < 0 || i >= f->n) return DT_ERR(DT_ERR_INVALID, "%s: tensor index %d out of range [0, %d)", f->fname, i, f->n);
    if (!f->has_data) return DT_ERR(DT_ERR_STATE, "%s: opened with dt_st_parse_header (no data)", f->fname);
    const st_tensor *t = &f->t[i];
    if (t->shard >= 0) return dt_st_read(f->shard[t->shard], t->src, dst, dst_bytes);
    uint64_t nb = t->end - t->begin;
    if (nb > SIZE_MAX) return DT_ERR(DT_ERR_UNSUPPORTED, "%s: tensor '" NAMEFMT "' too large", f->fname, t->name);
    if (dst_bytes < nb)
        return DT_ERR(DT_ERR_INVALID, "%s: tensor '" NAMEFMT "' has %llu bytes, destination holds %zu", f->fname,
                      t->name, (unsigned long long)nb, dst_bytes);
    if (nb == 0) return DT_OK;
    if (!dst) return DT_ERR(DT_ERR_INVALID, "NULL destination");
    if (f->mem) {
        memcpy(dst, f->mem + f->data_start + t->begin, (size_t)nb);
        return DT_OK;
    }
    long long got = dtio_pread_all(f->fd, dst, (size_t)nb, f->data_start + t->begin);
    if (got < 0) return DT_ERR(DT_ERR_IO, "%s: read error: %s", f->fname, strerror(errno));
    if ((uint64_t)got != nb)
        return DT_ERR(DT_ERR_IO, "%s: truncated: tensor '" NAMEFMT "' (file shrank after opening)", f->fname, t->name);
    return DT_OK;
}

int dt_st_num_metadata(const dt_st_file *f) { return f ? f->nmeta : DT_ERR(DT_ERR_INVALID, "NULL file"); }

int dt_st_metadata_at(const dt_st_file *f, int i, const char **key, const char **value) {
    if (!f || !key || !value) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    if (i < 0 || i >= f->nmeta) return DT_ERR(DT_ERR_INVALID, "metadata index %d out of range [0, %d)", i, f->nmeta);
    *key = f->meta[i].key;
    *value = f->meta[i].value;
    return DT_OK;
}

const char *dt_st_metadata_get(const dt_st_file *f, const char *key) {
    if (!f || !key) return NULL;
    for (int lo = 0, hi = f->nmeta; lo < hi;) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(f->meta[mid].key, key);
        if (c == 0) return f->meta[mid].value;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* ===================================================================== writer */
struct dt_st_writer {
    char *path, *tmp;
    int fd;
    int n;
    uint64_t *off;  /* absolute file offset of each tensor */
    uint64_t *nb;
    unsigned char *written;
    char **names;   /* for messages */
    int failed;
};

static void writer_free(dt_st_writer *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (w->names)
        for (int i = 0; i < w->n; i++) free(w->names[i]);
    free(w->names);
    free(w->off);
    free(w->nb);
    free(w->written);
    free(w->path);
    free(w->tmp);
    free(w);
}

void dt_st_writer_abort(dt_st_writer *w) {
    if (!w) return;
    if (w->fd >= 0) { close(w->fd); w->fd = -1; }
    if (w->tmp) unlink(w->tmp);
    writer_free(w);
}

static int cmp_cstr_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static const char *file_kind(mode_t m) {
    return S_ISDIR(m) ? "a directory" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
         : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* The file the writer replaces: path itself when it is missing or a regular
 * file, the file a symbolic link points to when that is a regular file (the
 * link stays). Anything else is refused: the model is renamed into place,
 * which would replace a device, a FIFO or a directory (/dev/null, /dev/stdout
 * as a terminal or pipe). *out is malloc'd. */
static int resolve_target(const char *path, char **out) {
    *out = NULL;
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT) return DT_ERR(DT_ERR_IO, "%s: %s", path, strerror(errno));
        *out = dtio_cat(path, "");
    } else if (S_ISREG(st.st_mode)) {
        *out = dtio_cat(path, "");
    } else if (S_ISLNK(st.st_mode)) {
        struct stat t;
        if (stat(path, &t) != 0)
            return DT_ERR(DT_ERR_INVALID, "%s is a symbolic link to a missing file (%s): give the file's own path", path,
                          strerror(errno));
        if (!S_ISREG(t.st_mode))
            return DT_ERR(DT_ERR_INVALID,
                          "%s points to %s, not a regular file: the model is written to a temporary file and "
                          "renamed into place, which must never replace a device, FIFO or directory; give a file path",
                          path, file_kind(t.st_mode));
        *out = realpath(path, NULL);
        if (!*out) return DT_ERR(DT_ERR_IO, "%s: %s", path, strerror(errno));
    } else {
        return DT_ERR(DT_ERR_INVALID,
                      "%s is %s: the model is written to a temporary file and renamed into place, which must never "
                      "replace a device, FIFO or directory; give a file path",
                      path, file_kind(st.st_mode));
    }
    return *out ? DT_OK : DT_ERR(DT_ERR_NOMEM, "out of memory");
}

int dt_st_writer_check(const char *path) {
    if (!path || !*path) return DT_ERR(DT_ERR_INVALID, "NULL or empty path");
    char *target = NULL;
    int rc = resolve_target(path, &target);
    if (rc) return rc;
    char pidbuf[32];
    snprintf(pidbuf, sizeof pidbuf, ".tmp.%ld", (long)getpid());
    char *tmp = dtio_cat(target, pidbuf);
    if (!tmp) { free(target); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = DT_ERR(DT_ERR_IO, "%s: cannot create a file beside it (%s): %s", path, tmp, strerror(errno));
    } else {
        close(fd);
        unlink(tmp);
    }
    free(tmp);
    free(target);
    return rc;
}

/* h["__metadata__"] = the object metadata_json, checked: strings only. */
static int put_metadata(json_t *h, const char *path, const char *metadata_json) {
    char jerr[256];
    json_t *d = dtj_parse(metadata_json, strlen(metadata_json), jerr, sizeof jerr);
    if (!d) return DT_ERR(DT_ERR_INVALID, "%s: metadata is not valid JSON %s", path, jerr);
    int rc = DT_OK;
    const char *key;
    json_t *v;
    if (!json_is_object(d)) rc = DT_ERR(DT_ERR_INVALID, "%s: metadata must be a JSON object of strings", path);
    else
        json_object_foreach(d, key, v) if (!rc && !json_is_string(v))
            rc = DT_ERR(DT_ERR_INVALID, "%s: metadata value for '" NAMEFMT "' is not a string", path, key);
    if (rc) {
        json_decref(d);
        return rc;
    }
    return json_object_set_new(h, "__metadata__", d) ? DT_ERR(DT_ERR_NOMEM, "out of memory") : DT_OK;
}

/* One tensor's header entry: {"dtype":..,"shape":[..],"data_offsets":[begin,end]}. */
static json_t *tensor_entry(const dt_st_info *t, uint64_t begin, uint64_t end) {
    json_t *e = json_object(), *shape = json_array();
    int bad = 0;
    for (int d = 0; d < t->ndim; d++) bad |= json_array_append_new(shape, json_integer(t->shape[d]));
    bad |= json_object_set_new(e, "dtype", json_string(k_st_names[t->dtype]));
    bad |= json_object_set_new(e, "shape", shape);
    bad |= json_object_set_new(e, "data_offsets", json_pack("[I,I]", (json_int_t)begin, (json_int_t)end));
    if (bad) json_decref(e);
    return bad ? NULL : e;
}

/* The header of the tensors ts (validated, nb[i] bytes each): the JSON text,
 * compact, padded with spaces to a multiple of 8 bytes, malloc'd in *out;
 * off[i] gets each tensor's offset in the data section. */
static int build_header(const char *path, const dt_st_info *ts, int n, const char *metadata_json,
                        const uint64_t *nb, uint64_t *off, char **out, size_t *len) {
    *out = NULL;
    json_t *h = json_object();
    int rc = h ? DT_OK : DT_ERR(DT_ERR_NOMEM, "out of memory");
    if (!rc && metadata_json) rc = put_metadata(h, path, metadata_json);
    uint64_t rel = 0;
    for (int i = 0; i < n && !rc; i++) {
        if (nb[i] > (uint64_t)INT64_MAX - rel) { /* JSON readers take integers up to 2^63-1 */
            rc = DT_ERR(DT_ERR_INVALID, "%s: total size overflows (more than 2^63-1 bytes)", path);
            break;
        }
        if (json_object_set_new(h, ts[i].name, tensor_entry(&ts[i], rel, rel + nb[i])))
            rc = DT_ERR(DT_ERR_NOMEM, "%s: out of memory building the header", path);
        off[i] = rel;
        rel += nb[i];
    }
    char *text = rc ? NULL : json_dumps(h, JSON_COMPACT);
    json_decref(h);
    if (rc) return rc;
    size_t n0 = text ? strlen(text) : 0, n8 = (n0 + 7) & ~(size_t)7;
    char *padded = text ? realloc(text, n8 + 1) : NULL;
    if (!padded) {
        free(text);
        return DT_ERR(DT_ERR_NOMEM, "%s: out of memory building the header", path);
    }
    memset(padded + n0, ' ', n8 - n0);
    padded[n8] = '\0';
    if (n8 > DT_ST_MAX_HEADER) {
        free(padded);
        return DT_ERR(DT_ERR_INVALID, "%s: header of %zu bytes exceeds the %llu-byte limit", path, n8,
                      (unsigned long long)DT_ST_MAX_HEADER);
    }
    *out = padded;
    *len = n8;
    return DT_OK;
}

int dt_st_writer_open(const char *path, const dt_st_info *ts, int n, const char *metadata_json,
                      dt_st_writer **out) {
    BE_CHECK();
    if (!out) return DT_ERR(DT_ERR_INVALID, "NULL out");
    *out = NULL;
    if (!path || !*path) return DT_ERR(DT_ERR_INVALID, "NULL or empty path");
    if (n < 0 || (n > 0 && !ts)) return DT_ERR(DT_ERR_INVALID, "%s: invalid tensor list (n = %d)", path, n);
    dt_st_writer *w = calloc(1, sizeof *w);
    if (!w) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    w->fd = -1;
    w->n = n;
    size_t cnt = n ? (size_t)n : 1;
    w->off = calloc(cnt, sizeof *w->off);
    w->nb = calloc(cnt, sizeof *w->nb);
    w->written = calloc(cnt, 1);
    w->names = calloc(cnt, sizeof *w->names);
    const char **sorted = calloc(cnt, sizeof *sorted);
    char pidbuf[32];
    snprintf(pidbuf, sizeof pidbuf, ".tmp.%ld", (long)getpid());
    char *hdr = NULL;
    size_t hlen = 0;
    int rc = resolve_target(path, &w->path);
    if (rc) goto fail;
    w->tmp = dtio_cat(w->path, pidbuf);
    if (!w->off || !w->nb || !w->written || !w->names || !sorted || !w->path || !w->tmp) {
        rc = DT_ERR(DT_ERR_NOMEM, "out of memory");
        goto fail;
    }
    /* Validate every description. */
    for (int i = 0; i < n; i++) {
        const dt_st_info *t = &ts[i];
        if (!t->name || !*t->name) { rc = DT_ERR(DT_ERR_INVALID, "%s: tensor %d has no name", path, i); goto fail; }
        if (!dtj_utf8_valid(t->name, strlen(t->name))) {
            rc = DT_ERR(DT_ERR_INVALID, "%s: tensor %d name is not valid UTF-8", path, i);
            goto fail;
        }
        if (strcmp(t->name, "__metadata__") == 0) {
            rc = DT_ERR(DT_ERR_INVALID, "%s: '__metadata__' is reserved, not a tensor name", path);
            goto fail;
        }
        if ((unsigned)t->dtype >= DT_NUM_DTYPES) {
            rc = DT_ERR(DT_ERR_INVALID, "%s: tensor '" NAMEFMT "': invalid dtype %d", path, t->name, (int)t->dtype);
            goto fail;
        }
        if (t->ndim < 0 || t->ndim > DT_ST_MAX_DIMS) {
            rc = DT_ERR(DT_ERR_INVALID, "%s: tensor '" NAMEFMT "': ndim %d out of range [0, %d]", path, t->name,
                        t->ndim, DT_ST_MAX_DIMS);
            goto fail;
        }
        if (dtst_tensor_bytes(t->dtype, t->ndim, t->shape, &w->nb[i])) {
            rc = DT_ERR(DT_ERR_INVALID, "%s: tensor '" NAMEFMT "': negative dimension or size overflow", path, t->name);
            goto fail;
        }
        sorted[i] = t->name;
        w->names[i] = dtio_cat(t->name, "");
        if (!w->names[i]) { rc = DT_ERR(DT_ERR_NOMEM, "out of memory"); goto fail; }
    }
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_cstr_ptr);
    for (int i = 1; i < n; i++)
        if (strcmp(sorted[i], sorted[i - 1]) == 0) {
            rc = DT_ERR(DT_ERR_INVALID, "%s: duplicate tensor name '" NAMEFMT "'", path, sorted[i]);
            goto fail;
        }
    if ((rc = build_header(path, ts, n, metadata_json, w->nb, w->off, &hdr, &hlen))) goto fail;
    for (int i = 0; i < n; i++) w->off[i] += 8 + (uint64_t)hlen;
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) { rc = DT_ERR(DT_ERR_IO, "%s: cannot create: %s", w->tmp, strerror(errno)); goto fail; }
    unsigned char len8[8];
    dtio_put_u64(len8, (uint64_t)hlen);
    if (dtio_write_all(w->fd, len8, 8) || dtio_write_all(w->fd, hdr, hlen)) {
        rc = DT_ERR(DT_ERR_IO, "%s: write error: %s", w->tmp, strerror(errno));
        goto fail;
    }
    free(hdr);
    free(sorted);
    *out = w;
    return DT_OK;
fail:
    free(hdr);
    free(sorted);
    dt_st_writer_abort(w);
    return rc;
}

int dt_st_writer_write(dt_st_writer *w, int i, const void *data) {
    if (!w) return DT_ERR(DT_ERR_INVALID, "NULL writer");
    if (i < 0 || i >= w->n) return DT_ERR(DT_ERR_INVALID, "%s: tensor index %d out of range [0, %d)", w->path, i, w->n);
    if (w->written[i])
        return DT_ERR(DT_ERR_INVALID, "%s: tensor '" NAMEFMT "' written twice", w->path, w->names[i]);
    if (w->nb[i] > SIZE_MAX) return DT_ERR(DT_ERR_UNSUPPORTED, "%s: tensor too large", w->path);
    if (w->nb[i] && !data) return DT_ERR(DT_ERR_INVALID, "%s: NULL data for tensor '" NAMEFMT "'", w->path, w->names[i]);
    if (w->nb[i] && dtio_pwrite_all(w->fd, data, (size_t)w->nb[i], w->off[i])) {
        w->failed = 1;
        return DT_ERR(DT_ERR_IO, "%s: write error: %s", w->tmp, strerror(errno));
    }
    w->written[i] = 1;
    return DT_OK;
}

int dt_st_writer_close(dt_st_writer *w) {
    if (!w) return DT_OK;
    int rc = DT_OK;
    if (w->failed) {
        rc = DT_ERR(DT_ERR_IO, "%s: an earlier write failed; file not saved", w->path);
        goto fail;
    }
    for (int i = 0; i < w->n; i++)
        if (!w->written[i]) {
            rc = DT_ERR(DT_ERR_STATE, "%s: tensor '" NAMEFMT "' was never written; file not saved", w->path,
                        w->names[i]);
            goto fail;
        }
    if (fsync(w->fd) != 0) { rc = DT_ERR(DT_ERR_IO, "%s: fsync: %s", w->tmp, strerror(errno)); goto fail; }
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0) { rc = DT_ERR(DT_ERR_IO, "%s: close: %s", w->tmp, strerror(errno)); goto fail; }
    /* still a regular file (or nothing) to replace? */
    char *again = NULL;
    if ((rc = resolve_target(w->path, &again))) goto fail;
    free(again);
    if (rename(w->tmp, w->path) != 0) {
        rc = DT_ERR(DT_ERR_IO, "%s: cannot rename %s into place: %s", w->path, w->tmp, strerror(errno));
        goto fail;
    }
    if (dtio_fsync_dir_of(w->path, 0) != 0) {
        /* The file is complete under its name; report the durability problem. */
        rc = DT_ERR(DT_ERR_IO, "%s: fsync of the directory: %s", w->path, strerror(errno));
        writer_free(w);
        return rc;
    }
    writer_free(w);
    return DT_OK;
fail:
    dt_st_writer_abort(w);
    return rc;
}

int dt_st_save(const char *path, const dt_st_info *ts, int n, const char *metadata_json) {
    dt_st_writer *w;
    int rc = dt_st_writer_open(path, ts, n, metadata_json, &w);
    if (rc) return rc;
    for (int i = 0; i < n; i++) {
        rc = dt_st_writer_write(w, i, ts[i].data);
        if (rc) {
            dt_st_writer_abort(w);
            return rc;
        }
    }
    return dt_st_writer_close(w);
}
