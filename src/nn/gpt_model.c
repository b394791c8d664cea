/* src/nn/gpt_model.c - the "gpt" model family (GPT-2, see dtrain/model.h):
 * presets, the unit and parameter layout, the kernel backend and the
 * model's memory on it, GPT-2 initialisation, and the family's table entry.
 * The activation arena and the outputs of the last forward are in
 * gpt_arena.c, the passes in gpt_pass.c, generation in gpt_generate.c; the
 * kernels behind the backend table (gpt_backend.h) in gpt_cpu.c and cuda/. */
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

void gpt_block_params_at(gpt_block_params *p, void *base, size_t es, int C) {
    const size_t c = (size_t)C;
    char *q = base;
#define NEXT(field, n) do { p->field = q; q += (n) * es; } while (0)
    NEXT(ln1w, c);
    NEXT(ln1b, c);
    NEXT(qkvw, 3 * c * c);
    NEXT(qkvb, 3 * c);
    NEXT(attprojw, c * c);
    NEXT(attprojb, c);
    NEXT(ln2w, c);
    NEXT(ln2b, c);
    NEXT(fcw, 4 * c * c);
    NEXT(fcb, 4 * c);
    NEXT(fcprojw, 4 * c * c);
    NEXT(fcprojb, c);
#undef NEXT
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

/* ---- the backend and the model's memory on it ------------------------------------- */

static int mem_alloc(dt_model *m, size_t bytes, const char *what, void **p) {
    const dt_gpt *g = gpt_ofc(m);
    return g->K->alloc(g->be, bytes, what, p);
}
static void mem_free(dt_model *m, void *p) { gpt_ofc(m)->K->free(gpt_ofc(m)->be, p); }
static int mem_upload(dt_model *m, void *dst, const void *src, size_t bytes) {
    return gpt_ofc(m)->K->upload(gpt_ofc(m)->be, dst, src, bytes);
}
static int mem_download(dt_model *m, void *dst, const void *src, size_t bytes) {
    return gpt_ofc(m)->K->download(gpt_ofc(m)->be, dst, src, bytes);
}
static int mem_copy(dt_model *m, void *dst, const void *src, size_t bytes) {
    return gpt_ofc(m)->K->copy(gpt_ofc(m)->be, dst, src, bytes);
}
static int mem_zero(dt_model *m, void *p, size_t bytes) { return gpt_ofc(m)->K->zero(gpt_ofc(m)->be, p, bytes); }
static void *mem_stream(dt_model *m) { return gpt_ofc(m)->K->stream(gpt_ofc(m)->be); }

static const dtm_mem k_device_mem = {.alloc = mem_alloc, .free = mem_free, .upload = mem_upload,
                                     .download = mem_download, .copy = mem_copy, .zero = mem_zero,
                                     .stream = mem_stream};

static int open_backend(dt_model *m, dt_gpt *g, const dt_model_config *cfg) {
    g->K = gpt_backend_find(dt_device_kind_name(cfg->device));
    if (!g->K) {
        char why[256];
        snprintf(why, sizeof why, "%s", dt_last_error());
        return dt_error(DT_ERR_UNSUPPORTED, CREATE_FN, "model %s on device %s: %s", cfg->name,
                        dt_device_kind_name(cfg->device), why);
    }
    g->prec = cfg->precision == DT_PRECISION_BF16 ? GPT_BF16 : GPT_F32;
    if (!(g->K->precisions & (1u << g->prec)))
        return dt_error(DT_ERR_UNSUPPORTED, CREATE_FN, "model %s: precision %s is not computed by the %s backend%s",
                        cfg->name, dt_precision_name(cfg->precision), g->K->name,
                        g->prec == GPT_BF16 ? " (bf16 needs device cuda)" : "");
    g->es = g->prec == GPT_BF16 ? 2 : sizeof(float);
    int rc = g->K->open(&g->be, (gpt_prec)g->prec);
    if (rc) return rc;
    g->Vp = g->K->vocab_pad(cfg->vocab_size);
    if (g->K->device) m->mem = &k_device_mem;
    return DT_OK;
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
    if (cfg->seq_len < 0 || cfg->seq_len > cfg->block_size)
        return dt_error(DT_ERR_INVALID, CREATE_FN,
                        "model %s: seq_len=%d must be in [0, block_size=%d] (0: block_size)", cfg->name,
                        cfg->seq_len, cfg->block_size);
    dt_gpt *g = calloc(1, sizeof *g);
    if (!g) return dt_error(DT_ERR_NOMEM, CREATE_FN, "out of memory");
    m->impl = g;
    int rc = open_backend(m, g, cfg);
    if (rc) return rc;
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
    rc = dtm_add_unit(m, "transformer.embed", "embedding");
    if (!rc) rc = dtm_add_param(m, "transformer.wte.weight", 2, wte);
    if (!rc) rc = dtm_add_param(m, "transformer.wpe.weight", 2, wpe);
    for (int l = 0; !rc && l < g->L; l++) rc = add_block(m, l, g->C);
    if (!rc) rc = dtm_add_unit(m, "transformer.ln_f", "layernorm");
    if (!rc) rc = dtm_add_param(m, "transformer.ln_f.weight", 1, c1);
    if (!rc) rc = dtm_add_param(m, "transformer.ln_f.bias", 1, c1);
    if (!rc) rc = dtm_add_unit(m, "lm_head", "lm_head");
    if (!rc) m->units[GPT_UNIT_HEAD(g->L)].owner = GPT_UNIT_EMBED; /* tied to wte */
    /* bf16: the parameters the kernels compute with (cast per unit at its forward) */
    if (!rc && g->prec == GPT_BF16)
        rc = g->K->alloc(g->be, m->nparams * g->es, "the bf16 copy of the parameters", &g->wc);
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
        gpt_block_params_at(&p, m->params + m->units[u].param_off, sizeof(float), g->C);
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

static int gpt_set_recompute(dt_model *m, int on) {
    gpt_of(m)->recompute = on; /* the arena is re-laid out by the next forward */
    return DT_OK;
}

static void gpt_free(void *impl) {
    dt_gpt *g = impl;
    if (!g) return;
    gpt_free_arena(g);
    if (g->K) {
        g->K->free(g->be, g->wc);
        g->K->free(g->be, g->wslot);
        g->K->close(g->be);
    }
    free(g->logp);
    free(g->view);
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
    .loss = gpt_loss,
    .row_stats = gpt_row_stats,
    .layer_output = gpt_layer_output,
    .layer_output_size = gpt_layer_output_size,
    .seed_dropout = NULL,
    .set_recompute = gpt_set_recompute,
    .activation_bytes = gpt_activation_bytes,
    .generate = gpt_generate,
    .params_released = gpt_params_released,
    .compute_copy_bytes = gpt_compute_copy_bytes,
    .compute_copy = gpt_compute_copy,
    .params_from_copy = gpt_params_from_copy,
    .layers_bf16 = gpt_layers_bf16,
};
