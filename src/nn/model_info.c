/* src/nn/model_info.c - read-only model accessors: sizes, buffers, slices,
 * layers, last-forward outputs. */
#include <string.h>
#include "core/error.h"
#include "nn/model_internal.h"

const char *dt_model_name(const dt_model *m) { return m ? m->name : "?"; }

const char *dt_model_family(const dt_model *m) { return m ? m->io.family : "?"; }

const dt_model_config *dt_model_get_config(const dt_model *m) {
    if (!m) {
        DT_ERR(DT_ERR_INVALID, "NULL model");
        return NULL;
    }
    return &m->cfg;
}

int dt_model_get_io(const dt_model *m, dt_model_io *io) {
    if (!m || !io) return DT_ERR(DT_ERR_INVALID, "NULL model or io");
    *io = m->io;
    return DT_OK;
}

int dt_model_input_size(const dt_model *m) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "NULL model");
    return m->io.x_size * (m->io.max_seq ? m->io.max_seq : 1);
}

int dt_model_num_classes(const dt_model *m) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "NULL model");
    return m->io.num_classes;
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

static const dt_unit *get_unit(const dt_model *m, int layer, const char *fn) {
    if (!m) {
        dt_error(DT_ERR_INVALID, fn, "NULL model");
        return NULL;
    }
    if (layer < 0 || layer >= m->nlayers) {
        dt_error(DT_ERR_INVALID, fn, "layer %d out of range [0,%d)", layer, m->nlayers);
        return NULL;
    }
    return &m->units[layer];
}

const char *dt_model_layer_name(const dt_model *m, int layer) {
    const dt_unit *U = get_unit(m, layer, __func__);
    return U ? U->name : NULL;
}

const char *dt_model_layer_kind(const dt_model *m, int layer) {
    const dt_unit *U = get_unit(m, layer, __func__);
    return U ? U->kind : NULL;
}

int dt_model_layer_params(const dt_model *m, int layer, size_t *offset, size_t *count) {
    const dt_unit *U = get_unit(m, layer, __func__);
    if (!U) return DT_ERR_INVALID;
    if (offset) *offset = U->param_off;
    if (count) *count = U->param_count;
    return DT_OK;
}

int dt_model_layer_buffers(const dt_model *m, int layer, size_t *offset, size_t *count) {
    const dt_unit *U = get_unit(m, layer, __func__);
    if (!U) return DT_ERR_INVALID;
    if (offset) *offset = U->buf_off;
    if (count) *count = U->buf_count;
    return DT_OK;
}

int dt_model_layer_param_owner(const dt_model *m, int layer) {
    const dt_unit *U = get_unit(m, layer, __func__);
    return U ? U->owner : DT_ERR_INVALID;
}

size_t dt_model_layer_output_size(const dt_model *m, int layer) {
    const dt_unit *U = get_unit(m, layer, __func__);
    return U ? m->fam->layer_output_size(m, layer) : 0;
}

const float *dt_model_log_probs(const dt_model *m) {
    if (!m || !m->B) return NULL;
    /* the model object is never const itself (always from dt_model_create):
     * a family may fill a cache here (gpt's log-probabilities) */
    return m->fam->log_probs((dt_model *)m);
}

const float *dt_model_scores(const dt_model *m) {
    return m && m->B ? m->fam->scores(m) : NULL;
}

int dt_model_batch_size(const dt_model *m) { return m ? m->B : 0; }

int dt_model_seq_len(const dt_model *m) { return m ? m->T : 0; }

const float *dt_model_layer_output(const dt_model *m, int layer) {
    const dt_unit *U = get_unit(m, layer, __func__);
    if (!U) return NULL;
    if (!m->B) {
        DT_ERR(DT_ERR_STATE, "no forward has run");
        return NULL;
    }
    return m->fam->layer_output(m, layer);
}

int dt_model_correct(const dt_model *m, const int32_t *labels, int B) {
    if (!m || !labels) return DT_ERR(DT_ERR_INVALID, "NULL model or labels");
    if (!m->B) return DT_ERR(DT_ERR_STATE, "no forward has run");
    if (B != m->B)
        return DT_ERR(DT_ERR_INVALID, "batch size %d differs from the last forward's %d", B,
                      m->B);
    /* sequential: the log-probabilities, as always; gpt: the logits (the same
     * argmax up to rounding ties, without building the log-probabilities) */
    const float *scores = m->io.max_seq ? m->fam->scores(m) : m->fam->log_probs((dt_model *)m);
    if (!scores)
        return DT_ERR(DT_ERR_STATE, "the last forward's outputs are gone (after a backward)");
    const int V = m->io.num_classes;
    const size_t rows = (size_t)m->B * (size_t)m->T;
    int correct = 0;
    for (size_t r = 0; r < rows; r++) {
        const float *row = scores + r * (size_t)V;
        int best = 0;
        for (int v = 1; v < V; v++)
            if (row[v] > row[best]) best = v;
        correct += best == labels[r];
    }
    return correct;
}
