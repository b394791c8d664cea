/* src/io/safetensors_view.c - a dt_st_file over a file of another format
 * (dtst_open_view, io/safetensors_internal.h): tensors at byte offsets the
 * caller computed from that format's own header (llm.c's model files,
 * nn/weights_llmc.c), read with the safetensors reader's functions. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/fileio.h"
#include "io/json.h"
#include "io/safetensors_internal.h"

#define NAMEFMT "%.200s"

/* The view's names and metadata, owned by f->doc: {"names": {name: null}, "meta": {...}} */
static int own_strings(dt_st_file *f, const dt_st_info *ts, int n, const char *meta_json) {
    json_t *names = json_object(), *meta = NULL;
    if (!(f->doc = json_object()) || !names || json_object_set_new(f->doc, "names", names))
        return DT_ERR(DT_ERR_NOMEM, "%s: out of memory", f->fname);
    for (int i = 0; i < n; i++) {
        if (!ts[i].name || !*ts[i].name) return DT_ERR(DT_ERR_INVALID, "%s: tensor %d has no name", f->fname, i);
        if (json_object_get(names, ts[i].name))
            return DT_ERR(DT_ERR_INVALID, "%s: tensor name '" NAMEFMT "' given twice", f->fname, ts[i].name);
        if (json_object_set_new(names, ts[i].name, json_null()))
            return DT_ERR(DT_ERR_NOMEM, "%s: out of memory", f->fname);
        f->t[i].name = json_object_iter_key(json_object_iter_at(names, ts[i].name));
    }
    if (meta_json) {
        char err[256];
        meta = dtj_parse(meta_json, strlen(meta_json), err, sizeof err);
        if (!meta) return DT_ERR(DT_ERR_INVALID, "%s: metadata is not valid JSON %s", f->fname, err);
        if (json_object_set_new(f->doc, "meta", meta)) return DT_ERR(DT_ERR_NOMEM, "%s: out of memory", f->fname);
        return dtst_take_meta(f, meta, DT_ERR_INVALID);
    }
    return DT_OK;
}

static int view(dt_st_file *f, const dt_st_info *ts, const uint64_t *off, int n, const char *meta_json) {
    f->t = calloc(n ? (size_t)n : 1, sizeof *f->t);
    f->by_name = malloc((n ? (size_t)n : 1) * sizeof *f->by_name);
    if (!f->t || !f->by_name) return DT_ERR(DT_ERR_NOMEM, "%s: out of memory", f->fname);
    int rc = own_strings(f, ts, n, meta_json);
    uint64_t end = 0;
    for (int i = 0; !rc && i < n; i++) {
        st_tensor *t = &f->t[i];
        uint64_t nb = 0;
        if (dtst_tensor_bytes(ts[i].dtype, ts[i].ndim, ts[i].shape, &nb))
            return DT_ERR(DT_ERR_INVALID, "%s: tensor '" NAMEFMT "': invalid dtype, ndim or shape, or its size overflows",
                          f->fname, t->name);
        if (off[i] < end)
            return DT_ERR(DT_ERR_INVALID, "%s: tensor '" NAMEFMT "' at byte %llu overlaps the one before (ends at %llu)",
                          f->fname, t->name, (unsigned long long)off[i], (unsigned long long)end);
        if (off[i] > f->file_size || nb > f->file_size - off[i])
            return DT_ERR(DT_ERR_IO, "%s: truncated: tensor '" NAMEFMT "' needs bytes [%llu, %llu), the file has %llu",
                          f->fname, t->name, (unsigned long long)off[i], (unsigned long long)(off[i] + nb),
                          (unsigned long long)f->file_size);
        t->dtype = ts[i].dtype;
        t->ndim = ts[i].ndim;
        memcpy(t->shape, ts[i].shape, sizeof t->shape);
        t->begin = off[i];
        t->end = end = off[i] + nb;
        t->doc_order = (size_t)i;
        t->shard = t->src = -1;
        f->n++;
    }
    if (!rc) dtst_sort_names(f);
    return rc;
}

int dtst_open_view(const char *path, const dt_st_info *ts, const uint64_t *off, int n, const char *meta_json,
                   dt_st_file **out) {
    if (!path || !out || n < 0 || (n && (!ts || !off))) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    *out = NULL;
    if (!dtio_little_endian()) return DT_ERR(DT_ERR_UNSUPPORTED, "dtrain reads tensors on a little-endian host only");
    dt_st_file *f;
    int rc = dtst_open_file(path, &f);
    if (rc) return rc;
    rc = view(f, ts, off, n, meta_json);
    if (rc) {
        dt_st_close(f);
        return rc;
    }
    f->has_data = 1;
    *out = f;
    return DT_OK;
}
