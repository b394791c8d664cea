/* src/nn/model.c - family-independent model runtime: argument checks and
 * the forward/backward state machine around the family's passes, hooks,
 * per-layer parameter/gradient redirection, gradient zeroing,
 * recomputation and generation entry points. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "dtrain/dtype.h"
#include "nn/model_internal.h"

int dtm_hook_status(int rc, const char *which, int layer) {
    if (rc < 0) return rc;
    return dt_error(DT_ERR_STATE, "dt_model", "%s hook for layer %d returned %d", which, layer,
                    rc);
}

int dt_model_forward_seq(dt_model *m, const void *x, const int32_t *labels, int B, int T,
                         int train, float *loss) {
    if (!m || !x) return DT_ERR(DT_ERR_INVALID, "NULL model or input");
    if (B <= 0) return DT_ERR(DT_ERR_INVALID, "batch size %d must be > 0", B);
    const dt_model_io *io = &m->io;
    if (io->max_seq == 0 && T != 1)
        return DT_ERR(DT_ERR_INVALID, "sequence length T=%d: model %s (family %s) takes T = 1",
                      T, m->name, io->family);
    if (io->max_seq > 0 && (T < 1 || T > io->max_seq))
        return DT_ERR(DT_ERR_INVALID, "sequence length T=%d not in [1, block_size=%d]", T,
                      io->max_seq);
    if ((size_t)B * (size_t)T > (size_t)1 << 31)
        return DT_ERR(DT_ERR_INVALID, "batch B=%d x T=%d too large", B, T);
    const int ncls = io->num_classes;
    const size_t rows = (size_t)B * (size_t)T;
    if (labels)
        for (size_t i = 0; i < rows; i++)
            if (labels[i] < 0 || labels[i] >= ncls) {
                if (io->max_seq == 0)
                    return DT_ERR(DT_ERR_INVALID, "label %d of sample %zu not in [0,%d)",
                                  labels[i], i, ncls);
                return DT_ERR(DT_ERR_INVALID,
                              "target %d of sample %zu position %zu not in [0,%d) (vocab_size)",
                              labels[i], i / (size_t)T, i % (size_t)T, ncls);
            }
    if (io->x_dtype == DT_I32) {
        const int32_t *tok = x;
        for (size_t i = 0; i < rows; i++)
            if (tok[i] < 0 || tok[i] >= ncls)
                return DT_ERR(DT_ERR_INVALID,
                              "token %d of sample %zu position %zu not in [0,%d) (vocab_size)",
                              tok[i], i / (size_t)T, i % (size_t)T, ncls);
    }
    m->B = 0;
    m->T = 0;
    m->can_backward = 0;
    m->has_labels = labels != NULL;
    int rc = m->fam->forward(m, x, labels, B, T, train);
    if (rc) return rc;
    m->B = B;
    m->T = T;
    m->can_backward = train && labels;
    if (loss) {
        *loss = NAN;
        if (labels) return dt_model_loss(m, loss);
    }
    return DT_OK;
}

int dt_model_loss(const dt_model *m, float *loss) {
    if (!m || !loss) return DT_ERR(DT_ERR_INVALID, "NULL model or loss");
    if (!m->B || !m->has_labels)
        return DT_ERR(DT_ERR_STATE, "the last forward %s", m->B ? "had no labels" : "did not happen (or failed)");
    if (m->fam->loss) return m->fam->loss((dt_model *)m, loss);
    *loss = m->loss;
    return DT_OK;
}

int dt_model_row_stats(const dt_model *m, long rows, double *correct, double *loss_sum) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "NULL model");
    if (!m->B || !m->has_labels)
        return DT_ERR(DT_ERR_STATE, "the last forward %s", m->B ? "had no labels" : "did not happen (or failed)");
    const size_t all = (size_t)m->B * (size_t)m->T;
    if (rows < 0 || (size_t)rows > all)
        return DT_ERR(DT_ERR_INVALID, "rows %ld not in [0, %zu] (the last forward's predictions)", rows, all);
    double c = 0, s = 0;
    int rc = m->fam->row_stats((dt_model *)m, (size_t)rows, &c, &s);
    if (rc) return rc;
    if (correct) *correct = c;
    if (loss_sum) *loss_sum = s;
    return DT_OK;
}

int dt_model_forward(dt_model *m, const void *x, const int32_t *labels, int B, int train,
                     float *loss) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "NULL model or input");
    return dt_model_forward_seq(m, x, labels, B, dtm_seq_len(m), train, loss);
}

int dt_model_forward_len(const dt_model *m) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "NULL model");
    return dtm_seq_len(m);
}

int dt_model_backward_scaled(dt_model *m, float scale) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "NULL model");
    if (!m->can_backward)
        return DT_ERR(DT_ERR_STATE,
                      "no forward to back-propagate: call dt_model_forward with train=1 and "
                      "labels first (once per backward)");
    if (!isfinite(scale)) return DT_ERR(DT_ERR_INVALID, "scale %g is not finite", (double)scale);
    m->can_backward = 0;
    return m->fam->backward(m, scale);
}

int dt_model_backward(dt_model *m) { return dt_model_backward_scaled(m, 1.0f); }

void dt_model_zero_grad(dt_model *m) {
    if (!m) return;
    /* a device model's zeroing is enqueued in its stream; an error shows at
     * its next synchronising call */
    for (int l = 0; l < m->nlayers; l++)
        if (m->units[l].param_count) dtm_buf_zero(m, dtm_grads(m, l), m->units[l].param_count);
}

int dt_model_set_hooks(dt_model *m, const dt_model_hooks *hooks) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "NULL model");
    if (hooks) m->hooks = *hooks;
    else memset(&m->hooks, 0, sizeof m->hooks);
    return DT_OK;
}

int dt_model_seed_dropout(dt_model *m, uint64_t seed) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "NULL model");
    return m->fam->seed_dropout ? m->fam->seed_dropout(m, seed) : DT_OK;
}

/* ---- recomputation and generation ------------------------------------------- */

int dt_model_set_recompute(dt_model *m, int on) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "NULL model");
    if (on != 0 && on != 1) return DT_ERR(DT_ERR_INVALID, "recompute=%d must be 0 or 1", on);
    if (on && !m->fam->set_recompute)
        return DT_ERR(DT_ERR_INVALID,
                      "model %s (family %s) has no activation recomputation", m->name,
                      m->io.family);
    if (!m->fam->set_recompute) return DT_OK; /* off, and it cannot be on */
    m->B = 0;
    m->T = 0;
    m->can_backward = 0;
    int rc = m->fam->set_recompute(m, on);
    if (!rc) m->cfg.recompute = on;
    return rc;
}

int dt_model_recompute(const dt_model *m) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "NULL model");
    return m->cfg.recompute;
}

int dt_model_activation_bytes(const dt_model *m, int B, int T, int recompute, size_t *bytes) {
    if (!m || !bytes) return DT_ERR(DT_ERR_INVALID, "NULL model or bytes");
    if (B < 1) return DT_ERR(DT_ERR_INVALID, "batch size %d must be > 0", B);
    if (recompute != 0 && recompute != 1)
        return DT_ERR(DT_ERR_INVALID, "recompute=%d must be 0 or 1", recompute);
    if (recompute && !m->fam->set_recompute)
        return DT_ERR(DT_ERR_INVALID,
                      "model %s (family %s) has no activation recomputation", m->name,
                      m->io.family);
    int maxT = m->io.max_seq ? m->io.max_seq : 1;
    if (T == 0) T = dtm_seq_len(m);
    if (T < 1 || T > maxT)
        return DT_ERR(DT_ERR_INVALID, "sequence length T=%d not in [1, %d]", T, maxT);
    return m->fam->activation_bytes(m, B, T, recompute, bytes);
}

int dt_model_generate(dt_model *m, const int32_t *prompt, int prompt_len, int n_new,
                      float temperature, uint64_t seed, int32_t *out) {
    if (!m || !prompt || (!out && n_new > 0))
        return DT_ERR(DT_ERR_INVALID, "NULL model, prompt or out");
    if (!m->fam->generate)
        return DT_ERR(DT_ERR_UNSUPPORTED, "model %s (family %s) does not generate", m->name,
                      m->io.family);
    if (prompt_len < 1) return DT_ERR(DT_ERR_INVALID, "prompt length %d must be >= 1", prompt_len);
    if (n_new < 0) return DT_ERR(DT_ERR_INVALID, "token count %d must be >= 0", n_new);
    if (!(temperature >= 0.0f) || !isfinite(temperature))
        return DT_ERR(DT_ERR_INVALID, "temperature %g must be finite and >= 0",
                      (double)temperature);
    for (int i = 0; i < prompt_len; i++)
        if (prompt[i] < 0 || prompt[i] >= m->io.num_classes)
            return DT_ERR(DT_ERR_INVALID, "prompt token %d at position %d not in [0,%d)",
                          prompt[i], i, m->io.num_classes);
    return m->fam->generate(m, prompt, prompt_len, n_new, temperature, seed, out);
}

/* ---- redirection ---------------------------------------------------------------- */

static int redirect(dt_model *m, int layer, float *ptr, int grads, const char *fn) {
    if (!m) return dt_error(DT_ERR_INVALID, fn, "NULL model");
    if (layer < 0 || layer >= m->nlayers)
        return dt_error(DT_ERR_INVALID, fn, "layer %d out of range [0,%d)", layer, m->nlayers);
    dt_unit *U = &m->units[layer];
    if (ptr && !U->param_count)
        return dt_error(DT_ERR_INVALID, fn, "layer %d (%s) has no parameters", layer, U->name);
    if (grads) U->grad_ptr = ptr;
    else U->param_ptr = ptr, U->param16 = NULL; /* f32 parameters from now on */
    return DT_OK;
}

int dt_model_set_layer_params(dt_model *m, int layer, float *ptr) {
    return redirect(m, layer, ptr, 0, __func__);
}

int dt_model_set_layer_grads(dt_model *m, int layer, float *ptr) {
    return redirect(m, layer, ptr, 1, __func__);
}

int dt_model_set_layer_params16(dt_model *m, int layer, const uint16_t *ptr) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "NULL model");
    if (layer < 0 || layer >= m->nlayers) return DT_ERR(DT_ERR_INVALID, "layer %d out of range [0,%d)", layer, m->nlayers);
    if (!m->fam->layers_bf16 || m->cfg.precision != DT_PRECISION_BF16)
        return DT_ERR(DT_ERR_UNSUPPORTED, "layer %d (%s): this model does not compute in bf16", layer,
                      m->units[layer].name);
    if (ptr && !m->units[layer].param_count)
        return DT_ERR(DT_ERR_INVALID, "layer %d (%s) has no parameters", layer, m->units[layer].name);
    m->units[layer].param16 = ptr;
    return DT_OK;
}

int dt_model_layers_bf16(dt_model *m) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "NULL model");
    if (!m->fam->layers_bf16 || m->cfg.precision != DT_PRECISION_BF16)
        return DT_ERR(DT_ERR_UNSUPPORTED, "this model does not compute in bf16");
    return m->fam->layers_bf16(m);
}

float *dt_model_layer_param_ptr(dt_model *m, int layer) {
    if (!m || layer < 0 || layer >= m->nlayers) {
        DT_ERR(DT_ERR_INVALID, "bad model or layer %d", layer);
        return NULL;
    }
    return m->units[layer].param_count ? dtm_params(m, layer) : NULL;
}

float *dt_model_layer_grad_ptr(dt_model *m, int layer) {
    if (!m || layer < 0 || layer >= m->nlayers) {
        DT_ERR(DT_ERR_INVALID, "bad model or layer %d", layer);
        return NULL;
    }
    return m->units[layer].param_count ? dtm_grads(m, layer) : NULL;
}
