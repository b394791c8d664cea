/* ckpt_store: sharded checkpoints with 1, 2 and 4 simulated ranks in one
 * process (even, uneven and replicated splits; discovered and caller-given rank
 * tables), reads of ranges spanning shard boundaries, resharding 4 -> 2 -> 1,
 * corruption (checksum, truncation, bad magic, wrong version, JSON syntax,
 * missing files, uncovered ranges) with messages naming the file, and crash
 * safety of the commit (failures and simulated crashes at every step). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "dtrain/ckpt.h"
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
    for (int r = 0; r < w; r++) {
        dt_ckpt_shard sh = {shard_ranges(mode, r, w, rg[r]), rg[r]};
        dt_ckpt_shard_info info;
        int rc = dt_ckpt_write_shard(dir, r, &sh, &info);
        if (rc) return rc;
        rf[r] = (dt_ckpt_rank_file){r, sh.nranges, rg[r], info.bytes, info.crc32};
    }
    dt_ckpt_manifest m = make_manifest(step, w, mode == REPLICATED ? 0 : 2);
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
    CHECK(m->format_version == 1 && m->step == (uint64_t)step && m->epoch == (uint64_t)step / 10 &&
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

static void test_roundtrips(void) {
    CHECK_OK(save(pth("w1", NULL), 1, 1, EVEN, 0));
    check_ckpt(pth("w1", NULL), 1, 1);
    CHECK_OK(save(pth("w2", NULL), 2, 2, EVEN, 1)); /* caller-given rank table */
    check_ckpt(pth("w2", NULL), 2, 2);
    CHECK_OK(save(pth("w4", NULL), 4, 4, UNEVEN, 0));
    check_ckpt(pth("w4", NULL), 4, 4);
    CHECK_OK(save(pth("w3r", NULL), 3, 3, REPLICATED, 0)); /* overlapping ranges */
    check_ckpt(pth("w3r", NULL), 3, 3);
    CHECK(!exists(pth("w4.tmp", NULL)) && !exists(pth("w4.old", NULL)), "no leftovers after commit");
    struct stat st;
    CHECK(stat(pth("w4", NULL), &st) == 0 && (st.st_mode & 0777) == 0700, "checkpoint dir mode 0700");
    /* Trailing slashes name the same checkpoint (DIR.tmp stays a sibling). */
    char slash[800];
    snprintf(slash, sizeof slash, "%s//", pth("w4", NULL));
    check_ckpt(slash, 4, 4);
    CHECK_OK(save(slash, 6, 2, EVEN, 0));
    CHECK(!exists(pth("w4", ".tmp")) && !exists(pth("w4.tmp", NULL)), "no .tmp inside or beside");
    check_ckpt(pth("w4", NULL), 6, 2);
    CHECK_ERR(dt_ckpt_prepare("/"), DT_ERR_INVALID, "cannot be '/'");
    /* Saving again over an existing checkpoint replaces it. */
    CHECK_OK(save(pth("w4", NULL), 5, 4, EVEN, 0));
    check_ckpt(pth("w4", NULL), 5, 4);
    CHECK(!exists(pth("w4.old", NULL)), "old removed");
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
    for (int r = 0; r < 2; r++) {
        int n = 0;
        for (int v = 0; v < NV; v++) {
            uint64_t lo = v == 3 ? 0 : (uint64_t)r * (P / 2), cnt = v == 3 ? B : P / 2;
            if (v == 3 && r != 0) continue;
            CHECK_OK(dt_ckpt_read_range(pth("rs4", NULL), m, k_vec[v], lo, cnt, part[r][v]));
            rg[r][n++] = (dt_ckpt_range){k_vec[v], lo, cnt, part[r][v]};
        }
        dt_ckpt_shard sh = {n, rg[r]};
        CHECK_OK(dt_ckpt_write_shard(pth("rs2", NULL), r, &sh, NULL));
    }
    dt_ckpt_manifest m2 = *m;
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
    CHECK_OK(dt_ckpt_write_shard(pth("rs1", NULL), 0, &(dt_ckpt_shard){NV, r1}, NULL));
    m2 = *m;
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
    const char *r1 = pth("bad", "rank-00001.bin");
    /* Checksum: one data byte. */
    CHECK_OK(save(d, 11, 2, EVEN, 0));
    flip_byte(r1, 3);
    CHECK_ERR(read_all(d), DT_ERR_IO, "checksum mismatch");
    CHECK(strstr(dt_last_error(), r1) != NULL, "names the rank file: %s", dt_last_error());
    /* Verification is cached: corruption after a successful read goes unseen by
     * that manifest object, a fresh load sees it. */
    CHECK_OK(save(d, 12, 2, EVEN, 0));
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
    CHECK_ERR(dt_ckpt_verify(d, m), DT_ERR_IO, "rank-00001.bin: checksum mismatch");
    dt_ckpt_manifest_free(m);
    /* Truncated rank file. */
    CHECK_OK(save(d, 13, 2, EVEN, 0));
    CHECK(truncate(r1, 100) == 0, "truncate");
    CHECK_ERR(read_all(d), DT_ERR_IO, "truncated");
    CHECK(strstr(dt_last_error(), r1) != NULL, "names the rank file: %s", dt_last_error());
    /* Bad magic. */
    CHECK_OK(save(d, 14, 2, EVEN, 0));
    int fd = open(r1, O_RDWR);
    CHECK(pwrite(fd, "XXCKPT01", 8, 0) == 8, "pwrite magic");
    close(fd);
    CHECK_ERR(read_all(d), DT_ERR_IO, "rank-00001.bin: bad magic");
    /* Missing rank file. */
    CHECK_OK(save(d, 15, 2, EVEN, 0));
    unlink(r1);
    CHECK_ERR(read_all(d), DT_ERR_IO, "rank-00001.bin: missing rank file");
    /* Unsupported manifest version. */
    const char *mf = pth("bad", "manifest.json");
    CHECK_OK(save(d, 16, 2, EVEN, 0));
    edit(mf, "\"format_version\": 1", "\"format_version\": 2");
    CHECK_ERR(read_all(d), DT_ERR_UNSUPPORTED, "format version 2 not supported (this build reads 1)");
    CHECK(strstr(dt_last_error(), mf) != NULL, "names the manifest: %s", dt_last_error());
    /* Manifest JSON syntax. */
    CHECK_OK(save(d, 17, 2, EVEN, 0));
    edit(mf, "\"step\": 17,", "\"step\": 17");
    CHECK_ERR(read_all(d), DT_ERR_IO, "manifest JSON syntax error");
    CHECK(strstr(dt_last_error(), mf) != NULL, "names the manifest: %s", dt_last_error());
    /* Manifest fields. */
    CHECK_OK(save(d, 18, 2, EVEN, 0));
    edit(mf, "\"zero_level\": 2", "\"zero_level\": 7");
    CHECK_ERR(read_all(d), DT_ERR_IO, "zero_level 7 out of range");
    CHECK_OK(save(d, 18, 2, EVEN, 0));
    edit(mf, "\"count\": 500", "\"count\": 501");
    CHECK_ERR(read_all(d), DT_ERR_IO, "inconsistent with its ranges");
    CHECK_OK(save(d, 18, 2, EVEN, 0));
    edit(mf, "rank-00001.bin", "../rank-00001.bin");
    CHECK_ERR(read_all(d), DT_ERR_IO, "file must be \"rank-00001.bin\"");
    /* Manifest claims a rank file's range differs from its header. */
    CHECK_OK(save(d, 18, 2, EVEN, 0));
    edit(mf, "{\"vector\": \"params\", \"offset\": 500", "{\"vector\": \"exp_avg\", \"offset\": 500");
    CHECK_OK(dt_ckpt_load_manifest(d, &m));
    if (m) CHECK_ERR(dt_ckpt_verify(d, m), DT_ERR_MISMATCH, "rank-00001.bin: header (rank 1, 3 ranges) does not match");
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

static int dir_has(const char *dir, const char *name) {
    char p[900];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return exists(p);
}

static void test_crash_safety(void) {
    const char *d = pth("cs", NULL), *tmp = pth("cs.tmp", NULL), *old = pth("cs.old", NULL);
    CHECK_OK(save(d, 20, 2, EVEN, 0));
    dt_ckpt_set_fault_hook(hook, NULL);
    /* Failures at each step leave the previous checkpoint in place. */
    static const char *const steps[] = {"shard_write", "manifest_write", "rename_old", "rename_new"};
    for (int s = 0; s < 4; s++) {
        g_fault_step = steps[s];
        g_fault_kind = DT_CKPT_FAULT_FAIL;
        CHECK_ERR(save(d, 21 + s, 4, EVEN, 0), DT_ERR_IO, "injected");
        g_fault_step = NULL;
        check_ckpt(d, 20, 2);
        CHECK(!exists(old), "%s failure: no .old left", steps[s]);
    }
    /* Crash between the renames: DIR gone, DIR.old complete -> loaders use it. */
    g_fault_step = "rename_new";
    g_fault_kind = DT_CKPT_FAULT_CRASH;
    CHECK_ERR(save(d, 30, 4, EVEN, 0), DT_ERR_IO, "injected crash");
    g_fault_step = NULL;
    CHECK(!exists(d) && exists(old) && exists(tmp), "crash state: only .old and .tmp");
    check_ckpt(d, 20, 2);
    /* The next save (fewer ranks: rank 2/3 files in DIR.tmp are stale) recovers. */
    CHECK_OK(save(d, 31, 2, EVEN, 0));
    check_ckpt(d, 31, 2);
    CHECK(!exists(old) && !exists(tmp), "recovered: no .old/.tmp");
    CHECK(!dir_has(d, "rank-00002.bin") && !dir_has(d, "rank-00003.bin"), "stale rank files cleaned");
    /* Crash after the swap, before removing DIR.old: DIR is the new one. */
    g_fault_step = "remove_old";
    g_fault_kind = DT_CKPT_FAULT_CRASH;
    CHECK_ERR(save(d, 32, 2, EVEN, 0), DT_ERR_IO, "injected crash");
    g_fault_step = NULL;
    CHECK(exists(d) && exists(old), "both present");
    check_ckpt(d, 32, 2);
    CHECK_OK(save(d, 33, 2, EVEN, 0));
    check_ckpt(d, 33, 2);
    CHECK(!exists(old), ".old cleaned by the next commit");
    /* A failure removing DIR.old is not a failed save. */
    g_fault_step = "remove_old";
    g_fault_kind = DT_CKPT_FAULT_FAIL;
    CHECK_OK(save(d, 34, 2, EVEN, 0));
    g_fault_step = NULL;
    check_ckpt(d, 34, 2);
    /* Crash while writing a shard: a partial file in DIR.tmp; next save works. */
    g_fault_step = "shard_write";
    g_fault_kind = DT_CKPT_FAULT_CRASH;
    CHECK_ERR(save(d, 35, 2, EVEN, 0), DT_ERR_IO, "injected crash");
    g_fault_step = NULL;
    check_ckpt(d, 34, 2);
    /* Garbage left in DIR.tmp is removed by the commit. */
    write_text(pth("cs.tmp", "junk.txt"), "junk");
    write_text(pth("cs.tmp", "manifest.json"), "{ stale");
    CHECK_OK(save(d, 36, 2, EVEN, 0));
    check_ckpt(d, 36, 2);
    CHECK(!dir_has(d, "junk.txt"), "junk removed");
    /* dt_ckpt_prepare clears a stale DIR.tmp. */
    mkdir(tmp, 0700);
    write_text(pth("cs.tmp", "junk.txt"), "junk");
    CHECK(exists(pth("cs.tmp", "junk.txt")), "junk there");
    CHECK_OK(dt_ckpt_prepare(d));
    CHECK(exists(tmp) && !exists(pth("cs.tmp", "junk.txt")), "prepare cleaned DIR.tmp");
    CHECK_OK(save(d, 37, 2, EVEN, 0));
    check_ckpt(d, 37, 2);
    dt_ckpt_set_fault_hook(NULL, NULL);

    /* Commit refuses incomplete shard sets and keeps the old checkpoint. */
    fill(40);
    dt_ckpt_range rg[NV];
    int n = shard_ranges(EVEN, 0, 2, rg);
    CHECK_OK(dt_ckpt_write_shard(d, 0, &(dt_ckpt_shard){n, rg}, NULL));
    dt_ckpt_manifest m = make_manifest(40, 2, 2);
    CHECK_ERR(dt_ckpt_commit(d, &m), DT_ERR_IO, "rank-00001.bin: missing rank file");
    m.world_size = 1; /* only rank 0's half of the vectors */
    CHECK_ERR(dt_ckpt_commit(d, &m), DT_ERR_MISMATCH, "elements [500, 1000) of state vector 'params' are not in any");
    check_ckpt(d, 37, 2);
    /* A shard naming a vector the manifest lacks. */
    dt_ckpt_range odd = {"momentum_buffer", 0, 1, g_data[0]};
    CHECK_OK(dt_ckpt_write_shard(d, 0, &(dt_ckpt_shard){1, &odd}, NULL));
    CHECK_ERR(dt_ckpt_commit(d, &m), DT_ERR_MISMATCH, "unknown vector 'momentum_buffer'");
    check_ckpt(d, 37, 2);
    /* Caller-given table that disagrees with the file. */
    dt_ckpt_rank_file rf = {0, n, rg, 0, 0};
    CHECK_OK(dt_ckpt_write_shard(d, 0, &(dt_ckpt_shard){n, rg}, NULL));
    m.world_size = 2;
    m.nranks = 1;
    m.ranks = &rf;
    CHECK_ERR(dt_ckpt_commit(d, &m), DT_ERR_INVALID, "bytes 0 inconsistent");
    check_ckpt(d, 37, 2);
    dt_ckpt_prepare(d);
    m = make_manifest(1, 2, 2);
    CHECK_ERR(dt_ckpt_commit(pth("nothing", NULL), &m), DT_ERR_IO, "nothing.tmp: missing");

    /* Argument validation. */
    m = make_manifest(1, 2, 2);
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
    CHECK_ERR(dt_ckpt_write_shard(d, 0, &(dt_ckpt_shard){1, &nul}, NULL), DT_ERR_INVALID, "NULL data");
    nul.vector = "";
    CHECK_ERR(dt_ckpt_write_shard(d, 0, &(dt_ckpt_shard){1, &nul}, NULL), DT_ERR_INVALID, "vector name");
    CHECK_ERR(dt_ckpt_write_shard(d, -1, &(dt_ckpt_shard){0, NULL}, NULL), DT_ERR_INVALID, "rank -1");
    CHECK_ERR(dt_ckpt_write_shard(pth("no/such/parent", NULL), 0, &(dt_ckpt_shard){0, NULL}, NULL), DT_ERR_IO,
              "cannot create directory");
    /* Read-only parent directory (meaningful only without root privileges). */
    if (geteuid() != 0) {
        CHECK_OK(save(pth("ro/ck", NULL), 50, 1, EVEN, 0));
        CHECK_OK(dt_ckpt_write_shard(pth("ro/ck", NULL), 0, &(dt_ckpt_shard){shard_ranges(EVEN, 0, 1, rg), rg}, NULL));
        chmod(pth("ro", NULL), 0500);
        m = make_manifest(51, 1, 2);
        CHECK_ERR(dt_ckpt_commit(pth("ro/ck", NULL), &m), DT_ERR_IO, "ck");
        chmod(pth("ro", NULL), 0700);
        check_ckpt(pth("ro/ck", NULL), 50, 1);
    }
}

/* ---- manifest parser on hostile input ------------------------------------------- */
static void test_parse(void) {
    static const struct { const char *json; int st; const char *msg; } k[] = {
        {"", DT_ERR_IO, "syntax"},
        {"{", DT_ERR_IO, "syntax"},
        {"[]", DT_ERR_IO, "not a JSON object"},
        {"{\"format\": \"dtrain-checkpoint\"}", DT_ERR_IO, "format_version"},
        {"{\"format\": \"dtrain-checkpoint\", \"format_version\": 2}", DT_ERR_UNSUPPORTED,
         "<memory>: format version 2 not supported (this build reads 1)"},
        {"{\"format\": \"dtrain-checkpoint\", \"format_version\": 1}", DT_ERR_IO, "missing field 'step'"},
        {"{\"format\": \"dtrain-checkpoint\", \"format_version\": 1, \"format_version\": 1}", DT_ERR_IO, "duplicate key"},
        {"{\"format\": \"dtrain-checkpoint\", \"format_version\": 1.0}", DT_ERR_IO, "format_version"},
        {"{\"format\": \"dtrain-checkpoint\", \"format_version\": 1, \"bogus\": 1}", DT_ERR_IO, "unknown field 'bogus'"},
        {"{\"format\": \"dtrain-checkpoint\", \"format_version\": 99999999999999999999999}", DT_ERR_IO, "format_version"},
        {"{\"a\": \"\xff\"}", DT_ERR_IO, "invalid UTF-8"},
        {"{\"a\": \"\\u12\"}", DT_ERR_IO, "\\u escape"},
        {"{\"a\": \"\\x\"}", DT_ERR_IO, "invalid escape"},
        {"{\"a\": tru}", DT_ERR_IO, "invalid literal"},
        {"{\"a\": -}", DT_ERR_IO, "invalid number"},
        {"{\"a\": 1e}", DT_ERR_IO, "exponent"},
        {"{\"a\": 1.}", DT_ERR_IO, "after '.'"},
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
    test_parse();
    rm_rf(g_base);
    return dt_test_finish("ckpt_store");
}
