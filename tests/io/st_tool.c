/* io_st_tool: helper for check_safetensors.py.
 *   io_st_tool write PATH   writes the reference file (values documented in
 *                             check_safetensors.py, tensors written in reverse
 *                             order through the streaming writer)
 *   io_st_tool dump PATH    reads PATH with the strict reader and prints
 *                             "META key=value" lines, then one line per tensor:
 *                             name dtype shape(d0,d1,..) values...
 *                             (floats %.9g / %.17g for F64, integers %lld);
 *                             on error prints the message to stderr, exits 1. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dtrain/safetensors.h"
#include "dtrain/status.h"

static int do_write(const char *path) {
    static float a[6];
    static double b[4];
    static uint16_t c[3], d[4];
    static int8_t e[5];
    static uint8_t f[8];
    static int32_t g[3] = {INT32_MIN, 0, INT32_MAX};
    static int64_t h[2] = {-(INT64_C(1) << 62), (INT64_C(1) << 62) + 5};
    static float s = 3.25f;
    for (int i = 0; i < 6; i++) a[i] = (float)i * 0.5f - 1.0f;
    for (int i = 0; i < 4; i++) b[i] = i / 3.0;
    const float cv[3] = {1.5f, -2.0f, 0.25f}, dv[4] = {1.0f, -0.5f, 3.0f, 256.0f};
    for (int i = 0; i < 3; i++) c[i] = dt_f32_to_f16(cv[i]);
    for (int i = 0; i < 4; i++) d[i] = dt_f32_to_bf16(dv[i]);
    for (int i = 0; i < 5; i++) e[i] = (int8_t)(i * 30 - 60);
    for (int i = 0; i < 8; i++) f[i] = (uint8_t)(i * 30);
    const dt_st_info t[] = {
        {.name = "a.f32", .dtype = DT_F32, .ndim = 2, .shape = {2, 3}, .data = a},
        {.name = "b.f64", .dtype = DT_F64, .ndim = 1, .shape = {4}, .data = b},
        {.name = "c.f16", .dtype = DT_F16, .ndim = 1, .shape = {3}, .data = c},
        {.name = "d.bf16", .dtype = DT_BF16, .ndim = 2, .shape = {2, 2}, .data = d},
        {.name = "e.i8", .dtype = DT_I8, .ndim = 1, .shape = {5}, .data = e},
        {.name = "f.u8", .dtype = DT_U8, .ndim = 3, .shape = {2, 2, 2}, .data = f},
        {.name = "g.i32", .dtype = DT_I32, .ndim = 1, .shape = {3}, .data = g},
        {.name = "h.i64", .dtype = DT_I64, .ndim = 1, .shape = {2}, .data = h},
        {.name = "scalar", .dtype = DT_F32, .ndim = 0, .data = &s},
        {.name = "empty", .dtype = DT_F32, .ndim = 2, .shape = {0, 4}, .data = NULL},
    };
    int n = (int)(sizeof t / sizeof *t);
    dt_st_writer *w;
    int rc = dt_st_writer_open(path, t, n, "{\"format\": \"pt\", \"note\": \"dtrain \\\"quoted\\\" \\u00e9\"}", &w);
    for (int i = n - 1; i >= 0 && !rc; i--) rc = dt_st_writer_write(w, i, t[i].data);
    if (rc) {
        dt_st_writer_abort(w);
    } else {
        rc = dt_st_writer_close(w);
    }
    if (rc) {
        fprintf(stderr, "%s\n", dt_last_error());
        return 1;
    }
    return 0;
}

static int do_dump(const char *path) {
    dt_st_file *f;
    if (dt_st_open(path, &f) != DT_OK) {
        fprintf(stderr, "%s\n", dt_last_error());
        return 1;
    }
    for (int i = 0; i < dt_st_num_metadata(f); i++) {
        const char *k, *v;
        dt_st_metadata_at(f, i, &k, &v);
        printf("META %s=%s\n", k, v);
    }
    for (int i = 0; i < dt_st_num_tensors(f); i++) {
        dt_st_info info;
        uint64_t nb;
        dt_st_tensor_info(f, i, &info, &nb, NULL);
        unsigned char *buf = malloc(nb ? (size_t)nb : 1);
        if (!buf || dt_st_read(f, i, buf, (size_t)nb) != DT_OK) {
            fprintf(stderr, "%s\n", dt_last_error());
            free(buf);
            dt_st_close(f);
            return 1;
        }
        printf("%s %s (", info.name, dt_st_dtype_name(info.dtype));
        for (int d = 0; d < info.ndim; d++) printf("%s%" PRId64, d ? "," : "", info.shape[d]);
        printf(")");
        size_t es = dt_dtype_size(info.dtype), ne = (size_t)nb / es;
        for (size_t k = 0; k < ne; k++) {
            const unsigned char *p = buf + k * es;
            float x;
            double y;
            uint16_t u16;
            int32_t i32;
            int64_t i64;
            switch (info.dtype) {
            case DT_F32: memcpy(&x, p, 4); printf(" %.9g", (double)x); break;
            case DT_F64: memcpy(&y, p, 8); printf(" %.17g", y); break;
            case DT_F16: memcpy(&u16, p, 2); printf(" %.9g", (double)dt_f16_to_f32(u16)); break;
            case DT_BF16: memcpy(&u16, p, 2); printf(" %.9g", (double)dt_bf16_to_f32(u16)); break;
            case DT_I8: printf(" %d", (int)(int8_t)p[0]); break;
            case DT_U8: printf(" %d", (int)p[0]); break;
            case DT_I32: memcpy(&i32, p, 4); printf(" %" PRId32, i32); break;
            case DT_I64: memcpy(&i64, p, 8); printf(" %" PRId64, i64); break;
            default: break;
            }
        }
        printf("\n");
        free(buf);
    }
    dt_st_close(f);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "write") == 0) return do_write(argv[2]);
    if (argc == 3 && strcmp(argv[1], "dump") == 0) return do_dump(argv[2]);
    fprintf(stderr, "usage: %s write|dump PATH\n", argv[0]);
    return 2;
}
