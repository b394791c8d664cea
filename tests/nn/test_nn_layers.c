/* tests/nn/test_nn_layers.c - every layer's forward against a float64
 * reference, and every backward against central finite differences of that
 * float64 reference.
 *
 * Method, per layer: random float inputs/parameters (kept away from kinks of
 * relu/max pool), a random cotangent R; the scalar L = sum(out * R).
 *  - forward:  err = max|out32 - out64| / max(max|out64|, 1e-6)  <= 1e-5
 *  - backward: gradients are pre-filled with 0.5 (backward must ACCUMULATE),
 *    the layer's backward is called with dout = R, 0.5 is subtracted, and
 *    each gradient tensor g is compared with the numerical gradient n of L
 *    computed on the float64 reference, (L(t+h) - L(t-h)) / 2h, h = 1e-6:
 *    err = max|g - n| / max(max|n|, 1e-6)  <= 1e-5.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "dtrain/nn.h"
#include "dtrain/rng.h"
#include "nn/nn_internal.h"

#define FWD_TOL 1e-5
#define GRAD_TOL 1e-5
#define MAXT 4

typedef struct gc_case gc_case;
struct gc_case {
    const char *name;
    int nt;                   /* differentiable tensors */
    const char *tname[MAXT];
    size_t n[MAXT];
    float *t[MAXT];           /* values used by the float kernels */
    float *g[MAXT];           /* analytic gradients */
    size_t nout;
    /* float64 reference forward */
    void (*ref)(gc_case *c, double *const *t64, double *out64);
    /* float forward/backward under test (backward accumulates into g[k]) */
    int (*fwd)(gc_case *c, float *out);
    int (*bwd)(gc_case *c, const float *dout);
    /* layer-specific settings */
    int B, C, H, W, OC, V, S;
    dt_conv2d_desc conv;
    dt_pool2d_desc pool;
    int train, has_bias;
    float *aux, *aux2, *aux3; /* saved state between forward and backward */
    int32_t *iaux;
    const int32_t *labels;
    float *mask;
};

static dt_rng g_rng;

static float urand(float lo, float hi) { return lo + (hi - lo) * dt_rng_uniform(&g_rng); }

static float *falloc(size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p) abort();
    return p;
}

static void fill(float *p, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) p[i] = urand(lo, hi);
}

/* values with |x| >= 0.05 (away from the relu kink) */
static void fill_away0(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = urand(0.05f, 1.5f);
        p[i] = dt_rng_uniform(&g_rng) < 0.5f ? -v : v;
    }
}

static double rel_err_fd(const float *a, const double *b, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > num || d != d) num = d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return num / (den > 1e-6 ? den : 1e-6);
}

static double loss64(gc_case *c, double *const *t64, const double *R, double *out64) {
    c->ref(c, t64, out64);
    double s = 0.0;
    for (size_t i = 0; i < c->nout; i++) s += out64[i] * R[i];
    return s;
}

static void run_case(gc_case *c) {
    double *t64[MAXT] = {0};
    for (int k = 0; k < c->nt; k++) {
        t64[k] = malloc(c->n[k] * sizeof(double));
        for (size_t i = 0; i < c->n[k]; i++) t64[k][i] = (double)c->t[k][i];
        c->g[k] = falloc(c->n[k]);
    }
    float *out = falloc(c->nout);
    double *out64 = malloc(c->nout * sizeof(double));
    /* forward */
    CHECK_OK(c->fwd(c, out));
    c->ref(c, t64, out64);
    double fe = rel_err_fd(out, out64, c->nout);
    CHECK(fe <= FWD_TOL, "%s forward rel err %.3g > %g", c->name, fe, FWD_TOL);
    /* backward with dout = R, grads pre-filled with 0.5 */
    float *R = falloc(c->nout);
    double *R64 = malloc(c->nout * sizeof(double));
    fill(R, c->nout, -1.0f, 1.0f);
    for (size_t i = 0; i < c->nout; i++) R64[i] = (double)R[i];
    for (int k = 0; k < c->nt; k++)
        for (size_t i = 0; i < c->n[k]; i++) c->g[k][i] = 0.5f;
    CHECK_OK(c->bwd(c, R));
    for (int k = 0; k < c->nt; k++)
        for (size_t i = 0; i < c->n[k]; i++) c->g[k][i] -= 0.5f;
    /* numerical gradients */
    const double h = 1e-6;
    for (int k = 0; k < c->nt; k++) {
        double *num = malloc(c->n[k] * sizeof(double));
        for (size_t i = 0; i < c->n[k]; i++) {
            double save = t64[k][i];
            t64[k][i] = save + h;
            double lp = loss64(c, t64, R64, out64);
            t64[k][i] = save - h;
            double lm = loss64(c, t64, R64, out64);
            t64[k][i] = save;
            num[i] = (lp - lm) / (2.0 * h);
        }
        double ge = rel_err_fd(c->g[k], num, c->n[k]);
        CHECK(ge <= GRAD_TOL, "%s d%s rel err %.3g > %g", c->name, c->tname[k], ge, GRAD_TOL);
        printf("  %-28s d%-7s fwd err %.2e  grad err %.2e\n", c->name, c->tname[k], fe, ge);
        free(num);
    }
    for (int k = 0; k < c->nt; k++) {
        free(t64[k]);
        free(c->g[k]);
        free(c->t[k]);
    }
    free(out);
    free(out64);
    free(R);
    free(R64);
}

/* ---- linear ---------------------------------------------------------------- */

static void lin_ref(gc_case *c, double *const *t, double *out) {
    const double *x = t[0], *w = t[1], *b = c->has_bias ? t[2] : NULL;
    for (int i = 0; i < c->B; i++)
        for (int o = 0; o < c->OC; o++) {
            double s = b ? b[o] : 0.0;
            for (int k = 0; k < c->C; k++) s += x[i * c->C + k] * w[o * c->C + k];
            out[i * c->OC + o] = s;
        }
}
static int lin_fwd(gc_case *c, float *out) {
    /* alternate between the direct and the workspace (transposed) paths */
    return dt_linear_forward(out, c->aux, c->t[0], c->t[1], c->has_bias ? c->t[2] : NULL, c->B,
                             c->C, c->OC);
}
static int lin_bwd(gc_case *c, const float *dout) {
    return dt_linear_backward(c->g[0], c->g[1], c->has_bias ? c->g[2] : NULL, dout, c->t[0],
                              c->t[1], c->B, c->C, c->OC);
}

static void test_linear(int B, int C, int OC, int bias, int use_work) {
    gc_case c = {0};
    c.name = use_work ? "linear(work)" : "linear";
    c.B = B;
    c.C = C;
    c.OC = OC;
    c.has_bias = bias;
    c.nt = bias ? 3 : 2;
    c.tname[0] = "inp";
    c.tname[1] = "weight";
    c.tname[2] = "bias";
    c.n[0] = (size_t)B * C;
    c.n[1] = (size_t)OC * C;
    c.n[2] = (size_t)OC;
    for (int k = 0; k < c.nt; k++) {
        c.t[k] = falloc(c.n[k]);
        fill(c.t[k], c.n[k], -1.0f, 1.0f);
    }
    c.nout = (size_t)B * OC;
    c.aux = use_work ? falloc((size_t)B * OC) : NULL;
    c.ref = lin_ref;
    c.fwd = lin_fwd;
    c.bwd = lin_bwd;
    run_case(&c);
    free(c.aux);
}

/* ---- conv2d ------------------------------------------------------------------ */

static void conv_ref(gc_case *c, double *const *t, double *out) {
    const dt_conv2d_desc *d = &c->conv;
    int OH = 0, OW = 0;
    dt_conv2d_out_hw(d, &OH, &OW);
    const double *x = t[0], *w = t[1], *b = c->has_bias ? t[2] : NULL;
    for (int n = 0; n < c->B; n++)
        for (int o = 0; o < d->OC; o++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double s = b ? b[o] : 0.0;
                    for (int ci = 0; ci < d->C; ci++)
                        for (int kh = 0; kh < d->KH; kh++)
                            for (int kw = 0; kw < d->KW; kw++) {
                                int ih = oh * d->stride_h - d->pad_h + kh;
                                int iw = ow * d->stride_w - d->pad_w + kw;
                                if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W) continue;
                                s += x[((n * d->C + ci) * d->H + ih) * d->W + iw] *
                                     w[((o * d->C + ci) * d->KH + kh) * d->KW + kw];
                            }
                    out[((n * d->OC + o) * OH + oh) * OW + ow] = s;
                }
}
static int conv_fwd(gc_case *c, float *out) {
    return dt_conv2d_forward(out, c->aux, c->t[0], c->t[1], c->has_bias ? c->t[2] : NULL, c->B,
                             &c->conv);
}
static int conv_bwd(gc_case *c, const float *dout) {
    return dt_conv2d_backward(c->g[0], c->g[1], c->has_bias ? c->g[2] : NULL, c->aux, dout,
                              c->t[0], c->t[1], c->B, &c->conv);
}

static void test_conv(const char *name, int B, dt_conv2d_desc d, int bias) {
    gc_case c = {0};
    c.name = name;
    c.B = B;
    c.conv = d;
    c.has_bias = bias;
    int OH = 0, OW = 0;
    CHECK_OK(dt_conv2d_out_hw(&d, &OH, &OW));
    c.nt = bias ? 3 : 2;
    c.tname[0] = "inp";
    c.tname[1] = "weight";
    c.tname[2] = "bias";
    c.n[0] = (size_t)B * d.C * d.H * d.W;
    c.n[1] = (size_t)d.OC * d.C * d.KH * d.KW;
    c.n[2] = (size_t)d.OC;
    for (int k = 0; k < c.nt; k++) {
        c.t[k] = falloc(c.n[k]);
        fill(c.t[k], c.n[k], -1.0f, 1.0f);
    }
    c.nout = (size_t)B * d.OC * OH * OW;
    size_t ws = dt_conv2d_workspace_size(&d);
    CHECK(ws == (size_t)d.C * d.KH * d.KW * OH * OW, "workspace size %zu", ws);
    c.aux = falloc(ws);
    c.ref = conv_ref;
    c.fwd = conv_fwd;
    c.bwd = conv_bwd;
    run_case(&c);
    free(c.aux);
}

/* ---- batch norm ---------------------------------------------------------------- */

static void bn_ref(gc_case *c, double *const *t, double *out) {
    const double *x = t[0], *w = t[1], *b = t[2];
    const int B = c->B, C = c->C, S = c->S;
    for (int ch = 0; ch < C; ch++) {
        double mean, var;
        if (c->train) {
            double s = 0.0, n = (double)B * S;
            for (int i = 0; i < B; i++)
                for (int j = 0; j < S; j++) s += x[(i * C + ch) * S + j];
            mean = s / n;
            double v = 0.0;
            for (int i = 0; i < B; i++)
                for (int j = 0; j < S; j++) {
                    double dd = x[(i * C + ch) * S + j] - mean;
                    v += dd * dd;
                }
            var = v / n;
        } else {
            mean = (double)c->aux2[ch]; /* running mean */
            var = (double)c->aux3[ch];  /* running var */
        }
        double rstd = 1.0 / sqrt(var + 1e-5);
        for (int i = 0; i < B; i++)
            for (int j = 0; j < S; j++) {
                size_t k = (size_t)(i * C + ch) * S + j;
                out[k] = (x[k] - mean) * rstd * w[ch] + b[ch];
            }
    }
}
static int bn_fwd(gc_case *c, float *out) {
    /* running stats: copies so that the reference still sees the old ones */
    float *rm = falloc((size_t)c->C), *rv = falloc((size_t)c->C);
    memcpy(rm, c->aux2, (size_t)c->C * sizeof(float));
    memcpy(rv, c->aux3, (size_t)c->C * sizeof(float));
    int rc = dt_batchnorm_forward(out, c->aux, c->aux + c->C, c->t[0], c->t[1], c->t[2], rm, rv,
                                  NULL, c->B, c->C, c->S, c->train, 0.1f, 1e-5f, NULL, NULL);
    if (c->train) {
        /* running statistics: (1-m)*old + m*stat with the unbiased variance */
        const int B = c->B, C = c->C, S = c->S;
        double n = (double)B * S, worst = 0.0;
        for (int ch = 0; ch < C; ch++) {
            double s = 0.0, v = 0.0;
            for (int i = 0; i < B; i++)
                for (int j = 0; j < S; j++) s += c->t[0][(i * C + ch) * S + j];
            double mean = s / n;
            for (int i = 0; i < B; i++)
                for (int j = 0; j < S; j++) {
                    double dd = c->t[0][(i * C + ch) * S + j] - mean;
                    v += dd * dd;
                }
            double em = 0.9 * c->aux2[ch] + 0.1 * mean;
            double ev = 0.9 * c->aux3[ch] + 0.1 * v / (n - 1.0);
            double e1 = fabs(rm[ch] - em) / fmax(fabs(em), 1e-3);
            double e2 = fabs(rv[ch] - ev) / fmax(fabs(ev), 1e-3);
            worst = fmax(worst, fmax(e1, e2));
        }
        CHECK(worst < 1e-5, "%s running stats rel err %.3g", c->name, worst);
    } else {
        CHECK(memcmp(rm, c->aux2, (size_t)c->C * sizeof(float)) == 0 &&
                  memcmp(rv, c->aux3, (size_t)c->C * sizeof(float)) == 0,
              "%s: eval forward must not change running stats", c->name);
    }
    free(rm);
    free(rv);
    return rc;
}
static int bn_bwd(gc_case *c, const float *dout) {
    float *work = falloc(2 * (size_t)c->C + 1);
    int rc = dt_batchnorm_backward(c->g[0], c->g[1], c->g[2], work, dout, c->t[0], c->t[1],
                                   c->aux, c->aux + c->C, c->B, c->C, c->S, c->train, NULL,
                                   NULL);
    free(work);
    return rc;
}

static void test_bn(const char *name, int B, int C, int S, int train) {
    gc_case c = {0};
    c.name = name;
    c.B = B;
    c.C = C;
    c.S = S;
    c.train = train;
    c.nt = 3;
    c.tname[0] = "inp";
    c.tname[1] = "weight";
    c.tname[2] = "bias";
    c.n[0] = (size_t)B * C * S;
    c.n[1] = c.n[2] = (size_t)C;
    for (int k = 0; k < 3; k++) c.t[k] = falloc(c.n[k]);
    fill(c.t[0], c.n[0], -2.0f, 3.0f);
    fill(c.t[1], c.n[1], 0.5f, 1.5f);
    fill(c.t[2], c.n[2], -0.5f, 0.5f);
    c.aux = falloc(2 * (size_t)C);
    c.aux2 = falloc((size_t)C);
    c.aux3 = falloc((size_t)C);
    fill(c.aux2, (size_t)C, -0.5f, 0.5f);
    fill(c.aux3, (size_t)C, 0.5f, 2.0f);
    c.nout = c.n[0];
    c.ref = bn_ref;
    c.fwd = bn_fwd;
    c.bwd = bn_bwd;
    run_case(&c);
    free(c.aux);
    free(c.aux2);
    free(c.aux3);
}

/* ---- element-wise activations -------------------------------------------------- */

static double act64(int kind, double x) {
    switch (kind) {
    case 0: return x > 0 ? x : 0.0;
    case 1: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case 2: return 1.0 / (1.0 + exp(-x));
    default: return tanh(x);
    }
}
static void act_ref(gc_case *c, double *const *t, double *out) {
    for (size_t i = 0; i < c->nout; i++) out[i] = act64(c->V, t[0][i]);
}
static int act_fwd(gc_case *c, float *out) {
    int rc;
    switch (c->V) {
    case 0: rc = dt_relu_forward(out, c->t[0], c->nout); break;
    case 1: rc = dt_gelu_forward(out, c->t[0], c->nout); break;
    case 2: rc = dt_sigmoid_forward(out, c->t[0], c->nout); break;
    default: rc = dt_tanh_forward(out, c->t[0], c->nout); break;
    }
    memcpy(c->aux, out, c->nout * sizeof(float));
    return rc;
}
static int act_bwd(gc_case *c, const float *dout) {
    switch (c->V) {
    case 0: return dt_relu_backward(c->g[0], dout, c->aux, c->nout);
    case 1: return dt_gelu_backward(c->g[0], dout, c->t[0], c->nout);
    case 2: return dt_sigmoid_backward(c->g[0], dout, c->aux, c->nout);
    default: return dt_tanh_backward(c->g[0], dout, c->aux, c->nout);
    }
}
static void test_act(const char *name, int kind) {
    gc_case c = {0};
    c.name = name;
    c.V = kind;
    c.nt = 1;
    c.tname[0] = "inp";
    c.n[0] = 300;
    c.t[0] = falloc(c.n[0]);
    fill_away0(c.t[0], c.n[0]);
    c.t[0][0] = 9.0f; /* saturated regions too */
    c.t[0][1] = -9.0f;
    c.nout = c.n[0];
    c.aux = falloc(c.nout);
    c.ref = act_ref;
    c.fwd = act_fwd;
    c.bwd = act_bwd;
    run_case(&c);
    free(c.aux);
}

/* ---- pooling -------------------------------------------------------------------- */

static void pool_ref(gc_case *c, double *const *t, double *out) {
    const dt_pool2d_desc *d = &c->pool;
    int OH = 0, OW = 0;
    dt_pool2d_out_hw(d, &OH, &OW);
    const double *x = t[0];
    for (int p = 0; p < c->B * d->C; p++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                double acc = c->V ? -INFINITY : 0.0;
                for (int kh = 0; kh < d->KH; kh++)
                    for (int kw = 0; kw < d->KW; kw++) {
                        double v = x[(size_t)p * d->H * d->W +
                                     (size_t)(oh * d->stride_h + kh) * d->W +
                                     (size_t)(ow * d->stride_w + kw)];
                        if (c->V) acc = v > acc ? v : acc;
                        else acc += v;
                    }
                out[((size_t)p * OH + oh) * OW + ow] = c->V ? acc : acc / (d->KH * d->KW);
            }
}
static int pool_fwd(gc_case *c, float *out) {
    if (c->V) return dt_maxpool2d_forward(out, c->iaux, c->t[0], c->B, &c->pool);
    return dt_avgpool2d_forward(out, c->t[0], c->B, &c->pool);
}
static int pool_bwd(gc_case *c, const float *dout) {
    if (c->V) return dt_maxpool2d_backward(c->g[0], dout, c->iaux, c->B, &c->pool);
    return dt_avgpool2d_backward(c->g[0], dout, c->B, &c->pool);
}
static void test_pool(const char *name, int maxpool, int B, dt_pool2d_desc d) {
    gc_case c = {0};
    c.name = name;
    c.V = maxpool;
    c.B = B;
    c.pool = d;
    int OH = 0, OW = 0;
    CHECK_OK(dt_pool2d_out_hw(&d, &OH, &OW));
    c.nt = 1;
    c.tname[0] = "inp";
    c.n[0] = (size_t)B * d.C * d.H * d.W;
    c.t[0] = falloc(c.n[0]);
    /* distinct values (a shuffled grid, spacing 0.01) so that max is unique */
    int64_t *perm = malloc(c.n[0] * sizeof(int64_t));
    for (size_t i = 0; i < c.n[0]; i++) perm[i] = (int64_t)i;
    dt_rng_shuffle_i64(&g_rng, perm, (int64_t)c.n[0]);
    for (size_t i = 0; i < c.n[0]; i++) c.t[0][i] = 0.01f * (float)perm[i] - 1.0f;
    free(perm);
    c.nout = (size_t)B * d.C * OH * OW;
    c.iaux = calloc(c.nout, sizeof(int32_t));
    c.ref = pool_ref;
    c.fwd = pool_fwd;
    c.bwd = pool_bwd;
    run_case(&c);
    free(c.iaux);
}

/* ---- flatten and dropout (fixed mask) ------------------------------------------- */

static void flat_ref(gc_case *c, double *const *t, double *out) {
    for (size_t i = 0; i < c->nout; i++) out[i] = c->mask ? t[0][i] * c->mask[i] : t[0][i];
}
static int flat_fwd(gc_case *c, float *out) {
    if (c->mask) return dt_dropout_forward(out, c->t[0], c->mask, c->nout);
    return dt_flatten_forward(out, c->t[0], c->nout);
}
static int flat_bwd(gc_case *c, const float *dout) {
    if (c->mask) return dt_dropout_backward(c->g[0], dout, c->mask, c->nout);
    return dt_flatten_backward(c->g[0], dout, c->nout);
}
static void test_flat_dropout(int dropout) {
    gc_case c = {0};
    c.name = dropout ? "dropout(p=0.3, fixed mask)" : "flatten";
    c.nt = 1;
    c.tname[0] = "inp";
    c.n[0] = 200;
    c.t[0] = falloc(c.n[0]);
    fill(c.t[0], c.n[0], -1.0f, 1.0f);
    c.nout = c.n[0];
    if (dropout) {
        c.mask = falloc(c.nout);
        dt_rng r;
        dt_rng_seed(&r, 99);
        CHECK_OK(dt_dropout_mask(c.mask, c.nout, 0.3f, &r));
    }
    c.ref = flat_ref;
    c.fwd = flat_fwd;
    c.bwd = flat_bwd;
    run_case(&c);
    free(c.mask);
}

/* ---- log-softmax, NLL, cross-entropy ------------------------------------------------ */

static void lsm64(const double *x, double *y, int B, int V) {
    for (int b = 0; b < B; b++) {
        double m = x[b * V];
        for (int v = 1; v < V; v++) m = fmax(m, x[b * V + v]);
        double s = 0.0;
        for (int v = 0; v < V; v++) s += exp(x[b * V + v] - m);
        for (int v = 0; v < V; v++) y[b * V + v] = x[b * V + v] - m - log(s);
    }
}
static void lsm_ref(gc_case *c, double *const *t, double *out) { lsm64(t[0], out, c->B, c->V); }
static int lsm_fwd(gc_case *c, float *out) {
    int rc = dt_log_softmax_forward(out, c->t[0], c->B, c->V);
    memcpy(c->aux, out, c->nout * sizeof(float));
    return rc;
}
static int lsm_bwd(gc_case *c, const float *dout) {
    return dt_log_softmax_backward(c->g[0], dout, c->aux, c->B, c->V);
}

static void nll_ref(gc_case *c, double *const *t, double *out) {
    double s = 0.0;
    for (int b = 0; b < c->B; b++) s -= t[0][b * c->V + c->labels[b]];
    out[0] = s / c->B;
}
static int nll_fwd(gc_case *c, float *out) {
    return dt_nll_loss_forward(out, c->t[0], c->labels, c->B, c->V);
}
static int nll_bwd(gc_case *c, const float *dout) {
    return dt_nll_loss_backward(c->g[0], c->labels, c->B, c->V, dout[0]);
}

static void ce_ref(gc_case *c, double *const *t, double *out) {
    double *lp = malloc((size_t)c->B * c->V * sizeof(double));
    lsm64(t[0], lp, c->B, c->V);
    double s = 0.0;
    for (int b = 0; b < c->B; b++) s -= lp[b * c->V + c->labels[b]];
    out[0] = s / c->B;
    free(lp);
}
static int ce_fwd(gc_case *c, float *out) {
    return dt_cross_entropy_forward(out, c->aux, c->t[0], c->labels, c->B, c->V);
}
static int ce_bwd(gc_case *c, const float *dout) {
    return dt_cross_entropy_backward(c->g[0], c->aux, c->labels, c->B, c->V, dout[0]);
}

static void test_losses(void) {
    const int B = 5, V = 7;
    int32_t labels[5] = {0, 6, 3, 3, 1};
    gc_case c = {0};
    c.B = B;
    c.V = V;
    c.labels = labels;
    c.nt = 1;
    c.tname[0] = "inp";
    c.n[0] = (size_t)B * V;
    c.aux = falloc(c.n[0]);

    c.name = "log_softmax";
    c.t[0] = falloc(c.n[0]);
    fill(c.t[0], c.n[0], -3.0f, 3.0f);
    c.nout = c.n[0];
    c.ref = lsm_ref;
    c.fwd = lsm_fwd;
    c.bwd = lsm_bwd;
    run_case(&c);

    c.name = "nll_loss";
    c.t[0] = falloc(c.n[0]);
    fill(c.t[0], c.n[0], -4.0f, -0.1f);
    c.nout = 1;
    c.ref = nll_ref;
    c.fwd = nll_fwd;
    c.bwd = nll_bwd;
    run_case(&c);

    c.name = "cross_entropy";
    c.t[0] = falloc(c.n[0]);
    fill(c.t[0], c.n[0], -3.0f, 3.0f);
    c.nout = 1;
    c.ref = ce_ref;
    c.fwd = ce_fwd;
    c.bwd = ce_bwd;
    run_case(&c);
    free(c.aux);
}

/* ---- the vectorised exp behind sigmoid ----------------------------------------------- */

static void test_sigmoid_range(void) {
    /* sigmoid over a wide range vs double, element-wise relative error */
    const size_t n = 200001;
    float *x = falloc(n), *y = falloc(n);
    for (size_t i = 0; i < n; i++) x[i] = -100.0f + 200.0f * (float)i / (float)(n - 1);
    CHECK_OK(dt_sigmoid_forward(y, x, n));
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = 1.0 / (1.0 + exp(-(double)x[i]));
        double r = e > 1e-30 ? fabs(y[i] - e) / e : fabs(y[i] - e);
        if (r > worst) worst = r;
    }
    CHECK(worst < 1e-6, "sigmoid element-wise rel err %.3g", worst);
    float sp[4] = {INFINITY, -INFINITY, NAN, 0.0f}, so[4];
    CHECK_OK(dt_sigmoid_forward(so, sp, 4));
    CHECK(so[0] == 1.0f && so[1] == 0.0f && isnan(so[2]) && so[3] == 0.5f,
          "sigmoid specials %g %g %g %g", so[0], so[1], so[2], so[3]);
    printf("  sigmoid over [-100,100]: max element-wise rel err %.2e\n", worst);
    free(x);
    free(y);
}

/* ---- dropout mask statistics and determinism ------------------------------------------ */

static void test_dropout_mask(void) {
    const size_t n = 100000;
    float *m1 = falloc(n), *m2 = falloc(n);
    dt_rng r1, r2;
    dt_rng_seed(&r1, 7);
    dt_rng_seed(&r2, 7);
    CHECK_OK(dt_dropout_mask(m1, n, 0.25f, &r1));
    CHECK_OK(dt_dropout_mask(m2, n, 0.25f, &r2));
    CHECK(memcmp(m1, m2, n * sizeof(float)) == 0, "same seed must give the same mask");
    size_t dropped = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (m1[i] == 0.0f) dropped++;
        else if (fabsf(m1[i] - 1.0f / 0.75f) > 1e-7f) bad++;
    }
    double frac = (double)dropped / (double)n;
    CHECK(bad == 0 && fabs(frac - 0.25) < 0.01, "dropout frac %.4f bad %zu", frac, bad);
    CHECK_OK(dt_dropout_mask(m1, n, 0.0f, &r1));
    size_t ones = 0;
    for (size_t i = 0; i < n; i++) ones += m1[i] == 1.0f;
    CHECK(ones == n, "p=0 mask must be all ones");
    CHECK_OK(dt_dropout_mask(m1, 10, 1.0f, &r1));
    CHECK(m1[0] == 0.0f && m1[9] == 0.0f, "p=1 mask must be zero");
    CHECK_ERR(dt_dropout_mask(m1, 10, 1.5f, &r1), DT_ERR_INVALID, "not in [0,1]");
    CHECK_ERR(dt_dropout_mask(m1, 10, 0.5f, NULL), DT_ERR_INVALID, "NULL");
    free(m1);
    free(m2);
}

/* ---- argument errors --------------------------------------------------------------------- */

static void test_errors(void) {
    float a[64] = {0}, b[64] = {0}, w[64] = {0};
    int32_t lab[2] = {0, 9};
    CHECK_ERR(dt_linear_forward(NULL, NULL, a, w, NULL, 2, 2, 2), DT_ERR_INVALID, "NULL");
    CHECK_ERR(dt_linear_forward(b, NULL, a, w, NULL, 0, 2, 2), DT_ERR_INVALID, "must be > 0");
    CHECK_ERR(dt_linear_backward(a, NULL, NULL, b, a, NULL, 2, 2, 2), DT_ERR_INVALID,
              "weight is NULL");
    dt_conv2d_desc d = {1, 4, 4, 2, 5, 5, 1, 1, 0, 0};
    CHECK_ERR(dt_conv2d_out_hw(&d, NULL, NULL), DT_ERR_INVALID, "larger than padded input");
    d.KH = d.KW = 3;
    d.stride_h = 0;
    CHECK_ERR(dt_conv2d_forward(b, w, a, w, NULL, 1, &d), DT_ERR_INVALID, "stride");
    d.stride_h = 1;
    CHECK_ERR(dt_conv2d_forward(b, NULL, a, w, NULL, 1, &d), DT_ERR_INVALID, "workspace");
    CHECK(dt_conv2d_workspace_size(NULL) == 0, "workspace of NULL desc");
    float mean[2], rstd[2];
    CHECK_ERR(dt_batchnorm_forward(b, mean, rstd, a, NULL, NULL, NULL, NULL, NULL, 1, 2, 1, 1,
                                   0.1f, 1e-5f, NULL, NULL),
              DT_ERR_INVALID, "more than 1 value per channel");
    CHECK_ERR(dt_batchnorm_forward(b, mean, rstd, a, NULL, NULL, NULL, NULL, NULL, 2, 2, 1, 0,
                                   0.1f, 1e-5f, NULL, NULL),
              DT_ERR_INVALID, "eval mode needs running");
    dt_pool2d_desc p = {1, 2, 2, 3, 3, 1, 1};
    CHECK_ERR(dt_avgpool2d_forward(b, a, 1, &p), DT_ERR_INVALID, "larger than input");
    CHECK_ERR(dt_nll_loss_forward(b, a, lab, 2, 5), DT_ERR_INVALID, "label 9");
    CHECK_ERR(dt_cross_entropy_backward(b, a, lab, 2, 5, 1.0f), DT_ERR_INVALID, "label 9");
    CHECK_ERR(dt_relu_forward(NULL, a, 4), DT_ERR_INVALID, "NULL");
    CHECK_ERR(dt_flatten_backward(a, a, 4), DT_ERR_INVALID, "must not equal");
    CHECK_ERR(dt_set_num_threads(0), DT_ERR_INVALID, ">= 1");
    CHECK(dt_get_num_threads() == 1, "default BLAS threads %d", dt_get_num_threads());
}


/* ---- overwrite mode of the internal _ex kernels (used by dt_model) ------------------
 * acc = 0 on a garbage-filled dinp must equal acc = 1 on a zeroed one. */
static int ex_same(const char *what, const float *a, const float *b, size_t n) {
    int same = 1; /* by value: -0 (overwrite) and +0 (0 + -0) are equal */
    for (size_t i = 0; i < n; i++) same &= a[i] == b[i];
    CHECK(same, "%s: overwrite mode differs from accumulate-into-zero", what);
    return same;
}

static void test_overwrite_mode(void) {
    enum { B = 2, C = 3, H = 6, W = 6 };
    const size_t n = (size_t)B * C * H * W;
    float *x = falloc(n), *y = falloc(n), *g = falloc(n), *d0 = falloc(n), *d1 = falloc(n);
    float *mask = falloc(n), *w = falloc(64), *dw = falloc(64), *work = falloc(4096);
    int32_t *am = calloc(n, sizeof(int32_t));
    fill(x, n, -1.0f, 1.0f);
    fill(g, n, -1.0f, 1.0f);
    fill(w, 64, -1.0f, 1.0f);
#define RESET() do { memset(d1, 0, n * sizeof(float)); fill(d0, n, -9.0f, 9.0f); } while (0)
    RESET();
    dt_relu_forward(y, x, n);
    dt_nn_relu_backward_ex(d0, g, y, n, 0);
    dt_nn_relu_backward_ex(d1, g, y, n, 1);
    ex_same("relu", d0, d1, n);
    RESET();
    dt_nn_gelu_backward_ex(d0, g, x, n, 0);
    dt_nn_gelu_backward_ex(d1, g, x, n, 1);
    ex_same("gelu", d0, d1, n);
    RESET();
    dt_sigmoid_forward(y, x, n);
    dt_nn_sigmoid_backward_ex(d0, g, y, n, 0);
    dt_nn_sigmoid_backward_ex(d1, g, y, n, 1);
    ex_same("sigmoid", d0, d1, n);
    RESET();
    dt_tanh_forward(y, x, n);
    dt_nn_tanh_backward_ex(d0, g, y, n, 0);
    dt_nn_tanh_backward_ex(d1, g, y, n, 1);
    ex_same("tanh", d0, d1, n);
    RESET();
    dt_rng r;
    dt_rng_seed(&r, 3);
    dt_dropout_mask(mask, n, 0.5f, &r);
    dt_nn_dropout_backward_ex(d0, g, mask, n, 0);
    dt_nn_dropout_backward_ex(d1, g, mask, n, 1);
    ex_same("dropout", d0, d1, n);
    RESET();
    dt_nn_identity_backward_ex(d0, g, n, 0);
    dt_nn_identity_backward_ex(d1, g, n, 1);
    ex_same("identity", d0, d1, n);
    /* pools: 2x2/2 (fast path), odd input, and overlapping windows */
    dt_pool2d_desc pd[3] = {{C, H, W, 2, 2, 2, 2}, {C, H - 1, W - 1, 2, 2, 2, 2},
                            {C, H, W, 3, 3, 2, 1}};
    for (int k = 0; k < 3; k++) {
        size_t ni = (size_t)B * C * pd[k].H * pd[k].W;
        RESET();
        dt_nn_avgpool2d_backward_ex(d0, g, B, &pd[k], 0);
        dt_nn_avgpool2d_backward_ex(d1, g, B, &pd[k], 1);
        ex_same("avgpool", d0, d1, ni);
        RESET();
        dt_maxpool2d_forward(y, am, x, B, &pd[k]);
        dt_nn_maxpool2d_backward_ex(d0, g, am, B, &pd[k], 0);
        dt_nn_maxpool2d_backward_ex(d1, g, am, B, &pd[k], 1);
        ex_same("maxpool", d0, d1, ni);
    }
    /* linear: C=6 -> OC=4 over B=3 rows */
    RESET();
    dt_nn_linear_backward_ex(d0, dw, NULL, g, x, w, 3, 6, 4, 0);
    dt_nn_linear_backward_ex(d1, dw, NULL, g, x, w, 3, 6, 4, 1);
    ex_same("linear", d0, d1, 18);
    /* conv2d 3x3 pad 1, and pointwise */
    dt_conv2d_desc cd[2] = {{C, H, W, 2, 3, 3, 1, 1, 1, 1}, {C, H, W, 2, 1, 1, 1, 1, 0, 0}};
    for (int k = 0; k < 2; k++) {
        RESET();
        dt_nn_conv2d_backward_ex(d0, NULL, NULL, work, g, x, w, B, &cd[k], 0);
        dt_nn_conv2d_backward_ex(d1, NULL, NULL, work, g, x, w, B, &cd[k], 1);
        ex_same("conv2d", d0, d1, n);
    }
    /* batch norm */
    float mean[C], rstd[C], bw[C] = {1.0f, 0.5f, 2.0f}, bb[C] = {0.1f, 0.2f, 0.3f};
    dt_batchnorm_forward(y, mean, rstd, x, bw, bb, NULL, NULL, NULL, B, C, H * W, 1, 0.1f, 1e-5f,
                         NULL, NULL);
    RESET();
    dt_nn_batchnorm_backward_ex(d0, NULL, NULL, work, g, x, bw, mean, rstd, B, C, H * W, 1, NULL,
                                NULL, 0);
    dt_nn_batchnorm_backward_ex(d1, NULL, NULL, work, g, x, bw, mean, rstd, B, C, H * W, 1, NULL,
                                NULL, 1);
    ex_same("batchnorm", d0, d1, n);
#undef RESET
    free(x); free(y); free(g); free(d0); free(d1); free(mask); free(w); free(dw); free(work);
    free(am);
}

int main(void) {
    dt_rng_seed(&g_rng, 12345);
    printf("layer gradient checks (forward tol %g, gradient tol %g):\n", FWD_TOL, GRAD_TOL);
    test_linear(3, 5, 4, 1, 0);
    test_linear(3, 5, 7, 1, 1); /* OC > B: the transposed workspace path */
    test_linear(4, 6, 3, 0, 1);
    dt_conv2d_desc d1 = {2, 6, 5, 3, 3, 3, 1, 1, 1, 1};
    test_conv("conv2d 3x3 s1 p1 bias", 2, d1, 1);
    dt_conv2d_desc d2 = {3, 7, 8, 4, 3, 2, 2, 3, 1, 2};
    test_conv("conv2d 3x2 s(2,3) p(1,2)", 2, d2, 0);
    dt_conv2d_desc d3 = {1, 8, 8, 3, 5, 5, 2, 2, 2, 2};
    test_conv("conv2d 5x5 s2 p2 bias", 2, d3, 1);
    dt_conv2d_desc d4 = {4, 3, 3, 2, 1, 1, 1, 1, 0, 0};
    test_conv("conv2d 1x1 pointwise", 3, d4, 1);
    test_bn("batchnorm2d train", 3, 4, 6, 1);
    test_bn("batchnorm2d eval", 3, 4, 6, 0);
    test_bn("batchnorm1d train", 6, 5, 1, 1);
    test_bn("batchnorm1d eval", 6, 5, 1, 0);
    test_act("relu", 0);
    test_act("gelu", 1);
    test_act("sigmoid", 2);
    test_act("tanh", 3);
    dt_pool2d_desc p1 = {3, 6, 6, 2, 2, 2, 2};
    test_pool("avgpool 2x2 s2", 0, 2, p1);
    test_pool("maxpool 2x2 s2", 1, 2, p1);
    dt_pool2d_desc p2 = {2, 7, 6, 3, 2, 2, 1};
    test_pool("avgpool 3x2 s(2,1)", 0, 2, p2);
    test_pool("maxpool 3x2 s(2,1)", 1, 2, p2);
    test_flat_dropout(0);
    test_flat_dropout(1);
    test_losses();
    test_sigmoid_range();
    test_dropout_mask();
    test_overwrite_mode();
    test_errors();
    return dt_test_finish("test_nn_layers");
}
