/* tests/nn/test_nn_model.c - dt_model: configuration errors, the flat layout
 * contract, init, forward/backward state machine, accumulation, hooks (order
 * and grad_ready finality), per-layer parameter/gradient redirection (a
 * ZeRO-3 style gather/release driven from hooks), batch growth, dropout. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "dtrain/model.h"
#include "dtrain/nn.h"
#include "dtrain/rng.h"

static void make_batch(float *x, int32_t *y, int B, uint64_t seed) {
    dt_rng r;
    dt_rng_seed(&r, seed);
    for (int i = 0; i < B * 784; i++) x[i] = dt_rng_uniform(&r);
    for (int b = 0; b < B; b++) y[b] = (int32_t)dt_rng_below(&r, 10);
}

static dt_model *make(const char *name, int h1, int h2, int h3, float p, uint64_t seed) {
    dt_model_config cfg;
    if (dt_model_config_default(&cfg, name)) return NULL;
    int cnn = strcmp(name, "cnn") == 0; /* its first two sizes are channels */
    if (h1) *(cnn ? &cfg.conv_channels1 : &cfg.hidden1) = h1;
    if (h2) *(cnn ? &cfg.conv_channels2 : &cfg.hidden2) = h2;
    if (h3) cfg.hidden3 = h3;
    cfg.dropout = p;
    cfg.seed = seed;
    dt_model *m = NULL;
    CHECK_OK(dt_model_create(&cfg, &m));
    return m;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double d = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        if (e > d || e != e) d = e;
    }
    return d;
}

/* ---- configuration errors ---------------------------------------------------- */

static void test_config_errors(void) {
    dt_model_config cfg;
    dt_model *m = (dt_model *)1;
    CHECK_ERR(dt_model_config_default(&cfg, "resnet"), DT_ERR_INVALID, "unknown model name");
    CHECK_ERR(dt_model_config_default(NULL, "mlp"), DT_ERR_INVALID, "NULL");
    CHECK_ERR(dt_model_create(NULL, &m), DT_ERR_INVALID, "NULL config");
    CHECK(m == NULL, "*out must be NULL after a failed create");
    CHECK_OK(dt_model_config_default(&cfg, "mlp"));
    CHECK(cfg.hidden1 == 1024 && cfg.hidden2 == 1024, "mlp defaults %d %d", cfg.hidden1,
          cfg.hidden2);
    CHECK_ERR(dt_model_create(&cfg, NULL), DT_ERR_INVALID, "NULL out");
    cfg.name = "vgg";
    CHECK_ERR(dt_model_create(&cfg, &m), DT_ERR_INVALID, "unknown model name 'vgg'");
    cfg.name = NULL;
    CHECK_ERR(dt_model_create(&cfg, &m), DT_ERR_INVALID, "NULL model name");
    cfg.name = "mlp";
    cfg.hidden1 = 0;
    CHECK_ERR(dt_model_create(&cfg, &m), DT_ERR_INVALID, "hidden1=0");
    cfg.hidden1 = 16;
    cfg.hidden2 = -3;
    CHECK_ERR(dt_model_create(&cfg, &m), DT_ERR_INVALID, "must be > 0");
    CHECK_OK(dt_model_config_default(&cfg, "cnn"));
    CHECK(cfg.conv_channels1 == 32 && cfg.conv_channels2 == 64 && cfg.hidden3 == 128 && cfg.dropout == 0.25f,
          "cnn defaults");
    cfg.hidden3 = 0;
    CHECK_ERR(dt_model_create(&cfg, &m), DT_ERR_INVALID, "hidden3=0");
    CHECK_OK(dt_model_config_default(&cfg, "cnn"));
    cfg.dropout = 1.0f;
    CHECK_ERR(dt_model_create(&cfg, &m), DT_ERR_INVALID, "dropout");
    cfg.dropout = -0.1f;
    CHECK_ERR(dt_model_create(&cfg, &m), DT_ERR_INVALID, "dropout");
    cfg.dropout = NAN;
    CHECK_ERR(dt_model_create(&cfg, &m), DT_ERR_INVALID, "dropout");
    /* lenet ignores the sizes */
    CHECK_OK(dt_model_config_default(&cfg, "lenet"));
    CHECK_OK(dt_model_create(&cfg, &m));
    dt_model_free(m);
    dt_model_free(NULL);
}

/* ---- layout contract ------------------------------------------------------------ */

static void check_layout(dt_model *m, const char *const *names, int nnames,
                         const char *const *bnames, int nbnames, size_t expect_params) {
    const char *mn = dt_model_name(m);
    CHECK(dt_model_num_params(m) == expect_params, "%s params %zu != %zu", mn,
          dt_model_num_params(m), expect_params);
    CHECK(dt_model_num_slices(m) == nnames, "%s slices %d != %d", mn, dt_model_num_slices(m),
          nnames);
    CHECK(dt_model_num_buffer_slices(m) == nbnames, "%s buffer slices %d", mn,
          dt_model_num_buffer_slices(m));
    size_t off = 0;
    int last_layer = -1;
    for (int i = 0; i < dt_model_num_slices(m) && i < nnames; i++) {
        const dt_param_slice *s = dt_model_slice(m, i);
        CHECK(strcmp(s->name, names[i]) == 0, "%s slice %d name %s != %s", mn, i, s->name,
              names[i]);
        CHECK(s->offset == off, "%s slice %s offset %zu != %zu (not contiguous)", mn, s->name,
              s->offset, off);
        size_t cnt = 1;
        for (int k = 0; k < s->ndim; k++) cnt *= (size_t)s->shape[k];
        for (int k = s->ndim; k < 4; k++) CHECK(s->shape[k] == 0, "unused dims are 0");
        CHECK(cnt == s->count && s->ndim >= 1 && s->ndim <= 4, "%s slice %s count", mn,
              s->name);
        CHECK(s->layer >= last_layer, "%s slices not in layer order", mn);
        last_layer = s->layer;
        /* the slice is inside its layer's range */
        size_t lo, lc;
        CHECK_OK(dt_model_layer_params(m, s->layer, &lo, &lc));
        CHECK(s->offset >= lo && s->offset + s->count <= lo + lc, "%s slice %s outside layer",
              mn, s->name);
        int isb = -1;
        CHECK(dt_model_find_slice(m, names[i], &isb) == s && isb == 0, "find %s", names[i]);
        off += s->count;
    }
    CHECK(off == dt_model_num_params(m), "%s slices cover %zu of %zu", mn, off,
          dt_model_num_params(m));
    /* layer ranges are contiguous, in forward order */
    size_t next = 0;
    int nl = dt_model_num_layers(m);
    for (int l = 0; l < nl; l++) {
        size_t lo, lc;
        CHECK_OK(dt_model_layer_params(m, l, &lo, &lc));
        CHECK(lo == next, "%s layer %d offset %zu != %zu", mn, l, lo, next);
        next = lo + lc;
        CHECK(dt_model_layer_name(m, l) && dt_model_layer_kind(m, l), "layer %d names", l);
        CHECK(dt_model_layer_output_size(m, l) > 0, "layer %d output size", l);
        CHECK((lc == 0) == (dt_model_layer_param_ptr(m, l) == NULL), "param ptr of layer %d",
              l);
    }
    CHECK(next == dt_model_num_params(m), "%s layers cover %zu", mn, next);
    CHECK(dt_model_layer_output_size(m, nl - 1) == 10, "%s last layer must output 10", mn);
    /* buffers */
    size_t boff = 0;
    for (int i = 0; i < dt_model_num_buffer_slices(m) && i < nbnames; i++) {
        const dt_param_slice *s = dt_model_buffer_slice(m, i);
        CHECK(strcmp(s->name, bnames[i]) == 0, "%s buffer %d name %s != %s", mn, i, s->name,
              bnames[i]);
        CHECK(s->offset == boff, "%s buffer %s offset", mn, s->name);
        int isb = -1;
        CHECK(dt_model_find_slice(m, bnames[i], &isb) == s && isb == 1, "find %s", bnames[i]);
        const float *v = dt_model_buffers(m) + s->offset;
        int is_var = strstr(s->name, "running_var") != NULL;
        int okv = 1;
        for (size_t k = 0; k < s->count; k++) okv &= v[k] == (is_var ? 1.0f : 0.0f);
        CHECK(okv, "%s buffer %s initial values", mn, s->name);
        boff += s->count;
    }
    CHECK(boff == dt_model_num_buffers(m), "%s buffers cover %zu of %zu", mn, boff,
          dt_model_num_buffers(m));
    CHECK(dt_model_find_slice(m, "nope.weight", NULL) == NULL, "find of a missing name");
    CHECK(((uintptr_t)dt_model_params(m) & 63) == 0 && ((uintptr_t)dt_model_grads(m) & 63) == 0,
          "64-byte alignment");
    /* init: weights within +-1/sqrt(fan_in); BN weight 1, bias 0; grads 0 */
    for (int i = 0; i < dt_model_num_slices(m); i++) {
        const dt_param_slice *s = dt_model_slice(m, i);
        const float *p = dt_model_params(m) + s->offset;
        const char *kind = dt_model_layer_kind(m, s->layer);
        if (strncmp(kind, "batchnorm", 9) == 0) {
            float want = strstr(s->name, ".weight") ? 1.0f : 0.0f;
            int ok = 1;
            for (size_t k = 0; k < s->count; k++) ok &= p[k] == want;
            CHECK(ok, "%s %s init", mn, s->name);
            continue;
        }
        const dt_param_slice *w = s;
        if (strstr(s->name, ".bias")) w = dt_model_slice(m, i - 1);
        size_t fan_in = w->count / (size_t)w->shape[0];
        double bound = 1.0 / sqrt((double)fan_in), mx = 0.0, mean = 0.0;
        for (size_t k = 0; k < s->count; k++) {
            mx = fmax(mx, fabs(p[k]));
            mean += p[k];
        }
        mean /= (double)s->count;
        CHECK(mx <= bound && mx > 0.5 * bound, "%s %s init max %g bound %g", mn, s->name, mx,
              bound);
        if (s->count > 1000)
            CHECK(fabs(mean) < 0.05 * bound, "%s %s init mean %g", mn, s->name, mean);
    }
    int zero = 1;
    for (size_t k = 0; k < dt_model_num_params(m); k++) zero &= dt_model_grads(m)[k] == 0.0f;
    CHECK(zero, "%s grads start at zero", mn);
}

static void test_layouts(void) {
    dt_model *m = make("mlp", 0, 0, 0, 0.0f, 1);
    static const char *const mlp_names[] = {"fc1.weight", "fc1.bias", "fc2.weight",
                                            "fc2.bias",   "fc3.weight", "fc3.bias"};
    check_layout(m, mlp_names, 6, NULL, 0,
                 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10);
    const dt_param_slice *s = dt_model_find_slice(m, "fc2.weight", NULL);
    CHECK(s && s->ndim == 2 && s->shape[0] == 1024 && s->shape[1] == 1024 && s->layer == 3,
          "fc2.weight shape/layer");
    CHECK(dt_model_num_layers(m) == 6, "mlp layers");
    CHECK(dt_model_input_size(m) == 784 && dt_model_num_classes(m) == 10, "mlp io sizes");
    dt_model_free(m);

    m = make("lenet", 0, 0, 0, 0.0f, 1);
    static const char *const lenet_names[] = {"conv1.weight", "bn1.weight", "bn1.bias",
                                              "linear1.weight", "linear1.bias"};
    static const char *const lenet_bufs[] = {"bn1.running_mean", "bn1.running_var"};
    check_layout(m, lenet_names, 5, lenet_bufs, 2, 6 * 25 + 12 + 1176 * 10 + 10);
    s = dt_model_find_slice(m, "conv1.weight", NULL);
    CHECK(s && s->ndim == 4 && s->shape[0] == 6 && s->shape[1] == 1 && s->shape[2] == 5 &&
              s->shape[3] == 5,
          "conv1.weight shape");
    CHECK(dt_model_num_layers(m) == 6 && strcmp(dt_model_layer_kind(m, 1), "batchnorm2d") == 0,
          "lenet layers");
    dt_model_free(m);

    m = make("cnn", 0, 0, 0, 0.25f, 1);
    static const char *const cnn_names[] = {"conv1.weight", "bn1.weight", "bn1.bias",
                                            "conv2.weight", "bn2.weight", "bn2.bias",
                                            "fc1.weight",   "fc1.bias",   "fc2.weight",
                                            "fc2.bias"};
    static const char *const cnn_bufs[] = {"bn1.running_mean", "bn1.running_var",
                                           "bn2.running_mean", "bn2.running_var"};
    check_layout(m, cnn_names, 10, cnn_bufs, 4,
                 288 + 64 + 18432 + 128 + 3136 * 128 + 128 + 1280 + 10);
    dt_model_free(m);

    /* determinism of init */
    dt_model *a = make("mlp", 32, 16, 0, 0.0f, 5), *b = make("mlp", 32, 16, 0, 0.0f, 5),
             *c = make("mlp", 32, 16, 0, 0.0f, 6);
    size_t n = dt_model_num_params(a);
    CHECK(memcmp(dt_model_params(a), dt_model_params(b), n * sizeof(float)) == 0,
          "same seed, same init");
    CHECK(memcmp(dt_model_params(a), dt_model_params(c), n * sizeof(float)) != 0,
          "different seed, different init");
    dt_model_free(a);
    dt_model_free(b);
    dt_model_free(c);
}

/* ---- forward/backward state and values --------------------------------------------- */

static void test_forward_backward(void) {
    const int B = 16;
    float x[16 * 784];
    int32_t y[16];
    make_batch(x, y, B, 3);
    dt_model *m = make("lenet", 0, 0, 0, 0.0f, 2);
    float loss = 0.0f;
    CHECK_ERR(dt_model_backward(m), DT_ERR_STATE, "no forward");
    CHECK(dt_model_log_probs(m) == NULL, "no logits before a forward");
    CHECK_ERR(dt_model_forward(NULL, x, y, B, 1, &loss), DT_ERR_INVALID, "NULL");
    CHECK_ERR(dt_model_forward(m, NULL, y, B, 1, &loss), DT_ERR_INVALID, "NULL");
    CHECK_ERR(dt_model_forward(m, x, y, 0, 1, &loss), DT_ERR_INVALID, "batch size 0");
    int32_t bad[16];
    memcpy(bad, y, sizeof bad);
    bad[5] = 10;
    CHECK_ERR(dt_model_forward(m, x, bad, B, 1, &loss), DT_ERR_INVALID, "label 10");
    bad[5] = -1;
    CHECK_ERR(dt_model_forward(m, x, bad, B, 1, &loss), DT_ERR_INVALID, "label -1");

    CHECK_OK(dt_model_forward(m, x, y, B, 1, &loss));
    CHECK(isfinite(loss) && loss > 1.0f && loss < 4.0f, "initial loss %g", loss);
    const float *lp = dt_model_log_probs(m), *sc = dt_model_scores(m);
    CHECK(lp && sc && dt_model_batch_size(m) == B, "outputs after forward");
    double worst = 0.0, nll = 0.0;
    int correct = 0;
    for (int b = 0; b < B; b++) {
        double s = 0.0;
        int best = 0;
        for (int v = 0; v < 10; v++) {
            s += exp((double)lp[b * 10 + v]);
            if (sc[b * 10 + v] > sc[b * 10 + best]) best = v;
        }
        worst = fmax(worst, fabs(s - 1.0));
        nll -= lp[b * 10 + y[b]];
        correct += best == y[b];
    }
    CHECK(worst < 1e-5, "log-probs must normalise (%g)", worst);
    CHECK(fabs(nll / B - loss) < 1e-5, "loss is the mean NLL");
    CHECK(dt_model_correct(m, y, B) == correct, "correct %d != %d", dt_model_correct(m, y, B),
          correct);
    CHECK_ERR(dt_model_correct(m, y, B - 1), DT_ERR_INVALID, "differs");
    CHECK_ERR(dt_model_correct(m, NULL, B), DT_ERR_INVALID, "NULL");
    CHECK(dt_model_layer_output(m, 0) != NULL, "layer output");
    CHECK(dt_model_layer_output(m, 99) == NULL, "bad layer output index");

    CHECK_OK(dt_model_backward(m));
    CHECK_ERR(dt_model_backward(m), DT_ERR_STATE, "no forward");
    size_t n = dt_model_num_params(m);
    float *g1 = malloc(n * sizeof(float));
    memcpy(g1, dt_model_grads(m), n * sizeof(float));
    double gn = 0.0;
    for (size_t i = 0; i < n; i++) gn += (double)g1[i] * g1[i];
    CHECK(gn > 0.0 && isfinite(gn), "grads are non-zero and finite");

    /* accumulation: a second forward+backward on the same batch doubles */
    CHECK_OK(dt_model_forward(m, x, y, B, 1, &loss));
    CHECK_OK(dt_model_backward(m));
    double acc_err = 0.0;
    for (size_t i = 0; i < n; i++)
        acc_err = fmax(acc_err, fabs(dt_model_grads(m)[i] - 2.0f * g1[i]));
    CHECK(acc_err < 1e-5, "backward accumulates (%g)", acc_err);
    dt_model_zero_grad(m);
    CHECK_OK(dt_model_forward(m, x, y, B, 1, &loss));
    CHECK_OK(dt_model_backward_scaled(m, 0.25f));
    double sc_err = 0.0;
    for (size_t i = 0; i < n; i++)
        sc_err = fmax(sc_err, fabs(dt_model_grads(m)[i] - 0.25f * g1[i]));
    CHECK(sc_err < 1e-6, "backward_scaled (%g)", sc_err);

    /* gradients moved into caller memory: copied there, written there by the
     * next backward, never freed by the model (ASan / valgrind would see it) */
    float *ext = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) ext[i] = -7.0f;
    CHECK_OK(dt_model_use_grad_buffer(m, ext));
    double mv_err = 0.0;
    for (size_t i = 0; i < n; i++) mv_err = fmax(mv_err, fabs(ext[i] - 0.25f * g1[i]));
    CHECK(dt_model_grads(m) == ext && mv_err < 1e-6, "use_grad_buffer: grads %p (want %p), copy err %g",
          (void *)dt_model_grads(m), (void *)ext, mv_err);
    dt_model_zero_grad(m);
    CHECK_OK(dt_model_forward(m, x, y, B, 1, &loss));
    CHECK_OK(dt_model_backward(m));
    double ext_err = 0.0;
    for (size_t i = 0; i < n; i++) ext_err = fmax(ext_err, fabs(ext[i] - g1[i]));
    CHECK(ext_err < 1e-6, "backward into the caller's gradient buffer (%g)", ext_err);
    CHECK_OK(dt_model_use_grad_buffer(m, ext)); /* the same buffer again: nothing to do */
    CHECK_ERR(dt_model_use_grad_buffer(m, NULL), DT_ERR_INVALID, "grads is NULL");
    CHECK_ERR(dt_model_use_grad_buffer(NULL, ext), DT_ERR_INVALID, "model is NULL");

    /* eval forward and label-less forward cannot be back-propagated */
    CHECK_OK(dt_model_forward(m, x, y, B, 0, &loss));
    CHECK_ERR(dt_model_backward(m), DT_ERR_STATE, "train=1");
    CHECK_OK(dt_model_forward(m, x, NULL, B, 1, &loss));
    CHECK(isnan(loss), "loss without labels is NaN");
    CHECK_ERR(dt_model_backward(m), DT_ERR_STATE, "labels");
    CHECK_ERR(dt_model_backward_scaled(NULL, 1.0f), DT_ERR_INVALID, "NULL");

    /* bad layer indices */
    size_t off, cnt;
    CHECK_ERR(dt_model_layer_params(m, -1, &off, &cnt), DT_ERR_INVALID, "out of range");
    CHECK_ERR(dt_model_layer_params(m, 6, &off, &cnt), DT_ERR_INVALID, "out of range");
    CHECK_ERR(dt_model_layer_buffers(m, 6, &off, &cnt), DT_ERR_INVALID, "out of range");
    CHECK_ERR(dt_model_set_layer_params(m, 17, g1), DT_ERR_INVALID, "out of range");
    CHECK_ERR(dt_model_set_layer_grads(m, -2, g1), DT_ERR_INVALID, "out of range");
    CHECK_ERR(dt_model_set_layer_params(m, 2, g1), DT_ERR_INVALID, "has no parameters");
    CHECK_OK(dt_model_set_layer_params(m, 2, NULL));
    CHECK(dt_model_layer_name(m, 6) == NULL, "layer name of bad index");
    CHECK(dt_model_slice(m, 99) == NULL && dt_model_buffer_slice(m, -1) == NULL,
          "bad slice index");
    CHECK_ERR(dt_model_set_hooks(NULL, NULL), DT_ERR_INVALID, "NULL");
    CHECK_ERR(dt_model_num_layers(NULL), DT_ERR_INVALID, "NULL");
    CHECK(dt_model_num_params(NULL) == 0 && dt_model_params(NULL) == NULL, "NULL model");
    free(g1);
    dt_model_free(m);
    free(ext); /* still the caller's after dt_model_free */
}

/* ---- directional-derivative check of the whole model (float, loose) --------------- */

static void test_model_directional(const char *name, int h1, int h2, int h3) {
    const int B = 6;
    float x[6 * 784];
    int32_t y[6];
    make_batch(x, y, B, 11);
    dt_model *m = make(name, h1, h2, h3, 0.0f, 4);
    size_t n = dt_model_num_params(m);
    float *p0 = malloc(n * sizeof(float)), *v = malloc(n * sizeof(float));
    memcpy(p0, dt_model_params(m), n * sizeof(float));
    dt_rng r;
    dt_rng_seed(&r, 8);
    for (size_t i = 0; i < n; i++) v[i] = 2.0f * dt_rng_uniform(&r) - 1.0f;
    float loss;
    CHECK_OK(dt_model_forward(m, x, y, B, 1, &loss));
    CHECK_OK(dt_model_backward(m));
    double gv = 0.0;
    for (size_t i = 0; i < n; i++) gv += (double)dt_model_grads(m)[i] * v[i];
    /* small: random directions through ReLU nets hit kinks quickly; float
     * loss resolution bounds it from below. Exact checks are in
     * test_nn_layers (float64 FD) and test_nn_parity (PyTorch). */
    const float eps = 2e-4f;
    float lp, lm;
    for (size_t i = 0; i < n; i++) dt_model_params(m)[i] = p0[i] + eps * v[i];
    CHECK_OK(dt_model_forward(m, x, y, B, 1, &lp));
    for (size_t i = 0; i < n; i++) dt_model_params(m)[i] = p0[i] - eps * v[i];
    CHECK_OK(dt_model_forward(m, x, y, B, 1, &lm));
    double fd = ((double)lp - (double)lm) / (2.0 * eps);
    double err = fabs(fd - gv) / fmax(fabs(gv), 1e-3);
    CHECK(err < 2e-2, "%s directional derivative: fd %g vs grad.v %g (rel %g)", name, fd, gv,
          err);
    printf("  %-6s directional derivative: fd %.6f grad.v %.6f rel %.2e\n", name, fd, gv, err);
    free(p0);
    free(v);
    dt_model_free(m);
}

/* ---- hooks --------------------------------------------------------------------------- */

typedef struct hook_log {
    dt_model *m;
    char ev[256][16];
    int n;
    float *snap;       /* grads at grad_ready time, per layer range */
    int fail_layer;    /* pre_forward fails here (-1: never) */
    int fail_value;
    int ready_count[32];
} hook_log;

static void log_ev(hook_log *h, const char *what, int layer) {
    if (h->n < 256) snprintf(h->ev[h->n++], 16, "%s%d", what, layer);
}
static int h_pre_f(void *ctx, int l) {
    hook_log *h = ctx;
    log_ev(h, "F", l);
    return l == h->fail_layer ? h->fail_value : 0;
}
static int h_post_f(void *ctx, int l) {
    log_ev(ctx, "f", l);
    return 0;
}
static int h_pre_b(void *ctx, int l) {
    log_ev(ctx, "B", l);
    return 0;
}
static int h_ready(void *ctx, int l) {
    hook_log *h = ctx;
    log_ev(h, "R", l);
    h->ready_count[l]++;
    size_t off, cnt;
    dt_model_layer_params(h->m, l, &off, &cnt);
    memcpy(h->snap + off, dt_model_layer_grad_ptr(h->m, l), cnt * sizeof(float));
    return 0;
}
static int h_post_b(void *ctx, int l) {
    log_ev(ctx, "b", l);
    return 0;
}

static void test_hooks(const char *name) {
    const int B = 8;
    float x[8 * 784];
    int32_t y[8];
    make_batch(x, y, B, 21);
    dt_model *ref = make(name, 32, 16, 8, 0.0f, 9), *m = make(name, 32, 16, 8, 0.0f, 9);
    size_t n = dt_model_num_params(m);
    float loss_ref, loss;
    CHECK_OK(dt_model_forward(ref, x, y, B, 1, &loss_ref));
    CHECK_OK(dt_model_backward(ref));

    hook_log h;
    memset(&h, 0, sizeof h);
    h.m = m;
    h.fail_layer = -1;
    h.snap = calloc(n, sizeof(float));
    dt_model_hooks hk = {&h, h_pre_f, h_post_f, h_pre_b, h_ready, h_post_b, NULL};
    CHECK_OK(dt_model_set_hooks(m, &hk));
    CHECK_OK(dt_model_forward(m, x, y, B, 1, &loss));
    int L = dt_model_num_layers(m), k = 0, order_ok = 1;
    for (int l = 0; l < L; l++) {
        char a[16], b[16];
        snprintf(a, 16, "F%d", l);
        snprintf(b, 16, "f%d", l);
        order_ok &= strcmp(h.ev[k++], a) == 0;
        order_ok &= strcmp(h.ev[k++], b) == 0;
    }
    CHECK(order_ok && h.n == 2 * L, "%s forward hook order", name);
    h.n = 0;
    CHECK_OK(dt_model_backward(m));
    k = 0;
    order_ok = 1;
    int nparam_layers = 0;
    for (int l = L - 1; l >= 0; l--) {
        char a[16];
        size_t cnt;
        dt_model_layer_params(m, l, NULL, &cnt);
        snprintf(a, 16, "B%d", l);
        order_ok &= k < h.n && strcmp(h.ev[k++], a) == 0;
        if (cnt) {
            snprintf(a, 16, "R%d", l);
            order_ok &= k < h.n && strcmp(h.ev[k++], a) == 0;
            nparam_layers++;
            CHECK(h.ready_count[l] == 1, "%s grad_ready(%d) called %d times", name, l,
                  h.ready_count[l]);
        } else {
            CHECK(h.ready_count[l] == 0, "%s grad_ready for parameterless layer %d", name, l);
        }
        snprintf(a, 16, "b%d", l);
        order_ok &= k < h.n && strcmp(h.ev[k++], a) == 0;
    }
    CHECK(order_ok && k == h.n, "%s backward hook order (%d events)", name, h.n);
    CHECK(nparam_layers >= 2, "%s has parameter layers", name);
    /* grads seen at grad_ready are the final ones, equal to a hook-less run */
    CHECK(loss == loss_ref, "%s hooks change nothing in forward", name);
    CHECK(memcmp(h.snap, dt_model_grads(m), n * sizeof(float)) == 0,
          "%s grads changed after grad_ready", name);
    CHECK(memcmp(dt_model_grads(ref), dt_model_grads(m), n * sizeof(float)) == 0,
          "%s grads with hooks differ from a plain backward", name);

    /* a failing hook aborts with its status; positive values become DT_ERR_STATE */
    h.fail_layer = 2;
    h.fail_value = DT_ERR_BACKEND;
    CHECK(dt_model_forward(m, x, y, B, 1, &loss) == DT_ERR_BACKEND, "hook status returned");
    CHECK_ERR(dt_model_backward(m), DT_ERR_STATE, "no forward");
    CHECK(dt_model_log_probs(m) == NULL, "no logits after an aborted forward");
    h.fail_value = 7;
    CHECK_ERR(dt_model_forward(m, x, y, B, 1, &loss), DT_ERR_STATE, "returned 7");
    CHECK_OK(dt_model_set_hooks(m, NULL));
    CHECK_OK(dt_model_forward(m, x, y, B, 1, &loss));
    free(h.snap);
    dt_model_free(ref);
    dt_model_free(m);
}

/* ---- redirection: ZeRO-3 style gather/release from hooks ----------------------------- */

typedef struct zero_ctx {
    dt_model *m;
    float *store;   /* the true parameters, full layout */
    float *gstore;  /* where gradients must land, full layout */
    int gathers, releases;
} zero_ctx;

static int z_gather(void *ctx, int l) {
    zero_ctx *z = ctx;
    size_t off, cnt;
    dt_model_layer_params(z->m, l, &off, &cnt);
    if (!cnt) return 0;
    z->gathers++;
    int rc = dt_model_set_layer_params(z->m, l, z->store + off);
    if (rc) return rc;
    return dt_model_set_layer_grads(z->m, l, z->gstore + off);
}
static int z_release(void *ctx, int l) {
    zero_ctx *z = ctx;
    size_t cnt;
    dt_model_layer_params(z->m, l, NULL, &cnt);
    if (!cnt) return 0;
    z->releases++;
    dt_model_set_layer_grads(z->m, l, NULL);
    return dt_model_set_layer_params(z->m, l, NULL);
}

static void test_redirect(const char *name) {
    const int B = 8;
    float x[8 * 784];
    int32_t y[8];
    make_batch(x, y, B, 31);
    dt_model *ref = make(name, 32, 16, 8, 0.0f, 12), *m = make(name, 32, 16, 8, 0.0f, 12);
    size_t n = dt_model_num_params(m);
    float loss_ref, loss;
    CHECK_OK(dt_model_forward(ref, x, y, B, 1, &loss_ref));
    CHECK_OK(dt_model_backward(ref));

    /* the model's own flat params become garbage; the truth lives in store */
    zero_ctx z = {m, malloc(n * sizeof(float)), calloc(n, sizeof(float)), 0, 0};
    memcpy(z.store, dt_model_params(m), n * sizeof(float));
    for (size_t i = 0; i < n; i++) dt_model_params(m)[i] = 1e3f;
    dt_model_hooks hk = {&z, z_gather, z_release, z_gather, NULL, z_release, NULL};
    CHECK_OK(dt_model_set_hooks(m, &hk));
    CHECK_OK(dt_model_forward(m, x, y, B, 1, &loss));
    CHECK(loss == loss_ref, "%s redirected forward loss %g != %g", name, loss, loss_ref);
    CHECK_OK(dt_model_backward(m));
    CHECK(memcmp(z.gstore, dt_model_grads(ref), n * sizeof(float)) == 0,
          "%s redirected grads differ (max %g)", name,
          max_abs_diff(z.gstore, dt_model_grads(ref), n));
    int zero = 1;
    for (size_t i = 0; i < n; i++) zero &= dt_model_grads(m)[i] == 0.0f;
    CHECK(zero, "%s default grads must stay untouched", name);
    CHECK(z.gathers == z.releases && z.gathers > 0, "%s gathers %d releases %d", name,
          z.gathers, z.releases);

    /* static redirection and zero_grad at the redirected location */
    CHECK_OK(dt_model_set_hooks(m, NULL));
    int lp = -1;
    for (int l = 0; l < dt_model_num_layers(m); l++) {
        size_t cnt;
        dt_model_layer_params(m, l, NULL, &cnt);
        if (cnt) lp = l;
    }
    size_t off, cnt;
    CHECK_OK(dt_model_layer_params(m, lp, &off, &cnt));
    float *gext = malloc(cnt * sizeof(float));
    for (size_t i = 0; i < cnt; i++) gext[i] = 3.0f;
    CHECK_OK(dt_model_set_layer_grads(m, lp, gext));
    CHECK(dt_model_layer_grad_ptr(m, lp) == gext, "grad ptr reports the redirection");
    dt_model_zero_grad(m);
    int z2 = 1;
    for (size_t i = 0; i < cnt; i++) z2 &= gext[i] == 0.0f;
    CHECK(z2, "zero_grad zeroes redirected grads");
    CHECK_OK(dt_model_set_layer_grads(m, lp, NULL));
    CHECK(dt_model_layer_grad_ptr(m, lp) == dt_model_grads(m) + off, "NULL restores default");
    free(gext);
    free(z.store);
    free(z.gstore);
    dt_model_free(ref);
    dt_model_free(m);
}

/* ---- batch growth, eval determinism, dropout ------------------------------------------ */

static void test_batches_and_dropout(void) {
    float x[32 * 784];
    int32_t y[32];
    make_batch(x, y, 32, 41);
    dt_model *m = make("cnn", 8, 8, 16, 0.5f, 3);
    float l8a, l32, l8b;
    CHECK_OK(dt_model_forward(m, x, y, 8, 0, &l8a));
    float keep[80];
    memcpy(keep, dt_model_log_probs(m), sizeof keep);
    CHECK_OK(dt_model_forward(m, x, y, 32, 0, &l32));
    CHECK(max_abs_diff(keep, dt_model_log_probs(m), 80) < 1e-5,
          "eval logits of the first 8 rows change with batch size (%g)",
          max_abs_diff(keep, dt_model_log_probs(m), 80));
    CHECK_OK(dt_model_forward(m, x, y, 8, 0, &l8b));
    CHECK(l8a == l8b, "eval forward must be deterministic");

    /* dropout: same seed -> same train loss; reseeding changes it */
    dt_model *a = make("cnn", 8, 8, 16, 0.5f, 3), *b = make("cnn", 8, 8, 16, 0.5f, 3);
    float la, lb, la2;
    CHECK_OK(dt_model_forward(a, x, y, 16, 1, &la));
    CHECK_OK(dt_model_forward(b, x, y, 16, 1, &lb));
    CHECK(la == lb, "same dropout seed, same loss (%g %g)", la, lb);
    CHECK_OK(dt_model_seed_dropout(b, 77));
    CHECK_OK(dt_model_forward(a, x, y, 16, 1, &la2));
    CHECK_OK(dt_model_forward(b, x, y, 16, 1, &lb));
    CHECK(la2 != lb, "reseeded dropout must differ");
    /* dropout really drops: the dropout layer's output has zeros in train */
    int dl = -1;
    for (int l = 0; l < dt_model_num_layers(a); l++)
        if (strcmp(dt_model_layer_kind(a, l), "dropout") == 0) dl = l;
    CHECK(dl > 0, "cnn has a dropout layer");
    const float *in = dt_model_layer_output(a, dl - 1), *out = dt_model_layer_output(a, dl);
    size_t nz = 0, tot = 16 * dt_model_layer_output_size(a, dl), scaled = 0;
    for (size_t i = 0; i < tot; i++) {
        if (in[i] != 0.0f && out[i] == 0.0f) nz++;
        if (in[i] != 0.0f && fabsf(out[i] - 2.0f * in[i]) <= 1e-6f * fabsf(in[i])) scaled++;
    }
    CHECK(nz > 0 && scaled > 0, "dropout zeros %zu scaled %zu", nz, scaled);
    CHECK_OK(dt_model_backward(a));
    CHECK_OK(dt_model_forward(a, x, y, 16, 0, &la));
    in = dt_model_layer_output(a, dl - 1);
    out = dt_model_layer_output(a, dl);
    CHECK(memcmp(in, out, tot * sizeof(float)) == 0, "dropout is the identity in eval");
    dt_model_free(a);
    dt_model_free(b);
    dt_model_free(m);
}

int main(void) {
    test_config_errors();
    test_layouts();
    test_forward_backward();
    test_model_directional("mlp", 32, 16, 0);
    test_model_directional("lenet", 0, 0, 0);
    test_model_directional("cnn", 4, 8, 16);
    test_hooks("mlp");
    test_hooks("lenet");
    test_hooks("cnn");
    test_redirect("mlp");
    test_redirect("lenet");
    test_redirect("cnn");
    test_batches_and_dropout();
    return dt_test_finish("test_nn_model");
}
