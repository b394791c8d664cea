/* src/io/ckpt_manifest.c - sharded checkpoint directories: rank files, manifest,
 * atomic commit, resharding reads. See include/dtrain/ckpt.h. */
#include "dtrain/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "io/ckpt_json.h"
#include "io/ckpt_util.h"
#include "core/error.h"

#define RF_MAGIC "DTCKPT01"
#define RF_VERSION 1u
#define RF_FIXED 32u                  /* fixed part of a rank file header */
#define RF_MAX_HEADER (64u << 20)
#define MAX_VECTOR_LEN (1ull << 60)   /* elements; keeps byte counts far from overflow */
#define MANIFEST "manifest.json"
#define MANIFEST_TMP "manifest.json.tmp"
#define FORMAT_NAME "dtrain-checkpoint"

#define BE_CHECK()                                                                       \
    do {                                                                                 \
        if (!dtck_little_endian())                                                       \
            return DT_ERR(DT_ERR_UNSUPPORTED, "checkpoints need a little-endian host");  \
    } while (0)

/* ---- fault injection -------------------------------------------------------- */
static dt_ckpt_fault_fn g_fault;
static void *g_fault_arg;
void dt_ckpt_set_fault_hook(dt_ckpt_fault_fn fn, void *arg) {
    g_fault = fn;
    g_fault_arg = arg;
}
static int fault(const char *step) { return g_fault ? g_fault(step, g_fault_arg) : 0; }

/* ---- helpers ---------------------------------------------------------------- */
/* A rank file's name: rank-RRRRR.gG.bin, or rank-RRRRR.bin in format version 1
 * (generation 0). */
static void rank_name(char *buf, size_t cap, int rank, uint64_t gen) {
    if (gen) snprintf(buf, cap, "rank-%05d.g%llu.bin", rank, (unsigned long long)gen);
    else snprintf(buf, cap, "rank-%05d.bin", rank);
}

static char *rank_path(const char *dir, int rank, uint64_t gen) {
    char name[64];
    rank_name(name, sizeof name, rank, gen);
    return dtck_join(dir, name);
}

/* 1 if name is exactly what rank_name writes for some rank and generation
 * (then *gen is set): the files dtrain itself writes into a checkpoint
 * directory, the only ones it may ever remove. */
static int parse_rank_name(const char *name, uint64_t *gen) {
    if (strncmp(name, "rank-", 5) != 0) return 0;
    const char *p = name + 5;
    long rank = 0;
    int nd = 0;
    for (; *p >= '0' && *p <= '9' && nd < 8; p++, nd++) rank = rank * 10 + (*p - '0');
    if (nd < 5 || rank >= DT_CKPT_MAX_WORLD) return 0;
    uint64_t g = 0;
    if (strncmp(p, ".g", 2) == 0) {
        p += 2;
        nd = 0;
        for (; *p >= '0' && *p <= '9' && nd < 20; p++, nd++) {
            if (g > (UINT64_MAX - 9) / 10) return 0;
            g = g * 10 + (uint64_t)(*p - '0');
        }
        if (nd == 0 || g == 0) return 0;
    }
    if (strcmp(p, ".bin") != 0) return 0;
    char canon[64];
    rank_name(canon, sizeof canon, (int)rank, g);
    if (strcmp(canon, name) != 0) return 0; /* leading zeros and the like: not ours */
    *gen = g;
    return 1;
}

/* dir without trailing slashes, malloc'd ("ckpt/" and "ckpt" name the same
 * checkpoint, and "ckpt/" + ".tmp" must not land inside it). */
static int norm_dir(const char *dir, char **out) {
    *out = NULL;
    if (!dir || !*dir) return DT_ERR(DT_ERR_INVALID, "NULL or empty checkpoint directory");
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    if (n == 1 && dir[0] == '/') return DT_ERR(DT_ERR_INVALID, "the checkpoint directory cannot be '/'");
    char *c = malloc(n + 1);
    if (!c) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    memcpy(c, dir, n);
    c[n] = '\0';
    *out = c;
    return DT_OK;
}

static uint64_t round8(uint64_t x) { return (x + 7) & ~(uint64_t)7; }

/* Header size of a rank file holding these ranges. */
static uint64_t rf_header_bytes(const dt_ckpt_range *r, int n) {
    uint64_t b = RF_FIXED;
    for (int i = 0; i < n; i++) b += 2 + strlen(r[i].vector) + 16;
    return round8(b);
}

static uint64_t rf_data_bytes(const dt_ckpt_range *r, int n) {
    uint64_t b = 0;
    for (int i = 0; i < n; i++) b += 4 * r[i].count;
    return b;
}

static int name_ok(const char *s) {
    if (!s) return 0;
    size_t n = strlen(s);
    return n > 0 && n <= DT_CKPT_MAX_NAME && dtj_utf8_valid(s, n);
}

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
static int validate(const char *fname, const dt_ckpt_manifest *m, int st) {
    if (m->world_size < 1 || m->world_size > DT_CKPT_MAX_WORLD)
        return DT_ERR(st, "%s: world_size %d out of range [1, %d]", fname, m->world_size, DT_CKPT_MAX_WORLD);
    if (m->zero_level < 0 || m->zero_level > 3)
        return DT_ERR(st, "%s: zero_level %d out of range [0, 3]", fname, m->zero_level);
    if (m->nvectors < 0 || (m->nvectors && !m->vectors) || m->nmeta < 0 || (m->nmeta && !m->meta) ||
        m->nranks < 0 || (m->nranks && !m->ranks))
        return DT_ERR(st, "%s: negative count or NULL array", fname);
    if (m->nranks > m->world_size)
        return DT_ERR(st, "%s: %d rank files for world_size %d", fname, m->nranks, m->world_size);
    for (int i = 0; i < m->nvectors; i++) {
        if (!name_ok(m->vectors[i].name))
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
        uint64_t want = rf_header_bytes(rf->ranges, rf->nranges) + rf_data_bytes(rf->ranges, rf->nranges);
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
typedef struct ck_priv {
    dtj_doc *doc;
    dt_ckpt_vector *vectors;
    dt_ckpt_rank_file *ranks;
    dt_ckpt_range *ranges;
    dt_ckpt_kv *meta;
    unsigned char *verified;   /* per rank entry */
    char *dir_arg;             /* directory given to load (NULL after parse) */
    char *dir_resolved;        /* the one actually read (DIR or DIR.old) */
    char *cache_dir;           /* directory `verified` refers to */
} ck_priv;

typedef struct ck_holder { dt_ckpt_manifest m; ck_priv p; } ck_holder;

void dt_ckpt_manifest_free(dt_ckpt_manifest *m) {
    if (!m || !m->priv_) return; /* caller-built: nothing of ours */
    ck_holder *h = (ck_holder *)m;
    dtj_free(h->p.doc);
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

static int parse_hex(const dtj_val *v, int maxdig, uint64_t *out) {
    if (!dtj_is_cstr(v) || v->len == 0 || v->len > (size_t)maxdig) return -1;
    uint64_t x = 0;
    for (size_t k = 0; k < v->len; k++) {
        char c = v->str[k];
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
static int check_keys(const char *fname, const dtj_val *obj, const char *what, const char *const *allowed) {
    if (!obj || obj->type != DTJ_OBJ) return DT_ERR(DT_ERR_IO, "%s: %s is not a JSON object", fname, what);
    for (size_t k = 0; k < obj->len; k++) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            if (obj->members[k].key_len == strlen(*a) && strcmp(obj->members[k].key, *a) == 0) ok = 1;
        if (!ok) return DT_ERR(DT_ERR_IO, "%s: %s: unknown field '%.100s'", fname, what, obj->members[k].key);
    }
    return DT_OK;
}

static int get_u64(const char *fname, const dtj_val *obj, const char *what, const char *key, uint64_t *out) {
    const dtj_val *v = dtj_get(obj, key);
    if (!v) return DT_ERR(DT_ERR_IO, "%s: %s: missing field '%s'", fname, what, key);
    if (dtj_u64(v, out)) return DT_ERR(DT_ERR_IO, "%s: %s: '%s' is not a non-negative integer", fname, what, key);
    return DT_OK;
}

static int get_int(const char *fname, const dtj_val *obj, const char *what, const char *key, int64_t max, int *out) {
    uint64_t x;
    int rc = get_u64(fname, obj, what, key, &x);
    if (rc) return rc;
    if (x > (uint64_t)max) return DT_ERR(DT_ERR_IO, "%s: %s: '%s' = %llu too large", fname, what, key,
                                         (unsigned long long)x);
    *out = (int)x;
    return DT_OK;
}

static const char *get_cstr(const dtj_val *obj, const char *key) {
    const dtj_val *v = dtj_get(obj, key);
    return dtj_is_cstr(v) ? v->str : NULL;
}

static int parse_manifest(const char *fname, const char *json, size_t len, ck_holder **out) {
    *out = NULL;
    char jerr[256];
    dtj_doc *doc = dtj_parse(json, len, jerr, sizeof jerr);
    if (!doc) return DT_ERR(DT_ERR_IO, "%s: manifest JSON syntax error %s", fname, jerr);
    ck_holder *h = calloc(1, sizeof *h);
    if (!h) { dtj_free(doc); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    h->m.priv_ = &h->p;
    h->p.doc = doc;
    dt_ckpt_manifest *m = &h->m;
    const dtj_val *root = dtj_root(doc);
    int rc;
    if (root->type != DTJ_OBJ) { rc = DT_ERR(DT_ERR_IO, "%s: manifest is not a JSON object", fname); goto fail; }
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
    } else if (dtj_get(root, "generation")) {
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
    const dtj_val *rng = dtj_get(root, "rng_state");
    if (!rng || rng->type != DTJ_ARR || rng->len != 4) {
        rc = DT_ERR(DT_ERR_IO, "%s: rng_state is not an array of 4 hex strings", fname);
        goto fail;
    }
    for (int k = 0; k < 4; k++)
        if (parse_hex(rng->items[k], 16, &m->rng_state[k])) {
            rc = DT_ERR(DT_ERR_IO, "%s: rng_state[%d] is not a hex string of 1-16 digits", fname, k);
            goto fail;
        }
    /* vectors */
    const dtj_val *vecs = dtj_get(root, "vectors");
    if (!vecs || vecs->type != DTJ_ARR || vecs->len > INT32_MAX) {
        rc = DT_ERR(DT_ERR_IO, "%s: missing or invalid 'vectors' array", fname);
        goto fail;
    }
    h->p.vectors = calloc(vecs->len ? vecs->len : 1, sizeof *h->p.vectors);
    if (!h->p.vectors) { rc = DT_ERR(DT_ERR_NOMEM, "out of memory"); goto fail; }
    static const char *const vec_keys[] = {"name", "length", NULL};
    for (size_t i = 0; i < vecs->len; i++) {
        const dtj_val *e = vecs->items[i];
        if ((rc = check_keys(fname, e, "vectors entry", vec_keys))) goto fail;
        h->p.vectors[i].name = get_cstr(e, "name");
        if (!h->p.vectors[i].name) { rc = DT_ERR(DT_ERR_IO, "%s: vectors[%zu]: missing name", fname, i); goto fail; }
        if ((rc = get_u64(fname, e, "vectors entry", "length", &h->p.vectors[i].length))) goto fail;
    }
    m->vectors = h->p.vectors;
    m->nvectors = (int)vecs->len;
    /* ranks */
    const dtj_val *rks = dtj_get(root, "ranks");
    if (!rks || rks->type != DTJ_ARR || rks->len > DT_CKPT_MAX_WORLD) {
        rc = DT_ERR(DT_ERR_IO, "%s: missing or invalid 'ranks' array", fname);
        goto fail;
    }
    size_t total = 0;
    for (size_t i = 0; i < rks->len; i++) {
        const dtj_val *g = dtj_get(rks->items[i], "ranges");
        if (!g || g->type != DTJ_ARR || g->len > INT32_MAX) {
            rc = DT_ERR(DT_ERR_IO, "%s: ranks[%zu]: missing or invalid 'ranges' array", fname, i);
            goto fail;
        }
        total += g->len;
    }
    h->p.ranks = calloc(rks->len ? rks->len : 1, sizeof *h->p.ranks);
    h->p.ranges = calloc(total ? total : 1, sizeof *h->p.ranges);
    h->p.verified = calloc(rks->len ? rks->len : 1, 1);
    if (!h->p.ranks || !h->p.ranges || !h->p.verified) { rc = DT_ERR(DT_ERR_NOMEM, "out of memory"); goto fail; }
    static const char *const rank_keys[] = {"rank", "file", "bytes", "crc32", "ranges", NULL};
    static const char *const range_keys[] = {"vector", "offset", "count", NULL};
    size_t used = 0;
    for (size_t i = 0; i < rks->len; i++) {
        const dtj_val *e = rks->items[i];
        dt_ckpt_rank_file *rf = &h->p.ranks[i];
        if ((rc = check_keys(fname, e, "ranks entry", rank_keys))) goto fail;
        if ((rc = get_int(fname, e, "ranks entry", "rank", DT_CKPT_MAX_WORLD, &rf->rank)) ||
            (rc = get_u64(fname, e, "ranks entry", "bytes", &rf->bytes)))
            goto fail;
        const char *file = get_cstr(e, "file");
        char want[64];
        rank_name(want, sizeof want, rf->rank, m->generation);
        if (!file || strcmp(file, want) != 0) {
            rc = DT_ERR(DT_ERR_IO, "%s: ranks[%zu]: file must be \"%s\"", fname, i, want);
            goto fail;
        }
        uint64_t crc;
        if (parse_hex(dtj_get(e, "crc32"), 8, &crc)) {
            rc = DT_ERR(DT_ERR_IO, "%s: ranks[%zu]: crc32 is not a hex string of 1-8 digits", fname, i);
            goto fail;
        }
        rf->crc32 = (uint32_t)crc;
        const dtj_val *g = dtj_get(e, "ranges");
        rf->ranges = &h->p.ranges[used];
        rf->nranges = (int)g->len;
        for (size_t j = 0; j < g->len; j++) {
            dt_ckpt_range *r = &h->p.ranges[used++];
            if ((rc = check_keys(fname, g->items[j], "range", range_keys))) goto fail;
            r->vector = get_cstr(g->items[j], "vector");
            if (!r->vector) { rc = DT_ERR(DT_ERR_IO, "%s: ranks[%zu]: range without vector", fname, i); goto fail; }
            if ((rc = get_u64(fname, g->items[j], "range", "offset", &r->offset)) ||
                (rc = get_u64(fname, g->items[j], "range", "count", &r->count)))
                goto fail;
        }
    }
    m->ranks = h->p.ranks;
    m->nranks = (int)rks->len;
    /* metadata (optional) */
    const dtj_val *md = dtj_get(root, "metadata");
    if (md) {
        if (md->type != DTJ_OBJ || md->len > INT32_MAX) {
            rc = DT_ERR(DT_ERR_IO, "%s: metadata is not a JSON object", fname);
            goto fail;
        }
        h->p.meta = calloc(md->len ? md->len : 1, sizeof *h->p.meta);
        if (!h->p.meta) { rc = DT_ERR(DT_ERR_NOMEM, "out of memory"); goto fail; }
        for (size_t k = 0; k < md->len; k++) {
            const dtj_member *mm = &md->members[k];
            if (strlen(mm->key) != mm->key_len || !dtj_is_cstr(mm->val)) {
                rc = DT_ERR(DT_ERR_IO, "%s: metadata '%.100s' is not a string", fname, mm->key);
                goto fail;
            }
            h->p.meta[k].key = mm->key;
            h->p.meta[k].value = mm->val->str;
        }
        m->meta = h->p.meta;
        m->nmeta = (int)md->len;
    }
    if ((rc = validate(fname, m, DT_ERR_IO))) goto fail;
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
    int rc = parse_manifest("<memory>", json, len, &h);
    if (rc) return rc;
    *out = &h->m;
    return DT_OK;
}

/* 1 if dir/name exists (any type), 0 if not, -1 on another error (errno). */
static int exists_in(const char *dir, const char *name) {
    char *p = dtck_join(dir, name);
    if (!p) { errno = ENOMEM; return -1; }
    int r = dtck_exists(p);
    free(p);
    return r;
}

static int load_impl(const char *dir, dt_ckpt_manifest **out) {
    BE_CHECK();
    if (!dir || !*dir || !out) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    *out = NULL;
    char *resolved = dtck_cat(dir, "");
    if (!resolved) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    int have_dir = dtck_exists(dir);
    if (have_dir == 0 || exists_in(dir, MANIFEST) == 0) {
        /* a format version 1 writer crashed between its two renames */
        char *old = dtck_cat(dir, ".old");
        int have_old = old ? exists_in(old, MANIFEST) : -1;
        if (have_old == 1) {
            free(resolved);
            resolved = old;
        } else {
            free(old);
            if (have_dir == 0) {
                free(resolved);
                return DT_ERR(DT_ERR_IO, "%s: no checkpoint: directory does not exist", dir);
            }
        }
    }
    char *path = dtck_join(resolved, MANIFEST);
    if (!path) { free(resolved); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    char *text;
    size_t len;
    int r = dtck_read_file(path, DT_CKPT_MAX_MANIFEST, &text, &len);
    if (r != 0) {
        int rc = r == -2 ? DT_ERR(DT_ERR_IO, "%s: larger than %u bytes", path, DT_CKPT_MAX_MANIFEST)
                         : DT_ERR(DT_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        free(path);
        free(resolved);
        return rc;
    }
    ck_holder *h;
    int rc = parse_manifest(path, text, len, &h);
    free(text);
    free(path);
    if (rc) { free(resolved); return rc; }
    h->p.dir_arg = dtck_cat(dir, "");
    h->p.dir_resolved = resolved;
    if (!h->p.dir_arg) { dt_ckpt_manifest_free(&h->m); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
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

static void to_json(dtj_buf *b, const dt_ckpt_manifest *m) {
    /* generation 0 is a format version 1 checkpoint (no generation field) */
    dtj_printf(b, "{\n  \"format\": \"" FORMAT_NAME "\",\n  \"format_version\": %d,\n",
               m->generation ? DT_CKPT_FORMAT_VERSION : 1);
    if (m->generation) dtj_printf(b, "  \"generation\": %llu,\n", (unsigned long long)m->generation);
    dtj_printf(b, "  \"step\": %llu,\n  \"epoch\": %llu,\n  \"epoch_position\": %llu,\n",
               (unsigned long long)m->step, (unsigned long long)m->epoch, (unsigned long long)m->epoch_position);
    dtj_printf(b, "  \"rng_state\": [\"%016llx\", \"%016llx\", \"%016llx\", \"%016llx\"],\n",
               (unsigned long long)m->rng_state[0], (unsigned long long)m->rng_state[1],
               (unsigned long long)m->rng_state[2], (unsigned long long)m->rng_state[3]);
    dtj_printf(b, "  \"world_size\": %d,\n  \"zero_level\": %d,\n  \"num_params\": %llu,\n  \"num_buffers\": %llu,\n",
               m->world_size, m->zero_level, (unsigned long long)m->num_params, (unsigned long long)m->num_buffers);
    dtj_puts(b, "  \"vectors\": [");
    for (int i = 0; i < m->nvectors; i++) {
        dtj_puts(b, i ? ",\n    {\"name\": " : "\n    {\"name\": ");
        dtj_put_str(b, m->vectors[i].name, strlen(m->vectors[i].name));
        dtj_printf(b, ", \"length\": %llu}", (unsigned long long)m->vectors[i].length);
    }
    dtj_puts(b, m->nvectors ? "\n  ],\n  \"ranks\": [" : "],\n  \"ranks\": [");
    for (int r = 0; r < m->nranks; r++) {
        const dt_ckpt_rank_file *rf = &m->ranks[r];
        char name[64];
        rank_name(name, sizeof name, rf->rank, m->generation);
        dtj_printf(b, "%s\n    {\"rank\": %d, \"file\": \"%s\", \"bytes\": %llu, \"crc32\": \"%08x\", \"ranges\": [",
                   r ? "," : "", rf->rank, name, (unsigned long long)rf->bytes, (unsigned)rf->crc32);
        for (int j = 0; j < rf->nranges; j++) {
            dtj_puts(b, j ? ", {\"vector\": " : "{\"vector\": ");
            dtj_put_str(b, rf->ranges[j].vector, strlen(rf->ranges[j].vector));
            dtj_printf(b, ", \"offset\": %llu, \"count\": %llu}", (unsigned long long)rf->ranges[j].offset,
                       (unsigned long long)rf->ranges[j].count);
        }
        dtj_puts(b, "]}");
    }
    dtj_puts(b, m->nranks ? "\n  ],\n  \"metadata\": {" : "],\n  \"metadata\": {");
    for (int i = 0; i < m->nmeta; i++) {
        dtj_puts(b, i ? ",\n    " : "\n    ");
        dtj_put_str(b, m->meta[i].key, strlen(m->meta[i].key));
        dtj_puts(b, ": ");
        dtj_put_str(b, m->meta[i].value, strlen(m->meta[i].value));
    }
    dtj_puts(b, m->nmeta ? "\n  }\n}\n" : "}\n}\n");
}

int dt_ckpt_manifest_to_json(const dt_ckpt_manifest *m, char **out, size_t *len) {
    BE_CHECK();
    if (!m || !out) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    *out = NULL;
    int rc = validate("manifest", m, DT_ERR_INVALID);
    if (rc) return rc;
    dtj_buf b = {0};
    to_json(&b, m);
    if (b.oom) { dtj_buf_free(&b); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    *out = b.p;
    if (len) *len = b.len;
    return DT_OK;
}

/* ---- rank files ------------------------------------------------------------- */
static uint32_t crc_update(uint32_t crc, const void *p, size_t n) {
    const unsigned char *s = p;
    uLong c = crc;
    while (n) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, s, k);
        s += k;
        n -= k;
    }
    return (uint32_t)c;
}

/* ---- the directory ------------------------------------------------------------ */
/* Scans dir: *foreign gets the first entry that is neither dtrain's
 * (manifest.json, manifest.json.tmp, a rank file name) nor "."/".." (NULL if
 * none; malloc'd), *max_gen the largest rank file generation present (0 if
 * none). */
static int scan_dir(const char *dir, char **foreign, uint64_t *max_gen) {
    *foreign = NULL;
    *max_gen = 0;
    DIR *d = opendir(dir);
    if (!d) return DT_ERR(DT_ERR_IO, "%s: cannot list the directory: %s", dir, strerror(errno));
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        uint64_t g;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || strcmp(n, MANIFEST) == 0 || strcmp(n, MANIFEST_TMP) == 0)
            continue;
        if (parse_rank_name(n, &g)) {
            if (g > *max_gen) *max_gen = g;
        } else if (!*foreign) {
            *foreign = dtck_cat(n, "");
            if (!*foreign) { closedir(d); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
        }
        errno = 0;
    }
    int rc = errno ? DT_ERR(DT_ERR_IO, "%s: cannot list the directory: %s", dir, strerror(errno)) : DT_OK;
    closedir(d);
    return rc;
}

/* The generation of the checkpoint in dir (0 for format version 1), or -1 in
 * *gen_or_none when there is no manifest.json. A manifest that is not a
 * readable dtrain manifest is refused: dtrain does not write over what it
 * cannot identify as its own. */
static int current_generation(const char *dir, int64_t *gen_or_none) {
    *gen_or_none = -1;
    char *path = dtck_join(dir, MANIFEST);
    if (!path) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    struct stat st;
    int rc = DT_OK;
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT) rc = DT_ERR(DT_ERR_IO, "%s: %s", path, strerror(errno));
        free(path);
        return rc;
    }
    char *text = NULL;
    size_t len = 0;
    int r = S_ISREG(st.st_mode) ? dtck_read_file(path, DT_CKPT_MAX_MANIFEST, &text, &len) : -3;
    ck_holder *h = NULL;
    if (r == 0) rc = parse_manifest(path, text, len, &h);
    if (r != 0 || rc) {
        char why[512];
        snprintf(why, sizeof why, "%s", r == -3 ? "not a regular file" : r == -2 ? "too large" : r ? strerror(errno)
                                                                                                  : dt_last_error());
        rc = DT_ERR(DT_ERR_INVALID,
                    "%s is not a readable dtrain checkpoint manifest (%s): refusing to write a checkpoint into %s "
                    "(dtrain never replaces files it cannot identify as its own); move it away or choose "
                    "another checkpoint directory",
                    path, why, dir);
    } else {
        *gen_or_none = (int64_t)(h->m.generation > (uint64_t)INT64_MAX / 2 ? (uint64_t)INT64_MAX / 2 : h->m.generation);
    }
    dt_ckpt_manifest_free(h ? &h->m : NULL);
    free(text);
    free(path);
    return rc;
}

static int prepare_impl(const char *dir, uint64_t *generation) {
    BE_CHECK();
    if (!dir || !*dir) return DT_ERR(DT_ERR_INVALID, "NULL or empty dir");
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno != ENOENT) return DT_ERR(DT_ERR_IO, "%s: %s", dir, strerror(errno));
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return DT_ERR(DT_ERR_IO, "%s: cannot create the checkpoint directory: %s", dir, strerror(errno));
        if (dtck_fsync_dir_of(dir, 0) != 0) return DT_ERR(DT_ERR_IO, "%s: fsync of its parent: %s", dir, strerror(errno));
        if (stat(dir, &st) != 0) return DT_ERR(DT_ERR_IO, "%s: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return DT_ERR(DT_ERR_INVALID,
                      "%s exists and is not a directory: a checkpoint is a directory (dtrain never moves or "
                      "replaces the path given); choose another checkpoint directory",
                      dir);
    int64_t cur;
    int rc = current_generation(dir, &cur);
    if (rc) return rc;
    char *foreign = NULL;
    uint64_t max_gen = 0;
    if ((rc = scan_dir(dir, &foreign, &max_gen))) return rc;
    if (cur < 0 && foreign) {
        rc = DT_ERR(DT_ERR_INVALID,
                    "%s: directory is not empty and holds no dtrain checkpoint (it contains '%.200s'): dtrain "
                    "writes checkpoints only into a new or empty directory or over one of its own checkpoints, "
                    "and never deletes files it did not write; choose another checkpoint directory",
                    dir, foreign);
        free(foreign);
        return rc;
    }
    free(foreign);
    uint64_t g = cur > 0 && (uint64_t)cur > max_gen ? (uint64_t)cur : max_gen;
    if (g >= UINT64_MAX / 2) return DT_ERR(DT_ERR_INVALID, "%s: generation %llu too large", dir, (unsigned long long)g);
    /* a file can be created here (read-only file system, permissions) */
    char *probe = dtck_join(dir, MANIFEST_TMP);
    if (!probe) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) rc = DT_ERR(DT_ERR_IO, "%s: cannot create files in the checkpoint directory: %s", probe, strerror(errno));
    else {
        close(fd);
        unlink(probe);
    }
    free(probe);
    if (!rc && generation) *generation = g + 1;
    return rc;
}

static int write_shard_impl(const char *dir, uint64_t gen, int rank, const dt_ckpt_shard *shard,
                            dt_ckpt_shard_info *info) {
    BE_CHECK();
    if (!dir || !*dir || !shard) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    if (gen == 0 || gen >= UINT64_MAX / 2)
        return DT_ERR(DT_ERR_INVALID, "generation %llu (use the one dt_ckpt_prepare returned)", (unsigned long long)gen);
    if (rank < 0 || rank >= DT_CKPT_MAX_WORLD) return DT_ERR(DT_ERR_INVALID, "rank %d out of range", rank);
    if (shard->nranges < 0 || (shard->nranges && !shard->ranges))
        return DT_ERR(DT_ERR_INVALID, "rank %d: invalid range list", rank);
    for (int j = 0; j < shard->nranges; j++) {
        const dt_ckpt_range *g = &shard->ranges[j];
        if (!name_ok(g->vector))
            return DT_ERR(DT_ERR_INVALID, "rank %d: range %d: vector name missing, empty, too long or not UTF-8",
                          rank, j);
        if (g->count > MAX_VECTOR_LEN || g->offset > MAX_VECTOR_LEN)
            return DT_ERR(DT_ERR_INVALID, "rank %d: range %d too large", rank, j);
        if (g->count && !g->data) return DT_ERR(DT_ERR_INVALID, "rank %d: range %d: NULL data", rank, j);
    }
    uint64_t hb = rf_header_bytes(shard->ranges, shard->nranges);
    if (hb > RF_MAX_HEADER) return DT_ERR(DT_ERR_INVALID, "rank %d: too many ranges", rank);
    uint64_t db = rf_data_bytes(shard->ranges, shard->nranges);
    char *path = rank_path(dir, rank, gen);
    unsigned char *hdr = calloc((size_t)hb, 1);
    int rc = DT_OK, fd = -1;
    if (!path || !hdr) { rc = DT_ERR(DT_ERR_NOMEM, "out of memory"); goto done; }
    memcpy(hdr, RF_MAGIC, 8);
    dtck_put_u32(hdr + 8, RF_VERSION);
    dtck_put_u32(hdr + 12, (uint32_t)rank);
    dtck_put_u32(hdr + 16, (uint32_t)shard->nranges);
    dtck_put_u32(hdr + 20, (uint32_t)hb);
    dtck_put_u64(hdr + 24, db);
    size_t p = RF_FIXED;
    for (int j = 0; j < shard->nranges; j++) {
        const dt_ckpt_range *g = &shard->ranges[j];
        size_t nl = strlen(g->vector);
        hdr[p] = (unsigned char)(nl & 0xFF);
        hdr[p + 1] = (unsigned char)(nl >> 8);
        memcpy(hdr + p + 2, g->vector, nl);
        dtck_put_u64(hdr + p + 2 + nl, g->offset);
        dtck_put_u64(hdr + p + 10 + nl, g->count);
        p += 18 + nl;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        rc = DT_ERR(DT_ERR_IO, "%s: cannot create: %s%s", path, strerror(errno),
                    errno == ENOENT ? " (the checkpoint directory must exist: dt_ckpt_prepare creates it)" : "");
        free(hdr);
        free(path);
        return rc;
    }
    int f = fault("shard_write");
    if (f == DT_CKPT_FAULT_CRASH) { rc = DT_ERR(DT_ERR_IO, "%s: injected crash", path); goto done_keep; }
    if (f) { errno = EIO; rc = DT_ERR(DT_ERR_IO, "%s: injected write failure", path); goto done; }
    uint32_t crc = crc_update(0, hdr, (size_t)hb);
    if (dtck_write_all(fd, hdr, (size_t)hb)) { rc = DT_ERR(DT_ERR_IO, "%s: write: %s", path, strerror(errno)); goto done; }
    for (int j = 0; j < shard->nranges; j++) {
        const dt_ckpt_range *g = &shard->ranges[j];
        size_t nb = (size_t)g->count * 4;
        crc = crc_update(crc, g->data, nb);
        if (nb && dtck_write_all(fd, g->data, nb)) {
            rc = DT_ERR(DT_ERR_IO, "%s: write: %s", path, strerror(errno));
            goto done;
        }
    }
    f = fault("shard_sync");
    if (f == DT_CKPT_FAULT_CRASH) { rc = DT_ERR(DT_ERR_IO, "%s: injected crash", path); goto done_keep; }
    if (f || fsync(fd) != 0) {
        rc = DT_ERR(DT_ERR_IO, "%s: fsync: %s", path, f ? "injected failure" : strerror(errno));
        goto done;
    }
    int cfd = fd;
    fd = -1;
    if (close(cfd) != 0) { rc = DT_ERR(DT_ERR_IO, "%s: close: %s", path, strerror(errno)); goto done; }
    if (dtck_fsync_dir_of(dir, 1) != 0) { rc = DT_ERR(DT_ERR_IO, "%s: fsync: %s", dir, strerror(errno)); goto done; }
    if (info) {
        info->bytes = hb + db;
        info->crc32 = crc;
    }
done:
    if (fd >= 0) close(fd);
    if (rc) unlink(path); /* created by this call */
    free(hdr);
    free(path);
    return rc;
done_keep:
    if (fd >= 0) close(fd);
    free(hdr);
    free(path);
    return rc;
}

/* Parsed rank file header. names point into buf. */
typedef struct rf_hdr {
    unsigned char *buf;
    uint32_t rank, nranges, hbytes;
    uint64_t dbytes;
    dt_ckpt_range *ranges;
    char **names;
} rf_hdr;

static void rf_hdr_free(rf_hdr *h) {
    if (h->names)
        for (uint32_t i = 0; i < h->nranges; i++) free(h->names[i]);
    free(h->names);
    free(h->ranges);
    free(h->buf);
    memset(h, 0, sizeof *h);
}

/* Reads and checks a rank file header: magic, version, internal consistency
 * and the file size implied by it. */
static int rf_read_header(const char *path, int fd, uint64_t fsize, rf_hdr *h) {
    memset(h, 0, sizeof *h);
    unsigned char fixed[RF_FIXED];
    if (fsize < RF_FIXED || dtck_pread_all(fd, fixed, RF_FIXED, 0) != RF_FIXED)
        return DT_ERR(DT_ERR_IO, "%s: truncated: %llu bytes, shorter than the %u-byte header", path,
                      (unsigned long long)fsize, RF_FIXED);
    if (memcmp(fixed, RF_MAGIC, 8) != 0)
        return DT_ERR(DT_ERR_IO, "%s: bad magic (not a dtrain checkpoint rank file)", path);
    uint32_t ver = dtck_get_u32(fixed + 8);
    if (ver != RF_VERSION)
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: rank file format version %u not supported (this build reads %u)", path,
                      ver, RF_VERSION);
    h->rank = dtck_get_u32(fixed + 12);
    h->nranges = dtck_get_u32(fixed + 16);
    h->hbytes = dtck_get_u32(fixed + 20);
    h->dbytes = dtck_get_u64(fixed + 24);
    if (h->hbytes < RF_FIXED || h->hbytes > RF_MAX_HEADER || h->hbytes % 8 ||
        h->nranges > (h->hbytes - RF_FIXED) / 18)
        return DT_ERR(DT_ERR_IO, "%s: corrupt header (header size %u, %u ranges)", path, h->hbytes, h->nranges);
    if (h->hbytes > fsize)
        return DT_ERR(DT_ERR_IO, "%s: truncated: %llu bytes, header says %u", path, (unsigned long long)fsize,
                      h->hbytes);
    h->buf = malloc(h->hbytes);
    h->ranges = calloc(h->nranges ? h->nranges : 1, sizeof *h->ranges);
    h->names = calloc(h->nranges ? h->nranges : 1, sizeof *h->names);
    if (!h->buf || !h->ranges || !h->names) { rf_hdr_free(h); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    if (dtck_pread_all(fd, h->buf, h->hbytes, 0) != (long long)h->hbytes) {
        rf_hdr_free(h);
        return DT_ERR(DT_ERR_IO, "%s: read error", path);
    }
    size_t p = RF_FIXED;
    uint64_t data = 0;
    for (uint32_t j = 0; j < h->nranges; j++) {
        if (p + 2 > h->hbytes) goto corrupt;
        size_t nl = (size_t)h->buf[p] | ((size_t)h->buf[p + 1] << 8);
        if (nl == 0 || nl > DT_CKPT_MAX_NAME || p + 18 + nl > h->hbytes) goto corrupt;
        h->names[j] = malloc(nl + 1);
        if (!h->names[j]) { rf_hdr_free(h); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
        memcpy(h->names[j], h->buf + p + 2, nl);
        h->names[j][nl] = '\0';
        if (strlen(h->names[j]) != nl) goto corrupt;
        h->ranges[j].vector = h->names[j];
        h->ranges[j].offset = dtck_get_u64(h->buf + p + 2 + nl);
        h->ranges[j].count = dtck_get_u64(h->buf + p + 10 + nl);
        if (h->ranges[j].count > MAX_VECTOR_LEN || h->ranges[j].offset > MAX_VECTOR_LEN) goto corrupt;
        data += 4 * h->ranges[j].count;
        if (data > (1ull << 62)) goto corrupt;
        p += 18 + nl;
    }
    if (round8(p) != h->hbytes || data != h->dbytes) goto corrupt;
    if (fsize < (uint64_t)h->hbytes + h->dbytes) {
        rf_hdr_free(h);
        return DT_ERR(DT_ERR_IO, "%s: truncated: %llu bytes, header says %llu", path, (unsigned long long)fsize,
                      (unsigned long long)((uint64_t)h->hbytes + h->dbytes));
    }
    if (fsize > (uint64_t)h->hbytes + h->dbytes) {
        rf_hdr_free(h);
        return DT_ERR(DT_ERR_IO, "%s: %llu bytes, header says %llu (trailing data)", path, (unsigned long long)fsize,
                      (unsigned long long)((uint64_t)h->hbytes + h->dbytes));
    }
    return DT_OK;
corrupt:
    rf_hdr_free(h);
    return DT_ERR(DT_ERR_IO, "%s: corrupt header (range table)", path);
}

static int file_crc(const char *path, int fd, uint64_t size, uint32_t *out) {
    size_t cap = 1u << 20;
    unsigned char *buf = malloc(cap);
    if (!buf) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    uint32_t crc = 0;
    uint64_t off = 0;
    while (off < size) {
        size_t want = size - off < cap ? (size_t)(size - off) : cap;
        long long got = dtck_pread_all(fd, buf, want, off);
        if (got != (long long)want) {
            free(buf);
            return DT_ERR(DT_ERR_IO, "%s: truncated or unreadable at byte %llu", path, (unsigned long long)off);
        }
        crc = crc_update(crc, buf, want);
        off += want;
    }
    free(buf);
    *out = crc;
    return DT_OK;
}

static int ranges_equal(const dt_ckpt_range *a, int na, const dt_ckpt_range *b, int nb) {
    if (na != nb) return 0;
    for (int i = 0; i < na; i++)
        if (strcmp(a[i].vector, b[i].vector) || a[i].offset != b[i].offset || a[i].count != b[i].count) return 0;
    return 1;
}

/* Full verification of one rank file against its manifest entry. */
static int verify_rank_file(const char *dir, uint64_t gen, const dt_ckpt_rank_file *rf, int check_crc) {
    char *path = rank_path(dir, rf->rank, gen);
    if (!path) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    int rc = DT_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    rf_hdr h;
    memset(&h, 0, sizeof h);
    struct stat st;
    if (fd < 0) {
        rc = DT_ERR(DT_ERR_IO, "%s: missing rank file: %s", path, strerror(errno));
        goto done;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { rc = DT_ERR(DT_ERR_IO, "%s: not a regular file", path); goto done; }
    uint64_t size = (uint64_t)st.st_size;
    if (size < rf->bytes) {
        rc = DT_ERR(DT_ERR_IO, "%s: truncated: %llu bytes, manifest says %llu", path, (unsigned long long)size,
                    (unsigned long long)rf->bytes);
        goto done;
    }
    if (size > rf->bytes) {
        rc = DT_ERR(DT_ERR_IO, "%s: size %llu bytes, manifest says %llu", path, (unsigned long long)size,
                    (unsigned long long)rf->bytes);
        goto done;
    }
    if ((rc = rf_read_header(path, fd, size, &h))) goto done;
    if (check_crc) {
        uint32_t crc;
        if ((rc = file_crc(path, fd, size, &crc))) goto done;
        if (crc != rf->crc32) {
            rc = DT_ERR(DT_ERR_IO, "%s: checksum mismatch (CRC32 %08x, manifest says %08x)", path, (unsigned)crc,
                        (unsigned)rf->crc32);
            goto done;
        }
    }
    if (h.rank != (uint32_t)rf->rank || !ranges_equal(h.ranges, (int)h.nranges, rf->ranges, rf->nranges))
        rc = DT_ERR(DT_ERR_MISMATCH, "%s: header (rank %u, %u ranges) does not match the manifest", path, h.rank,
                    h.nranges);
done:
    rf_hdr_free(&h);
    if (fd >= 0) close(fd);
    free(path);
    return rc;
}

/* ---- commit ----------------------------------------------------------------- */
/* Discovered rank table storage. */
typedef struct found_table {
    dt_ckpt_rank_file *ranks;
    rf_hdr *hdrs;
    int n;
} found_table;

static void found_free(found_table *t) {
    if (t->hdrs)
        for (int i = 0; i < t->n; i++) rf_hdr_free(&t->hdrs[i]);
    free(t->hdrs);
    free(t->ranks);
}

static int discover(const char *dir, uint64_t gen, int world, found_table *t) {
    t->ranks = calloc((size_t)world, sizeof *t->ranks);
    t->hdrs = calloc((size_t)world, sizeof *t->hdrs);
    t->n = 0;
    if (!t->ranks || !t->hdrs) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    for (int r = 0; r < world; r++) {
        char *path = rank_path(dir, r, gen);
        if (!path) return DT_ERR(DT_ERR_NOMEM, "out of memory");
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) {
            int rc = DT_ERR(DT_ERR_IO, "%s: missing rank file (did rank %d call dt_ckpt_write_shard?): %s", path, r,
                            strerror(errno));
            free(path);
            return rc;
        }
        struct stat st;
        int rc = fstat(fd, &st) != 0 ? DT_ERR(DT_ERR_IO, "%s: stat: %s", path, strerror(errno)) : DT_OK;
        if (!rc && !S_ISREG(st.st_mode)) rc = DT_ERR(DT_ERR_IO, "%s: not a regular file", path);
        if (!rc) rc = rf_read_header(path, fd, (uint64_t)st.st_size, &t->hdrs[r]);
        t->n = r + 1;
        if (!rc && t->hdrs[r].rank != (uint32_t)r)
            rc = DT_ERR(DT_ERR_MISMATCH, "%s: file says rank %u", path, t->hdrs[r].rank);
        uint32_t crc = 0;
        if (!rc) rc = file_crc(path, fd, (uint64_t)st.st_size, &crc);
        close(fd);
        free(path);
        if (rc) return rc;
        t->ranks[r].rank = r;
        t->ranks[r].nranges = (int)t->hdrs[r].nranges;
        t->ranks[r].ranges = t->hdrs[r].ranges;
        t->ranks[r].bytes = (uint64_t)st.st_size;
        t->ranks[r].crc32 = crc;
    }
    return DT_OK;
}

typedef struct span { uint64_t off, end; } span;
static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Every element of every vector is held by some rank file. */
static int check_coverage(const char *where, const dt_ckpt_manifest *m) {
    size_t total = 0;
    for (int r = 0; r < m->nranks; r++) total += (size_t)m->ranks[r].nranges;
    span *s = malloc((total ? total : 1) * sizeof *s);
    if (!s) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    int rc = DT_OK;
    for (int v = 0; v < m->nvectors && !rc; v++) {
        size_t n = 0;
        for (int r = 0; r < m->nranks; r++)
            for (int j = 0; j < m->ranks[r].nranges; j++) {
                const dt_ckpt_range *g = &m->ranks[r].ranges[j];
                if (g->count && strcmp(g->vector, m->vectors[v].name) == 0)
                    s[n++] = (span){g->offset, g->offset + g->count};
            }
        qsort(s, n, sizeof *s, cmp_span);
        uint64_t pos = 0;
        for (size_t k = 0; k <= n && !rc; k++) {
            uint64_t next = k < n ? s[k].off : m->vectors[v].length;
            if (next > pos)
                rc = DT_ERR(DT_ERR_MISMATCH, "%s: elements [%llu, %llu) of state vector '%s' are not in any rank file",
                            where, (unsigned long long)pos, (unsigned long long)next, m->vectors[v].name);
            if (k < n && s[k].end > pos) pos = s[k].end;
        }
    }
    free(s);
    return rc;
}

/* Removes the rank files (names of dtrain's own pattern) of the generations
 * in [lo, hi], generation 0 being format version 1's rank-RRRRR.bin; returns
 * -1 if some removal failed. Nothing else in dir is touched. */
static int remove_generations(const char *dir, uint64_t lo, uint64_t hi) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        uint64_t g;
        if (!parse_rank_name(e->d_name, &g) || g < lo || g > hi) continue;
        char *p = dtck_join(dir, e->d_name);
        if (!p || (unlink(p) != 0 && errno != ENOENT)) rc = -1;
        free(p);
    }
    closedir(d);
    return rc;
}

static int commit_impl(const char *dir, const dt_ckpt_manifest *m_in) {
    BE_CHECK();
    if (!dir || !*dir || !m_in) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    int rc = validate(dir, m_in, DT_ERR_INVALID);
    if (rc) return rc;
    dt_ckpt_manifest m = *m_in;
    m.format_version = DT_CKPT_FORMAT_VERSION;
    m.priv_ = NULL;
    const uint64_t gen = m.generation;
    if (gen == 0 || gen >= UINT64_MAX / 2)
        return DT_ERR(DT_ERR_INVALID, "%s: generation %llu (use the one dt_ckpt_prepare returned)", dir,
                      (unsigned long long)gen);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return DT_ERR(DT_ERR_IO, "%s: missing or not a directory (call dt_ckpt_prepare, then dt_ckpt_write_shard)", dir);
    char *mpath = dtck_join(dir, MANIFEST), *tpath = dtck_join(dir, MANIFEST_TMP);
    found_table ft = {0};
    dtj_buf b = {0};
    int fd = -1, renamed = 0, crashed = 0;
    if (!mpath || !tpath) { rc = DT_ERR(DT_ERR_NOMEM, "out of memory"); goto done; }
    /* the checkpoint being replaced: of an earlier generation, and readable */
    int64_t cur;
    if ((rc = current_generation(dir, &cur))) goto done;
    if (cur >= 0 && (uint64_t)cur >= gen) {
        rc = DT_ERR(DT_ERR_STATE, "%s: already holds generation %lld, not older than %llu: did another job save into "
                    "this directory after dt_ckpt_prepare?", dir, (long long)cur, (unsigned long long)gen);
        goto done;
    }
    if (m.nranks == 0) {
        if ((rc = discover(dir, gen, m.world_size, &ft))) goto done;
        m.ranks = ft.ranks;
        m.nranks = ft.n;
        if ((rc = validate(dir, &m, DT_ERR_MISMATCH))) goto done;
    } else {
        for (int r = 0; r < m.nranks; r++)
            if ((rc = verify_rank_file(dir, gen, &m.ranks[r], 0))) goto done;
    }
    if ((rc = check_coverage(dir, &m))) goto done;
    to_json(&b, &m);
    if (b.oom) { rc = DT_ERR(DT_ERR_NOMEM, "out of memory"); goto done; }
    int f = fault("manifest_write");
    crashed = f == DT_CKPT_FAULT_CRASH;
    if (f) { rc = DT_ERR(DT_ERR_IO, "%s: injected %s", tpath, crashed ? "crash" : "failure"); goto done; }
    fd = open(tpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) { rc = DT_ERR(DT_ERR_IO, "%s: cannot create: %s", tpath, strerror(errno)); goto done; }
    if (dtck_write_all(fd, b.p, b.len)) { rc = DT_ERR(DT_ERR_IO, "%s: write: %s", tpath, strerror(errno)); goto done; }
    f = fault("manifest_sync");
    if ((crashed = f == DT_CKPT_FAULT_CRASH)) { rc = DT_ERR(DT_ERR_IO, "%s: injected crash", tpath); goto done; }
    if (f || fsync(fd) != 0) {
        rc = DT_ERR(DT_ERR_IO, "%s: fsync: %s", tpath, f ? "injected failure" : strerror(errno));
        goto done;
    }
    int cfd = fd;
    fd = -1;
    if (close(cfd) != 0) { rc = DT_ERR(DT_ERR_IO, "%s: close: %s", tpath, strerror(errno)); goto done; }
    /* the rank files' and the temporary manifest's entries are on disk before the switch */
    if (dtck_fsync_dir_of(dir, 1) != 0) { rc = DT_ERR(DT_ERR_IO, "%s: fsync: %s", dir, strerror(errno)); goto done; }
    /* the switch: one atomic rename within the directory */
    f = fault("rename_manifest");
    if ((crashed = f == DT_CKPT_FAULT_CRASH)) { rc = DT_ERR(DT_ERR_IO, "%s: injected crash", mpath); goto done; }
    if (f || rename(tpath, mpath) != 0) {
        rc = DT_ERR(DT_ERR_IO, "%s: cannot rename %s into place: %s", mpath, tpath, f ? "injected failure" : strerror(errno));
        goto done;
    }
    renamed = 1;
    if (dtck_fsync_dir_of(dir, 1) != 0) {
        rc = DT_ERR(DT_ERR_IO, "%s: fsync after the switch to generation %llu: %s", dir, (unsigned long long)gen,
                    strerror(errno));
        goto done;
    }
    /* the previous generation's files (named in the replaced manifest) and
     * leftovers of interrupted saves: all rank files of older generations */
    f = fault("remove_old");
    if (f == DT_CKPT_FAULT_CRASH) { rc = DT_ERR(DT_ERR_IO, "%s: injected crash", dir); goto done; }
    if (!f) remove_generations(dir, 0, gen - 1); /* best effort; the next commit retries */
done:
    if (fd >= 0) close(fd);
    if (rc && !renamed && !crashed && rc != DT_ERR_STATE) {
        /* a failed save leaves the previous checkpoint and nothing of its own */
        if (tpath) unlink(tpath);
        remove_generations(dir, gen, gen);
    }
    dtj_buf_free(&b);
    found_free(&ft);
    free(mpath);
    free(tpath);
    return rc;
}

/* ---- reading ---------------------------------------------------------------- */
typedef struct piece { int rf; uint64_t off, cnt, fpos; } piece;
static int cmp_piece(const void *a, const void *b) {
    const piece *x = a, *y = b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return x->rf < y->rf ? -1 : x->rf > y->rf;
}

/* The directory to read: dir, or the one m was loaded from (NULL or the same
 * argument as given to load, which covers the DIR.old fallback). Resets the
 * verification cache when the directory changes. */
static int resolve(const char *dir, dt_ckpt_manifest *m, const char **out) {
    ck_priv *p = m->priv_;
    char *nd = NULL;
    if (dir) {
        int rc = norm_dir(dir, &nd);
        if (rc) return rc;
    }
    const char *d = nd;
    if (!nd || (p->dir_arg && strcmp(nd, p->dir_arg) == 0)) d = p->dir_resolved;
    if (!d) {
        free(nd);
        return DT_ERR(DT_ERR_INVALID, "no directory given and the manifest was not loaded from one");
    }
    if (!p->cache_dir || strcmp(p->cache_dir, d) != 0) {
        char *c = dtck_cat(d, "");
        if (!c) { free(nd); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
        free(p->cache_dir);
        p->cache_dir = c;
        memset(p->verified, 0, m->nranks ? (size_t)m->nranks : 1);
    }
    free(nd);
    *out = p->cache_dir;
    return DT_OK;
}

static int ensure_verified(const char *d, dt_ckpt_manifest *m, int i) {
    ck_priv *p = m->priv_;
    if (p->verified[i]) return DT_OK;
    int rc = verify_rank_file(d, m->generation, &m->ranks[i], 1);
    if (rc) return rc;
    p->verified[i] = 1;
    return DT_OK;
}

int dt_ckpt_verify(const char *dir, dt_ckpt_manifest *m) {
    BE_CHECK();
    if (!m || !m->priv_) return DT_ERR(DT_ERR_INVALID, "manifest must come from dt_ckpt_load_manifest/parse");
    const char *d;
    int rc = resolve(dir, m, &d);
    for (int i = 0; i < m->nranks && !rc; i++) rc = ensure_verified(d, m, i);
    return rc;
}

int dt_ckpt_read_range(const char *dir, dt_ckpt_manifest *m, const char *vector, uint64_t offset, uint64_t count,
                       float *dst) {
    BE_CHECK();
    if (!m || !m->priv_) return DT_ERR(DT_ERR_INVALID, "manifest must come from dt_ckpt_load_manifest/parse");
    if (!vector) return DT_ERR(DT_ERR_INVALID, "NULL vector name");
    int v = dt_ckpt_vector_index(m, vector);
    if (v < 0) return DT_ERR(DT_ERR_INVALID, "no state vector '%.200s' in the checkpoint", vector);
    uint64_t len = m->vectors[v].length;
    if (offset > len || count > len - offset)
        return DT_ERR(DT_ERR_INVALID, "range [%llu, +%llu) outside state vector '%s' (length %llu)",
                      (unsigned long long)offset, (unsigned long long)count, vector, (unsigned long long)len);
    if (count == 0) return DT_OK;
    if (!dst) return DT_ERR(DT_ERR_INVALID, "NULL destination");
    if (count > SIZE_MAX / 4) return DT_ERR(DT_ERR_INVALID, "range too large");
    const char *d;
    int rc = resolve(dir, m, &d);
    if (rc) return rc;
    size_t total = 0;
    for (int r = 0; r < m->nranks; r++) total += (size_t)m->ranks[r].nranges;
    piece *pc = malloc((total ? total : 1) * sizeof *pc);
    if (!pc) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    uint64_t end = offset + count;
    size_t n = 0;
    for (int r = 0; r < m->nranks; r++) {
        const dt_ckpt_rank_file *rf = &m->ranks[r];
        uint64_t fpos = rf_header_bytes(rf->ranges, rf->nranges);
        for (int j = 0; j < rf->nranges; j++) {
            const dt_ckpt_range *g = &rf->ranges[j];
            if (g->count && strcmp(g->vector, vector) == 0 && g->offset < end && g->offset + g->count > offset)
                pc[n++] = (piece){r, g->offset, g->count, fpos};
            fpos += 4 * g->count;
        }
    }
    qsort(pc, n, sizeof *pc, cmp_piece);
    uint64_t pos = offset;
    while (pos < end && !rc) {
        /* The piece covering pos that reaches furthest (fewest reads). */
        const piece *best = NULL;
        uint64_t next_start = end;
        for (size_t k = 0; k < n; k++) {
            if (pc[k].off <= pos && pc[k].off + pc[k].cnt > pos) {
                if (!best || pc[k].off + pc[k].cnt > best->off + best->cnt) best = &pc[k];
            } else if (pc[k].off > pos && pc[k].off < next_start) {
                next_start = pc[k].off;
            }
        }
        if (!best) {
            rc = DT_ERR(DT_ERR_MISMATCH, "%s: elements [%llu, %llu) of state vector '%s' are not in any rank file", d,
                        (unsigned long long)pos, (unsigned long long)next_start, vector);
            break;
        }
        if ((rc = ensure_verified(d, m, best->rf))) break;
        uint64_t stop = best->off + best->cnt < end ? best->off + best->cnt : end;
        size_t nb = (size_t)(stop - pos) * 4;
        char *path = rank_path(d, m->ranks[best->rf].rank, m->generation);
        if (!path) { rc = DT_ERR(DT_ERR_NOMEM, "out of memory"); break; }
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            rc = DT_ERR(DT_ERR_IO, "%s: missing rank file: %s", path, strerror(errno));
        } else {
            long long got = dtck_pread_all(fd, dst + (pos - offset), nb, best->fpos + 4 * (pos - best->off));
            if (got != (long long)nb)
                rc = DT_ERR(DT_ERR_IO, "%s: truncated (changed after verification?)", path);
            close(fd);
        }
        free(path);
        pos = stop;
    }
    free(pc);
    return rc;
}

/* ---- public entry points: normalize the directory name ------------------------ */
int dt_ckpt_load_manifest(const char *dir, dt_ckpt_manifest **out) {
    if (out) *out = NULL;
    if (!out) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    char *d;
    int rc = norm_dir(dir, &d);
    if (rc) return rc;
    rc = load_impl(d, out);
    free(d);
    return rc;
}

int dt_ckpt_prepare(const char *dir, uint64_t *generation) {
    char *d;
    int rc = norm_dir(dir, &d);
    if (rc) return rc;
    rc = prepare_impl(d, generation);
    free(d);
    return rc;
}

int dt_ckpt_write_shard(const char *dir, uint64_t generation, int rank, const dt_ckpt_shard *shard,
                        dt_ckpt_shard_info *info) {
    char *d;
    int rc = norm_dir(dir, &d);
    if (rc) return rc;
    rc = write_shard_impl(d, generation, rank, shard, info);
    free(d);
    return rc;
}

int dt_ckpt_commit(const char *dir, const dt_ckpt_manifest *m) {
    char *d;
    int rc = norm_dir(dir, &d);
    if (rc) return rc;
    rc = commit_impl(d, m);
    free(d);
    return rc;
}
