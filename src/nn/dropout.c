/* src/nn/dropout.c - inverted dropout with an explicit, seeded mask. */
#include "dtrain/nn.h"
#include "core/error.h"
#include "nn/nn_internal.h"

int dt_dropout_mask(float *mask, size_t n, float p, dt_rng *rng) {
    if (!mask || !rng) return DT_ERR(DT_ERR_INVALID, "NULL mask or rng");
    if (!(p >= 0.0f && p <= 1.0f))
        return DT_ERR(DT_ERR_INVALID, "dropout probability %g not in [0,1]", (double)p);
    if (p == 1.0f) {
        for (size_t i = 0; i < n; i++) mask[i] = 0.0f;
        return DT_OK;
    }
    const float scale = 1.0f / (1.0f - p);
    for (size_t i = 0; i < n; i++) mask[i] = dt_rng_uniform(rng) < p ? 0.0f : scale;
    return DT_OK;
}

int dt_dropout_forward(float *out, const float *inp, const float *mask, size_t n) {
    if (!out || !inp || !mask) return DT_ERR(DT_ERR_INVALID, "NULL out, inp or mask");
    for (size_t i = 0; i < n; i++) out[i] = inp[i] * mask[i];
    return DT_OK;
}

int dt_nn_dropout_backward_ex(float *dinp, const float *dout, const float *mask, size_t n,
                              int acc) {
    if (!dinp || !dout || !mask) return DT_ERR(DT_ERR_INVALID, "NULL dinp, dout or mask");
    if (acc)
        for (size_t i = 0; i < n; i++) dinp[i] += dout[i] * mask[i];
    else
        for (size_t i = 0; i < n; i++) dinp[i] = dout[i] * mask[i];
    return DT_OK;
}

int dt_dropout_backward(float *dinp, const float *dout, const float *mask, size_t n) {
    return dt_nn_dropout_backward_ex(dinp, dout, mask, n, 1);
}
