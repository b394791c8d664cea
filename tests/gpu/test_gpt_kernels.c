/* tests/gpu/test_gpt_kernels.c - every op of gpt_backend_cuda against the
 * same op of gpt_backend_cpu (the CPU GPT's kernels; for bf16, which the cpu
 * backend does not compute, its f32 ops on the same bf16-rounded inputs), in
 * both precisions, at several shapes: T not a multiple of 32, N = 1, C = 36
 * (heads of 12: no 16-byte packs in bf16, unaligned rows), GPT-2's
 * vocabulary 50257 with its padding to 50304, whole 64-wide heads, and N =
 * 1120 rows of C = 288 (the column sums split over rows, grid-stride loops
 * that wrap, rows walked in several rounds).
 *
 * For each call: fresh random inputs; outputs that are written ("=") are
 * poisoned with NaN first, so an element left unwritten fails; outputs
 * accumulated into ("+=") start from random values; the padding columns of
 * a strided output stay poisoned (never written) and those of a strided
 * input hold NaN (never read). Each op runs twice: the same bits
 * (determinism). Bounds, relative L2 error against the reference:
 *   f32   1e-5 (every op: at these sizes the f32 reductions, in another
 *         order than the CPU's, and CUDA's expf stay near 1e-6), and the
 *         embedding backward bit-identical (the CPU's order of additions);
 *   bf16  1e-2 (bf16 outputs carry 2^-9 relative rounding; the attention
 *         also rounds its scores, probabilities and head outputs, as llm.c).
 * Also: memory (zeroed allocation, copies, an allocation too large naming
 * its tensor), the f32 -> bf16 cast (dt_f32_to_bf16's bits), vocab_pad and
 * attention_sizes. Last, a small GPT trained two steps on this backend
 * against the CPU model (test_model). Built twice (tests/gpu,
 * tests/fakegpu): on a GPU, and on the fake runtime, whose twins compute
 * with the CPU kernels. Without a device: skipped (77) naming why. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "gpu_common.h"
#include "testutil.h"
#include "dtrain/dtype.h"
#include "dtrain/model.h"
#include "dtrain/rng.h"
#include "nn/gpt_backend.h"

#define TOL_F32 1e-5
#define TOL_BF16 1e-2

typedef struct shape {
    int B, T, C, NH, V;
} shape;

/* the last: N = 1120 rows, more than a column sum's 256 rows per split (its
 * scratch and last-block path, cuda_reduce.cu) and than the 1056 blocks of
 * a grid-stride launch (gpt_cuda_grid: rows per block > 1); C 288, so that
 * a warp walks a row in more than one round of packs (LayerNorm) and GELU's
 * f32 packs outnumber its grid's threads; heads of 96, T 140 (Tp 144), more
 * positions than the generation step's 128 threads; V 129 (one column after
 * the 16-byte packs) */
static const shape k_shapes[] = {
    {2, 37, 64, 4, 1000}, {1, 1, 48, 3, 77}, {2, 33, 36, 3, 500}, {1, 8, 64, 4, 50257}, {4, 64, 128, 2, 256},
    {8, 140, 288, 3, 129},
};

typedef struct ctx {
    const gpt_backend *k; /* cuda */
    gpt_be *be;
    const gpt_backend *r; /* the reference: cpu (f32, host memory) */
    gpt_be *rbe;
    gpt_prec prec;
    size_t es;
    const char *pn;
    dt_rng rng;
    void *dev[64]; /* this op's device buffers */
    int ndev;
    double worst[2]; /* worst relative error seen per precision */
} ctx;

/* ---- helpers ----------------------------------------------------------------------------------- */

static void *dalloc(ctx *c, size_t bytes) {
    void *p = NULL;
    CHECK_OK(c->k->alloc(c->be, bytes, "test tensor", &p));
    if (p && c->ndev < 64) c->dev[c->ndev++] = p;
    return p;
}
static void dfree_all(ctx *c) {
    while (c->ndev) c->k->free(c->be, c->dev[--c->ndev]);
}

/* n random values (normal times scale); act: rounded to the precision */
static float *rnd(ctx *c, size_t n, double scale, int act) {
    float *x = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)(dt_rng_normal(&c->rng) * scale);
        if (act && c->prec == GPT_BF16) x[i] = dt_bf16_to_f32(dt_f32_to_bf16(x[i]));
    }
    return x;
}
static float *fcopy(const float *x, size_t n) {
    float *y = malloc((n ? n : 1) * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}

/* host floats <-> device (act: the precision's elements; else f32) */
static void up(ctx *c, void *d, const float *h, size_t n, int act) {
    if (!act || c->prec == GPT_F32) {
        CHECK_OK(c->k->upload(c->be, d, h, n * sizeof(float)));
        return;
    }
    uint16_t *b = malloc((n ? n : 1) * 2);
    for (size_t i = 0; i < n; i++) b[i] = dt_f32_to_bf16(h[i]);
    CHECK_OK(c->k->upload(c->be, d, b, n * 2));
    free(b);
}
static float *down(ctx *c, const void *d, size_t n, int act) {
    float *h = malloc((n ? n : 1) * sizeof(float));
    if (!act || c->prec == GPT_F32) {
        CHECK_OK(c->k->download(c->be, h, d, n * sizeof(float)));
        return h;
    }
    uint16_t *b = malloc((n ? n : 1) * 2);
    CHECK_OK(c->k->download(c->be, b, d, n * 2));
    for (size_t i = 0; i < n; i++) h[i] = dt_bf16_to_f32(b[i]);
    free(b);
    return h;
}
static void poison(ctx *c, void *d, size_t n, int act) {
    float *x = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = NAN;
    up(c, d, x, n, act);
    free(x);
}
/* a device copy of h (act or f32) */
static void *dev_of(ctx *c, const float *h, size_t n, int act) {
    void *d = dalloc(c, (n ? n : 1) * (act ? c->es : 4));
    if (d) up(c, d, h, n, act);
    return d;
}

/* ||a - b|| / ||b|| (INFINITY if a holds a NaN: an unwritten element) */
static double rel_l2(const float *a, const float *b, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (a[i] != a[i]) return INFINITY;
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

static void expect(ctx *c, const char *op, const char *what, const float *got, const float *ref, size_t n,
                   const shape *s) {
    const double tol = c->prec == GPT_BF16 ? TOL_BF16 : TOL_F32, e = rel_l2(got, ref, n);
    if (e > c->worst[c->prec] && e != INFINITY) c->worst[c->prec] = e;
    CHECK(e <= tol, "%s %s: %s: relative L2 error %.3g > %.0e (B=%d T=%d C=%d NH=%d V=%d)%s", c->pn, op, what, e,
          tol, s->B, s->T, s->C, s->NH, s->V, e == INFINITY ? ": unwritten elements (NaN)" : "");
}
static void same_bits(ctx *c, const char *op, const float *a, const float *b, size_t n, const shape *s) {
    CHECK(memcmp(a, b, n * sizeof(float)) == 0, "%s %s: two runs differ (B=%d T=%d C=%d)", c->pn, op, s->B, s->T,
          s->C);
}
/* rows of a strided device matrix [N, ld]: columns < n, and the rest still NaN */
static float *rows_of(ctx *c, const char *op, const float *m, int N, int n, int ld) {
    const size_t cnt = (size_t)N * (size_t)n;
    float *r = malloc((cnt ? cnt : 1) * sizeof(float));
    int touched = 0;
    for (int i = 0; i < N; i++) {
        memcpy(r + (size_t)i * n, m + (size_t)i * ld, (size_t)n * sizeof(float));
        for (int j = n; j < ld; j++) touched += m[(size_t)i * ld + j] == m[(size_t)i * ld + j];
    }
    CHECK(touched == 0, "%s %s: %d padding elements written", c->pn, op, touched);
    return r;
}

/* ---- embeddings ----------------------------------------------------------------------------------- */

static void test_encoder(ctx *c, const shape *s) {
    const int B = s->B, T = s->T, C = s->C, V = s->V, maxT = T + 3, N = B * T;
    int32_t *tok = malloc((size_t)N * 4);
    /* most tokens among a few (repeated rows), the rest anywhere */
    for (int n = 0; n < N; n++) tok[n] = (int32_t)dt_rng_below(&c->rng, (uint64_t)(n % 4 ? (V < 5 ? V : 5) : V));
    float *wte = rnd(c, (size_t)V * C, 0.1, 1), *wpe = rnd(c, (size_t)maxT * C, 0.1, 1);
    float *dout = rnd(c, (size_t)N * C, 1.0, 1);
    float *dwte0 = rnd(c, (size_t)V * C, 1.0, 0), *dwpe0 = rnd(c, (size_t)maxT * C, 1.0, 0);
    float *ref = malloc((size_t)N * C * sizeof(float)), *rdwte = fcopy(dwte0, (size_t)V * C);
    float *rdwpe = fcopy(dwpe0, (size_t)maxT * C);
    CHECK_OK(c->r->encoder_forward(c->rbe, ref, tok, wte, wpe, B, T, C));
    CHECK_OK(c->r->encoder_backward(c->rbe, rdwte, rdwpe, dout, tok, tok, B, T, C));
    if (c->prec == GPT_BF16)
        for (size_t i = 0; i < (size_t)N * C; i++) ref[i] = dt_bf16_to_f32(dt_f32_to_bf16(ref[i]));
    int32_t *dtok = dalloc(c, (size_t)N * 4);
    CHECK_OK(c->k->upload(c->be, dtok, tok, (size_t)N * 4));
    void *dwte = dev_of(c, wte, (size_t)V * C, 1), *dwpe = dev_of(c, wpe, (size_t)maxT * C, 1);
    void *ddout = dev_of(c, dout, (size_t)N * C, 1), *out = dalloc(c, (size_t)N * C * c->es);
    float *gw = dev_of(c, dwte0, (size_t)V * C, 0), *gp = dev_of(c, dwpe0, (size_t)maxT * C, 0);
    float *got[2], *gw2[2], *gp2[2];
    for (int rep = 0; rep < 2; rep++) {
        poison(c, out, (size_t)N * C, 1);
        up(c, gw, dwte0, (size_t)V * C, 0);
        up(c, gp, dwpe0, (size_t)maxT * C, 0);
        CHECK_OK(c->k->encoder_forward(c->be, out, dtok, dwte, dwpe, B, T, C));
        CHECK_OK(c->k->encoder_backward(c->be, gw, gp, ddout, dtok, tok, B, T, C));
        got[rep] = down(c, out, (size_t)N * C, 1);
        gw2[rep] = down(c, gw, (size_t)V * C, 0);
        gp2[rep] = down(c, gp, (size_t)maxT * C, 0);
    }
    expect(c, "encoder_forward", "out", got[0], ref, (size_t)N * C, s);
    /* the CPU's order of additions: its bits (f32; bf16 from the same rounded dout) */
    CHECK(memcmp(gw2[0], rdwte, (size_t)V * C * 4) == 0 && memcmp(gp2[0], rdwpe, (size_t)maxT * C * 4) == 0,
          "%s encoder_backward: not the CPU's bits (dwte %.3g, dwpe %.3g)", c->pn, rel_l2(gw2[0], rdwte, (size_t)V * C),
          rel_l2(gp2[0], rdwpe, (size_t)maxT * C));
    same_bits(c, "encoder_forward", got[0], got[1], (size_t)N * C, s);
    same_bits(c, "encoder_backward (dwte)", gw2[0], gw2[1], (size_t)V * C, s);
    same_bits(c, "encoder_backward (dwpe)", gp2[0], gp2[1], (size_t)maxT * C, s);
    for (int r = 0; r < 2; r++) free(got[r]), free(gw2[r]), free(gp2[r]);
    free(tok), free(wte), free(wpe), free(dout), free(dwte0), free(dwpe0), free(ref), free(rdwte), free(rdwpe);
    dfree_all(c);
}

/* ---- LayerNorm -------------------------------------------------------------------------------------- */

static void test_layernorm(ctx *c, const shape *s) {
    const int N = s->B * s->T, C = s->C;
    const size_t nc = (size_t)N * C;
    float *x = rnd(c, nc, 2.0, 1), *w = rnd(c, (size_t)C, 1.0, 1), *b = rnd(c, (size_t)C, 0.5, 1);
    for (size_t i = 0; i < nc; i++) x[i] += (float)(i / (size_t)C % 5); /* row means away from 0 */
    if (c->prec == GPT_BF16)
        for (size_t i = 0; i < nc; i++) x[i] = dt_bf16_to_f32(dt_f32_to_bf16(x[i]));
    float *dy = rnd(c, nc, 1.0, 1), *dx0 = rnd(c, nc, 1.0, 1), *dw0 = rnd(c, (size_t)C, 1.0, 0);
    float *db0 = rnd(c, (size_t)C, 1.0, 0);
    float *ry = malloc(nc * 4), *rm = malloc((size_t)N * 4), *rr = malloc((size_t)N * 4);
    float *rdx = fcopy(dx0, nc), *rdw = fcopy(dw0, (size_t)C), *rdb = fcopy(db0, (size_t)C);
    CHECK_OK(c->r->layernorm_forward(c->rbe, ry, rm, rr, x, w, b, N, C));
    CHECK_OK(c->r->layernorm_backward(c->rbe, rdx, rdw, rdb, dy, x, w, rm, rr, N, C));
    void *dx_ = dev_of(c, x, nc, 1), *dw_ = dev_of(c, w, (size_t)C, 1), *db_ = dev_of(c, b, (size_t)C, 1);
    void *ddy = dev_of(c, dy, nc, 1), *out = dalloc(c, nc * c->es), *gdx = dalloc(c, nc * c->es);
    float *mean = dalloc(c, (size_t)N * 4), *rstd = dalloc(c, (size_t)N * 4);
    float *gw = dalloc(c, (size_t)C * 4), *gb = dalloc(c, (size_t)C * 4);
    float *o[2], *m[2], *r[2], *gx[2], *gwh[2], *gbh[2];
    for (int rep = 0; rep < 2; rep++) {
        poison(c, out, nc, 1);
        poison(c, mean, (size_t)N, 0);
        poison(c, rstd, (size_t)N, 0);
        up(c, gdx, dx0, nc, 1);
        up(c, gw, dw0, (size_t)C, 0);
        up(c, gb, db0, (size_t)C, 0);
        CHECK_OK(c->k->layernorm_forward(c->be, out, mean, rstd, dx_, dw_, db_, N, C));
        CHECK_OK(c->k->layernorm_backward(c->be, gdx, gw, gb, ddy, dx_, dw_, mean, rstd, N, C));
        o[rep] = down(c, out, nc, 1), m[rep] = down(c, mean, (size_t)N, 0), r[rep] = down(c, rstd, (size_t)N, 0);
        gx[rep] = down(c, gdx, nc, 1), gwh[rep] = down(c, gw, (size_t)C, 0), gbh[rep] = down(c, gb, (size_t)C, 0);
    }
    expect(c, "layernorm_forward", "out", o[0], ry, nc, s);
    expect(c, "layernorm_forward", "mean", m[0], rm, (size_t)N, s);
    expect(c, "layernorm_forward", "rstd", r[0], rr, (size_t)N, s);
    expect(c, "layernorm_backward", "dinp", gx[0], rdx, nc, s);
    expect(c, "layernorm_backward", "dweight", gwh[0], rdw, (size_t)C, s);
    expect(c, "layernorm_backward", "dbias", gbh[0], rdb, (size_t)C, s);
    same_bits(c, "layernorm_forward", o[0], o[1], nc, s);
    same_bits(c, "layernorm_forward (rstd)", r[0], r[1], (size_t)N, s);
    same_bits(c, "layernorm_backward (dinp)", gx[0], gx[1], nc, s);
    same_bits(c, "layernorm_backward (dweight)", gwh[0], gwh[1], (size_t)C, s);
    same_bits(c, "layernorm_backward (dbias)", gbh[0], gbh[1], (size_t)C, s);
    for (int k = 0; k < 2; k++) free(o[k]), free(m[k]), free(r[k]), free(gx[k]), free(gwh[k]), free(gbh[k]);
    free(x), free(w), free(b), free(dy), free(dx0), free(dw0), free(db0), free(ry), free(rm), free(rr);
    free(rdx), free(rdw), free(rdb);
    dfree_all(c);
}

/* ---- linear layers --------------------------------------------------------------------------------- */

/* out[N, OC] (row stride ldo) = resid + inp @ w^T + bias; variants: bias or
 * not, resid none / separate / in place (ldo == OC) */
static void test_matmul_fwd(ctx *c, const shape *s, int OC, int ldo, int with_bias, int resid_mode) {
    const int N = s->B * s->T, C = s->C;
    float *x = rnd(c, (size_t)N * C, 1.0, 1), *w = rnd(c, (size_t)OC * C, 0.2, 1), *b = rnd(c, (size_t)OC, 0.5, 1);
    float *res = rnd(c, (size_t)N * OC, 1.0, 1), *ref = malloc((size_t)N * OC * 4);
    CHECK_OK(c->r->matmul_forward(c->rbe, ref, resid_mode ? res : NULL, x, w, with_bias ? b : NULL, N, C, OC, OC));
    if (c->prec == GPT_BF16)
        for (size_t i = 0; i < (size_t)N * OC; i++) ref[i] = dt_bf16_to_f32(dt_f32_to_bf16(ref[i]));
    void *dx = dev_of(c, x, (size_t)N * C, 1), *dw = dev_of(c, w, (size_t)OC * C, 1), *db = dev_of(c, b, (size_t)OC, 1);
    void *dres = resid_mode == 1 ? dev_of(c, res, (size_t)N * OC, 1) : NULL;
    void *out = dalloc(c, (size_t)N * ldo * c->es);
    float *got[2];
    for (int rep = 0; rep < 2; rep++) {
        if (resid_mode == 2)
            up(c, out, res, (size_t)N * OC, 1);
        else
            poison(c, out, (size_t)N * ldo, 1);
        CHECK_OK(c->k->matmul_forward(c->be, out, resid_mode == 2 ? out : dres, dx, dw, with_bias ? db : NULL, N, C,
                                      OC, ldo));
        float *m = down(c, out, (size_t)N * ldo, 1);
        got[rep] = rows_of(c, "matmul_forward (padding)", m, N, OC, ldo);
        free(m);
    }
    static const char *const what[3] = {"out", "out (+ resid)", "out (+= in place)"};
    expect(c, "matmul_forward", what[resid_mode], got[0], ref, (size_t)N * OC, s);
    same_bits(c, "matmul_forward", got[0], got[1], (size_t)N * OC, s);
    free(got[0]), free(got[1]), free(x), free(w), free(b), free(res), free(ref);
    dfree_all(c);
}

/* bf16 with OC a multiple of 8: cuBLASLt's GELU_AUX_BIAS epilogue where it
 * has one; else (and always in f32) the two steps (matmul, then GELU) */
static void test_matmul_gelu(ctx *c, const shape *s, int OC) {
    const int N = s->B * s->T, C = s->C;
    float *x = rnd(c, (size_t)N * C, 1.0, 1), *w = rnd(c, (size_t)OC * C, 0.2, 1), *b = rnd(c, (size_t)OC, 0.5, 1);
    float *pre = malloc((size_t)N * OC * 4), *ref = malloc((size_t)N * OC * 4);
    CHECK_OK(c->r->matmul_forward(c->rbe, pre, NULL, x, w, b, N, C, OC, OC)); /* cpu: no fused op */
    CHECK_OK(c->r->gelu_forward(c->rbe, ref, pre, (size_t)N * OC));
    void *dx = dev_of(c, x, (size_t)N * C, 1), *dw = dev_of(c, w, (size_t)OC * C, 1), *db = dev_of(c, b, (size_t)OC, 1);
    void *dpre = dalloc(c, (size_t)N * OC * c->es), *out = dalloc(c, (size_t)N * OC * c->es);
    float *g1[2], *g2[2];
    for (int rep = 0; rep < 2; rep++) {
        poison(c, dpre, (size_t)N * OC, 1);
        poison(c, out, (size_t)N * OC, 1);
        CHECK_OK(c->k->matmul_gelu_forward(c->be, out, dpre, dx, dw, db, N, C, OC));
        g1[rep] = down(c, out, (size_t)N * OC, 1);
        g2[rep] = down(c, dpre, (size_t)N * OC, 1);
    }
    expect(c, "matmul_gelu_forward", "out", g1[0], ref, (size_t)N * OC, s);
    expect(c, "matmul_gelu_forward", "pre", g2[0], pre, (size_t)N * OC, s);
    same_bits(c, "matmul_gelu_forward", g1[0], g1[1], (size_t)N * OC, s);
    free(g1[0]), free(g1[1]), free(g2[0]), free(g2[1]), free(x), free(w), free(b), free(pre), free(ref);
    dfree_all(c);
}

/* dinp (= or skipped), dweight +=, dbias += (or skipped); dout with row
 * stride lddo (its padding NaN: never read) */
static void test_matmul_bwd(ctx *c, const shape *s, int OC, int lddo, int with_dinp, int with_dbias) {
    const int N = s->B * s->T, C = s->C;
    float *x = rnd(c, (size_t)N * C, 1.0, 1), *w = rnd(c, (size_t)OC * C, 0.2, 1), *dy = rnd(c, (size_t)N * OC, 1.0, 1);
    float *dw0 = rnd(c, (size_t)OC * C, 1.0, 0), *db0 = rnd(c, (size_t)OC, 1.0, 0);
    float *rdx = malloc((size_t)N * C * 4), *rdw = fcopy(dw0, (size_t)OC * C), *rdb = fcopy(db0, (size_t)OC);
    CHECK_OK(c->r->matmul_backward(c->rbe, rdx, rdw, with_dbias ? rdb : NULL, dy, x, w, N, C, OC, OC));
    float *dys = malloc((size_t)N * lddo * 4);
    for (int n = 0; n < N; n++)
        for (int j = 0; j < lddo; j++) dys[(size_t)n * lddo + j] = j < OC ? dy[(size_t)n * OC + j] : NAN;
    void *dx = dev_of(c, x, (size_t)N * C, 1), *dwt = dev_of(c, w, (size_t)OC * C, 1);
    void *ddy = dev_of(c, dys, (size_t)N * lddo, 1), *gx = dalloc(c, (size_t)N * C * c->es);
    float *gw = dalloc(c, (size_t)OC * C * 4), *gb = dalloc(c, (size_t)OC * 4);
    float *hx[2], *hw[2], *hb[2];
    for (int rep = 0; rep < 2; rep++) {
        poison(c, gx, (size_t)N * C, 1);
        up(c, gw, dw0, (size_t)OC * C, 0);
        up(c, gb, db0, (size_t)OC, 0);
        CHECK_OK(c->k->matmul_backward(c->be, with_dinp ? gx : NULL, gw, with_dbias ? gb : NULL, ddy, dx, dwt, N, C,
                                       OC, lddo));
        hx[rep] = down(c, gx, (size_t)N * C, 1), hw[rep] = down(c, gw, (size_t)OC * C, 0);
        hb[rep] = down(c, gb, (size_t)OC, 0);
    }
    if (with_dinp) {
        expect(c, "matmul_backward", "dinp", hx[0], rdx, (size_t)N * C, s);
        same_bits(c, "matmul_backward (dinp)", hx[0], hx[1], (size_t)N * C, s);
    } else {
        size_t written = 0;
        for (size_t i = 0; i < (size_t)N * C; i++) written += hx[0][i] == hx[0][i];
        CHECK(written == 0, "%s matmul_backward: dinp NULL, yet %zu elements written", c->pn, written);
    }
    expect(c, "matmul_backward", "dweight", hw[0], rdw, (size_t)OC * C, s);
    expect(c, "matmul_backward", with_dbias ? "dbias" : "dbias (untouched)", hb[0], rdb, (size_t)OC, s);
    same_bits(c, "matmul_backward (dweight)", hw[0], hw[1], (size_t)OC * C, s);
    same_bits(c, "matmul_backward (dbias)", hb[0], hb[1], (size_t)OC, s);
    for (int k = 0; k < 2; k++) free(hx[k]), free(hw[k]), free(hb[k]);
    free(x), free(w), free(dy), free(dw0), free(db0), free(rdx), free(rdw), free(rdb), free(dys);
    dfree_all(c);
}

/* ---- GELU ----------------------------------------------------------------------------------------------- */

static void test_gelu(ctx *c, const shape *s) {
    const size_t n = (size_t)s->B * s->T * 4 * s->C + 3; /* a tail after the packs */
    float *x = rnd(c, n, 2.0, 1), *dy = rnd(c, n, 1.0, 1), *ry = malloc(n * 4), *rdx = malloc(n * 4);
    CHECK_OK(c->r->gelu_forward(c->rbe, ry, x, n));
    CHECK_OK(c->r->gelu_backward(c->rbe, rdx, x, dy, n));
    void *dx = dev_of(c, x, n, 1), *ddy = dev_of(c, dy, n, 1), *out = dalloc(c, n * c->es);
    float *g[2], *gb[2];
    for (int rep = 0; rep < 2; rep++) {
        poison(c, out, n, 1);
        CHECK_OK(c->k->gelu_forward(c->be, out, dx, n));
        g[rep] = down(c, out, n, 1);
        poison(c, out, n, 1);
        CHECK_OK(c->k->gelu_backward(c->be, out, dx, ddy, n));
        gb[rep] = down(c, out, n, 1);
    }
    expect(c, "gelu_forward", "out", g[0], ry, n, s);
    expect(c, "gelu_backward", "dinp", gb[0], rdx, n, s);
    same_bits(c, "gelu_forward", g[0], g[1], n, s);
    same_bits(c, "gelu_backward", gb[0], gb[1], n, s);
    /* in place: out = inp, dinp = dout */
    CHECK_OK(c->k->gelu_forward(c->be, dx, dx, n));
    float *ip = down(c, dx, n, 1);
    CHECK(memcmp(ip, g[0], n * 4) == 0, "%s gelu_forward in place differs", c->pn);
    up(c, dx, x, n, 1);
    CHECK_OK(c->k->gelu_backward(c->be, ddy, dx, ddy, n));
    float *ib = down(c, ddy, n, 1);
    CHECK(memcmp(ib, gb[0], n * 4) == 0, "%s gelu_backward in place differs", c->pn);
    free(ip), free(ib), free(g[0]), free(g[1]), free(gb[0]), free(gb[1]), free(x), free(dy), free(ry), free(rdx);
    dfree_all(c);
}

/* ---- attention ------------------------------------------------------------------------------------------ */

static void test_attention(ctx *c, const shape *s) {
    const int B = s->B, T = s->T, C = s->C, NH = s->NH, N = B * T;
    const size_t n3 = (size_t)N * 3 * C, nc = (size_t)N * C;
    float *qkv = rnd(c, n3, 1.0, 1), *dout = rnd(c, nc, 1.0, 1);
    size_t rsaved, rscratch;
    c->r->attention_sizes(B, T, C, NH, GPT_F32, &rsaved, &rscratch);
    float *ry = malloc(nc * 4), *att = malloc(rsaved), *rdqkv = malloc(n3 * 4), *sc = malloc(rscratch + 4);
    CHECK_OK(c->r->attention_forward(c->rbe, ry, att, sc, qkv, B, T, C, NH));
    CHECK_OK(c->r->attention_backward(c->rbe, rdqkv, sc, dout, qkv, att, B, T, C, NH));
    size_t saved_b, scratch_b;
    c->k->attention_sizes(B, T, C, NH, c->prec, &saved_b, &scratch_b);
    CHECK(saved_b >= (size_t)B * NH * T * T * c->es, "%s attention_sizes: saved %zu bytes", c->pn, saved_b);
    void *dqkv = dev_of(c, qkv, n3, 1), *ddout = dev_of(c, dout, nc, 1), *out = dalloc(c, nc * c->es);
    void *saved = dalloc(c, saved_b), *scratch = dalloc(c, scratch_b), *gq = dalloc(c, n3 * c->es);
    float *gy[2], *gd[2];
    for (int rep = 0; rep < 2; rep++) {
        poison(c, out, nc, 1);
        poison(c, gq, n3, 1);
        CHECK_OK(c->k->attention_forward(c->be, out, saved, scratch, dqkv, B, T, C, NH));
        CHECK_OK(c->k->attention_backward(c->be, gq, scratch, ddout, dqkv, saved, B, T, C, NH));
        gy[rep] = down(c, out, nc, 1), gd[rep] = down(c, gq, n3, 1);
    }
    expect(c, "attention_forward", "out", gy[0], ry, nc, s);
    expect(c, "attention_backward", "dqkv", gd[0], rdqkv, n3, s);
    same_bits(c, "attention_forward", gy[0], gy[1], nc, s);
    same_bits(c, "attention_backward", gd[0], gd[1], n3, s);
    /* the generation step: the last position of batch 0 against its cache */
    const int n = T;
    float *q = fcopy(qkv + (size_t)(n - 1) * 3 * C, (size_t)C), *kc = malloc((size_t)n * C * 4);
    float *vc = malloc((size_t)n * C * 4), *rs = malloc((size_t)C * 4);
    for (int j = 0; j < n; j++) {
        memcpy(kc + (size_t)j * C, qkv + (size_t)j * 3 * C + C, (size_t)C * 4);
        memcpy(vc + (size_t)j * C, qkv + (size_t)j * 3 * C + 2 * C, (size_t)C * 4);
    }
    CHECK_OK(c->r->attention_step(c->rbe, rs, sc, q, kc, vc, n, C, NH));
    CHECK(scratch_b >= (size_t)NH * n * 4, "%s attention_sizes: scratch %zu bytes for the step", c->pn, scratch_b);
    void *dq = dev_of(c, q, (size_t)C, 1), *dkc = dev_of(c, kc, (size_t)n * C, 1);
    void *dvc = dev_of(c, vc, (size_t)n * C, 1), *so = dalloc(c, (size_t)C * c->es);
    float *gs[2];
    for (int rep = 0; rep < 2; rep++) {
        poison(c, so, (size_t)C, 1);
        CHECK_OK(c->k->attention_step(c->be, so, scratch, dq, dkc, dvc, n, C, NH));
        gs[rep] = down(c, so, (size_t)C, 1);
    }
    expect(c, "attention_step", "out", gs[0], rs, (size_t)C, s);
    same_bits(c, "attention_step", gs[0], gs[1], (size_t)C, s);
    for (int k = 0; k < 2; k++) free(gy[k]), free(gd[k]), free(gs[k]);
    free(qkv), free(dout), free(ry), free(att), free(rdqkv), free(sc), free(q), free(kc), free(vc), free(rs);
    dfree_all(c);
}

/* ---- cross-entropy -------------------------------------------------------------------------------------- */

static void test_crossentropy(ctx *c, const shape *s) {
    const int N = s->B * s->T, V = s->V, ldl = c->k->vocab_pad(V);
    CHECK(ldl >= V && ldl % 128 == 0 && ldl - V < 128, "%s vocab_pad(%d) = %d", c->pn, V, ldl);
    float *x = rnd(c, (size_t)N * V, 3.0, 1), *lg = malloc((size_t)N * ldl * 4);
    int32_t *tg = malloc((size_t)N * 4);
    float *rl = malloc((size_t)N * 4), *rt = malloc((size_t)N * 4);
    int32_t *rh = malloc((size_t)N * 4);
    for (int n = 0; n < N; n++) {
        const float *r = x + (size_t)n * V;
        int best = 0;
        for (int i = 1; i < V; i++)
            if (r[i] > r[best]) best = i;
        tg[n] = n % 3 == 0 ? best : (int32_t)dt_rng_below(&c->rng, (uint64_t)V); /* some hits */
        for (int j = 0; j < ldl; j++) lg[(size_t)n * ldl + j] = j < V ? r[j] : NAN; /* padding: never read */
    }
    CHECK_OK(c->r->crossentropy_forward(c->rbe, rl, rt, rh, x, tg, N, V, V));
    const float dscale = 1.0f / (float)N;
    float *rd = malloc((size_t)N * V * 4);
    CHECK_OK(c->r->crossentropy_backward(c->rbe, rd, x, rl, tg, N, V, V, dscale));
    void *dlg = dev_of(c, lg, (size_t)N * ldl, 1), *dd = dalloc(c, (size_t)N * ldl * c->es);
    int32_t *dtg = dalloc(c, (size_t)N * 4), *hit = dalloc(c, (size_t)N * 4);
    CHECK_OK(c->k->upload(c->be, dtg, tg, (size_t)N * 4));
    float *lse = dalloc(c, (size_t)N * 4), *tl = dalloc(c, (size_t)N * 4), *dl = dev_of(c, rl, (size_t)N, 0);
    float *gl[2], *gt[2], *gd[2];
    int32_t *gh = malloc((size_t)N * 4);
    for (int rep = 0; rep < 2; rep++) {
        poison(c, lse, (size_t)N, 0);
        poison(c, tl, (size_t)N, 0);
        poison(c, dd, (size_t)N * ldl, 1);
        CHECK_OK(c->k->zero(c->be, hit, (size_t)N * 4));
        CHECK_OK(c->k->crossentropy_forward(c->be, lse, tl, hit, dlg, dtg, N, V, ldl));
        /* the backward from the CPU's lse, so that both compute the same function */
        CHECK_OK(c->k->crossentropy_backward(c->be, dd, dlg, dl, dtg, N, V, ldl, dscale));
        gl[rep] = down(c, lse, (size_t)N, 0), gt[rep] = down(c, tl, (size_t)N, 0);
        float *m = down(c, dd, (size_t)N * ldl, 1);
        gd[rep] = rows_of(c, "crossentropy_backward (padding)", m, N, V, ldl);
        free(m);
    }
    CHECK_OK(c->k->download(c->be, gh, hit, (size_t)N * 4));
    expect(c, "crossentropy_forward", "lse", gl[0], rl, (size_t)N, s);
    int bad_t = 0, bad_h = 0;
    for (int n = 0; n < N; n++) bad_t += gt[0][n] != rt[n], bad_h += gh[n] != rh[n];
    CHECK(bad_t == 0 && bad_h == 0, "%s crossentropy_forward: %d target logits, %d hits differ (V=%d)", c->pn, bad_t,
          bad_h, V);
    expect(c, "crossentropy_backward", "dlogits", gd[0], rd, (size_t)N * V, s);
    same_bits(c, "crossentropy_forward", gl[0], gl[1], (size_t)N, s);
    same_bits(c, "crossentropy_backward", gd[0], gd[1], (size_t)N * V, s);
    /* lse only (no targets), and the backward in place */
    poison(c, lse, (size_t)N, 0);
    CHECK_OK(c->k->crossentropy_forward(c->be, lse, NULL, NULL, dlg, NULL, N, V, ldl));
    float *l2 = down(c, lse, (size_t)N, 0);
    CHECK(memcmp(l2, gl[0], (size_t)N * 4) == 0, "%s crossentropy_forward without targets differs", c->pn);
    CHECK_OK(c->k->crossentropy_backward(c->be, dlg, dlg, dl, dtg, N, V, ldl, dscale));
    float *m = down(c, dlg, (size_t)N * ldl, 1), *ip = rows_of(c, "crossentropy_backward in place", m, N, V, ldl);
    CHECK(memcmp(ip, gd[0], (size_t)N * V * 4) == 0, "%s crossentropy_backward in place differs", c->pn);
    for (int k = 0; k < 2; k++) free(gl[k]), free(gt[k]), free(gd[k]);
    free(l2), free(m), free(ip), free(x), free(lg), free(tg), free(rl), free(rt), free(rh), free(rd), free(gh);
    dfree_all(c);
}

/* ---- memory, cast, errors ------------------------------------------------------------------------------------ */

static void test_memory(ctx *c) {
    const size_t n = 100003;
    unsigned char *h = malloc(n), *z = calloc(n, 1);
    void *a = dalloc(c, n), *b = dalloc(c, n);
    CHECK_OK(c->k->download(c->be, h, a, n));
    CHECK(a && memcmp(h, z, n) == 0, "%s alloc: not zeroed", c->pn);
    for (size_t i = 0; i < n; i++) h[i] = (unsigned char)(i * 7 + 1);
    CHECK_OK(c->k->upload(c->be, a, h, n));
    CHECK_OK(c->k->copy(c->be, b, a, n));
    CHECK_OK(c->k->zero(c->be, a, n / 2));
    CHECK_OK(c->k->sync(c->be));
    unsigned char *ga = malloc(n), *gb = malloc(n);
    CHECK_OK(c->k->download(c->be, ga, a, n));
    CHECK_OK(c->k->download(c->be, gb, b, n));
    CHECK(memcmp(gb, h, n) == 0 && memcmp(ga, z, n / 2) == 0 && memcmp(ga + n / 2, h + n / 2, n - n / 2) == 0,
          "%s upload / copy / zero / download", c->pn);
    c->k->free(c->be, NULL);
    /* too large: DT_ERR_NOMEM naming the tensor, and the instance still works */
    void *p = (void *)1;
    CHECK_ERR(c->k->alloc(c->be, (size_t)1 << 50, "blocks.7.attn.saved", &p), DT_ERR_NOMEM, "blocks.7.attn.saved");
    CHECK(p == NULL, "%s alloc failure leaves *p NULL", c->pn);
    CHECK_OK(c->k->sync(c->be));
    /* a failed launch names its kernel: only on the fake runtime, whose twins
     * refuse host memory at once (on a GPU it would be a sticky fault) */
    struct cudaDeviceProp prop;
    int dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess &&
        strncmp(prop.name, "dtrain fakegpu", 14) == 0) {
        float host[8];
        CHECK_ERR(c->k->gelu_forward(c->be, host, b, 8), DT_ERR_BACKEND,
                  c->prec == GPT_BF16 ? "dtk_gelu_fwd_bf16: launch failed" : "dtk_gelu_fwd_f32: launch failed");
        CHECK_ERR(c->k->matmul_forward(c->be, host, NULL, b, b, NULL, 2, 2, 2, 2), DT_ERR_BACKEND, "cublasLtMatmul");
        CHECK_OK(c->k->sync(c->be));
    }
    /* the cast of master parameters (bf16): dt_f32_to_bf16's bits */
    if (c->prec == GPT_BF16) {
        const size_t m = 10007;
        float *f = malloc(m * 4);
        for (size_t i = 0; i < m; i++) f[i] = (float)(dt_rng_normal(&c->rng) * 1e3);
        f[0] = 1.0f + 0x1p-8f, f[1] = INFINITY, f[2] = -0.0f, f[3] = 0x1p-140f;
        float *df = dev_of(c, f, m, 0);
        uint16_t *d16 = dalloc(c, m * 2), *g16 = malloc(m * 2);
        CHECK_OK(c->k->cast(c->be, d16, df, m));
        CHECK_OK(c->k->download(c->be, g16, d16, m * 2));
        size_t bad = 0;
        for (size_t i = 0; i < m; i++) bad += g16[i] != dt_f32_to_bf16(f[i]);
        CHECK(bad == 0, "cast f32 -> bf16: %zu of %zu differ from dt_f32_to_bf16", bad, m);
        free(f), free(g16);
    }
    free(h), free(z), free(ga), free(gb);
    dfree_all(c);
}

/* ---- the GPT on this backend -------------------------------------------------------------------------- */

/* two training steps of a small GPT (2 blocks, C 64, T 37 of 40, V 300) on
 * `device` in `prec`: its loss and accumulated gradients (host copy) */
static float *train_two(int device, int prec, int recompute, float *loss, size_t *np) {
    dt_model_config cfg;
    CHECK_OK(dt_model_config_default(&cfg, "gpt-demo"));
    cfg.seed = 7, cfg.device = device, cfg.precision = prec, cfg.recompute = recompute;
    cfg.n_layer = 2, cfg.n_head = 4, cfg.n_embd = 64, cfg.block_size = 40, cfg.vocab_size = 300;
    dt_model *m = NULL;
    CHECK_OK(dt_model_create(&cfg, &m));
    if (!m) return NULL;
    enum { B = 3, T = 37 };
    int32_t x[B * T], y[B * T];
    for (int i = 0; i < B * T; i++) x[i] = (i * 37 + 11) % 300, y[i] = (i * 91 + 5) % 300;
    for (int step = 0; step < 2; step++) {
        CHECK_OK(dt_model_forward_seq(m, x, y, B, T, 1, NULL));
        CHECK_OK(dt_model_backward(m));
    }
    CHECK_OK(dt_model_loss(m, loss));
    *np = dt_model_num_params(m);
    float *g = malloc(*np * sizeof(float));
    CHECK_OK(dt_model_copy_to_host(m, g, dt_model_grads(m), *np));
    dt_model_free(m);
    return g;
}

/* The GPT trained through gpt_backend_cuda against the CPU model: f32 within
 * 1e-4 (two steps of accumulated gradients, reductions in other orders;
 * on the fake runtime, whose twins and cuBLASLt compute as the CPU kernels,
 * the same bits), bf16 within 2e-2; recomputation changes no bit. */
static void test_model(int on_fake) {
    float l_cpu = 0, l32 = 0, l16 = 0, lrc = 0;
    size_t n = 0;
    float *g_cpu = train_two(DT_DEVICE_CPU, DT_PRECISION_FP32, 0, &l_cpu, &n);
    float *g32 = train_two(DT_DEVICE_CUDA, DT_PRECISION_FP32, 0, &l32, &n);
    float *grc = train_two(DT_DEVICE_CUDA, DT_PRECISION_FP32, 1, &lrc, &n);
    float *g16 = train_two(DT_DEVICE_CUDA, DT_PRECISION_BF16, 0, &l16, &n);
    if (!g_cpu || !g32 || !grc || !g16) return;
    const double e32 = rel_l2(g32, g_cpu, n), e16 = rel_l2(g16, g_cpu, n);
    printf("gpt on cuda: loss cpu %.7g, f32 %.7g (gradients %.3g), bf16 %.7g (gradients %.3g)\n", l_cpu, l32, e32, l16,
           e16);
    if (on_fake)
        CHECK(l32 == l_cpu && memcmp(g32, g_cpu, n * sizeof(float)) == 0,
              "the fake's f32 model is not the CPU's bits (loss %.9g vs %.9g, gradients %.3g)", l32, l_cpu, e32);
    CHECK(fabs(l32 - l_cpu) <= 1e-5 * fabs(l_cpu) && e32 <= 1e-4, "f32 model: loss %.9g vs %.9g, gradients %.3g", l32,
          l_cpu, e32);
    CHECK(fabs(l16 - l_cpu) <= 2e-2 * fabs(l_cpu) && e16 <= 2e-2, "bf16 model: loss %.7g vs %.7g, gradients %.3g",
          l16, l_cpu, e16);
    CHECK(lrc == l32 && memcmp(grc, g32, n * sizeof(float)) == 0, "recompute changes the f32 model's bits");
    free(g_cpu), free(g32), free(grc), free(g16);
}

static void run_prec(const gpt_backend *k, gpt_prec prec, ctx *c) {
    c->k = k;
    c->prec = prec;
    c->es = prec == GPT_BF16 ? 2 : 4;
    c->pn = prec == GPT_BF16 ? "bf16" : "f32";
    c->be = NULL;
    CHECK_OK(k->open(&c->be, prec));
    if (!c->be) return;
    c->r = &gpt_backend_cpu;
    c->rbe = NULL;
    CHECK_OK(c->r->open(&c->rbe, GPT_F32));
    if (!c->rbe) return;
    test_memory(c);
    for (size_t i = 0; i < sizeof k_shapes / sizeof k_shapes[0]; i++) {
        const shape *s = &k_shapes[i];
        const int N = s->B * s->T, ldl = k->vocab_pad(s->V);
        test_encoder(c, s);
        test_layernorm(c, s);
        test_gelu(c, s);
        test_matmul_fwd(c, s, 3 * s->C, 3 * s->C, 1, 0);  /* qkv: bias */
        test_matmul_fwd(c, s, s->C, s->C, 1, 1);          /* projection: bias, resid */
        test_matmul_fwd(c, s, s->C, s->C, 0, 2);          /* in place on the residual */
        test_matmul_fwd(c, s, s->V, ldl, 0, 0);           /* the head: padded rows */
        test_matmul_gelu(c, s, 4 * s->C);
        test_matmul_gelu(c, s, 4 * s->C - 2);
        test_matmul_bwd(c, s, 4 * s->C, 4 * s->C, 1, 1);
        test_matmul_bwd(c, s, s->C, s->C, 0, 1);          /* no dinp */
        test_matmul_bwd(c, s, s->V, ldl, 1, 0);           /* the head: padded dout, no dbias */
        test_attention(c, s);
        test_crossentropy(c, s);
        (void)N;
    }
    k->close(c->be);
    c->r->close(c->rbe);
    c->be = NULL, c->rbe = NULL;
}

int main(int argc, char **argv) {
    const char *name = argc > 0 && strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : "gpt_kernels";
    gpu_require(name);
    ctx c;
    memset(&c, 0, sizeof c);
    dt_rng_seed(&c.rng, 2024);
    const gpt_backend *k = gpt_backend_find("cuda");
    CHECK(k != NULL, "gpt_backend_find(\"cuda\"): %s", dt_last_error());
    if (!k) return dt_test_finish(name);
    CHECK(strcmp(k->name, "cuda") == 0 && k->device == 1 && k->precisions == 3u, "the table's header");
    CHECK(k->vocab_pad(50257) == 50304 && k->vocab_pad(128) == 128 && k->vocab_pad(1) == 128, "vocab_pad");
    run_prec(k, GPT_F32, &c);
    run_prec(k, GPT_BF16, &c);
    struct cudaDeviceProp prop;
    int dev = 0;
    /* the fake's twins compute as the CPU does (the same bits); its
     * emulated kernels (fakegpu_gpt_kernels_emu) as a GPU would */
    const int on_twins = cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess &&
                         strncmp(prop.name, "dtrain fakegpu", 14) == 0 && !strstr(prop.name, "emulated");
    test_model(on_twins);
    printf("%s: worst relative L2 error: f32 %.3g (bound %.0e), bf16 %.3g (bound %.0e)\n", name, c.worst[GPT_F32],
           TOL_F32, c.worst[GPT_BF16], TOL_BF16);
    return dt_test_finish(name);
}
