/* src/io/ckpt_read.c - loading a checkpoint: the manifest of a directory,
 * verification, reading ranges of state vectors at any layout (resharding).
 * See include/dtrain/ckpt.h. */
#include "io/ckpt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/fileio.h"
#include "core/error.h"

/* 1 if dir/name exists (any type), 0 if not, -1 on another error (errno). */
static int exists_in(const char *dir, const char *name) {
    char *p = dtio_join(dir, name);
    if (!p) { errno = ENOMEM; return -1; }
    int r = dtio_exists(p);
    free(p);
    return r;
}

static int load_impl(const char *dir, dt_ckpt_manifest **out) {
    BE_CHECK();
    if (!dir || !*dir || !out) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    *out = NULL;
    char *resolved = dtio_cat(dir, "");
    if (!resolved) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    int have_dir = dtio_exists(dir);
    if (have_dir == 0 || exists_in(dir, MANIFEST) == 0) {
        /* a format version 1 writer crashed between its two renames */
        char *old = dtio_cat(dir, ".old");
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
    char *path = dtio_join(resolved, MANIFEST);
    if (!path) { free(resolved); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    char *text;
    size_t len;
    int r = dtio_read_file(path, DT_CKPT_MAX_MANIFEST, &text, &len);
    if (r != 0) {
        int rc = r == -2 ? DT_ERR(DT_ERR_IO, "%s: larger than %u bytes", path, DT_CKPT_MAX_MANIFEST)
                         : DT_ERR(DT_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        free(path);
        free(resolved);
        return rc;
    }
    ck_holder *h;
    int rc = ck_parse_manifest(path, text, len, &h);
    free(text);
    free(path);
    if (rc) { free(resolved); return rc; }
    h->p.dir_arg = dtio_cat(dir, "");
    h->p.dir_resolved = resolved;
    if (!h->p.dir_arg) { dt_ckpt_manifest_free(&h->m); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    *out = &h->m;
    return DT_OK;
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
        int rc = ck_norm_dir(dir, &nd);
        if (rc) return rc;
    }
    const char *d = nd;
    if (!nd || (p->dir_arg && strcmp(nd, p->dir_arg) == 0)) d = p->dir_resolved;
    if (!d) {
        free(nd);
        return DT_ERR(DT_ERR_INVALID, "no directory given and the manifest was not loaded from one");
    }
    if (!p->cache_dir || strcmp(p->cache_dir, d) != 0) {
        char *c = dtio_cat(d, "");
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
    int rc = ck_verify_rank_file(d, m->generation, &m->ranks[i], 1);
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
        uint64_t fpos = ck_rf_header_bytes(rf->ranges, rf->nranges);
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
        char *path = ck_rank_path(d, m->ranks[best->rf].rank, m->generation);
        if (!path) { rc = DT_ERR(DT_ERR_NOMEM, "out of memory"); break; }
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            rc = DT_ERR(DT_ERR_IO, "%s: missing rank file: %s", path, strerror(errno));
        } else {
            long long got = dtio_pread_all(fd, dst + (pos - offset), nb, best->fpos + 4 * (pos - best->off));
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
    CK_RETURN_IN_DIR(dir, load_impl, out);
}

