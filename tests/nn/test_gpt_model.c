/* tests/nn/test_gpt_model.c - the gpt family as a dt_model: presets and
 * configuration errors, the layout contract (units, slices, tied head),
 * GPT-2 initialisation, input errors, the forward/backward state machine,
 * recomputation (bit-identical gradients, activation bytes), hook order,
 * a ZeRO-3-style gather/release strategy driven from the hooks (the tied
 * head's contract), generation, and the family seam seen from the
 * sequential models. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "dtrain/dtype.h"
#include "dtrain/model.h"
#include "dtrain/rng.h"

static dt_model *make(const char *name, int L, int NH, int C, int BS, int V, int rc,
                      uint64_t seed) {
    dt_model_config cfg;
    if (dt_model_config_default(&cfg, name)) return NULL;
    if (L) cfg.n_layer = L;
    if (NH) cfg.n_head = NH;
    if (C) cfg.n_embd = C;
    if (BS) cfg.block_size = BS;
    if (V) cfg.vocab_size = V;
    cfg.recompute = rc;
    cfg.seed = seed;
    dt_model *m = NULL;
    CHECK_OK(dt_model_create(&cfg, &m));
    return m;
}

static void tokens(int32_t *x, int32_t *y, size_t n, int V, uint64_t seed) {
    dt_rng r;
    dt_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        x[i] = (int32_t)dt_rng_below(&r, (uint64_t)V);
        y[i] = (int32_t)dt_rng_below(&r, (uint64_t)V);
    }
}

/* ---- configuration ------------------------------------------------------------ */

static void test_config(void) {
    dt_model_config cfg;
    const struct {
        const char *name;
        int L, NH, C, BS, V;
    } pre[] = {{"gpt-test", 2, 4, 64, 64, 256},
               {"gpt-demo", 6, 6, 384, 256, 256},
               {"gpt", 6, 6, 384, 256, 256},
               {"gpt2-124m", 12, 12, 768, 1024, 256}};
    for (int i = 0; i < 4; i++) {
        CHECK_OK(dt_model_config_default(&cfg, pre[i].name));
        CHECK(cfg.n_layer == pre[i].L && cfg.n_head == pre[i].NH && cfg.n_embd == pre[i].C &&
                  cfg.block_size == pre[i].BS && cfg.vocab_size == pre[i].V &&
                  cfg.recompute == 0 && strcmp(cfg.name, pre[i].name) == 0,
              "preset %s", pre[i].name);
    }
    CHECK_ERR(dt_model_config_default(&cfg, "gpt3"), DT_ERR_INVALID, "gpt-demo");
    dt_model *m = (dt_model *)1;
    struct {
        int L, NH, C, BS, V, rc;
        const char *msg;
    } bad[] = {{0, 4, 64, 64, 256, 0, "n_layer=0"},      {2, -1, 64, 64, 256, 0, "n_head=-1"},
               {2, 4, 0, 64, 256, 0, "n_embd=0"},        {2, 4, 64, 0, 256, 0, "block_size=0"},
               {2, 4, 64, 64, -5, 0, "vocab_size=-5"},   {2, 5, 64, 64, 256, 0, "not divisible"},
               {2, 4, 64, 64, 256, 2, "recompute=2"},    {2, 4, 64, 64, 1 << 25, 0, "vocab_size"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_OK(dt_model_config_default(&cfg, "gpt-test"));
        cfg.n_layer = bad[i].L;
        cfg.n_head = bad[i].NH;
        cfg.n_embd = bad[i].C;
        cfg.block_size = bad[i].BS;
        cfg.vocab_size = bad[i].V;
        cfg.recompute = bad[i].rc;
        CHECK_ERR(dt_model_create(&cfg, &m), DT_ERR_INVALID, bad[i].msg);
        CHECK(m == NULL, "*out NULL after a failed create");
    }
    /* a family without recomputation refuses it */
    CHECK_OK(dt_model_config_default(&cfg, "mlp"));
    cfg.hidden1 = cfg.hidden2 = 8;
    cfg.recompute = 1;
    CHECK_ERR(dt_model_create(&cfg, &m), DT_ERR_INVALID, "no activation recomputation");
}

/* ---- layout contract --------------------------------------------------------------- */

static void test_layout(void) {
    const int L = 3, NH = 2, C = 16, BS = 24, V = 40;
    dt_model *m = make("gpt-test", L, NH, C, BS, V, 0, 1);
    if (!m) return;
    const size_t P = (size_t)V * C + (size_t)BS * C + (size_t)L * (12 * C * C + 13 * C) + 2 * C;
    CHECK(dt_model_num_params(m) == P, "params %zu, want %zu", dt_model_num_params(m), P);
    CHECK(dt_model_num_buffers(m) == 0 && dt_model_num_buffer_slices(m) == 0, "no buffers");
    CHECK(((uintptr_t)dt_model_params(m) & 63) == 0 && ((uintptr_t)dt_model_grads(m) & 63) == 0,
          "64-byte aligned buffers");
    CHECK(strcmp(dt_model_family(m), "gpt") == 0 && strcmp(dt_model_name(m), "gpt-test") == 0,
          "family/name");
    dt_model_io io;
    CHECK_OK(dt_model_get_io(m, &io));
    CHECK(io.x_dtype == DT_I32 && io.x_size == 1 && io.max_seq == BS && io.num_classes == V &&
              strcmp(io.family, "gpt") == 0,
          "io description");
    CHECK(dt_model_input_size(m) == BS && dt_model_num_classes(m) == V, "input size/classes");
    CHECK(dt_model_get_config(m)->n_layer == L, "config copy");
    /* units */
    CHECK(dt_model_num_layers(m) == L + 3, "layers %d", dt_model_num_layers(m));
    const char *kinds[] = {"embedding", "block", "block", "block", "layernorm", "lm_head"};
    const char *names[] = {"transformer.embed", "transformer.h.0", "transformer.h.1",
                           "transformer.h.2", "transformer.ln_f", "lm_head"};
    size_t next = 0;
    for (int l = 0; l < L + 3; l++) {
        size_t off, cnt;
        CHECK_OK(dt_model_layer_params(m, l, &off, &cnt));
        CHECK(off == next, "layer %d starts at %zu, want %zu", l, off, next);
        next = off + cnt;
        CHECK(strcmp(dt_model_layer_kind(m, l), kinds[l]) == 0 &&
                  strcmp(dt_model_layer_name(m, l), names[l]) == 0,
              "layer %d is %s %s", l, dt_model_layer_kind(m, l), dt_model_layer_name(m, l));
        CHECK(dt_model_layer_param_owner(m, l) == (l == L + 2 ? 0 : l), "owner of %d", l);
        if (l >= 1 && l <= L) CHECK(cnt == (size_t)(12 * C * C + 13 * C), "block size");
    }
    CHECK(next == P, "layers cover the parameters");
    size_t hc = 1;
    CHECK_OK(dt_model_layer_params(m, L + 2, NULL, &hc));
    CHECK(hc == 0 && dt_model_layer_param_ptr(m, L + 2) == NULL, "the tied head owns nothing");
    CHECK_ERR(dt_model_set_layer_params(m, L + 2, dt_model_params(m)), DT_ERR_INVALID,
              "has no parameters");
    CHECK_ERR(dt_model_layer_param_owner(m, L + 3), DT_ERR_INVALID, "out of range");
    /* slices: PyTorch keys, [out, in] shapes, in layout order */
    const dt_param_slice *s = dt_model_find_slice(m, "transformer.h.1.attn.c_attn.weight", NULL);
    CHECK(s && s->ndim == 2 && s->shape[0] == 3 * C && s->shape[1] == C && s->layer == 2,
          "c_attn.weight [3C,C] in layer 2");
    s = dt_model_find_slice(m, "transformer.h.2.mlp.c_proj.weight", NULL);
    CHECK(s && s->shape[0] == C && s->shape[1] == 4 * C, "mlp.c_proj.weight [C,4C]");
    s = dt_model_find_slice(m, "transformer.wpe.weight", NULL);
    CHECK(s && s->shape[0] == BS && s->shape[1] == C && s->offset == (size_t)V * C, "wpe");
    CHECK(dt_model_find_slice(m, "lm_head.weight", NULL) == NULL, "no separate head tensor");
    const int ns = dt_model_num_slices(m);
    CHECK(ns == 2 + 12 * L + 2, "slices %d", ns);
    size_t off = 0;
    for (int i = 0; i < ns; i++) {
        s = dt_model_slice(m, i);
        CHECK(s->offset == off, "slice %s contiguous", s->name);
        off += s->count;
    }
    CHECK(strcmp(dt_model_slice(m, ns - 1)->name, "transformer.ln_f.bias") == 0, "last slice");
    /* layer output sizes */
    CHECK(dt_model_layer_output_size(m, 1) == (size_t)BS * C &&
              dt_model_layer_output_size(m, L + 2) == (size_t)BS * V,
          "output sizes before a forward (at block_size)");
    dt_model_free(m);
}

/* ---- initialisation ------------------------------------------------------------------ */

static void stats(const float *p, size_t n, double *mean, double *sd) {
    double s = 0.0, s2 = 0.0;
    for (size_t i = 0; i < n; i++) {
        s += p[i];
        s2 += (double)p[i] * p[i];
    }
    *mean = s / (double)n;
    *sd = sqrt(s2 / (double)n - *mean * *mean);
}

static void test_init(void) {
    const int L = 4;
    dt_model *a = make("gpt-test", L, 4, 64, 64, 256, 0, 7), *b = make("gpt-test", L, 4, 64, 64, 256, 0, 7);
    dt_model *c = make("gpt-test", L, 4, 64, 64, 256, 0, 8);
    if (!a || !b || !c) return;
    const size_t P = dt_model_num_params(a);
    CHECK(memcmp(dt_model_params(a), dt_model_params(b), P * 4) == 0, "same seed, same init");
    CHECK(memcmp(dt_model_params(a), dt_model_params(c), P * 4) != 0, "another seed differs");
    struct {
        const char *name;
        double sd; /* 0: constant */
        double value;
    } t[] = {{"transformer.wte.weight", 0.02, 0},
             {"transformer.wpe.weight", 0.02, 0},
             {"transformer.h.1.attn.c_attn.weight", 0.02, 0},
             {"transformer.h.1.attn.c_proj.weight", 0.02 / sqrt(2.0 * L), 0},
             {"transformer.h.3.mlp.c_fc.weight", 0.02, 0},
             {"transformer.h.3.mlp.c_proj.weight", 0.02 / sqrt(2.0 * L), 0},
             {"transformer.h.0.ln_1.weight", 0, 1.0},
             {"transformer.h.0.attn.c_attn.bias", 0, 0.0},
             {"transformer.h.2.mlp.c_fc.bias", 0, 0.0},
             {"transformer.ln_f.weight", 0, 1.0},
             {"transformer.ln_f.bias", 0, 0.0}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const dt_param_slice *s = dt_model_find_slice(a, t[i].name, NULL);
        if (!s) {
            CHECK(0, "no slice %s", t[i].name);
            continue;
        }
        double mean, sd;
        stats(dt_model_params(a) + s->offset, s->count, &mean, &sd);
        if (t[i].sd > 0)
            CHECK(fabs(sd - t[i].sd) < 0.05 * t[i].sd && fabs(mean) < 0.1 * t[i].sd,
                  "%s: mean %.4g sd %.4g, want N(0, %.4g)", t[i].name, mean, sd, t[i].sd);
        else
            CHECK(mean == t[i].value && sd == 0.0, "%s: constant %g", t[i].name, t[i].value);
    }
    const float *g = dt_model_grads(a);
    int zero = 1;
    for (size_t i = 0; i < P; i++) zero &= g[i] == 0.0f;
    CHECK(zero, "gradients start at zero");
    dt_model_free(a);
    dt_model_free(b);
    dt_model_free(c);
}

/* ---- inputs and the state machine -------------------------------------------------------- */

static void test_inputs(void) {
    const int B = 3, T = 20, V = 50, BS = 32;
    dt_model *m = make("gpt-test", 2, 4, 32, BS, V, 0, 3);
    if (!m) return;
    int32_t x[3 * 32], y[3 * 32];
    tokens(x, y, 3 * 32, V, 9);
    float loss = 0.0f;
    CHECK_ERR(dt_model_backward(m), DT_ERR_STATE, "no forward");
    CHECK_ERR(dt_model_forward_seq(m, x, y, B, BS + 1, 1, &loss), DT_ERR_INVALID,
              "T=33 not in [1, block_size=32]");
    CHECK_ERR(dt_model_forward_seq(m, x, y, B, 0, 1, &loss), DT_ERR_INVALID, "T=0");
    CHECK_ERR(dt_model_forward_seq(m, x, y, 0, T, 1, &loss), DT_ERR_INVALID, "batch size 0");
    CHECK_ERR(dt_model_forward_seq(m, NULL, y, B, T, 1, &loss), DT_ERR_INVALID, "NULL");
    int32_t keep = x[T + 3];
    x[T + 3] = V; /* sample 1, position 3 */
    CHECK_ERR(dt_model_forward_seq(m, x, y, B, T, 1, &loss), DT_ERR_INVALID,
              "token 50 of sample 1 position 3 not in [0,50)");
    x[T + 3] = -1;
    CHECK_ERR(dt_model_forward_seq(m, x, y, B, T, 1, &loss), DT_ERR_INVALID, "token -1");
    x[T + 3] = keep;
    keep = y[2 * T + 7];
    y[2 * T + 7] = V + 4;
    CHECK_ERR(dt_model_forward_seq(m, x, y, B, T, 1, &loss), DT_ERR_INVALID,
              "target 54 of sample 2 position 7");
    y[2 * T + 7] = keep;
    CHECK_ERR(dt_model_backward(m), DT_ERR_STATE, "no forward");

    /* a valid forward: the loss of an untrained model is about ln V */
    CHECK_OK(dt_model_forward_seq(m, x, y, B, T, 1, &loss));
    CHECK(fabs(loss - log((double)V)) < 0.1, "initial loss %.4f, ln V = %.4f", loss, log(50.0));
    CHECK(dt_model_batch_size(m) == B && dt_model_seq_len(m) == T, "B, T of the last forward");
    CHECK(dt_model_layer_output_size(m, 3) == (size_t)T * 32, "output size at the last T");
    const float *lp = dt_model_log_probs(m), *sc = dt_model_scores(m);
    CHECK(lp && sc, "logits and scores");
    double worst = 0.0;
    for (int r = 0; lp && r < B * T; r++) {
        double s = 0.0;
        for (int v = 0; v < V; v++) s += exp(lp[(size_t)r * V + v]);
        if (fabs(s - 1.0) > worst) worst = fabs(s - 1.0);
    }
    CHECK(worst < 1e-5, "log-probabilities normalise (%.3g)", worst);
    /* the loss is the mean of -logp[target] */
    double ref = 0.0;
    for (int r = 0; lp && r < B * T; r++) ref -= lp[(size_t)r * V + y[r]];
    CHECK(fabs(ref / (B * T) - loss) < 1e-5, "loss %.6f vs mean -logp %.6f", loss, ref / (B * T));
    int corr = dt_model_correct(m, y, B), want = 0;
    for (int r = 0; sc && r < B * T; r++) {
        int best = 0;
        for (int v = 1; v < V; v++)
            if (sc[(size_t)r * V + v] > sc[(size_t)r * V + best]) best = v;
        want += best == y[r];
    }
    CHECK(corr == want, "correct %d, want %d", corr, want);
    CHECK(dt_model_layer_output(m, 0) != NULL && dt_model_layer_output(m, 4) == sc,
          "layer outputs");
    CHECK_OK(dt_model_backward(m));
    CHECK_ERR(dt_model_backward(m), DT_ERR_STATE, "no forward");
    dt_clear_error();
    CHECK(dt_model_scores(m) == NULL && strstr(dt_last_error(), "consumed"),
          "scores are gone after the backward");
    CHECK(dt_model_log_probs(m) == lp, "log-probabilities built before the backward stay");
    CHECK_ERR(dt_model_correct(m, y, B), DT_ERR_STATE, "gone");
    /* an eval forward without labels: NAN loss, no backward */
    CHECK_OK(dt_model_forward_seq(m, x, NULL, B, T, 0, &loss));
    CHECK(isnan(loss), "no labels, NAN loss");
    CHECK_ERR(dt_model_backward(m), DT_ERR_STATE, "labels");
    /* dt_model_forward uses T = block_size */
    int32_t xf[3 * 32], yf[3 * 32];
    tokens(xf, yf, 3 * 32, V, 4);
    CHECK_OK(dt_model_forward(m, xf, yf, B, 1, &loss));
    CHECK(dt_model_seq_len(m) == BS, "dt_model_forward runs T = block_size");
    /* dropout seeding is a no-op */
    CHECK_OK(dt_model_seed_dropout(m, 5));
    /* accumulation: two backwards of the same batch = 2 x one */
    const size_t P = dt_model_num_params(m);
    dt_model_zero_grad(m);
    CHECK_OK(dt_model_forward(m, xf, yf, B, 1, &loss));
    CHECK_OK(dt_model_backward(m));
    float *g1 = malloc(P * 4);
    memcpy(g1, dt_model_grads(m), P * 4);
    CHECK_OK(dt_model_forward(m, xf, yf, B, 1, &loss));
    CHECK_OK(dt_model_backward_scaled(m, 0.5f));
    worst = 0.0;
    for (size_t i = 0; i < P; i++) {
        double d = fabs(dt_model_grads(m)[i] - 1.5 * g1[i]);
        if (d > worst) worst = d;
    }
    CHECK(worst < 1e-6, "backward accumulates (scale 0.5 on top of 1): %.3g", worst);
    free(g1);
    dt_model_free(m);
}

/* ---- recomputation ------------------------------------------------------------------ */

static void test_recompute(void) {
    const int L = 3, NH = 4, C = 32, BS = 160, V = 64, B = 2, T = 130;
    dt_model *a = make("gpt-test", L, NH, C, BS, V, 0, 5), *b = make("gpt-test", L, NH, C, BS, V, 1, 5);
    if (!a || !b) return;
    int32_t *x = malloc((size_t)B * T * 4), *y = malloc((size_t)B * T * 4);
    tokens(x, y, (size_t)B * T, V, 21);
    const size_t P = dt_model_num_params(a);
    float la, lb;
    for (int rep = 0; rep < 2; rep++) { /* twice: accumulation and arena reuse too */
        CHECK_OK(dt_model_forward_seq(a, x, y, B, T, 1, &la));
        CHECK_OK(dt_model_forward_seq(b, x, y, B, T, 1, &lb));
        CHECK(la == lb, "loss %.9g vs %.9g with recompute", la, lb);
        for (int l = 0; l < L + 2; l++)
            CHECK(memcmp(dt_model_layer_output(a, l), dt_model_layer_output(b, l),
                         dt_model_layer_output_size(a, l) * B * 4) == 0,
                  "layer %d output identical", l);
        CHECK_OK(dt_model_backward(a));
        CHECK_OK(dt_model_backward(b));
        CHECK(memcmp(dt_model_grads(a), dt_model_grads(b), P * 4) == 0,
              "gradients bit-identical with recompute (pass %d)", rep);
    }
    /* switching: a forward's state is dropped, and both settings agree */
    CHECK_OK(dt_model_forward_seq(a, x, y, B, T, 1, &la));
    CHECK_OK(dt_model_set_recompute(a, 1));
    CHECK(dt_model_recompute(a) == 1 && dt_model_get_config(a)->recompute == 1, "setting");
    CHECK_ERR(dt_model_backward(a), DT_ERR_STATE, "no forward");
    CHECK_OK(dt_model_set_recompute(b, 0));
    dt_model_zero_grad(a);
    dt_model_zero_grad(b);
    CHECK_OK(dt_model_forward_seq(a, x, y, B, T, 1, &la));
    CHECK_OK(dt_model_forward_seq(b, x, y, B, T, 1, &lb));
    CHECK_OK(dt_model_backward(a));
    CHECK_OK(dt_model_backward(b));
    CHECK(memcmp(dt_model_grads(a), dt_model_grads(b), P * 4) == 0, "after switching");
    CHECK_ERR(dt_model_set_recompute(a, 3), DT_ERR_INVALID, "recompute=3");
    /* activation bytes: recomputation keeps one block's set instead of L */
    size_t on = 0, off = 0;
    CHECK_OK(dt_model_activation_bytes(a, B, T, 0, &off));
    CHECK_OK(dt_model_activation_bytes(a, B, T, 1, &on));
    const size_t N = (size_t)B * T, NC = N * C;
#define R16(n) ((((size_t)(n)) + 15) & ~(size_t)15)
    /* ln1, atty, res2, ln2; qkv; fch, fchg; 2 x (mean, rstd); att */
    const size_t set = 4 * (4 * R16(NC) + R16(3 * NC) + 2 * R16(4 * NC) + 4 * R16(N) +
                            R16((size_t)B * NH * T * T));
#undef R16
    CHECK(off - on == (size_t)(L - 1) * set, "activation bytes off %zu on %zu: saved %zu, want %zu",
          off, on, off - on, (size_t)(L - 1) * set);
    size_t at0 = 0;
    CHECK_OK(dt_model_activation_bytes(a, B, 0, 0, &at0));
    CHECK(at0 > off, "T = 0 means block_size");
    CHECK_ERR(dt_model_activation_bytes(a, 0, T, 0, &on), DT_ERR_INVALID, "batch size 0");
    CHECK_ERR(dt_model_activation_bytes(a, B, BS + 1, 0, &on), DT_ERR_INVALID, "T=161");
    printf("  activations at B=%d T=%d: %.2f MiB, %.2f MiB with recompute\n", B, T,
           (double)off / 1048576.0, (double)on / 1048576.0);
    free(x);
    free(y);
    dt_model_free(a);
    dt_model_free(b);
}

/* ---- hooks ---------------------------------------------------------------------------- */

typedef struct rec {
    char log[512];
    int n;
} rec;

static void add(rec *r, char c, int l) {
    if (r->n < (int)sizeof r->log - 4) {
        r->log[r->n++] = c;
        r->log[r->n++] = (char)('0' + l);
        r->log[r->n] = '\0';
    }
}
static int h_pf(void *c, int l) { add(c, 'f', l); return 0; }
static int h_qf(void *c, int l) { add(c, 'F', l); return 0; }
static int h_pb(void *c, int l) { add(c, 'b', l); return 0; }
static int h_gr(void *c, int l) { add(c, 'g', l); return 0; }
static int h_qb(void *c, int l) { add(c, 'B', l); return 0; }

static void test_hook_order(void) {
    dt_model *m = make("gpt-test", 2, 4, 32, 16, 30, 0, 1);
    if (!m) return;
    rec r = {{0}, 0};
    dt_model_hooks hk = {&r, h_pf, h_qf, h_pb, h_gr, h_qb, NULL};
    CHECK_OK(dt_model_set_hooks(m, &hk));
    int32_t x[32], y[32];
    tokens(x, y, 32, 30, 2);
    float loss;
    CHECK_OK(dt_model_forward_seq(m, x, y, 2, 16, 1, &loss));
    CHECK_OK(dt_model_backward(m));
    /* the head (4) has no grad_ready; layer 0's comes last, after the head */
    const char *want = "f0F0f1F1f2F2f3F3f4F4b4B4b3g3B3b2g2B2b1g1B1b0g0B0";
    CHECK(strcmp(r.log, want) == 0, "hook order %s, want %s", r.log, want);
    CHECK_OK(dt_model_set_hooks(m, NULL));
    dt_model_free(m);
}

/* A ZeRO-3-like strategy: only `master` holds the parameters; each layer is
 * gathered into a temporary just before it runs and poisoned right after;
 * gradients go to per-layer temporaries (zeroed when handed out) and are
 * collected at grad_ready. The tied head re-gathers its owner (layer 0) in
 * its own pre hooks, and layer 0's gradient buffer is handed out at the
 * head's pre_backward and kept until grad_ready(0), as model.h says. */
typedef struct z3 {
    dt_model *m;
    const float *master;
    float *gathered[3];  /* per layer parity, and [2] for the owner of the head */
    float *gbuf[2], *g0; /* gradient temporaries; g0: layer 0's, over the step */
    float *gout;         /* collected gradients (flat layout) */
    int head;            /* index of the head */
    int rezero_owner;    /* 1: the WRONG strategy (layer 0's buffer re-zeroed) */
    int keep_owner;      /* 0: the head forgets to re-gather (poisoned owner) */
} z3;

static size_t lcount(dt_model *m, int l, size_t *off) {
    size_t o = 0, c = 0;
    dt_model_layer_params(m, l, &o, &c);
    if (off) *off = o;
    return c;
}

static void poison(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = NAN;
}

static int z_pre_fwd(void *ctx, int l) {
    z3 *z = ctx;
    size_t off, n;
    if (l == z->head) { /* the tied head needs its owner's parameters */
        n = lcount(z->m, 0, &off);
        if (z->keep_owner) memcpy(z->gathered[2], z->master + off, n * 4);
        return dt_model_set_layer_params(z->m, 0, z->gathered[2]);
    }
    if (!(n = lcount(z->m, l, &off))) return 0;
    memcpy(z->gathered[l & 1], z->master + off, n * 4);
    return dt_model_set_layer_params(z->m, l, z->gathered[l & 1]);
}

static int z_post_fwd(void *ctx, int l) {
    z3 *z = ctx;
    size_t n = lcount(z->m, l == z->head ? 0 : l, NULL);
    poison(l == z->head ? z->gathered[2] : z->gathered[l & 1], n);
    return 0;
}

static int z_pre_bwd(void *ctx, int l) {
    z3 *z = ctx;
    size_t off, n;
    if (l == z->head) {
        n = lcount(z->m, 0, &off);
        memcpy(z->gathered[2], z->master + off, n * 4);
        memset(z->g0, 0, n * 4);
        int rc = dt_model_set_layer_params(z->m, 0, z->gathered[2]);
        return rc ? rc : dt_model_set_layer_grads(z->m, 0, z->g0);
    }
    if (!(n = lcount(z->m, l, &off))) return 0;
    memcpy(z->gathered[l & 1], z->master + off, n * 4);
    int rc = dt_model_set_layer_params(z->m, l, z->gathered[l & 1]);
    if (l == 0) {
        if (z->rezero_owner) memset(z->g0, 0, n * 4);
        return rc ? rc : dt_model_set_layer_grads(z->m, 0, z->g0);
    }
    memset(z->gbuf[l & 1], 0, n * 4);
    return rc ? rc : dt_model_set_layer_grads(z->m, l, z->gbuf[l & 1]);
}

static int z_grad_ready(void *ctx, int l) {
    z3 *z = ctx;
    size_t off, n = lcount(z->m, l, &off);
    const float *g = l == 0 ? z->g0 : z->gbuf[l & 1];
    for (size_t i = 0; i < n; i++) z->gout[off + i] += g[i];
    return 0;
}

static int z_post_bwd(void *ctx, int l) {
    z3 *z = ctx;
    size_t n = lcount(z->m, l == z->head ? 0 : l, NULL);
    if (l == z->head) poison(z->gathered[2], n);
    else if (n) {
        poison(z->gathered[l & 1], n);
        if (l) poison(z->gbuf[l & 1], n);
    }
    return 0;
}

static int run_z3(z3 *z, const int32_t *x, const int32_t *y, int B, int T, float *loss) {
    memset(z->gout, 0, dt_model_num_params(z->m) * 4);
    int rc = dt_model_forward_seq(z->m, x, y, B, T, 1, loss);
    return rc ? rc : dt_model_backward(z->m);
}

static void test_zero3_hooks(void) {
    const int L = 2, C = 32, BS = 80, V = 48, B = 2, T = 70;
    dt_model *ref = make("gpt-test", L, 4, C, BS, V, 0, 11);
    dt_model *m = make("gpt-test", L, 4, C, BS, V, 1, 11); /* with recompute, too */
    if (!ref || !m) return;
    const size_t P = dt_model_num_params(m);
    int32_t *x = malloc((size_t)B * T * 4), *y = malloc((size_t)B * T * 4);
    tokens(x, y, (size_t)B * T, V, 8);
    float lref, loss;
    CHECK_OK(dt_model_forward_seq(ref, x, y, B, T, 1, &lref));
    CHECK_OK(dt_model_backward(ref));

    z3 z = {0};
    z.m = m;
    z.head = L + 2;
    z.keep_owner = 1;
    float *master = malloc(P * 4);
    memcpy(master, dt_model_params(m), P * 4);
    z.master = master;
    size_t maxc = 0;
    for (int l = 0; l < L + 3; l++)
        if (lcount(m, l, NULL) > maxc) maxc = lcount(m, l, NULL);
    for (int i = 0; i < 3; i++) z.gathered[i] = malloc(maxc * 4);
    z.gbuf[0] = malloc(maxc * 4);
    z.gbuf[1] = malloc(maxc * 4);
    z.g0 = malloc(maxc * 4);
    z.gout = malloc(P * 4);
    /* only the strategy's memory from now on */
    CHECK_OK(dt_model_release_flat(m, 1, 1));
    CHECK(dt_model_params(m) == NULL && dt_model_layer_param_ptr(m, 1) == NULL,
          "released, not redirected");
    dt_model_hooks hk = {&z, z_pre_fwd, z_post_fwd, z_pre_bwd, z_grad_ready, z_post_bwd, NULL};
    CHECK_OK(dt_model_set_hooks(m, &hk));
    CHECK_OK(run_z3(&z, x, y, B, T, &loss));
    CHECK(loss == lref, "sharded loss %.9g vs %.9g", loss, lref);
    CHECK(memcmp(z.gout, dt_model_grads(ref), P * 4) == 0,
          "gathered/released per layer: gradients bit-identical to the plain model");
    /* the wrong strategy loses the head's part of wte's gradient */
    z.rezero_owner = 1;
    CHECK_OK(run_z3(&z, x, y, B, T, &loss));
    const dt_param_slice *wte = dt_model_find_slice(m, "transformer.wte.weight", NULL);
    CHECK(memcmp(z.gout + wte->offset, dt_model_grads(ref) + wte->offset, wte->count * 4) != 0,
          "re-zeroing layer 0's gradient at its pre_backward must lose the head's part");
    z.rezero_owner = 0;
    /* a head that does not re-gather its owner computes with released memory */
    z.keep_owner = 0;
    poison(z.gathered[2], maxc);
    CHECK_OK(run_z3(&z, x, y, B, T, &loss));
    CHECK(isnan(loss), "the head reads its owner's current parameters (poisoned: NaN)");
    free(master);
    for (int i = 0; i < 3; i++) free(z.gathered[i]);
    free(z.gbuf[0]);
    free(z.gbuf[1]);
    free(z.g0);
    free(z.gout);
    free(x);
    free(y);
    dt_model_free(ref);
    dt_model_free(m);
}

/* ---- generation ---------------------------------------------------------------------- */

static void test_generate(void) {
    const int V = 40, BS = 24;
    dt_model *m = make("gpt-test", 2, 4, 32, BS, V, 0, 13);
    if (!m) return;
    /* make the model less uniform: a few SGD steps on a repeating pattern */
    int32_t x[4 * 24], y[4 * 24];
    for (int i = 0; i < 4 * 24; i++) {
        x[i] = (i * 7) % V;
        y[i] = (i * 7 + 7) % V;
    }
    const size_t P = dt_model_num_params(m);
    float loss;
    for (int s = 0; s < 30; s++) {
        dt_model_zero_grad(m);
        CHECK_OK(dt_model_forward_seq(m, x, y, 4, BS, 1, &loss));
        CHECK_OK(dt_model_backward(m));
        for (size_t i = 0; i < P; i++) dt_model_params(m)[i] -= 0.5f * dt_model_grads(m)[i];
    }
    int32_t prompt[3] = {1, 8, 15}, a[60], b[60], c[60];
    CHECK_OK(dt_model_generate(m, prompt, 3, 60, 0.8f, 42, a));
    CHECK_OK(dt_model_generate(m, prompt, 3, 60, 0.8f, 42, b));
    CHECK_OK(dt_model_generate(m, prompt, 3, 60, 0.8f, 43, c));
    CHECK(memcmp(a, b, sizeof a) == 0, "same seed, same tokens");
    CHECK(memcmp(a, c, sizeof a) != 0, "another seed, other tokens");
    int inr = 1;
    for (int i = 0; i < 60; i++) inr &= a[i] >= 0 && a[i] < V;
    CHECK(inr, "tokens in range (60 > block_size: the cache was rebuilt)");
    /* greedy decoding with the cache = argmax of a full forward, token by token */
    int32_t g[15], ctx[24];
    CHECK_OK(dt_model_generate(m, prompt, 3, 15, 0.0f, 1, g));
    memcpy(ctx, prompt, sizeof prompt);
    int n = 3, same = 1;
    for (int i = 0; i < 15; i++) {
        CHECK_OK(dt_model_forward_seq(m, ctx, NULL, 1, n, 0, NULL));
        const float *sc = dt_model_scores(m) + (size_t)(n - 1) * V;
        int best = 0;
        for (int v = 1; v < V; v++)
            if (sc[v] > sc[best]) best = v;
        same &= best == g[i];
        ctx[n++] = best;
    }
    CHECK(same, "greedy generation agrees with full forwards");
    /* a long prompt is cut to its last block_size tokens */
    int32_t longp[50], t1[5], t2[5];
    for (int i = 0; i < 50; i++) longp[i] = (i * 3) % V;
    CHECK_OK(dt_model_generate(m, longp, 50, 5, 0.0f, 1, t1));
    CHECK_OK(dt_model_generate(m, longp + 50 - BS, BS, 5, 0.0f, 1, t2));
    CHECK(memcmp(t1, t2, sizeof t1) == 0, "prompt cut to the last block_size tokens");
    CHECK_OK(dt_model_generate(m, prompt, 3, 0, 1.0f, 1, NULL));
    /* errors */
    CHECK_ERR(dt_model_generate(NULL, prompt, 3, 5, 1.0f, 1, a), DT_ERR_INVALID, "NULL");
    CHECK_ERR(dt_model_generate(m, prompt, 0, 5, 1.0f, 1, a), DT_ERR_INVALID, "prompt length 0");
    CHECK_ERR(dt_model_generate(m, prompt, 3, -1, 1.0f, 1, a), DT_ERR_INVALID, "count -1");
    CHECK_ERR(dt_model_generate(m, prompt, 3, 5, -1.0f, 1, a), DT_ERR_INVALID, "temperature");
    CHECK_ERR(dt_model_generate(m, prompt, 3, 5, NAN, 1, a), DT_ERR_INVALID, "temperature");
    int32_t badp[2] = {3, V};
    CHECK_ERR(dt_model_generate(m, badp, 2, 5, 1.0f, 1, a), DT_ERR_INVALID,
              "prompt token 40 at position 1");
    dt_model_free(m);
    dt_model_config cfg;
    dt_model_config_default(&cfg, "mlp");
    cfg.hidden1 = cfg.hidden2 = 8;
    dt_model *mlp = NULL;
    CHECK_OK(dt_model_create(&cfg, &mlp));
    CHECK_ERR(dt_model_generate(mlp, prompt, 3, 5, 1.0f, 1, a), DT_ERR_UNSUPPORTED,
              "does not generate");
    dt_model_free(mlp);
}

/* ---- the seam, from the sequential side ------------------------------------------------- */

static void test_sequential_seam(void) {
    dt_model_config cfg;
    CHECK_OK(dt_model_config_default(&cfg, "mlp"));
    cfg.hidden1 = 16;
    cfg.hidden2 = 8;
    dt_model *m = NULL;
    CHECK_OK(dt_model_create(&cfg, &m));
    if (!m) return;
    dt_model_io io;
    CHECK_OK(dt_model_get_io(m, &io));
    CHECK(io.x_dtype == DT_F32 && io.x_size == 784 && io.max_seq == 0 && io.num_classes == 10 &&
              strcmp(dt_model_family(m), "sequential") == 0,
          "sequential io");
    float x[2 * 784] = {0};
    int32_t y[2] = {1, 2};
    float loss;
    CHECK_ERR(dt_model_forward_seq(m, x, y, 2, 2, 1, &loss), DT_ERR_INVALID, "takes T = 1");
    CHECK_OK(dt_model_forward_seq(m, x, y, 2, 1, 1, &loss));
    CHECK(dt_model_seq_len(m) == 1, "T = 1");
    CHECK_ERR(dt_model_set_recompute(m, 1), DT_ERR_INVALID, "no activation recomputation");
    CHECK_OK(dt_model_set_recompute(m, 0));
    size_t bytes = 0;
    CHECK_OK(dt_model_activation_bytes(m, 4, 0, 0, &bytes));
    CHECK(bytes > 4 * (784 + 16 + 8 + 10) * 4, "sequential activation bytes %zu", bytes);
    CHECK_ERR(dt_model_activation_bytes(m, 4, 0, 1, &bytes), DT_ERR_INVALID, "recomputation");
    CHECK_ERR(dt_model_activation_bytes(m, 4, 2, 0, &bytes), DT_ERR_INVALID, "T=2");
    for (int l = 0; l < dt_model_num_layers(m); l++)
        CHECK(dt_model_layer_param_owner(m, l) == l, "sequential layers own their parameters");
    dt_model_free(m);
}

/* cfg.seq_len: dt_model_forward's T (and activation_bytes' T = 0) below the
 * block size; the parameters are a block_size model's, so it computes exactly
 * what dt_model_forward_seq at that T computes on the same model */
static void test_seq_len(void) {
    enum { L = 2, NH = 2, C = 32, BS = 40, V = 50, B = 3, T = 16 };
    dt_model_config cfg;
    CHECK_OK(dt_model_config_default(&cfg, "gpt-test"));
    cfg.n_layer = L, cfg.n_head = NH, cfg.n_embd = C, cfg.block_size = BS, cfg.vocab_size = V, cfg.seed = 9;
    dt_model *full = NULL, *win = NULL, *bad = NULL;
    CHECK_OK(dt_model_create(&cfg, &full));
    cfg.seq_len = T;
    CHECK_OK(dt_model_create(&cfg, &win));
    if (!full || !win) goto out;
    CHECK(dt_model_forward_len(full) == BS && dt_model_forward_len(win) == T, "forward lengths %d, %d",
          dt_model_forward_len(full), dt_model_forward_len(win));
    CHECK_ERR(dt_model_forward_len(NULL), DT_ERR_INVALID, "NULL model");
    const size_t P = dt_model_num_params(full);
    CHECK(P == dt_model_num_params(win) && memcmp(dt_model_params(full), dt_model_params(win), P * 4) == 0,
          "the same parameters (wpe has block_size rows either way)");
    int32_t x[B * T], y[B * T];
    tokens(x, y, B * T, V, 21);
    float la = 0, lb = 0;
    CHECK_OK(dt_model_forward_seq(full, x, y, B, T, 1, &la));
    CHECK_OK(dt_model_forward(win, x, y, B, 1, &lb));
    CHECK(dt_model_seq_len(win) == T, "dt_model_forward ran T = seq_len (%d)", dt_model_seq_len(win));
    CHECK(la == lb, "loss %.9g at seq_len, %.9g at T", (double)lb, (double)la);
    CHECK_OK(dt_model_backward(full));
    CHECK_OK(dt_model_backward(win));
    CHECK(memcmp(dt_model_grads(full), dt_model_grads(win), P * 4) == 0, "the same gradients");
    size_t a = 0, b = 0;
    CHECK_OK(dt_model_activation_bytes(win, B, 0, 0, &a));
    CHECK_OK(dt_model_activation_bytes(full, B, T, 0, &b));
    CHECK(a == b && a > 0, "activation bytes at T = 0: %zu, at T = %d: %zu", a, T, b);
    /* the whole block still runs through dt_model_forward_seq */
    int32_t xl[B * BS], yl[B * BS];
    tokens(xl, yl, B * BS, V, 22);
    CHECK_OK(dt_model_forward_seq(win, xl, yl, B, BS, 0, &la));
    cfg.seq_len = BS + 1;
    CHECK_ERR(dt_model_create(&cfg, &bad), DT_ERR_INVALID, "seq_len=41 must be in [0, block_size=40]");
    cfg.seq_len = -1;
    CHECK_ERR(dt_model_create(&cfg, &bad), DT_ERR_INVALID, "seq_len=-1");
    cfg.seq_len = BS; /* the block size itself */
    CHECK_OK(dt_model_create(&cfg, &bad));
    if (bad) CHECK(dt_model_forward_len(bad) == BS, "seq_len = block_size");
out:
    dt_model_free(bad);
    dt_model_free(win);
    dt_model_free(full);
}

int main(void) {
    test_config();
    test_layout();
    test_init();
    test_inputs();
    test_recompute();
    test_hook_order();
    test_zero3_hooks();
    test_generate();
    test_sequential_seam();
    test_seq_len();
    return dt_test_finish("test_gpt_model");
}
