/* src/nn/model_seq_build.c - the sequential family: configuration, layer
 * builders, PyTorch-default initialisation and the family's table entry. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "dtrain/dtype.h"
#include "nn/nn_internal.h"
#include "nn/seq_internal.h"

#define CREATE_FN "dt_model_create"

static int seq_config_default(dt_model_config *cfg) {
    if (strcmp(cfg->name, "mlp") == 0) {
        cfg->hidden1 = 1024;
        cfg->hidden2 = 1024;
    } else if (strcmp(cfg->name, "cnn") == 0) {
        cfg->conv_channels1 = 32;
        cfg->conv_channels2 = 64;
        cfg->hidden3 = 128;
        cfg->dropout = 0.25f;
    }
    return DT_OK;
}

/* ---- builders ------------------------------------------------------------ */

static const char *kind_name(dt_layer_kind k) {
    switch (k) {
    case DTL_LINEAR: return "linear";
    case DTL_CONV2D: return "conv2d";
    case DTL_BN2D: return "batchnorm2d";
    case DTL_BN1D: return "batchnorm1d";
    case DTL_RELU: return "relu";
    case DTL_GELU: return "gelu";
    case DTL_SIGMOID: return "sigmoid";
    case DTL_TANH: return "tanh";
    case DTL_AVGPOOL: return "avgpool2d";
    case DTL_MAXPOOL: return "maxpool2d";
    case DTL_FLATTEN: return "flatten";
    case DTL_DROPOUT: return "dropout";
    }
    return "?";
}

/* A new layer (and unit) at the end of the stack; NULL with the message set. */
static dt_layer *new_layer(dt_model *mm, dt_layer_kind kind, const char *name) {
    dt_seq *m = seq_of(mm);
    if (m->nlayers >= DT_SEQ_MAX_LAYERS) {
        dt_error(DT_ERR_INTERNAL, CREATE_FN, "more than %d layers", DT_SEQ_MAX_LAYERS);
        return NULL;
    }
    if (dtm_add_unit(mm, name, kind_name(kind))) return NULL;
    dt_layer *L = &m->layers[m->nlayers];
    memset(L, 0, sizeof *L);
    L->kind = kind;
    L->in_c = m->cur_c;
    L->in_h = m->cur_h;
    L->in_w = m->cur_w;
    L->in_size = (size_t)m->cur_c * (size_t)m->cur_h * (size_t)m->cur_w;
    return L;
}

/* Sets the output shape, commits the layer. */
static int commit_layer(dt_model *mm, dt_layer *L, int c, int h, int w) {
    dt_seq *m = seq_of(mm);
    L->out_c = c;
    L->out_h = h;
    L->out_w = w;
    L->out_size = (size_t)c * (size_t)h * (size_t)w;
    m->cur_c = c;
    m->cur_h = h;
    m->cur_w = w;
    m->nlayers++;
    return DT_OK;
}

/* Parameter / buffer `suffix` of the last layer, named "<layer>.<suffix>". */
static int add_param(dt_model *m, dt_layer *L, const char *suffix, int ndim,
                     const int64_t *shape) {
    (void)L;
    char key[DT_SLICE_NAME_MAX];
    snprintf(key, sizeof key, "%s.%s", m->units[m->nlayers - 1].name, suffix);
    return dtm_add_param(m, key, ndim, shape);
}

static int add_buffer(dt_model *m, dt_layer *L, const char *suffix, int ndim,
                      const int64_t *shape) {
    (void)L;
    char key[DT_SLICE_NAME_MAX];
    snprintf(key, sizeof key, "%s.%s", m->units[m->nlayers - 1].name, suffix);
    return dtm_add_buffer(m, key, ndim, shape);
}

int dtm_add_linear(dt_model *m, const char *name, int out_features, int bias) {
    if (!seq_of(m)->flat)
        return dt_error(DT_ERR_INTERNAL, CREATE_FN, "linear layer %s needs a flat input", name);
    if (out_features <= 0)
        return dt_error(DT_ERR_INVALID, CREATE_FN, "layer %s: out_features %d must be > 0",
                        name, out_features);
    dt_layer *L = new_layer(m, DTL_LINEAR, name);
    if (!L) return DT_ERR_INTERNAL;
    if (L->in_size > (size_t)1 << 30 || (size_t)out_features * L->in_size > (size_t)1 << 32)
        return dt_error(DT_ERR_INVALID, CREATE_FN, "layer %s too large", name);
    int64_t wshape[2] = {out_features, (int64_t)L->in_size};
    int rc = add_param(m, L, "weight", 2, wshape);
    if (rc) return rc;
    L->weight_count = m->units[m->nlayers - 1].param_count;
    if (bias) {
        int64_t bshape[1] = {out_features};
        if ((rc = add_param(m, L, "bias", 1, bshape))) return rc;
        L->has_bias = 1;
    }
    return commit_layer(m, L, out_features, 1, 1);
}

int dtm_add_conv2d(dt_model *m, const char *name, int out_channels, int kernel, int stride,
                   int pad, int bias) {
    if (seq_of(m)->flat)
        return dt_error(DT_ERR_INTERNAL, CREATE_FN, "conv layer %s needs an image input", name);
    if (out_channels <= 0 || out_channels > (1 << 20))
        return dt_error(DT_ERR_INVALID, CREATE_FN,
                        "layer %s: out_channels %d must be in [1, 2^20]", name, out_channels);
    dt_layer *L = new_layer(m, DTL_CONV2D, name);
    if (!L) return DT_ERR_INTERNAL;
    dt_conv2d_desc d = {seq_of(m)->cur_c, seq_of(m)->cur_h, seq_of(m)->cur_w, out_channels, kernel, kernel,
                        stride,   stride,   pad,      pad};
    int oh = 0, ow = 0;
    int rc = dt_conv2d_out_hw(&d, &oh, &ow);
    if (rc) return rc;
    L->conv = d;
    int64_t wshape[4] = {out_channels, seq_of(m)->cur_c, kernel, kernel};
    if ((rc = add_param(m, L, "weight", 4, wshape))) return rc;
    L->weight_count = m->units[m->nlayers - 1].param_count;
    if (bias) {
        int64_t bshape[1] = {out_channels};
        if ((rc = add_param(m, L, "bias", 1, bshape))) return rc;
        L->has_bias = 1;
    }
    return commit_layer(m, L, out_channels, oh, ow);
}

int dtm_add_batchnorm(dt_model *m, const char *name) {
    dt_layer *L = new_layer(m, seq_of(m)->flat ? DTL_BN1D : DTL_BN2D, name);
    if (!L) return DT_ERR_INTERNAL;
    int64_t shape[1] = {seq_of(m)->cur_c};
    int rc;
    if ((rc = add_param(m, L, "weight", 1, shape))) return rc;
    L->weight_count = m->units[m->nlayers - 1].param_count;
    if ((rc = add_param(m, L, "bias", 1, shape))) return rc;
    L->has_bias = 1;
    if ((rc = add_buffer(m, L, "running_mean", 1, shape))) return rc;
    if ((rc = add_buffer(m, L, "running_var", 1, shape))) return rc;
    L->momentum = 0.1f;
    L->eps = 1e-5f;
    return commit_layer(m, L, seq_of(m)->cur_c, seq_of(m)->cur_h, seq_of(m)->cur_w);
}

int dtm_add_simple(dt_model *m, dt_layer_kind kind, const char *name) {
    dt_layer *L = new_layer(m, kind, name);
    if (!L) return DT_ERR_INTERNAL;
    if (kind == DTL_FLATTEN) {
        seq_of(m)->flat = 1;
        return commit_layer(m, L, seq_of(m)->cur_c * seq_of(m)->cur_h * seq_of(m)->cur_w, 1, 1);
    }
    return commit_layer(m, L, seq_of(m)->cur_c, seq_of(m)->cur_h, seq_of(m)->cur_w);
}

int dtm_add_pool(dt_model *m, dt_layer_kind kind, const char *name, int kernel, int stride) {
    if (seq_of(m)->flat)
        return dt_error(DT_ERR_INTERNAL, CREATE_FN, "pool layer %s needs an image input", name);
    dt_layer *L = new_layer(m, kind, name);
    if (!L) return DT_ERR_INTERNAL;
    dt_pool2d_desc d = {seq_of(m)->cur_c, seq_of(m)->cur_h, seq_of(m)->cur_w, kernel, kernel, stride, stride};
    int oh = 0, ow = 0;
    int rc = dt_pool2d_out_hw(&d, &oh, &ow);
    if (rc) return rc;
    L->pool = d;
    return commit_layer(m, L, seq_of(m)->cur_c, oh, ow);
}

int dtm_add_dropout(dt_model *m, const char *name, float p) {
    if (!(p >= 0.0f && p < 1.0f))
        return dt_error(DT_ERR_INVALID, CREATE_FN, "dropout %g must be in [0,1)", (double)p);
    dt_layer *L = new_layer(m, DTL_DROPOUT, name);
    if (!L) return DT_ERR_INTERNAL;
    L->p = p;
    return commit_layer(m, L, seq_of(m)->cur_c, seq_of(m)->cur_h, seq_of(m)->cur_w);
}

/* ---- the family ----------------------------------------------------------- */

static void seq_init(dt_model *m) {
    dt_seq *S = seq_of(m);
    for (int l = 0; l < S->nlayers; l++) {
        dt_layer *L = &S->layers[l];
        const dt_unit *U = &m->units[l];
        float *P = m->params + U->param_off;
        float *buf = m->buffers + U->buf_off;
        dt_rng rng;
        dt_rng_seed2(&rng, m->cfg.seed, (uint64_t)l);
        switch (L->kind) {
        case DTL_LINEAR:
        case DTL_CONV2D: {
            size_t fan_in = L->kind == DTL_LINEAR
                                ? L->in_size
                                : (size_t)L->conv.C * (size_t)L->conv.KH * (size_t)L->conv.KW;
            /* kaiming_uniform(a=sqrt(5)): bound = sqrt(6/((1+5)*fan_in)) */
            float bound = (float)(1.0 / sqrt((double)fan_in));
            for (size_t i = 0; i < U->param_count; i++)
                P[i] = (2.0f * dt_rng_uniform(&rng) - 1.0f) * bound;
            break;
        }
        case DTL_BN2D:
        case DTL_BN1D: {
            size_t C = (size_t)L->in_c;
            for (size_t i = 0; i < C; i++) {
                P[i] = 1.0f;
                P[C + i] = 0.0f;
                buf[i] = 0.0f;
                buf[C + i] = 1.0f;
            }
            break;
        }
        default: break;
        }
    }
    dt_rng_seed2(&S->drop_rng, m->cfg.seed, 0x64726f70u);
}

static int seq_build(dt_model *m, const dt_model_config *cfg) {
    if (cfg->recompute)
        return dt_error(DT_ERR_INVALID, CREATE_FN,
                        "recompute=%d: model %s (family sequential) has no activation "
                        "recomputation",
                        cfg->recompute, cfg->name);
    if (cfg->device != DT_DEVICE_CPU)
        return dt_error(DT_ERR_UNSUPPORTED, CREATE_FN,
                        "device %s: model %s (family sequential) computes on the cpu only (the gpt family has "
                        "a cuda backend)", dt_device_kind_name(cfg->device), cfg->name);
    if (cfg->precision != DT_PRECISION_FP32)
        return dt_error(DT_ERR_UNSUPPORTED, CREATE_FN,
                        "precision %s: model %s (family sequential) computes in fp32 only",
                        dt_precision_name(cfg->precision), cfg->name);
    dt_seq *S = calloc(1, sizeof *S);
    if (!S) return dt_error(DT_ERR_NOMEM, CREATE_FN, "out of memory");
    m->impl = S;
    S->in_c = 1;
    S->in_h = 28;
    S->in_w = 28;
    S->ncls = DT_SEQ_CLASSES;
    S->cur_c = S->in_c;
    S->cur_h = S->in_h;
    S->cur_w = S->in_w;
    m->io.family = "sequential";
    m->io.x_dtype = DT_F32;
    m->io.x_size = S->in_c * S->in_h * S->in_w;
    m->io.max_seq = 0;
    m->io.num_classes = S->ncls;
    if (strcmp(cfg->name, "mlp") == 0) return dt_model_build_mlp(m, cfg);
    if (strcmp(cfg->name, "lenet") == 0) return dt_model_build_lenet(m, cfg);
    return dt_model_build_cnn(m, cfg);
}

static const char *const seq_models[] = {"mlp", "lenet", "cnn", NULL};

const dtm_family dt_family_sequential = {
    .name = "sequential",
    .models = seq_models,
    .config_default = seq_config_default,
    .build = seq_build,
    .init = seq_init,
    .free_impl = dt_seq_free,
    .forward = dt_seq_forward,
    .backward = dt_seq_backward,
    .log_probs = dt_seq_log_probs,
    .scores = dt_seq_scores,
    .row_stats = dt_seq_row_stats,
    .layer_output = dt_seq_layer_output,
    .layer_output_size = dt_seq_layer_output_size,
    .seed_dropout = dt_seq_seed_dropout,
    .set_recompute = NULL,
    .activation_bytes = dt_seq_activation_bytes,
    .generate = NULL,
};
