/* src/nn/model_release.c - where the model's flat buffers live: released
 * for ZeRO stages 2/3, or gradients moved into caller memory. */
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "nn/model_internal.h"

int dt_model_release_flat(dt_model *m, int params, int grads) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "model is NULL");
    if (params) { free(m->params); m->params = NULL; }
    if (grads) {
        if (!m->grads_external) free(m->grads);
        m->grads = NULL;
        m->grads_external = 0;
    }
    return DT_OK;
}

int dt_model_use_grad_buffer(dt_model *m, float *grads) {
    if (!m || !grads) return DT_ERR(DT_ERR_INVALID, "%s is NULL", m ? "grads" : "model");
    if (grads == m->grads) return DT_OK;
    if (m->grads) memcpy(grads, m->grads, m->nparams * sizeof(float));
    else memset(grads, 0, m->nparams * sizeof(float));
    if (!m->grads_external) free(m->grads);
    m->grads = grads;
    m->grads_external = 1;
    return DT_OK;
}
