/* src/io/ckpt_rankfile.c - rank files of a checkpoint directory: their names
 * (and the state vectors' names they hold), writing one rank's shard, reading
 * and verifying one; the tests' fault hook, called before each file-system
 * step of a save (here and in ckpt_commit.c). See include/dtrain/ckpt.h. */
#include "io/ckpt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "io/fileio.h"
#include "core/error.h"

/* ---- fault injection (the tests' hook, io/ckpt_fault.h) ----------------------- */
static dt_ckpt_fault_fn g_fault;
static void *g_fault_arg;
void dt_ckpt_set_fault_hook(dt_ckpt_fault_fn fn, void *arg) {
    g_fault = fn;
    g_fault_arg = arg;
}
int ck_fault(const char *step) { return g_fault ? g_fault(step, g_fault_arg) : 0; }

/* ---- the rank files this process wrote ----------------------------------------- */
/* By directory (device and inode, whatever path names it), rank and
 * generation, so that a commit into that directory can remove this process's
 * leftovers of older generations (an interrupted or failed save, a removal
 * that failed): files that no manifest lists, which the store removes only
 * when it knows it wrote them (a user's file may look like a rank file). The
 * oldest entries are forgotten beyond WRITTEN_MAX (ranks that never commit
 * keep adding). */
#define WRITTEN_MAX 256
typedef struct written {
    dev_t dev;
    ino_t ino;
    int rank;
    uint64_t gen;
} written;
static written g_written[WRITTEN_MAX];
static int g_nwritten;
static pthread_mutex_t g_written_lock = PTHREAD_MUTEX_INITIALIZER;

static void written_add(const char *dir, int rank, uint64_t gen) {
    struct stat st;
    if (stat(dir, &st) != 0) return;
    pthread_mutex_lock(&g_written_lock);
    for (int i = 0; i < g_nwritten; i++)
        if (g_written[i].dev == st.st_dev && g_written[i].ino == st.st_ino && g_written[i].rank == rank &&
            g_written[i].gen == gen) {
            pthread_mutex_unlock(&g_written_lock);
            return;
        }
    if (g_nwritten == WRITTEN_MAX) {
        memmove(g_written, g_written + 1, sizeof g_written[0] * (WRITTEN_MAX - 1));
        g_nwritten--;
    }
    g_written[g_nwritten++] = (written){st.st_dev, st.st_ino, rank, gen};
    pthread_mutex_unlock(&g_written_lock);
}

int ck_written_remove_older(const char *dir, uint64_t gen) {
    struct stat st;
    if (stat(dir, &st) != 0) return -1;
    int rc = 0, k = 0;
    pthread_mutex_lock(&g_written_lock);
    for (int i = 0; i < g_nwritten; i++) {
        written w = g_written[i];
        if (w.dev != st.st_dev || w.ino != st.st_ino || w.gen >= gen) {
            g_written[k++] = w;
            continue;
        }
        char *p = ck_rank_path(dir, w.rank, w.gen);
        if (!p || (unlink(p) != 0 && errno != ENOENT)) {
            rc = -1;
            g_written[k++] = w; /* the next commit tries again */
        }
        free(p);
    }
    g_nwritten = k;
    pthread_mutex_unlock(&g_written_lock);
    return rc;
}

/* ---- names in a checkpoint directory ---------------------------------------- */
int ck_name_ok(const char *s) {
    if (!s) return 0;
    size_t n = strlen(s);
    return n > 0 && n <= DT_CKPT_MAX_NAME && dtj_utf8_valid(s, n);
}

/* A rank file's name: rank-RRRRR.gG.bin, or rank-RRRRR.bin in format version 1
 * (generation 0). */
void ck_rank_name(char *buf, size_t cap, int rank, uint64_t gen) {
    if (gen) snprintf(buf, cap, "rank-%05d.g%llu.bin", rank, (unsigned long long)gen);
    else snprintf(buf, cap, "rank-%05d.bin", rank);
}

char *ck_rank_path(const char *dir, int rank, uint64_t gen) {
    char name[64];
    ck_rank_name(name, sizeof name, rank, gen);
    return dtio_join(dir, name);
}

/* 1 if name is exactly what rank_name writes for some rank and generation
 * (then *gen is set): the files dtrain itself writes into a checkpoint
 * directory, the only ones it may ever remove. */
int ck_parse_rank_name(const char *name, uint64_t *gen) {
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
    ck_rank_name(canon, sizeof canon, (int)rank, g);
    if (strcmp(canon, name) != 0) return 0; /* leading zeros and the like: not ours */
    *gen = g;
    return 1;
}

/* dir without trailing slashes, malloc'd ("ckpt/" and "ckpt" name the same
 * checkpoint, and "ckpt/" + ".tmp" must not land inside it). */
int ck_norm_dir(const char *dir, char **out) {
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
uint64_t ck_rf_header_bytes(const dt_ckpt_range *r, int n) {
    uint64_t b = RF_FIXED;
    for (int i = 0; i < n; i++) b += 2 + strlen(r[i].vector) + 16;
    return round8(b);
}

uint64_t ck_rf_data_bytes(const dt_ckpt_range *r, int n) {
    uint64_t b = 0;
    for (int i = 0; i < n; i++) b += 4 * r[i].count;
    return b;
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
int ck_sync_close(const char *dir, const char *path, int *fd, const char *step, int *crashed) {
    int f = ck_fault(step);
    *crashed = f == DT_CKPT_FAULT_CRASH;
    int rc = DT_OK;
    if (*crashed) rc = DT_ERR(DT_ERR_IO, "%s: injected crash", path);
    else if (f || fsync(*fd) != 0) rc = DT_ERR(DT_ERR_IO, "%s: fsync: %s", path, f ? "injected failure" : strerror(errno));
    int cfd = *fd;
    *fd = -1;
    if (close(cfd) != 0 && !rc) rc = DT_ERR(DT_ERR_IO, "%s: close: %s", path, strerror(errno));
    if (!rc && dtio_fsync_dir_of(dir, 1) != 0) rc = DT_ERR(DT_ERR_IO, "%s: fsync: %s", dir, strerror(errno));
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
        if (!ck_name_ok(g->vector))
            return DT_ERR(DT_ERR_INVALID, "rank %d: range %d: vector name missing, empty, too long or not UTF-8",
                          rank, j);
        if (g->count > MAX_VECTOR_LEN || g->offset > MAX_VECTOR_LEN)
            return DT_ERR(DT_ERR_INVALID, "rank %d: range %d too large", rank, j);
        if (g->count && !g->data) return DT_ERR(DT_ERR_INVALID, "rank %d: range %d: NULL data", rank, j);
    }
    uint64_t hb = ck_rf_header_bytes(shard->ranges, shard->nranges);
    if (hb > RF_MAX_HEADER) return DT_ERR(DT_ERR_INVALID, "rank %d: too many ranges", rank);
    uint64_t db = ck_rf_data_bytes(shard->ranges, shard->nranges);
    char *path = ck_rank_path(dir, rank, gen);
    unsigned char *hdr = calloc((size_t)hb, 1);
    int rc = DT_OK, fd = -1;
    if (!path || !hdr) { rc = DT_ERR(DT_ERR_NOMEM, "out of memory"); goto done; }
    memcpy(hdr, RF_MAGIC, 8);
    dtio_put_u32(hdr + 8, RF_VERSION);
    dtio_put_u32(hdr + 12, (uint32_t)rank);
    dtio_put_u32(hdr + 16, (uint32_t)shard->nranges);
    dtio_put_u32(hdr + 20, (uint32_t)hb);
    dtio_put_u64(hdr + 24, db);
    size_t p = RF_FIXED;
    for (int j = 0; j < shard->nranges; j++) {
        const dt_ckpt_range *g = &shard->ranges[j];
        size_t nl = strlen(g->vector);
        hdr[p] = (unsigned char)(nl & 0xFF);
        hdr[p + 1] = (unsigned char)(nl >> 8);
        memcpy(hdr + p + 2, g->vector, nl);
        dtio_put_u64(hdr + p + 2 + nl, g->offset);
        dtio_put_u64(hdr + p + 10 + nl, g->count);
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
    written_add(dir, rank, gen);
    int f = ck_fault("shard_write");
    if (f == DT_CKPT_FAULT_CRASH) { rc = DT_ERR(DT_ERR_IO, "%s: injected crash", path); goto done_keep; }
    if (f) { errno = EIO; rc = DT_ERR(DT_ERR_IO, "%s: injected write failure", path); goto done; }
    uint32_t crc = crc_update(0, hdr, (size_t)hb);
    if (dtio_write_all(fd, hdr, (size_t)hb)) { rc = DT_ERR(DT_ERR_IO, "%s: write: %s", path, strerror(errno)); goto done; }
    for (int j = 0; j < shard->nranges; j++) {
        const dt_ckpt_range *g = &shard->ranges[j];
        size_t nb = (size_t)g->count * 4;
        crc = crc_update(crc, g->data, nb);
        if (nb && dtio_write_all(fd, g->data, nb)) {
            rc = DT_ERR(DT_ERR_IO, "%s: write: %s", path, strerror(errno));
            goto done;
        }
    }
    int crashed = 0;
    if ((rc = ck_sync_close(dir, path, &fd, "shard_sync", &crashed))) {
        if (crashed) goto done_keep;
        goto done;
    }
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

void ck_rf_hdr_free(rf_hdr *h) {
    if (h->names)
        for (uint32_t i = 0; i < h->nranges; i++) free(h->names[i]);
    free(h->names);
    free(h->ranges);
    free(h->buf);
    memset(h, 0, sizeof *h);
}

/* Reads and checks a rank file header: magic, version, internal consistency
 * and the file size implied by it. */
int ck_rf_read_header(const char *path, int fd, uint64_t fsize, rf_hdr *h) {
    memset(h, 0, sizeof *h);
    unsigned char fixed[RF_FIXED];
    if (fsize < RF_FIXED || dtio_pread_all(fd, fixed, RF_FIXED, 0) != RF_FIXED)
        return DT_ERR(DT_ERR_IO, "%s: truncated: %llu bytes, shorter than the %u-byte header", path,
                      (unsigned long long)fsize, RF_FIXED);
    if (memcmp(fixed, RF_MAGIC, 8) != 0)
        return DT_ERR(DT_ERR_IO, "%s: bad magic (not a dtrain checkpoint rank file)", path);
    uint32_t ver = dtio_get_u32(fixed + 8);
    if (ver != RF_VERSION)
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: rank file format version %u not supported (this build reads %u)", path,
                      ver, RF_VERSION);
    h->rank = dtio_get_u32(fixed + 12);
    h->nranges = dtio_get_u32(fixed + 16);
    h->hbytes = dtio_get_u32(fixed + 20);
    h->dbytes = dtio_get_u64(fixed + 24);
    if (h->hbytes < RF_FIXED || h->hbytes > RF_MAX_HEADER || h->hbytes % 8 ||
        h->nranges > (h->hbytes - RF_FIXED) / 18)
        return DT_ERR(DT_ERR_IO, "%s: corrupt header (header size %u, %u ranges)", path, h->hbytes, h->nranges);
    if (h->hbytes > fsize)
        return DT_ERR(DT_ERR_IO, "%s: truncated: %llu bytes, header says %u", path, (unsigned long long)fsize,
                      h->hbytes);
    h->buf = malloc(h->hbytes);
    h->ranges = calloc(h->nranges ? h->nranges : 1, sizeof *h->ranges);
    h->names = calloc(h->nranges ? h->nranges : 1, sizeof *h->names);
    if (!h->buf || !h->ranges || !h->names) { ck_rf_hdr_free(h); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    if (dtio_pread_all(fd, h->buf, h->hbytes, 0) != (long long)h->hbytes) {
        ck_rf_hdr_free(h);
        return DT_ERR(DT_ERR_IO, "%s: read error", path);
    }
    size_t p = RF_FIXED;
    uint64_t data = 0;
    for (uint32_t j = 0; j < h->nranges; j++) {
        if (p + 2 > h->hbytes) goto corrupt;
        size_t nl = (size_t)h->buf[p] | ((size_t)h->buf[p + 1] << 8);
        if (nl == 0 || nl > DT_CKPT_MAX_NAME || p + 18 + nl > h->hbytes) goto corrupt;
        h->names[j] = malloc(nl + 1);
        if (!h->names[j]) { ck_rf_hdr_free(h); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
        memcpy(h->names[j], h->buf + p + 2, nl);
        h->names[j][nl] = '\0';
        if (strlen(h->names[j]) != nl) goto corrupt;
        h->ranges[j].vector = h->names[j];
        h->ranges[j].offset = dtio_get_u64(h->buf + p + 2 + nl);
        h->ranges[j].count = dtio_get_u64(h->buf + p + 10 + nl);
        if (h->ranges[j].count > MAX_VECTOR_LEN || h->ranges[j].offset > MAX_VECTOR_LEN) goto corrupt;
        data += 4 * h->ranges[j].count;
        if (data > (1ull << 62)) goto corrupt;
        p += 18 + nl;
    }
    if (round8(p) != h->hbytes || data != h->dbytes) goto corrupt;
    if (fsize < (uint64_t)h->hbytes + h->dbytes) {
        ck_rf_hdr_free(h);
        return DT_ERR(DT_ERR_IO, "%s: truncated: %llu bytes, header says %llu", path, (unsigned long long)fsize,
                      (unsigned long long)((uint64_t)h->hbytes + h->dbytes));
    }
    if (fsize > (uint64_t)h->hbytes + h->dbytes) {
        ck_rf_hdr_free(h);
        return DT_ERR(DT_ERR_IO, "%s: %llu bytes, header says %llu (trailing data)", path, (unsigned long long)fsize,
                      (unsigned long long)((uint64_t)h->hbytes + h->dbytes));
    }
    return DT_OK;
corrupt:
    ck_rf_hdr_free(h);
    return DT_ERR(DT_ERR_IO, "%s: corrupt header (range table)", path);
}

int ck_file_crc(const char *path, int fd, uint64_t size, uint32_t *out) {
    size_t cap = 1u << 20;
    unsigned char *buf = malloc(cap);
    if (!buf) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    uint32_t crc = 0;
    uint64_t off = 0;
    while (off < size) {
        size_t want = size - off < cap ? (size_t)(size - off) : cap;
        long long got = dtio_pread_all(fd, buf, want, off);
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
int ck_verify_rank_file(const char *dir, uint64_t gen, const dt_ckpt_rank_file *rf, int check_crc) {
    char *path = ck_rank_path(dir, rf->rank, gen);
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
    if ((rc = ck_rf_read_header(path, fd, size, &h))) goto done;
    if (check_crc) {
        uint32_t crc;
        if ((rc = ck_file_crc(path, fd, size, &crc))) goto done;
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
    ck_rf_hdr_free(&h);
    if (fd >= 0) close(fd);
    free(path);
    return rc;
}

int dt_ckpt_write_shard(const char *dir, uint64_t generation, int rank, const dt_ckpt_shard *shard,
                        dt_ckpt_shard_info *info) {
    CK_RETURN_IN_DIR(dir, write_shard_impl, generation, rank, shard, info);
}
