/* tests/data/test_shards.c - llm.c's token shards as text datasets
 * (dtrain/text.h, TOKEN SHARDS): the shards this test writes itself in
 * llm.c's format (a header of 256 int32: magic 20240520, version 1, token
 * count; then uint16 tokens) read as one file (split by position), a
 * directory and a glob pattern with llm.c's train/val naming (validation
 * shards after the training ones, each group by name), windows spanning
 * two shards, evaluation windows, the detection of shards against byte
 * corpora, and every error: a wrong magic, version or count, a truncated
 * file or one with bytes after its tokens, llm.c's llama-3 shards and
 * evaluation files, a token outside GPT-2's vocabulary (named with its
 * shard and index when a window holding it is read), a pattern or
 * directory without shards, a mix of named and unnamed shards, validation
 * shards only. */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "testutil.h"
#include "dtrain/text.h"

static const char *g_dir; /* dt_test_tmpdir */

/* A shard: header (magic, version, count as given), then n tokens first,
 * first + 1, ... (mod 50257), then `extra` bytes. */
static void shard(const char *name, int32_t magic, int32_t version, int32_t count, int n, int first, int extra) {
    int32_t h[256] = {magic, version, count};
    FILE *f = fopen(dt_test_path(name), "wb");
    CHECK(f != NULL, "create %s", name);
    if (!f) return;
    fwrite(h, sizeof h, 1, f);
    for (int i = 0; i < n; i++) {
        uint16_t t = (uint16_t)((first + i) % 50257);
        fwrite(&t, 2, 1, f);
    }
    for (int i = 0; i < extra; i++) fputc(0, f);
    fclose(f);
}

static void good(const char *name, int n, int first) { shard(name, 20240520, 1, n, n, first, 0); }

static void test_one_file(void) {
    good("one.bin", 1000, 50000); /* tokens 50000 .. 50256, then 0 .. 742 */
    CHECK(dt_text_is_tokens(dt_test_path("one.bin")) == 1, "a shard is tokens");
    dt_text_dataset ds;
    CHECK_OK(dt_text_load(dt_test_path("one.bin"), 0.1, &ds));
    CHECK(ds.data == NULL && ds.shards != NULL && ds.vocab_size == 50257 && ds.nfiles == 1, "token dataset");
    CHECK(ds.size == 1000 && ds.train_size == 900, "split by position: %lld / %lld", (long long)ds.train_size,
          (long long)ds.size);
    const int T = 16;
    int32_t x[4 * 16], y[4 * 16];
    CHECK_OK(dt_text_batch(&ds, DT_TEXT_TRAIN, T, 3, 0, 4, x, y));
    int ok = 1;
    for (int b = 0; b < 4; b++) {
        int64_t s;
        CHECK_OK(dt_text_window_start(&ds, DT_TEXT_TRAIN, T, 3, (uint64_t)b, &s));
        for (int t = 0; t < T; t++) {
            ok &= x[b * T + t] == (50000 + s + t) % 50257;
            ok &= y[b * T + t] == (50000 + s + t + 1) % 50257;
        }
    }
    CHECK(ok, "training windows: x = tokens [s, s+T), y = [s+1, s+T+1)");
    CHECK(dt_text_num_eval_windows(&ds, DT_TEXT_VAL, T) == 99 / T, "evaluation windows");
    CHECK_OK(dt_text_eval_batch(&ds, DT_TEXT_VAL, T, 2, 1, x, y));
    CHECK(x[0] == (50000 + 900 + 2 * T) % 50257 && y[T - 1] == (50000 + 900 + 3 * T) % 50257, "evaluation window 2");
    CHECK_ERR(dt_text_num_windows(&ds, DT_TEXT_VAL, 100), DT_ERR_INVALID, "needs T+1 = 101 tokens");
    dt_text_free(&ds);
    CHECK(ds.shards == NULL && ds.size == 0, "freed");
}

static void test_dir_and_glob(void) {
    char d[512];
    snprintf(d, sizeof d, "%s/fw", g_dir);
    CHECK(mkdir(d, 0755) == 0, "mkdir");
    good("fw/fineweb_val_000000.bin", 300, 1000);
    good("fw/fineweb_train_000002.bin", 200, 3000);
    good("fw/fineweb_train_000001.bin", 400, 2000);
    FILE *f = fopen(dt_test_path("fw/README.txt"), "w"); /* other files are ignored */
    if (f) {
        fputs("not a shard", f);
        fclose(f);
    }
    CHECK(dt_text_is_tokens(d) == 1, "a directory of shards is tokens");
    dt_text_dataset ds;
    CHECK_OK(dt_text_load(d, 0.1, &ds));
    CHECK(ds.size == 900 && ds.train_size == 600 && ds.nfiles == 3, "train 000001, 000002, val 000000: %lld / %lld",
          (long long)ds.train_size, (long long)ds.size);
    /* the evaluation windows read the validation shard; a window across the
     * two training shards reads both */
    int32_t x[64], y[64];
    CHECK_OK(dt_text_eval_batch(&ds, DT_TEXT_VAL, 10, 0, 2, x, y));
    CHECK(x[0] == 1000 && x[19] == 1019 && y[19] == 1020, "validation shard first");
    int found = 0;
    for (uint64_t g = 0; g < 590 && !found; g++) {
        int64_t s;
        CHECK_OK(dt_text_window_start(&ds, DT_TEXT_TRAIN, 10, 1, g, &s));
        if (s > 390 && s < 400) {
            CHECK_OK(dt_text_batch(&ds, DT_TEXT_TRAIN, 10, 1, g, 1, x, y));
            int ok = 1;
            for (int t = 0; t < 10; t++) {
                int64_t p = s + t;
                ok &= x[t] == (p < 400 ? 2000 + p : 3000 + p - 400);
                ok &= y[t] == (p + 1 < 400 ? 2000 + p + 1 : 3000 + p + 1 - 400);
            }
            CHECK(ok, "a window from %lld spans the two training shards", (long long)s);
            found = 1;
        }
    }
    CHECK(found, "some window spans the shards");
    dt_text_free(&ds);
    /* the same through a glob pattern; only the training shards: split by position */
    char pat[600];
    snprintf(pat, sizeof pat, "%s/fw/*.bin", g_dir);
    CHECK(dt_text_is_tokens(pat) == 1, "a pattern is tokens");
    CHECK_OK(dt_text_load(pat, 0.1, &ds));
    CHECK(ds.size == 900 && ds.train_size == 600, "glob: the same dataset");
    dt_text_free(&ds);
    snprintf(pat, sizeof pat, "%s/fw/*_train_*.bin", g_dir);
    CHECK_OK(dt_text_load(pat, 0.1, &ds));
    CHECK(ds.size == 600 && ds.train_size == 540, "training shards only: the last 10%% validate");
    dt_text_free(&ds);
    /* tiny_shakespeare's names: *_train.bin, *_val.bin */
    snprintf(d, sizeof d, "%s/ts", g_dir);
    CHECK(mkdir(d, 0755) == 0, "mkdir");
    good("ts/tiny_shakespeare_val.bin", 50, 7);
    good("ts/tiny_shakespeare_train.bin", 500, 9);
    CHECK_OK(dt_text_load(d, 0.1, &ds));
    CHECK(ds.size == 550 && ds.train_size == 500, "tiny_shakespeare naming");
    dt_text_free(&ds);
}

static void test_detect(void) {
    FILE *f = fopen(dt_test_path("text.bin"), "w"); /* named .bin, but text */
    if (f) {
        fputs("hello, world: some text named .bin", f);
        fclose(f);
    }
    CHECK(dt_text_is_tokens(dt_test_path("text.bin")) == 0, "a .bin file without the magic is a byte corpus");
    CHECK(dt_text_is_tokens(dt_test_path("missing")) == 0, "missing: not tokens (the loader reports it)");
    CHECK_ERR(dt_text_is_tokens(NULL), DT_ERR_INVALID, "NULL");
    dt_text_dataset ds;
    CHECK_OK(dt_text_load(dt_test_path("text.bin"), 0.1, &ds));
    CHECK(ds.data != NULL && ds.vocab_size == 256, "read as bytes");
    dt_text_free(&ds);
}

static void test_errors(void) {
    dt_text_dataset ds;
    shard("badmagic.bin", 20240520, 1, 10, 10, 0, 0);
    FILE *f = fopen(dt_test_path("badmagic.bin"), "r+b");
    if (f) { /* a corrupt magic, in a directory of shards */
        fputc(0x11, f);
        fclose(f);
    }
    char d[512];
    snprintf(d, sizeof d, "%s/mixed", g_dir);
    CHECK(mkdir(d, 0755) == 0, "mkdir");
    good("mixed/a_train_1.bin", 100, 0);
    shard("mixed/b_train_2.bin", 20240521, 1, 10, 10, 0, 0);
    CHECK_ERR(dt_text_load(d, 0.1, &ds), DT_ERR_IO, "b_train_2.bin is not an llm.c token shard: magic 20240521");
    CHECK(ds.shards == NULL && ds.size == 0, "zeroed on failure");
    shard("v2.bin", 20240520, 2, 10, 10, 0, 0);
    CHECK_ERR(dt_text_load(dt_test_path("v2.bin"), 0.1, &ds), DT_ERR_UNSUPPORTED, "v2.bin: version 2");
    shard("llama.bin", 20240801, 7, 10, 20, 0, 0);
    CHECK_ERR(dt_text_load(dt_test_path("llama.bin"), 0.1, &ds), DT_ERR_UNSUPPORTED, "llama.bin holds llm.c's llama-3 tokens");
    shard("hellaswag.bin", 20240522, 1, 10, 10, 0, 0);
    CHECK_ERR(dt_text_load(dt_test_path("hellaswag.bin"), 0.1, &ds), DT_ERR_UNSUPPORTED, "an llm.c evaluation file");
    shard("zero.bin", 20240520, 1, 0, 0, 0, 0);
    CHECK_ERR(dt_text_load(dt_test_path("zero.bin"), 0.1, &ds), DT_ERR_IO, "zero.bin: its header counts 0 tokens");
    shard("neg.bin", 20240520, 1, -5, 0, 0, 0);
    CHECK_ERR(dt_text_load(dt_test_path("neg.bin"), 0.1, &ds), DT_ERR_IO, "counts -5 tokens");
    shard("trunc.bin", 20240520, 1, 100, 60, 0, 0);
    CHECK_ERR(dt_text_load(dt_test_path("trunc.bin"), 0.1, &ds), DT_ERR_IO,
              "trunc.bin is truncated: its header counts 100 tokens (1224 bytes), the file has 1144 bytes (60 tokens)");
    shard("tail.bin", 20240520, 1, 100, 100, 0, 3);
    CHECK_ERR(dt_text_load(dt_test_path("tail.bin"), 0.1, &ds), DT_ERR_IO, "tail.bin is corrupt: 3 bytes after the 100 tokens");
    f = fopen(dt_test_path("short.bin"), "wb");
    if (f) { /* the magic, then nothing */
        int32_t m = 20240520;
        fwrite(&m, 4, 1, f);
        fclose(f);
    }
    CHECK_ERR(dt_text_load(dt_test_path("short.bin"), 0.1, &ds), DT_ERR_IO, "short.bin is truncated: 4 bytes, shorter than");
    good("tiny.bin", 1, 0);
    CHECK_ERR(dt_text_load(dt_test_path("tiny.bin"), 0.1, &ds), DT_ERR_INVALID, "too short: 1 tokens");
    /* a token outside GPT-2's vocabulary: found when its window is read */
    shard("oov.bin", 20240520, 1, 100, 100, 0, 0);
    f = fopen(dt_test_path("oov.bin"), "r+b");
    if (f) {
        uint16_t bad = 60000;
        fseek(f, 1024 + 2 * 40, SEEK_SET);
        fwrite(&bad, 2, 1, f);
        fclose(f);
    }
    CHECK_OK(dt_text_load(dt_test_path("oov.bin"), 0.1, &ds));
    int32_t x[90], y[90];
    CHECK_ERR(dt_text_eval_batch(&ds, DT_TEXT_TRAIN, 89, 0, 1, x, y), DT_ERR_IO,
              "oov.bin: token 40 is 60000, outside the vocabulary of 50257");
    dt_text_free(&ds);
    /* patterns and directories without shards, naming */
    char pat[600];
    snprintf(pat, sizeof pat, "%s/nothing_*.bin", g_dir);
    CHECK_ERR(dt_text_load(pat, 0.1, &ds), DT_ERR_INVALID, "no file matches the pattern");
    snprintf(d, sizeof d, "%s/named", g_dir);
    CHECK(mkdir(d, 0755) == 0, "mkdir");
    good("named/x_val_0.bin", 100, 0);
    CHECK_ERR(dt_text_load(d, 0.1, &ds), DT_ERR_INVALID, "only validation shards (*_val*), no training shard");
    good("named/other.bin", 100, 0);
    CHECK_ERR(dt_text_load(d, 0.1, &ds), DT_ERR_INVALID, "other.bin is named neither *_train* nor *_val*");
    snprintf(d, sizeof d, "%s/nobin", g_dir);
    CHECK(mkdir(d, 0755) == 0, "mkdir");
    snprintf(pat, sizeof pat, "%s/nobin/*.bin", g_dir);
    CHECK_ERR(dt_text_load(pat, 0.1, &ds), DT_ERR_INVALID, "no file matches");
}

int main(void) {
    if (!(g_dir = dt_test_tmpdir("dt_shards_"))) return 1;
    test_one_file();
    test_dir_and_glob();
    test_detect();
    test_errors();
    dt_test_tmpdir_remove();
    return dt_test_finish("data_shards");
}
