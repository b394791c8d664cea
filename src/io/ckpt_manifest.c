/* src/io/ckpt_manifest.c - the checkpoint manifest: validation, JSON in and
 * out, lookups. See include/dtrain/ckpt.h. */
#include "io/ckpt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/json.h"
#include "io/fileio.h"
#include "core/error.h"

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Vector lookup: linear for small manifests is fine, but keep it O(log n). */
typedef struct vindex { const char **names; int *idx; int n; } vindex;
static _Thread_local const dt_ckpt_vector *tl_vecs;
static int cmp_vidx(const void *a, const void *b) {
    return strcmp(tl_vecs[*(const int *)a].name, tl_vecs[*(const int *)b].name);
}
static int vindex_build(vindex *vi, const dt_ckpt_vector *v, int n) {
    vi->n = n;
    vi->idx = malloc((n ? (size_t)n : 1) * sizeof *vi->idx);
    vi->names = NULL;
    if (!vi->idx) return -1;
    for (int i = 0; i < n; i++) vi->idx[i] = i;
    tl_vecs = v;
    qsort(vi->idx, (size_t)n, sizeof *vi->idx, cmp_vidx);
    tl_vecs = NULL;
    return 0;
}
static int vindex_find(const vindex *vi, const dt_ckpt_vector *v, const char *name) {
    int lo = 0, hi = vi->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(v[vi->idx[mid]].name, name);
        if (c == 0) return vi->idx[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* Validates a manifest's contents (not the files). st: status for problems
 * (DT_ERR_IO for a file read from disk, DT_ERR_INVALID for a caller-built one). */
int ck_validate(const char *fname, const dt_ckpt_manifest *m, int st) {
    if (m->world_size < 1 || m->world_size > DT_CKPT_MAX_WORLD)
        return DT_ERR(st, "%s: world_size %d out of range [1, %d]", fname, m->world_size, DT_CKPT_MAX_WORLD);
    if (m->zero_level < 0 || m->zero_level > 3)
        return DT_ERR(st, "%s: zero_level %d out of range [0, 3]", fname, m->zero_level);
    if (m->nvectors < 0 || (m->nvectors && !m->vectors) || m->nmeta < 0 || (m->nmeta && !m->meta) ||
        m->nranks < 0 || (m->nranks && !m->ranks))
        return DT_ERR(st, "%s: negative count or NULL array", fname);
    if (m->nranks > m->world_size)
        return DT_ERR(st, "%s: %d rank files for world_size %d", fname, m->nranks, m->world_size);
    /* JSON readers (jansson among them) take integers up to 2^63-1 */
    const struct { const char *name; uint64_t v; } big[] = {
        {"generation", m->generation}, {"step", m->step}, {"epoch", m->epoch},
        {"epoch_position", m->epoch_position}, {"num_params", m->num_params}, {"num_buffers", m->num_buffers}};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
        if (big[i].v > (uint64_t)INT64_MAX)
            return DT_ERR(st, "%s: %s %llu too large (at most 2^63-1)", fname, big[i].name,
                          (unsigned long long)big[i].v);
    for (int i = 0; i < m->nvectors; i++) {
        if (!ck_name_ok(m->vectors[i].name))
            return DT_ERR(st, "%s: vector %d: name missing, empty, longer than %d bytes or not UTF-8", fname, i,
                          DT_CKPT_MAX_NAME);
        if (m->vectors[i].length > MAX_VECTOR_LEN)
            return DT_ERR(st, "%s: vector '%s': length %llu too large", fname, m->vectors[i].name,
                          (unsigned long long)m->vectors[i].length);
    }
    for (int i = 0; i < m->nmeta; i++) {
        const dt_ckpt_kv *kv = &m->meta[i];
        if (!kv->key || !kv->value || !dtj_utf8_valid(kv->key, strlen(kv->key)) ||
            !dtj_utf8_valid(kv->value, strlen(kv->value)))
            return DT_ERR(st, "%s: metadata entry %d: NULL or not UTF-8", fname, i);
    }
    int rc = DT_OK;
    vindex vi;
    const char **tmp = malloc(((size_t)m->nmeta + 1) * sizeof *tmp);
    unsigned char *seen = calloc((size_t)m->world_size, 1);
    if (!tmp || !seen || vindex_build(&vi, m->vectors, m->nvectors)) {
        free(tmp);
        free(seen);
        return DT_ERR(DT_ERR_NOMEM, "out of memory");
    }
    for (int i = 1; i < m->nvectors && !rc; i++)
        if (strcmp(m->vectors[vi.idx[i]].name, m->vectors[vi.idx[i - 1]].name) == 0)
            rc = DT_ERR(st, "%s: duplicate vector name '%s'", fname, m->vectors[vi.idx[i]].name);
    for (int i = 0; i < m->nmeta; i++) tmp[i] = m->meta[i].key;
    qsort(tmp, (size_t)m->nmeta, sizeof *tmp, cmp_str_ptr);
    for (int i = 1; i < m->nmeta && !rc; i++)
        if (strcmp(tmp[i], tmp[i - 1]) == 0) rc = DT_ERR(st, "%s: duplicate metadata key '%.200s'", fname, tmp[i]);
    for (int r = 0; r < m->nranks && !rc; r++) {
        const dt_ckpt_rank_file *rf = &m->ranks[r];
        if (rf->rank < 0 || rf->rank >= m->world_size) {
            rc = DT_ERR(st, "%s: rank %d out of range [0, %d)", fname, rf->rank, m->world_size);
            break;
        }
        if (seen[rf->rank]) { rc = DT_ERR(st, "%s: rank %d listed twice", fname, rf->rank); break; }
        seen[rf->rank] = 1;
        if (rf->nranges < 0 || (rf->nranges && !rf->ranges)) {
            rc = DT_ERR(st, "%s: rank %d: invalid range list", fname, rf->rank);
            break;
        }
        for (int j = 0; j < rf->nranges; j++) {
            const dt_ckpt_range *g = &rf->ranges[j];
            int v = g->vector ? vindex_find(&vi, m->vectors, g->vector) : -1;
            if (v < 0) {
                rc = DT_ERR(st, "%s: rank %d: range %d names unknown vector '%.200s'", fname, rf->rank, j,
                            g->vector ? g->vector : "(null)");
                break;
            }
            uint64_t len = m->vectors[v].length;
            if (g->offset > len || g->count > len - g->offset) {
                rc = DT_ERR(st, "%s: rank %d: range [%llu, +%llu) outside vector '%s' (length %llu)", fname,
                            rf->rank, (unsigned long long)g->offset, (unsigned long long)g->count, g->vector,
                            (unsigned long long)len);
                break;
            }
        }
        if (rc) break;
        uint64_t want = ck_rf_header_bytes(rf->ranges, rf->nranges) + ck_rf_data_bytes(rf->ranges, rf->nranges);
        if (rf->bytes != want)
            rc = DT_ERR(st, "%s: rank %d: bytes %llu inconsistent with its ranges (%llu expected)", fname, rf->rank,
                        (unsigned long long)rf->bytes, (unsigned long long)want);
    }
    free(vi.idx);
    free(tmp);
    free(seen);
    return rc;
}

/* ---- manifest objects -------------------------------------------------------- */
void dt_ckpt_manifest_free(dt_ckpt_manifest *m) {
    if (!m || !m->priv_) return; /* caller-built: nothing of ours */
    ck_holder *h = (ck_holder *)m;
    json_decref(h->p.doc);
    free(h->p.vectors);
    free(h->p.ranks);
    free(h->p.ranges);
    free(h->p.meta);
    free(h->p.verified);
    free(h->p.dir_arg);
    free(h->p.dir_resolved);
    free(h->p.cache_dir);
    free(h);
}

static int parse_hex(const json_t *v, int maxdig, uint64_t *out) {
    size_t len = json_string_length(v);
    if (!json_is_string(v) || len == 0 || len > (size_t)maxdig) return -1;
    uint64_t x = 0;
    for (size_t k = 0; k < len; k++) {
        char c = json_string_value(v)[k];
        unsigned d;
        if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
        else return -1;
        x = (x << 4) | d;
    }
    *out = x;
    return 0;
}

/* Checks that obj is an object whose keys are all in allowed (NULL-terminated). */
static int check_keys(const char *fname, const json_t *obj, const char *what, const char *const *allowed) {
    if (!json_is_object(obj)) return DT_ERR(DT_ERR_IO, "%s: %s is not a JSON object", fname, what);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(key, *a) == 0) ok = 1;
        if (!ok) return DT_ERR(DT_ERR_IO, "%s: %s: unknown field '%.100s'", fname, what, key);
    }
    return DT_OK;
}

static int get_u64(const char *fname, const json_t *obj, const char *what, const char *key, uint64_t *out) {
    const json_t *v = json_object_get(obj, key);
    if (!v) return DT_ERR(DT_ERR_IO, "%s: %s: missing field '%s'", fname, what, key);
    if (dtj_u64(v, out)) return DT_ERR(DT_ERR_IO, "%s: %s: '%s' is not a non-negative integer", fname, what, key);
    return DT_OK;
}

static int get_int(const char *fname, const json_t *obj, const char *what, const char *key, int64_t max, int *out) {
    uint64_t x;
    int rc = get_u64(fname, obj, what, key, &x);
    if (rc) return rc;
    if (x > (uint64_t)max) return DT_ERR(DT_ERR_IO, "%s: %s: '%s' = %llu too large", fname, what, key,
                                         (unsigned long long)x);
    *out = (int)x;
    return DT_OK;
}

/* The string value of obj[key] (jansson's strings hold no NUL), NULL if absent or not a string. */
static const char *get_cstr(const json_t *obj, const char *key) {
    return json_string_value(json_object_get(obj, key));
}

int ck_parse_manifest(const char *fname, const char *json, size_t len, ck_holder **out) {
    *out = NULL;
    char jerr[256];
    json_t *doc = dtj_parse(json, len, jerr, sizeof jerr);
    if (!doc) return DT_ERR(DT_ERR_IO, "%s: manifest JSON syntax error %s", fname, jerr);
    ck_holder *h = calloc(1, sizeof *h);
    if (!h) { json_decref(doc); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    h->m.priv_ = &h->p;
    h->p.doc = doc;
    dt_ckpt_manifest *m = &h->m;
    const json_t *root = doc;
    int rc;
    if (!json_is_object(root)) { rc = DT_ERR(DT_ERR_IO, "%s: manifest is not a JSON object", fname); goto fail; }
    const char *fmt = get_cstr(root, "format");
    if (!fmt || strcmp(fmt, FORMAT_NAME) != 0) {
        rc = DT_ERR(DT_ERR_IO, "%s: not a dtrain checkpoint manifest (\"format\" is not \"" FORMAT_NAME "\")", fname);
        goto fail;
    }
    uint64_t ver;
    if ((rc = get_u64(fname, root, "manifest", "format_version", &ver))) goto fail;
    if (ver < DT_CKPT_FORMAT_VERSION_MIN || ver > DT_CKPT_FORMAT_VERSION) {
        rc = DT_ERR(DT_ERR_UNSUPPORTED, "%s: format version %llu not supported (this build reads %d and %d)", fname,
                    (unsigned long long)ver, DT_CKPT_FORMAT_VERSION_MIN, DT_CKPT_FORMAT_VERSION);
        goto fail;
    }
    m->format_version = (int)ver;
    static const char *const top_keys[] = {"format", "format_version", "generation", "step", "epoch",
                                           "epoch_position", "rng_state", "world_size", "zero_level", "num_params",
                                           "num_buffers", "vectors", "ranks", "metadata", NULL};
    if ((rc = check_keys(fname, root, "manifest", top_keys))) goto fail;
    /* version 2 names its generation (>= 1); version 1 has none (generation 0) */
    if (ver >= 2) {
        if ((rc = get_u64(fname, root, "manifest", "generation", &m->generation))) goto fail;
        if (m->generation == 0) { rc = DT_ERR(DT_ERR_IO, "%s: generation 0 (must be >= 1)", fname); goto fail; }
    } else if (json_object_get(root, "generation")) {
        rc = DT_ERR(DT_ERR_IO, "%s: manifest: unknown field 'generation' in format version 1", fname);
        goto fail;
    }
    if ((rc = get_u64(fname, root, "manifest", "step", &m->step)) ||
        (rc = get_u64(fname, root, "manifest", "epoch", &m->epoch)) ||
        (rc = get_u64(fname, root, "manifest", "epoch_position", &m->epoch_position)) ||
        (rc = get_u64(fname, root, "manifest", "num_params", &m->num_params)) ||
        (rc = get_u64(fname, root, "manifest", "num_buffers", &m->num_buffers)) ||
        (rc = get_int(fname, root, "manifest", "world_size", DT_CKPT_MAX_WORLD, &m->world_size)) ||
        (rc = get_int(fname, root, "manifest", "zero_level", 1000, &m->zero_level)))
        goto fail;
    const json_t *rng = json_object_get(root, "rng_state");
    if (!json_is_array(rng) || json_array_size(rng) != 4) {
        rc = DT_ERR(DT_ERR_IO, "%s: rng_state is not an array of 4 hex strings", fname);
        goto fail;
    }
    for (int k = 0; k < 4; k++)
        if (parse_hex(json_array_get(rng, (size_t)k), 16, &m->rng_state[k])) {
            rc = DT_ERR(DT_ERR_IO, "%s: rng_state[%d] is not a hex string of 1-16 digits", fname, k);
            goto fail;
        }
    /* vectors */
    const json_t *vecs = json_object_get(root, "vectors");
    size_t nvecs = json_array_size(vecs);
    if (!json_is_array(vecs) || nvecs > INT32_MAX) {
        rc = DT_ERR(DT_ERR_IO, "%s: missing or invalid 'vectors' array", fname);
        goto fail;
    }
    h->p.vectors = calloc(nvecs ? nvecs : 1, sizeof *h->p.vectors);
    if (!h->p.vectors) { rc = DT_ERR(DT_ERR_NOMEM, "out of memory"); goto fail; }
    static const char *const vec_keys[] = {"name", "length", NULL};
    for (size_t i = 0; i < nvecs; i++) {
        const json_t *e = json_array_get(vecs, i);
        if ((rc = check_keys(fname, e, "vectors entry", vec_keys))) goto fail;
        h->p.vectors[i].name = get_cstr(e, "name");
        if (!h->p.vectors[i].name) { rc = DT_ERR(DT_ERR_IO, "%s: vectors[%zu]: missing name", fname, i); goto fail; }
        if ((rc = get_u64(fname, e, "vectors entry", "length", &h->p.vectors[i].length))) goto fail;
    }
    m->vectors = h->p.vectors;
    m->nvectors = (int)nvecs;
    /* ranks */
    const json_t *rks = json_object_get(root, "ranks");
    size_t nrks = json_array_size(rks);
    if (!json_is_array(rks) || nrks > DT_CKPT_MAX_WORLD) {
        rc = DT_ERR(DT_ERR_IO, "%s: missing or invalid 'ranks' array", fname);
        goto fail;
    }
    size_t total = 0;
    for (size_t i = 0; i < nrks; i++) {
        const json_t *g = json_object_get(json_array_get(rks, i), "ranges");
        if (!json_is_array(g) || json_array_size(g) > INT32_MAX) {
            rc = DT_ERR(DT_ERR_IO, "%s: ranks[%zu]: missing or invalid 'ranges' array", fname, i);
            goto fail;
        }
        total += json_array_size(g);
    }
    h->p.ranks = calloc(nrks ? nrks : 1, sizeof *h->p.ranks);
    h->p.ranges = calloc(total ? total : 1, sizeof *h->p.ranges);
    h->p.verified = calloc(nrks ? nrks : 1, 1);
    if (!h->p.ranks || !h->p.ranges || !h->p.verified) { rc = DT_ERR(DT_ERR_NOMEM, "out of memory"); goto fail; }
    static const char *const rank_keys[] = {"rank", "file", "bytes", "crc32", "ranges", NULL};
    static const char *const range_keys[] = {"vector", "offset", "count", NULL};
    size_t used = 0;
    for (size_t i = 0; i < nrks; i++) {
        const json_t *e = json_array_get(rks, i);
        dt_ckpt_rank_file *rf = &h->p.ranks[i];
        if ((rc = check_keys(fname, e, "ranks entry", rank_keys))) goto fail;
        if ((rc = get_int(fname, e, "ranks entry", "rank", DT_CKPT_MAX_WORLD, &rf->rank)) ||
            (rc = get_u64(fname, e, "ranks entry", "bytes", &rf->bytes)))
            goto fail;
        const char *file = get_cstr(e, "file");
        char want[64];
        ck_rank_name(want, sizeof want, rf->rank, m->generation);
        if (!file || strcmp(file, want) != 0) {
            rc = DT_ERR(DT_ERR_IO, "%s: ranks[%zu]: file must be \"%s\"", fname, i, want);
            goto fail;
        }
        uint64_t crc;
        if (parse_hex(json_object_get(e, "crc32"), 8, &crc)) {
            rc = DT_ERR(DT_ERR_IO, "%s: ranks[%zu]: crc32 is not a hex string of 1-8 digits", fname, i);
            goto fail;
        }
        rf->crc32 = (uint32_t)crc;
        const json_t *g = json_object_get(e, "ranges"), *ge;
        rf->ranges = &h->p.ranges[used];
        rf->nranges = (int)json_array_size(g);
        size_t j;
        json_array_foreach(g, j, ge) {
            dt_ckpt_range *r = &h->p.ranges[used++];
            if ((rc = check_keys(fname, ge, "range", range_keys))) goto fail;
            r->vector = get_cstr(ge, "vector");
            if (!r->vector) { rc = DT_ERR(DT_ERR_IO, "%s: ranks[%zu]: range without vector", fname, i); goto fail; }
            if ((rc = get_u64(fname, ge, "range", "offset", &r->offset)) ||
                (rc = get_u64(fname, ge, "range", "count", &r->count)))
                goto fail;
        }
    }
    m->ranks = h->p.ranks;
    m->nranks = (int)nrks;
    /* metadata (optional) */
    const json_t *md = json_object_get(root, "metadata");
    if (md) {
        if (!json_is_object(md) || json_object_size(md) > INT32_MAX) {
            rc = DT_ERR(DT_ERR_IO, "%s: metadata is not a JSON object", fname);
            goto fail;
        }
        h->p.meta = calloc(json_object_size(md) ? json_object_size(md) : 1, sizeof *h->p.meta);
        if (!h->p.meta) { rc = DT_ERR(DT_ERR_NOMEM, "out of memory"); goto fail; }
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)md, key, val) {
            if (!json_is_string(val)) {
                rc = DT_ERR(DT_ERR_IO, "%s: metadata '%.100s' is not a string", fname, key);
                goto fail;
            }
            h->p.meta[m->nmeta].key = key;
            h->p.meta[m->nmeta++].value = json_string_value(val);
        }
        m->meta = h->p.meta;
    }
    if ((rc = ck_validate(fname, m, DT_ERR_IO))) goto fail;
    *out = h;
    return DT_OK;
fail:
    dt_ckpt_manifest_free(&h->m);
    return rc;
}

int dt_ckpt_manifest_parse(const char *json, size_t len, dt_ckpt_manifest **out) {
    BE_CHECK();
    if (!out || (!json && len)) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    *out = NULL;
    ck_holder *h;
    int rc = ck_parse_manifest("<memory>", json, len, &h);
    if (rc) return rc;
    *out = &h->m;
    return DT_OK;
}

int dt_ckpt_vector_index(const dt_ckpt_manifest *m, const char *name) {
    if (!m || !name) return -1;
    for (int i = 0; i < m->nvectors; i++)
        if (m->vectors[i].name && strcmp(m->vectors[i].name, name) == 0) return i;
    return -1;
}

const char *dt_ckpt_meta_get(const dt_ckpt_manifest *m, const char *key) {
    if (!m || !key) return NULL;
    for (int i = 0; i < m->nmeta; i++)
        if (m->meta[i].key && strcmp(m->meta[i].key, key) == 0) return m->meta[i].value;
    return NULL;
}

/* obj[key] = v, arr += v (v a new reference or NULL; taken even on failure):
 * 1 on failure (out of memory), else 0. One call per statement: the order of
 * the calls is the order of the keys. */
static int set(json_t *obj, const char *key, json_t *v) { return json_object_set_new(obj, key, v) != 0; }
static int add(json_t *arr, json_t *v) { return json_array_append_new(arr, v) != 0; }
static json_t *hex(uint64_t x, int digits) {
    char b[24];
    snprintf(b, sizeof b, "%0*llx", digits, (unsigned long long)x);
    return json_string(b);
}
static json_t *u64(uint64_t x) { return json_integer((json_int_t)x); } /* x <= INT64_MAX: ck_validate */

static json_t *range_entry(const dt_ckpt_range *g) {
    json_t *e = json_object();
    int bad = set(e, "vector", json_string(g->vector));
    bad |= set(e, "offset", u64(g->offset));
    bad |= set(e, "count", u64(g->count));
    if (bad) json_decref(e);
    return bad ? NULL : e;
}

static json_t *rank_entry(const dt_ckpt_rank_file *rf, uint64_t gen) {
    json_t *ranges = json_array(), *e = json_object();
    int bad = 0;
    for (int j = 0; j < rf->nranges; j++) bad |= add(ranges, range_entry(&rf->ranges[j]));
    char name[64];
    ck_rank_name(name, sizeof name, rf->rank, gen);
    bad |= set(e, "rank", json_integer(rf->rank));
    bad |= set(e, "file", json_string(name));
    bad |= set(e, "bytes", u64(rf->bytes));
    bad |= set(e, "crc32", hex(rf->crc32, 8));
    bad |= set(e, "ranges", ranges);
    if (bad) json_decref(e);
    return bad ? NULL : e;
}

char *ck_to_json(const dt_ckpt_manifest *m, size_t *len) {
    json_t *root = json_object(), *rng = json_array(), *vecs = json_array(), *ranks = json_array(),
           *meta = json_object();
    int bad = 0;
    for (int k = 0; k < 4; k++) bad |= add(rng, hex(m->rng_state[k], 16));
    for (int i = 0; i < m->nvectors; i++) {
        json_t *v = json_object();
        bad |= set(v, "name", json_string(m->vectors[i].name));
        bad |= set(v, "length", u64(m->vectors[i].length));
        bad |= add(vecs, v);
    }
    for (int r = 0; r < m->nranks; r++) bad |= add(ranks, rank_entry(&m->ranks[r], m->generation));
    for (int i = 0; i < m->nmeta; i++) bad |= set(meta, m->meta[i].key, json_string(m->meta[i].value));
    bad |= set(root, "format", json_string(FORMAT_NAME));
    /* generation 0 is a format version 1 checkpoint (no generation field) */
    bad |= set(root, "format_version", json_integer(m->generation ? DT_CKPT_FORMAT_VERSION : 1));
    if (m->generation) bad |= set(root, "generation", u64(m->generation));
    bad |= set(root, "step", u64(m->step));
    bad |= set(root, "epoch", u64(m->epoch));
    bad |= set(root, "epoch_position", u64(m->epoch_position));
    bad |= set(root, "rng_state", rng);
    bad |= set(root, "world_size", json_integer(m->world_size));
    bad |= set(root, "zero_level", json_integer(m->zero_level));
    bad |= set(root, "num_params", u64(m->num_params));
    bad |= set(root, "num_buffers", u64(m->num_buffers));
    bad |= set(root, "vectors", vecs);
    bad |= set(root, "ranks", ranks);
    bad |= set(root, "metadata", meta);
    char *text = bad ? NULL : dtj_dump_outline(root, len);
    json_decref(root);
    return text;
}

int dt_ckpt_manifest_to_json(const dt_ckpt_manifest *m, char **out, size_t *len) {
    BE_CHECK();
    if (!m || !out) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    *out = NULL;
    int rc = ck_validate("manifest", m, DT_ERR_INVALID);
    if (rc) return rc;
    *out = ck_to_json(m, len);
    return *out ? DT_OK : DT_ERR(DT_ERR_NOMEM, "out of memory");
}
