/* tests/nn/test_weights.c - a model's weights from other tools' files
 * (dtrain/weights.h). The test writes each producer's layout itself from a
 * dtrain model's parameters (dt_st_save): dtrain's own (names, metadata),
 * nanoGPT's state_dict (with the tied lm_head.weight), Hugging Face's
 * GPT2Model / GPT2LMHeadModel (Conv1D matrices [in, out], names without or
 * with "transformer.", the attn.bias / attn.masked_bias buffers, a
 * config.json beside the file), F16 / BF16 / F64 storage. Each is read into
 * a model with other values and must give the writer's parameters (bit for
 * bit from F32 and F64, the rounded values from F16 / BF16), and the sizes
 * the shapes and config.json say. Every refusal is checked with its status
 * and the message naming the tensor or option. The Hugging Face export's
 * names, shapes and config.json are read back by the same reader, and so
 * are save_pretrained's folders: model.safetensors, or two shards and their
 * index (dt_st_open_index), by the folder's path and the index's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "dtrain/dtype.h"
#include "dtrain/model.h"
#include "dtrain/safetensors.h"
#include "dtrain/weights.h"
#include "testutil.h"

#define L 2
#define NH 4
#define C 16
#define T 8
#define V 40

static const char *g_dir; /* dt_test_tmpdir */

static dt_model *gpt(uint64_t seed, int block) {
    dt_model_config c;
    dt_model_config_default(&c, "gpt");
    c.n_layer = L, c.n_head = NH, c.n_embd = C, c.block_size = block, c.vocab_size = V, c.seed = seed;
    dt_model *m = NULL;
    CHECK_OK(dt_model_create(&c, &m));
    return m;
}

static int conv1d(const char *name) {
    const char *k[] = {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"};
    for (int i = 0; i < 4; i++)
        if (strstr(name, k[i])) return 1;
    return 0;
}

/* How a producer writes the model. */
typedef struct layout {
    int hf;              /* Conv1D matrices, transposed */
    int unprefixed;      /* names without "transformer." (GPT2Model) */
    dt_dtype dtype;      /* F32, F64, F16, BF16 (I32: every tensor, to be refused) */
    int head;            /* 1: lm_head.weight = wte; 2: lm_head.weight differs */
    int masks;           /* HF's h.<i>.attn.bias and h.<i>.attn.masked_bias */
    const char *drop;    /* a parameter left out */
    const char *extra;   /* an extra tensor [V] of this name */
    const char *reshape; /* this tensor written with one row more */
    const char *meta;    /* __metadata__ JSON or NULL */
} layout;

#define MAXT 64

/* Writes m's parameters as `lay` says to file; returns 0 or a status. */
static int write_model(const char *file, dt_model *m, layout lay) {
    dt_st_info ts[MAXT];
    void *bufs[MAXT] = {0};
    char names[MAXT][96];
    int n = 0;
    const float *p = dt_model_params(m);
    const size_t esz = lay.dtype == DT_F64 ? 8 : lay.dtype == DT_F32 || lay.dtype == DT_I32 ? 4 : 2;
    for (int i = 0; i < dt_model_num_slices(m) + (lay.head ? 1 : 0); i++) {
        const int head = i == dt_model_num_slices(m);
        const dt_param_slice *sl = dt_model_slice(m, head ? 0 : i); /* the head: wte's values */
        if (lay.drop && !head && strcmp(sl->name, lay.drop) == 0) continue;
        const char *nm = head ? "lm_head.weight" : sl->name;
        if (lay.unprefixed && !strncmp(nm, "transformer.", 12)) nm += 12;
        snprintf(names[n], sizeof names[n], "%s", nm);
        const int tr = lay.hf && !head && conv1d(sl->name);
        dt_st_info *t = &ts[n];
        t->name = names[n];
        t->dtype = lay.dtype;
        t->ndim = sl->ndim;
        t->shape[0] = tr ? sl->shape[1] : sl->shape[0];
        t->shape[1] = tr ? sl->shape[0] : sl->shape[1];
        size_t count = sl->count;
        if (lay.reshape && !head && strcmp(sl->name, lay.reshape) == 0) {
            t->shape[0] += 1;
            count += sl->ndim == 2 ? (size_t)t->shape[1] : 1;
        }
        char *b = calloc(count, esz);
        for (size_t e = 0; e < sl->count; e++) {
            size_t dst = e;
            if (tr) { /* model [r, c] at (e / c, e % c) -> stored [c, r] */
                const size_t r = (size_t)sl->shape[0], c = (size_t)sl->shape[1];
                dst = (e % c) * r + e / c;
            }
            float v = p[sl->offset + e] + (head && lay.head == 2 && e == 3 ? 1.0f : 0.0f);
            if (lay.dtype == DT_F32) ((float *)b)[dst] = v;
            else if (lay.dtype == DT_F64) ((double *)b)[dst] = v;
            else if (lay.dtype == DT_F16) ((uint16_t *)b)[dst] = dt_f32_to_f16(v);
            else if (lay.dtype == DT_BF16) ((uint16_t *)b)[dst] = dt_f32_to_bf16(v);
            else ((int32_t *)b)[dst] = (int32_t)v;
        }
        t->data = bufs[n] = b;
        n++;
    }
    for (int l = 0; lay.masks && l < L; l++) {
        snprintf(names[n], sizeof names[n], "%sh.%d.attn.bias", lay.unprefixed ? "" : "transformer.", l);
        float *mask = calloc(T * T, sizeof(float));
        for (int i = 0; i < T; i++)
            for (int j = 0; j <= i; j++) mask[i * T + j] = 1;
        ts[n] = (dt_st_info){.name = names[n], .dtype = DT_F32, .ndim = 4, .shape = {1, 1, T, T}, .data = mask};
        bufs[n++] = mask;
        snprintf(names[n], sizeof names[n], "%sh.%d.attn.masked_bias", lay.unprefixed ? "" : "transformer.", l);
        float *mb = malloc(sizeof(float));
        *mb = -1e4f;
        ts[n] = (dt_st_info){.name = names[n], .dtype = DT_F32, .ndim = 0, .data = mb};
        bufs[n++] = mb;
    }
    if (lay.extra) {
        snprintf(names[n], sizeof names[n], "%s", lay.extra);
        float *e = calloc(V, sizeof(float));
        ts[n] = (dt_st_info){.name = names[n], .dtype = DT_F32, .ndim = 1, .shape = {V}, .data = e};
        bufs[n++] = e;
    }
    int rc = dt_st_save(file, ts, n, lay.meta);
    for (int i = 0; i < n; i++) free(bufs[i]);
    return rc;
}

static void put(const char *file, const char *text) {
    FILE *f = fopen(file, "w");
    CHECK(f != NULL, "create %s", file);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* A directory name under g_dir holding model.safetensors and, if cfg, config.json. */
static const char *case_dir(const char *name, const char *cfg) {
    static char d[512];
    snprintf(d, sizeof d, "%s/%s", g_dir, name);
    mkdir(d, 0755);
    char c[600];
    snprintf(c, sizeof c, "%s/config.json", d);
    if (cfg) put(c, cfg);
    else remove(c);
    static char f[600];
    snprintf(f, sizeof f, "%s/model.safetensors", d);
    return f;
}

/* Reads file into a model of other values; 1 if it then holds want's parameters. */
static int reads_back(const char *file, dt_model *want, int *status) {
    dt_model *m = gpt(99, T);
    dt_weights *w = NULL;
    const size_t P = dt_model_num_params(m);
    float *p = calloc(P, sizeof(float));
    int rc = dt_weights_open(file, &w);
    if (!rc) rc = dt_weights_read(w, m, p, NULL);
    int same = !rc && memcmp(p, dt_model_params(want), P * sizeof(float)) == 0;
    if (status) *status = rc;
    else CHECK_OK(rc);
    dt_weights_close(w);
    free(p);
    dt_model_free(m);
    return same;
}

static dt_weights_gpt arch_of(const char *file, int *status) {
    dt_weights_gpt a;
    memset(&a, 0, sizeof a);
    dt_weights *w = NULL;
    int rc = dt_weights_open(file, &w);
    if (!rc) rc = dt_weights_gpt_arch(w, &a);
    *status = rc;
    dt_weights_close(w);
    return a;
}

#define HF_CONFIG "{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_head\": 4, \"n_embd\": 16, \"n_positions\": 8, " \
                  "\"vocab_size\": 40, \"activation_function\": \"gelu_new\", \"layer_norm_epsilon\": 1e-05, "   \
                  "\"n_inner\": null, \"scale_attn_weights\": true, \"tie_word_embeddings\": true"

static void test_producers(dt_model *m) {
    int rc;
    /* dtrain's own: names, metadata */
    const char *f = case_dir("dtrain", NULL);
    CHECK_OK(write_model(f, m, (layout){.dtype = DT_F32, .meta = "{\"written_by\":\"dtrain\",\"n_head\":\"4\"}"}));
    dt_weights_gpt a = arch_of(f, &rc);
    CHECK(!rc && a.n_layer == L && a.n_head == NH && a.n_embd == C && a.block_size == T && a.vocab_size == V &&
              !a.conv1d && a.prefixed && !a.has_config, "dtrain's sizes (rc %d: %s)", rc, dt_last_error());
    CHECK(reads_back(f, m, NULL), "dtrain's file: the same parameters");
    /* nanoGPT: the tied head stored too, no metadata: n_head unknown */
    f = case_dir("nanogpt", NULL);
    CHECK_OK(write_model(f, m, (layout){.dtype = DT_F32, .head = 1}));
    a = arch_of(f, &rc);
    CHECK(!rc && a.n_head == 0 && !a.conv1d, "nanoGPT: no n_head");
    CHECK(reads_back(f, m, NULL), "nanoGPT's state_dict with lm_head.weight");
    /* Hugging Face GPT2Model: no prefix, Conv1D, the buffers, config.json */
    f = case_dir("hf", HF_CONFIG "}");
    CHECK_OK(write_model(f, m, (layout){.hf = 1, .unprefixed = 1, .dtype = DT_F32, .masks = 1}));
    a = arch_of(f, &rc);
    CHECK(!rc && a.conv1d && !a.prefixed && a.has_config && a.n_head == NH && a.n_layer == L,
          "HF: Conv1D, unprefixed, config.json (rc %d: %s)", rc, dt_last_error());
    CHECK(reads_back(f, m, NULL), "HF GPT2Model: the same parameters");
    /* GPT2LMHeadModel: prefixed, F64 (exact), no config */
    f = case_dir("hf_lm", NULL);
    CHECK_OK(write_model(f, m, (layout){.hf = 1, .dtype = DT_F64, .masks = 1}));
    a = arch_of(f, &rc);
    CHECK(!rc && a.conv1d && a.prefixed && !a.has_config && !a.n_head, "GPT2LMHeadModel without config.json");
    CHECK(reads_back(f, m, NULL), "F64: the same parameters");
    /* F16 and BF16: the rounded values */
    for (int k = 0; k < 2; k++) {
        f = case_dir(k ? "bf16" : "f16", NULL);
        CHECK_OK(write_model(f, m, (layout){.hf = 1, .dtype = k ? DT_BF16 : DT_F16}));
        dt_model *r = gpt(99, T);
        const size_t P = dt_model_num_params(r);
        float *p = calloc(P, sizeof(float));
        dt_weights *w = NULL;
        CHECK_OK(dt_weights_open(f, &w));
        CHECK_OK(dt_weights_read(w, r, p, NULL));
        int ok = 1;
        for (size_t i = 0; i < P; i++) {
            float v = dt_model_params(m)[i];
            ok &= p[i] == (k ? dt_bf16_to_f32(dt_f32_to_bf16(v)) : dt_f16_to_f32(dt_f32_to_f16(v)));
        }
        CHECK(ok, "%s: every value rounded once", k ? "BF16" : "F16");
        dt_weights_close(w);
        free(p);
        dt_model_free(r);
    }
}

/* file written as lay (and config.json), then read: the status and message */
static void refused(const char *name, dt_model *m, layout lay, const char *cfg, int st, const char *msg) {
    const char *f = case_dir(name, cfg);
    CHECK_OK(write_model(f, m, lay));
    int rc;
    dt_clear_error();
    reads_back(f, m, &rc);
    CHECK(rc == st && strstr(dt_last_error(), msg), "%s: %s (want %s), '%s' (want '%s')", name, dt_status_str(rc),
          dt_status_str(st), dt_last_error(), msg);
}

static void test_refusals(dt_model *m) {
    const layout hf = {.hf = 1, .unprefixed = 1, .dtype = DT_F32};
    layout x = hf;
    x.drop = "transformer.h.1.mlp.c_fc.bias";
    refused("missing", m, x, NULL, DT_ERR_MISMATCH, "has no tensor h.1.mlp.c_fc.bias: the model gpt needs it (shape [64])");
    x = hf;
    x.reshape = "transformer.h.0.mlp.c_proj.weight";
    refused("shape", m, x, NULL, DT_ERR_MISMATCH,
            "has shape [65, 16], the model needs [64, 16] (Hugging Face's Conv1D layout [in, out])");
    x = hf;
    x.extra = "lm_head.bias";
    refused("head_bias", m, x, NULL, DT_ERR_UNSUPPORTED,
            "holds tensor lm_head.bias [40], which the model gpt does not have (a bias GPT-2 has not)");
    x = hf;
    x.extra = "h.0.attn.q_proj.weight";
    refused("extra", m, x, NULL, DT_ERR_UNSUPPORTED, "holds tensor h.0.attn.q_proj.weight [40], which the model gpt");
    x = hf;
    x.head = 2;
    refused("untied", m, x, NULL, DT_ERR_UNSUPPORTED, "an untied LM head is not supported");
    x = hf;
    x.dtype = DT_I32;
    refused("int", m, x, NULL, DT_ERR_UNSUPPORTED, "is I32: parameters are read from F32, F64, F16 or BF16");
    /* config.json: what dtrain's GPT has not, by name */
    const struct { const char *name, *cfg; int st; const char *msg; } cfgs[] = {
        {"act", "{\"n_head\": 4, \"activation_function\": \"gelu\"}", DT_ERR_UNSUPPORTED, "activation_function gelu is not supported"},
        {"act_relu", "{\"activation_function\": \"relu\"}", DT_ERR_UNSUPPORTED, "activation_function relu"},
        {"eps", "{\"layer_norm_epsilon\": 1e-6}", DT_ERR_UNSUPPORTED, "layer_norm_epsilon 1e-06 is not supported"},
        {"eps_str", "{\"layer_norm_epsilon\": \"small\"}", DT_ERR_IO, "layer_norm_epsilon is not a number"},
        {"inner", "{\"n_embd\": 16, \"n_inner\": 100}", DT_ERR_UNSUPPORTED, "n_inner 100 is not supported"},
        {"llama", "{\"model_type\": \"llama\"}", DT_ERR_UNSUPPORTED, "model_type llama: dtrain reads"},
        {"layer_idx", "{\"scale_attn_by_inverse_layer_idx\": true}", DT_ERR_UNSUPPORTED,
         "scale_attn_by_inverse_layer_idx true is not supported"},
        {"unscaled", "{\"scale_attn_weights\": false}", DT_ERR_UNSUPPORTED, "scale_attn_weights false"},
        {"cross", "{\"add_cross_attention\": true}", DT_ERR_UNSUPPORTED, "add_cross_attention true"},
        {"untie", "{\"tie_word_embeddings\": false}", DT_ERR_UNSUPPORTED, "tie_word_embeddings false"},
        {"bool", "{\"tie_word_embeddings\": 1}", DT_ERR_IO, "tie_word_embeddings is not true or false"},
        {"json", "{\"n_layer\": 2,}", DT_ERR_IO, "is not valid JSON"},
        {"array", "[1, 2]", DT_ERR_IO, "is not a JSON object"},
        {"heads", "{\"n_embd\": 16, \"n_head\": 5}", DT_ERR_IO, "n_embd 16 is not divisible by n_head 5"},
        {"heads_str", "{\"n_head\": \"four\"}", DT_ERR_IO, "n_head is not a positive integer"},
        {"layers", "{\"n_layer\": 3}", DT_ERR_MISMATCH, "says n_layer 3, but the number of blocks h.<i> of"},
        {"width", "{\"n_embd\": 32}", DT_ERR_MISMATCH, "says n_embd 32, but the token embedding's columns"},
        {"vocab", "{\"vocab_size\": 50257}", DT_ERR_MISMATCH, "says vocab_size 50257, but the token embedding's rows"},
        {"ctx", "{\"n_ctx\": 1024}", DT_ERR_MISMATCH, "says n_positions 1024, but the position embedding's rows"},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
        refused(cfgs[i].name, m, hf, cfgs[i].cfg, cfgs[i].st, cfgs[i].msg);
    /* a config.json that is a directory, or too large to be one */
    const char *f = case_dir("cfgdir", NULL);
    CHECK_OK(write_model(f, m, hf));
    char c[600];
    snprintf(c, sizeof c, "%s/cfgdir/config.json", g_dir);
    CHECK(mkdir(c, 0755) == 0, "mkdir config.json");
    dt_weights *w = NULL;
    CHECK_ERR(dt_weights_open(f, &w), DT_ERR_IO, "config.json is not a regular file");
    f = case_dir("cfgbig", NULL);
    CHECK_OK(write_model(f, m, hf));
    snprintf(c, sizeof c, "%s/cfgbig/config.json", g_dir);
    FILE *big = fopen(c, "w");
    for (int i = 0; big && i < (1 << 20) + 1; i++) fputc(' ', big);
    if (big) fclose(big);
    CHECK_ERR(dt_weights_open(f, &w), DT_ERR_IO, "more than a model config has");
    /* metadata */
    x = hf;
    x.meta = "{\"n_head\":\"abc\"}";
    refused("meta_bad", m, x, NULL, DT_ERR_IO, "metadata n_head 'abc' is not a positive integer");
    x.meta = "{\"n_head\":\"2\"}";
    refused("meta_cfg", m, x, "{\"n_head\": 4}", DT_ERR_MISMATCH, "says n_head 4, the metadata of");
}

/* hand-made files that are not a GPT-2 state_dict */
static void test_not_gpt(void) {
    float z[4 * 64] = {0};
    const struct { const char *name; dt_st_info t[3]; int n; const char *msg; } cases[] = {
        {"none", {{.name = "fc1.weight", .dtype = DT_F32, .ndim = 2, .shape = {2, 2}, .data = z}}, 1,
         "holds no GPT-2 state_dict: no tensor transformer.wte.weight or wte.weight"},
        {"wte3", {{.name = "wte.weight", .dtype = DT_F32, .ndim = 3, .shape = {2, 2, 2}, .data = z}}, 1,
         "wte.weight has 3 dimensions, not 2"},
        {"nowpe", {{.name = "wte.weight", .dtype = DT_F32, .ndim = 2, .shape = {4, 4}, .data = z}}, 1,
         "no position embedding wpe.weight"},
        {"wpe", {{.name = "wte.weight", .dtype = DT_F32, .ndim = 2, .shape = {4, 4}, .data = z},
                 {.name = "wpe.weight", .dtype = DT_F32, .ndim = 2, .shape = {2, 3}, .data = z}}, 2,
         "tensor wpe.weight has shape [2, 3], not [n_positions, 4]"},
        {"noblock", {{.name = "wte.weight", .dtype = DT_F32, .ndim = 2, .shape = {4, 4}, .data = z},
                     {.name = "wpe.weight", .dtype = DT_F32, .ndim = 2, .shape = {2, 4}, .data = z}}, 2,
         "no transformer block (no tensor h.0.ln_1.weight)"},
        {"noattn", {{.name = "wte.weight", .dtype = DT_F32, .ndim = 2, .shape = {4, 4}, .data = z},
                    {.name = "wpe.weight", .dtype = DT_F32, .ndim = 2, .shape = {2, 4}, .data = z},
                    {.name = "h.0.ln_1.weight", .dtype = DT_F32, .ndim = 1, .shape = {4}, .data = z}}, 3,
         "no tensor h.0.attn.c_attn.weight"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *f = case_dir(cases[i].name, NULL);
        CHECK_OK(dt_st_save(f, cases[i].t, cases[i].n, NULL));
        int rc;
        dt_clear_error();
        arch_of(f, &rc);
        CHECK(rc == DT_ERR_MISMATCH && strstr(dt_last_error(), cases[i].msg), "%s: %s '%s' (want '%s')",
              cases[i].name, dt_status_str(rc), dt_last_error(), cases[i].msg);
    }
    const dt_st_info bad[] = {{.name = "wte.weight", .dtype = DT_F32, .ndim = 2, .shape = {4, 4}, .data = z},
                              {.name = "wpe.weight", .dtype = DT_F32, .ndim = 2, .shape = {2, 4}, .data = z},
                              {.name = "h.0.ln_1.weight", .dtype = DT_F32, .ndim = 1, .shape = {4}, .data = z},
                              {.name = "h.0.attn.c_attn.weight", .dtype = DT_F32, .ndim = 2, .shape = {4, 4}, .data = z}};
    const char *f = case_dir("attnshape", NULL);
    CHECK_OK(dt_st_save(f, bad, 4, NULL));
    int rc;
    arch_of(f, &rc);
    CHECK(rc == DT_ERR_MISMATCH && strstr(dt_last_error(), "shape [4, 4]: neither [3C, C] (torch.nn.Linear) nor [C, 3C]"),
          "c_attn of neither layout: %s", dt_last_error());
    /* not a safetensors file; missing; bad arguments */
    put(dt_test_path("garbage.safetensors"), "this is not safetensors");
    dt_weights *w = NULL;
    CHECK_ERR(dt_weights_open(dt_test_path("garbage.safetensors"), &w), DT_ERR_IO, "garbage.safetensors");
    CHECK_ERR(dt_weights_open(dt_test_path("missing.safetensors"), &w), DT_ERR_IO, "missing.safetensors");
    CHECK_ERR(dt_weights_open(NULL, &w), DT_ERR_INVALID, "NULL");
    CHECK_ERR(dt_weights_gpt_arch(NULL, NULL), DT_ERR_INVALID, "NULL");
    CHECK_ERR(dt_weights_read(NULL, NULL, NULL, NULL), DT_ERR_INVALID, "NULL");
    CHECK(strcmp(dt_weights_path(NULL), "?") == 0, "path of NULL");
    dt_weights_close(NULL);
}

/* dtrain's own files of the classifiers: by name, buffers too */
static void test_sequential(void) {
    dt_model_config c;
    dt_model_config_default(&c, "lenet");
    c.seed = 3;
    dt_model *a = NULL, *b = NULL;
    CHECK_OK(dt_model_create(&c, &a));
    c.seed = 4;
    CHECK_OK(dt_model_create(&c, &b));
    dt_model_buffers(a)[1] = 0.25f; /* bn1.running_mean[1] */
    int np = dt_model_num_slices(a), nb = dt_model_num_buffer_slices(a);
    dt_st_info ts[16];
    for (int i = 0; i < np + nb; i++) {
        const dt_param_slice *sl = i < np ? dt_model_slice(a, i) : dt_model_buffer_slice(a, i - np);
        ts[i] = (dt_st_info){.name = sl->name, .dtype = DT_F32, .ndim = sl->ndim,
                             .data = (i < np ? dt_model_params(a) : dt_model_buffers(a)) + sl->offset};
        for (int d = 0; d < sl->ndim; d++) ts[i].shape[d] = sl->shape[d];
    }
    const char *f = dt_test_path("lenet.safetensors");
    CHECK_OK(dt_st_save(f, ts, np + nb, NULL));
    dt_weights *w = NULL;
    CHECK_OK(dt_weights_open(f, &w));
    float *p = calloc(dt_model_num_params(b), sizeof(float)), *bu = calloc(dt_model_num_buffers(b), sizeof(float));
    CHECK_OK(dt_weights_read(w, b, p, bu));
    CHECK(!memcmp(p, dt_model_params(a), dt_model_num_params(a) * sizeof(float)) &&
              !memcmp(bu, dt_model_buffers(a), dt_model_num_buffers(a) * sizeof(float)),
          "lenet: parameters and batch-norm buffers");
    CHECK_ERR(dt_weights_read(w, b, NULL, bu), DT_ERR_INVALID, "NULL");
    dt_weights_gpt ga;
    CHECK_ERR(dt_weights_gpt_arch(w, &ga), DT_ERR_MISMATCH, "holds no GPT-2 state_dict");
    dt_weights_close(w);
    free(p);
    free(bu);
    /* a gpt read from it: the first tensor the file lacks */
    dt_model *g = gpt(1, T);
    CHECK_OK(dt_weights_open(f, &w));
    p = calloc(dt_model_num_params(g), sizeof(float));
    CHECK_ERR(dt_weights_read(w, g, p, NULL), DT_ERR_MISMATCH, "holds no GPT-2 state_dict");
    dt_weights_close(w);
    free(p);
    dt_model_free(g);
    /* an mlp of another width: the tensor and both shapes */
    dt_model_config mc;
    dt_model_config_default(&mc, "mlp");
    dt_model *m1 = NULL, *m2 = NULL;
    mc.hidden1 = 32, mc.hidden2 = 16;
    CHECK_OK(dt_model_create(&mc, &m1));
    mc.hidden1 = 24;
    CHECK_OK(dt_model_create(&mc, &m2));
    for (int i = 0; i < dt_model_num_slices(m1); i++) {
        const dt_param_slice *sl = dt_model_slice(m1, i);
        ts[i] = (dt_st_info){.name = sl->name, .dtype = DT_F32, .ndim = sl->ndim, .data = dt_model_params(m1) + sl->offset};
        for (int d = 0; d < sl->ndim; d++) ts[i].shape[d] = sl->shape[d];
    }
    f = dt_test_path("mlp.safetensors");
    CHECK_OK(dt_st_save(f, ts, dt_model_num_slices(m1), NULL));
    CHECK_OK(dt_weights_open(f, &w));
    p = calloc(dt_model_num_params(m2), sizeof(float));
    CHECK_ERR(dt_weights_read(w, m2, p, NULL), DT_ERR_MISMATCH,
              "tensor fc1.weight: " /* then the path */);
    CHECK(strstr(dt_last_error(), "has shape [32, 784], the model needs [24, 784]"), "both shapes: %s", dt_last_error());
    dt_weights_close(w);
    free(p);
    dt_model_free(m1);
    dt_model_free(m2);
    dt_model_free(a);
    dt_model_free(b);
}

/* The Hugging Face export: names, Conv1D shapes and config.json, read back */
static void test_hf_export(dt_model *m) {
    const int n = dt_model_num_slices(m);
    dt_st_info ts[MAXT];
    char names[MAXT][DT_SLICE_NAME_MAX];
    float *bufs[MAXT] = {0};
    int ok = 1;
    for (int i = 0; i < n; i++) {
        const dt_param_slice *sl = dt_model_slice(m, i);
        int tr = -1;
        dt_st_info *t = &ts[i];
        CHECK_OK(dt_weights_hf_tensor(sl, names[i], sizeof names[i], t->shape, &tr));
        ok &= strcmp(names[i], sl->name) == 0 && tr == conv1d(sl->name);
        ok &= tr ? t->shape[0] == sl->shape[1] && t->shape[1] == sl->shape[0] : t->shape[0] == sl->shape[0];
        t->name = names[i];
        t->dtype = DT_F32;
        t->ndim = sl->ndim;
        float *b = bufs[i] = malloc(sl->count * sizeof(float));
        const float *src = dt_model_params(m) + sl->offset;
        for (size_t e = 0; e < sl->count; e++)
            b[tr ? (e % (size_t)sl->shape[1]) * (size_t)sl->shape[0] + e / (size_t)sl->shape[1] : e] = src[e];
        t->data = b;
    }
    CHECK(ok, "HF names are dtrain's; the four matrices transposed");
    char *cfg = NULL;
    CHECK_OK(dt_weights_hf_config(dt_model_get_config(m), &cfg));
    CHECK(cfg && strstr(cfg, "\"n_head\": 4") && strstr(cfg, "\"activation_function\": \"gelu_new\"") &&
              strstr(cfg, "\"layer_norm_epsilon\": 1e-5") && strstr(cfg, "\"GPT2LMHeadModel\"") &&
              !strstr(cfg, "bos_token_id") && cfg[strlen(cfg) - 1] == '\n',
          "config.json:\n%s", cfg ? cfg : "(null)");
    const char *f = case_dir("export", cfg);
    free(cfg);
    CHECK_OK(dt_st_save(f, ts, n, "{\"format\":\"pt\"}"));
    for (int i = 0; i < n; i++) free(bufs[i]);
    int rc;
    dt_weights_gpt a = arch_of(f, &rc);
    CHECK(!rc && a.conv1d && a.prefixed && a.has_config && a.n_head == NH, "the export's sizes");
    CHECK(reads_back(f, m, NULL), "the export reads back bit for bit");
    /* GPT-2's vocabulary: its <|endoftext|> ids */
    dt_model_config c = *dt_model_get_config(m);
    c.vocab_size = 50257;
    CHECK_OK(dt_weights_hf_config(&c, &cfg));
    CHECK(cfg && strstr(cfg, "\"bos_token_id\": 50256") && strstr(cfg, "\"eos_token_id\": 50256"), "GPT-2's ids");
    free(cfg);
    /* errors */
    char nm[DT_SLICE_NAME_MAX];
    int64_t sh[4];
    int tr;
    dt_param_slice bad = {.name = "fc1.weight", .ndim = 2, .shape = {2, 2}};
    CHECK_ERR(dt_weights_hf_tensor(&bad, nm, sizeof nm, sh, &tr), DT_ERR_INVALID, "fc1.weight is not one of a gpt");
    CHECK_ERR(dt_weights_hf_tensor(dt_model_slice(m, 0), nm, 8, sh, &tr), DT_ERR_INVALID, "under 64 bytes");
    dt_model_config mc;
    dt_model_config_default(&mc, "mlp");
    CHECK_ERR(dt_weights_hf_config(&mc, &cfg), DT_ERR_INVALID, "is not a gpt model");
    CHECK_ERR(dt_weights_hf_config(NULL, &cfg), DT_ERR_INVALID, "NULL");
}

/* Splits the single file `from` into two shards and an index in folder dir
 * (with cfg as its config.json), leaving out tensor `drop` (or none). */
static void write_sharded(const char *from, const char *dir, const char *cfg, const char *drop) {
    remove(case_dir(dir, cfg)); /* the folder and its config.json, without model.safetensors */
    dt_st_file *st = NULL;
    CHECK_OK(dt_st_open(from, &st));
    if (!st) return;
    const int n = dt_st_num_tensors(st);
    dt_st_info ts[MAXT];
    void *bufs[MAXT] = {0};
    char index[8192], sh[2][600];
    size_t len = (size_t)snprintf(index, sizeof index, "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {");
    int k = 0, first = 1;
    for (int i = 0; i < n && i < MAXT; i++) {
        uint64_t nb = 0;
        CHECK_OK(dt_st_tensor_info(st, i, &ts[k], &nb, NULL));
        if (drop && strcmp(ts[k].name, drop) == 0) continue;
        ts[k].data = bufs[k] = malloc(nb ? (size_t)nb : 1);
        CHECK_OK(dt_st_read(st, i, bufs[k], (size_t)nb));
        len += (size_t)snprintf(index + len, sizeof index - len, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"",
                                first ? "" : ", ", ts[k].name, k < n / 2 ? 1 : 2);
        first = 0;
        k++;
    }
    snprintf(index + len, sizeof index - len, "}}");
    for (int s = 0; s < 2; s++) snprintf(sh[s], sizeof sh[s], "%s/%s/model-0000%d-of-00002.safetensors", g_dir, dir, s + 1);
    CHECK_OK(dt_st_save(sh[0], ts, n / 2, "{\"format\":\"pt\"}"));
    CHECK_OK(dt_st_save(sh[1], ts + n / 2, k - n / 2, "{\"format\":\"pt\"}"));
    char ip[600];
    snprintf(ip, sizeof ip, "%s/%s/model.safetensors.index.json", g_dir, dir);
    put(ip, index);
    for (int i = 0; i < k; i++) free(bufs[i]);
    dt_st_close(st);
}

/* Hugging Face's save_pretrained folders: model.safetensors, or shards and their index */
static void test_sharded(dt_model *m) {
    char cfg[600];
    snprintf(cfg, sizeof cfg, "%s}", HF_CONFIG);
    const char *single = case_dir("hf_single", cfg);
    CHECK_OK(write_model(single, m, (layout){.hf = 1, .dtype = DT_F32, .masks = 1, .meta = "{\"format\":\"pt\"}"}));
    char from[600];
    snprintf(from, sizeof from, "%s", single);
    write_sharded(from, "hf_sharded", cfg, NULL);
    int rc;
    dt_weights_gpt a = arch_of(dt_test_path("hf_sharded"), &rc);
    CHECK(!rc && a.conv1d && a.prefixed && a.has_config && a.n_head == NH && a.n_layer == L,
          "the sharded folder's sizes (rc %d: %s)", rc, dt_last_error());
    CHECK(reads_back(dt_test_path("hf_sharded"), m, NULL), "a sharded folder reads back bit for bit");
    CHECK(reads_back(dt_test_path("hf_sharded/model.safetensors.index.json"), m, NULL), "its index reads back bit for bit");
    CHECK(reads_back(dt_test_path("hf_single"), m, NULL), "a folder with model.safetensors reads back bit for bit");
    char slash[600];
    snprintf(slash, sizeof slash, "%s/", dt_test_path("hf_single"));
    CHECK(reads_back(slash, m, NULL), "the folder with a trailing slash");
    dt_weights *w = NULL;
    CHECK_OK(dt_weights_open(dt_test_path("hf_sharded"), &w));
    CHECK(w && strcmp(dt_weights_path(w), dt_test_path("hf_sharded/model.safetensors.index.json")) == 0,
          "dt_weights_path names the index in the folder: %s", dt_weights_path(w));
    dt_weights_close(w);
    /* a parameter in neither the index nor the shards */
    write_sharded(from, "hf_dropped", NULL, "transformer.h.1.mlp.c_fc.bias");
    reads_back(dt_test_path("hf_dropped"), m, &rc);
    CHECK(rc == DT_ERR_MISMATCH && strstr(dt_last_error(), "hf_dropped/model.safetensors.index.json has no tensor "
                                                          "transformer.h.1.mlp.c_fc.bias"),
          "a parameter missing from the shards: %s", dt_last_error());
    /* a folder with neither */
    mkdir(dt_test_path("empty"), 0755);
    CHECK_ERR(dt_weights_open(dt_test_path("empty"), &w), DT_ERR_IO, "neither model.safetensors nor model.safetensors.index.json");
}

/* llm.c's model file of m (train_gpt2.py's write_model): version 3 (float32)
 * or 5 (bfloat16), the vocabulary padded to Vp rows of `pad`; hdr_fix
 * overrides header field hdr_fix[0] with hdr_fix[1] (when hdr_fix[0] > 0);
 * extra bytes appended (negative: cut). */
static void write_llmc(const char *file, dt_model *m, int version, int Vp, int pad, const int *hdr_fix, long extra) {
    int32_t h[256] = {20240326, version, T, V, L, NH, C, Vp};
    if (hdr_fix && hdr_fix[0] > 0) h[hdr_fix[0]] = hdr_fix[1];
    FILE *f = fopen(file, "wb");
    CHECK(f != NULL, "create %s", file);
    if (!f) return;
    fwrite(h, 4, 256, f);
    const char *block[12] = {"ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
                             "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
                             "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
    char order[2 + 12 * L + 2][96];
    int n = 0;
    snprintf(order[n++], 96, "transformer.wte.weight");
    snprintf(order[n++], 96, "transformer.wpe.weight");
    for (int k = 0; k < 12; k++)
        for (int l = 0; l < L; l++) snprintf(order[n++], 96, "transformer.h.%d.%s", l, block[k]);
    snprintf(order[n++], 96, "transformer.ln_f.weight");
    snprintf(order[n++], 96, "transformer.ln_f.bias");
    long written = 1024;
    for (int i = 0; i < n; i++) {
        const dt_param_slice *sl = NULL;
        for (int j = 0; j < dt_model_num_slices(m); j++)
            if (!strcmp(dt_model_slice(m, j)->name, order[i])) sl = dt_model_slice(m, j);
        CHECK(sl != NULL, "slice %s", order[i]);
        if (!sl) break;
        const size_t count = sl->count + (i == 0 ? (size_t)(Vp - V) * C : 0);
        for (size_t e = 0; e < count; e++) {
            float v = e < sl->count ? dt_model_params(m)[sl->offset + e] : (float)pad;
            if (version == 5) {
                uint16_t b = dt_f32_to_bf16(v);
                fwrite(&b, 2, 1, f);
            } else {
                fwrite(&v, 4, 1, f);
            }
            written += version == 5 ? 2 : 4;
        }
    }
    for (long e = 0; e < extra; e++) fputc(0, f);
    fclose(f);
    if (extra < 0) CHECK(truncate(file, written + extra) == 0, "truncate %s", file);
}

/* llm.c's model files: gpt2_124M.bin's format at this test's sizes */
static void test_llmc(dt_model *m) {
    const char *f = dt_test_path("model_llmc.bin");
    write_llmc(f, m, 3, 128, 7, NULL, 0); /* the padding rows are not read: 7s there */
    int rc;
    dt_weights_gpt a = arch_of(f, &rc);
    CHECK(!rc && a.n_layer == L && a.n_head == NH && a.n_embd == C && a.block_size == T && a.vocab_size == V &&
              !a.conv1d && a.prefixed && !a.has_config, "llm.c's sizes (rc %d: %s)", rc, dt_last_error());
    CHECK(reads_back(f, m, NULL), "an llm.c float32 file (version 3) reads back bit for bit");
    write_llmc(f, m, 3, V, 0, NULL, 0);
    CHECK(reads_back(f, m, NULL), "an unpadded vocabulary (Vp = V)");
    /* bfloat16 (version 5): the rounded values */
    const char *fb = dt_test_path("model_llmc_bf16.bin");
    write_llmc(fb, m, 5, 128, 0, NULL, 0);
    dt_model *r = gpt(7, T);
    float *p = dt_model_params(r);
    for (size_t i = 0; i < dt_model_num_params(r); i++) p[i] = dt_bf16_to_f32(dt_f32_to_bf16(p[i]));
    CHECK(reads_back(fb, r, NULL), "an llm.c bfloat16 file (version 5) reads the rounded values");
    dt_model_free(r);
    dt_weights *w = NULL;
    CHECK_OK(dt_weights_open(f, &w));
    CHECK(w && strcmp(dt_weights_path(w), f) == 0, "the path");
    dt_weights_close(w);
    /* refusals, each naming the file */
    const struct { int fix[2]; long extra; int st; const char *msg; } bad[] = {
        {{1, 4}, 0, DT_ERR_UNSUPPORTED, "llm.c model file version 4: dtrain reads versions 3 (float32) and 5"},
        {{1, 0}, 0, DT_ERR_IO, "header length 20240326"}, /* version 0: read as a safetensors file */
        {{7, V - 1}, 0, DT_ERR_IO, "padded_vocab_size 39 is below vocab_size 40"},
        {{5, 3}, 0, DT_ERR_IO, "channels 16 is not a multiple of num_heads 3"},
        {{6, 0}, 0, DT_ERR_IO, "header field 6 (channels) is 0, not in [1, 16777216]"},
        {{4, -1}, 0, DT_ERR_IO, "header field 4 (num_layers) is -1"},
        {{0, 0}, 1, DT_ERR_IO, "but its header (2 layers of 16 channels, 8 positions, vocabulary 40 padded to 128, "
                               "float32) gives"},
        {{0, 0}, -1, DT_ERR_IO, "truncated: tensor 'transformer.ln_f.bias' needs bytes"},
        {{2, T + 1}, 0, DT_ERR_IO, "truncated"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        write_llmc(f, m, 3, 128, 0, bad[k].fix, bad[k].extra);
        CHECK_ERR(dt_weights_open(f, &w), bad[k].st, bad[k].msg);
        CHECK(strstr(dt_last_error(), "model_llmc.bin") != NULL, "names the file: %s", dt_last_error());
    }
    FILE *fp = fopen(f, "wb");
    int32_t head[3] = {20240326, 3, T};
    if (fp) fwrite(head, 4, 3, fp), fclose(fp);
    CHECK_ERR(dt_weights_open(f, &w), DT_ERR_IO, "truncated: 12 bytes, llm.c's model files start with a 1024-byte header");
    /* another model's sizes: the trainer's messages name the tensor */
    dt_model *m16 = gpt(7, 16);
    write_llmc(f, m16, 3, 128, 0, (int[]){2, 16}, 0);
    reads_back(f, m, &rc);
    CHECK(rc == DT_ERR_MISMATCH && strstr(dt_last_error(), "tensor transformer.wpe.weight: ") &&
              strstr(dt_last_error(), "has shape [16, 16], the model needs [8, 16]"),
          "an llm.c file of 16 positions into 8: %s", dt_last_error());
    dt_model_free(m16);
}

int main(void) {
    if (!(g_dir = dt_test_tmpdir("dt_weights_"))) return 1;
    dt_model *m = gpt(7, T);
    test_producers(m);
    test_refusals(m);
    test_not_gpt();
    test_sequential();
    test_hf_export(m);
    test_sharded(m);
    test_llmc(m);
    /* a model of another block size: wpe's shapes */
    dt_model *m16 = gpt(7, 16);
    const char *f = case_dir("block16", NULL);
    CHECK_OK(write_model(f, m16, (layout){.dtype = DT_F32}));
    int rc;
    reads_back(f, m, &rc);
    CHECK(rc == DT_ERR_MISMATCH &&
              strstr(dt_last_error(), "tensor transformer.wpe.weight: ") &&
              strstr(dt_last_error(), "has shape [16, 16], the model needs [8, 16]"),
          "wpe of 16 rows into 8: %s", dt_last_error());
    dt_model_free(m16);
    dt_model_free(m);
    dt_test_tmpdir_remove();
    return dt_test_finish("test_weights");
}
