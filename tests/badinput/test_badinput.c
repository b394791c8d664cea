/* tests/badinput/test_badinput.c - the bad-input matrix.
 *
 * One table: every row is a bad input (API misuse, trainer flag, config value,
 * data file, launch, checkpoint) with the status or exit code it must get and a
 * substring its message must contain. Every row is exercised:
 *   K_CALL rows call the C API in this process (standalone: void backend);
 *   K_PROC rows run dtrain-train (or mpiexec ... dtrain-train) and check the exit
 *          code and its output; with `ranks` > 0 the message must be printed by
 *          every rank ("[rank R]" on the same line).
 * Small data files, config files and checkpoints are written to a private
 * temporary directory (removed at the end).
 *
 *   test_badinput DTRAIN_TRAIN MPIEXEC [ROW_ID...]   run all rows (or the given ones)
 *   test_badinput --markdown                       print the table (docs/troubleshooting.md)
 *
 * Exit 0 if every row got its status and message. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#include "dtrain/ckpt.h"
#include "dtrain/config.h"
#include "dtrain/data.h"
#include "dtrain/dtrain.h"
#include "dtrain/safetensors.h"

/* ---- helpers ----------------------------------------------------------------- */

static char g_dir[128];             /* temporary directory */
static const char *g_train, *g_mpiexec;
static char g_bench[1024];          /* dtrain-bench, beside dtrain-train */
static char g_fault[1024];          /* tests/fault's fault_prog, beside this program */
static char g_msg[4096];            /* message captured by a K_CALL row */

/* Records dt_last_error() as the row's message and returns rc. */
static int R(int rc) {
    snprintf(g_msg, sizeof g_msg, "%s", dt_last_error());
    return rc;
}

static const char *path(const char *name) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "badinput: setup failed: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static void write_bytes(const char *p, const void *b, size_t n) {
    FILE *f = fopen(p, "wb");
    if (!f || (n && fwrite(b, 1, n, f) != n) || fclose(f) != 0) die("cannot write %s", p);
}

static void write_text(const char *p, const char *s) { write_bytes(p, s, strlen(s)); }

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

/* IDX files. count images of rows x cols; labels i % 10 (or `bad_label` for the last). */
static void write_idx_images(const char *p, uint32_t magic, uint32_t count, uint32_t rows, uint32_t cols,
                             long cut, int gz) {
    size_t n = 16 + (size_t)count * rows * cols;
    uint8_t *b = calloc(n, 1);
    if (!b) die("oom");
    put_be32(b, magic); put_be32(b + 4, count); put_be32(b + 8, rows); put_be32(b + 12, cols);
    for (size_t i = 16; i < n; i++) b[i] = (uint8_t)(i * 131u);
    if (cut > 0) n -= (size_t)cut;
    if (gz) {
        gzFile f = gzopen(p, "wb");
        if (!f || gzwrite(f, b, (unsigned)n) != (int)n || gzclose(f) != Z_OK) die("gz %s", p);
    } else {
        write_bytes(p, b, n);
    }
    free(b);
}

static void write_idx_labels(const char *p, uint32_t magic, uint32_t count, int bad_label) {
    uint8_t *b = calloc(8 + count, 1);
    if (!b) die("oom");
    put_be32(b, magic); put_be32(b + 4, count);
    for (uint32_t i = 0; i < count; i++) b[8 + i] = (uint8_t)(i % 10);
    if (bad_label >= 0 && count) b[8 + count - 1] = (uint8_t)bad_label;
    write_bytes(p, b, 8 + count);
    free(b);
}

/* A Fashion-MNIST-shaped directory: 64 training and 16 test samples, 28 x 28. */
static void write_fm_dir(const char *name) {
    char d[512];
    snprintf(d, sizeof d, "%s", path(name));
    if (mkdir(d, 0700) != 0 && errno != EEXIST) die("mkdir %s", d);
    char p[640];
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte", d); write_idx_images(p, 0x803, 64, 28, 28, 0, 0);
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte", d); write_idx_labels(p, 0x801, 64, -1);
    snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte", d); write_idx_images(p, 0x803, 16, 28, 28, 0, 0);
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte", d); write_idx_labels(p, 0x801, 16, -1);
}

/* A valid checkpoint in `name`: vector "params" of 8 floats, written by rank 0
 * of a world of 1. Returns its directory. */
static const char *make_ckpt(const char *name) {
    static char d[512];
    snprintf(d, sizeof d, "%s", path(name));
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    dt_ckpt_range rg = {"params", 0, 8, x};
    dt_ckpt_shard sh = {1, &rg};
    dt_ckpt_vector v = {"params", 8};
    dt_ckpt_manifest m;
    memset(&m, 0, sizeof m);
    m.world_size = 1;
    m.num_params = 8;
    m.nvectors = 1;
    m.vectors = &v;
    if (dt_ckpt_prepare(d, &m.generation) || dt_ckpt_write_shard(d, m.generation, 0, &sh, NULL) ||
        dt_ckpt_commit(d, &m))
        die("checkpoint %s: %s", d, dt_last_error());
    return d;
}

static void truncate_file(const char *p, long by) {
    struct stat st;
    if (stat(p, &st) != 0 || truncate(p, st.st_size - by) != 0) die("truncate %s", p);
}

static void flip_last_byte(const char *p) {
    FILE *f = fopen(p, "r+b");
    if (!f || fseek(f, -1, SEEK_END) != 0) die("open %s", p);
    int c = fgetc(f);
    fseek(f, -1, SEEK_END);
    fputc(c ^ 0x5a, f);
    fclose(f);
}

/* Replace the first occurrence of `from` by `to` in a text file. */
static void edit_file(const char *p, const char *from, const char *to) {
    FILE *f = fopen(p, "rb");
    if (!f) die("open %s", p);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *at = strstr(buf, from);
    if (!at) die("'%s' not in %s", from, p);
    char out[9000];
    snprintf(out, sizeof out, "%.*s%s%s", (int)(at - buf), buf, to, at + strlen(from));
    write_text(p, out);
}

/* ---- K_CALL rows: API misuse ---------------------------------------------------- */

static float fa[64], fb[64];

static int api_finalize_before_init(void) { return R(dt_finalize()); }
static int api_coll_before_init(void) { return R(dt_allreduce(fa, fb, 4, DT_F32, DT_SUM, dt_comm_world())); }
static int api_rank_list_before_init(void) {
    dt_comm *c;
    return R(dt_comm_from_rank_list_str("[[0]]", &c));
}
static int api_double_init(void) {
    if (dt_init()) return R(-100);
    int rc = R(dt_init());
    dt_finalize();
    return rc;
}
static int api_double_finalize(void) {
    if (dt_init() || dt_finalize()) return R(-100);
    return R(dt_finalize());
}
static int api_after_finalize(void) {
    if (dt_init() || dt_finalize()) return R(-100);
    dt_comm *c;
    return R(dt_comm_from_rank_list_str("[[0]]", &c));
}
static int api_barrier_after_finalize(void) {
    if (dt_init() || dt_finalize()) return R(-100);
    return R(dt_barrier(dt_comm_world()));
}
static int api_bad_backend(void) {
    setenv("DTRAIN_BACKEND", "nccl2", 1);
    int rc = R(dt_init());
    unsetenv("DTRAIN_BACKEND");
    if (rc == DT_OK) dt_finalize();
    return rc;
}

/* Rows that need an initialised runtime: run `body` between dt_init and dt_finalize. */
#define WITH_WORLD(name, expr)                               \
    static int name(void) {                                  \
        if (dt_init()) return R(-100);                       \
        dt_comm *w = dt_comm_world();                        \
        (void)w;                                             \
        int rc_ = R(expr);                                   \
        dt_finalize();                                       \
        return rc_;                                          \
    }

WITH_WORLD(api_null_comm, dt_allreduce(fa, fb, 4, DT_F32, DT_SUM, NULL))
WITH_WORLD(api_null_sendbuf, dt_allreduce(NULL, fb, 4, DT_F32, DT_SUM, w))
WITH_WORLD(api_null_recvbuf, dt_allgather(fa, NULL, 4, DT_F32, w))
WITH_WORLD(api_count_overflow, dt_allreduce(fa, fb, SIZE_MAX / 2, DT_F32, DT_SUM, w))
WITH_WORLD(api_bad_dtype, dt_allreduce(fa, fb, 4, (dt_dtype)42, DT_SUM, w))
WITH_WORLD(api_bad_op, dt_allreduce(fa, fb, 4, DT_F32, (dt_op)9, w))
WITH_WORLD(api_root_outside, dt_broadcast(fa, fb, 4, DT_F32, 3, w))
WITH_WORLD(api_root_negative, dt_reduce(fa, fb, 4, DT_F32, DT_SUM, -1, w))
WITH_WORLD(api_send_to_self, dt_send(fa, 4, DT_F32, 0, w))
WITH_WORLD(api_async_null_work, dt_allreduce_async(fa, fb, 4, DT_F32, DT_SUM, w, NULL))
WITH_WORLD(api_list_negative, dt_allreduce_list(NULL, NULL, -1, DT_SUM, w))
WITH_WORLD(api_list_null, dt_allreduce_list(NULL, NULL, 2, DT_SUM, w))
WITH_WORLD(api_wire_int, dt_allreduce_ex(fa, fb, 4, DT_I32, DT_SUM, w, &(dt_coll_opts){.wire = DT_WIRE_BF16}, NULL))
WITH_WORLD(api_wire_bad, dt_reduce_scatter_ex(fa, fb, 4, DT_F32, DT_SUM, w, &(dt_coll_opts){.wire = (dt_wire)5}, NULL))
WITH_WORLD(api_overlap, dt_allreduce(fa, fa + 1, 4, DT_F32, DT_SUM, w))

static int api_list_dtype_mismatch(void) {
    if (dt_init()) return R(-100);
    dt_tensor in[1] = {{fa, 4, DT_F32}}, out[1] = {{fb, 4, DT_F64}};
    int rc = R(dt_allreduce_list(in, out, 1, DT_SUM, dt_comm_world()));
    dt_finalize();
    return rc;
}
static int api_list_count_mismatch(void) {
    if (dt_init()) return R(-100);
    dt_tensor in[1] = {{fa, 4, DT_F32}}, out[1] = {{fb, 3, DT_F32}};
    int rc = R(dt_allreduce_list(in, out, 1, DT_SUM, dt_comm_world()));
    dt_finalize();
    return rc;
}

WITH_WORLD(api_release_world, dt_comm_release(w))
static int api_release_twice(void) {
    if (dt_init()) return R(-100);
    dt_comm *c = NULL;
    int rc = dt_comm_from_rank_list_str("[[0]]", &c);
    if (!rc) rc = dt_comm_release(c);
    rc = rc ? R(rc) : R(dt_comm_release(c));
    dt_finalize();
    return rc;
}

/* the fused byte size of one huge tensor overflows (ASan found this unchecked once) */
static int api_list_overflow(void) {
    if (dt_init()) return R(-100);
    dt_tensor in[2] = {{fa, SIZE_MAX / 2, DT_F32}, {fa + 4, 2, DT_I32}};
    dt_tensor out[2] = {{fb, SIZE_MAX / 2, DT_F32}, {fb + 4, 2, DT_I32}};
    int rc = R(dt_allreduce_list(in, out, 2, DT_SUM, dt_comm_world()));
    dt_finalize();
    return rc;
}

static int rank_list(const char *text) {
    if (dt_init()) return R(-100);
    dt_comm *c = NULL;
    int rc = R(dt_comm_from_rank_list_str(text, &c));
    dt_finalize();
    return rc;
}
static int api_rank_list_syntax(void) { return rank_list("[[0,1]"); }
static int api_rank_list_outside(void) { return rank_list("[[5]]"); }
static int api_rank_list_duplicate(void) { return rank_list("[[0],[0]]"); }
static int api_rank_list_empty_group(void) { return rank_list("[[0],[]]"); }
static int api_rank_list_no_group(void) { return rank_list("[]"); }
static int api_rank_list_flat_shape(void) {
    if (dt_init()) return R(-100);
    int ranks[2] = {0, 0}, lens[1] = {2};
    dt_comm *c = NULL;
    int rc = R(dt_comm_from_rank_list(ranks, lens, 0, &c));
    dt_finalize();
    return rc;
}

static int api_sampler_drop_last(void) {
    dt_sampler s;
    return R(dt_sampler_init(&s, 1, 2, 0, 1, 1, 0));
}
static int api_sampler_rank(void) {
    dt_sampler s;
    return R(dt_sampler_init(&s, 100, 2, 2, 1, 0, 0));
}
static int api_batch_index(void) {
    uint8_t img[4] = {0}, lbl[1] = {0};
    dt_dataset ds = {1, 2, 2, 1, img, lbl};
    int64_t idx[1] = {1};
    float x[4];
    return R(dt_dataset_batch(&ds, idx, 1, x, NULL, NULL));
}
static int api_config_null(void) { return R(dt_config_set(NULL, "overlap", "1")); }

/* ---- K_CALL rows: models and text data (API) ------------------------------------- */

static int gpt_create(int L, int NH, int C) {
    dt_model_config c;
    dt_model *m = NULL;
    if (dt_model_config_default(&c, "gpt-test")) return R(DT_ERR_INTERNAL);
    c.n_layer = L;
    c.n_head = NH;
    c.n_embd = C;
    int rc = R(dt_model_create(&c, &m));
    dt_model_free(m);
    return rc;
}
static int model_gpt_heads(void) { return gpt_create(2, 5, 64); }
static int model_gpt_layers(void) { return gpt_create(0, 4, 64); }
/* a forward of gpt-test (block_size 64) with T or a token out of range */
static int gpt_forward(int T, int bad_pos) {
    dt_model_config c;
    dt_model *m = NULL;
    if (dt_model_config_default(&c, "gpt-test") || dt_model_create(&c, &m)) return R(DT_ERR_INTERNAL);
    int32_t x[80] = {0}, y[80] = {0};
    if (bad_pos >= 0) x[bad_pos] = 256;
    int rc = R(dt_model_forward_seq(m, x, y, 1, T, 1, NULL));
    dt_model_free(m);
    return rc;
}
static int model_gpt_seq_len(void) { return gpt_forward(65, -1); }
static int model_gpt_token(void) { return gpt_forward(10, 5); }
static int model_recompute_mlp(void) {
    dt_model_config c;
    dt_model *m = NULL;
    if (dt_model_config_default(&c, "mlp")) return R(DT_ERR_INTERNAL);
    c.recompute = 1;
    int rc = R(dt_model_create(&c, &m));
    dt_model_free(m);
    return rc;
}
static int text_load(const char *name, double frac) {
    dt_text_dataset ds;
    int rc = R(dt_text_load(path(name), frac, &ds));
    dt_text_free(&ds);
    return rc;
}
static int text_missing(void) { return text_load("no-such-corpus", 0.1); }
static int text_empty(void) { return text_load("text_empty.txt", 0.1); }
static int text_short(void) { return text_load("text_short.txt", 0.1); }
static int text_fraction(void) { return text_load("text_short.txt", 1.5); }
static int text_block(void) {
    dt_text_dataset ds;
    if (dt_text_load(path("text_100.txt"), 0.1, &ds)) return R(DT_ERR_INTERNAL);
    int32_t x[128], y[128];
    int rc = R(dt_text_batch(&ds, DT_TEXT_VAL, 64, 1, 0, 1, x, y));
    dt_text_free(&ds);
    return rc;
}

/* ---- K_CALL rows: config values (API) --------------------------------------------- */

static int cfg_load(const char *name) {
    dt_config c;
    dt_config_default(&c);
    return R(dt_config_load(&c, path(name)));
}
static int cfg_missing(void) { return cfg_load("no-such-config.json"); }
static int cfg_syntax(void) { return cfg_load("cfg_syntax.json"); }
static int cfg_range(void) { return cfg_load("cfg_range.json"); }
static int cfg_number(void) { return cfg_load("cfg_number.json"); }
static int cfg_bool(void) { return cfg_load("cfg_bool.json"); }
static int cfg_unknown(void) { return cfg_load("cfg_unknown.json"); }
static int cfg_big(void) { return cfg_load("cfg_big.json"); }
static int cfg_int(void) { return cfg_load("cfg_int.json"); }
static int cfg_dup(void) { return cfg_load("cfg_dup.json"); }
static int cfg_dir(void) { return cfg_load("empty_dir"); }
static int cfg_fifo(void) { return cfg_load("fifo"); }
static int cfg_env(void) {
    dt_config c;
    dt_config_default(&c);
    setenv("DTRAIN_BUCKET_SIZE_MB", "lots", 1);
    int rc = R(dt_config_from_env(&c));
    unsetenv("DTRAIN_BUCKET_SIZE_MB");
    return rc;
}

/* ---- K_CALL rows: data files (API) --------------------------------------------------- */

static int idx(const char *img, const char *lbl, int classes) {
    dt_dataset ds;
    int rc = R(dt_idx_load_ex(path(img), path(lbl), classes, &ds));
    if (rc == DT_OK) dt_dataset_free(&ds);
    return rc;
}
static int data_missing(void) { return idx("nope-images", "ok-labels", 0); }
static int data_empty(void) { return idx("empty", "ok-labels", 0); }
static int data_short_header(void) { return idx("short-header", "ok-labels", 0); }
static int data_magic(void) { return idx("ok-labels", "ok-labels", 0); }
static int data_truncated(void) { return idx("trunc-images", "ok-labels", 0); }
static int data_trailing(void) { return idx("trailing-images", "ok-labels", 0); }
static int data_count(void) { return idx("ok-images", "short-labels", 0); }
static int data_dims(void) { return idx("zero-rows", "ok-labels", 0); }
static int data_huge(void) { return idx("huge-dims", "huge-labels", 0); }
static int data_label(void) { return idx("ok-images", "bad-label", 10); }
static int data_gzip(void) { return idx("corrupt.gz", "ok-labels", 0); }
static int data_classes(void) { return idx("ok-images", "ok-labels", 300); }
static int data_null(void) {
    dt_dataset ds;
    return R(dt_idx_load(NULL, path("ok-labels"), &ds));
}
static int data_fm_size(void) {
    dt_dataset ds;
    int rc = R(dt_fashion_mnist_load(path("fm_small"), 1, &ds));
    if (rc == DT_OK) dt_dataset_free(&ds);
    return rc;
}

/* ---- K_CALL rows: checkpoints ------------------------------------------------------- */

static int ck_load(const char *dir, int verify) {
    dt_ckpt_manifest *m = NULL;
    int rc = R(dt_ckpt_load_manifest(dir, &m));
    if (rc == DT_OK && verify) rc = R(dt_ckpt_verify(NULL, m));
    dt_ckpt_manifest_free(m);
    return rc;
}
static int ck_missing(void) { return ck_load(path("no-such-ckpt"), 0); }
static int ck_manifest_truncated(void) {
    const char *d = make_ckpt("ck_trunc_manifest");
    char p[600];
    snprintf(p, sizeof p, "%s/manifest.json", d);
    truncate_file(p, 40);
    return ck_load(d, 0);
}
static int ck_rank_truncated(void) {
    const char *d = make_ckpt("ck_trunc_rank");
    char p[600];
    snprintf(p, sizeof p, "%s/rank-00000.g1.bin", d);
    truncate_file(p, 4);
    return ck_load(d, 1);
}
static int ck_checksum(void) {
    const char *d = make_ckpt("ck_crc");
    char p[600];
    snprintf(p, sizeof p, "%s/rank-00000.g1.bin", d);
    flip_last_byte(p);
    return ck_load(d, 1);
}
static int ck_version(void) {
    const char *d = make_ckpt("ck_version");
    char p[600];
    snprintf(p, sizeof p, "%s/manifest.json", d);
    edit_file(p, "\"format_version\": 2", "\"format_version\": 3");
    return ck_load(d, 0);
}
static int ck_rank_missing(void) {
    const char *d = make_ckpt("ck_norank");
    char p[600];
    snprintf(p, sizeof p, "%s/rank-00000.g1.bin", d);
    unlink(p);
    return ck_load(d, 1);
}
static int ck_range(void) {
    const char *d = make_ckpt("ck_range");
    dt_ckpt_manifest *m = NULL;
    int rc = R(dt_ckpt_load_manifest(d, &m));
    float x[8];
    if (rc == DT_OK) rc = R(dt_ckpt_read_range(NULL, m, "params", 4, 8, x));
    dt_ckpt_manifest_free(m);
    return rc;
}
static int ck_vector(void) {
    const char *d = make_ckpt("ck_vector");
    dt_ckpt_manifest *m = NULL;
    int rc = R(dt_ckpt_load_manifest(d, &m));
    float x[8];
    if (rc == DT_OK) rc = R(dt_ckpt_read_range(NULL, m, "exp_avg", 0, 8, x));
    dt_ckpt_manifest_free(m);
    return rc;
}

static int ck_dir_foreign(void) { return R(dt_ckpt_prepare(path("user_dir"), NULL)); }
static int ck_dir_file(void) { return R(dt_ckpt_prepare(path("a_file"), NULL)); }
static int ck_dir_manifest(void) { return R(dt_ckpt_prepare(path("foreign_manifest"), NULL)); }
static int ck_stale_generation(void) {
    const char *d = make_ckpt("ck_stale");
    float x[8] = {0};
    dt_ckpt_range rg = {"params", 0, 8, x};
    dt_ckpt_vector v = {"params", 8};
    dt_ckpt_manifest m;
    memset(&m, 0, sizeof m);
    m.world_size = 1;
    m.num_params = 8;
    m.nvectors = 1;
    m.vectors = &v;
    m.generation = 1; /* make_ckpt committed generation 1 already */
    if (dt_ckpt_write_shard(d, 1, 0, &(dt_ckpt_shard){1, &rg}, NULL)) return R(-100);
    return R(dt_ckpt_commit(d, &m));
}

static int st_target_fifo(void) { return R(dt_st_writer_check(path("fifo"))); }
static int st_target_dir(void) { return R(dt_st_writer_check(path("empty_dir"))); }

/* ---- the table ------------------------------------------------------------------------ */

enum { K_CALL, K_PROC };
#define MAXARG 24

typedef struct row {
    const char *id;
    const char *area;
    const char *input;   /* what is wrong, for the docs */
    int kind;
    int (*fn)(void);     /* K_CALL */
    const char *argv[MAXARG]; /* K_PROC: "$T" = dtrain-train, "$B" = dtrain-bench, "$F" = tests/fault's fault_prog,
                               * "$MPI" = mpiexec, "@x" = temp dir/x */
    const char *env;     /* K_PROC: "NAME=VALUE" added to the environment, or NULL */
    int want;            /* K_CALL: status; K_PROC: exit code */
    const char *msg;     /* substring of dt_last_error() / of the output */
    int ranks;           /* K_PROC under mpiexec: every rank 0..ranks-1 prints msg */
    const char *todo;    /* what to do */
} row;

#define CALL(id, area, input, fn, want, msg, todo) {id, area, input, K_CALL, fn, {NULL}, NULL, want, msg, 0, todo}
#define TRAIN(id, input, want, msg, todo, ...) \
    {id, want == 2 ? "trainer flags" : "data files", input, K_PROC, NULL, {"$T", __VA_ARGS__, NULL}, NULL, want, msg, 0, todo}

/* flags that keep trainer runs short */
#define QUICK "--epochs", "1", "--max-steps", "1", "--quiet"

static const row g_rows[] = {
    /* API misuse */
    CALL("api-finalize-before-init", "API", "dt_finalize() before dt_init()", api_finalize_before_init, DT_ERR_STATE,
         "dtrain is not initialised (dt_finalize without dt_init, or called twice)", "call dt_init() first; pair each dt_init with one dt_finalize"),
    CALL("api-coll-before-init", "API", "dt_allreduce on dt_comm_world() before dt_init()",
         api_coll_before_init, DT_ERR_STATE, "dtrain is not initialised (call dt_init first", "call dt_init() before any collective"),
    CALL("api-rank-list-before-init", "API", "dt_comm_from_rank_list_str before dt_init()", api_rank_list_before_init,
         DT_ERR_STATE, "dtrain is not initialised (call dt_init first", "call dt_init() first"),
    CALL("api-double-init", "API", "dt_init() twice", api_double_init, DT_ERR_STATE, "already initialised (dt_init called twice)",
         "initialise once per process"),
    CALL("api-double-finalize", "API", "dt_finalize() twice", api_double_finalize, DT_ERR_STATE, "not initialised",
         "finalise once; dt_is_initialized() tells the state"),
    CALL("api-after-finalize", "API", "sub-communicator requested after dt_finalize()", api_after_finalize, DT_ERR_STATE,
         "not after dt_finalize", "communicators are valid only between dt_init and dt_finalize"),
    CALL("api-barrier-after-finalize", "API", "dt_barrier(dt_comm_world()) after dt_finalize()",
         api_barrier_after_finalize, DT_ERR_STATE, "not after dt_finalize", "do not use the runtime after dt_finalize"),
    CALL("api-bad-backend", "API", "DTRAIN_BACKEND=nccl2", api_bad_backend, DT_ERR_UNSUPPORTED, "DTRAIN_BACKEND='nccl2'",
         "use DTRAIN_BACKEND=auto, mpi or void"),
    CALL("api-release-world", "API", "dt_comm_release(dt_comm_world())", api_release_world, DT_ERR_INVALID,
         "the world communicator cannot be released", "release only communicators from dt_comm_from_rank_list*; dt_finalize frees the world"),
    CALL("api-release-twice", "API", "dt_comm_release twice on one communicator", api_release_twice, DT_ERR_INVALID,
         "is not one of the pool's sub-communicators (released already",
         "release once; get it again from dt_comm_from_rank_list* (a new communicator)"),
    CALL("api-null-comm", "API", "collective with comm NULL", api_null_comm, DT_ERR_INVALID, "communicator is NULL",
         "pass dt_comm_world() or a communicator from dt_comm_from_rank_list*"),
    CALL("api-null-sendbuf", "API", "dt_allreduce with sendbuf NULL and count 4", api_null_sendbuf, DT_ERR_INVALID,
         "sendbuf is NULL", "pass a buffer (NULL is allowed only with count 0)"),
    CALL("api-null-recvbuf", "API", "dt_allgather with recvbuf NULL", api_null_recvbuf, DT_ERR_INVALID,
         "recvbuf is NULL", "pass an output buffer of count x group size elements"),
    CALL("api-count-overflow", "API", "count SIZE_MAX/2 (byte size overflows)", api_count_overflow, DT_ERR_INVALID,
         "overflows the address space", "counts are elements, not bytes; check the size computation"),
    CALL("api-bad-dtype", "API", "dtype 42", api_bad_dtype, DT_ERR_INVALID, "unknown dtype 42",
         "use a dt_dtype constant (DT_F32 ... DT_I64)"),
    CALL("api-bad-op", "API", "reduction op 9", api_bad_op, DT_ERR_INVALID, "unknown reduction op 9", "use DT_SUM, DT_PROD, DT_MIN, DT_MAX or DT_AVG"),
    CALL("api-root-outside", "API", "dt_broadcast root 3 in a world of 1", api_root_outside, DT_ERR_INVALID, "root 3 is out of range: world ranks are 0..0",
         "roots are world ranks that belong to the communicator"),
    CALL("api-root-negative", "API", "dt_reduce root -1", api_root_negative, DT_ERR_INVALID, "root -1 is out of range",
         "roots are world ranks >= 0"),
    CALL("api-send-to-self", "API", "dt_send to the calling rank", api_send_to_self, DT_ERR_INVALID,
         "is the calling rank itself", "send to another rank (use a copy for yourself)"),
    CALL("api-async-null-work", "API", "dt_allreduce_async with work NULL", api_async_null_work, DT_ERR_INVALID,
         "work is NULL", "pass a dt_work* to receive the handle, then dt_work_wait/dt_work_free it"),
    CALL("api-list-negative", "API", "dt_allreduce_list with n = -1", api_list_negative, DT_ERR_INVALID,
         "list length -1 is negative", "pass the number of tensors"),
    CALL("api-list-null", "API", "dt_allreduce_list with NULL lists and n = 2", api_list_null, DT_ERR_INVALID,
         "list is NULL but its length is 2", "pass the input and output tensor arrays"),
    CALL("api-wire-int", "API", "dt_allreduce_ex of i32 with a bf16 wire", api_wire_int, DT_ERR_INVALID,
         "a bf16 wire carries f32, f16 or bf16 data, not i32", "compress floating-point data only (DT_WIRE_NATIVE for integers)"),
    CALL("api-wire-bad", "API", "dt_reduce_scatter_ex with wire 5", api_wire_bad, DT_ERR_INVALID, "unknown wire type 5",
         "use DT_WIRE_NATIVE, DT_WIRE_BF16 or DT_WIRE_F16"),
    CALL("api-overlap", "API", "dt_allreduce with recvbuf = sendbuf + 1 element", api_overlap, DT_ERR_INVALID,
         "overlap but the call is not in place", "pass the same buffer (in place) or buffers apart"),
    CALL("api-list-dtype", "API", "list tensor 0: input f32, output f64", api_list_dtype_mismatch, DT_ERR_INVALID,
         "input dtype f32 differs from output dtype f64", "input and output tensors must have the same dtype"),
    CALL("api-list-count", "API", "list tensor 0: input 4 elements, output 3", api_list_count_mismatch, DT_ERR_INVALID,
         "output count 3, expected 4", "allreduce outputs have the input's count"),
    CALL("api-list-overflow", "API", "dt_allreduce_list with a tensor of SIZE_MAX/2 f32 elements", api_list_overflow,
         DT_ERR_INVALID, "overflows the address space", "counts are elements, not bytes; check the size computation"),
    CALL("api-rank-list-syntax", "API", "rank_list \"[[0,1]\"", api_rank_list_syntax, DT_ERR_INVALID, "expected ',' or ']' after group 0 at offset 6",
         "write the groups as [[0,1],[2,3]]"),
    CALL("api-rank-list-outside", "API", "rank_list [[5]] in a world of 1", api_rank_list_outside, DT_ERR_INVALID,
         "rank 5 in group 0 is out of range [0, 1)", "list only ranks in [0, world size)"),
    CALL("api-rank-list-duplicate", "API", "rank_list [[0],[0]] (rank twice)", api_rank_list_duplicate, DT_ERR_INVALID,
         "so a rank is listed twice or out of range", "groups must be disjoint"),
    CALL("api-rank-list-empty-group", "API", "rank_list [[0],[]] (empty group)", api_rank_list_empty_group,
         DT_ERR_INVALID, "group 1 is empty", "every group needs at least one rank"),
    CALL("api-rank-list-no-group", "API", "rank_list [] (no group)", api_rank_list_no_group, DT_ERR_INVALID, "ngroups is 0 (need at least one group)",
         "give at least one group"),
    CALL("api-rank-list-shape", "API", "dt_comm_from_rank_list with ngroups 0", api_rank_list_flat_shape, DT_ERR_INVALID,
         "ngroups is 0 (need at least one group)", "ngroups >= 1 and group_lens[] summing to the length of ranks[]"),
    CALL("api-sampler-drop-last", "API", "sampler: 1 sample, 2 replicas, drop_last", api_sampler_drop_last,
         DT_ERR_INVALID, "every rank would get 0 samples", "use fewer ranks, more data or drop_last 0"),
    CALL("api-sampler-rank", "API", "sampler: rank 2 of 2 replicas", api_sampler_rank, DT_ERR_INVALID, "rank=2 is outside [0, num_replicas=2)",
         "rank must be in [0, num_replicas)"),
    CALL("api-batch-index", "API", "dt_dataset_batch index 1 of a 1-sample dataset", api_batch_index, DT_ERR_INVALID,
         "indices[0]=1 is out of range [0, 1)", "indices must be in [0, count)"),
    CALL("api-config-null", "API", "dt_config_set(NULL, ...)", api_config_null, DT_ERR_INVALID, "NULL argument",
         "pass a dt_config initialised by dt_config_default"),

    /* config file values */
    CALL("cfg-missing", "config file", "config file does not exist", cfg_missing, DT_ERR_IO, "cannot open config file",
         "check the --config path"),
    CALL("cfg-syntax", "config file", "{\"overlap\": true \"sync_bn\": 1} (missing comma)", cfg_syntax, DT_ERR_INVALID,
         "cfg_syntax.json': dt_config_parse_json: config JSON: line 1, column 26: '}' expected near '\"sync_bn\"'",
         "fix the JSON at that line and column (flat object of key: value)"),
    CALL("cfg-duplicate", "config file", "{\"zero_opt_level\": 1,\\n \"zero_opt_level\": 2} (a key twice)", cfg_dup,
         DT_ERR_INVALID, "line 2, column 17: duplicate object key near '\"zero_opt_level\"'",
         "give each key once (JSON objects have unique keys)"),
    CALL("cfg-range", "config file", "{\"zero_opt_level\": 7}", cfg_range, DT_ERR_INVALID, "7 is out of range [0, 3]",
         "zero_opt_level is 0, 1, 2 or 3"),
    CALL("cfg-number", "config file", "{\"bucket_size_mb\": \"big\"}", cfg_number, DT_ERR_INVALID,
         "'big' is not a number", "give a number of MiB"),
    CALL("cfg-bool", "config file", "{\"overlap\": \"maybe\"}", cfg_bool, DT_ERR_INVALID, "is not a boolean",
         "use true/false, 1/0, yes/no, on/off"),
    CALL("cfg-unknown", "config file", "{\"bucket_size\": 4} (misspelt key)", cfg_unknown, DT_ERR_INVALID,
         "unknown config key 'bucket_size'", "see the key list in docs/configuration.md / config.h"),
    CALL("cfg-int", "config file", "{\"zero_opt_level\": 1.5}", cfg_int, DT_ERR_INVALID, "is not an integer",
         "give an integer"),
    CALL("cfg-big", "config file", "config file over 8 KiB", cfg_big, DT_ERR_IO, "larger than",
         "the config is a small flat object; remove the rest"),
    CALL("cfg-dir", "config file", "a directory given as the config file", cfg_dir, DT_ERR_IO,
         "is a directory, not a config file", "give the JSON file's path"),
    CALL("cfg-fifo", "config file", "a FIFO given as the config file (nothing writes to it)", cfg_fifo, DT_ERR_IO,
         "is a FIFO, not a regular file", "give a JSON file (a FIFO or pipe would be waited on forever)"),
    CALL("cfg-env", "config file", "DTRAIN_BUCKET_SIZE_MB=lots", cfg_env, DT_ERR_INVALID,
         "environment variable DTRAIN_BUCKET_SIZE_MB", "fix or unset the variable"),

    /* data files (API) */
    CALL("data-missing", "data files", "image file missing", data_missing, DT_ERR_IO, "cannot open",
         "check the path / install dataset-fashion-mnist"),
    CALL("data-empty", "data files", "image file empty", data_empty, DT_ERR_IO, "truncated header",
         "re-download the file"),
    CALL("data-short-header", "data files", "image file of 10 bytes (header cut)", data_short_header, DT_ERR_IO,
         "truncated header", "re-download the file"),
    CALL("data-magic", "data files", "a label file given as the image file", data_magic, DT_ERR_IO,
         "this looks like an IDX label file", "swap the image and label paths"),
    CALL("data-truncated", "data files", "image data 5 bytes short", data_truncated, DT_ERR_IO,
         "truncated file: expected", "re-download the file (incomplete copy)"),
    CALL("data-trailing", "data files", "image file with 3 extra bytes", data_trailing, DT_ERR_IO,
         "unexpected trailing data", "the header's count is wrong or files were concatenated"),
    CALL("data-count", "data files", "5 images, 4 labels", data_count, DT_ERR_IO, "count mismatch",
         "use image and label files of the same set"),
    CALL("data-dims", "data files", "image header rows = 0", data_dims, DT_ERR_IO, "absurd image dimensions",
         "the header is corrupt: re-download"),
    CALL("data-huge", "data files", "headers announce 2^31-1 images of 16384 x 16384, no data", data_huge, DT_ERR_IO,
         "truncated file: expected 576460752034988032 bytes of image data, got 0", "the header is corrupt: re-download"),
    CALL("data-label", "data files", "label 12 with 10 classes declared", data_label, DT_ERR_IO,
         "label 12 of sample 4 is out of range for 10 classes", "labels must be < num_classes"),
    CALL("data-gzip", "data files", "corrupt .gz stream", data_gzip, DT_ERR_IO, "corrupt or unreadable file",
         "re-download or gunzip -t the file"),
    CALL("data-classes", "data files", "dt_idx_load_ex num_classes 300", data_classes, DT_ERR_INVALID,
         "num_classes=300", "num_classes in [1, 256], or 0 to compute it"),
    CALL("data-null", "data files", "dt_idx_load(NULL, ...)", data_null, DT_ERR_INVALID, "images_path, labels_path or out is NULL", "pass both paths"),
    CALL("data-fm-size", "data files", "Fashion-MNIST dir with 14 x 14 images", data_fm_size, DT_ERR_IO,
         "must be 28 x 28", "point --data at Fashion-MNIST (28 x 28)"),

    /* checkpoints */
    CALL("ckpt-missing", "checkpoint", "checkpoint directory missing", ck_missing, DT_ERR_IO, "no checkpoint: directory does not exist",
         "check the path (a crashed save never removes the last committed checkpoint)"),
    CALL("ckpt-manifest-truncated", "checkpoint", "manifest.json cut by 40 bytes", ck_manifest_truncated, DT_ERR_IO,
         "ck_trunc_manifest/manifest.json: manifest JSON syntax error at line ", "the checkpoint is damaged: use an older one"),
    CALL("ckpt-rank-truncated", "checkpoint", "rank-00000.g1.bin cut by 4 bytes", ck_rank_truncated, DT_ERR_IO,
         "rank-00000.g1.bin: truncated", "the checkpoint is damaged (disk full?): use an older one"),
    CALL("ckpt-checksum", "checkpoint", "rank-00000.g1.bin with one byte changed", ck_checksum, DT_ERR_IO, "checksum mismatch",
         "the file is corrupt: use an older checkpoint"),
    CALL("ckpt-rank-missing", "checkpoint", "rank-00000.g1.bin deleted", ck_rank_missing, DT_ERR_IO, "missing rank file",
         "copy every rank-*.bin named in manifest.json with it"),
    CALL("ckpt-version", "checkpoint", "manifest format_version 3", ck_version, DT_ERR_UNSUPPORTED,
         "format version 3 not supported (this build reads 1 and 2)", "load it with the dtrain version that wrote it"),
    CALL("ckpt-range", "checkpoint", "read elements [4, 12) of an 8-element vector", ck_range, DT_ERR_INVALID,
         "outside state vector 'params' (length 8)", "the model does not match the checkpoint (sizes differ)"),
    CALL("ckpt-vector", "checkpoint", "read vector 'exp_avg' from a checkpoint without it", ck_vector, DT_ERR_INVALID,
         "no state vector 'exp_avg' in the checkpoint", "the optimizer differs from the one that wrote the checkpoint"),
    CALL("st-target-fifo", "checkpoint", "dt_st_writer_check / dt_st_writer_open on a FIFO", st_target_fifo,
         DT_ERR_INVALID, "is a FIFO", "write models to regular files; a special file is never replaced"),
    CALL("st-target-dir", "checkpoint", "dt_st_writer_check on a directory", st_target_dir, DT_ERR_INVALID,
         "is a directory", "give a file path inside the directory"),
    CALL("ckpt-dir-foreign", "checkpoint", "dt_ckpt_prepare on a directory holding a user's file (thesis.txt)",
         ck_dir_foreign, DT_ERR_INVALID, "directory is not empty and holds no dtrain checkpoint (it contains 'thesis.txt')",
         "give a new or empty directory, or one of dtrain's checkpoints; nothing was written or removed"),
    CALL("ckpt-dir-file", "checkpoint", "dt_ckpt_prepare on a regular file", ck_dir_file, DT_ERR_INVALID,
         "exists and is not a directory", "give a directory path; the file was left where it was"),
    CALL("ckpt-dir-manifest", "checkpoint", "dt_ckpt_prepare on a directory whose manifest.json is not dtrain's",
         ck_dir_manifest, DT_ERR_INVALID, "is not a readable dtrain checkpoint manifest",
         "dtrain does not overwrite what it cannot identify as its own: choose another directory"),
    CALL("ckpt-stale-generation", "checkpoint", "dt_ckpt_commit of a generation the directory already holds",
         ck_stale_generation, DT_ERR_STATE, "already holds generation 1",
         "two jobs are saving into one directory: give each its own; call dt_ckpt_prepare for every save"),

    /* trainer flags: exit code 2, message and usage on stderr */
    TRAIN("flag-epochs", "--epochs zero", 2, "flag --epochs: 'zero' is not an integer in [1, 100000]", "give a number", "--epochs", "zero"),
    TRAIN("flag-epochs-0", "--epochs 0", 2, "flag --epochs: '0' is not an integer in [1, 100000]", "at least 1 epoch",
          "--epochs", "0"),
    TRAIN("flag-model", "--model resnet", 2, "flag --model: 'resnet' is not one of the accepted values",
          "use mlp, lenet or cnn", "--model", "resnet"),
    TRAIN("flag-lr", "--lr -1", 2, "flag --lr: '-1' is not a number in [0, 100]", "use a positive learning rate",
          "--lr", "-1"),
    TRAIN("flag-lr-nan", "--lr nan", 2, "flag --lr: 'nan' is not a number", "use a finite learning rate", "--lr", "nan"),
    TRAIN("flag-unknown", "--bogus 1", 2, "unknown flag '--bogus'", "see dtrain-train --help", "--bogus", "1"),
    TRAIN("flag-missing-value", "--batch-size (no value)", 2, "flag --batch-size needs a value", "give a value",
          "--batch-size"),
    TRAIN("flag-positional", "lenet (no --)", 2, "unexpected argument 'lenet'", "flags are --name value", "lenet"),
    TRAIN("flag-optimizer", "--optimizer adagrad", 2, "flag --optimizer: 'adagrad' is not one of the accepted values", "use sgd, adam or adamw",
          "--optimizer", "adagrad"),
    TRAIN("flag-momentum", "--momentum 1", 2, "flag --momentum: '1' is not a number in [0, 0.999999]",
          "momentum must be < 1", "--momentum", "1"),
    TRAIN("flag-threads", "--threads 0", 2, "flag --threads: '0' is not an integer in [1, 1024]", "at least 1 thread", "--threads", "0"),
    TRAIN("flag-dp-threads", "--dp-threads 0", 2, "flag --dp-threads: '0' is not an integer in [1, 1024]",
          "at least 1 thread (1: no data-parallel threads)", "--dp-threads", "0"),
    TRAIN("flag-dp-threads-batch", "--dp-threads 5 --batch-size 4", 2, "--dp-threads 5 is more than --batch-size 4",
          "at most one thread per sample of a rank's batch (an uneven split is fine)", "--model", "mlp",
          "--dp-threads", "5", "--batch-size", "4", QUICK),
    TRAIN("flag-dp-threads-blas", "--dp-threads 2 --threads 2", 2, "--threads 2 with --dp-threads 2: BLAS runs "
          "single-threaded", "leave --threads at 1 with --dp-threads", "--model", "mlp", "--dp-threads", "2",
          "--threads", "2", QUICK),
    TRAIN("flag-dp-threads-zero", "--dp-threads 2 --zero 1", 2, "--dp-threads 2 with zero_opt_level 1",
          "ZeRO with threads is not supported: use --zero 0 (DDP across ranks)", "--model", "mlp", "--dp-threads",
          "2", "--zero", "1", QUICK),
    TRAIN("flag-data-empty", "--data \"\"", 2, "flag --data: path is empty", "give a directory", "--data", ""),
    TRAIN("flag-zero", "--zero 7", 2, "flag --zero: dt_config_set: config key 'zero_opt_level': 7 is out of range [0, 3]",
          "ZeRO stage 0..3", "--zero", "7"),
    TRAIN("flag-sync-bn", "--sync-bn maybe", 2, "flag --sync-bn: dt_config_set: config key 'sync_bn': 'maybe' is not a boolean",
          "use 0/1", "--sync-bn", "maybe"),
    TRAIN("flag-grad-comm-dtype", "--grad-comm-dtype fp8", 2,
          "flag --grad-comm-dtype: dt_config_set: config key 'grad_comm_dtype': 'fp8' is not one of f32, bf16, f16",
          "use f32, bf16 or f16", "--grad-comm-dtype", "fp8"),
    {"flag-env-grad-comm", "trainer flags", "DTRAIN_GRAD_COMM_DTYPE=half in the environment", K_PROC, NULL,
     {"$T", QUICK, NULL}, "DTRAIN_GRAD_COMM_DTYPE=half", 2, "environment variable DTRAIN_GRAD_COMM_DTYPE", 0,
     "use f32, bf16 or f16 (or unset it)"},
    TRAIN("flag-train-limit", "--train-limit -5", 2, "flag --train-limit: '-5' is not an integer", "0 (all) or a positive count",
          "--train-limit", "-5"),
    TRAIN("flag-config-missing", "--config /nonexistent.json", 2, "cannot open config file '/nonexistent.json'",
          "check the path", "--config", "/nonexistent.json"),
    TRAIN("flag-config-bad", "--config FILE with zero_opt_level 7", 2, "7 is out of range [0, 3]",
          "fix the config file", "--config", "@cfg_range.json"),
    {"flag-env", "trainer flags", "DTRAIN_ZERO_OPT_LEVEL=9 in the environment", K_PROC, NULL, {"$T", QUICK, NULL},
     "DTRAIN_ZERO_OPT_LEVEL=9", 2, "environment variable DTRAIN_ZERO_OPT_LEVEL", 0, "fix or unset the variable"},
    TRAIN("flag-config-dir", "--config DIR (a directory)", 2, "is a directory, not a config file",
          "give the JSON file's path", "--config", "@empty_dir", QUICK),
    TRAIN("flag-config-fifo", "--config FIFO (nothing writes to it)", 2, "is a FIFO, not a regular file",
          "give a JSON file; a FIFO would be waited on forever", "--config", "@fifo", QUICK),
    TRAIN("flag-dump-config-full", "--dump-config /dev/full (a full disk)", 2,
          "error writing config file '/dev/full': No space left on device", "free space, or write it elsewhere",
          "--dump-config", "/dev/full", QUICK),
    TRAIN("flag-dump-config-fifo", "--dump-config FIFO (nothing reads it)", 2,
          "it is a FIFO that no process reads", "write it to a file; a FIFO nobody reads would be waited on forever",
          "--dump-config", "@fifo", QUICK),
    {"flag-env-shm", "trainer flags", "DTRAIN_SHM_MIN_BYTES=lots in the environment", K_PROC, NULL, {"$T", QUICK, NULL},
     "DTRAIN_SHM_MIN_BYTES=lots", 2, "DTRAIN_SHM_MIN_BYTES='lots' is not a number", 0, "fix or unset the variable"},
    {"flag-env-check", "trainer flags", "DTRAIN_CHECK_COLLECTIVES=maybe in the environment", K_PROC, NULL,
     {"$T", QUICK, NULL}, "DTRAIN_CHECK_COLLECTIVES=maybe", 2, "DTRAIN_CHECK_COLLECTIVES='maybe' is not a boolean", 0,
     "use 1/0 (true/false, yes/no, on/off)"},
    {"flag-env-two-level", "trainer flags", "DTRAIN_TWO_LEVEL=sometimes in the environment", K_PROC, NULL,
     {"$T", QUICK, NULL}, "DTRAIN_TWO_LEVEL=sometimes", 2, "DTRAIN_TWO_LEVEL='sometimes' is not auto, 1 or 0", 0,
     "use auto, 1 or 0"},
    {"flag-env-backend", "trainer flags", "DTRAIN_BACKEND=bogus", K_PROC, NULL, {"$T", QUICK, NULL},
     "DTRAIN_BACKEND=bogus", 2, "DTRAIN_BACKEND='bogus' is not a backend of this build", 0, "use auto, mpi or void"},
    {"bench-env-shm", "trainer flags", "dtrain-bench with DTRAIN_SHM_CHUNK_BYTES=12", K_PROC, NULL,
     {"$B", "-b", "4K", "-e", "4K", NULL}, "DTRAIN_SHM_CHUNK_BYTES=12", 2, "DTRAIN_SHM_CHUNK_BYTES='12' is not a number",
     0, "fix or unset the variable"},
    TRAIN("flag-adam-momentum", "--optimizer adam --momentum 0.5", 2, "--momentum applies to --optimizer sgd only",
          "drop --momentum (adam and adamw have their own betas)", "--optimizer", "adam", "--momentum", "0.5", QUICK),
    TRAIN("flag-adam-nesterov", "--optimizer adamw --nesterov 1", 2, "--nesterov applies to --optimizer sgd only",
          "drop --nesterov", "--optimizer", "adamw", "--nesterov", "1", QUICK),
    TRAIN("flag-nesterov-no-momentum", "--momentum 0 --nesterov 1", 2, "--nesterov 1 needs a momentum > 0",
          "give --momentum M > 0 or drop --nesterov", "--momentum", "0", "--nesterov", "1", QUICK),
    TRAIN("flag-mlp-sync-bn", "--model mlp --sync-bn 1", 2, "sync_bn: model mlp has no batch norm",
          "drop --sync-bn (DTRAIN_SYNC_BN, the config file's sync_bn)", "--model", "mlp", "--sync-bn", "1", QUICK),
    TRAIN("flag-zero-no-dp", "--zero 3 --enable-data-parallel 0", 2, "zero_opt_level 3 shards over the data-parallel ranks",
          "drop one of them", "--zero", "3", "--enable-data-parallel", "0", QUICK),
    TRAIN("flag-shard-group", "--shard-group node", 2,
          "flag --shard-group: dt_config_set: config key 'shard_group': 'node' is not one of world, host",
          "use world (ZeRO over all ranks) or host (hybrid sharding)", "--shard-group", "node"),
    TRAIN("flag-shard-group-zero0", "--shard-group host without --zero", 2,
          "shard_group host shards ZeRO's state per host: it needs zero_opt_level 1, 2 or 3",
          "give --zero 1, 2 or 3, or drop --shard-group", "--shard-group", "host", QUICK),
    TRAIN("flag-zero-offload-zero0", "--zero-offload 1 without --zero", 2,
          "zero_offload puts ZeRO's shard and optimizer state on the host: it needs zero_opt_level 1, 2 or 3",
          "give --zero 1, 2 or 3, or drop --zero-offload", "--zero-offload", "1", QUICK),
    {"flag-env-shard-group", "trainer flags", "DTRAIN_SHARD_GROUP=rack in the environment", K_PROC, NULL,
     {"$T", QUICK, NULL}, "DTRAIN_SHARD_GROUP=rack", 2,
     "environment variable DTRAIN_SHARD_GROUP: dt_config_set: config key 'shard_group': 'rack' is not one of world, host",
     0, "use world or host, or unset the variable"},
    TRAIN("flag-dropout-lenet", "--model lenet --dropout 0.5", 2, "--dropout: model lenet has no dropout",
          "drop --dropout (the cnn has one)", "--model", "lenet", "--dropout", "0.5", QUICK),
    TRAIN("flag-hidden-lenet", "--model lenet --hidden1 64", 2, "--hidden1: model lenet has no hidden sizes",
          "drop --hidden1/--hidden2 (mlp has them; cnn: --channels1/--channels2)", "--model", "lenet", "--hidden1", "64",
          QUICK),
    TRAIN("flag-min-lr-const", "--min-lr 0.001 with --schedule const", 2, "--min-lr is the floor of --schedule cosine",
          "add --schedule cosine or drop --min-lr", "--min-lr", "0.001", QUICK),
    TRAIN("flag-every-no-dir", "--checkpoint-every 5 without --checkpoint-dir", 2,
          "--checkpoint-every needs --checkpoint-dir", "give --checkpoint-dir DIR", "--checkpoint-every", "5", QUICK),

    /* data files through the trainer: exit code 1, the file named */
    TRAIN("train-data-missing", "--data DIR without the files", 1, "cannot open", "install dataset-fashion-mnist or fix --data",
          "--data", "@empty_dir", QUICK),
    TRAIN("train-data-truncated", "--data DIR with a truncated training image file", 1, "truncated file: expected",
          "re-download the data set", "--data", "@fm_trunc", QUICK),
    TRAIN("train-data-labels", "--data DIR with label 10 in the training labels", 1, "out of range for 10 classes",
          "the label file is not Fashion-MNIST's", "--data", "@fm_label", QUICK),
    TRAIN("train-data-gzip", "--data DIR with a corrupt .gz test image file", 1, "corrupt or unreadable file",
          "re-download the data set", "--data", "@fm_gz", "--epochs", "1", "--max-steps", "1"),

    /* checkpoints through the trainer (fixture: @ck_train written by dtrain-train --checkpoint-dir) */
    TRAIN("train-resume-missing", "--resume DIR that does not exist", 1, "no checkpoint: directory does not exist",
          "check the path given to --resume", "--data", "@fm", "--resume", "@no-such-ckpt", QUICK),
    TRAIN("train-resume-foreign", "--resume DIR written for another model (8 parameters)", 2, "was written for model '(none)', this run uses 'lenet'",
          "resume with the model, optimizer and flags the checkpoint was written with", "--data", "@fm", "--resume",
          "@ckpt_foreign", QUICK),
    TRAIN("train-resume-checksum", "--resume DIR whose rank-00000.g1.bin has a changed byte", 1, "checksum mismatch",
          "the checkpoint is corrupt: resume from an older one", "--data", "@fm", "--resume", "@ck_train_crc", QUICK),
    TRAIN("train-resume-truncated", "--resume DIR whose manifest.json is cut", 1,
          "ck_train_trunc/manifest.json: manifest JSON syntax error at line ",
          "the checkpoint is damaged: resume from an older one", "--data", "@fm", "--resume", "@ck_train_trunc", QUICK),
    /* the GPT on text: input that does not fit the flags is a usage error (exit 2)
     * and nothing is written (the run's --json, --checkpoint-dir and --save-model
     * paths are checked not to exist afterwards) */
    TRAIN("train-gpt-corpus-empty", "--model gpt --data FILE of 0 bytes", 2, "is empty: no bytes in 1 file(s)",
          "give a text file or directory with text in it (a directory's .dat/.u8 files are skipped)", "--model", "gpt",
          "--preset", "gpt-test", "--data", "@text_empty.txt", "--json", "@gpt_out/a.json", "--checkpoint-dir",
          "@gpt_ck_a", "--save-model", "@gpt_out/a.safetensors", QUICK),
    TRAIN("train-gpt-corpus-short", "--model gpt --data FILE of 3 bytes", 2, "is too short",
          "more text: each split (the last 10% is validation) needs a window of block size + 1 bytes", "--model",
          "gpt", "--preset", "gpt-test", "--data", "@text_short.txt", "--json", "@gpt_out/b.json", "--checkpoint-dir",
          "@gpt_ck_b", QUICK),
    TRAIN("train-gpt-block", "--model gpt --block-size 128 over a 100-byte corpus (90 training bytes)", 2,
          "block size T=128 needs T+1 = 129 bytes, the training split has only 90",
          "a smaller --block-size or more text", "--model", "gpt", "--preset", "gpt-test", "--block-size", "128",
          "--data", "@text_100.txt", "--json", "@gpt_out/c.json", "--checkpoint-dir", "@gpt_ck_c", QUICK),
    TRAIN("train-gpt-accum", "--model gpt, an epoch of 8 windows (--train-limit 8) at batch 8 and --accum-steps 2", 2,
          "an epoch has 1 batches per rank, fewer than accum_steps 2",
          "more windows per epoch (--train-limit), a smaller batch or fewer accumulation steps", "--model", "gpt",
          "--preset", "gpt-test", "--data", "@text_4k.txt", "--batch-size", "8", "--train-limit", "8",
          "--accum-steps", "2", "--json", "@gpt_out/d.json", QUICK),
    TRAIN("train-gpt-resume-vocab", "--resume DIR of a gpt whose vocab_size was 50257", 2,
          "was written for vocab_size '50257', this run uses '256'",
          "resume with the sizes the checkpoint was written with (dtrain's text models have 256 tokens)", "--model",
          "gpt", "--preset", "gpt-test", "--data", "@text_4k.txt", "--resume", "@ck_gpt_vocab", "--json",
          "@gpt_out/e.json", QUICK),
    TRAIN("train-gpt-resume-layers", "--resume DIR of a 2-layer gpt with --n-layer 3", 2,
          "was written for n_layer '2', this run uses '3'", "resume with the model sizes the checkpoint was written with",
          "--model", "gpt", "--preset", "gpt-test", "--n-layer", "3", "--data", "@text_4k.txt", "--resume", "@ck_gpt",
          "--save-model", "@gpt_out/f.safetensors", QUICK),
    TRAIN("flag-gpt-heads", "--model gpt --preset gpt-test --n-head 5", 2, "n_embd=64 is not divisible by n_head=5",
          "choose --n-head dividing --n-embd (head size = n_embd / n_head)", "--model", "gpt", "--preset", "gpt-test",
          "--n-head", "5", QUICK),
    TRAIN("flag-gpt-only", "--model mlp --n-layer 4", 2, "flag --n-layer applies to --model gpt only (model mlp)",
          "drop the gpt flags (--preset, --n-layer, --n-head, --n-embd, --block-size, --seq-len, --recompute, --sample-*)",
          "--model", "mlp", "--n-layer", "4", QUICK),
    TRAIN("flag-recompute-lenet", "--model lenet --recompute 1", 2, "flag --recompute applies to --model gpt only",
          "recomputation is for the gpt's blocks", "--model", "lenet", "--recompute", "1", QUICK),
    TRAIN("flag-gpt-hidden", "--model gpt --hidden1 128", 2, "--hidden1: model gpt has no hidden sizes",
          "size a gpt with --n-embd (the MLP is 4 x n_embd wide)", "--model", "gpt", "--hidden1", "128", QUICK),
    TRAIN("flag-gpt-shuffle", "--model gpt --shuffle 0", 2, "gpt trains on random text windows",
          "drop --shuffle / --drop-last (they are the image sampler's)", "--model", "gpt", "--shuffle", "0", QUICK),
    TRAIN("flag-gpt-sync-bn", "--model gpt --sync-bn 1", 2, "sync_bn: model gpt has no batch norm",
          "drop --sync-bn (the gpt uses LayerNorm)", "--model", "gpt", "--sync-bn", "1", QUICK),
    TRAIN("train-resume-unit", "--resume DIR whose epoch position is in an unknown unit ('tokens')", 1,
          "epoch_position_unit 'tokens' (this build knows 'samples')",
          "resume it with the dtrain version that wrote it", "--data", "@fm", "--resume", "@ck_train_unit", QUICK),

    /* output paths through the trainer */
    {"train-ckpt-dir-foreign", "output files", "--checkpoint-dir DIR holding a user's file (thesis.txt), 2 ranks", K_PROC,
     NULL, {"$MPI", "-n", "2", "$T", "--data", "@fm", "--checkpoint-dir", "@user_dir", "--checkpoint-every", "1", QUICK,
            NULL}, NULL, 1,
     "directory is not empty and holds no dtrain checkpoint (it contains 'thesis.txt')", 2,
     "give a new or empty directory, or one of dtrain's checkpoints; nothing in DIR was touched"},
    {"train-save-model-fifo", "output files", "--save-model FIFO (any non-regular file: /dev/null, a terminal)", K_PROC,
     NULL, {"$T", "--data", "@fm", "--save-model", "@fifo", QUICK, NULL}, NULL, 1, "is a FIFO: the model is written to a "
     "temporary file and renamed into place", 0, "give a regular file path; the special file was left as it was"},
    {"train-save-model-dir", "output files", "--save-model DIR (a directory)", K_PROC, NULL,
     {"$T", "--data", "@fm", "--save-model", "@empty_dir", QUICK, NULL}, NULL, 1, "is a directory", 0,
     "give a file path (DIR/model.safetensors)"},
    {"train-save-model-nodir", "output files", "--save-model in a directory that does not exist, 2 ranks", K_PROC, NULL,
     {"$MPI", "-n", "2", "$T", "--data", "@fm", "--save-model", "@nodir/model.safetensors", QUICK, NULL}, NULL, 1,
     "cannot create a file beside it", 2, "create the directory first: the check runs before training"},
    {"train-json-nodir", "output files", "--json in a directory that does not exist", K_PROC, NULL,
     {"$T", "--data", "@fm", "--json", "@nodir/steps.json", QUICK, NULL}, NULL, 1,
     "cannot open JSON output", 0, "create the directory first: the check runs before training"},
    {"train-timeline-nodir", "output files", "--timeline in a directory that does not exist, 2 ranks", K_PROC, NULL,
     {"$MPI", "-n", "2", "$T", "--data", "@fm", "--timeline", "@nodir/trace.json", QUICK, NULL}, NULL, 1,
     "cannot open trace file", 2, "create the directory first: the check runs before training"},
    {"train-json-full", "output files", "--json /dev/full (a full disk)", K_PROC, NULL,
     {"$T", "--data", "@fm", "--json", "/dev/full", QUICK, NULL}, NULL, 1,
     "writing the JSON metrics file '/dev/full' failed: No space left on device", 0,
     "free space or write elsewhere; training went on and the model and checkpoints were saved"},
    {"train-timeline-full", "output files", "--timeline /dev/full (a full disk)", K_PROC, NULL,
     {"$T", "--data", "@fm", "--timeline", "/dev/full", QUICK, NULL}, NULL, 1,
     "error writing trace file '/dev/full': No space left on device", 0,
     "free space or write elsewhere; training went on and the model and checkpoints were saved"},
    {"train-ckpt-dir-file", "output files", "--checkpoint-dir FILE (an existing regular file)", K_PROC, NULL,
     {"$T", "--data", "@fm", "--checkpoint-dir", "@a_file", QUICK, NULL}, NULL, 1, "exists and is not a directory", 0,
     "give a directory path; the file was left where it was"},

    /* launches */
    {"launch-too-few-samples", "launch", "--train-limit 1 at 2 ranks", K_PROC, NULL,
     {"$MPI", "-n", "2", "$T", "--data", "@fm", "--train-limit", "1", QUICK, NULL}, NULL, 1,
     "1 training samples cannot feed 2 ranks", 2, "use at least as many samples as ranks"},
    {"launch-different-flags", "launch", "--lr 0.01 on rank 0, --lr 0.02 on rank 1", K_PROC, NULL,
     {"$MPI", "-n", "2", "sh", "-c",
      "r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}; exec \"$0\" --data \"$1\" --lr 0.0$((r + 1)) --epochs 1 --max-steps 1 --quiet",
      "$T", "@fm", NULL}, NULL, 1, "ranks were started with different training flags", 2,
     "start every rank with the same flags, config file and DTRAIN_* environment"},
    {"launch-different-config", "launch", "DTRAIN_SYNC_BN=1 on rank 1 only", K_PROC, NULL,
     {"$MPI", "-n", "2", "sh", "-c",
      "r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}; [ $r = 1 ] && export DTRAIN_SYNC_BN=1; exec \"$0\" --data \"$1\" --epochs 1 --max-steps 1 --quiet",
      "$T", "@fm", NULL}, NULL, 1, "different training flags or config", 2,
     "export the same DTRAIN_* variables to every rank (mpirun -x NAME)"},
    {"launch-save-model-rank0", "launch", "--save-model on rank 0 only (fit(save_model=...) on rank 0)", K_PROC, NULL,
     {"$MPI", "-n", "2", "sh", "-c",
      "r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}; s=; [ $r = 0 ] && s=\"--save-model $1/m.safetensors\"; "
      "exec \"$0\" --data \"$1\" $s --epochs 1 --max-steps 1 --quiet",
      "$T", "@fm", NULL}, NULL, 1, "--save-model differs between ranks", 2,
     "give every rank the flag (only rank 0 writes the file); the others no longer wait for it until the timeout"},
    {"launch-checkpoint-every", "launch", "--checkpoint-every 1 on rank 1 only", K_PROC, NULL,
     {"$MPI", "-n", "2", "sh", "-c",
      "r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}; exec \"$0\" --data \"$1\" --checkpoint-dir \"$1/../ck_every\" "
      "--checkpoint-every $r --epochs 1 --max-steps 1 --quiet",
      "$T", "@fm", NULL}, NULL, 1, "--checkpoint-every differs between ranks", 2,
     "start every rank with the same checkpoint flags"},
    {"launch-resume-rank1", "launch", "--resume on rank 1 only", K_PROC, NULL,
     {"$MPI", "-n", "2", "sh", "-c",
      "r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}; s=; [ $r = 1 ] && s=\"--resume $1/../ck_train_2\"; "
      "exec \"$0\" --data \"$1\" $s --epochs 1 --max-steps 3 --quiet",
      "$T", "@fm", NULL}, NULL, 1, "--resume differs between ranks", 2, "give every rank the same --resume"},
    {"launch-resume-different", "launch", "--resume from a checkpoint at step 1 on rank 0, one at step 2 on rank 1", K_PROC,
     NULL, {"$MPI", "-n", "2", "sh", "-c",
      "r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}; c=ck_train_0; [ $r = 1 ] && c=ck_train_2; "
      "exec \"$0\" --data \"$1\" --resume \"$1/../$c\" --epochs 3 --quiet",
      "$T", "@fm", NULL}, NULL, 1, "ranks resumed from different checkpoints (--resume): step, epoch differ", 2,
     "give every rank the same checkpoint directory"},
    {"launch-clip-rank1", "launch", "--clip-grad-norm 1 on rank 1 only, ZeRO 1", K_PROC, NULL,
     {"$MPI", "-n", "2", "sh", "-c",
      "r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}; s=; [ $r = 1 ] && s=\"--clip-grad-norm 1\"; "
      "exec \"$0\" --data \"$1\" $s --zero 1 --epochs 1 --max-steps 1 --quiet",
      "$T", "@fm", NULL}, NULL, 1, "--clip-grad-norm differs between ranks (world rank 1 has --clip-grad-norm 1)", 0,
     "start every rank with the same flags"},
    {"launch-gpt-recompute", "launch", "--model gpt with --recompute 1 on rank 1 only", K_PROC, NULL,
     {"$MPI", "-n", "2", "sh", "-c",
      "r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}; s=; [ $r = 1 ] && s=\"--recompute 1\"; "
      "exec \"$0\" --model gpt --preset gpt-test --data \"$1\" $s --epochs 1 --max-steps 1 --quiet",
      "$T", "@text_4k.txt", NULL}, NULL, 1, "--recompute differs between ranks (world rank 1 has --recompute 1)", 0,
     "start every rank with the same flags"},
    {"launch-different-data", "launch", "rank 1 reads a data set of 32 training images, rank 0 one of 64", K_PROC, NULL,
     {"$MPI", "-n", "2", "sh", "-c",
      "r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}; d=$1; [ $r = 1 ] && d=$1/../fm32; "
      "exec \"$0\" --data \"$d\" --epochs 1 --max-steps 1 --quiet",
      "$T", "@fm", NULL}, NULL, 1, "ranks loaded different data sets (--data): training samples differs", 2,
     "give every rank the same data set"},
    {"launch-data-missing-rank1", "launch", "the data set missing on rank 1 only", K_PROC, NULL,
     {"$MPI", "-n", "2", "sh", "-c",
      "r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}; d=$1; [ $r = 1 ] && d=$1/../empty_dir; "
      "exec \"$0\" --data \"$d\" --epochs 1 --max-steps 1 --quiet",
      "$T", "@fm", NULL}, NULL, 1, "empty_dir/train-images-idx3-ubyte.gz': No such file or directory", 2,
     "install the data set on every host (the others no longer wait for the missing rank)"},
    {"bench-vs-mpi-rank1", "launch", "dtrain-bench --vs-mpi on rank 1 only", K_PROC, NULL,
     {"$MPI", "-n", "2", "sh", "-c",
      "r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}; s=; [ $r = 1 ] && s=--vs-mpi; exec \"$0\" -b 4K -e 4K -n 2 $s",
      "$B", NULL}, NULL, 2, "options differ between ranks", 2, "start every rank with the same dtrain-bench options"},
    {"bench-flag-rank1", "launch", "dtrain-bench --bogus on rank 1 only", K_PROC, NULL,
     {"$MPI", "-n", "2", "sh", "-c",
      "r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}; s=; [ $r = 1 ] && s=--bogus; exec \"$0\" -b 4K -e 4K -n 2 $s",
      "$B", NULL}, NULL, 2, "dtrain-bench[rank 1]: unknown option '--bogus'", 0, "start every rank with the same dtrain-bench options"},
    {"launch-backend-void", "launch", "DTRAIN_BACKEND=void under mpirun -np 2", K_PROC, NULL,
     {"$MPI", "-n", "2", "$T", "--data", "@fm", QUICK, NULL}, "DTRAIN_BACKEND=void", 1,
     "DTRAIN_BACKEND=void under an MPI launcher", 2,
     "unset DTRAIN_BACKEND (or mpi / auto); the world keeps the launcher's ranks either way (DTRAIN_BOOTSTRAP=none: "
     "each process alone, on purpose)"},
    {"launch-finalize-early", "launch",
     "rank 1 calls dt_finalize while rank 0 waits in a collective (as Python's exit hook does after an exception, "
     "sys.exit() or an early dtrain.finalize())", K_PROC, NULL, {"$MPI", "-n", "2", "$F", "skipfin", NULL},
     "DTRAIN_TIMEOUT=60", 75, "left the job: it is in dt_finalize (its last call on world was #60) while rank 0", 0,
     "find why rank 1 left early (its traceback, its exit path): every rank must make the same calls before dt_finalize"},
    {"launch-exit-early", "launch", "rank 1 returns from main (or calls exit()) without dt_finalize", K_PROC, NULL,
     {"$MPI", "-n", "2", "$F", "exit", NULL}, "DTRAIN_TIMEOUT=60", 1,
     "exited without calling dt_finalize", 0,
     "call dt_finalize on every rank before leaving (the others are ended at once, on every host)"},
    {"launch-mismatch-create", "launch", "rank 0 creates a sub-communicator ([[0,1]]) where rank 1 calls an allreduce",
     K_PROC, NULL, {"$MPI", "-n", "2", "$F", "mis_create", NULL}, "DTRAIN_TIMEOUT=60", 3,
     "rank 0: sub-communicator creation #61 on world | rank 1: allreduce(f32, count 16384, avg) #61 on world", 0,
     "every rank creates every sub-communicator, at the same point of the world's collectives"},
    {"launch-mismatch-comms", "launch", "rank 1 allreduces on [[0,1]] while ranks 0 and 2 allreduce on the world",
     K_PROC, NULL, {"$MPI", "-n", "3", "$F", "mis_comm", NULL}, "DTRAIN_TIMEOUT=60", 75,
     "collective mismatch across communicators", 0,
     "the ranks named call collectives on different communicators in different orders: make the order the same"},
    {"launch-mismatch-p2p", "launch", "rank 0 sends to rank 1, rank 1 calls an allreduce", K_PROC, NULL,
     {"$MPI", "-n", "2", "$F", "mis_p2p", NULL}, "DTRAIN_TIMEOUT=60", 75,
     "waits in send(f32, count 16384, to rank 1) #1 on world for rank 1", 0,
     "pair every dt_send with a dt_recv before the peer's next collective"},
    {"launch-stopped-rank", "launch", "rank 1 stopped (SIGSTOP) inside an allreduce every rank entered", K_PROC, NULL,
     {"$MPI", "-n", "2", "$F", "stopin", NULL}, "DTRAIN_TIMEOUT=3", 75,
     "arrived, but cannot go on: rank 1", 0, "continue it (kill -CONT PID): a debugger, a job control stop (Ctrl-Z)?"},
    {"bench-oom", "launch", "dtrain-bench -b 16384G (more than the memory)", K_PROC, NULL,
     {"$B", "-b", "16384G", "-e", "16384G", NULL}, NULL, 1,
     "the buffers could not be allocated on some rank (out of memory)", 0, "choose sizes that fit (-b / -e)"},
    /* models (dtrain/model.h) and text data (dtrain/text.h) */
    CALL("model-gpt-heads", "model", "gpt with n_embd 64, n_head 5", model_gpt_heads, DT_ERR_INVALID,
         "n_embd=64 is not divisible by n_head=5", "choose n_head dividing n_embd (head size = n_embd / n_head)"),
    CALL("model-gpt-layers", "model", "gpt with n_layer 0", model_gpt_layers, DT_ERR_INVALID, "n_layer=0 must be in [1, 4096]",
         "every gpt size (n_layer, n_head, n_embd, block_size, vocab_size) must be >= 1"),
    CALL("model-gpt-seq-len", "model", "gpt-test forward with T 65", model_gpt_seq_len, DT_ERR_INVALID,
         "T=65 not in [1, block_size=64]", "use windows of at most block_size tokens, or a larger block_size"),
    CALL("model-gpt-token", "model", "token 256 for vocab_size 256", model_gpt_token, DT_ERR_INVALID,
         "token 256 of sample 0 position 5 not in [0,256) (vocab_size)", "tokens and targets must be < vocab_size (256 for bytes)"),
    CALL("model-recompute-mlp", "model", "mlp with recompute 1", model_recompute_mlp, DT_ERR_INVALID,
         "has no activation recomputation", "recompute is for the gpt family; leave it 0 for mlp, lenet and cnn"),
    CALL("text-missing", "text data", "dt_text_load of a missing path", text_missing, DT_ERR_IO, "cannot read text corpus",
         "point at a text file or directory (default /usr/share/games/fortunes: apt-get install fortunes)"),
    CALL("text-empty", "text data", "an empty corpus file", text_empty, DT_ERR_INVALID, "is empty: no bytes in 1 file(s)",
         "use a corpus with text in it (a directory's .dat/.u8 files are skipped)"),
    CALL("text-short", "text data", "a 3-byte corpus, 10% validation", text_short, DT_ERR_INVALID, "is too short",
         "each split needs at least 2 bytes: more text, or validation fraction 0"),
    CALL("text-fraction", "text data", "validation fraction 1.5", text_fraction, DT_ERR_INVALID,
         "validation fraction 1.5 must be in [0, 1)", "use a fraction in [0, 1), e.g. 0.1"),
    CALL("text-block", "text data", "block size 64 over a 10-byte validation split", text_block, DT_ERR_INVALID,
         "block size T=64 needs T+1 = 65 bytes, the validation split has only 10", "use a smaller block size or more text"),
    TRAIN("flag-channels-mlp", "--model mlp --channels1 8", 2, "--channels1: model mlp has no conv channels to set",
          "size the mlp with --hidden1/--hidden2 (--channels1/2 size the cnn)", "--model", "mlp", "--channels1", "8",
          QUICK),
};
#define NROWS ((int)(sizeof g_rows / sizeof g_rows[0]))

/* ---- fixtures ------------------------------------------------------------------------- */

static void write_fixtures(void) {
    write_text(path("cfg_syntax.json"), "{\"overlap\": true \"sync_bn\": 1}");
    write_text(path("cfg_range.json"), "{\"zero_opt_level\": 7}");
    write_text(path("cfg_number.json"), "{\"bucket_size_mb\": \"big\"}");
    write_text(path("cfg_bool.json"), "{\"overlap\": \"maybe\"}");
    write_text(path("cfg_unknown.json"), "{\"bucket_size\": 4}");
    write_text(path("cfg_int.json"), "{\"zero_opt_level\": 1.5}");
    write_text(path("cfg_dup.json"), "{\"zero_opt_level\": 1,\n \"zero_opt_level\": 2}");
    write_text(path("text_empty.txt"), "");
    {
        static char t4k[4096];
        for (size_t i = 0; i + 1 < sizeof t4k; i++) t4k[i] = "the quick brown fox jumps over the lazy dog.\n"[i % 45];
        write_text(path("text_4k.txt"), t4k);
        if (mkdir(path("gpt_out"), 0700) != 0 && errno != EEXIST) die("mkdir gpt_out");
    }
    write_text(path("text_short.txt"), "abc");
    {
        char t100[101];
        for (int i = 0; i < 100; i++) t100[i] = (char)('a' + i % 26);
        t100[100] = '\0';
        write_text(path("text_100.txt"), t100);
    }
    {
        static char big[9000];
        memset(big, ' ', sizeof big - 1);
        big[0] = '{';
        big[sizeof big - 2] = '}';
        write_text(path("cfg_big.json"), big);
    }
    write_idx_images(path("ok-images"), 0x803, 5, 2, 3, 0, 0);
    write_idx_labels(path("ok-labels"), 0x801, 5, -1);
    write_bytes(path("empty"), "", 0);
    write_bytes(path("short-header"), "\0\0\x08\x03\0\0\0\x05\0\0", 10);
    write_idx_images(path("trunc-images"), 0x803, 5, 2, 3, 5, 0);
    {
        write_idx_images(path("trailing-images"), 0x803, 5, 2, 3, 0, 0);
        FILE *f = fopen(path("trailing-images"), "ab");
        if (!f) die("append");
        fputs("xyz", f);
        fclose(f);
    }
    write_idx_labels(path("short-labels"), 0x801, 4, -1);
    write_idx_images(path("zero-rows"), 0x803, 5, 0, 3, 0, 0);
    {
        uint8_t h[16];
        put_be32(h, 0x803); put_be32(h + 4, 0x7fffffff); put_be32(h + 8, 16384); put_be32(h + 12, 16384);
        write_bytes(path("huge-dims"), h, sizeof h);
        put_be32(h, 0x801);
        write_bytes(path("huge-labels"), h, 8);
    }
    write_idx_labels(path("bad-label"), 0x801, 5, 12);
    {
        /* a gzip header followed by garbage */
        write_idx_images(path("corrupt.gz"), 0x803, 5, 2, 3, 0, 1);
        FILE *f = fopen(path("corrupt.gz"), "r+b");
        if (!f) die("gz");
        fseek(f, 12, SEEK_SET);
        fputs("garbage-garbage-garbage", f);
        fclose(f);
    }
    /* Fashion-MNIST-shaped directories */
    write_fm_dir("fm");
    write_fm_dir("fm_trunc");
    write_idx_images(path("fm_trunc/train-images-idx3-ubyte"), 0x803, 64, 28, 28, 100, 0);
    write_fm_dir("fm_label");
    write_idx_labels(path("fm_label/train-labels-idx1-ubyte"), 0x801, 64, 10);
    write_fm_dir("fm32");
    write_idx_images(path("fm32/train-images-idx3-ubyte"), 0x803, 32, 28, 28, 0, 0);
    write_idx_labels(path("fm32/train-labels-idx1-ubyte"), 0x801, 32, -1);
    write_fm_dir("fm_gz");
    write_idx_images(path("fm_gz/t10k-images-idx3-ubyte.gz"), 0x803, 16, 28, 28, 0, 1);
    {
        FILE *f = fopen(path("fm_gz/t10k-images-idx3-ubyte.gz"), "r+b");
        if (!f) die("gz");
        fseek(f, 20, SEEK_SET);
        fputs("garbage-garbage-garbage-garbage", f);
        fclose(f);
    }
    if (mkdir(path("fm_small"), 0700) != 0) die("mkdir");
    write_idx_images(path("fm_small/train-images-idx3-ubyte"), 0x803, 4, 14, 14, 0, 0);
    write_idx_labels(path("fm_small/train-labels-idx1-ubyte"), 0x801, 4, -1);
    if (mkdir(path("empty_dir"), 0700) != 0) die("mkdir");
    if (mkdir(path("user_dir"), 0700) != 0) die("mkdir");
    if (mkfifo(path("fifo"), 0600) != 0) die("mkfifo");
    write_text(path("user_dir/thesis.txt"), "chapter 1\n");
    write_text(path("a_file"), "a user's file\n");
    if (mkdir(path("foreign_manifest"), 0700) != 0) die("mkdir");
    write_text(path("foreign_manifest/manifest.json"), "{\"name\": \"my-web-app\", \"version\": \"1.0.0\"}\n");
}

static int run_proc(const struct row *r, char **out);

/* Checkpoints written by the trainer itself, then damaged. */
/* Runs a fixture's dtrain-train (argv[0] "$T") through /bin/sh: the set-up is
 * not under test, and valgrind (tests/tools/run_valgrind.sh), which traces
 * the dtrain programs a row starts but not /bin's, runs it natively instead
 * of training under memcheck (three quarters of the matrix's time there). */
static int run_fixture(const char *const *argv, char **out) {
    struct row r;
    memset(&r, 0, sizeof r);
    r.argv[0] = "/bin/sh";
    r.argv[1] = "-c";
    r.argv[2] = "exec \"$0\" \"$@\"";
    for (int i = 0; argv[i] && i + 3 < MAXARG; i++) r.argv[i + 3] = argv[i];
    return run_proc(&r, out);
}

static void make_train_ckpts(void) {
    make_ckpt("ckpt_foreign");
    const char *names[5] = {"ck_train_crc", "ck_train_trunc", "ck_train_unit", "ck_train_0", "ck_train_2"};
    for (int i = 0; i < 5; i++) {
        struct row r;
        memset(&r, 0, sizeof r);
        const char *argv[] = {"$T", "--data", "@fm", "--epochs", i == 4 ? "2" : "1", "--max-steps", i == 4 ? "2" : "1", "--quiet",
                              "--checkpoint-dir", names[i], NULL};
        char at[64];
        snprintf(at, sizeof at, "@%s", names[i]);
        argv[9] = at;
        memcpy(r.argv, argv, sizeof argv);
        char *out = NULL;
        int code = run_fixture(r.argv, &out);
        if (code != 0) die("dtrain-train --checkpoint-dir failed (%d):\n%s", code, out);
        free(out);
    }
    char p[600];
    snprintf(p, sizeof p, "%s/rank-00000.g1.bin", path("ck_train_crc"));
    flip_last_byte(p);
    snprintf(p, sizeof p, "%s/manifest.json", path("ck_train_trunc"));
    truncate_file(p, 40);
    snprintf(p, sizeof p, "%s/manifest.json", path("ck_train_unit"));
    edit_file(p, "\"epoch_position_unit\": \"samples\"", "\"epoch_position_unit\": \"tokens\"");
    /* gpt checkpoints: one as written, one whose vocabulary is not 256 */
    const char *gnames[2] = {"@ck_gpt", "@ck_gpt_vocab"};
    for (int i = 0; i < 2; i++) {
        struct row r;
        memset(&r, 0, sizeof r);
        const char *argv[] = {"$T", "--model", "gpt", "--preset", "gpt-test", "--data", "@text_4k.txt", "--epochs", "1",
                              "--max-steps", "1", "--quiet", "--sample-length", "0", "--checkpoint-dir", gnames[i], NULL};
        memcpy(r.argv, argv, sizeof argv);
        char *out = NULL;
        int code = run_fixture(r.argv, &out);
        if (code != 0) die("dtrain-train --model gpt --checkpoint-dir failed (%d):\n%s", code, out);
        free(out);
    }
    snprintf(p, sizeof p, "%s/manifest.json", path("ck_gpt_vocab"));
    edit_file(p, "\"vocab_size\": \"256\"", "\"vocab_size\": \"50257\"");
}

static void rm_rf(const char *p) {
    pid_t pid = fork();
    if (pid == 0) {
        execlp("rm", "rm", "-rf", p, (char *)NULL);
        _exit(127);
    }
    if (pid > 0) waitpid(pid, NULL, 0);
}

/* ---- running a row ---------------------------------------------------------------------- */

static const char *expand(const char *a) {
    if (!strcmp(a, "$T")) return g_train;
    if (!strcmp(a, "$B")) return g_bench;
    if (!strcmp(a, "$F")) return g_fault;
    if (!strcmp(a, "$MPI")) return g_mpiexec;
    if (a[0] == '@') return path(a + 1);
    return a;
}

/* Runs argv, returns the exit code (128 + signal if killed); *out gets stdout + stderr. */
static int run_proc(const row *r, char **out) {
    const char *argv[MAXARG + 1];
    char *copies[MAXARG];
    int n = 0;
    for (; r->argv[n] && n < MAXARG; n++) copies[n] = strdup(expand(r->argv[n]));
    for (int i = 0; i < n; i++) argv[i] = copies[i];
    argv[n] = NULL;
    int fd[2];
    if (pipe(fd) != 0) die("pipe");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[1]);
        if (r->env) {
            char e[256];
            snprintf(e, sizeof e, "%s", r->env);
            char *eq = strchr(e, '=');
            if (eq) { *eq = '\0'; setenv(e, eq + 1, 1); }
        }
        execvp(argv[0], (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    size_t cap = 8192, len = 0;
    char *buf = malloc(cap);
    ssize_t k;
    while (buf && (k = read(fd[0], buf + len, cap - len - 1)) > 0) {
        len += (size_t)k;
        if (cap - len < 1024) { cap *= 2; buf = realloc(buf, cap); }
    }
    close(fd[0]);
    if (!buf) die("oom");
    buf[len] = '\0';
    int st = 0;
    waitpid(pid, &st, 0);
    for (int i = 0; i < n; i++) free(copies[i]);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* 1 if some line of out contains both "[rank R]" and msg. */
static int rank_says(const char *out, int rank, const char *msg) {
    char tag[32];
    snprintf(tag, sizeof tag, "[rank %d]", rank);
    for (const char *l = out; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        char *line = strndup(l, n);
        int ok = line && strstr(line, tag) && strstr(line, msg);
        free(line);
        if (ok) return 1;
        l = e ? e + 1 : NULL;
    }
    return 0;
}

/* A second accepted exit code (0: none), where two watchers race to end the job:
 * launch-exit-early ends with mpirun's exit 1 when mpirun sees the exit first, and
 * with dtrain's 75 when the rank is slow to leave after announcing it (a
 * sanitizer's leak scan, Python's teardown) and the others report it first. */
static int want_alt(const row *r) { return strcmp(r->id, "launch-exit-early") == 0 ? 75 : 0; }

static int run_row(const row *r) {
    int ok;
    if (r->kind == K_CALL) {
        g_msg[0] = '\0';
        dt_clear_error();
        int rc = r->fn();
        ok = rc == r->want && strstr(g_msg, r->msg) != NULL;
        printf("%-28s %s  status %s (want %s)  \"%s\"\n", r->id, ok ? "ok  " : "FAIL", dt_status_str(rc),
               dt_status_str(r->want), g_msg);
        if (ok && rc != DT_OK && !g_msg[0]) ok = 0;
    } else {
        char *out = NULL;
        int code = run_proc(r, &out);
        ok = (code == r->want || (want_alt(r) && code == want_alt(r))) && strstr(out, r->msg) != NULL;
        for (int k = 0; ok && k < r->ranks; k++)
            if (!rank_says(out, k, r->msg)) {
                ok = 0;
                printf("%-28s rank %d did not print the message\n", r->id, k);
            }
        /* a usage error writes nothing: the row's output paths do not exist */
        for (int k = 0; r->want == 2 && k + 1 < MAXARG && r->argv[k] && r->argv[k + 1]; k++) {
            const char *f = r->argv[k], *v = r->argv[k + 1];
            struct stat st;
            if ((!strcmp(f, "--json") || !strcmp(f, "--checkpoint-dir") || !strcmp(f, "--save-model") ||
                 !strcmp(f, "--timeline")) && v[0] == '@' && stat(path(v + 1), &st) == 0) {
                ok = 0;
                printf("%-28s %s was written: a usage error must leave nothing behind\n", r->id, v + 1);
            }
        }
        const char *first = strstr(out, r->msg);
        const char *ls = first ? first : out;
        while (ls > out && ls[-1] != '\n') ls--;
        int ll = (int)strcspn(ls, "\n");
        printf("%-28s %s  exit %d (want %d)  \"%.*s\"\n", r->id, ok ? "ok  " : "FAIL", code, r->want,
               ll > 300 ? 300 : ll, ls);
        if (!ok) printf("---- output of %s:\n%s----\n", r->id, out);
        free(out);
    }
    fflush(stdout);
    return ok;
}

/* a table cell: '|' escaped, '`' replaced */
static void cell(const char *s) {
    for (; *s; s++) {
        if (*s == '|') fputs("\\|", stdout);
        else if (*s == '`') putchar('\'');
        else putchar(*s);
    }
}

static void markdown(void) {
    printf("| # | area | input | status / exit code | message contains | what to do |\n");
    printf("|---|---|---|---|---|---|\n");
    for (int i = 0; i < NROWS; i++) {
        const row *r = &g_rows[i];
        char want[64];
        if (r->kind == K_CALL) snprintf(want, sizeof want, "`%s`", dt_status_str(r->want));
        else if (want_alt(r))
            snprintf(want, sizeof want, "exit %d or %d%s", r->want, want_alt(r), r->ranks ? ", every rank" : "");
        else snprintf(want, sizeof want, "exit %d%s", r->want, r->ranks ? ", every rank" : "");
        printf("| %d | %s | ", i + 1, r->area);
        cell(r->input);
        printf(" | %s | `", want);
        cell(r->msg);
        printf("` | ");
        cell(r->todo);
        printf(" |\n");
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--markdown")) {
        markdown();
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: test_badinput DTRAIN_TRAIN MPIEXEC [ROW_ID...] | badinput --markdown\n");
        return 2;
    }
    g_train = argv[1];
    g_mpiexec = argv[2];
    snprintf(g_bench, sizeof g_bench, "%s", g_train);
    char *slash = strrchr(g_bench, '/');
    snprintf(slash ? slash + 1 : g_bench, sizeof g_bench - (size_t)(slash ? slash + 1 - g_bench : 0), "dtrain-bench");
    {
        ssize_t k = readlink("/proc/self/exe", g_fault, sizeof g_fault - 32);
        g_fault[k > 0 ? k : 0] = '\0';
        char *sl = strrchr(g_fault, '/');
        snprintf(sl ? sl + 1 : g_fault, 32, "fault_prog");
    }
    /* standalone rows: never pick MPI up from a launcher's environment */
    unsetenv("DTRAIN_BACKEND");
    snprintf(g_dir, sizeof g_dir, "%s/dt_badinput_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_dir)) die("mkdtemp: %s", strerror(errno));
    write_fixtures();
    make_train_ckpts();
    int pass = 0, fail = 0;
    for (int i = 0; i < NROWS; i++) {
        if (argc > 3) {
            int sel = 0;
            for (int a = 3; a < argc; a++) sel |= !strcmp(argv[a], g_rows[i].id);
            if (!sel) continue;
        }
        if (run_row(&g_rows[i])) pass++;
        else fail++;
    }
    rm_rf(g_dir);
    printf("badinput: %d rows, %d passed, %d failed\n", pass + fail, pass, fail);
    return fail ? 1 : 0;
}
