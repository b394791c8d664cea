/* io_safetensors_index: a checkpoint sharded over several safetensors files
 * read through its index (dt_st_open_index): the tensors of two shards as
 * one file (names, dtypes, shapes, the bytes, offsets within the shard, the
 * numbering shard by shard), the shards' metadata merged, the index opened
 * by a path with and without a folder; and every way the index and shards
 * can disagree refused with DT_ERR_IO and a message naming the index, the
 * tensor and the shard. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "dtrain/safetensors.h"
#include "testutil.h"

static const char *g_dir; /* dt_test_tmpdir */

static void put(const char *name, const char *text) {
    FILE *f = fopen(dt_test_path(name), "w");
    CHECK(f != NULL, "create %s", name);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

#define S1 "model-00001-of-00002.safetensors"
#define S2 "model-00002-of-00002.safetensors"

static float g_a[6] = {1, -2, 3.5f, 4, 5, 6.25f};
static int64_t g_b[4] = {7, -8, 1LL << 40, 9};
static uint16_t g_c = 0x3f80; /* bf16 1.0 */

/* shard 1: a [2, 3] F32, c [] BF16 (+ extra, when given); shard 2: b [4] I64 */
static void write_shards(const char *meta2, const char *extra) {
    dt_st_info one[3] = {
        {.name = "a", .dtype = DT_F32, .ndim = 2, .shape = {2, 3}, .data = g_a},
        {.name = "c", .dtype = DT_BF16, .ndim = 0, .data = &g_c},
        {.name = extra, .dtype = DT_F32, .ndim = 1, .shape = {1}, .data = g_a},
    };
    dt_st_info two[1] = {{.name = "b", .dtype = DT_I64, .ndim = 1, .shape = {4}, .data = g_b}};
    CHECK_OK(dt_st_save(dt_test_path(S1), one, extra ? 3 : 2, "{\"format\":\"pt\"}"));
    CHECK_OK(dt_st_save(dt_test_path(S2), two, 1, meta2));
}

#define INDEX(map) "{\"metadata\": {\"total_size\": 58}, \"weight_map\": {" map "}}"
#define GOOD_MAP "\"a\": \"" S1 "\", \"b\": \"" S2 "\", \"c\": \"" S1 "\""

static void test_read(void) {
    write_shards("{\"format\":\"pt\",\"producer\":\"test\"}", NULL);
    put("model.safetensors.index.json", INDEX(GOOD_MAP));
    dt_st_file *f = NULL;
    CHECK_OK(dt_st_open_index(dt_test_path("model.safetensors.index.json"), &f));
    if (!f) return;
    CHECK(dt_st_num_tensors(f) == 3, "3 tensors, got %d", dt_st_num_tensors(f));
    /* numbered shard by shard, each in its data order: a, c (shard 1), b (shard 2) */
    const char *order[3] = {"a", "c", "b"};
    for (int i = 0; i < 3 && i < dt_st_num_tensors(f); i++) {
        dt_st_info in;
        CHECK_OK(dt_st_tensor_info(f, i, &in, NULL, NULL));
        CHECK(strcmp(in.name, order[i]) == 0 && dt_st_find(f, order[i]) == i, "tensor %d is %s, got %s", i,
              order[i], in.name);
    }
    dt_st_info in;
    uint64_t nb = 0, off = 0;
    int i = dt_st_find(f, "a");
    CHECK_OK(dt_st_tensor_info(f, i, &in, &nb, &off));
    CHECK(in.dtype == DT_F32 && in.ndim == 2 && in.shape[0] == 2 && in.shape[1] == 3 && nb == sizeof g_a,
          "a: F32 [2, 3], 24 bytes");
    /* the offset is within the shard: as dt_st_open of the shard says */
    dt_st_file *s1 = NULL;
    CHECK_OK(dt_st_open(dt_test_path(S1), &s1));
    uint64_t off1 = 1;
    CHECK_OK(dt_st_tensor_info(s1, dt_st_find(s1, "a"), &in, NULL, &off1));
    CHECK(off == off1, "a's offset %llu is the shard's %llu", (unsigned long long)off, (unsigned long long)off1);
    dt_st_close(s1);
    float a[6];
    int64_t b[4];
    uint16_t c = 0;
    memset(a, 0xff, sizeof a);
    memset(b, 0xff, sizeof b);
    CHECK_OK(dt_st_read(f, i, a, sizeof a));
    CHECK_OK(dt_st_read(f, dt_st_find(f, "b"), b, sizeof b));
    CHECK_OK(dt_st_read(f, dt_st_find(f, "c"), &c, sizeof c));
    CHECK(!memcmp(a, g_a, sizeof a) && !memcmp(b, g_b, sizeof b) && c == g_c, "the bytes of a, b, c");
    CHECK_ERR(dt_st_read(f, dt_st_find(f, "b"), b, sizeof b - 1), DT_ERR_INVALID, "destination holds 31");
    CHECK_ERR(dt_st_read(f, 3, b, sizeof b), DT_ERR_INVALID, "out of range [0, 3)");
    CHECK(dt_st_find(f, "d") == -1, "no tensor d");
    /* metadata: format from both shards once, producer from shard 2 */
    CHECK(dt_st_num_metadata(f) == 2, "2 metadata keys, got %d", dt_st_num_metadata(f));
    const char *fmt = dt_st_metadata_get(f, "format"), *prod = dt_st_metadata_get(f, "producer");
    CHECK(fmt && !strcmp(fmt, "pt") && prod && !strcmp(prod, "test"), "merged metadata");
    dt_st_close(f);
    /* a path without a folder: the shards are looked for in the working directory */
    char cwd[512];
    CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
    CHECK(chdir(g_dir) == 0, "chdir %s", g_dir);
    f = NULL;
    CHECK_OK(dt_st_open_index("model.safetensors.index.json", &f));
    CHECK(f && dt_st_num_tensors(f) == 3, "opened from its folder");
    dt_st_close(f);
    CHECK(chdir(cwd) == 0, "chdir back");
}

static void refused(const char *index, const char *msg1, const char *msg2) {
    put("bad.index.json", index);
    dt_st_file *f = NULL;
    int rc = dt_st_open_index(dt_test_path("bad.index.json"), &f);
    CHECK(rc == DT_ERR_IO && !f && strstr(dt_last_error(), "bad.index.json") && strstr(dt_last_error(), msg1) &&
              (!msg2 || strstr(dt_last_error(), msg2)),
          "%s: rc %d, '%s' (want '%s'%s%s)", index, rc, dt_last_error(), msg1, msg2 ? ", " : "", msg2 ? msg2 : "");
    dt_st_close(f);
}

static void test_refusals(void) {
    write_shards("{\"format\":\"pt\"}", NULL);
    refused("{\"weight_map\": {\"a\": \"" S1 "\"", "is not valid JSON", NULL);
    refused("[1, 2]", "no \"weight_map\" object", NULL);
    refused("{\"metadata\": {}}", "no \"weight_map\" object", NULL);
    refused("{\"weight_map\": []}", "no \"weight_map\" object", NULL);
    refused("{\"metadata\": 5, \"weight_map\": {" GOOD_MAP "}}", "\"metadata\" is not a JSON object", NULL);
    refused(INDEX(""), "lists no tensor", NULL);
    refused(INDEX("\"a\": 1"), "weight_map[\"a\"] is not a string", NULL);
    refused(INDEX("\"a\": \"../" S1 "\""), "weight_map[\"a\"] is not a plain file name", NULL);
    refused(INDEX("\"a\": \"sub/" S1 "\""), "not a plain file name", NULL);
    refused(INDEX("\"a\": \"\""), "not a plain file name", NULL);
    refused(INDEX("\"a\": \"..\""), "not a plain file name", NULL);
    /* a shard that is missing or not a safetensors file */
    refused(INDEX(GOOD_MAP ", \"d\": \"model-00003.safetensors\""), "names shard model-00003.safetensors",
            "cannot open");
    put("junk.safetensors", "not a safetensors file at all");
    refused(INDEX(GOOD_MAP ", \"d\": \"junk.safetensors\""), "names shard junk.safetensors", "junk.safetensors: ");
    /* the index and the shards disagree */
    refused(INDEX(GOOD_MAP ", \"d\": \"" S2 "\""), "puts tensor 'd' in " S2 ", which has no such tensor", NULL);
    refused(INDEX("\"a\": \"" S1 "\", \"b\": \"" S2 "\""), "does not list", "'c'");
    refused(INDEX("\"a\": \"" S1 "\", \"b\": \"" S1 "\", \"c\": \"" S1 "\""), "puts tensor 'b' in " S1, NULL);
    /* b in both shards: the index can name only one of them */
    write_shards("{\"format\":\"pt\"}", "b");
    refused(INDEX(GOOD_MAP), S1, "holds tensor 'b', which");
    /* the shards' metadata disagree */
    write_shards("{\"format\":\"np\"}", NULL);
    refused(INDEX(GOOD_MAP), "the shards' __metadata__ disagree on 'format'", "'pt'");
    /* not a file */
    dt_st_file *f = NULL;
    CHECK_ERR(dt_st_open_index(g_dir, &f), DT_ERR_IO, "cannot read");
    CHECK_ERR(dt_st_open_index(dt_test_path("nothing.json"), &f), DT_ERR_IO, "nothing.json: cannot read");
    CHECK_ERR(dt_st_open_index(NULL, &f), DT_ERR_INVALID, "NULL");
    CHECK_ERR(dt_st_open_index("x.json", NULL), DT_ERR_INVALID, "NULL");
}

int main(void) {
    if (!(g_dir = dt_test_tmpdir("dt_st_index_"))) return 1;
    test_read();
    test_refusals();
    dt_test_tmpdir_remove();
    return dt_test_finish("test_st_index");
}
