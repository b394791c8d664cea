/* src/io/ckpt_commit.c - saving a checkpoint: the directory (prepare), the
 * commit (one atomic rename of the manifest), removal of older generations.
 * See include/dtrain/ckpt.h. */
#include "io/ckpt_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/fileio.h"
#include "core/error.h"

/* ---- the directory's lock ------------------------------------------------------ */
/* prepare and commit hold an exclusive flock on the directory, so that two
 * processes saving into one directory take turns: one's prepare never removes
 * the other's manifest.json.tmp between its write and its rename, and a
 * commit checks the generation in the directory and switches to its own
 * without another commit in between. Released when the returned fd is closed
 * (also by the process's end). -1 (no lock, not an error) where the file
 * system has none. */
static int lock_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    while (flock(fd, LOCK_EX) != 0) {
        if (errno == EINTR) continue;
        close(fd);
        return -1;
    }
    return fd;
}

static void unlock_dir(int fd) {
    if (fd >= 0) close(fd);
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
        if (ck_parse_rank_name(n, &g)) {
            if (g > *max_gen) *max_gen = g;
        } else if (!*foreign) {
            *foreign = dtio_cat(n, "");
            if (!*foreign) { closedir(d); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
        }
        errno = 0;
    }
    int rc = errno ? DT_ERR(DT_ERR_IO, "%s: cannot list the directory: %s", dir, strerror(errno)) : DT_OK;
    closedir(d);
    return rc;
}

/* The generation of the checkpoint in dir (0 for format version 1), or -1 in
 * *gen_or_none when there is no manifest.json; *keep (if not NULL) gets its
 * parsed manifest (NULL when there is none; free with dt_ckpt_manifest_free).
 * A manifest that is not a readable dtrain manifest is refused: dtrain does
 * not write over what it cannot identify as its own. */
static int current_generation(const char *dir, int64_t *gen_or_none, ck_holder **keep) {
    *gen_or_none = -1;
    if (keep) *keep = NULL;
    char *path = dtio_join(dir, MANIFEST);
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
    int r = S_ISREG(st.st_mode) ? dtio_read_file(path, DT_CKPT_MAX_MANIFEST, &text, &len) : -3;
    ck_holder *h = NULL;
    if (r == 0) rc = ck_parse_manifest(path, text, len, &h);
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
        if (keep) *keep = h, h = NULL;
    }
    dt_ckpt_manifest_free(h ? &h->m : NULL);
    free(text);
    free(path);
    return rc;
}

static int prepare_locked(const char *dir, uint64_t *generation);

static int prepare_impl(const char *dir, uint64_t *generation) {
    BE_CHECK();
    if (!dir || !*dir) return DT_ERR(DT_ERR_INVALID, "NULL or empty dir");
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno != ENOENT) return DT_ERR(DT_ERR_IO, "%s: %s", dir, strerror(errno));
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return DT_ERR(DT_ERR_IO, "%s: cannot create the checkpoint directory: %s", dir, strerror(errno));
        if (dtio_fsync_dir_of(dir, 0) != 0) return DT_ERR(DT_ERR_IO, "%s: fsync of its parent: %s", dir, strerror(errno));
        if (stat(dir, &st) != 0) return DT_ERR(DT_ERR_IO, "%s: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return DT_ERR(DT_ERR_INVALID,
                      "%s exists and is not a directory: a checkpoint is a directory (dtrain never moves or "
                      "replaces the path given); choose another checkpoint directory",
                      dir);
    int lk = lock_dir(dir);
    int rc = prepare_locked(dir, generation);
    unlock_dir(lk);
    return rc;
}

/* The rest of prepare, under the directory's lock. */
static int prepare_locked(const char *dir, uint64_t *generation) {
    int64_t cur;
    int rc = current_generation(dir, &cur, NULL);
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
    char *probe = dtio_join(dir, MANIFEST_TMP);
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

/* ---- commit ----------------------------------------------------------------- */
/* Discovered rank table storage. */
typedef struct found_table {
    dt_ckpt_rank_file *ranks;
    rf_hdr *hdrs;
    int n;
} found_table;

static void found_free(found_table *t) {
    if (t->hdrs)
        for (int i = 0; i < t->n; i++) ck_rf_hdr_free(&t->hdrs[i]);
    free(t->hdrs);
    free(t->ranks);
}

static int discover(const char *dir, uint64_t gen, int world, found_table *t) {
    t->ranks = calloc((size_t)world, sizeof *t->ranks);
    t->hdrs = calloc((size_t)world, sizeof *t->hdrs);
    t->n = 0;
    if (!t->ranks || !t->hdrs) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    for (int r = 0; r < world; r++) {
        char *path = ck_rank_path(dir, r, gen);
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
        if (!rc) rc = ck_rf_read_header(path, fd, (uint64_t)st.st_size, &t->hdrs[r]);
        t->n = r + 1;
        if (!rc && t->hdrs[r].rank != (uint32_t)r)
            rc = DT_ERR(DT_ERR_MISMATCH, "%s: file says rank %u", path, t->hdrs[r].rank);
        uint32_t crc = 0;
        if (!rc) rc = ck_file_crc(path, fd, (uint64_t)st.st_size, &crc);
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

/* Removes the rank files of generation gen of ranks[0..n) (the ranks' entries
 * of a manifest; ranks NULL: ranks 0..n-1), generation 0 being format version
 * 1's rank-RRRRR.bin; -1 if a removal failed. What the store removes is only
 * ever named this way, by a manifest of the directory or by the save that
 * wrote it, never found by its name's pattern: a user's file may have a rank
 * file's name (rank-00000.g99.bin). */
static int remove_rank_files(const char *dir, uint64_t gen, const dt_ckpt_rank_file *ranks, int n) {
    int rc = 0;
    for (int i = 0; i < n; i++) {
        char *p = ck_rank_path(dir, ranks ? ranks[i].rank : i, gen);
        if (!p || (unlink(p) != 0 && errno != ENOENT)) rc = -1;
        free(p);
    }
    return rc;
}

static int commit_impl(const char *dir, const dt_ckpt_manifest *m_in) {
    BE_CHECK();
    if (!dir || !*dir || !m_in) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    int rc = ck_validate(dir, m_in, DT_ERR_INVALID);
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
    char *mpath = dtio_join(dir, MANIFEST), *tpath = dtio_join(dir, MANIFEST_TMP);
    found_table ft = {0};
    char *text = NULL;
    size_t len = 0;
    int fd = -1, renamed = 0, crashed = 0, lk = -1;
    ck_holder *old = NULL;
    if (!mpath || !tpath) { rc = DT_ERR(DT_ERR_NOMEM, "out of memory"); goto done; }
    /* from here to the end no other process prepares or commits in dir */
    lk = lock_dir(dir);
    /* the checkpoint being replaced: of an earlier generation, and readable */
    int64_t cur;
    if ((rc = current_generation(dir, &cur, &old))) goto done;
    if (cur >= 0 && (uint64_t)cur >= gen) {
        rc = DT_ERR(DT_ERR_STATE, "%s: already holds generation %lld, not older than %llu: did another job save into "
                    "this directory after dt_ckpt_prepare?", dir, (long long)cur, (unsigned long long)gen);
        goto done;
    }
    if (m.nranks == 0) {
        if ((rc = discover(dir, gen, m.world_size, &ft))) goto done;
        m.ranks = ft.ranks;
        m.nranks = ft.n;
        if ((rc = ck_validate(dir, &m, DT_ERR_MISMATCH))) goto done;
    } else {
        for (int r = 0; r < m.nranks; r++)
            if ((rc = ck_verify_rank_file(dir, gen, &m.ranks[r], 0))) goto done;
    }
    if ((rc = check_coverage(dir, &m))) goto done;
    if (!(text = ck_to_json(&m, &len))) { rc = DT_ERR(DT_ERR_NOMEM, "out of memory"); goto done; }
    int f = ck_fault("manifest_write");
    crashed = f == DT_CKPT_FAULT_CRASH;
    if (f) { rc = DT_ERR(DT_ERR_IO, "%s: injected %s", tpath, crashed ? "crash" : "failure"); goto done; }
    fd = open(tpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) { rc = DT_ERR(DT_ERR_IO, "%s: cannot create: %s", tpath, strerror(errno)); goto done; }
    if (dtio_write_all(fd, text, len)) { rc = DT_ERR(DT_ERR_IO, "%s: write: %s", tpath, strerror(errno)); goto done; }
    /* the rank files' and the temporary manifest's entries are on disk before the switch */
    if ((rc = ck_sync_close(dir, tpath, &fd, "manifest_sync", &crashed))) goto done;
    /* the switch: one atomic rename within the directory */
    f = ck_fault("rename_manifest");
    if ((crashed = f == DT_CKPT_FAULT_CRASH)) { rc = DT_ERR(DT_ERR_IO, "%s: injected crash", mpath); goto done; }
    if (f || rename(tpath, mpath) != 0) {
        rc = DT_ERR(DT_ERR_IO, "%s: cannot rename %s into place: %s", mpath, tpath, f ? "injected failure" : strerror(errno));
        goto done;
    }
    renamed = 1;
    if (dtio_fsync_dir_of(dir, 1) != 0) {
        rc = DT_ERR(DT_ERR_IO, "%s: fsync after the switch to generation %llu: %s", dir, (unsigned long long)gen,
                    strerror(errno));
        goto done;
    }
    /* the previous generation's files (the replaced manifest lists them) and
     * this process's leftovers of older generations (interrupted or failed
     * saves, removals that failed): best effort, what fails stays for this
     * process's next commit; nothing that only looks like a rank file goes */
    f = ck_fault("remove_old");
    if (f == DT_CKPT_FAULT_CRASH) { rc = DT_ERR(DT_ERR_IO, "%s: injected crash", dir); goto done; }
    if (!f) {
        if (old) remove_rank_files(dir, old->m.generation, old->m.ranks, old->m.nranks);
        ck_written_remove_older(dir, gen);
    }
done:
    if (fd >= 0) close(fd);
    if (rc && !renamed && !crashed && rc != DT_ERR_STATE) {
        /* a failed save leaves the previous checkpoint and nothing of its own:
         * the temporary manifest, and its rank files (generation gen, which
         * dt_ckpt_prepare chose above every file present) */
        if (tpath) unlink(tpath);
        remove_rank_files(dir, gen, NULL, m.world_size);
    }
    unlock_dir(lk);
    dt_ckpt_manifest_free(old ? &old->m : NULL);
    free(text);
    found_free(&ft);
    free(mpath);
    free(tpath);
    return rc;
}

int dt_ckpt_prepare(const char *dir, uint64_t *generation) { CK_RETURN_IN_DIR(dir, prepare_impl, generation); }

int dt_ckpt_commit(const char *dir, const dt_ckpt_manifest *m) { CK_RETURN_IN_DIR(dir, commit_impl, m); }
