/* bench/dtrain-bench/bench_data.c - test data for dtrain-bench.
 *
 * Every element is a small integer derived from (seed, rank, global index) by
 * a hash, stored in the dtype. Ranges are chosen per dtype, op and group size
 * so that the reduction is exact whatever the order of operations and the
 * result is representable in the dtype (also when f16/bf16 are accumulated in
 * f32 and rounded once):
 *   sum       values in [-m, m] with n*m <= lim(dtype)
 *   avg       integers: as sum, expected = sum / n truncated toward zero;
 *             floats: base(i) + offset(rank, i), offsets cancel in rank pairs,
 *             so sum = n*base and the average is exactly base
 *   prod      +-1 or +-2, 2 only on the first kmax ranks: exact powers of two
 *   min/max   and data movement: wide range [-M, M]
 * No generated value equals the sentinel written into output buffers. */
#include <stdio.h>
#include <string.h>
#include "bench.h"

/* Largest |value| of a result we allow per dtype (exact and != sentinel). */
static int64_t dtype_lim(dt_dtype dt) {
    switch (dt) {
    case DT_I8: return 120;
    case DT_U8: return 250;
    case DT_F16: return 2048;   /* integers exact up to 2^11 */
    case DT_BF16: return 256;   /* integers exact up to 2^8 */
    case DT_F32: return (int64_t)1 << 24;
    case DT_I32: return (int64_t)1 << 30;
    case DT_F64:
    case DT_I64: return (int64_t)1 << 50;
    default: return 1;
    }
}

/* Exponent bound for products of 2s (|result| <= 2^kmax exact, in range). */
static int dtype_kmax(dt_dtype dt) {
    switch (dt) {
    case DT_I8: return 6;
    case DT_U8: return 7;
    case DT_F16: return 15;
    case DT_BF16: return 30;
    case DT_F32: return 30;
    case DT_I32: return 30;
    case DT_F64: return 60;
    case DT_I64: return 62;
    default: return 0;
    }
}

#define SUM_CAP 1000  /* keep summands small even for wide dtypes */

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27; x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static inline uint64_t hash3(uint64_t seed, uint64_t stream, uint64_t idx) {
    uint64_t k = mix64(seed * 0x9E3779B97F4A7C15ULL + (stream + 1) * 0xD1B54A32D192ED03ULL);
    return mix64(k ^ (idx * 0xC2B2AE3D27D4EB4FULL + 0x165667B19E3779F9ULL));
}

static inline int64_t in_range(uint64_t h, int64_t m, int has_sign) {
    if (m <= 0) return 0;
    if (has_sign) return (int64_t)(h % (uint64_t)(2 * m + 1)) - m;
    return (int64_t)(h % (uint64_t)(m + 1));
}

void bench_gen_init(bench_gen *g, dt_dtype dtype, int op, int nranks, uint64_t seed) {
    memset(g, 0, sizeof *g);
    g->dtype = dtype;
    g->op = (dt_op)op;
    g->nranks = nranks < 1 ? 1 : nranks;
    g->has_sign = dtype != DT_U8;
    g->seed = seed;
    int64_t lim = dtype_lim(dtype);
    int is_float = dtype == DT_F32 || dtype == DT_F64 || dtype == DT_F16 || dtype == DT_BF16;
    if (op < 0 || op == DT_MIN || op == DT_MAX) {
        g->kind = G_MOVE;
        g->m = lim;
    } else if (op == DT_PROD) {
        g->kind = G_PROD;
        g->kmax = dtype_kmax(dtype);
    } else if (op == DT_AVG && is_float) {
        g->kind = G_AVGF;
        int64_t m = lim / (2 * (int64_t)g->nranks);
        g->m = m > SUM_CAP ? SUM_CAP : m;
    } else { /* sum, integer avg */
        g->kind = G_SUM;
        int64_t m = lim / g->nranks;
        g->m = m > SUM_CAP ? SUM_CAP : m;
        g->lim = lim;
    }
}

int64_t bench_gen_value(const bench_gen *g, int q, uint64_t idx) {
    uint64_t h = hash3(g->seed, (uint64_t)q, idx);
    switch (g->kind) {
    case G_MOVE:
        return in_range(h, g->m, g->has_sign);
    case G_SUM:
        if (g->m >= 1) return in_range(h, g->m, g->has_sign);
        return (q < g->lim && (h & 1)) ? 1 : 0; /* huge groups: 0/1 */
    case G_AVGF: {
        /* stream offsets keep base/offset hashes apart from the per-rank ones */
        const uint64_t base_stream = 1u << 30, pair_stream = 1u << 31;
        int64_t base = in_range(hash3(g->seed, base_stream, idx), g->m, 1);
        int pair = q / 2;
        int64_t off = 0;
        if (!(q == g->nranks - 1 && (g->nranks & 1))) {
            off = in_range(hash3(g->seed, pair_stream + (uint64_t)pair, idx), g->m, 1);
            if (q & 1) off = -off;
        }
        return base + off;
    }
    case G_PROD: {
        int64_t v = (q < g->kmax && ((h >> 1) & 3) == 0) ? 2 : 1;
        if (g->has_sign && (h & 1)) v = -v;
        return v;
    }
    }
    return 0;
}

int64_t bench_gen_expected(const bench_gen *g, uint64_t idx) {
    int n = g->nranks;
    int64_t acc = bench_gen_value(g, 0, idx);
    for (int q = 1; q < n; q++) {
        int64_t v = bench_gen_value(g, q, idx);
        switch (g->op) {
        case DT_SUM: case DT_AVG: acc += v; break;
        case DT_PROD: acc *= v; break;
        case DT_MIN: if (v < acc) acc = v; break;
        case DT_MAX: if (v > acc) acc = v; break;
        default: break;
        }
    }
    if (g->op == DT_AVG) acc /= n; /* C division truncates toward zero */
    return acc;
}

void bench_store(dt_dtype dtype, void *buf, size_t i, int64_t v) {
    unsigned char *p = buf;
    switch (dtype) {
    case DT_F32: { float f = (float)v; memcpy(p + 4 * i, &f, 4); break; }
    case DT_F64: { double d = (double)v; memcpy(p + 8 * i, &d, 8); break; }
    case DT_F16: { uint16_t h = dt_f32_to_f16((float)v); memcpy(p + 2 * i, &h, 2); break; }
    case DT_BF16: { uint16_t h = dt_f32_to_bf16((float)v); memcpy(p + 2 * i, &h, 2); break; }
    case DT_I8: { int8_t x = (int8_t)v; memcpy(p + i, &x, 1); break; }
    case DT_U8: { uint8_t x = (uint8_t)v; memcpy(p + i, &x, 1); break; }
    case DT_I32: { int32_t x = (int32_t)v; memcpy(p + 4 * i, &x, 4); break; }
    case DT_I64: { memcpy(p + 8 * i, &v, 8); break; }
    default: break;
    }
}

void bench_fill_sentinel(dt_dtype dtype, void *buf, size_t count) {
    unsigned char pat[8];
    size_t es = dt_dtype_size(dtype);
    switch (dtype) {
    case DT_F32: { uint32_t u = 0x7fc0dead; memcpy(pat, &u, 4); break; }     /* NaN */
    case DT_F64: { uint64_t u = 0x7ff8deaddeadbeefULL; memcpy(pat, &u, 8); break; }
    case DT_F16: { uint16_t u = 0x7e5a; memcpy(pat, &u, 2); break; }
    case DT_BF16: { uint16_t u = 0x7fda; memcpy(pat, &u, 2); break; }
    case DT_I8: { int8_t x = 127; memcpy(pat, &x, 1); break; }
    case DT_U8: { uint8_t x = 255; memcpy(pat, &x, 1); break; }
    case DT_I32: { int32_t x = INT32_MAX; memcpy(pat, &x, 4); break; }
    case DT_I64: { int64_t x = INT64_MAX; memcpy(pat, &x, 8); break; }
    default: return;
    }
    unsigned char *p = buf;
    for (size_t i = 0; i < count; i++) memcpy(p + i * es, pat, es);
}

void bench_fill(const bench_gen *g, void *buf, size_t count, uint64_t gbase, int q) {
    for (size_t i = 0; i < count; i++)
        bench_store(g->dtype, buf, i, bench_gen_value(g, q, gbase + i));
}

double bench_load(dt_dtype dtype, const void *buf, size_t i) {
    const unsigned char *p = buf;
    switch (dtype) {
    case DT_F32: { float f; memcpy(&f, p + 4 * i, 4); return f; }
    case DT_F64: { double d; memcpy(&d, p + 8 * i, 8); return d; }
    case DT_F16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return dt_f16_to_f32(h); }
    case DT_BF16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return dt_bf16_to_f32(h); }
    case DT_I8: { int8_t x; memcpy(&x, p + i, 1); return x; }
    case DT_U8: { uint8_t x; memcpy(&x, p + i, 1); return x; }
    case DT_I32: { int32_t x; memcpy(&x, p + 4 * i, 4); return x; }
    case DT_I64: { int64_t x; memcpy(&x, p + 8 * i, 8); return (double)x; }
    default: return 0;
    }
}

bench_mismatch bench_first_bad;

void bench_mismatch_reset(void) { memset(&bench_first_bad, 0, sizeof bench_first_bad); }

static void note_bad(dt_dtype dt, const char *what, size_t i, const unsigned char *want,
                     const unsigned char *got) {
    if (bench_first_bad.have) return;
    size_t es = dt_dtype_size(dt);
    bench_first_bad.have = 1;
    snprintf(bench_first_bad.what, sizeof bench_first_bad.what, "%s", what ? what : "?");
    bench_first_bad.index = i;
    bench_first_bad.want = bench_load(dt, want, 0);
    bench_first_bad.got = bench_load(dt, got, 0);
    bench_first_bad.want_bits = 0;
    bench_first_bad.got_bits = 0;
    memcpy(&bench_first_bad.want_bits, want, es); /* little endian: low bytes */
    memcpy(&bench_first_bad.got_bits, got, es);
}

size_t bench_check_move(const bench_gen *g, const void *buf, size_t count, uint64_t gbase,
                        int q, const char *what) {
    size_t es = dt_dtype_size(g->dtype), wrong = 0;
    const unsigned char *p = buf;
    unsigned char want[8];
    for (size_t i = 0; i < count; i++) {
        bench_store(g->dtype, want, 0, bench_gen_value(g, q, gbase + i));
        if (memcmp(p + i * es, want, es) != 0) {
            if (!wrong) note_bad(g->dtype, what, i, want, p + i * es);
            wrong++;
        }
    }
    return wrong;
}

size_t bench_check_reduce(const bench_gen *g, const void *buf, size_t count,
                          uint64_t gbase, const char *what) {
    size_t es = dt_dtype_size(g->dtype), wrong = 0;
    const unsigned char *p = buf;
    unsigned char want[8];
    for (size_t i = 0; i < count; i++) {
        bench_store(g->dtype, want, 0, bench_gen_expected(g, gbase + i));
        if (memcmp(p + i * es, want, es) != 0) {
            if (!wrong) note_bad(g->dtype, what, i, want, p + i * es);
            wrong++;
        }
    }
    return wrong;
}
