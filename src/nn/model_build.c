/* src/nn/model_build.c - model construction: configuration, layer builders,
 * the flat parameter/gradient/buffer layout and PyTorch-default init. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "nn/model_internal.h"
#include "nn/nn_internal.h"

#define CREATE_FN "dt_model_create"

int dt_model_config_init(dt_model_config *cfg, const char *name) {
    if (!cfg || !name) return DT_ERR(DT_ERR_INVALID, "NULL cfg or name");
    memset(cfg, 0, sizeof *cfg);
    if (strcmp(name, "mlp") == 0) {
        cfg->name = "mlp";
        cfg->hidden1 = 1024;
        cfg->hidden2 = 1024;
    } else if (strcmp(name, "lenet") == 0) {
        cfg->name = "lenet";
    } else if (strcmp(name, "cnn") == 0) {
        cfg->name = "cnn";
        cfg->hidden1 = 32;
        cfg->hidden2 = 64;
        cfg->hidden3 = 128;
        cfg->dropout = 0.25f;
    } else {
        return DT_ERR(DT_ERR_INVALID, "unknown model name '%s' (expected mlp, lenet or cnn)",
                      name);
    }
    return DT_OK;
}

/* ---- builders ------------------------------------------------------------ */

static dt_layer *new_layer(dt_model *m, dt_layer_kind kind, const char *name) {
    if (m->nlayers >= DT_MODEL_MAX_LAYERS) {
        dt_error(DT_ERR_INTERNAL, CREATE_FN, "more than %d layers", DT_MODEL_MAX_LAYERS);
        return NULL;
    }
    dt_layer *L = &m->layers[m->nlayers];
    memset(L, 0, sizeof *L);
    L->kind = kind;
    snprintf(L->name, sizeof L->name, "%s", name);
    L->in_c = m->cur_c;
    L->in_h = m->cur_h;
    L->in_w = m->cur_w;
    L->in_size = (size_t)m->cur_c * (size_t)m->cur_h * (size_t)m->cur_w;
    L->param_off = m->nparams;
    L->buf_off = m->nbuffers;
    return L;
}

/* Sets the output shape, commits the layer. */
static int commit_layer(dt_model *m, dt_layer *L, int c, int h, int w) {
    L->out_c = c;
    L->out_h = h;
    L->out_w = w;
    L->out_size = (size_t)c * (size_t)h * (size_t)w;
    m->cur_c = c;
    m->cur_h = h;
    m->cur_w = w;
    m->nparams += L->param_count;
    m->nbuffers += L->buf_count;
    m->nlayers++;
    return DT_OK;
}

static int add_slice(dt_param_slice **tab, int *n, int *cap, const dt_layer *L, int layer,
                     const char *suffix, size_t offset, int ndim, const int64_t *shape) {
    if (*n == *cap) {
        int nc = *cap ? 2 * *cap : 16;
        dt_param_slice *t = realloc(*tab, (size_t)nc * sizeof *t);
        if (!t) return dt_error(DT_ERR_NOMEM, CREATE_FN, "out of memory for slice table");
        *tab = t;
        *cap = nc;
    }
    dt_param_slice *s = &(*tab)[*n];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s.%s", L->name, suffix);
    s->ndim = ndim;
    s->count = 1;
    for (int i = 0; i < ndim; i++) {
        s->shape[i] = shape[i];
        s->count *= (size_t)shape[i];
    }
    s->offset = offset;
    s->layer = layer;
    (*n)++;
    return DT_OK;
}

static int add_param(dt_model *m, dt_layer *L, const char *suffix, int ndim,
                     const int64_t *shape) {
    int rc = add_slice(&m->slices, &m->nslices, &m->cap_slices, L, m->nlayers, suffix,
                       L->param_off + L->param_count, ndim, shape);
    if (rc) return rc;
    L->param_count += m->slices[m->nslices - 1].count;
    return DT_OK;
}

static int add_buffer(dt_model *m, dt_layer *L, const char *suffix, int ndim,
                      const int64_t *shape) {
    int rc = add_slice(&m->bslices, &m->nbslices, &m->cap_bslices, L, m->nlayers, suffix,
                       L->buf_off + L->buf_count, ndim, shape);
    if (rc) return rc;
    L->buf_count += m->bslices[m->nbslices - 1].count;
    return DT_OK;
}

int dtm_add_linear(dt_model *m, const char *name, int out_features, int bias) {
    if (!m->flat)
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
    L->weight_count = L->param_count;
    if (bias) {
        int64_t bshape[1] = {out_features};
        if ((rc = add_param(m, L, "bias", 1, bshape))) return rc;
        L->has_bias = 1;
    }
    return commit_layer(m, L, out_features, 1, 1);
}

int dtm_add_conv2d(dt_model *m, const char *name, int out_channels, int kernel, int stride,
                   int pad, int bias) {
    if (m->flat)
        return dt_error(DT_ERR_INTERNAL, CREATE_FN, "conv layer %s needs an image input", name);
    if (out_channels <= 0 || out_channels > (1 << 20))
        return dt_error(DT_ERR_INVALID, CREATE_FN,
                        "layer %s: out_channels %d must be in [1, 2^20]", name, out_channels);
    dt_layer *L = new_layer(m, DTL_CONV2D, name);
    if (!L) return DT_ERR_INTERNAL;
    dt_conv2d_desc d = {m->cur_c, m->cur_h, m->cur_w, out_channels, kernel, kernel,
                        stride,   stride,   pad,      pad};
    int oh = 0, ow = 0;
    int rc = dt_conv2d_out_hw(&d, &oh, &ow);
    if (rc) return rc;
    L->conv = d;
    int64_t wshape[4] = {out_channels, m->cur_c, kernel, kernel};
    if ((rc = add_param(m, L, "weight", 4, wshape))) return rc;
    L->weight_count = L->param_count;
    if (bias) {
        int64_t bshape[1] = {out_channels};
        if ((rc = add_param(m, L, "bias", 1, bshape))) return rc;
        L->has_bias = 1;
    }
    return commit_layer(m, L, out_channels, oh, ow);
}

int dtm_add_batchnorm(dt_model *m, const char *name) {
    dt_layer *L = new_layer(m, m->flat ? DTL_BN1D : DTL_BN2D, name);
    if (!L) return DT_ERR_INTERNAL;
    int64_t shape[1] = {m->cur_c};
    int rc;
    if ((rc = add_param(m, L, "weight", 1, shape))) return rc;
    L->weight_count = L->param_count;
    if ((rc = add_param(m, L, "bias", 1, shape))) return rc;
    L->has_bias = 1;
    if ((rc = add_buffer(m, L, "running_mean", 1, shape))) return rc;
    if ((rc = add_buffer(m, L, "running_var", 1, shape))) return rc;
    L->momentum = 0.1f;
    L->eps = 1e-5f;
    return commit_layer(m, L, m->cur_c, m->cur_h, m->cur_w);
}

int dtm_add_simple(dt_model *m, dt_layer_kind kind, const char *name) {
    dt_layer *L = new_layer(m, kind, name);
    if (!L) return DT_ERR_INTERNAL;
    if (kind == DTL_FLATTEN) {
        m->flat = 1;
        return commit_layer(m, L, m->cur_c * m->cur_h * m->cur_w, 1, 1);
    }
    return commit_layer(m, L, m->cur_c, m->cur_h, m->cur_w);
}

int dtm_add_pool(dt_model *m, dt_layer_kind kind, const char *name, int kernel, int stride) {
    if (m->flat)
        return dt_error(DT_ERR_INTERNAL, CREATE_FN, "pool layer %s needs an image input", name);
    dt_layer *L = new_layer(m, kind, name);
    if (!L) return DT_ERR_INTERNAL;
    dt_pool2d_desc d = {m->cur_c, m->cur_h, m->cur_w, kernel, kernel, stride, stride};
    int oh = 0, ow = 0;
    int rc = dt_pool2d_out_hw(&d, &oh, &ow);
    if (rc) return rc;
    L->pool = d;
    return commit_layer(m, L, m->cur_c, oh, ow);
}

int dtm_add_dropout(dt_model *m, const char *name, float p) {
    if (!(p >= 0.0f && p < 1.0f))
        return dt_error(DT_ERR_INVALID, CREATE_FN, "dropout %g must be in [0,1)", (double)p);
    dt_layer *L = new_layer(m, DTL_DROPOUT, name);
    if (!L) return DT_ERR_INTERNAL;
    L->p = p;
    return commit_layer(m, L, m->cur_c, m->cur_h, m->cur_w);
}

/* ---- creation ------------------------------------------------------------ */

/* 64-byte aligned, zeroed, at least one element. */
static void *alloc_aligned(size_t n, size_t esize) {
    size_t bytes = (n ? n : 1) * esize;
    bytes = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

static void init_params(dt_model *m) {
    for (int l = 0; l < m->nlayers; l++) {
        dt_layer *L = &m->layers[l];
        float *P = m->params + L->param_off;
        float *buf = m->buffers + L->buf_off;
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
            for (size_t i = 0; i < L->param_count; i++)
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
}

int dt_model_create(const dt_model_config *cfg, dt_model **out) {
    if (!out) return DT_ERR(DT_ERR_INVALID, "NULL out");
    *out = NULL;
    if (!cfg) return DT_ERR(DT_ERR_INVALID, "NULL config");
    if (!cfg->name) return DT_ERR(DT_ERR_INVALID, "NULL model name");
    if (!(cfg->dropout >= 0.0f && cfg->dropout < 1.0f))
        return DT_ERR(DT_ERR_INVALID, "dropout %g must be in [0,1)", (double)cfg->dropout);
    int (*build)(dt_model *, const dt_model_config *) = NULL;
    if (strcmp(cfg->name, "mlp") == 0) build = dt_model_build_mlp;
    else if (strcmp(cfg->name, "lenet") == 0) build = dt_model_build_lenet;
    else if (strcmp(cfg->name, "cnn") == 0) build = dt_model_build_cnn;
    else
        return DT_ERR(DT_ERR_INVALID, "unknown model name '%s' (expected mlp, lenet or cnn)",
                      cfg->name);
    dt_nn_blas_init();
    dt_model *m = calloc(1, sizeof *m);
    if (!m) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    snprintf(m->name, sizeof m->name, "%s", cfg->name);
    m->cfg = *cfg;
    m->cfg.name = m->name;
    m->in_c = 1;
    m->in_h = 28;
    m->in_w = 28;
    m->ncls = 10;
    m->cur_c = m->in_c;
    m->cur_h = m->in_h;
    m->cur_w = m->in_w;
    int rc = build(m, cfg);
    if (rc) {
        dt_model_free(m);
        return rc;
    }
    m->params = alloc_aligned(m->nparams, sizeof(float));
    m->grads = alloc_aligned(m->nparams, sizeof(float));
    m->buffers = alloc_aligned(m->nbuffers, sizeof(float));
    if (!m->params || !m->grads || !m->buffers) {
        size_t np = m->nparams;
        dt_model_free(m);
        return DT_ERR(DT_ERR_NOMEM, "out of memory for %zu parameters", np);
    }
    init_params(m);
    dt_rng_seed2(&m->drop_rng, cfg->seed, 0x64726f70u);
    *out = m;
    return DT_OK;
}

void dt_model_free(dt_model *m) {
    if (!m) return;
    free(m->params);
    if (!m->grads_external) free(m->grads);
    free(m->buffers);
    free(m->slices);
    free(m->bslices);
    free(m->arena);
    free(m->labels);
    free(m->work);
    for (int l = 0; l < m->nlayers; l++) free(m->layers[l].argmax);
    free(m);
}
