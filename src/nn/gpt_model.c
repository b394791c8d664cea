/* src/nn/gpt_model.c - the "gpt" model family (GPT-2, see dtrain/model.h):
 * presets, the unit and parameter layout, GPT-2 initialisation, the
 * activation arena (with and without recomputation), the outputs of the
 * last forward, and the family's table entry. The passes are in
 * gpt_pass.c, generation in gpt_generate.c, the kernels in gpt_kernels.c
 * and gpt_attention.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "dtrain/dtype.h"
#include "nn/gpt_internal.h"

#define CREATE_FN "dt_model_create"

/* ---- presets ------------------------------------------------------------------ */

typedef struct gpt_preset {
    const char *name;
    int n_layer, n_head, n_embd, block_size, vocab_size;
} gpt_preset;

static const gpt_preset k_presets[] = {
    {"gpt-test", 2, 4, 64, 64, 256},
    {"gpt-demo", 6, 6, 384, 256, 256},
    {"gpt", 6, 6, 384, 256, 256},
    {"gpt2-124m", 12, 12, 768, 1024, 256},
};

static int gpt_config_default(dt_model_config *cfg) {
    for (size_t i = 0; i < sizeof k_presets / sizeof k_presets[0]; i++)
        if (strcmp(k_presets[i].name, cfg->name) == 0) {
            cfg->n_layer = k_presets[i].n_layer;
            cfg->n_head = k_presets[i].n_head;
            cfg->n_embd = k_presets[i].n_embd;
            cfg->block_size = k_presets[i].block_size;
            cfg->vocab_size = k_presets[i].vocab_size;
            return DT_OK;
        }
    return DT_ERR(DT_ERR_INTERNAL, "no preset for %s", cfg->name);
}

/* ---- layout --------------------------------------------------------------------- */

void gpt_block_params_at(gpt_block_params *p, float *base, int C) {
    const size_t c = (size_t)C;
    float *q = base;
    p->ln1w = q; q += c;
    p->ln1b = q; q += c;
    p->qkvw = q; q += 3 * c * c;
    p->qkvb = q; q += 3 * c;
    p->attprojw = q; q += c * c;
    p->attprojb = q; q += c;
    p->ln2w = q; q += c;
    p->ln2b = q; q += c;
    p->fcw = q; q += 4 * c * c;
    p->fcb = q; q += 4 * c;
    p->fcprojw = q; q += 4 * c * c;
    p->fcprojb = q;
}

static int add_block(dt_model *m, int l, int C) {
    char unit[DT_UNIT_NAME_MAX], key[DT_SLICE_NAME_MAX];
    snprintf(unit, sizeof unit, "transformer.h.%d", l);
    int rc = dtm_add_unit(m, unit, "block");
    const int64_t c = C;
    const struct {
        const char *suffix;
        int ndim;
        int64_t d0, d1;
    } t[] = {
        {"ln_1.weight", 1, c, 0},          {"ln_1.bias", 1, c, 0},
        {"attn.c_attn.weight", 2, 3 * c, c}, {"attn.c_attn.bias", 1, 3 * c, 0},
        {"attn.c_proj.weight", 2, c, c},   {"attn.c_proj.bias", 1, c, 0},
        {"ln_2.weight", 1, c, 0},          {"ln_2.bias", 1, c, 0},
        {"mlp.c_fc.weight", 2, 4 * c, c},  {"mlp.c_fc.bias", 1, 4 * c, 0},
        {"mlp.c_proj.weight", 2, c, 4 * c}, {"mlp.c_proj.bias", 1, c, 0},
    };
    for (size_t i = 0; !rc && i < sizeof t / sizeof t[0]; i++) {
        int64_t shape[2] = {t[i].d0, t[i].d1};
        snprintf(key, sizeof key, "%s.%s", unit, t[i].suffix);
        rc = dtm_add_param(m, key, t[i].ndim, shape);
    }
    return rc;
}

static int gpt_build(dt_model *m, const dt_model_config *cfg) {
    const struct {
        const char *name;
        int v, max;
    } sz[] = {{"n_layer", cfg->n_layer, 4096},      {"n_head", cfg->n_head, 1 << 16},
              {"n_embd", cfg->n_embd, 1 << 16},     {"block_size", cfg->block_size, 1 << 20},
              {"vocab_size", cfg->vocab_size, 1 << 24}};
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++)
        if (sz[i].v <= 0 || sz[i].v > sz[i].max)
            return dt_error(DT_ERR_INVALID, CREATE_FN, "model %s: %s=%d must be in [1, %d]",
                            cfg->name, sz[i].name, sz[i].v, sz[i].max);
    if (cfg->n_embd % cfg->n_head != 0)
        return dt_error(DT_ERR_INVALID, CREATE_FN,
                        "model %s: n_embd=%d is not divisible by n_head=%d", cfg->name,
                        cfg->n_embd, cfg->n_head);
    dt_gpt *g = calloc(1, sizeof *g);
    if (!g) return dt_error(DT_ERR_NOMEM, CREATE_FN, "out of memory");
    m->impl = g;
    g->L = cfg->n_layer;
    g->NH = cfg->n_head;
    g->C = cfg->n_embd;
    g->V = cfg->vocab_size;
    g->maxT = cfg->block_size;
    g->recompute = cfg->recompute;
    g->res = calloc((size_t)g->L + 1, sizeof *g->res);
    g->acts = calloc((size_t)g->L, sizeof *g->acts);
    if (!g->res || !g->acts) return dt_error(DT_ERR_NOMEM, CREATE_FN, "out of memory");
    m->io.family = "gpt";
    m->io.x_dtype = DT_I32;
    m->io.x_size = 1;
    m->io.max_seq = g->maxT;
    m->io.num_classes = g->V;

    const int64_t C = g->C;
    int64_t wte[2] = {g->V, C}, wpe[2] = {g->maxT, C}, c1[1] = {C};
    int rc = dtm_add_unit(m, "transformer.embed", "embedding");
    if (!rc) rc = dtm_add_param(m, "transformer.wte.weight", 2, wte);
    if (!rc) rc = dtm_add_param(m, "transformer.wpe.weight", 2, wpe);
    for (int l = 0; !rc && l < g->L; l++) rc = add_block(m, l, g->C);
    if (!rc) rc = dtm_add_unit(m, "transformer.ln_f", "layernorm");
    if (!rc) rc = dtm_add_param(m, "transformer.ln_f.weight", 1, c1);
    if (!rc) rc = dtm_add_param(m, "transformer.ln_f.bias", 1, c1);
    if (!rc) rc = dtm_add_unit(m, "lm_head", "lm_head");
    if (!rc) m->units[GPT_UNIT_HEAD(g->L)].owner = GPT_UNIT_EMBED; /* tied to wte */
    return rc;
}

/* ---- initialisation (GPT-2 / nanoGPT) ------------------------------------------ */

/* p[0..n) ~ N(0, std), Box-Muller using both values of each pair. */
static void fill_normal(float *p, size_t n, double std, dt_rng *rng) {
    for (size_t i = 0; i < n; i += 2) {
        double u1 = dt_rng_uniform_f64(rng), u2 = dt_rng_uniform_f64(rng);
        if (u1 < 1e-300) u1 = 1e-300;
        double r = sqrt(-2.0 * log(u1)) * std, a = 6.283185307179586 * u2;
        p[i] = (float)(r * cos(a));
        if (i + 1 < n) p[i + 1] = (float)(r * sin(a));
    }
}

static void fill(float *p, size_t n, float v) {
    for (size_t i = 0; i < n; i++) p[i] = v;
}

static void gpt_init(dt_model *m) {
    const dt_gpt *g = gpt_of(m);
    const size_t C = (size_t)g->C;
    const double std = 0.02, proj_std = 0.02 / sqrt(2.0 * (double)g->L);
    dt_rng rng;
    /* embeddings: wte, wpe ~ N(0, 0.02) */
    dt_rng_seed2(&rng, m->cfg.seed, GPT_UNIT_EMBED);
    fill_normal(m->params + m->units[GPT_UNIT_EMBED].param_off,
                m->units[GPT_UNIT_EMBED].param_count, std, &rng);
    for (int l = 0; l < g->L; l++) {
        const int u = GPT_UNIT_BLOCK(l);
        gpt_block_params p;
        gpt_block_params_at(&p, m->params + m->units[u].param_off, g->C);
        dt_rng_seed2(&rng, m->cfg.seed, (uint64_t)u);
        /* in layout order; biases stay 0 (the buffer is zeroed) */
        fill(p.ln1w, C, 1.0f);
        fill_normal(p.qkvw, 3 * C * C, std, &rng);
        fill_normal(p.attprojw, C * C, proj_std, &rng);
        fill(p.ln2w, C, 1.0f);
        fill_normal(p.fcw, 4 * C * C, std, &rng);
        fill_normal(p.fcprojw, 4 * C * C, proj_std, &rng);
    }
    fill(m->params + m->units[GPT_UNIT_LNF(g->L)].param_off, C, 1.0f);
}

/* ---- the activation arena ---------------------------------------------------------- */

static size_t r16(size_t n) { return (n + 15) & ~(size_t)15; } /* 64-byte granules */

/* Size in floats of the arena for (B, T, recompute); with base != NULL the
 * pointers of g are set into base as well. */
static size_t layout(dt_gpt *g, int B, int T, int recompute, float *base) {
    const size_t N = (size_t)B * (size_t)T, C = (size_t)g->C, NC = N * C;
    size_t off = 0;
#define TAKE(ptr, n)                      \
    do {                                  \
        if (base) (ptr) = base + off;     \
        off += r16(n);                    \
    } while (0)
    for (int l = 0; l <= g->L; l++) TAKE(g->res[l], NC);
    const int nsets = recompute ? 1 : g->L;
    for (int l = 0; l < nsets; l++) {
        gpt_block_acts *a = &g->acts[l];
        TAKE(a->ln1, NC);
        TAKE(a->ln1_mean, N);
        TAKE(a->ln1_rstd, N);
        TAKE(a->qkv, 3 * NC);
        TAKE(a->att, (size_t)B * (size_t)g->NH * (size_t)T * (size_t)T);
        TAKE(a->atty, NC);
        TAKE(a->res2, NC);
        TAKE(a->ln2, NC);
        TAKE(a->ln2_mean, N);
        TAKE(a->ln2_rstd, N);
        TAKE(a->fch, 4 * NC);
        TAKE(a->fchg, 4 * NC);
    }
    if (base)
        for (int l = nsets; l < g->L; l++) g->acts[l] = g->acts[0];
    TAKE(g->lnf, NC);
    TAKE(g->lnf_mean, N);
    TAKE(g->lnf_rstd, N);
    TAKE(g->logits, N * (size_t)g->V);
    TAKE(g->lse, N);
    TAKE(g->dres, NC);
    TAKE(g->dln, NC);
    TAKE(g->datty, NC);
    TAKE(g->dqkv, 3 * NC);
    TAKE(g->dfch, 4 * NC);
    TAKE(g->dscratch, (size_t)(T < GPT_ATT_ROWS ? T : GPT_ATT_ROWS) * (size_t)T);
#undef TAKE
    return off;
}

int gpt_ensure_arena(dt_model *m, int B, int T) {
    dt_gpt *g = gpt_of(m);
    if (g->arena && B <= g->bmax && T <= g->tmax && g->arena_recompute == g->recompute)
        return DT_OK;
    const int bmax = B > g->bmax ? B : g->bmax, tmax = T > g->tmax ? T : g->tmax;
    const size_t n = layout(g, bmax, tmax, g->recompute, NULL);
    const size_t nt = (size_t)bmax * (size_t)tmax;
    free(g->arena);
    free(g->tok);
    g->arena = NULL;
    g->tok = g->tgt = NULL;
    g->bmax = g->tmax = 0;
    float *arena = aligned_alloc(64, r16(n) * sizeof(float));
    int32_t *tok = malloc(2 * nt * sizeof(int32_t));
    if (!arena || !tok) {
        free(arena);
        free(tok);
        return DT_ERR(DT_ERR_NOMEM,
                      "out of memory for the activations of batch %d x T %d (%.1f MiB%s)", B, T,
                      (double)n * 4.0 / 1048576.0, g->recompute ? ", recompute" : "");
    }
    /* zeroed once, so that nothing uninitialised is ever read */
    memset(arena, 0, r16(n) * sizeof(float));
    layout(g, bmax, tmax, g->recompute, arena);
    g->arena = arena;
    g->tok = tok;
    g->tgt = tok + nt;
    g->bmax = bmax;
    g->tmax = tmax;
    g->arena_recompute = g->recompute;
    return DT_OK;
}

static int gpt_activation_bytes(const dt_model *m, int B, int T, int recompute, size_t *bytes) {
    /* layout() with base NULL only reads the sizes */
    size_t n = layout((dt_gpt *)gpt_ofc(m), B, T, recompute, NULL);
    *bytes = r16(n) * sizeof(float) + 2 * (size_t)B * (size_t)T * sizeof(int32_t);
    return DT_OK;
}

static int gpt_set_recompute(dt_model *m, int on) {
    gpt_of(m)->recompute = on; /* the arena is re-laid out by the next forward */
    return DT_OK;
}

/* ---- outputs of the last forward ------------------------------------------------------ */

static const float *gpt_scores(const dt_model *m) {
    const dt_gpt *g = gpt_ofc(m);
    if (!g->scores_valid) {
        DT_ERR(DT_ERR_STATE, "the logits of the last forward were consumed by its backward");
        return NULL;
    }
    return g->logits;
}

static const float *gpt_log_probs(dt_model *m) {
    dt_gpt *g = gpt_of(m);
    if (g->logp_valid) return g->logp;
    if (!g->scores_valid) {
        DT_ERR(DT_ERR_STATE,
               "the log-probabilities must be asked for before the forward's backward");
        return NULL;
    }
    const size_t n = (size_t)m->B * (size_t)m->T * (size_t)g->V;
    if (n > g->logp_cap) {
        float *p = aligned_alloc(64, r16(n) * sizeof(float));
        if (!p) {
            DT_ERR(DT_ERR_NOMEM, "out of memory for %zu log-probabilities", n);
            return NULL;
        }
        free(g->logp);
        g->logp = p;
        g->logp_cap = r16(n);
    }
    gpt_log_softmax(g->logp, g->logits, g->lse, m->B * m->T, g->V);
    g->logp_valid = 1;
    return g->logp;
}

static const float *gpt_layer_output(const dt_model *m, int layer) {
    const dt_gpt *g = gpt_ofc(m);
    if (layer == GPT_UNIT_HEAD(g->L)) return gpt_scores(m);
    if (layer == GPT_UNIT_LNF(g->L)) return g->lnf;
    return g->res[layer]; /* 0: embeddings; 1 + l: block l's output */
}

static size_t gpt_layer_output_size(const dt_model *m, int layer) {
    const dt_gpt *g = gpt_ofc(m);
    const size_t T = (size_t)(m->T ? m->T : g->maxT);
    return T * (size_t)(layer == GPT_UNIT_HEAD(g->L) ? g->V : g->C);
}

static void gpt_free(void *impl) {
    dt_gpt *g = impl;
    if (!g) return;
    free(g->arena);
    free(g->tok);
    free(g->logp);
    free(g->res);
    free(g->acts);
    free(g);
}

static const char *const gpt_models[] = {"gpt", "gpt-test", "gpt-demo", "gpt2-124m", NULL};

const dtm_family dt_family_gpt = {
    .name = "gpt",
    .models = gpt_models,
    .config_default = gpt_config_default,
    .build = gpt_build,
    .init = gpt_init,
    .free_impl = gpt_free,
    .forward = gpt_forward,
    .backward = gpt_backward,
    .log_probs = gpt_log_probs,
    .scores = gpt_scores,
    .layer_output = gpt_layer_output,
    .layer_output_size = gpt_layer_output_size,
    .seed_dropout = NULL,
    .set_recompute = gpt_set_recompute,
    .activation_bytes = gpt_activation_bytes,
    .generate = gpt_generate,
};
