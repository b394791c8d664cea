/* src/nn/model_release.c - releasing the model's flat buffers (ZeRO 2/3). */
#include <stdlib.h>
#include "core/error.h"
#include "nn/model_internal.h"

int dt_model_release_flat(dt_model *m, int params, int grads) {
    if (!m) return DT_ERR(DT_ERR_INVALID, "model is NULL");
    if (params) { free(m->params); m->params = NULL; }
    if (grads) { free(m->grads); m->grads = NULL; }
    return DT_OK;
}
