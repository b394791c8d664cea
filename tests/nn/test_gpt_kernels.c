/* tests/nn/test_gpt_kernels.c - the gpt family's kernels (src/nn/gpt_*.c)
 * against straightforward float64 implementations written here from the
 * definitions (GPT-2 / llm.c's formulas): tanh-GELU and its derivative,
 * LayerNorm forward/backward, causal multi-head attention forward/backward
 * (at sequence lengths that are below, equal to and not a multiple of the
 * kernel's 64-row blocks), softmax cross-entropy, the embeddings and the
 * one-query attention step of generation. Tolerances: float32 results
 * within 2e-5 (relative to the largest magnitude of the tensor) of the
 * float64 answer for the same float32 inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "dtrain/rng.h"
#include "nn/gpt_internal.h"

#define TOL 2e-5

static void rand_fill(float *x, size_t n, float scale, dt_rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(dt_rng_normal(r) * scale);
}

/* max|a - b| / max|b| with b in double */
static double rel_err_d(const float *a, const double *b, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > num || d != d) num = d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return num / (den > 1e-30 ? den : 1e-30);
}

/* ---- GELU ------------------------------------------------------------------- */

static void test_gelu(void) {
    enum { n = 4001 };
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    float *dy = malloc(n * sizeof(float)), *dx = malloc(n * sizeof(float));
    double worst_f = 0.0, worst_b = 0.0;
    for (int i = 0; i < n; i++) {
        x[i] = -12.0f + 24.0f * (float)i / (float)(n - 1); /* covers both saturated tails */
        dy[i] = 1.0f + 0.001f * (float)(i % 7);
    }
    gpt_gelu_forward(y, x, n);
    gpt_gelu_backward(dx, x, dy, n);
    for (int i = 0; i < n; i++) {
        double xd = x[i], k0 = sqrt(2.0 / 3.14159265358979323846), u = k0 * (xd + 0.044715 * xd * xd * xd);
        double th = tanh(u), ref = 0.5 * xd * (1.0 + th);
        double du = k0 * (1.0 + 3.0 * 0.044715 * xd * xd);
        double dref = (0.5 * (1.0 + th) + 0.5 * xd * (1.0 - th * th) * du) * dy[i];
        double ef = fabs(y[i] - ref) / fmax(fabs(ref), 1.0);
        double eb = fabs(dx[i] - dref) / fmax(fabs(dref), 1.0);
        if (ef > worst_f) worst_f = ef;
        if (eb > worst_b) worst_b = eb;
    }
    CHECK(worst_f < 1e-6, "gelu forward error %.3g", worst_f);
    CHECK(worst_b < 1e-6, "gelu backward error %.3g", worst_b);
    /* in place, as the model uses it */
    memcpy(dx, dy, n * sizeof(float));
    gpt_gelu_backward(dx, x, dx, n);
    float *dx2 = malloc(n * sizeof(float));
    gpt_gelu_backward(dx2, x, dy, n);
    CHECK(memcmp(dx, dx2, n * sizeof(float)) == 0, "gelu backward in place differs");
    printf("  gelu: forward err %.2e, derivative err %.2e over [-12, 12]\n", worst_f, worst_b);
    free(x);
    free(y);
    free(dy);
    free(dx);
    free(dx2);
}

/* ---- LayerNorm -------------------------------------------------------------- */

static void test_layernorm(void) {
    const int N = 37, C = 45; /* not multiples of the vector width */
    dt_rng r;
    dt_rng_seed(&r, 11);
    size_t nc = (size_t)N * C;
    float *x = malloc(nc * 4), *y = malloc(nc * 4), *dy = malloc(nc * 4), *dx = malloc(nc * 4);
    float w[45], b[45], dw[45], db[45], mean[37], rstd[37];
    rand_fill(x, nc, 2.0f, &r);
    for (size_t i = 0; i < nc; i++) x[i] += 3.0f; /* an offset the centring must remove */
    rand_fill(dy, nc, 1.0f, &r);
    rand_fill(w, C, 0.5f, &r);
    rand_fill(b, C, 0.5f, &r);
    for (int i = 0; i < C; i++) w[i] += 1.0f;
    for (size_t i = 0; i < nc; i++) dx[i] = 0.25f; /* backward accumulates */
    for (int i = 0; i < C; i++) dw[i] = db[i] = 0.5f;
    gpt_layernorm_forward(y, mean, rstd, x, w, b, N, C);
    gpt_layernorm_backward(dx, dw, db, dy, x, w, mean, rstd, N, C);
    double *ry = malloc(nc * 8), *rdx = malloc(nc * 8), rdw[45], rdb[45];
    for (int i = 0; i < C; i++) rdw[i] = rdb[i] = 0.5;
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C, *g = dy + (size_t)n * C;
        double m = 0.0, v = 0.0;
        for (int i = 0; i < C; i++) m += xr[i];
        m /= C;
        for (int i = 0; i < C; i++) v += (xr[i] - m) * (xr[i] - m);
        v /= C;
        double s = 1.0 / sqrt(v + 1e-5), a1 = 0.0, a2 = 0.0;
        for (int i = 0; i < C; i++) {
            double nrm = (xr[i] - m) * s;
            ry[(size_t)n * C + i] = nrm * w[i] + b[i];
            a1 += w[i] * g[i];
            a2 += w[i] * g[i] * nrm;
            rdw[i] += nrm * g[i];
            rdb[i] += g[i];
        }
        for (int i = 0; i < C; i++) {
            double nrm = (xr[i] - m) * s;
            rdx[(size_t)n * C + i] = 0.25 + s * (w[i] * g[i] - a1 / C - nrm * a2 / C);
        }
    }
    double e1 = rel_err_d(y, ry, nc), e2 = rel_err_d(dx, rdx, nc);
    double e3 = rel_err_d(dw, rdw, (size_t)C), e4 = rel_err_d(db, rdb, (size_t)C);
    CHECK(e1 < TOL && e2 < TOL && e3 < TOL && e4 < TOL,
          "layernorm errors out %.3g dinp %.3g dweight %.3g dbias %.3g", e1, e2, e3, e4);
    printf("  layernorm: out %.2e, dinp %.2e, dweight %.2e, dbias %.2e\n", e1, e2, e3, e4);
    free(x);
    free(y);
    free(dy);
    free(dx);
    free(ry);
    free(rdx);
}

/* ---- attention ----------------------------------------------------------------- */

/* float64 reference: out [B,T,C], and the backward into dqkv [B,T,3C]. */
static void ref_attention(double *out, double *dqkv, const float *qkv, const float *dout, int B,
                          int T, int C, int NH) {
    const int hs = C / NH, C3 = 3 * C;
    const double sc = 1.0 / sqrt((double)hs);
    double *p = malloc(sizeof(double) * (size_t)T), *dp = malloc(sizeof(double) * (size_t)T);
    memset(dqkv, 0, sizeof(double) * (size_t)B * T * C3);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * C3 + h * hs;
                double mx = -INFINITY, sum = 0.0;
                for (int j = 0; j <= t; j++) {
                    const float *k = qkv + ((size_t)b * T + j) * C3 + C + h * hs;
                    double s = 0.0;
                    for (int i = 0; i < hs; i++) s += (double)q[i] * k[i];
                    p[j] = s * sc;
                    if (p[j] > mx) mx = p[j];
                }
                for (int j = 0; j <= t; j++) sum += (p[j] = exp(p[j] - mx));
                for (int j = 0; j <= t; j++) p[j] /= sum;
                double *o = out + ((size_t)b * T + t) * C + h * hs;
                const float *g = dout + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) o[i] = 0.0;
                double dot = 0.0;
                for (int j = 0; j <= t; j++) {
                    const float *v = qkv + ((size_t)b * T + j) * C3 + 2 * C + h * hs;
                    double *dv = dqkv + ((size_t)b * T + j) * C3 + 2 * C + h * hs;
                    dp[j] = 0.0;
                    for (int i = 0; i < hs; i++) {
                        o[i] += p[j] * v[i];
                        dp[j] += (double)g[i] * v[i];
                        dv[i] += p[j] * g[i];
                    }
                    dot += p[j] * dp[j];
                }
                double *dq = dqkv + ((size_t)b * T + t) * C3 + h * hs;
                for (int j = 0; j <= t; j++) {
                    double ds = p[j] * (dp[j] - dot) * sc;
                    const float *k = qkv + ((size_t)b * T + j) * C3 + C + h * hs;
                    double *dk = dqkv + ((size_t)b * T + j) * C3 + C + h * hs;
                    for (int i = 0; i < hs; i++) {
                        dq[i] += ds * k[i];
                        dk[i] += ds * q[i];
                    }
                }
            }
    free(p);
    free(dp);
}

static void test_attention_at(int B, int T, int C, int NH) {
    dt_rng r;
    dt_rng_seed(&r, (uint64_t)(T * 131 + NH));
    const size_t n3 = (size_t)B * T * 3 * C, n1 = (size_t)B * T * C;
    float *qkv = malloc(n3 * 4), *out = malloc(n1 * 4), *dout = malloc(n1 * 4);
    float *att = malloc((size_t)B * NH * T * T * 4), *dqkv = malloc(n3 * 4);
    int rows = T < GPT_ATT_ROWS ? T : GPT_ATT_ROWS;
    float *scratch = malloc((size_t)rows * T * 4);
    double *rout = malloc(n1 * 8), *rdq = malloc(n3 * 8);
    rand_fill(qkv, n3, 1.0f, &r);
    rand_fill(dout, n1, 1.0f, &r);
    for (size_t i = 0; i < n3; i++) dqkv[i] = NAN; /* written, not accumulated */
    gpt_attention_forward(out, att, qkv, B, T, C, NH);
    gpt_attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH);
    ref_attention(rout, rdq, qkv, dout, B, T, C, NH);
    double ef = rel_err_d(out, rout, n1), eb = rel_err_d(dqkv, rdq, n3);
    CHECK(ef < TOL && eb < TOL, "attention B=%d T=%d C=%d NH=%d: out err %.3g, dqkv err %.3g",
          B, T, C, NH, ef, eb);
    /* the probabilities are causal rows that sum to 1 */
    double worst = 0.0;
    for (int bh = 0; bh < B * NH; bh++)
        for (int t = 0; t < T; t++) {
            const float *p = att + ((size_t)bh * T + t) * T;
            double s = 0.0;
            for (int j = 0; j <= t; j++) s += p[j];
            if (fabs(s - 1.0) > worst) worst = fabs(s - 1.0);
        }
    CHECK(worst < 1e-5, "attention rows sum to 1 within %.3g", worst);
    printf("  attention B=%d T=%3d C=%d NH=%d: out %.2e, dqkv %.2e\n", B, T, C, NH, ef, eb);
    /* the generation step: the last position against a cache of all positions */
    if (B == 1) {
        float *kc = malloc(n1 * 4), *vc = malloc(n1 * 4), *o = malloc((size_t)C * 4);
        float *sc = malloc((size_t)T * 4);
        for (int t = 0; t < T; t++) {
            memcpy(kc + (size_t)t * C, qkv + (size_t)t * 3 * C + C, (size_t)C * 4);
            memcpy(vc + (size_t)t * C, qkv + (size_t)t * 3 * C + 2 * C, (size_t)C * 4);
        }
        gpt_attention_step(o, sc, qkv + (size_t)(T - 1) * 3 * C, kc, vc, T, C, NH);
        double e = rel_err_d(o, rout + (size_t)(T - 1) * C, (size_t)C);
        CHECK(e < TOL, "attention step at T=%d err %.3g", T, e);
        free(kc);
        free(vc);
        free(o);
        free(sc);
    }
    free(qkv);
    free(out);
    free(dout);
    free(att);
    free(dqkv);
    free(scratch);
    free(rout);
    free(rdq);
}

/* ---- cross-entropy and embeddings ----------------------------------------------- */

static void test_crossentropy(void) {
    const int N = 19, V = 77;
    dt_rng r;
    dt_rng_seed(&r, 5);
    float *lg = malloc((size_t)N * V * 4), *d = malloc((size_t)N * V * 4), lse[19];
    float *lp = malloc((size_t)N * V * 4), tl[19];
    int32_t tg[19], hit[19];
    rand_fill(lg, (size_t)N * V, 3.0f, &r);
    lg[5] = 80.0f; /* a large logit: the max subtraction must hold it */
    for (int n = 0; n < N; n++) tg[n] = (int32_t)dt_rng_below(&r, V);
    tg[0] = 5;                 /* row 0's maximum is its target */
    lg[2 * V + 9] = 50.0f;     /* row 2: two equal maxima, the first (9) is not the target */
    lg[2 * V + 11] = 50.0f;
    tg[2] = 11;
    gpt_crossentropy_forward(lse, tl, hit, lg, tg, N, V, V);
    double tot = 0.0;
    for (int n = 0; n < N; n++) tot += (double)lse[n] - (double)tl[n];
    const float scale = 0.37f;
    gpt_crossentropy_backward(d, lg, lse, tg, N, V, V, scale);
    gpt_log_softmax(lp, lg, lse, N, V, V);
    double rtot = 0.0, *rd = malloc(sizeof(double) * (size_t)N * V);
    double *rlp = malloc(sizeof(double) * (size_t)N * V);
    for (int n = 0; n < N; n++) {
        const float *x = lg + (size_t)n * V;
        double mx = -INFINITY, s = 0.0;
        for (int i = 0; i < V; i++) mx = fmax(mx, x[i]);
        for (int i = 0; i < V; i++) s += exp(x[i] - mx);
        double l = mx + log(s);
        rtot += l - x[tg[n]];
        int first = 0;
        for (int i = 1; i < V; i++)
            if (x[i] > x[first]) first = i;
        CHECK(hit[n] == (first == tg[n]) && tl[n] == x[tg[n]], "row %d: hit %d (argmax %d, target %d), tlogit %g",
              n, hit[n], first, tg[n], (double)tl[n]);
        for (int i = 0; i < V; i++) {
            rd[(size_t)n * V + i] = (exp(x[i] - l) - (i == tg[n])) * scale;
            rlp[(size_t)n * V + i] = x[i] - l;
        }
    }
    CHECK(fabs(tot - rtot) / rtot < 1e-6, "cross-entropy sum %.9g vs %.9g", tot, rtot);
    double e = rel_err_d(d, rd, (size_t)N * V), el = rel_err_d(lp, rlp, (size_t)N * V);
    CHECK(e < TOL && el < TOL, "cross-entropy backward err %.3g, log-softmax %.3g", e, el);
    /* in place, as the model uses it */
    CHECK(hit[0] == 1 && hit[2] == 0, "the first maximum decides: row 0 hit %d, row 2 hit %d", hit[0], hit[2]);
    gpt_crossentropy_backward(lg, lg, lse, tg, N, V, V, scale);
    CHECK(memcmp(lg, d, (size_t)N * V * 4) == 0, "cross-entropy backward in place differs");
    printf("  cross-entropy: loss rel err %.2e, dlogits %.2e\n", fabs(tot - rtot) / rtot, e);
    free(lg);
    free(d);
    free(lp);
    free(rd);
    free(rlp);
}

static void test_encoder(void) {
    const int B = 2, T = 3, C = 4, V = 5;
    float wte[20], wpe[12], out[24], dwte[20] = {0}, dwpe[12] = {0}, dout[24];
    int32_t tok[6] = {4, 0, 4, 1, 4, 2};
    for (int i = 0; i < 20; i++) wte[i] = (float)i;
    for (int i = 0; i < 12; i++) wpe[i] = 100.0f * (float)i;
    for (int i = 0; i < 24; i++) dout[i] = 1.0f + (float)i;
    gpt_encoder_forward(out, tok, wte, wpe, B, T, C);
    int ok = 1;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int i = 0; i < C; i++)
                ok &= out[(b * T + t) * C + i] == wte[tok[b * T + t] * C + i] + wpe[t * C + i];
    CHECK(ok, "encoder forward");
    gpt_encoder_backward(dwte, dwpe, dout, tok, B, T, C);
    /* token 4 appears at (0,0), (0,2), (1,1): its row gets the three rows of dout */
    ok = 1;
    for (int i = 0; i < C; i++) {
        ok &= dwte[4 * C + i] == dout[0 * C + i] + dout[2 * C + i] + dout[4 * C + i];
        ok &= dwte[3 * C + i] == 0.0f;
        ok &= dwpe[1 * C + i] == dout[1 * C + i] + dout[4 * C + i];
    }
    CHECK(ok, "encoder backward scatter");
    (void)V;
}

int main(void) {
    test_gelu();
    test_layernorm();
    test_attention_at(2, 1, 8, 2);    /* one position */
    test_attention_at(2, 37, 24, 3);  /* inside one row block */
    test_attention_at(1, 64, 16, 2);  /* exactly one block */
    test_attention_at(2, 130, 16, 4); /* 2 full blocks and a partial one */
    test_attention_at(2, 100, 32, 4);
    test_crossentropy();
    test_encoder();
    return dt_test_finish("test_gpt_kernels");
}
