/* ckpt_safetensors: streaming writer + strict reader round trip (every dtype,
 * scalar and empty tensors, metadata, any write order), one-shot save, memory
 * and header-only parsing, writer argument errors, crash safety of the
 * temporary file, and refusal of corrupted files with messages naming them. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "dtrain/safetensors.h"
#include "testutil.h"

static const char *g_dir; /* dt_test_tmpdir */

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void spit(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) { CHECK(0, "cannot write %s", path); return; }
    if (n) fwrite(b, 1, n, f);
    fclose(f);
}

/* A file from a header text (unpadded) and data_len zero bytes. */
static void make_file(const char *path, const char *header, size_t data_len) {
    size_t hl = strlen(header);
    unsigned char *b = calloc(8 + hl + data_len + 1, 1);
    for (int k = 0; k < 8; k++) b[k] = (unsigned char)((uint64_t)hl >> (8 * k));
    memcpy(b + 8, header, hl);
    spit(path, b, 8 + hl + data_len);
    free(b);
}

/* Number of entries in g_dir whose name contains sub. */
static int count_entries(const char *sub) {
    DIR *d = opendir(g_dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (strstr(e->d_name, sub)) n++;
    if (d) closedir(d);
    return n;
}

/* ---- round trip ------------------------------------------------------------ */
#define NT 10
static float a_f32[12];
static double b_f64[5];
static uint16_t c_f16[4], d_bf16[3];
static int8_t e_i8[7];
static uint8_t f_u8[12];
static int32_t g_i32[3] = {INT32_MIN, 0, INT32_MAX};
static int64_t h_i64[2] = {-(INT64_C(1) << 62), (INT64_C(1) << 62) + 5};
static float s_f32 = 3.25f;

static void fill_tensors(dt_st_info *t) {
    for (int i = 0; i < 12; i++) a_f32[i] = (float)i * 0.5f - 1.0f;
    for (int i = 0; i < 5; i++) b_f64[i] = i / 3.0;
    const float hv[4] = {1.5f, -2.0f, 0.25f, 65504.0f};
    for (int i = 0; i < 4; i++) c_f16[i] = dt_f32_to_f16(hv[i]);
    const float bv[3] = {1.0f, -0.5f, 256.0f};
    for (int i = 0; i < 3; i++) d_bf16[i] = dt_f32_to_bf16(bv[i]);
    for (int i = 0; i < 7; i++) e_i8[i] = (int8_t)(i * 20 - 60);
    for (int i = 0; i < 12; i++) f_u8[i] = (uint8_t)(i * 20);
    memset(t, 0, NT * sizeof *t);
    t[0] = (dt_st_info){.name = "layer.0.weight", .dtype = DT_F32, .ndim = 2, .shape = {3, 4}, .data = a_f32};
    t[1] = (dt_st_info){.name = "b64", .dtype = DT_F64, .ndim = 1, .shape = {5}, .data = b_f64};
    t[2] = (dt_st_info){.name = "half", .dtype = DT_F16, .ndim = 2, .shape = {2, 2}, .data = c_f16};
    t[3] = (dt_st_info){.name = "bfloat", .dtype = DT_BF16, .ndim = 1, .shape = {3}, .data = d_bf16};
    t[4] = (dt_st_info){.name = "empty", .dtype = DT_F32, .ndim = 2, .shape = {0, 3}, .data = NULL};
    t[5] = (dt_st_info){.name = "i8", .dtype = DT_I8, .ndim = 1, .shape = {7}, .data = e_i8};
    t[6] = (dt_st_info){.name = "u8 \"quoted\" \xc3\xa9", .dtype = DT_U8, .ndim = 3, .shape = {2, 3, 2}, .data = f_u8};
    t[7] = (dt_st_info){.name = "i32", .dtype = DT_I32, .ndim = 1, .shape = {3}, .data = g_i32};
    t[8] = (dt_st_info){.name = "i64", .dtype = DT_I64, .ndim = 1, .shape = {2}, .data = h_i64};
    t[9] = (dt_st_info){.name = "scalar", .dtype = DT_F32, .ndim = 0, .data = &s_f32};
}

static void check_file(dt_st_file *f, const dt_st_info *t) {
    CHECK(dt_st_num_tensors(f) == NT, "num tensors %d", dt_st_num_tensors(f));
    for (int i = 0; i < NT; i++) {
        dt_st_info info;
        uint64_t nb = 0, off = 0;
        CHECK_OK(dt_st_tensor_info(f, i, &info, &nb, &off));
        /* Tensors are numbered in file order == writer order. */
        CHECK(strcmp(info.name, t[i].name) == 0, "tensor %d name '%s' want '%s'", i, info.name, t[i].name);
        CHECK(info.dtype == t[i].dtype && info.ndim == t[i].ndim, "tensor %s dtype/ndim", t[i].name);
        CHECK(memcmp(info.shape, t[i].shape, sizeof(int64_t) * (size_t)t[i].ndim) == 0, "tensor %s shape", t[i].name);
        CHECK(nb == dt_st_nbytes(&t[i]), "tensor %s nbytes %llu", t[i].name, (unsigned long long)nb);
        CHECK(off % 8 == 0 || i > 0, "first tensor aligned");
        CHECK(dt_st_find(f, t[i].name) == i, "find %s", t[i].name);
        unsigned char buf[256];
        memset(buf, 0xAB, sizeof buf);
        CHECK_OK(dt_st_read(f, i, buf, sizeof buf));
        CHECK(nb == 0 || memcmp(buf, t[i].data, (size_t)nb) == 0, "tensor %s data", t[i].name);
        if (nb > 1) CHECK_ERR(dt_st_read(f, i, buf, (size_t)nb - 1), DT_ERR_INVALID, "destination holds");
    }
    CHECK(dt_st_find(f, "nope") == -1, "find missing");
    CHECK_ERR(dt_st_read(f, NT, NULL, 0), DT_ERR_INVALID, "out of range");
    CHECK(dt_st_num_metadata(f) == 2, "metadata count %d", dt_st_num_metadata(f));
    const char *v = dt_st_metadata_get(f, "format");
    CHECK(v && strcmp(v, "pt") == 0, "metadata format");
    v = dt_st_metadata_get(f, "note");
    CHECK(v && strcmp(v, "line\nbreak \"q\" \\ \xc3\xa9") == 0, "metadata note '%s'", v ? v : "(null)");
    const char *k0, *v0;
    CHECK_OK(dt_st_metadata_at(f, 0, &k0, &v0));
    CHECK(strcmp(k0, "format") == 0, "metadata sorted");
    CHECK(dt_st_metadata_get(f, "missing") == NULL, "metadata missing");
}

static const char *k_meta = "{\"format\": \"pt\", \"note\": \"line\\nbreak \\\"q\\\" \\\\ \\u00e9\"}";

static void test_roundtrip(void) {
    dt_st_info t[NT];
    fill_tensors(t);
    const char *p = dt_test_path("rt.safetensors");
    dt_st_writer *w;
    CHECK_OK(dt_st_writer_open(p, t, NT, k_meta, &w));
    CHECK(count_entries("rt.safetensors.tmp.") == 1, "temporary file exists while writing");
    CHECK(access(p, F_OK) != 0, "final name absent before close");
    for (int i = NT - 1; i >= 0; i--) CHECK_OK(dt_st_writer_write(w, i, t[i].data)); /* any order */
    CHECK_ERR(dt_st_writer_write(w, 0, t[0].data), DT_ERR_INVALID, "written twice");
    CHECK_OK(dt_st_writer_close(w));
    CHECK(count_entries(".tmp.") == 0, "temporary file renamed away");
    size_t len;
    unsigned char *img = slurp(p, &len);
    CHECK(img != NULL && len > 8, "read back");
    uint64_t hn = 0;
    for (int k = 7; k >= 0; k--) hn = (hn << 8) | img[k];
    CHECK(hn % 8 == 0, "header padded to 8: %llu", (unsigned long long)hn);
    CHECK(img[8] == '{' && (img[8 + hn - 1] == ' ' || img[8 + hn - 1] == '}'), "header padding is spaces");

    dt_st_file *f;
    CHECK_OK(dt_st_open(p, &f));
    if (f) { check_file(f, t); dt_st_close(f); }
    CHECK_OK(dt_st_open_memory(img, len, &f));
    if (f) { check_file(f, t); dt_st_close(f); }
    /* Header-only parse: needs only 8 + N bytes. */
    CHECK_OK(dt_st_parse_header(img, (size_t)(8 + hn), len, &f));
    if (f) {
        CHECK(dt_st_num_tensors(f) == NT, "parse_header tensors");
        float x;
        CHECK_ERR(dt_st_read(f, 9, &x, sizeof x), DT_ERR_STATE, "no data");
        dt_st_close(f);
    }
    CHECK_ERR(dt_st_parse_header(img, (size_t)(8 + hn - 1), len, &f), DT_ERR_INVALID, "header needs");
    free(img);

    /* One-shot save, no metadata, and an empty file (no tensors). */
    const char *p2 = dt_test_path("save.safetensors");
    CHECK_OK(dt_st_save(p2, t, 3, NULL));
    CHECK_OK(dt_st_open(p2, &f));
    if (f) {
        CHECK(dt_st_num_tensors(f) == 3 && dt_st_num_metadata(f) == 0, "save: 3 tensors, no metadata");
        double b[5];
        CHECK_OK(dt_st_read(f, 1, b, sizeof b));
        CHECK(memcmp(b, b_f64, sizeof b) == 0, "save f64 data");
        dt_st_close(f);
    }
    const char *p3 = dt_test_path("none.safetensors");
    CHECK_OK(dt_st_save(p3, NULL, 0, NULL));
    CHECK_OK(dt_st_open(p3, &f));
    if (f) { CHECK(dt_st_num_tensors(f) == 0, "empty file"); dt_st_close(f); }
    /* Overwrite keeps working (rename over an existing file). */
    CHECK_OK(dt_st_save(p2, t + 9, 1, "{}"));
    CHECK_OK(dt_st_open(p2, &f));
    if (f) {
        float s = 0;
        CHECK(dt_st_num_tensors(f) == 1, "overwritten");
        CHECK_OK(dt_st_read(f, 0, &s, sizeof s));
        CHECK(s == 3.25f, "scalar %g", (double)s);
        dt_st_close(f);
    }
}

static void test_writer_errors(void) {
    dt_st_info t[NT];
    fill_tensors(t);
    const char *p = dt_test_path("werr.safetensors");
    dt_st_writer *w = NULL;
    dt_st_info d[2] = {t[0], t[0]};
    CHECK_ERR(dt_st_writer_open(p, d, 2, NULL, &w), DT_ERR_INVALID, "duplicate tensor name");
    d[1].name = "__metadata__";
    CHECK_ERR(dt_st_writer_open(p, d, 2, NULL, &w), DT_ERR_INVALID, "reserved");
    d[1].name = "";
    CHECK_ERR(dt_st_writer_open(p, d, 2, NULL, &w), DT_ERR_INVALID, "no name");
    d[1].name = "bad\xff";
    CHECK_ERR(dt_st_writer_open(p, d, 2, NULL, &w), DT_ERR_INVALID, "UTF-8");
    d[1] = t[1];
    d[1].shape[0] = -1;
    CHECK_ERR(dt_st_writer_open(p, d, 2, NULL, &w), DT_ERR_INVALID, "negative dimension");
    d[1] = t[1];
    d[1].ndim = DT_ST_MAX_DIMS + 1;
    CHECK_ERR(dt_st_writer_open(p, d, 2, NULL, &w), DT_ERR_INVALID, "ndim");
    d[1] = t[1];
    d[1].dtype = (dt_dtype)42;
    CHECK_ERR(dt_st_writer_open(p, d, 2, NULL, &w), DT_ERR_INVALID, "invalid dtype");
    d[1] = t[1];
    d[1].ndim = 3;
    d[1].shape[0] = d[1].shape[1] = d[1].shape[2] = INT64_C(1) << 40;
    CHECK_ERR(dt_st_writer_open(p, d, 2, NULL, &w), DT_ERR_INVALID, "overflow");
    CHECK_ERR(dt_st_writer_open(p, t, NT, "{\"a\": 1}", &w), DT_ERR_INVALID, "not a string");
    CHECK_ERR(dt_st_writer_open(p, t, NT, "{\"a\": \"x\"", &w), DT_ERR_INVALID, "not valid JSON");
    CHECK_ERR(dt_st_writer_open(p, t, NT, "[]", &w), DT_ERR_INVALID, "JSON object");
    CHECK_ERR(dt_st_writer_open(NULL, t, NT, NULL, &w), DT_ERR_INVALID, "path");
    CHECK_ERR(dt_st_writer_open(dt_test_path("no/such/dir.safetensors"), t, NT, NULL, &w), DT_ERR_IO, "cannot create");
    CHECK(count_entries("werr") == 0, "no files left by failed opens");

    /* A previous good file survives an unfinished or aborted write. */
    CHECK_OK(dt_st_save(p, t, 2, NULL));
    CHECK_OK(dt_st_writer_open(p, t, NT, NULL, &w));
    CHECK_OK(dt_st_writer_write(w, 0, t[0].data));
    CHECK_ERR(dt_st_writer_write(w, 1, NULL), DT_ERR_INVALID, "NULL data");
    CHECK_ERR(dt_st_writer_write(w, NT, t[0].data), DT_ERR_INVALID, "out of range");
    CHECK_ERR(dt_st_writer_close(w), DT_ERR_STATE, "never written");
    CHECK(count_entries("werr.safetensors.tmp") == 0, "close failure removes the temporary file");
    CHECK_OK(dt_st_writer_open(p, t, NT, NULL, &w));
    dt_st_writer_abort(w);
    CHECK(count_entries("werr.safetensors.tmp") == 0, "abort removes the temporary file");
    dt_st_file *f;
    CHECK_OK(dt_st_open(p, &f));
    if (f) { CHECK(dt_st_num_tensors(f) == 2, "old file intact"); dt_st_close(f); }
    dt_st_writer_abort(NULL);
    CHECK_OK(dt_st_writer_close(NULL));
}

/* ---- corrupted files ------------------------------------------------------- */
typedef struct bad { const char *name, *header; size_t data; int st; const char *msg; } bad;

static void expect_bad(const char *name, int st, const char *msg) {
    const char *p = dt_test_path(name);
    dt_st_file *f = NULL;
    CHECK_ERR(dt_st_open(p, &f), st, msg);
    CHECK(f == NULL, "%s: no file object on error", name);
    CHECK(strstr(dt_last_error(), p) != NULL, "%s: message '%s' names the file", name, dt_last_error());
}

static void test_corrupt(void) {
    static const bad k_bad[] = {
        {"ok.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 0, NULL},
        {"ok_ws.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}   \n", 4, 0, NULL},
        {"bad_json.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, DT_ERR_IO, "invalid header JSON"},
        {"bad_json2.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,],\"data_offsets\":[0,8]}}", 8, DT_ERR_IO, "invalid header JSON"},
        {"bad_json3.st", "{\"a\":{'dtype':\"F32\"}}", 8, DT_ERR_IO, "invalid header JSON"},
        {"trailing.st", "{} {}", 0, DT_ERR_IO, "line 1, column 4 (byte 4): end of file expected near '{'"},
        {"not_brace.st", " {}", 0, DT_ERR_IO, "does not start with '{'"},
        {"not_object.st", "{\"a\":[1]}", 0, DT_ERR_IO, "not a JSON object"},
        {"dtype.st", "{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, DT_ERR_IO, "unknown dtype 'F33'"},
        {"dtype_lower.st", "{\"a\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, DT_ERR_IO, "unknown dtype"},
        {"dtype_u16.st", "{\"a\":{\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, DT_ERR_UNSUPPORTED, "U16 is not supported"},
        {"shape_size.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, DT_ERR_IO, "shape/size mismatch"},
        {"shape_neg.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, DT_ERR_IO, "shape[0]"},
        {"shape_frac.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, DT_ERR_IO, "shape[0]"},
        {"shape_ovf.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8, DT_ERR_IO, "overflows"},
        {"overlap.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, DT_ERR_IO, "overlap"},
        {"gap.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, DT_ERR_IO, "gap"},
        {"start_late.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, DT_ERR_IO, "gap"},
        {"end_first.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8, DT_ERR_IO, "end before begin"},
        {"offsets3.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", 8, DT_ERR_IO, "data_offsets"},
        {"truncated.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 7, DT_ERR_IO, "truncated"},
        {"extra.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 9, DT_ERR_IO, "unexpected bytes"},
        {"missing_field.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, DT_ERR_IO, "missing field 'data_offsets'"},
        {"unknown_field.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8, DT_ERR_IO, "unknown field"},
        {"dup_key.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, DT_ERR_IO,
                       "line 1, column 57 (byte 57): duplicate object key near '\"a\"'"},
        {"meta_num.st", "{\"__metadata__\":{\"k\":1}}", 0, DT_ERR_IO, "__metadata__"},
        {"meta_arr.st", "{\"__metadata__\":[]}", 0, DT_ERR_IO, "__metadata__ is not a JSON object"},
        {"utf8.st", "{\"\xc0\xaf\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, DT_ERR_IO, "column 2 (byte 2): unable to decode byte 0xc0"},
        {"surrogate.st", "{\"\\ud800\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, DT_ERR_IO, "surrogate"},
        {"nul_name.st", "{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, DT_ERR_IO, "NUL"},
        {"ctrl.st", "{\"a\tb\":{}}", 0, DT_ERR_IO, "control character"},
        {"leading_zero.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", 8, DT_ERR_IO, "column 30 (byte 30): invalid token near '0'"},
    };
    for (size_t k = 0; k < sizeof k_bad / sizeof *k_bad; k++) {
        make_file(dt_test_path(k_bad[k].name), k_bad[k].header, k_bad[k].data);
        if (k_bad[k].st == 0) {
            dt_st_file *f;
            CHECK_OK(dt_st_open(dt_test_path(k_bad[k].name), &f));
            dt_st_close(f);
        } else {
            expect_bad(k_bad[k].name, k_bad[k].st, k_bad[k].msg);
        }
    }
    /* Deep nesting is refused, not a stack overflow. */
    char deep[2100] = "{\"a\":";
    size_t n = strlen(deep);
    for (int i = 0; i < 1000; i++) deep[n++] = '[';
    for (int i = 0; i < 1000; i++) deep[n++] = ']';
    deep[n++] = '}';
    deep[n] = '\0';
    make_file(dt_test_path("deep.st"), deep, 0);
    expect_bad("deep.st", DT_ERR_IO, "nesting deeper");

    /* Header length fields. */
    unsigned char b[64] = {0};
    spit(dt_test_path("short.st"), b, 5);
    expect_bad("short.st", DT_ERR_IO, "truncated");
    spit(dt_test_path("zero.st"), b, 0);
    expect_bad("zero.st", DT_ERR_IO, "truncated");
    b[0] = 60; /* N = 60 > 64 - 8 */
    spit(dt_test_path("hlen.st"), b, 64);
    expect_bad("hlen.st", DT_ERR_IO, "exceeds the file size");
    memset(b, 0, 8);
    b[5] = 1; /* N = 2^40 */
    spit(dt_test_path("hlen_huge.st"), b, 64);
    expect_bad("hlen_huge.st", DT_ERR_IO, "too large");
    memset(b, 0xFF, 8);
    spit(dt_test_path("hlen_max.st"), b, 64);
    expect_bad("hlen_max.st", DT_ERR_IO, "too large");
    memset(b, 0, 8);
    b[0] = 1;
    spit(dt_test_path("hlen_small.st"), b, 64);
    expect_bad("hlen_small.st", DT_ERR_IO, "too small");
    CHECK_ERR(dt_st_open(dt_test_path("does_not_exist.st"), &(dt_st_file *){NULL}), DT_ERR_IO, "does_not_exist.st");
    CHECK_ERR(dt_st_open(g_dir, &(dt_st_file *){NULL}), DT_ERR_IO, "regular file");

    /* Truncating a real file at every length is refused cleanly. */
    dt_st_info t[NT];
    fill_tensors(t);
    const char *p = dt_test_path("trunc_src.st");
    CHECK_OK(dt_st_save(p, t, NT, k_meta));
    size_t len;
    unsigned char *img = slurp(p, &len);
    int refused = 0;
    for (size_t cut = 0; cut < len; cut++) {
        dt_st_file *f = NULL;
        if (dt_st_open_memory(img, cut, &f) != DT_OK) refused++;
        else dt_st_close(f);
    }
    CHECK(refused == (int)len, "every truncation refused (%d of %zu)", refused, len);
    /* Flipping any header byte never crashes (it may or may not stay valid). */
    uint64_t hn = 0;
    for (int k = 7; k >= 0; k--) hn = (hn << 8) | img[k];
    for (size_t i = 0; i < 8 + hn; i++) {
        unsigned char save = img[i];
        for (int bit = 0; bit < 8; bit++) {
            img[i] = (unsigned char)(save ^ (1u << bit));
            dt_st_file *f = NULL;
            if (dt_st_open_memory(img, len, &f) == DT_OK) dt_st_close(f);
        }
        img[i] = save;
    }
    CHECK(1, "bit flips survived");
    free(img);
}

int main(void) {
    if (!(g_dir = dt_test_tmpdir("dtst-"))) return 1;
    test_roundtrip();
    test_writer_errors();
    test_corrupt();
    dt_test_tmpdir_remove();
    return dt_test_finish("ckpt_safetensors");
}
