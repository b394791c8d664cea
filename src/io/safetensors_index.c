/* src/io/safetensors_index.c - a checkpoint sharded over several
 * .safetensors files, read through one dt_st_file (dt_st_open_index,
 * dtrain/safetensors.h): Hugging Face's "model.safetensors.index.json",
 *   {"metadata": {...}, "weight_map": {"<tensor>": "<shard file>", ...}},
 * the shards beside it. Every shard is opened and checked as dt_st_open
 * checks a file; the index and the shards must then agree both ways: every
 * tensor the index lists is in the shard it names, and every tensor of every
 * shard is listed, under that shard. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/fileio.h"
#include "io/json.h"
#include "io/safetensors_internal.h"

#define MAX_INDEX_BYTES ((size_t)64 << 20) /* a 100B-parameter model's index is about 100 KB */
#define NAMEFMT "%.200s"

/* A shard's file name: a plain name in the index's folder */
static int shard_name_ok(const char *s) {
    return *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The distinct shard names of the weight map, sorted (owned by the map). */
static int shard_names(const char *path, const json_t *map, const char ***out, int *count) {
    size_t cap = json_object_size(map);
    const char **names = malloc((cap ? cap : 1) * sizeof *names);
    if (!names) return DT_ERR(DT_ERR_NOMEM, "%s: out of memory", path);
    size_t n = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)map, key, v) {
        const char *s = json_string_value(v);
        if (!s || !shard_name_ok(s)) {
            free(names);
            return DT_ERR(DT_ERR_IO, "%s: weight_map[\"" NAMEFMT "\"] is %s: the name of a shard file in the "
                          "index's folder", path, key, !s ? "not a string" : "not a plain file name");
        }
        names[n++] = s;
    }
    qsort(names, n, sizeof *names, cmp_str);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || strcmp(names[u - 1], names[i]) != 0) names[u++] = names[i];
    *out = names;
    *count = (int)u;
    return DT_OK;
}

/* The shards' metadata, one entry per key: shards that disagree are refused. */
static int merge_meta(dt_st_file *f) {
    int total = 0;
    for (int k = 0; k < f->nshard; k++) total += f->shard[k]->nmeta;
    f->meta = malloc((total ? (size_t)total : 1) * sizeof *f->meta);
    if (!f->meta) return DT_ERR(DT_ERR_NOMEM, "%s: out of memory", f->fname);
    for (int k = 0; k < f->nshard; k++)
        for (int i = 0; i < f->shard[k]->nmeta; i++) f->meta[f->nmeta++] = f->shard[k]->meta[i];
    dtst_sort_meta(f);
    int u = 0;
    for (int i = 0; i < f->nmeta; i++) {
        if (u && strcmp(f->meta[u - 1].key, f->meta[i].key) == 0) {
            if (strcmp(f->meta[u - 1].value, f->meta[i].value) != 0)
                return DT_ERR(DT_ERR_IO, "%s: the shards' __metadata__ disagree on '" NAMEFMT "' ('" NAMEFMT "' and '"
                              NAMEFMT "')", f->fname, f->meta[i].key, f->meta[u - 1].value, f->meta[i].value);
            continue;
        }
        f->meta[u++] = f->meta[i];
    }
    f->nmeta = u;
    return DT_OK;
}

/* Opens the shards and checks them against the map, then lists their tensors as f's. */
static int open_shards(dt_st_file *f, const json_t *map, const char **names, int count) {
    f->shard = calloc((size_t)count, sizeof *f->shard);
    if (!f->shard) return DT_ERR(DT_ERR_NOMEM, "%s: out of memory", f->fname);
    const char *slash = strrchr(f->fname, '/');
    char *dir = slash ? strndup(f->fname, (size_t)(slash - f->fname) + 1) : strdup("");
    if (!dir) return DT_ERR(DT_ERR_NOMEM, "%s: out of memory", f->fname);
    long long total = 0;
    int rc = DT_OK;
    for (int k = 0; !rc && k < count; k++) {
        char *p = dtio_cat(dir, names[k]);
        if (!p) rc = DT_ERR(DT_ERR_NOMEM, "%s: out of memory", f->fname);
        else if ((rc = dt_st_open(p, &f->shard[k]))) {
            char why[768];
            snprintf(why, sizeof why, "%s", dt_last_error());
            rc = DT_ERR(rc, "%s names shard %s: %s", f->fname, names[k], why);
        }
        free(p);
        if (!rc) f->nshard++, total += f->shard[k]->n;
    }
    free(dir);
    const char *key;
    json_t *v;
    if (!rc) json_object_foreach((json_t *)map, key, v) {
        const char *s = json_string_value(v);
        const char **at = bsearch(&s, names, (size_t)count, sizeof *names, cmp_str);
        if (dt_st_find(f->shard[at - names], key) < 0)
            return DT_ERR(DT_ERR_IO, "%s: weight_map puts tensor '" NAMEFMT "' in %s, which has no such tensor",
                          f->fname, key, s);
    }
    if (rc) return rc;
    if (total > INT32_MAX) return DT_ERR(DT_ERR_IO, "%s: too many tensors (%lld)", f->fname, total);
    f->t = malloc((total ? (size_t)total : 1) * sizeof *f->t);
    f->by_name = malloc((total ? (size_t)total : 1) * sizeof *f->by_name);
    if (!f->t || !f->by_name) return DT_ERR(DT_ERR_NOMEM, "%s: out of memory", f->fname);
    for (int k = 0; k < count; k++) {
        const dt_st_file *s = f->shard[k];
        for (int i = 0; i < s->n; i++) {
            const char *where = json_string_value(json_object_get(map, s->t[i].name));
            if (!where || strcmp(where, names[k]) != 0)
                return DT_ERR(DT_ERR_IO, "%s holds tensor '" NAMEFMT "', which %s %s%s", s->fname, s->t[i].name,
                              f->fname, where ? "puts in " : "does not list", where ? where : "");
            st_tensor *t = &f->t[f->n++];
            *t = s->t[i];
            t->shard = k;
            t->src = i;
        }
    }
    /* every listed tensor was found in its shard and every shard tensor is listed
     * under that shard, so each name is here exactly once */
    dtst_sort_names(f);
    return merge_meta(f);
}

int dt_st_open_index(const char *path, dt_st_file **out) {
    if (!path || !out) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    *out = NULL;
    if (!dtio_little_endian()) return DT_ERR(DT_ERR_UNSUPPORTED, "safetensors needs a little-endian host");
    char *text;
    size_t len;
    int r = dtio_read_file(path, MAX_INDEX_BYTES, &text, &len);
    if (r == -2) return DT_ERR(DT_ERR_IO, "%s: larger than a sharded checkpoint's index (limit %zu bytes)", path,
                               MAX_INDEX_BYTES);
    if (r) return DT_ERR(DT_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    char err[256];
    json_t *doc = dtj_parse(text, len, err, sizeof err);
    free(text);
    if (!doc) return DT_ERR(DT_ERR_IO, "%s is not valid JSON %s", path, err);
    const json_t *map = json_object_get(doc, "weight_map"), *md = json_object_get(doc, "metadata");
    int rc = DT_OK;
    if (!json_is_object(doc) || !json_is_object(map))
        rc = DT_ERR(DT_ERR_IO, "%s: no \"weight_map\" object (tensor name -> shard file): not a sharded safetensors "
                    "index", path);
    else if (md && !json_is_object(md))
        rc = DT_ERR(DT_ERR_IO, "%s: \"metadata\" is not a JSON object", path);
    else if (json_object_size(map) == 0)
        rc = DT_ERR(DT_ERR_IO, "%s: the weight_map lists no tensor", path);
    const char **names = NULL;
    int count = 0;
    dt_st_file *f = NULL;
    if (!rc) rc = shard_names(path, map, &names, &count);
    if (!rc && !(f = dtst_new_file(path))) rc = DT_ERR(DT_ERR_NOMEM, "%s: out of memory", path);
    if (!rc) rc = open_shards(f, map, names, count);
    free(names);
    json_decref(doc);
    if (rc) {
        dt_st_close(f);
        return rc;
    }
    f->has_data = 1;
    *out = f;
    return DT_OK;
}
