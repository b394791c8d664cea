/* src/data/shards.c - llm.c's token shards: finding them (a file, a
 * directory, a glob pattern), checking and mapping each file, and reading
 * tokens of the concatenated stream (see shards.h). */
#define _DEFAULT_SOURCE /* glob's GLOB_* flags, d_type-free readdir */
#include "data/shards.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

#define LLAMA3_MAGIC 20240801 /* llm.c's llama-3 shards: uint32 tokens */
#define EVAL_MAGIC 20240522   /* llm.c's evaluation files (HellaSwag, MMLU) */

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int is_pattern(const char *p) { return strpbrk(p, "*?[") != NULL; }

static int32_t le32(const unsigned char *b) {
    return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
}

/* 1 if the file starts with one of llm.c's magics (a GPT-2 shard, or one of
 * its other formats, which dt_shards_open then refuses by name), 0 if not. */
static int has_magic(const char *path) {
    unsigned char b[4];
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t got = fread(b, 1, 4, f);
    fclose(f);
    const int32_t m = got == 4 ? le32(b) : 0;
    return m == DT_SHARD_MAGIC || m == LLAMA3_MAGIC || m == EVAL_MAGIC;
}

int dt_shards_detect(const char *path) {
    if (!path) return DT_ERR(DT_ERR_INVALID, "path is NULL");
    struct stat st;
    if (stat(path, &st) != 0) return is_pattern(path) ? 1 : 0; /* a missing path: the loader reports it */
    if (S_ISREG(st.st_mode)) return has_magic(path);
    if (!S_ISDIR(st.st_mode)) return 0;
    DIR *d = opendir(path);
    if (!d) return 0;
    int found = 0;
    char full[4096];
    for (struct dirent *e; !found && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.' || !ends_with(e->d_name, ".bin")) continue;
        int w = snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        found = w > 0 && (size_t)w < sizeof full && has_magic(full);
    }
    closedir(d);
    return found;
}

/* ---- the file list ------------------------------------------------------------ */

typedef struct names {
    char **v;
    int n, cap;
} names;

static int names_add(names *l, const char *dir, const char *name) {
    if (l->n == l->cap) {
        int nc = l->cap ? 2 * l->cap : 16;
        char **t = realloc(l->v, sizeof *t * (size_t)nc);
        if (!t) return DT_ERR(DT_ERR_NOMEM, "out of memory listing shards");
        l->v = t;
        l->cap = nc;
    }
    size_t len = (dir ? strlen(dir) + 1 : 0) + strlen(name) + 1;
    char *p = malloc(len);
    if (!p) return DT_ERR(DT_ERR_NOMEM, "out of memory listing shards");
    if (dir) snprintf(p, len, "%s/%s", dir, name);
    else snprintf(p, len, "%s", name);
    l->v[l->n++] = p;
    return DT_OK;
}

static void names_free(names *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The shard files of path: itself, its directory's "*.bin" files, or its glob
 * matches; sorted by name. */
static int list_shards(const char *path, names *out) {
    struct stat st;
    int rc = DT_OK;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) return names_add(out, NULL, path);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return DT_ERR(DT_ERR_IO, "cannot open directory %s: %s", path, strerror(errno));
        for (struct dirent *e; !rc && (e = readdir(d)) != NULL;)
            if (e->d_name[0] != '.' && ends_with(e->d_name, ".bin")) rc = names_add(out, path, e->d_name);
        closedir(d);
        if (!rc && out->n == 0) rc = DT_ERR(DT_ERR_INVALID, "directory %s holds no llm.c token shard (*.bin)", path);
    } else if (is_pattern(path)) {
        glob_t g;
        int gr = glob(path, GLOB_ERR, NULL, &g);
        if (gr == GLOB_NOMATCH) return DT_ERR(DT_ERR_INVALID, "no file matches the pattern %s", path);
        if (gr != 0) return DT_ERR(gr == GLOB_NOSPACE ? DT_ERR_NOMEM : DT_ERR_IO, "pattern %s: cannot be expanded (%s)",
                                   path, gr == GLOB_NOSPACE ? "out of memory" : "a directory could not be read");
        for (size_t i = 0; !rc && i < g.gl_pathc; i++) rc = names_add(out, NULL, g.gl_pathv[i]);
        globfree(&g);
    } else {
        return DT_ERR(DT_ERR_IO, "cannot read token shards %s: %s", path, strerror(errno));
    }
    if (!rc && out->n > 1) qsort(out->v, (size_t)out->n, sizeof *out->v, cmp_str);
    return rc;
}

/* llm.c's split naming: 1 validation, 0 training, -1 neither. */
static int split_of(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strstr(base, "_val_") || ends_with(base, "_val.bin")) return 1;
    if (strstr(base, "_train_") || ends_with(base, "_train.bin")) return 0;
    return -1;
}

/* ---- one shard ------------------------------------------------------------------ */

static int map_shard(dt_shard *s) {
    int fd = open(s->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return DT_ERR(DT_ERR_IO, "cannot open token shard %s: %s", s->path, strerror(errno));
    struct stat st;
    int rc = DT_OK;
    unsigned char h[12];
    if (fstat(fd, &st) != 0) rc = DT_ERR(DT_ERR_IO, "%s: %s", s->path, strerror(errno));
    else if (!S_ISREG(st.st_mode)) rc = DT_ERR(DT_ERR_IO, "token shard %s is not a regular file", s->path);
    else if (st.st_size < DT_SHARD_HEADER_BYTES)
        rc = DT_ERR(DT_ERR_IO, "token shard %s is truncated: %lld bytes, shorter than the %d-byte header", s->path,
                    (long long)st.st_size, DT_SHARD_HEADER_BYTES);
    else if (pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h)
        rc = DT_ERR(DT_ERR_IO, "token shard %s: cannot read its header: %s", s->path, strerror(errno));
    if (rc) {
        close(fd);
        return rc;
    }
    const int32_t magic = le32(h), version = le32(h + 4), count = le32(h + 8);
    if (magic == LLAMA3_MAGIC)
        rc = DT_ERR(DT_ERR_UNSUPPORTED, "%s holds llm.c's llama-3 tokens (magic %d, uint32 tokens): only its GPT-2 "
                    "format (magic %d, version %d) is supported", s->path, magic, DT_SHARD_MAGIC, DT_SHARD_VERSION);
    else if (magic == EVAL_MAGIC)
        rc = DT_ERR(DT_ERR_UNSUPPORTED, "%s is an llm.c evaluation file (magic %d, HellaSwag/MMLU examples), not a "
                    "token shard (magic %d)", s->path, magic, DT_SHARD_MAGIC);
    else if (magic != DT_SHARD_MAGIC)
        rc = DT_ERR(DT_ERR_IO, "%s is not an llm.c token shard: magic %d, expected %d", s->path, magic, DT_SHARD_MAGIC);
    else if (version != DT_SHARD_VERSION)
        rc = DT_ERR(DT_ERR_UNSUPPORTED, "token shard %s: version %d, this build reads version %d (GPT-2, uint16 "
                    "tokens)", s->path, version, DT_SHARD_VERSION);
    else if (count < 1)
        rc = DT_ERR(DT_ERR_IO, "token shard %s: its header counts %d tokens (at least 1)", s->path, count);
    else {
        const long long want = DT_SHARD_HEADER_BYTES + 2LL * count, have = (long long)st.st_size;
        if (have < want)
            rc = DT_ERR(DT_ERR_IO, "token shard %s is truncated: its header counts %d tokens (%lld bytes), the file "
                        "has %lld bytes (%lld tokens)", s->path, count, want, have, (have - DT_SHARD_HEADER_BYTES) / 2);
        else if (have > want)
            rc = DT_ERR(DT_ERR_IO, "token shard %s is corrupt: %lld bytes after the %d tokens its header counts",
                        s->path, have - want, count);
    }
    if (!rc) {
        s->map_len = (size_t)st.st_size;
        s->map = mmap(NULL, s->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (s->map == MAP_FAILED) {
            s->map = NULL;
            rc = DT_ERR(errno == ENOMEM ? DT_ERR_NOMEM : DT_ERR_IO, "token shard %s: cannot map it: %s", s->path,
                        strerror(errno));
        } else {
            s->tok = (const uint16_t *)((const char *)s->map + DT_SHARD_HEADER_BYTES);
            s->n = count;
        }
    }
    close(fd);
    return rc;
}

void dt_shards_free(struct dt_text_shards *sh) {
    if (!sh) return;
    for (int i = 0; i < sh->n; i++) {
        if (sh->s[i].map) munmap(sh->s[i].map, sh->s[i].map_len);
        free(sh->s[i].path);
    }
    free(sh->s);
    free(sh);
}

static int cmp_split(const void *a, const void *b) {
    const dt_shard *x = a, *y = b;
    if (x->val != y->val) return x->val - y->val;
    return strcmp(x->path, y->path);
}

int dt_shards_open(const char *path, struct dt_text_shards **out, int64_t *ntrain, int64_t *total) {
    if (!path || !out || !ntrain || !total) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    *out = NULL;
    const uint16_t one = 1;
    if (*(const unsigned char *)&one != 1)
        return DT_ERR(DT_ERR_UNSUPPORTED, "token shards %s: reading them needs a little-endian host", path);
    names l = {0};
    int rc = list_shards(path, &l);
    struct dt_text_shards *sh = rc ? NULL : calloc(1, sizeof *sh);
    if (!rc && (!sh || !(sh->s = calloc((size_t)l.n, sizeof *sh->s)))) rc = DT_ERR(DT_ERR_NOMEM, "out of memory");
    int nval = 0, nnone = 0;
    const char *unnamed = NULL;
    for (int i = 0; !rc && i < l.n; i++) {
        dt_shard *s = &sh->s[sh->n++];
        s->path = l.v[i];
        l.v[i] = NULL;
        const int sp = split_of(s->path);
        s->val = sp == 1;
        nval += sp == 1;
        if (sp < 0 && !nnone++) unnamed = s->path;
        rc = map_shard(s);
    }
    if (!rc && nval && nnone)
        rc = DT_ERR(DT_ERR_INVALID, "token shards %s: %s is named neither *_train* nor *_val* while %d shard(s) are "
                    "validation shards: every shard must say its split (llm.c's naming)", path, unnamed, nval);
    if (!rc && nval && nval == sh->n)
        rc = DT_ERR(DT_ERR_INVALID, "token shards %s: only validation shards (*_val*), no training shard", path);
    names_free(&l);
    if (rc) {
        dt_shards_free(sh);
        return rc;
    }
    qsort(sh->s, (size_t)sh->n, sizeof *sh->s, cmp_split);
    int64_t pos = 0, tr = 0;
    for (int i = 0; i < sh->n; i++) {
        sh->s[i].start = pos;
        pos += sh->s[i].n;
        if (!sh->s[i].val) tr += sh->s[i].n;
    }
    *out = sh;
    *ntrain = tr;
    *total = pos;
    return DT_OK;
}

int dt_shards_read(const struct dt_text_shards *sh, int64_t pos, int64_t n, int vocab, int32_t *dst) {
    if (!sh || !dst || n < 0) return DT_ERR(DT_ERR_INVALID, "NULL argument or negative count");
    const int64_t end = sh->n ? sh->s[sh->n - 1].start + sh->s[sh->n - 1].n : 0;
    if (pos < 0 || pos > end - n)
        return DT_ERR(DT_ERR_INVALID, "tokens [%lld, %lld) outside the %lld of the shards", (long long)pos,
                      (long long)(pos + n), (long long)end);
    int lo = 0, hi = sh->n - 1; /* the last shard starting at or before pos */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (sh->s[mid].start <= pos) lo = mid;
        else hi = mid - 1;
    }
    for (int64_t done = 0; done < n; lo++) {
        const dt_shard *s = &sh->s[lo];
        int64_t at = pos + done - s->start, take = s->n - at < n - done ? s->n - at : n - done;
        for (int64_t i = 0; i < take; i++) {
            const uint16_t t = s->tok[at + i]; /* little-endian host (x86-64, aarch64) */
            if (t >= vocab)
                return DT_ERR(DT_ERR_IO, "token shard %s: token %lld is %u, outside the vocabulary of %d", s->path,
                              (long long)(at + i), (unsigned)t, vocab);
            dst[done + i] = t;
        }
        done += take;
    }
    return DT_OK;
}
