/* src/nn/model_info.c - read-only model accessors: sizes, buffers, slices,
 * layers, last-forward outputs. */
#include <string.h>
#include "core/error.h"
#include "nn/model_internal.h"

const char *dt_model_name(const dt_model *m) { return m ? m->name : "?"; }

int dt_model_input_size(const dt_model *m) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "NULL model");
    return m->in_c * m->in_h * m->in_w;
}

int dt_model_num_classes(const dt_model *m) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "NULL model");
    return m->ncls;
}

size_t dt_model_num_params(const dt_model *m) { return m ? m->nparams : 0; }
float *dt_model_params(dt_model *m) { return m ? m->params : NULL; }
float *dt_model_grads(dt_model *m) { return m ? m->grads : NULL; }
size_t dt_model_num_buffers(const dt_model *m) { return m ? m->nbuffers : 0; }
float *dt_model_buffers(dt_model *m) { return m ? m->buffers : NULL; }

int dt_model_num_slices(const dt_model *m) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "NULL model");
    return m->nslices;
}

const dt_param_slice *dt_model_slice(const dt_model *m, int i) {
    if (!m || i < 0 || i >= m->nslices) {
        DT_ERR(DT_ERR_INVALID, "bad model or slice index %d (have %d)", i, m ? m->nslices : 0);
        return NULL;
    }
    return &m->slices[i];
}

int dt_model_num_buffer_slices(const dt_model *m) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "NULL model");
    return m->nbslices;
}

const dt_param_slice *dt_model_buffer_slice(const dt_model *m, int i) {
    if (!m || i < 0 || i >= m->nbslices) {
        DT_ERR(DT_ERR_INVALID, "bad model or buffer slice index %d (have %d)", i,
               m ? m->nbslices : 0);
        return NULL;
    }
    return &m->bslices[i];
}

const dt_param_slice *dt_model_find_slice(const dt_model *m, const char *name,
                                          int *is_buffer) {
    if (!m || !name) {
        DT_ERR(DT_ERR_INVALID, "NULL model or name");
        return NULL;
    }
    for (int i = 0; i < m->nslices; i++)
        if (strcmp(m->slices[i].name, name) == 0) {
            if (is_buffer) *is_buffer = 0;
            return &m->slices[i];
        }
    for (int i = 0; i < m->nbslices; i++)
        if (strcmp(m->bslices[i].name, name) == 0) {
            if (is_buffer) *is_buffer = 1;
            return &m->bslices[i];
        }
    DT_ERR(DT_ERR_INVALID, "model %s has no tensor named '%s'", m->name, name);
    return NULL;
}

int dt_model_num_layers(const dt_model *m) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "NULL model");
    return m->nlayers;
}

static const dt_layer *get_layer(const dt_model *m, int layer, const char *fn) {
    if (!m) {
        dt_error(DT_ERR_INVALID, fn, "NULL model");
        return NULL;
    }
    if (layer < 0 || layer >= m->nlayers) {
        dt_error(DT_ERR_INVALID, fn, "layer %d out of range [0,%d)", layer, m->nlayers);
        return NULL;
    }
    return &m->layers[layer];
}

const char *dt_model_layer_name(const dt_model *m, int layer) {
    const dt_layer *L = get_layer(m, layer, __func__);
    return L ? L->name : NULL;
}

const char *dt_model_layer_kind(const dt_model *m, int layer) {
    const dt_layer *L = get_layer(m, layer, __func__);
    if (!L) return NULL;
    switch (L->kind) {
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

int dt_model_layer_params(const dt_model *m, int layer, size_t *offset, size_t *count) {
    const dt_layer *L = get_layer(m, layer, __func__);
    if (!L) return DT_ERR_INVALID;
    if (offset) *offset = L->param_off;
    if (count) *count = L->param_count;
    return DT_OK;
}

int dt_model_layer_buffers(const dt_model *m, int layer, size_t *offset, size_t *count) {
    const dt_layer *L = get_layer(m, layer, __func__);
    if (!L) return DT_ERR_INVALID;
    if (offset) *offset = L->buf_off;
    if (count) *count = L->buf_count;
    return DT_OK;
}

size_t dt_model_layer_output_size(const dt_model *m, int layer) {
    const dt_layer *L = get_layer(m, layer, __func__);
    return L ? L->out_size : 0;
}

const float *dt_model_logits(const dt_model *m) { return m && m->B ? m->logp : NULL; }

const float *dt_model_scores(const dt_model *m) {
    return m && m->B ? m->layers[m->nlayers - 1].out : NULL;
}

int dt_model_batch_size(const dt_model *m) { return m ? m->B : 0; }

const float *dt_model_layer_output(const dt_model *m, int layer) {
    const dt_layer *L = get_layer(m, layer, __func__);
    if (!L) return NULL;
    if (!m->B) {
        DT_ERR(DT_ERR_STATE, "no forward has run");
        return NULL;
    }
    return L->out;
}

int dt_model_correct(const dt_model *m, const int32_t *labels, int B) {
    if (!m || !labels) return DT_ERR(DT_ERR_INVALID, "NULL model or labels");
    if (!m->B) return DT_ERR(DT_ERR_STATE, "no forward has run");
    if (B != m->B)
        return DT_ERR(DT_ERR_INVALID, "batch size %d differs from the last forward's %d", B,
                      m->B);
    int correct = 0;
    for (int b = 0; b < B; b++) {
        const float *row = m->logp + (size_t)b * (size_t)m->ncls;
        int best = 0;
        for (int v = 1; v < m->ncls; v++)
            if (row[v] > row[best]) best = v;
        correct += best == labels[b];
    }
    return correct;
}
