/* src/nn/flatten.c - flatten [B,C,H,W] -> [B,C*H*W]: a reshape (copy). */
#include <string.h>
#include "dtrain/nn.h"
#include "core/error.h"
#include "nn/nn_internal.h"

int dt_flatten_forward(float *out, const float *inp, size_t n) {
    if (!out || !inp) return DT_ERR(DT_ERR_INVALID, "NULL out or inp");
    if (out != inp) memmove(out, inp, n * sizeof(float));
    return DT_OK;
}

int dt_nn_identity_backward_ex(float *dinp, const float *dout, size_t n, int acc) {
    if (!dinp || !dout) return DT_ERR(DT_ERR_INVALID, "NULL dinp or dout");
    if (dinp == dout) return DT_ERR(DT_ERR_INVALID, "dinp must not equal dout");
    if (acc)
        for (size_t i = 0; i < n; i++) dinp[i] += dout[i];
    else
        memcpy(dinp, dout, n * sizeof(float));
    return DT_OK;
}

int dt_flatten_backward(float *dinp, const float *dout, size_t n) {
    return dt_nn_identity_backward_ex(dinp, dout, n, 1);
}
