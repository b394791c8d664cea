/* core_half: f16 and bf16 conversions against references computed in double.
 *  - every one of the 65536 16-bit patterns: decode exactly, round-trip non-NaN
 *  - f32 -> 16-bit rounding (nearest, ties to even, subnormals, overflow to inf,
 *    NaN stays NaN) at every representable value, every midpoint and their f32
 *    neighbours, plus millions of pseudo-random f32 bit patterns. */
#include <math.h>
#include <stdint.h>
#include "testutil.h"

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* ---- references (double arithmetic; independent of the bit tricks) ---- */
static double ref_f16_value(uint16_t h) { /* finite or inf only */
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) v = INFINITY;
    else if (e == 0) v = ldexp((double)m, -24);
    else v = ldexp((double)(1024 + m), e - 25);
    return s ? -v : v;
}
static int f16_is_nan(uint16_t h) { return ((h >> 10) & 31) == 31 && (h & 1023) != 0; }
static int bf16_is_nan(uint16_t h) { return ((h >> 7) & 255) == 255 && (h & 127) != 0; }

static uint16_t ref_f32_to_f16(float f) { /* f not NaN */
    uint16_t sign = (uint16_t)((fbits(f) >> 16) & 0x8000u);
    double a = fabs((double)f);
    if (isinf(a)) return sign | 0x7c00u;
    if (a < ldexp(1.0, -14)) {
        double n = rint(a * 16777216.0); /* exact scaling; rint = nearest even */
        return (uint16_t)(sign | (uint16_t)n);
    }
    int e;
    frexp(a, &e);
    int E = e - 1;
    double n = rint(ldexp(a, 10 - E)); /* in [1024, 2048] */
    if (n == 2048.0) { n = 1024.0; E++; }
    if (E > 15) return sign | 0x7c00u;
    return (uint16_t)(sign | ((E + 15) << 10) | (uint16_t)(n - 1024.0));
}

static int ref_ok = 1;
static uint16_t ref_f32_to_bf16(float f) { /* f not NaN */
    uint16_t sign = (uint16_t)((fbits(f) >> 16) & 0x8000u);
    double a = fabs((double)f);
    if (isinf(a)) return sign | 0x7f80u;
    if (a == 0.0) return sign;
    int e;
    frexp(a, &e);
    int E = e - 1;
    if (E < -126) E = -126; /* subnormal spacing is 2^-133 */
    double r = ldexp(rint(ldexp(a, 7 - E)), E - 7);
    if (r >= ldexp(1.0, 128)) return sign | 0x7f80u;
    uint32_t u = fbits((float)r);
    if ((u & 0xffffu) != 0 || (double)(float)r != r) ref_ok = 0; /* reference sanity */
    return (uint16_t)(sign | (u >> 16));
}

static int nfail_f16 = 0, nfail_bf16 = 0;
static void check_f16(float f) {
    uint16_t got = dt_f32_to_f16(f);
    int ok;
    uint16_t want = 0;
    if (isnan(f)) ok = f16_is_nan(got);
    else { want = ref_f32_to_f16(f); ok = got == want; }
    if (!ok && nfail_f16++ < 20)
        CHECK(0, "dt_f32_to_f16(%.9g = 0x%08x) = 0x%04x, want 0x%04x", (double)f, fbits(f),
              got, want);
}
static void check_bf16(float f) {
    uint16_t got = dt_f32_to_bf16(f);
    int ok;
    uint16_t want = 0;
    if (isnan(f)) ok = bf16_is_nan(got);
    else { want = ref_f32_to_bf16(f); ok = got == want; }
    if (!ok && nfail_bf16++ < 20)
        CHECK(0, "dt_f32_to_bf16(%.9g = 0x%08x) = 0x%04x, want 0x%04x", (double)f, fbits(f),
              got, want);
}
static void check_both(float f) { check_f16(f); check_bf16(f); }
static void check_around(float f) {
    check_both(f);
    check_both(nextafterf(f, 0.0f));
    check_both(nextafterf(f, f < 0 ? -INFINITY : INFINITY));
}

static uint64_t xs = 0x9e3779b97f4a7c15ull;
static uint32_t rnd32(void) {
    xs ^= xs << 13; xs ^= xs >> 7; xs ^= xs << 17;
    return (uint32_t)(xs >> 32);
}

int main(void) {
    /* ---- f16: all 65536 patterns ---- */
    int dec_bad = 0, rt_bad = 0, nan_bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = dt_f16_to_f32((uint16_t)h);
        if (f16_is_nan((uint16_t)h)) {
            if (!isnan(f) && nan_bad++ < 5) CHECK(0, "f16 0x%04x (NaN) decoded to %g", h, (double)f);
            uint16_t back = dt_f32_to_f16(f);
            if (!f16_is_nan(back) && nan_bad++ < 5)
                CHECK(0, "f16 NaN 0x%04x round-tripped to 0x%04x", h, back);
            continue;
        }
        double want = ref_f16_value((uint16_t)h);
        if (((double)f != want || !!signbit(f) != !!signbit(want)) && dec_bad++ < 5)
            CHECK(0, "dt_f16_to_f32(0x%04x) = %.9g, want %.9g", h, (double)f, want);
        uint16_t back = dt_f32_to_f16(f);
        if (back != h && rt_bad++ < 5)
            CHECK(0, "f16 round trip 0x%04x -> %.9g -> 0x%04x", h, (double)f, back);
    }
    CHECK(dec_bad == 0, "%d f16 patterns decoded wrongly", dec_bad);
    CHECK(rt_bad == 0, "%d f16 patterns failed the round trip", rt_bad);
    CHECK(nan_bad == 0, "%d f16 NaN patterns lost NaN-ness", nan_bad);

    /* ---- bf16: all 65536 patterns (bf16 is the top half of an f32) ---- */
    dec_bad = rt_bad = nan_bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = dt_bf16_to_f32((uint16_t)h);
        if (bf16_is_nan((uint16_t)h)) {
            if ((!isnan(f) || !bf16_is_nan(dt_f32_to_bf16(f))) && nan_bad++ < 5)
                CHECK(0, "bf16 NaN 0x%04x -> %g -> 0x%04x", h, (double)f, dt_f32_to_bf16(f));
            continue;
        }
        if (fbits(f) != h << 16 && dec_bad++ < 5)
            CHECK(0, "dt_bf16_to_f32(0x%04x) has bits 0x%08x, want 0x%08x", h, fbits(f), h << 16);
        uint16_t back = dt_f32_to_bf16(f);
        if (back != h && rt_bad++ < 5)
            CHECK(0, "bf16 round trip 0x%04x -> %.9g -> 0x%04x", h, (double)f, back);
    }
    CHECK(dec_bad == 0, "%d bf16 patterns decoded wrongly", dec_bad);
    CHECK(rt_bad == 0, "%d bf16 patterns failed the round trip", rt_bad);
    CHECK(nan_bad == 0, "%d bf16 NaN patterns lost NaN-ness", nan_bad);

    /* ---- rounding at every f16 value and midpoint (both signs) ---- */
    for (uint32_t h = 0; h < 0x7c00u; h++) {
        double v = ref_f16_value((uint16_t)h);
        double next = (h + 1 < 0x7c00u) ? ref_f16_value((uint16_t)(h + 1)) : 65536.0;
        double mid = (v + next) / 2; /* 12 significant bits: exact in f32 */
        check_around((float)v);
        check_around((float)-v);
        check_around((float)mid);
        check_around((float)-mid);
    }
    /* ---- rounding at every bf16 value and midpoint ---- */
    for (uint32_t h = 0; h < 0x7f80u; h++) {
        check_around(bitsf(h << 16));
        check_around(bitsf((h << 16) | 0x80000000u));
        check_around(bitsf((h << 16) + 0x8000u));
        check_around(bitsf(((h << 16) + 0x8000u) | 0x80000000u));
    }
    /* ---- random f32 bit patterns: whole range, then near the f16 range ---- */
    for (int i = 0; i < (1 << 23); i++) check_both(bitsf(rnd32()));
    for (int i = 0; i < (1 << 22); i++) {
        uint32_t u = rnd32();
        uint32_t ex = 100u + (u >> 26) % 45u; /* f32 exponents 100..144 */
        check_both(bitsf((u & 0x807fffffu) | (ex << 23)));
    }
    /* ---- named edge cases ---- */
    static const struct { float f; uint16_t h; } f16_cases[] = {
        {0.0f, 0x0000}, {-0.0f, 0x8000}, {1.0f, 0x3c00}, {-2.0f, 0xc000},
        {65504.0f, 0x7bff}, {65519.99f, 0x7bff}, {65520.0f, 0x7c00}, {-65520.0f, 0xfc00},
        {1e10f, 0x7c00}, {-1e30f, 0xfc00}, {INFINITY, 0x7c00}, {-INFINITY, 0xfc00},
        {0x1p-24f, 0x0001}, {0x1p-25f, 0x0000}, {0x1.000002p-25f, 0x0001},
        {0x3p-25f, 0x0002}, {0x5p-25f, 0x0002}, {0x1p-14f, 0x0400}, {0x1.ff8p-15f, 0x03ff}, {0x1.ffcp-15f, 0x0400},
        {0x1.ffep-15f, 0x0400}, {1e-40f, 0x0000}, {-1e-40f, 0x8000},
        {1.0f + 0x1p-11f, 0x3c00}, {1.0f + 0x3p-11f, 0x3c02}, {2049.0f, 0x6800},
        {2051.0f, 0x6802}};
    for (size_t k = 0; k < sizeof f16_cases / sizeof f16_cases[0]; k++) {
        uint16_t got = dt_f32_to_f16(f16_cases[k].f);
        CHECK(got == f16_cases[k].h, "dt_f32_to_f16(%a) = 0x%04x, want 0x%04x",
              (double)f16_cases[k].f, got, f16_cases[k].h);
    }
    static const struct { uint32_t f; uint16_t h; } bf16_cases[] = {
        {0x3f800000u, 0x3f80}, {0x3f808000u, 0x3f80}, {0x3f818000u, 0x3f82},
        {0x3f808001u, 0x3f81}, {0x7f7fffffu, 0x7f80}, {0x7f7f7fffu, 0x7f7f},
        {0x7f7f8000u, 0x7f80}, {0xff7f8000u, 0xff80}, {0x00000001u, 0x0000},
        {0x00008000u, 0x0000}, {0x00018000u, 0x0002}, {0x00008001u, 0x0001},
        {0x80000000u, 0x8000}, {0x7f800000u, 0x7f80}, {0xff800000u, 0xff80}};
    for (size_t k = 0; k < sizeof bf16_cases / sizeof bf16_cases[0]; k++) {
        uint16_t got = dt_f32_to_bf16(bitsf(bf16_cases[k].f));
        CHECK(got == bf16_cases[k].h, "dt_f32_to_bf16(0x%08x) = 0x%04x, want 0x%04x",
              bf16_cases[k].f, got, bf16_cases[k].h);
    }
    /* NaNs of every shape stay NaN (payload only in the low bits included: a plain
     * truncation would turn those into infinities). */
    static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u,
                                    0x7f801fffu, 0x7f802000u, 0x7f80ffffu, 0x7fffffffu,
                                    0xffffffffu, 0x7fa00000u};
    for (size_t k = 0; k < sizeof nans / sizeof nans[0]; k++) {
        uint16_t h = dt_f32_to_f16(bitsf(nans[k])), b = dt_f32_to_bf16(bitsf(nans[k]));
        CHECK(f16_is_nan(h), "dt_f32_to_f16(NaN 0x%08x) = 0x%04x", nans[k], h);
        CHECK(bf16_is_nan(b), "dt_f32_to_bf16(NaN 0x%08x) = 0x%04x", nans[k], b);
    }
    for (int i = 0; i < 100000; i++) { /* random NaN payloads */
        uint32_t u = rnd32() | 0x7f800000u;
        if ((u & 0x7fffffu) == 0) u |= 1;
        check_both(bitsf(u));
    }
    CHECK(nfail_f16 == 0, "%d f32->f16 conversions disagree with the reference", nfail_f16);
    CHECK(nfail_bf16 == 0, "%d f32->bf16 conversions disagree with the reference", nfail_bf16);
    CHECK(ref_ok, "internal: bf16 reference produced a non-bf16 value");
    return dt_test_finish("core_half");
}
