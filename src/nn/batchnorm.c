/* src/nn/batchnorm.c - batch normalisation over [B,C,S] (BatchNorm1d/2d).
 *
 * Statistics are accumulated in double, with a two-pass variance, like
 * PyTorch's CPU kernel; the normalisation itself is y = x*alpha + beta with
 * alpha = weight*rstd and beta = bias - mean*alpha per channel. */
#include <math.h>
#include <string.h>
#include "dtrain/nn.h"
#include "core/error.h"
#include "nn/nn_internal.h"

static int dims_check(const char *fn, int B, int C, int S) {
    if (B <= 0 || C <= 0 || S <= 0)
        return dt_error(DT_ERR_INVALID, fn, "dimensions B=%d C=%d S=%d must be > 0", B, C, S);
    return DT_OK;
}

/* Sum over the B planes of channel c. */
static double chan_sum(const float *x, int B, int C, int S, int c) {
    double s = 0.0;
    for (int b = 0; b < B; b++)
        s += dt_nn_sum_f64(x + ((size_t)b * (size_t)C + (size_t)c) * (size_t)S, (size_t)S);
    return s;
}

static double chan_sumsq(const float *x, int B, int C, int S, int c, double mean) {
    double s = 0.0;
    for (int b = 0; b < B; b++)
        s += dt_nn_sumsq_centered_f64(x + ((size_t)b * (size_t)C + (size_t)c) * (size_t)S,
                                      (size_t)S, mean);
    return s;
}

static int call_sync(dt_sum_fn sync, void *ctx, float *buf, size_t n) {
    int rc = sync(ctx, buf, n);
    if (rc < 0) return rc;
    if (rc > 0)
        return DT_ERR(DT_ERR_STATE, "batch norm statistics callback returned %d", rc);
    return DT_OK;
}

int dt_batchnorm_forward(float *out, float *save_mean, float *save_rstd, const float *inp,
                         const float *weight, const float *bias, float *running_mean,
                         float *running_var, float *work, int B, int C, int S, int train,
                         float momentum, float eps, dt_sum_fn sync, void *sync_ctx) {
    int rc = dims_check(__func__, B, C, S);
    if (rc) return rc;
    if (!out || !save_mean || !save_rstd || !inp)
        return DT_ERR(DT_ERR_INVALID, "NULL out, save_mean, save_rstd or inp");
    if (!(eps >= 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f))
        return DT_ERR(DT_ERR_INVALID, "eps %g must be >= 0 and momentum %g in [0,1]",
                      (double)eps, (double)momentum);
    if ((running_mean == NULL) != (running_var == NULL))
        return DT_ERR(DT_ERR_INVALID, "running_mean and running_var must both be given or both NULL");
    if (!train && !running_mean)
        return DT_ERR(DT_ERR_INVALID, "eval mode needs running_mean and running_var");
    if (train && sync && !work)
        return DT_ERR(DT_ERR_INVALID, "synchronised batch norm needs a workspace");
    const size_t plane = (size_t)S;
    if (train) {
        double count = (double)B * (double)S;
        if (!sync) {
            if (count <= 1.0)
                return DT_ERR(DT_ERR_INVALID,
                              "expected more than 1 value per channel in training (B=%d S=%d)",
                              B, S);
            for (int c = 0; c < C; c++) {
                double mean = chan_sum(inp, B, C, S, c) / count;
                double var = chan_sumsq(inp, B, C, S, c, mean) / count;
                save_mean[c] = (float)mean;
                save_rstd[c] = (float)(1.0 / sqrt(var + (double)eps));
                if (running_mean) {
                    double m = (double)momentum;
                    running_mean[c] = (float)((1.0 - m) * running_mean[c] + m * mean);
                    running_var[c] =
                        (float)((1.0 - m) * running_var[c] + m * var * count / (count - 1.0));
                }
            }
        } else {
            /* round 1: [sum x per channel, count] */
            for (int c = 0; c < C; c++) work[c] = (float)chan_sum(inp, B, C, S, c);
            work[C] = (float)count;
            rc = call_sync(sync, sync_ctx, work, (size_t)C + 1);
            if (rc) return rc;
            double total = (double)work[C];
            if (!(total > 1.0))
                return DT_ERR(DT_ERR_INVALID,
                              "expected more than 1 value per channel in training (total %g)",
                              total);
            for (int c = 0; c < C; c++) save_mean[c] = (float)((double)work[c] / total);
            /* round 2: [sum (x - mean)^2 per channel] */
            for (int c = 0; c < C; c++)
                work[c] = (float)chan_sumsq(inp, B, C, S, c, (double)save_mean[c]);
            rc = call_sync(sync, sync_ctx, work, (size_t)C);
            if (rc) return rc;
            for (int c = 0; c < C; c++) {
                double var = (double)work[c] / total;
                save_rstd[c] = (float)(1.0 / sqrt(var + (double)eps));
                if (running_mean) {
                    double m = (double)momentum;
                    running_mean[c] =
                        (float)((1.0 - m) * running_mean[c] + m * (double)save_mean[c]);
                    running_var[c] =
                        (float)((1.0 - m) * running_var[c] + m * var * total / (total - 1.0));
                }
            }
        }
    } else {
        for (int c = 0; c < C; c++) {
            save_mean[c] = running_mean[c];
            save_rstd[c] = (float)(1.0 / sqrt((double)running_var[c] + (double)eps));
        }
    }
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            float alpha = save_rstd[c] * (weight ? weight[c] : 1.0f);
            float beta = (bias ? bias[c] : 0.0f) - save_mean[c] * alpha;
            size_t off = ((size_t)b * (size_t)C + (size_t)c) * plane;
            const float *x = inp + off;
            float *y = out + off;
            for (size_t i = 0; i < plane; i++) y[i] = x[i] * alpha + beta;
        }
    return DT_OK;
}

int dt_batchnorm_backward(float *dinp, float *dweight, float *dbias, float *work,
                          const float *dout, const float *inp, const float *weight,
                          const float *save_mean, const float *save_rstd, int B, int C,
                          int S, int train, dt_sum_fn sync, void *sync_ctx) {
    return dt_nn_batchnorm_backward_ex(dinp, dweight, dbias, work, dout, inp, weight,
                                       save_mean, save_rstd, B, C, S, train, sync, sync_ctx, 1);
}

int dt_nn_batchnorm_backward_ex(float *dinp, float *dweight, float *dbias, float *work,
                                const float *dout, const float *inp, const float *weight,
                                const float *save_mean, const float *save_rstd, int B, int C,
                                int S, int train, dt_sum_fn sync, void *sync_ctx, int acc) {
    int rc = dims_check(__func__, B, C, S);
    if (rc) return rc;
    if (!dout || !inp || !save_mean || !save_rstd || !work)
        return DT_ERR(DT_ERR_INVALID, "NULL dout, inp, save_mean, save_rstd or work");
    const size_t plane = (size_t)S;
    /* work[c] = sum dy, work[C+c] = sum dy*xhat, work[2C] = count */
    for (int c = 0; c < C; c++) {
        double sdy = 0.0, sdyx = 0.0;
        double mean = (double)save_mean[c];
        for (int b = 0; b < B; b++) {
            size_t off = ((size_t)b * (size_t)C + (size_t)c) * plane;
            double s1, s2;
            dt_nn_sum_and_dot_centered_f64(dout + off, inp + off, plane, mean, &s1, &s2);
            sdy += s1;
            sdyx += s2;
        }
        sdyx *= (double)save_rstd[c];
        if (dbias) dbias[c] += (float)sdy;
        if (dweight) dweight[c] += (float)sdyx;
        work[c] = (float)sdy;
        work[C + c] = (float)sdyx;
    }
    if (!dinp) return DT_OK;
    double total = (double)B * (double)S;
    if (train && sync) {
        work[2 * C] = (float)total;
        rc = call_sync(sync, sync_ctx, work, 2 * (size_t)C + 1);
        if (rc) return rc;
        total = (double)work[2 * C];
        if (!(total > 0.0))
            return DT_ERR(DT_ERR_INVALID, "synchronised count %g must be > 0", total);
    }
    for (int c = 0; c < C; c++) {
        float rstd = save_rstd[c], mean = save_mean[c];
        float k = rstd * (weight ? weight[c] : 1.0f);
        float mdy = train ? (float)((double)work[c] / total) : 0.0f;
        float mdyx = train ? (float)((double)work[C + c] / total) : 0.0f;
        for (int b = 0; b < B; b++) {
            size_t off = ((size_t)b * (size_t)C + (size_t)c) * plane;
            const float *x = inp + off, *g = dout + off;
            float *dx = dinp + off;
            if (acc)
                for (size_t i = 0; i < plane; i++) {
                    float xhat = (x[i] - mean) * rstd;
                    dx[i] += k * (g[i] - mdy - xhat * mdyx);
                }
            else
                for (size_t i = 0; i < plane; i++) {
                    float xhat = (x[i] - mean) * rstd;
                    dx[i] = k * (g[i] - mdy - xhat * mdyx);
                }
        }
    }
    return DT_OK;
}
