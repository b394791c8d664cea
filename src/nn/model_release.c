/* src/nn/model_release.c - where the model's flat buffers live: released
 * for ZeRO stages 2/3, replaced by the compute-precision copy (ZeRO's
 * mixed precision at stages 1/2), or gradients moved into caller memory. */
#include "core/error.h"
#include "nn/model_internal.h"

int dt_model_release_flat(dt_model *m, int params, int grads) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "model is NULL");
    const int had = m->params != NULL;
    if (params) { dtm_buf_free(m, m->params); m->params = NULL; }
    if (grads) {
        if (!m->grads_external) dtm_buf_free(m, m->grads);
        m->grads = NULL;
        m->grads_external = 0;
    }
    /* a family's copy in another precision may go layer by layer now */
    return params && had && m->fam->params_released ? m->fam->params_released(m) : DT_OK;
}

uint16_t *dt_model_compute_copy(const dt_model *m) {
    return m && m->fam->compute_copy ? m->fam->compute_copy(m) : NULL;
}

int dt_model_params_from_copy(dt_model *m) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "model is NULL");
    if (!m->fam->params_from_copy || !dt_model_compute_copy(m))
        return DT_ERR(DT_ERR_UNSUPPORTED, "this model keeps no copy of all its parameters in another precision to "
                      "compute from (an f32 model, or one whose copy goes layer by layer)");
    int rc = m->fam->params_from_copy(m);
    if (rc) return rc;
    dtm_buf_free(m, m->params);
    m->params = NULL;
    return DT_OK;
}

int dt_model_use_grad_buffer(dt_model *m, float *grads) {
    if (!m || !grads) return DT_ERR(DT_ERR_INVALID, "%s is NULL", m ? "grads" : "model");
    if (grads == m->grads) return DT_OK;
    int rc = m->grads ? dtm_buf_copy(m, grads, m->grads, m->nparams) : dtm_buf_zero(m, grads, m->nparams);
    if (rc) return rc;
    if (!m->grads_external) dtm_buf_free(m, m->grads);
    m->grads = grads;
    m->grads_external = 1;
    return DT_OK;
}
