/* io_ckpt: the checkpoint store (src/io/ckpt_*.c): sharded checkpoints with
 * 1, 2 and 4 simulated ranks in one process (even, uneven and replicated splits; discovered and caller-given rank
 * tables), reads of ranges spanning shard boundaries, resharding 4 -> 2 -> 1,
 * corruption (checksum, truncation, bad magic, wrong version, JSON syntax,
 * missing files, uncovered ranges) with messages naming the file, crash
 * safety of the commit (failures and simulated crashes at every step, and
 * SIGKILL of a process saving in a loop), the directory rules (never renamed;
 * a user's files never removed; foreign directories and regular files
 * refused; ".") and format version 1 checkpoints of an older dtrain
 * (tests/io/data/v1_w2, written by dtrain ea878ae). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "dtrain/ckpt.h"
#include "io/ckpt_fault.h"
#include "testutil.h"

#define P 1000
#define B 10
#define NV 4
static const char *const k_vec[NV] = {"params", "exp_avg", "exp_avg_sq", "buffers"};
static const uint64_t k_len[NV] = {P, P, P, B};

static char g_base[256];

static char *pth(const char *a, const char *b) {
    static char buf[8][768];
    static int k;
    k = (k + 1) % 8;
    if (b) snprintf(buf[k], sizeof buf[k], "%s/%s/%s", g_base, a, b);
    else snprintf(buf[k], sizeof buf[k], "%s/%s", g_base, a);
    return buf[k];
}

static int exists(const char *p) { return access(p, F_OK) == 0; }

static float val(int step, int v, uint64_t i) { return (float)(step * 20000 + v * 4000 + (int)i); }

static float g_data[NV][P];
static void fill(int step) {
    for (int v = 0; v < NV; v++)
        for (uint64_t i = 0; i < k_len[v]; i++) g_data[v][i] = val(step, v, i);
}

enum { EVEN, UNEVEN, REPLICATED };

/* The ranges rank r of world w holds. */
static int shard_ranges(int mode, int r, int w, dt_ckpt_range *out) {
    int n = 0;
    uint64_t lo, hi;
    if (mode == REPLICATED) {
        lo = 0;
        hi = P;
    } else if (mode == EVEN) {
        uint64_t chunk = (P + (uint64_t)w - 1) / (uint64_t)w;
        lo = chunk * (uint64_t)r < P ? chunk * (uint64_t)r : P;
        hi = lo + chunk < P ? lo + chunk : P;
    } else { /* rank r gets a share proportional to r + 1 */
        uint64_t tot = (uint64_t)w * (uint64_t)(w + 1) / 2, before = (uint64_t)r * (uint64_t)(r + 1) / 2;
        lo = P * before / tot;
        hi = P * (before + (uint64_t)r + 1) / tot;
    }
    for (int v = 0; v < 3; v++) out[n++] = (dt_ckpt_range){k_vec[v], lo, hi - lo, g_data[v] + lo};
    if (r == 0 || mode == REPLICATED) out[n++] = (dt_ckpt_range){k_vec[3], 0, B, g_data[3]};
    return n;
}

static const dt_ckpt_vector k_vectors[NV] = {{"params", P}, {"exp_avg", P}, {"exp_avg_sq", P}, {"buffers", B}};
static const dt_ckpt_kv k_meta[3] = {
    {"model", "mlp"}, {"optimizer", "adam"}, {"dist_config", "{\"zero_opt_level\": 2, \"note\": \"q\\\"\"}"}};

static dt_ckpt_manifest make_manifest(int step, int w, int zero) {
    dt_ckpt_manifest m;
    memset(&m, 0, sizeof m);
    m.step = (uint64_t)step;
    m.epoch = (uint64_t)step / 10;
    m.epoch_position = (uint64_t)step % 10;
    m.rng_state[0] = (uint64_t)step;
    m.rng_state[1] = ~(uint64_t)step;
    m.rng_state[2] = 0x0123456789abcdefull;
    m.rng_state[3] = UINT64_MAX;
    m.world_size = w;
    m.zero_level = zero;
    m.num_params = P;
    m.num_buffers = B;
    m.nvectors = NV;
    m.vectors = k_vectors;
    m.nmeta = 3;
    m.meta = k_meta;
    return m;
}

/* Saves a checkpoint of `step` from w simulated ranks. explicit: rank 0 builds
 * the rank table from the gathered dt_ckpt_shard_info instead of discovery. */
static int save(const char *dir, int step, int w, int mode, int explicit_table) {
    fill(step);
    dt_ckpt_range rg[4][NV];
    dt_ckpt_rank_file rf[4];
    uint64_t gen = 0;
    int rc = dt_ckpt_prepare(dir, &gen);
    if (rc) return rc;
    for (int r = 0; r < w; r++) {
        dt_ckpt_shard sh = {shard_ranges(mode, r, w, rg[r]), rg[r]};
        dt_ckpt_shard_info info;
        rc = dt_ckpt_write_shard(dir, gen, r, &sh, &info);
        if (rc) return rc;
        rf[r] = (dt_ckpt_rank_file){r, sh.nranges, rg[r], info.bytes, info.crc32};
    }
    dt_ckpt_manifest m = make_manifest(step, w, mode == REPLICATED ? 0 : 2);
    m.generation = gen;
    if (explicit_table) {
        m.nranks = w;
        m.ranks = rf;
    }
    return dt_ckpt_commit(dir, &m);
}

/* Loads dir and checks every field and all data against `step`. */
static void check_ckpt(const char *dir, int step, int w) {
    dt_ckpt_manifest *m = NULL;
    CHECK_OK(dt_ckpt_load_manifest(dir, &m));
    if (!m) return;
    CHECK(m->format_version == 2 && m->generation >= 1 && m->step == (uint64_t)step && m->epoch == (uint64_t)step / 10 &&
              m->epoch_position == (uint64_t)step % 10,
          "%s: step/epoch/position %llu %llu %llu", dir, (unsigned long long)m->step, (unsigned long long)m->epoch,
          (unsigned long long)m->epoch_position);
    CHECK(m->rng_state[0] == (uint64_t)step && m->rng_state[1] == ~(uint64_t)step &&
              m->rng_state[2] == 0x0123456789abcdefull && m->rng_state[3] == UINT64_MAX,
          "%s: rng state", dir);
    CHECK(m->world_size == w && m->num_params == P && m->num_buffers == B && m->nvectors == NV, "%s: sizes", dir);
    CHECK(m->nranks == w, "%s: %d rank files", dir, m->nranks);
    const char *v = dt_ckpt_meta_get(m, "dist_config");
    CHECK(v && strcmp(v, k_meta[2].value) == 0, "%s: metadata round trip '%s'", dir, v ? v : "(null)");
    CHECK(dt_ckpt_meta_get(m, "model") && strcmp(dt_ckpt_meta_get(m, "model"), "mlp") == 0, "model meta");
    CHECK(dt_ckpt_meta_get(m, "nope") == NULL, "missing meta");
    for (int k = 0; k < NV; k++) CHECK(dt_ckpt_vector_index(m, k_vec[k]) == k, "vector index %s", k_vec[k]);
    CHECK(dt_ckpt_vector_index(m, "momentum_buffer") == -1, "no momentum_buffer");
    static float buf[P];
    int bad = 0;
    for (int k = 0; k < NV; k++) {
        memset(buf, 0, sizeof buf);
        CHECK_OK(dt_ckpt_read_range(dir, m, k_vec[k], 0, k_len[k], buf));
        for (uint64_t i = 0; i < k_len[k]; i++) bad += buf[i] != val(step, k, i);
    }
    /* Ranges crossing every shard boundary of every split used. */
    static const uint64_t offs[] = {0, 1, 99, 100, 249, 250, 251, 333, 499, 500, 666, 998, 999};
    static const uint64_t cnts[] = {1, 2, 3, 150, 301, 700};
    for (size_t a = 0; a < sizeof offs / sizeof *offs; a++)
        for (size_t c = 0; c < sizeof cnts / sizeof *cnts; c++) {
            uint64_t o = offs[a], n = cnts[c];
            if (o + n > P) n = P - o;
            int k = (int)((a + c) % 3);
            CHECK_OK(dt_ckpt_read_range(NULL, m, k_vec[k], o, n, buf));
            for (uint64_t i = 0; i < n; i++) bad += buf[i] != val(step, k, o + i);
        }
    CHECK(bad == 0, "%s: %d wrong values", dir, bad);
    CHECK_OK(dt_ckpt_read_range(dir, m, "params", P, 0, NULL));
    CHECK_ERR(dt_ckpt_read_range(dir, m, "params", P - 1, 2, buf), DT_ERR_INVALID, "outside state vector");
    CHECK_ERR(dt_ckpt_read_range(dir, m, "momentum", 0, 1, buf), DT_ERR_INVALID, "no state vector 'momentum'");
    CHECK_OK(dt_ckpt_verify(dir, m));
    /* The serialized manifest parses back to the same text. */
    char *j1 = NULL, *j2 = NULL;
    size_t l1 = 0;
    CHECK_OK(dt_ckpt_manifest_to_json(m, &j1, &l1));
    dt_ckpt_manifest *m2 = NULL;
    if (j1) CHECK_OK(dt_ckpt_manifest_parse(j1, l1, &m2));
    if (m2) CHECK_OK(dt_ckpt_manifest_to_json(m2, &j2, NULL));
    CHECK(j1 && j2 && strcmp(j1, j2) == 0, "manifest JSON round trip");
    /* A parsed manifest reads through an explicit directory. */
    if (m2 && exists(dir)) {
        CHECK_OK(dt_ckpt_read_range(dir, m2, "exp_avg", 10, 20, buf));
        CHECK(buf[0] == val(step, 1, 10) && buf[19] == val(step, 1, 29), "parsed manifest read");
        CHECK_ERR(dt_ckpt_read_range(NULL, m2, "exp_avg", 10, 20, buf), DT_ERR_INVALID, "no directory");
    }
    free(j1);
    free(j2);
    dt_ckpt_manifest_free(m2);
    dt_ckpt_manifest_free(m);
}

/* The path of rank r's file in the checkpoint now in dir. */
static const char *rank_file(const char *dir, int r) {
    static char buf[4][900];
    static int k;
    k = (k + 1) % 4;
    dt_ckpt_manifest *m = NULL;
    unsigned long long g = 0;
    if (dt_ckpt_load_manifest(dir, &m) == DT_OK) g = m->generation;
    dt_ckpt_manifest_free(m);
    if (g) snprintf(buf[k], sizeof buf[k], "%s/rank-%05d.g%llu.bin", dir, r, g);
    else snprintf(buf[k], sizeof buf[k], "%s/rank-%05d.bin", dir, r);
    return buf[k];
}

/* What a directory holds: rank files of the checkpoint's generation, other
 * names that look like rank files (strays: of other generations, or a
 * user's), manifest.json, manifest.json.tmp, others. */
typedef struct listing { int rank_files, stray, manifest, tmp, other; char other_name[256]; } listing;
static listing list_dir(const char *dir) {
    listing l;
    memset(&l, 0, sizeof l);
    dt_ckpt_manifest *m = NULL;
    unsigned long long g = 0;
    if (dt_ckpt_load_manifest(dir, &m) == DT_OK) g = m->generation;
    dt_ckpt_manifest_free(m);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..")) continue;
        int r;
        unsigned long long fg = 0;
        char tail[8] = "";
        if (!strncmp(n, "rank-", 5)) {
            int ours = g ? sscanf(n, "rank-%5d.g%llu.bi%1s", &r, &fg, tail) == 3 && fg == g && !strcmp(tail, "n")
                         : sscanf(n, "rank-%5d.bi%1s", &r, tail) == 2 && !strcmp(tail, "n");
            if (ours) l.rank_files++;
            else l.stray++;
        }
        else if (!strcmp(n, "manifest.json")) l.manifest++;
        else if (!strcmp(n, "manifest.json.tmp")) l.tmp++;
        else {
            l.other++;
            snprintf(l.other_name, sizeof l.other_name, "%s", n);
        }
    }
    if (d) closedir(d);
    return l;
}

/* After a successful save of w ranks: exactly w rank files of its generation,
 * `strays` other names of rank files (-1: any number), the manifest, no
 * temporary, `others` files of the user. */
static void check_kept(const char *dir, int w, int others, int strays) {
    listing l = list_dir(dir);
    CHECK(l.rank_files == w && (strays < 0 || l.stray == strays) && l.manifest == 1 && l.tmp == 0 &&
              l.other == others,
          "%s: %d rank files (want %d), %d strays (want %d), manifest %d, tmp %d, %d other files (want %d; e.g. '%s')",
          dir, l.rank_files, w, l.stray, strays, l.manifest, l.tmp, l.other, others, l.other_name);
}

/* ... and nothing that looks like a rank file besides the checkpoint's */
static void check_clean(const char *dir, int w, int others) { check_kept(dir, w, others, 0); }

static ino_t inode(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 ? st.st_ino : 0;
}

static void test_roundtrips(void) {
    CHECK_OK(save(pth("w1", NULL), 1, 1, EVEN, 0));
    check_ckpt(pth("w1", NULL), 1, 1);
    CHECK_OK(save(pth("w2", NULL), 2, 2, EVEN, 1)); /* caller-given rank table */
    check_ckpt(pth("w2", NULL), 2, 2);
    CHECK_OK(save(pth("w4", NULL), 4, 4, UNEVEN, 0));
    check_ckpt(pth("w4", NULL), 4, 4);
    CHECK_OK(save(pth("w3r", NULL), 3, 3, REPLICATED, 0)); /* overlapping ranges */
    check_ckpt(pth("w3r", NULL), 3, 3);
    CHECK(!exists(pth("w4.tmp", NULL)) && !exists(pth("w4.old", NULL)), "nothing beside the directory");
    check_clean(pth("w4", NULL), 4, 0);
    struct stat st;
    CHECK(stat(pth("w4", NULL), &st) == 0 && (st.st_mode & 0777) == 0700, "checkpoint dir mode 0700");
    ino_t ino = inode(pth("w4", NULL));
    /* Trailing slashes name the same checkpoint. */
    char slash[800];
    snprintf(slash, sizeof slash, "%s//", pth("w4", NULL));
    check_ckpt(slash, 4, 4);
    CHECK_OK(save(slash, 6, 2, EVEN, 0));
    CHECK(!exists(pth("w4", ".tmp")) && !exists(pth("w4.tmp", NULL)), "no .tmp inside or beside");
    check_ckpt(pth("w4", NULL), 6, 2);
    check_clean(pth("w4", NULL), 2, 0); /* the 4 files of the previous generation are gone */
    CHECK_ERR(dt_ckpt_prepare("/", NULL), DT_ERR_INVALID, "cannot be '/'");
    /* Saving again over an existing checkpoint replaces it; the directory itself stays. */
    CHECK_OK(save(pth("w4", NULL), 5, 4, EVEN, 0));
    check_ckpt(pth("w4", NULL), 5, 4);
    check_clean(pth("w4", NULL), 4, 0);
    CHECK(inode(pth("w4", NULL)) == ino, "the checkpoint directory was never renamed or replaced");
    CHECK(!exists(pth("w4.old", NULL)), "no .old");
    /* Generations count up. */
    dt_ckpt_manifest *m = NULL;
    CHECK_OK(dt_ckpt_load_manifest(pth("w4", NULL), &m));
    CHECK(m && m->generation == 3, "generation %llu after 3 saves", m ? (unsigned long long)m->generation : 0ull);
    dt_ckpt_manifest_free(m);
}

/* 4 ranks -> 2 ranks -> 1 rank, each generation reading its partition with
 * dt_ckpt_read_range from the previous one. */
static void test_reshard(void) {
    CHECK_OK(save(pth("rs4", NULL), 7, 4, UNEVEN, 0));
    dt_ckpt_manifest *m = NULL;
    CHECK_OK(dt_ckpt_load_manifest(pth("rs4", NULL), &m));
    if (!m) return;
    static float part[2][NV][P];
    dt_ckpt_range rg[2][NV];
    uint64_t gen = 0;
    CHECK_OK(dt_ckpt_prepare(pth("rs2", NULL), &gen));
    for (int r = 0; r < 2; r++) {
        int n = 0;
        for (int v = 0; v < NV; v++) {
            uint64_t lo = v == 3 ? 0 : (uint64_t)r * (P / 2), cnt = v == 3 ? B : P / 2;
            if (v == 3 && r != 0) continue;
            CHECK_OK(dt_ckpt_read_range(pth("rs4", NULL), m, k_vec[v], lo, cnt, part[r][v]));
            rg[r][n++] = (dt_ckpt_range){k_vec[v], lo, cnt, part[r][v]};
        }
        dt_ckpt_shard sh = {n, rg[r]};
        CHECK_OK(dt_ckpt_write_shard(pth("rs2", NULL), gen, r, &sh, NULL));
    }
    dt_ckpt_manifest m2 = *m;
    m2.generation = gen;
    m2.world_size = 2;
    m2.zero_level = 1;
    m2.nranks = 0;
    m2.ranks = NULL;
    m2.priv_ = NULL;
    CHECK_OK(dt_ckpt_commit(pth("rs2", NULL), &m2));
    dt_ckpt_manifest_free(m);
    check_ckpt(pth("rs2", NULL), 7, 2);
    /* 2 -> 1 */
    CHECK_OK(dt_ckpt_load_manifest(pth("rs2", NULL), &m));
    if (!m) return;
    static float full[NV][P];
    dt_ckpt_range r1[NV];
    for (int v = 0; v < NV; v++) {
        CHECK_OK(dt_ckpt_read_range(NULL, m, k_vec[v], 0, k_len[v], full[v]));
        r1[v] = (dt_ckpt_range){k_vec[v], 0, k_len[v], full[v]};
    }
    CHECK_OK(dt_ckpt_prepare(pth("rs1", NULL), &gen));
    CHECK_OK(dt_ckpt_write_shard(pth("rs1", NULL), gen, 0, &(dt_ckpt_shard){NV, r1}, NULL));
    m2 = *m;
    m2.generation = gen;
    m2.world_size = 1;
    m2.zero_level = 0;
    m2.nranks = 0;
    m2.ranks = NULL;
    m2.priv_ = NULL;
    CHECK_OK(dt_ckpt_commit(pth("rs1", NULL), &m2));
    dt_ckpt_manifest_free(m);
    check_ckpt(pth("rs1", NULL), 7, 1);
}

/* ---- corruption ------------------------------------------------------------ */
static void flip_byte(const char *path, long off_from_end) {
    int fd = open(path, O_RDWR);
    struct stat st;
    fstat(fd, &st);
    unsigned char c;
    off_t at = st.st_size - off_from_end;
    if (pread(fd, &c, 1, at) != 1) CHECK(0, "pread");
    c ^= 0x40;
    if (pwrite(fd, &c, 1, at) != 1) CHECK(0, "pwrite");
    close(fd);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    char *s = malloc(n + 1);
    memcpy(s, buf, n + 1);
    return s;
}

/* Replaces the first occurrence of a in file path by b. */
static void edit(const char *path, const char *a, const char *b) {
    char *s = read_text(path);
    char *p = s ? strstr(s, a) : NULL;
    CHECK(p != NULL, "edit: '%s' not in %s", a, path);
    if (!p) { free(s); return; }
    size_t n = strlen(s) + strlen(b) + 1;
    char *o = malloc(n);
    memcpy(o, s, (size_t)(p - s));
    strcpy(o + (p - s), b);
    strcat(o, p + strlen(a));
    write_text(path, o);
    free(o);
    free(s);
}

/* Reads all of params from a freshly loaded manifest; returns the status. */
static int read_all(const char *dir) {
    dt_ckpt_manifest *m = NULL;
    int rc = dt_ckpt_load_manifest(dir, &m);
    if (rc) return rc;
    static float buf[P];
    rc = dt_ckpt_read_range(dir, m, "params", 0, P, buf);
    dt_ckpt_manifest_free(m);
    return rc;
}

static void test_corruption(void) {
    const char *d = pth("bad", NULL);
    const char *mf = pth("bad", "manifest.json");
    const char *r1;
    char want[300];
    /* Checksum: one data byte. */
    CHECK_OK(save(d, 11, 2, EVEN, 0));
    r1 = rank_file(d, 1);
    flip_byte(r1, 3);
    CHECK_ERR(read_all(d), DT_ERR_IO, "checksum mismatch");
    CHECK(strstr(dt_last_error(), r1) != NULL, "names the rank file: %s", dt_last_error());
    /* Verification is cached: corruption after a successful read goes unseen by
     * that manifest object, a fresh load sees it. */
    CHECK_OK(save(d, 12, 2, EVEN, 0));
    r1 = rank_file(d, 1);
    dt_ckpt_manifest *m = NULL;
    CHECK_OK(dt_ckpt_load_manifest(d, &m));
    float x[4];
    CHECK_OK(dt_ckpt_read_range(d, m, "params", 600, 4, x));
    flip_byte(r1, 100);
    CHECK_OK(dt_ckpt_read_range(d, m, "params", 700, 4, x));
    dt_ckpt_manifest_free(m);
    CHECK_ERR(read_all(d), DT_ERR_IO, "checksum mismatch");
    /* Only the files a read needs are verified. */
    CHECK_OK(dt_ckpt_load_manifest(d, &m));
    float y10[10];
    CHECK_OK(dt_ckpt_read_range(d, m, "params", 0, 10, y10));
    snprintf(want, sizeof want, "%s: checksum mismatch", r1);
    CHECK_ERR(dt_ckpt_verify(d, m), DT_ERR_IO, want);
    dt_ckpt_manifest_free(m);
    /* Truncated rank file. */
    CHECK_OK(save(d, 13, 2, EVEN, 0));
    r1 = rank_file(d, 1);
    CHECK(truncate(r1, 100) == 0, "truncate");
    CHECK_ERR(read_all(d), DT_ERR_IO, "truncated");
    CHECK(strstr(dt_last_error(), r1) != NULL, "names the rank file: %s", dt_last_error());
    /* Bad magic. */
    CHECK_OK(save(d, 14, 2, EVEN, 0));
    r1 = rank_file(d, 1);
    int fd = open(r1, O_RDWR);
    CHECK(pwrite(fd, "XXCKPT01", 8, 0) == 8, "pwrite magic");
    close(fd);
    snprintf(want, sizeof want, "%s: bad magic", r1);
    CHECK_ERR(read_all(d), DT_ERR_IO, want);
    /* Missing rank file. */
    CHECK_OK(save(d, 15, 2, EVEN, 0));
    r1 = rank_file(d, 1);
    unlink(r1);
    snprintf(want, sizeof want, "%s: missing rank file", r1);
    CHECK_ERR(read_all(d), DT_ERR_IO, want);
    /* Unsupported manifest version. A manifest dtrain cannot read is not
     * overwritten by the next save: it is refused until the user removes it. */
    CHECK_OK(save(d, 16, 2, EVEN, 0));
    edit(mf, "\"format_version\": 2", "\"format_version\": 3");
    CHECK_ERR(read_all(d), DT_ERR_UNSUPPORTED, "format version 3 not supported (this build reads 1 and 2)");
    CHECK(strstr(dt_last_error(), mf) != NULL, "names the manifest: %s", dt_last_error());
    CHECK_ERR(save(d, 17, 2, EVEN, 0), DT_ERR_INVALID, "is not a readable dtrain checkpoint manifest (");
    CHECK(strstr(dt_last_error(), "format version 3 not supported"), "says why: %s", dt_last_error());
    char *kept = read_text(mf);
    CHECK(kept && strstr(kept, "\"format_version\": 3"), "the unreadable manifest was left as it was");
    free(kept);
    unlink(mf);
    /* Manifest JSON syntax. */
    CHECK_OK(save(d, 17, 2, EVEN, 0));
    edit(mf, "\"step\": 17,", "\"step\": 17");
    CHECK_ERR(read_all(d), DT_ERR_IO, "manifest JSON syntax error");
    CHECK(strstr(dt_last_error(), mf) != NULL, "names the manifest: %s", dt_last_error());
    unlink(mf);
    /* Manifest fields. */
    CHECK_OK(save(d, 18, 2, EVEN, 0));
    edit(mf, "\"zero_level\": 2", "\"zero_level\": 7");
    CHECK_ERR(read_all(d), DT_ERR_IO, "zero_level 7 out of range");
    unlink(mf);
    CHECK_OK(save(d, 18, 2, EVEN, 0));
    edit(mf, "\"count\": 500", "\"count\": 501");
    CHECK_ERR(read_all(d), DT_ERR_IO, "inconsistent with its ranges");
    unlink(mf);
    CHECK_OK(save(d, 18, 2, EVEN, 0));
    r1 = rank_file(d, 1);
    const char *base = strrchr(r1, '/') + 1;
    char dotdot[300];
    snprintf(dotdot, sizeof dotdot, "../%s", base);
    edit(mf, base, dotdot);
    snprintf(want, sizeof want, "file must be \"%s\"", base);
    CHECK_ERR(read_all(d), DT_ERR_IO, want);
    unlink(mf);
    /* Manifest claims a rank file's range differs from its header. */
    CHECK_OK(save(d, 18, 2, EVEN, 0));
    r1 = rank_file(d, 1);
    edit(mf, "{\"vector\": \"params\", \"offset\": 500", "{\"vector\": \"exp_avg\", \"offset\": 500");
    CHECK_OK(dt_ckpt_load_manifest(d, &m));
    snprintf(want, sizeof want, "%s: header (rank 1, 3 ranges) does not match", r1);
    if (m) CHECK_ERR(dt_ckpt_verify(d, m), DT_ERR_MISMATCH, want);
    dt_ckpt_manifest_free(m);
    /* A range no rank file holds: drop rank 1 from the manifest. */
    CHECK_OK(save(d, 19, 2, EVEN, 0));
    CHECK_OK(dt_ckpt_load_manifest(d, &m));
    if (m) {
        dt_ckpt_manifest cut = *m;
        cut.nranks = 1;
        char *js = NULL;
        CHECK_OK(dt_ckpt_manifest_to_json(&cut, &js, NULL));
        if (js) write_text(mf, js);
        free(js);
        dt_ckpt_manifest_free(m);
    }
    CHECK_OK(dt_ckpt_load_manifest(d, &m));
    if (m) {
        float y[20];
        CHECK_OK(dt_ckpt_read_range(d, m, "params", 480, 20, y));
        CHECK_ERR(dt_ckpt_read_range(d, m, "params", 490, 20, y), DT_ERR_MISMATCH,
                  "elements [500, 510) of state vector 'params' are not in any rank file");
        dt_ckpt_manifest_free(m);
    }
    /* Missing directory / manifest. */
    CHECK_ERR(read_all(pth("nowhere", NULL)), DT_ERR_IO, "nowhere: no checkpoint");
    unlink(mf);
    CHECK_ERR(read_all(d), DT_ERR_IO, "manifest.json: cannot read");
    CHECK_ERR(read_all(NULL), DT_ERR_INVALID, "NULL");
}

/* ---- commit errors and crash safety --------------------------------------------- */
static const char *g_fault_step;
static int g_fault_kind;
static int hook(const char *step, void *arg) {
    (void)arg;
    return g_fault_step && strcmp(step, g_fault_step) == 0 ? g_fault_kind : 0;
}

/* Crashes at the k-th file-system step of whatever runs (k >= 1); g_calls counts them. */
static int g_crash_at, g_calls;
static int count_hook(const char *step, void *arg) {
    (void)step;
    (void)arg;
    return ++g_calls == g_crash_at ? DT_CKPT_FAULT_CRASH : 0;
}

static void test_crash_safety(void) {
    const char *d = pth("cs", NULL);
    CHECK_OK(save(d, 20, 2, EVEN, 0));
    write_text(pth("cs", "notes.txt"), "a user's file"); /* must survive everything below */
    ino_t ino = inode(d);
    int step = 20, w = 2;                                /* the last committed checkpoint */
    dt_ckpt_set_fault_hook(hook, NULL);
    /* A failure at each step: the previous checkpoint stays and the failed save
     * leaves nothing of its own; a failure removing the previous generation's
     * files is not a failed save (the next commit removes them). */
    static const char *const steps[] = {"shard_write", "shard_sync", "manifest_write", "manifest_sync",
                                        "rename_manifest", "remove_old"};
    for (int s = 0; s < 6; s++) {
        g_fault_step = steps[s];
        g_fault_kind = DT_CKPT_FAULT_FAIL;
        int rc = save(d, 21 + s, 4, EVEN, 0);
        g_fault_step = NULL;
        if (s < 5) {
            CHECK(rc == DT_ERR_IO && strstr(dt_last_error(), "injected"), "%s failure: %s", steps[s], dt_last_error());
            check_ckpt(d, step, w);
            check_clean(d, w, 1);
        } else {
            CHECK_OK(rc);
            check_ckpt(d, 21 + s, 4);
            listing l = list_dir(d);
            CHECK(l.rank_files == 4 && l.stray == w, "remove_old failure: %d rank files, %d of the previous one",
                  l.rank_files, l.stray);
            step = 21 + s;
            w = 4;
        }
    }
    CHECK_OK(save(d, 30, 2, EVEN, 0));
    check_ckpt(d, 30, 2);
    check_clean(d, 2, 1);
    step = 30;
    w = 2;
    /* A crash (the process stops, nothing is cleaned up) at every file-system
     * step of a 4-rank save, in turn: the last committed checkpoint loads (the
     * new one once its manifest is in place), and a 2-rank save afterwards
     * leaves exactly its own files (the crashed save's rank-00002/3 included). */
    dt_ckpt_set_fault_hook(count_hook, NULL);
    int points = 0;
    for (int k = 1; k < 100; k++) {
        g_crash_at = k;
        g_calls = 0;
        int rc = save(d, 100 + k, 4, UNEVEN, 0);
        if (g_calls < k) { /* no step left to crash at: it completed */
            CHECK_OK(rc);
            break;
        }
        points++;
        CHECK(rc == DT_ERR_IO && strstr(dt_last_error(), "injected crash"), "crash %d: %s", k, dt_last_error());
        g_crash_at = 0;
        dt_ckpt_manifest *m = NULL;
        CHECK_OK(dt_ckpt_load_manifest(d, &m));
        int now = m ? (int)m->step : -1;
        dt_ckpt_manifest_free(m);
        CHECK(now == step || now == 100 + k, "crash %d: the checkpoint is at step %d", k, now);
        check_ckpt(d, now, now == step ? w : 4);
        CHECK(read_all(d) == DT_OK, "crash %d: loadable: %s", k, dt_last_error());
        CHECK_OK(save(d, 200 + k, 2, EVEN, 0));
        check_ckpt(d, 200 + k, 2);
        check_clean(d, 2, 1);
        step = 200 + k;
    }
    /* 4 shard_write + 4 shard_sync + manifest_write + manifest_sync + rename + remove_old */
    CHECK(points == 12, "%d crash points in a 4-rank save (want 12)", points);
    dt_ckpt_set_fault_hook(NULL, NULL);
    CHECK(inode(d) == ino && exists(pth("cs", "notes.txt")), "directory kept, user's file kept");
    char *notes = read_text(pth("cs", "notes.txt"));
    CHECK(notes && strcmp(notes, "a user's file") == 0, "notes.txt unchanged");
    free(notes);
    CHECK_OK(save(d, 37, 2, EVEN, 0));
    check_ckpt(d, 37, 2);

    /* Commit refuses incomplete shard sets and keeps the old checkpoint. */
    fill(40);
    dt_ckpt_range rg[NV];
    int n = shard_ranges(EVEN, 0, 2, rg);
    uint64_t gen = 0;
    CHECK_OK(dt_ckpt_prepare(d, &gen));
    CHECK_OK(dt_ckpt_write_shard(d, gen, 0, &(dt_ckpt_shard){n, rg}, NULL));
    dt_ckpt_manifest m = make_manifest(40, 2, 2);
    m.generation = gen;
    char want[300];
    snprintf(want, sizeof want, "rank-00001.g%llu.bin: missing rank file", (unsigned long long)gen);
    CHECK_ERR(dt_ckpt_commit(d, &m), DT_ERR_IO, want);
    check_ckpt(d, 37, 2);
    check_clean(d, 2, 1); /* the failed commit removed rank 0's file of its generation */
    CHECK_OK(dt_ckpt_write_shard(d, gen, 0, &(dt_ckpt_shard){n, rg}, NULL));
    m.world_size = 1; /* only rank 0's half of the vectors */
    CHECK_ERR(dt_ckpt_commit(d, &m), DT_ERR_MISMATCH, "elements [500, 1000) of state vector 'params' are not in any");
    check_ckpt(d, 37, 2);
    /* A shard naming a vector the manifest lacks. */
    dt_ckpt_range odd = {"momentum_buffer", 0, 1, g_data[0]};
    CHECK_OK(dt_ckpt_write_shard(d, gen, 0, &(dt_ckpt_shard){1, &odd}, NULL));
    CHECK_ERR(dt_ckpt_commit(d, &m), DT_ERR_MISMATCH, "unknown vector 'momentum_buffer'");
    check_ckpt(d, 37, 2);
    /* Caller-given table that disagrees with the file. */
    dt_ckpt_rank_file rf = {0, n, rg, 0, 0};
    CHECK_OK(dt_ckpt_write_shard(d, gen, 0, &(dt_ckpt_shard){n, rg}, NULL));
    m.world_size = 2;
    m.nranks = 1;
    m.ranks = &rf;
    CHECK_ERR(dt_ckpt_commit(d, &m), DT_ERR_INVALID, "bytes 0 inconsistent");
    check_ckpt(d, 37, 2);
    /* A generation that is not newer than the one in the directory (two writers). */
    CHECK_OK(dt_ckpt_prepare(d, &gen));
    CHECK_OK(save(d, 38, 2, EVEN, 0)); /* "the other job" commits gen first */
    m = make_manifest(39, 2, 2);
    m.generation = gen;
    CHECK_ERR(dt_ckpt_commit(d, &m), DT_ERR_STATE, "already holds generation");
    check_ckpt(d, 38, 2);
    m = make_manifest(1, 2, 2);
    m.generation = 1;
    CHECK_ERR(dt_ckpt_commit(pth("nothing", NULL), &m), DT_ERR_IO, "nothing: missing or not a directory");

    /* Argument validation. */
    m = make_manifest(1, 2, 2);
    CHECK_ERR(dt_ckpt_commit(d, &m), DT_ERR_INVALID, "generation 0 (use the one dt_ckpt_prepare returned)");
    m.zero_level = 4;
    CHECK_ERR(dt_ckpt_commit(d, &m), DT_ERR_INVALID, "zero_level");
    m = make_manifest(1, 0, 2);
    CHECK_ERR(dt_ckpt_commit(d, &m), DT_ERR_INVALID, "world_size 0");
    m = make_manifest(1, 2, 2);
    dt_ckpt_vector dupv[2] = {{"params", 3}, {"params", 3}};
    m.vectors = dupv;
    m.nvectors = 2;
    CHECK_ERR(dt_ckpt_commit(d, &m), DT_ERR_INVALID, "duplicate vector name 'params'");
    m = make_manifest(1, 2, 2);
    dt_ckpt_kv dupk[2] = {{"a", "1"}, {"a", "2"}};
    m.meta = dupk;
    m.nmeta = 2;
    CHECK_ERR(dt_ckpt_commit(d, &m), DT_ERR_INVALID, "duplicate metadata key 'a'");
    dt_ckpt_range nul = {"params", 0, 5, NULL};
    CHECK_ERR(dt_ckpt_write_shard(d, 9, 0, &(dt_ckpt_shard){1, &nul}, NULL), DT_ERR_INVALID, "NULL data");
    nul.vector = "";
    CHECK_ERR(dt_ckpt_write_shard(d, 9, 0, &(dt_ckpt_shard){1, &nul}, NULL), DT_ERR_INVALID, "vector name");
    CHECK_ERR(dt_ckpt_write_shard(d, 9, -1, &(dt_ckpt_shard){0, NULL}, NULL), DT_ERR_INVALID, "rank -1");
    CHECK_ERR(dt_ckpt_write_shard(d, 0, 0, &(dt_ckpt_shard){0, NULL}, NULL), DT_ERR_INVALID, "generation 0");
    CHECK_ERR(dt_ckpt_write_shard(pth("no/such/parent", NULL), 1, 0, &(dt_ckpt_shard){0, NULL}, NULL), DT_ERR_IO,
              "the checkpoint directory must exist");
    CHECK_ERR(dt_ckpt_prepare(pth("no/such/parent", NULL), NULL), DT_ERR_IO, "cannot create the checkpoint directory");
    check_clean(d, 2, 1);
    /* Read-only directory (meaningful only without root privileges). */
    if (geteuid() != 0) {
        CHECK_OK(save(pth("ro/ck", NULL), 50, 1, EVEN, 0));
        chmod(pth("ro/ck", NULL), 0500);
        CHECK_ERR(save(pth("ro/ck", NULL), 51, 1, EVEN, 0), DT_ERR_IO, "cannot create files in the checkpoint directory");
        chmod(pth("ro/ck", NULL), 0700);
        check_ckpt(pth("ro/ck", NULL), 50, 1);
    }
}

/* ---- what a checkpoint directory may be ------------------------------------------ */
static void test_dir_rules(void) {
    /* A user's directory: refused before anything is written, left as it was. */
    const char *u = pth("u", NULL);
    mkdir(u, 0755);
    write_text(pth("u", "thesis.txt"), "chapter 1");
    ino_t ino = inode(u);
    CHECK_ERR(dt_ckpt_prepare(u, NULL), DT_ERR_INVALID, "directory is not empty and holds no dtrain checkpoint (it contains 'thesis.txt')");
    CHECK_ERR(save(u, 1, 2, EVEN, 0), DT_ERR_INVALID, "never deletes files it did not write");
    listing l = list_dir(u);
    CHECK(l.other == 1 && l.rank_files == 0 && l.manifest == 0 && l.tmp == 0 && inode(u) == ino, "u untouched");
    char *t = read_text(pth("u", "thesis.txt"));
    CHECK(t && strcmp(t, "chapter 1") == 0, "thesis.txt unchanged");
    free(t);
    CHECK(!exists(pth("u.old", NULL)) && !exists(pth("u.tmp", NULL)), "nothing beside u");
    /* A file that only looks like ours is not enough (rank-1.bin: not our pattern). */
    const char *v = pth("v", NULL);
    mkdir(v, 0755);
    write_text(pth("v", "rank-1.bin"), "x");
    CHECK_ERR(dt_ckpt_prepare(v, NULL), DT_ERR_INVALID, "it contains 'rank-1.bin'");
    /* A regular file as the directory: refused, not moved. */
    const char *f = pth("f", NULL);
    write_text(f, "a file");
    CHECK_ERR(dt_ckpt_prepare(f, NULL), DT_ERR_INVALID, "exists and is not a directory");
    CHECK_ERR(dt_ckpt_load_manifest(f, &(dt_ckpt_manifest *){NULL}), DT_ERR_IO, "manifest.json: cannot read");
    t = read_text(f);
    CHECK(t && strcmp(t, "a file") == 0 && !exists(pth("f.old", NULL)) && !exists(pth("f.tmp", NULL)),
          "the file stayed where it was");
    free(t);
    /* A manifest.json that is not ours (or not a regular file). */
    const char *g = pth("g", NULL);
    mkdir(g, 0755);
    write_text(pth("g", "manifest.json"), "{\"name\": \"my web app\"}");
    CHECK_ERR(dt_ckpt_prepare(g, NULL), DT_ERR_INVALID, "is not a readable dtrain checkpoint manifest");
    unlink(pth("g", "manifest.json"));
    mkdir(pth("g", "manifest.json"), 0755);
    CHECK_ERR(dt_ckpt_prepare(g, NULL), DT_ERR_INVALID, "(not a regular file)");
    rmdir(pth("g", "manifest.json"));
    /* An empty directory and one holding only what looks like dtrain's
     * leftovers of an interrupted first save are accepted; such files stay
     * (no manifest lists them and this process did not write them: they may
     * be a user's), the new generation is above them. */
    char e[800];
    snprintf(e, sizeof e, "%s", pth("e", NULL));
    mkdir(e, 0755);
    write_text(pth("e", "rank-00003.g7.bin"), "partial");
    write_text(pth("e", "manifest.json.tmp"), "{ partial");
    uint64_t gen = 0;
    CHECK_OK(dt_ckpt_prepare(e, &gen));
    CHECK(gen == 8, "next generation %llu (want 8: above any present)", (unsigned long long)gen);
    CHECK_OK(save(e, 1, 2, EVEN, 0));
    check_ckpt(e, 1, 2);
    check_kept(e, 2, 0, 1);
    t = read_text(pth("e", "rank-00003.g7.bin"));
    CHECK(t && strcmp(t, "partial") == 0, "the file that looks like a leftover is kept as it was");
    free(t);
    unlink(pth("e", "rank-00003.g7.bin"));
    /* ".": the current directory (the old layout failed here and left "..tmp"). */
    char cwd[1024];
    CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
    mkdir(pth("dot", NULL), 0755);
    if (chdir(pth("dot", NULL)) == 0) {
        CHECK_OK(save(".", 1, 2, EVEN, 0));
        CHECK_OK(save("./", 2, 1, EVEN, 0));
        check_ckpt(".", 2, 1);
        check_clean(".", 1, 0);
        CHECK(chdir(cwd) == 0, "chdir back");
    } else {
        CHECK(0, "chdir");
    }
    CHECK(!exists(pth("..tmp", NULL)) && !exists(pth("dot", "..tmp")) && !exists(pth("dot", "..old")), "no ..tmp");
    /* A user's file inside a checkpoint directory survives saves. */
    write_text(pth("e", "README"), "my notes");
    CHECK_OK(save(e, 2, 4, EVEN, 0));
    CHECK_OK(save(e, 3, 1, EVEN, 0));
    check_ckpt(e, 3, 1);
    check_clean(e, 1, 1);
    t = read_text(pth("e", "README"));
    CHECK(t && strcmp(t, "my notes") == 0, "README unchanged");
    free(t);
    /* ... and so does one whose name only looks like dtrain's (issue 25's
     * probe: rank-12345.g1.bin and rank-00000.g99.bin placed by hand, one
     * below the checkpoint's generation, one above it) */
    write_text(pth("e", "rank-12345.g1.bin"), "mine, too");
    write_text(pth("e", "rank-00000.g99.bin"), "and mine");
    CHECK_OK(dt_ckpt_prepare(e, &gen));
    CHECK(gen == 100, "next generation %llu (want 100: above any present)", (unsigned long long)gen);
    CHECK_OK(save(e, 4, 2, EVEN, 0));
    CHECK_OK(save(e, 5, 1, EVEN, 0));
    check_ckpt(e, 5, 1);
    check_kept(e, 1, 1, 2);
    t = read_text(pth("e", "rank-12345.g1.bin"));
    char *t2 = read_text(pth("e", "rank-00000.g99.bin"));
    CHECK(t && t2 && !strcmp(t, "mine, too") && !strcmp(t2, "and mine"), "look-alike rank files unchanged");
    free(t);
    free(t2);
}

/* ---- format version 1: a checkpoint written by dtrain ea878ae ---------------------- */
static void copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    CHECK(a && b, "copy %s", from);
    char buf[4096];
    size_t n;
    while (a && b && (n = fread(buf, 1, sizeof buf, a)) > 0) fwrite(buf, 1, n, b);
    if (a) fclose(a);
    if (b) fclose(b);
}

static void test_format_v1(void) {
    static const char *const files[] = {"manifest.json", "rank-00000.bin", "rank-00001.bin"};
    const char *d = pth("v1", NULL);
    mkdir(d, 0700);
    for (int i = 0; i < 3; i++) {
        char from[300];
        snprintf(from, sizeof from, "tests/io/data/v1_w2/%s", files[i]);
        copy_file(from, pth("v1", files[i]));
    }
    dt_ckpt_manifest *m = NULL;
    CHECK_OK(dt_ckpt_load_manifest(d, &m));
    if (!m) return;
    CHECK(m->format_version == 1 && m->generation == 0 && m->step == 7 && m->epoch == 1 && m->epoch_position == 3 &&
              m->world_size == 2 && m->zero_level == 1 && m->nranks == 2,
          "v1 fields");
    float p[8], a[8], b[3];
    CHECK_OK(dt_ckpt_read_range(NULL, m, "params", 0, 8, p));
    CHECK_OK(dt_ckpt_read_range(NULL, m, "exp_avg", 0, 8, a));
    CHECK_OK(dt_ckpt_read_range(NULL, m, "buffers", 0, 3, b));
    int bad = 0;
    for (int i = 0; i < 8; i++) bad += p[i] != 0.5f * (float)i + 1 || a[i] != -0.25f * (float)i;
    for (int i = 0; i < 3; i++) bad += b[i] != 100.0f + (float)i;
    CHECK(bad == 0, "v1 values: %d wrong", bad);
    CHECK_OK(dt_ckpt_verify(NULL, m));
    /* serialized as version 1, byte for byte what ea878ae wrote */
    char *js = NULL;
    CHECK_OK(dt_ckpt_manifest_to_json(m, &js, NULL));
    char *orig = read_text("tests/io/data/v1_w2/manifest.json");
    CHECK(js && orig && strcmp(js, orig) == 0, "v1 manifest round trip");
    free(js);
    free(orig);
    dt_ckpt_manifest_free(m);
    /* A save into it: generation 1 replaces it and removes rank-0000N.bin. */
    CHECK_OK(save(d, 9, 2, EVEN, 0));
    check_ckpt(d, 9, 2);
    check_clean(d, 2, 0);
    CHECK(!exists(pth("v1", "rank-00000.bin")) && !exists(pth("v1", "rank-00001.bin")), "v1 rank files removed");
    /* A format version 1 writer's crash between its renames: DIR.old is read. */
    const char *c = pth("v1crash", NULL);
    char old[600];
    snprintf(old, sizeof old, "%s.old", c);
    mkdir(old, 0700);
    for (int i = 0; i < 3; i++) {
        char from[300], to[700];
        snprintf(from, sizeof from, "tests/io/data/v1_w2/%s", files[i]);
        snprintf(to, sizeof to, "%s/%s", old, files[i]);
        copy_file(from, to);
    }
    CHECK_OK(dt_ckpt_load_manifest(c, &m));
    CHECK(m && m->step == 7, "DIR.old used when DIR is missing");
    if (m) CHECK_OK(dt_ckpt_verify(NULL, m));
    dt_ckpt_manifest_free(m);
    mkdir(c, 0700); /* ... or holds no manifest yet */
    CHECK_OK(dt_ckpt_load_manifest(c, &m));
    CHECK(m && m->step == 7, "DIR.old used when DIR has no manifest");
    dt_ckpt_manifest_free(m);
}

/* ---- SIGKILL of a process that saves in a loop -------------------------------------- */
static void test_kill(void) {
    const char *d = pth("kill", NULL);
    CHECK_OK(save(d, 1, 2, EVEN, 0));
    write_text(pth("kill", "notes.txt"), "mine");
    srand(12345);
    int last = 1, moved = 0;
    for (int round = 0; round < 20; round++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            for (int k = 1;; k++) save(d, last + k, 1 + k % 4, k % 3 == 0 ? UNEVEN : EVEN, 0);
        }
        /* let it commit at least once, then kill it at a random point of a later save */
        for (int i = 0; i < 5000; i++) {
            dt_ckpt_manifest *m = NULL;
            int st = dt_ckpt_load_manifest(d, &m) == DT_OK ? (int)m->step : last;
            dt_ckpt_manifest_free(m);
            if (st > last) break;
            struct timespec ms = {0, 1000000L};
            nanosleep(&ms, NULL);
        }
        struct timespec ts = {0, (long)(rand() % 20000) * 1000L}; /* 0-20 ms */
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        dt_ckpt_manifest *m = NULL;
        CHECK_OK(dt_ckpt_load_manifest(d, &m));
        if (!m) continue;
        int step = (int)m->step, w = m->world_size;
        dt_ckpt_manifest_free(m);
        check_ckpt(d, step, w); /* every value of the last committed save */
        CHECK(step >= last, "round %d: step went back from %d to %d", round, last, step);
        moved += step > last;
        last = step;
    }
    CHECK(moved == 20, "the killed processes committed in only %d of 20 rounds", moved);
    CHECK_OK(save(d, last + 1, 2, EVEN, 0));
    /* the killed saves' files stay: no manifest lists them and this process
     * did not write them (they look like a user's files would) */
    check_kept(d, 2, 1, -1);
    char *t = read_text(pth("kill", "notes.txt"));
    CHECK(t && strcmp(t, "mine") == 0, "notes.txt survived 20 kills");
    free(t);
}

/* ---- two jobs saving into one directory ----------------------------------------- */
/* The other job (a process forked beforehand, so that it shares nothing of
 * this one's) prepares a save into the same directory at this job's switch
 * (manifest.json.tmp written and synced, not yet renamed): that prepare used
 * to remove manifest.json.tmp (its probe of the directory), and this job's
 * rename then failed with 'No such file or directory'. */
static int g_go[2] = {-1, -1};
static int other_job_hook(const char *step, void *arg) {
    (void)arg;
    if (strcmp(step, "rename_manifest") != 0 || g_go[1] < 0) return 0;
    if (write(g_go[1], "g", 1) != 1) return 0;
    close(g_go[1]);
    g_go[1] = -1;
    struct timespec ts = {0, 200000000L}; /* time for its prepare to reach the directory */
    nanosleep(&ts, NULL);
    return 0;
}

static void test_two_jobs(void) {
    const char *d = pth("two", NULL);
    CHECK_OK(save(d, 1, 2, EVEN, 0));
    dt_ckpt_manifest *m = NULL;
    CHECK_OK(dt_ckpt_load_manifest(d, &m));
    uint64_t g1 = m ? m->generation : 0;
    dt_ckpt_manifest_free(m);
    /* the other job's prepare waits for this job's commit (the directory's
     * lock), then sees its generation: its exit status is 0 if it got g1 + 2 */
    CHECK(pipe(g_go) == 0, "pipe");
    fflush(NULL);
    pid_t other = fork();
    if (other == 0) {
        char c;
        close(g_go[1]);
        if (read(g_go[0], &c, 1) != 1) _exit(2);
        uint64_t gen = 0;
        int rc = dt_ckpt_prepare(d, &gen);
        _exit(rc == DT_OK && gen == g1 + 2 ? 0 : 1);
    }
    close(g_go[0]);
    dt_ckpt_set_fault_hook(other_job_hook, NULL);
    CHECK_OK(save(d, 2, 2, EVEN, 0));
    dt_ckpt_set_fault_hook(NULL, NULL);
    if (g_go[1] >= 0) close(g_go[1]); /* the hook did not run: the other job ends (2) */
    g_go[1] = -1;
    int st = -1;
    if (other > 0) waitpid(other, &st, 0);
    CHECK(other > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "the other job's prepare did not get generation %llu after this job's commit (status %d)",
          (unsigned long long)(g1 + 2), st);
    check_ckpt(d, 2, 2);
    check_clean(d, 2, 0);
    /* both prepared the same generation: the second commit is told so */
    uint64_t ga = 0, gb = 0;
    CHECK_OK(dt_ckpt_prepare(d, &ga));
    CHECK_OK(dt_ckpt_prepare(d, &gb));
    CHECK(ga == gb, "two prepares give %llu and %llu", (unsigned long long)ga, (unsigned long long)gb);
    CHECK_OK(save(d, 3, 2, EVEN, 0));
    dt_ckpt_manifest mb = make_manifest(4, 2, 2);
    mb.generation = gb;
    CHECK_ERR(dt_ckpt_commit(d, &mb), DT_ERR_STATE, "already holds generation");
    check_ckpt(d, 3, 2);
}

/* ---- manifest parser on hostile input ------------------------------------------- */
static void test_parse(void) {
    static const struct { const char *json; int st; const char *msg; } k[] = {
        {"", DT_ERR_IO, "syntax"},
        {"{", DT_ERR_IO, "syntax"},
        {"[]", DT_ERR_IO, "not a JSON object"},
        {"{\"format\": \"dtrain-checkpoint\"}", DT_ERR_IO, "format_version"},
        {"{\"format\": \"dtrain-checkpoint\", \"format_version\": 3}", DT_ERR_UNSUPPORTED,
         "<memory>: format version 3 not supported (this build reads 1 and 2)"},
        {"{\"format\": \"dtrain-checkpoint\", \"format_version\": 0}", DT_ERR_UNSUPPORTED, "format version 0"},
        {"{\"format\": \"dtrain-checkpoint\", \"format_version\": 2, \"step\": 1}", DT_ERR_IO,
         "missing field 'generation'"},
        {"{\"format\": \"dtrain-checkpoint\", \"format_version\": 2, \"generation\": 0}", DT_ERR_IO,
         "generation 0 (must be >= 1)"},
        {"{\"format\": \"dtrain-checkpoint\", \"format_version\": 1, \"generation\": 3}", DT_ERR_IO,
         "unknown field 'generation' in format version 1"},
        {"{\"format\": \"dtrain-checkpoint\", \"format_version\": 1}", DT_ERR_IO, "missing field 'step'"},
        {"{\"format\": \"dtrain-checkpoint\", \"format_version\": 1, \"format_version\": 1}", DT_ERR_IO,
         "<memory>: manifest JSON syntax error at line 1, column 69 (byte 69): duplicate object key near '\"format_version\"'"},
        {"{\"format\": \"dtrain-checkpoint\", \"format_version\": 1.0}", DT_ERR_IO, "format_version"},
        {"{\"format\": \"dtrain-checkpoint\", \"format_version\": 1, \"bogus\": 1}", DT_ERR_IO, "unknown field 'bogus'"},
        {"{\"format\": \"dtrain-checkpoint\", \"format_version\": 99999999999999999999999}", DT_ERR_IO,
         "at line 1, column 73 (byte 73): too big integer"},
        {"{\"a\": \"\xff\"}", DT_ERR_IO, "column 7 (byte 7): unable to decode byte 0xff"},
        {"{\"a\": \"\\u12\"}", DT_ERR_IO, "column 12 (byte 12): invalid escape near '\"\\u12\"'"},
        {"{\"a\": \"\\x\"}", DT_ERR_IO, "invalid escape"},
        {"{\"a\": tru}", DT_ERR_IO, "column 9 (byte 9): invalid token near 'tru'"},
        {"{\"a\": -}", DT_ERR_IO, "invalid token near '-'"},
        {"{\"a\": 1e}", DT_ERR_IO, "invalid token near '1e'"},
        {"{\"a\": 1.}", DT_ERR_IO, "invalid token near '1.'"},
        {"{\"a\": \"\\ud83d\\ude00\", \"b\": [true, false, null, -1.5e+3]}", DT_ERR_IO, "not a dtrain checkpoint"},
    };
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        static dt_ckpt_manifest sentinel;
        dt_ckpt_manifest *m = &sentinel; /* must be reset to NULL */
        CHECK_ERR(dt_ckpt_manifest_parse(k[i].json, strlen(k[i].json), &m), k[i].st, k[i].msg);
        CHECK(m == NULL, "case %zu: out reset", i);
    }
    /* Valid manifest text: every prefix is refused, no crash. */
    CHECK_OK(save(pth("ps", NULL), 60, 2, UNEVEN, 0));
    char *text = read_text(pth("ps", "manifest.json"));
    size_t len = text ? strlen(text) : 0;
    int refused = 0;
    for (size_t cut = 0; cut + 2 < len; cut++) {
        dt_ckpt_manifest *m = NULL;
        if (dt_ckpt_manifest_parse(text, cut, &m) != DT_OK) refused++;
        dt_ckpt_manifest_free(m);
    }
    CHECK(refused == (int)len - 2, "all %zu truncations refused (%d)", len - 2, refused);
    dt_ckpt_manifest *m = NULL;
    CHECK_OK(dt_ckpt_manifest_parse(text, len, &m));
    CHECK(m && m->step == 60 && m->nranks == 2, "parse");
    dt_ckpt_manifest_free(m);
    free(text);
    CHECK_ERR(dt_ckpt_manifest_parse(NULL, 1, &m), DT_ERR_INVALID, "NULL");
    dt_ckpt_manifest_free(NULL);
    /* Nesting: a value inside 63 containers is read (then refused as not a
     * manifest), one inside 64 is refused by the parser, naming the limit. */
    char deep[256];
    for (int levels = 63; levels <= 64; levels++) {
        size_t n = (size_t)snprintf(deep, sizeof deep, "{\"a\": ");
        for (int i = 1; i < levels; i++) deep[n++] = '[';
        deep[n++] = '0';
        for (int i = 1; i < levels; i++) deep[n++] = ']';
        deep[n++] = '}';
        CHECK_ERR(dt_ckpt_manifest_parse(deep, n, &m), DT_ERR_IO,
                  levels == 63 ? "not a dtrain checkpoint" : "nesting deeper than 64");
    }
}

/* Integers go into the manifest up to 2^63-1, the largest JSON readers
 * (jansson, and so dtrain itself) take back; larger ones are refused on
 * writing, naming the field, and never written as text that cannot be read. */
static void test_int_limits(void) {
    dt_ckpt_manifest m = make_manifest(5, 1, 0);
    m.generation = 1;
    uint64_t *fields[] = {&m.generation, &m.step, &m.epoch, &m.epoch_position, &m.num_params, &m.num_buffers};
    const char *names[] = {"generation", "step", "epoch", "epoch_position", "num_params", "num_buffers"};
    for (int k = 0; k < 6; k++) {
        uint64_t keep = *fields[k];
        char *js = NULL, want[96];
        size_t len = 0;
        dt_ckpt_manifest *back = NULL;
        *fields[k] = (uint64_t)INT64_MAX;
        CHECK_OK(dt_ckpt_manifest_to_json(&m, &js, &len));
        if (js) CHECK_OK(dt_ckpt_manifest_parse(js, len, &back));
        CHECK(back && back->generation == m.generation && back->step == m.step && back->epoch == m.epoch &&
                  back->epoch_position == m.epoch_position && back->num_params == m.num_params &&
                  back->num_buffers == m.num_buffers,
              "%s = 2^63-1 read back", names[k]);
        dt_ckpt_manifest_free(back);
        free(js);
        js = NULL;
        *fields[k] = (uint64_t)INT64_MAX + 1;
        snprintf(want, sizeof want, "manifest: %s 9223372036854775808 too large (at most 2^63-1)", names[k]);
        CHECK_ERR(dt_ckpt_manifest_to_json(&m, &js, NULL), DT_ERR_INVALID, want);
        CHECK(js == NULL, "%s: nothing written", names[k]);
        *fields[k] = keep;
    }
}

static void rm_rf(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) rm_rf(p);
        else unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(g_base, sizeof g_base, "%s/dtck-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_base)) { perror("mkdtemp"); return 1; }
    mkdir(pth("ro", NULL), 0700);
    test_roundtrips();
    test_reshard();
    test_corruption();
    test_crash_safety();
    test_dir_rules();
    test_format_v1();
    test_kill();
    test_two_jobs();
    test_parse();
    test_int_limits();
    rm_rf(g_base);
    return dt_test_finish("io_ckpt");
}
