/* src/nn/loss.c - log-softmax, negative log-likelihood and their fusion,
 * cross-entropy (mean over the batch). */
#include <math.h>
#include "dtrain/nn.h"
#include "core/error.h"

static int dims_check(const char *fn, int B, int V) {
    if (B <= 0 || V <= 0)
        return dt_error(DT_ERR_INVALID, fn, "dimensions B=%d V=%d must be > 0", B, V);
    return DT_OK;
}

static int labels_check(const char *fn, const int32_t *labels, int B, int V) {
    for (int b = 0; b < B; b++)
        if (labels[b] < 0 || labels[b] >= V)
            return dt_error(DT_ERR_INVALID, fn, "label %d of row %d not in [0,%d)", labels[b],
                            b, V);
    return DT_OK;
}

int dt_log_softmax_forward(float *out, const float *inp, int B, int V) {
    int rc = dims_check(__func__, B, V);
    if (rc) return rc;
    if (!out || !inp) return DT_ERR(DT_ERR_INVALID, "NULL out or inp");
    for (int b = 0; b < B; b++) {
        const float *x = inp + (size_t)b * (size_t)V;
        float *y = out + (size_t)b * (size_t)V;
        float m = x[0];
        for (int v = 1; v < V; v++) m = x[v] > m ? x[v] : m;
        double s = 0.0;
        for (int v = 0; v < V; v++) s += exp((double)x[v] - (double)m);
        float lse = (float)((double)m + log(s));
        for (int v = 0; v < V; v++) y[v] = x[v] - lse;
    }
    return DT_OK;
}

int dt_log_softmax_backward(float *dinp, const float *dout, const float *out, int B, int V) {
    int rc = dims_check(__func__, B, V);
    if (rc) return rc;
    if (!dinp || !dout || !out) return DT_ERR(DT_ERR_INVALID, "NULL dinp, dout or out");
    for (int b = 0; b < B; b++) {
        const float *g = dout + (size_t)b * (size_t)V, *y = out + (size_t)b * (size_t)V;
        float *dx = dinp + (size_t)b * (size_t)V;
        double s = 0.0;
        for (int v = 0; v < V; v++) s += (double)g[v];
        for (int v = 0; v < V; v++) dx[v] += g[v] - expf(y[v]) * (float)s;
    }
    return DT_OK;
}

int dt_nll_loss_forward(float *loss, const float *logp, const int32_t *labels, int B, int V) {
    int rc = dims_check(__func__, B, V);
    if (rc) return rc;
    if (!loss || !logp || !labels) return DT_ERR(DT_ERR_INVALID, "NULL loss, logp or labels");
    rc = labels_check(__func__, labels, B, V);
    if (rc) return rc;
    double s = 0.0;
    for (int b = 0; b < B; b++) s -= (double)logp[(size_t)b * (size_t)V + (size_t)labels[b]];
    *loss = (float)(s / (double)B);
    return DT_OK;
}

int dt_nll_loss_backward(float *dlogp, const int32_t *labels, int B, int V, float dloss) {
    int rc = dims_check(__func__, B, V);
    if (rc) return rc;
    if (!dlogp || !labels) return DT_ERR(DT_ERR_INVALID, "NULL dlogp or labels");
    rc = labels_check(__func__, labels, B, V);
    if (rc) return rc;
    const float g = -dloss / (float)B;
    for (int b = 0; b < B; b++) dlogp[(size_t)b * (size_t)V + (size_t)labels[b]] += g;
    return DT_OK;
}

int dt_cross_entropy_forward(float *loss, float *logp, const float *logits,
                             const int32_t *labels, int B, int V) {
    int rc = dims_check(__func__, B, V);
    if (rc) return rc;
    if (!loss || !logp || !logits || !labels)
        return DT_ERR(DT_ERR_INVALID, "NULL loss, logp, logits or labels");
    rc = labels_check(__func__, labels, B, V);
    if (rc) return rc;
    dt_log_softmax_forward(logp, logits, B, V);
    return dt_nll_loss_forward(loss, logp, labels, B, V);
}

int dt_cross_entropy_backward(float *dlogits, const float *logp, const int32_t *labels,
                              int B, int V, float dloss) {
    int rc = dims_check(__func__, B, V);
    if (rc) return rc;
    if (!dlogits || !logp || !labels)
        return DT_ERR(DT_ERR_INVALID, "NULL dlogits, logp or labels");
    rc = labels_check(__func__, labels, B, V);
    if (rc) return rc;
    const float g = dloss / (float)B;
    for (int b = 0; b < B; b++) {
        const float *y = logp + (size_t)b * (size_t)V;
        float *dx = dlogits + (size_t)b * (size_t)V;
        for (int v = 0; v < V; v++)
            dx[v] += g * (expf(y[v]) - (v == labels[b] ? 1.0f : 0.0f));
    }
    return DT_OK;
}
