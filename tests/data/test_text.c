/* tests/data/test_text.c - byte-level text datasets (dtrain/text.h): loading
 * a file or a directory (sorted, index files, hidden files and
 * subdirectories skipped, links followed), the split by position, random
 * windows (determinism, a permutation per epoch, ranks' disjoint parts of a
 * global batch, resuming from a sample index), evaluation windows, every
 * error, and the default fortunes corpus when it is installed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "testutil.h"
#include "dtrain/text.h"

static char g_dir[256];

static void put(const char *name, const char *content) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL, "create %s", p);
    if (!f) return;
    fwrite(content, 1, strlen(content), f);
    fclose(f);
}

static void test_load_dir(void) {
    char sub[512], link[512], target[512];
    put("b.txt", "world!");
    put("a.txt", "hello ");
    put("c.dat", "INDEX");
    put("a.txt.u8", "LINK");
    put(".hidden", "HIDDEN");
    snprintf(sub, sizeof sub, "%s/zsub", g_dir);
    CHECK(mkdir(sub, 0755) == 0, "mkdir");
    snprintf(link, sizeof link, "%s/c-link", g_dir);
    snprintf(target, sizeof target, "%s/b.txt", g_dir);
    CHECK(symlink(target, link) == 0, "symlink");
    dt_text_dataset ds;
    CHECK_OK(dt_text_load(g_dir, 0.25, &ds));
    const char *want = "hello world!world!"; /* a.txt, b.txt, c-link */
    CHECK(ds.size == (int64_t)strlen(want) && ds.nfiles == 3 &&
              memcmp(ds.data, want, strlen(want)) == 0,
          "directory read as '%.*s' (%d files)", (int)ds.size, ds.data, ds.nfiles);
    /* 18 bytes, 25%: the last 4 are validation */
    int64_t off, sz;
    CHECK(ds.train_size == 14, "train size %lld", (long long)ds.train_size);
    CHECK_OK(dt_text_split_range(&ds, DT_TEXT_VAL, &off, &sz));
    CHECK(off == 14 && sz == 4, "validation split [%lld, +%lld)", (long long)off, (long long)sz);
    CHECK_OK(dt_text_split_range(&ds, DT_TEXT_TRAIN, &off, &sz));
    CHECK(off == 0 && sz == 14, "training split");
    CHECK_ERR(dt_text_split_range(&ds, 2, &off, &sz), DT_ERR_INVALID, "split 2");
    dt_text_free(&ds);
    CHECK(ds.data == NULL && ds.size == 0, "freed");
    dt_text_free(NULL);
    /* one file */
    CHECK_OK(dt_text_load(target, 0.0, &ds));
    CHECK(ds.size == 6 && ds.train_size == 6 && ds.nfiles == 1, "single file, no validation");
    CHECK_ERR(dt_text_num_windows(&ds, DT_TEXT_VAL, 1), DT_ERR_INVALID, "validation split has only 0");
    dt_text_free(&ds);
}

/* A corpus of n bytes whose byte i is i mod 251 (windows identify their
 * start), as a file. */
static void big_corpus(const char *name, int n) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "wb");
    for (int i = 0; f && i < n; i++) fputc(i % 251, f);
    if (f) fclose(f);
}

static void test_windows(void) {
    char p[512];
    big_corpus("big.bin", 1000);
    snprintf(p, sizeof p, "%s/big.bin", g_dir);
    dt_text_dataset ds;
    CHECK_OK(dt_text_load(p, 0.1, &ds));
    CHECK(ds.train_size == 900, "train 900");
    const int T = 16, B = 8;
    CHECK(dt_text_num_windows(&ds, DT_TEXT_TRAIN, T) == 900 - T, "train windows");
    CHECK(dt_text_num_windows(&ds, DT_TEXT_VAL, T) == 100 - T, "validation windows");
    int32_t x[8 * 16], y[8 * 16], x2[8 * 16], y2[8 * 16];
    CHECK_OK(dt_text_batch(&ds, DT_TEXT_TRAIN, T, 5, 0, B, x, y));
    int ok = 1;
    for (int b = 0; b < B; b++) {
        int64_t s;
        CHECK_OK(dt_text_window_start(&ds, DT_TEXT_TRAIN, T, 5, (uint64_t)b, &s));
        ok &= s >= 0 && s < 900 - T;
        for (int t = 0; t < T; t++) {
            ok &= x[b * T + t] == (int32_t)((s + t) % 251);
            ok &= y[b * T + t] == (int32_t)((s + t + 1) % 251);
        }
    }
    CHECK(ok, "windows: x = bytes [s, s+T), y = bytes [s+1, s+T+1), inside the split");
    CHECK_OK(dt_text_batch(&ds, DT_TEXT_TRAIN, T, 5, 0, B, x2, y2));
    CHECK(memcmp(x, x2, sizeof x) == 0 && memcmp(y, y2, sizeof y) == 0, "deterministic");
    CHECK_OK(dt_text_batch(&ds, DT_TEXT_TRAIN, T, 6, 0, B, x2, y2));
    CHECK(memcmp(x, x2, sizeof x) != 0, "another seed, other windows");
    /* validation windows never read training bytes */
    CHECK_OK(dt_text_batch(&ds, DT_TEXT_VAL, T, 5, 0, B, x2, y2));
    ok = 1;
    for (int b = 0; b < B; b++) {
        int64_t s;
        CHECK_OK(dt_text_window_start(&ds, DT_TEXT_VAL, T, 5, (uint64_t)b, &s));
        ok &= s >= 0 && s + T + 1 <= 100 && x2[b * T] == (int32_t)((900 + s) % 251);
    }
    CHECK(ok, "validation windows lie in the validation split");

    /* each epoch is a permutation of the windows, a different one per epoch */
    const int64_t W = 900 - T;
    int *seen = calloc((size_t)W, sizeof(int));
    int64_t first_e0 = -1, first_e1 = -1;
    for (int e = 0; e < 3; e++) {
        memset(seen, 0, (size_t)W * sizeof(int));
        ok = 1;
        for (int64_t i = 0; i < W; i++) {
            int64_t s;
            CHECK_OK(dt_text_window_start(&ds, DT_TEXT_TRAIN, T, 9, (uint64_t)(e * W + i), &s));
            if (s < 0 || s >= W || seen[s]++) ok = 0;
            if (i == 0 && e == 0) first_e0 = s;
            if (i == 0 && e == 1) first_e1 = s;
        }
        CHECK(ok, "epoch %d: every window exactly once", e);
    }
    CHECK(first_e0 != first_e1, "epochs are shuffled differently");
    free(seen);

    /* ranks: disjoint contiguous parts of a global batch, equal to one rank's */
    const int G = 8;
    int32_t one[8 * 16], oney[8 * 16];
    const uint64_t step = 37, g0 = step * (uint64_t)G;
    CHECK_OK(dt_text_batch(&ds, DT_TEXT_TRAIN, T, 3, g0, G, one, oney));
    for (int world = 2; world <= 4; world *= 2) {
        int32_t part[8 * 16], party[8 * 16];
        ok = 1;
        for (int r = 0; r < world; r++) {
            uint64_t f;
            CHECK_OK(dt_text_rank_first(g0, G, r, world, &f));
            CHECK_OK(dt_text_batch(&ds, DT_TEXT_TRAIN, T, 3, f, G / world, part + r * (G / world) * T,
                                   party + r * (G / world) * T));
        }
        ok = memcmp(part, one, sizeof part) == 0 && memcmp(party, oney, sizeof party) == 0;
        CHECK(ok, "%d ranks see exactly the 1-rank global batch, split in parts", world);
    }
    /* distinct windows across the ranks' samples of one epoch */
    int64_t st[8];
    ok = 1;
    for (int i = 0; i < G; i++) {
        CHECK_OK(dt_text_window_start(&ds, DT_TEXT_TRAIN, T, 3, g0 + (uint64_t)i, &st[i]));
        for (int j = 0; j < i; j++) ok &= st[i] != st[j];
    }
    CHECK(ok, "the samples of a global batch are distinct windows");
    /* resuming from a sample index */
    int32_t tail[4 * 16], taily[4 * 16];
    CHECK_OK(dt_text_batch(&ds, DT_TEXT_TRAIN, T, 3, g0 + 4, 4, tail, taily));
    CHECK(memcmp(tail, one + 4 * T, sizeof tail) == 0, "resume at sample g0+4");
    CHECK_ERR(dt_text_rank_first(0, 8, 3, 3, (uint64_t *)st), DT_ERR_INVALID, "rank 3");
    CHECK_ERR(dt_text_rank_first(0, 9, 0, 2, (uint64_t *)st), DT_ERR_INVALID, "multiple");
    CHECK_ERR(dt_text_rank_first(0, 0, 0, 1, (uint64_t *)st), DT_ERR_INVALID, "multiple");

    /* evaluation windows: in order, non-overlapping */
    CHECK(dt_text_num_eval_windows(&ds, DT_TEXT_VAL, T) == 99 / T, "eval windows");
    int32_t ex[2 * 16], ey[2 * 16];
    CHECK_OK(dt_text_eval_batch(&ds, DT_TEXT_VAL, T, 3, 2, ex, ey));
    ok = 1;
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < T; t++) {
            ok &= ex[b * T + t] == (900 + (3 + b) * T + t) % 251;
            ok &= ey[b * T + t] == (900 + (3 + b) * T + t + 1) % 251;
        }
    CHECK(ok, "evaluation window k starts at k*T");
    CHECK_ERR(dt_text_eval_batch(&ds, DT_TEXT_VAL, T, 5, 2, ex, ey), DT_ERR_INVALID,
              "outside [0, 6)");
    CHECK_ERR(dt_text_eval_batch(&ds, DT_TEXT_VAL, T, -1, 1, ex, ey), DT_ERR_INVALID, "outside");

    /* errors of the window functions */
    CHECK_ERR(dt_text_num_windows(&ds, DT_TEXT_VAL, 100), DT_ERR_INVALID,
              "block size T=100 needs T+1 = 101 bytes, the validation split has only 100");
    CHECK_ERR(dt_text_batch(&ds, DT_TEXT_TRAIN, 900, 1, 0, 1, x, y), DT_ERR_INVALID,
              "the training split has only 900");
    CHECK_ERR(dt_text_batch(&ds, DT_TEXT_TRAIN, 0, 1, 0, 1, x, y), DT_ERR_INVALID, "T=0");
    CHECK_ERR(dt_text_batch(&ds, DT_TEXT_TRAIN, T, 1, 0, 0, x, y), DT_ERR_INVALID, "B=0");
    CHECK_ERR(dt_text_batch(&ds, DT_TEXT_TRAIN, T, 1, 0, 1, NULL, y), DT_ERR_INVALID, "NULL");
    CHECK_ERR(dt_text_batch(NULL, DT_TEXT_TRAIN, T, 1, 0, 1, x, y), DT_ERR_INVALID, "not loaded");
    CHECK_ERR(dt_text_window_start(&ds, DT_TEXT_TRAIN, T, 1, 0, NULL), DT_ERR_INVALID, "NULL");
    /* T = S - 1: exactly one window */
    CHECK(dt_text_num_windows(&ds, DT_TEXT_VAL, 99) == 1, "one window");
    int64_t s1;
    CHECK_OK(dt_text_window_start(&ds, DT_TEXT_VAL, 99, 1, 12345, &s1));
    CHECK(s1 == 0, "the only window starts at 0");
    dt_text_free(&ds);
}

static void test_load_errors(void) {
    dt_text_dataset ds;
    char p[512];
    snprintf(p, sizeof p, "%s/missing.txt", g_dir);
    CHECK_ERR(dt_text_load(p, 0.1, &ds), DT_ERR_IO, "missing.txt");
    CHECK(ds.data == NULL && ds.size == 0, "zeroed on failure");
    put("empty.txt", "");
    snprintf(p, sizeof p, "%s/empty.txt", g_dir);
    CHECK_ERR(dt_text_load(p, 0.1, &ds), DT_ERR_INVALID, "is empty");
    put("three.txt", "abc");
    snprintf(p, sizeof p, "%s/three.txt", g_dir);
    CHECK_ERR(dt_text_load(p, 0.1, &ds), DT_ERR_INVALID, "too short");
    CHECK_OK(dt_text_load(p, 0.0, &ds));
    dt_text_free(&ds);
    put("one.txt", "a");
    snprintf(p, sizeof p, "%s/one.txt", g_dir);
    CHECK_ERR(dt_text_load(p, 0.0, &ds), DT_ERR_INVALID, "too short");
    CHECK_ERR(dt_text_load(p, 1.0, &ds), DT_ERR_INVALID, "fraction 1");
    CHECK_ERR(dt_text_load(p, -0.1, &ds), DT_ERR_INVALID, "fraction");
    CHECK_ERR(dt_text_load(p, NAN, &ds), DT_ERR_INVALID, "fraction");
    CHECK_ERR(dt_text_load(p, 0.1, NULL), DT_ERR_INVALID, "NULL");
    /* a directory with nothing usable */
    char d[512];
    snprintf(d, sizeof d, "%s/idx-only", g_dir);
    CHECK(mkdir(d, 0755) == 0, "mkdir");
    snprintf(p, sizeof p, "%s/idx-only/x.dat", g_dir);
    FILE *f = fopen(p, "wb");
    if (f) {
        fputs("index", f);
        fclose(f);
    }
    CHECK_ERR(dt_text_load(d, 0.1, &ds), DT_ERR_INVALID, "empty: no bytes in 0 file(s)");
    CHECK_ERR(dt_text_load("/dev/null", 0.1, &ds), DT_ERR_IO, "neither a file nor a directory");
}

/* A file whose size stat does not know (/proc reports st_size 0) is read to
 * its end, not taken for an empty one. */
static void test_unsized_file(void) {
    struct stat st;
    if (stat("/proc/version", &st) != 0 || st.st_size != 0) {
        printf("  /proc/version missing or sized: unsized files not checked\n");
        return;
    }
    char want[4096];
    FILE *f = fopen("/proc/version", "rb");
    size_t n = f ? fread(want, 1, sizeof want, f) : 0;
    if (f) fclose(f);
    dt_text_dataset ds;
    CHECK_OK(dt_text_load("/proc/version", 0.0, &ds));
    CHECK(n > 2 && ds.size == (int64_t)n && ds.nfiles == 1 && memcmp(ds.data, want, n) == 0,
          "/proc/version: %lld bytes loaded, %zu read", (long long)ds.size, n);
    dt_text_free(&ds);
}

static void test_fortunes(void) {
    struct stat st;
    if (stat(DT_FORTUNES_DIR, &st) != 0) {
        printf("  %s not installed (Debian package fortunes): default corpus not checked\n",
               DT_FORTUNES_DIR);
        return;
    }
    dt_text_dataset ds;
    CHECK_OK(dt_text_load(NULL, DT_TEXT_VAL_FRACTION, &ds));
    CHECK(ds.size > 1000000 && ds.size < 20000000 && ds.nfiles > 10,
          "fortunes: %lld bytes in %d files", (long long)ds.size, ds.nfiles);
    CHECK(ds.size - ds.train_size == (int64_t)((double)ds.size * 0.1), "10%% validation");
    /* the .dat index files are binary (NUL bytes); the text has none */
    int64_t nul = 0;
    for (int64_t i = 0; i < ds.size; i++) nul += ds.data[i] == 0;
    CHECK(nul == 0, "no index file bytes (%lld NULs)", (long long)nul);
    printf("  fortunes: %lld bytes in %d files, %lld training windows of 256\n",
           (long long)ds.size, ds.nfiles, (long long)dt_text_num_windows(&ds, DT_TEXT_TRAIN, 256));
    dt_text_free(&ds);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    char root[200];
    snprintf(root, sizeof root, "%s/dt_text_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(g_dir, sizeof g_dir, "%s/corpus", root); /* the directory of test_load_dir */
    CHECK(mkdir(g_dir, 0755) == 0, "mkdir %s", g_dir);
    test_load_dir();
    snprintf(g_dir, sizeof g_dir, "%s", root);
    test_windows();
    test_load_errors();
    test_unsized_file();
    test_fortunes();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    return dt_test_finish("data_text");
}
