/* tests/nn/test_gpt_math.c - the gpt kernels' shared scalar arithmetic
 * (src/nn/gpt_math.h, compiled here as C; the CUDA kernels compile the same
 * functions for the device) against dtrain's CPU definitions:
 *  - the kernels' bfloat16 rounding (core/bf16.h, the one definition that
 *    dt_f32_to_bf16 also is: core_half checks it against a double
 *    reference on every class of float) on named values - zeros, ties,
 *    overflow to inf, inf, NaN, subnormals - and dt_bf16_widen inverting it
 *    on every bfloat16;
 *  - dt_gelu / dt_gelu_backward against gpt_gelu_forward /
 *    gpt_gelu_backward on [-20, 20] and random inputs. The bound: the two
 *    differ only in their exp (the C library's expf vs dt_nn_expf, each a
 *    few ulp), so the results differ by at most GELU_ULPS units in the last
 *    place of the result (forward) and of max(|result|, |dout|) (backward:
 *    gelu' crosses zero near x = -0.75, where its two terms, each of the
 *    order of 0.2, cancel and their rounding, not the exp, sets the error);
 *  - the online softmax pairs (push, merge in random groupings) against a
 *    float64 log-sum-exp: within 2e-6 + 1e-6 |lse| for rows up to 5000
 *    values of spread up to 100, the special cases (empty, -inf values, a
 *    NaN), and merge(a, b) == merge(b, a) to the bit (what a warp's
 *    butterfly merges rely on for every lane to end with the same pair). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "dtrain/dtype.h"
#include "dtrain/rng.h"
#include "nn/gpt_internal.h"
#include "nn/gpt_math.h"

#define GELU_ULPS 8.0

/* ---- bfloat16 ------------------------------------------------------------------- */

static void test_bf16(void) {
    CHECK(dt_bf16_round(0.0f) == 0x0000u && dt_bf16_round(-0.0f) == 0x8000u, "zeros");
    CHECK(dt_bf16_round(1.0f + 0x1p-8f) == 0x3f80u, "tie to even (down)");
    CHECK(dt_bf16_round(1.0f + 3 * 0x1p-8f) == 0x3f82u, "tie to even (up)");
    CHECK(dt_bf16_round(FLT_MAX) == 0x7f80u, "FLT_MAX rounds to inf");
    CHECK(dt_bf16_round(INFINITY) == 0x7f80u && dt_bf16_round(-INFINITY) == 0xff80u, "inf");
    CHECK(isnan(dt_bf16_widen(dt_bf16_round(NAN))), "NaN stays NaN");
    CHECK(dt_bf16_round(0x1p-149f) == 0x0000u && dt_bf16_round(0x1p-133f) == 0x0001u,
          "subnormals: the smallest rounds to 0, 2^-133 is the smallest bfloat16");
    long wbad = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float f = dt_bf16_widen((uint16_t)h);
        if (f != f) continue; /* NaN: quieted, checked above */
        wbad += dt_bf16_round(f) != h || dt_bf16_to_f32((uint16_t)h) != f;
    }
    CHECK(wbad == 0, "widen: %ld bfloat16 values do not round-trip", wbad);
}

/* ---- GELU ----------------------------------------------------------------------- */

/* |a - b| in units of the last place of max(|b|, floor) */
static double ulps(float a, float b, double floor) {
    if (a == b) return 0.0;
    if (a != a || b != b) return INFINITY;
    double m = fmax(fabs((double)b), floor);
    int e;
    frexp(m, &e);
    return fabs((double)a - (double)b) / ldexp(1.0, e - 24);
}

static void test_gelu(void) {
    enum { n = 200001 };
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    float *dy = malloc(n * sizeof(float)), *dx = malloc(n * sizeof(float));
    dt_rng r;
    dt_rng_seed(&r, 12);
    for (int i = 0; i < n; i++) {
        x[i] = i < n / 2 ? -20.0f + 40.0f * (float)i / (float)(n / 2) : (float)(dt_rng_normal(&r) * 3.0);
        dy[i] = (float)dt_rng_normal(&r);
    }
    gpt_gelu_forward(y, x, n);
    gpt_gelu_backward(dx, x, dy, n);
    double wf = 0.0, wb = 0.0;
    int at_f = 0, at_b = 0;
    for (int i = 0; i < n; i++) {
        double ef = ulps(dt_gelu_tanh(x[i]), y[i], 0x1p-126);
        double eb = ulps(dt_gelu_tanh_grad(x[i], dy[i]), dx[i], fabs((double)dy[i]));
        if (ef > wf) wf = ef, at_f = i;
        if (eb > wb) wb = eb, at_b = i;
    }
    CHECK(wf <= GELU_ULPS, "gelu: %.1f ulp at x=%g", wf, (double)x[at_f]);
    CHECK(wb <= GELU_ULPS, "gelu backward: %.1f ulp at x=%g", wb, (double)x[at_b]);
    printf("test_gpt_math: gelu vs gpt_gelu_forward: %.1f ulp, backward: %.1f ulp at most (bound %.0f)\n",
           wf, wb, GELU_ULPS);
    /* the tails and the specials */
    CHECK(dt_gelu_tanh(-100.0f) == 0.0f && dt_gelu_tanh(100.0f) == 100.0f, "saturated tails");
    CHECK(dt_gelu_tanh(INFINITY) == INFINITY && isnan(dt_gelu_tanh(NAN)), "inf, NaN");
    CHECK(dt_gelu_tanh_grad(100.0f, 2.0f) == 2.0f && dt_gelu_tanh_grad(-100.0f, 2.0f) == 0.0f,
          "derivative in the tails");
    free(x);
    free(y);
    free(dy);
    free(dx);
}

/* ---- online softmax --------------------------------------------------------------- */

/* the pair of x[lo, hi) by a random split into parts merged in a random order */
static dt_softmax_acc split_merge(const float *x, int lo, int hi, dt_rng *r) {
    if (hi - lo <= 8 || dt_rng_below(r, 4) == 0) {
        dt_softmax_acc a = dt_softmax_empty();
        for (int i = lo; i < hi; i++) a = dt_softmax_push(a, x[i]);
        return a;
    }
    int mid = lo + 1 + (int)dt_rng_below(r, (uint64_t)(hi - lo - 1));
    dt_softmax_acc a = split_merge(x, lo, mid, r), b = split_merge(x, mid, hi, r);
    return dt_rng_below(r, 2) ? dt_softmax_merge(a, b) : dt_softmax_merge(b, a);
}

static void test_softmax(void) {
    enum { maxn = 5000 };
    float *x = malloc(maxn * sizeof(float));
    dt_rng r;
    dt_rng_seed(&r, 13);
    static const double spread[] = {0.01, 1.0, 10.0, 100.0};
    double worst = 0.0;
    for (int trial = 0; trial < 400; trial++) {
        int n = 1 + (int)dt_rng_below(&r, trial < 200 ? 64 : maxn);
        double sp = spread[trial % 4], off = dt_rng_normal(&r) * 50.0;
        for (int i = 0; i < n; i++) x[i] = (float)(off + dt_rng_normal(&r) * sp);
        double mx = -INFINITY, s = 0.0;
        for (int i = 0; i < n; i++) mx = fmax(mx, (double)x[i]);
        for (int i = 0; i < n; i++) s += exp((double)x[i] - mx);
        double ref = mx + log(s);
        double got = dt_softmax_lse(split_merge(x, 0, n, &r));
        double e = fabs(got - ref) / (2e-6 + 1e-6 * fabs(ref));
        if (e > worst) worst = e;
    }
    CHECK(worst <= 1.0, "online softmax lse off by %.2f of the bound", worst);
    /* the specials */
    dt_softmax_acc e = dt_softmax_empty();
    CHECK(dt_softmax_lse(e) == -INFINITY, "empty: lse -inf");
    CHECK(dt_softmax_merge(e, e).m == -INFINITY && dt_softmax_merge(e, e).s == 0.0f, "empty + empty");
    dt_softmax_acc a = dt_softmax_push(e, 2.0f);
    CHECK(a.m == 2.0f && a.s == 1.0f, "one value");
    CHECK(dt_softmax_push(a, -INFINITY).s == 1.0f, "-inf adds nothing");
    dt_softmax_acc m1 = dt_softmax_merge(a, e), m2 = dt_softmax_merge(e, a);
    CHECK(m1.m == 2.0f && m1.s == 1.0f && m2.m == 2.0f && m2.s == 1.0f, "merge with empty");
    CHECK(isnan(dt_softmax_push(a, NAN).s), "NaN propagates");
    /* symmetric to the bit */
    long asym = 0;
    for (int i = 0; i < 100000; i++) {
        dt_softmax_acc p = {(float)dt_rng_normal(&r), (float)(1.0 + 100.0 * dt_rng_uniform_f64(&r))};
        dt_softmax_acc q = {i % 7 ? (float)dt_rng_normal(&r) : p.m, (float)(1.0 + 100.0 * dt_rng_uniform_f64(&r))};
        dt_softmax_acc pq = dt_softmax_merge(p, q), qp = dt_softmax_merge(q, p);
        asym += pq.m != qp.m || pq.s != qp.s;
    }
    CHECK(asym == 0, "merge(a, b) != merge(b, a) for %ld pairs", asym);
    free(x);
}

int main(void) {
    test_bf16();
    test_gelu();
    test_softmax();
    return dt_test_finish("test_gpt_math");
}
