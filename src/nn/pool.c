/* src/nn/pool.c - 2-D average and max pooling (no padding, floor mode). */
#include <limits.h>
#include <string.h>
#include "dtrain/nn.h"
#include "core/error.h"
#include "nn/nn_internal.h"

static int desc_check(const char *fn, const dt_pool2d_desc *d, int *OH, int *OW) {
    if (!d) return dt_error(DT_ERR_INVALID, fn, "NULL pool2d descriptor");
    if (d->C <= 0 || d->H <= 0 || d->W <= 0 || d->KH <= 0 || d->KW <= 0 ||
        d->stride_h <= 0 || d->stride_w <= 0)
        return dt_error(DT_ERR_INVALID, fn,
                        "pool2d sizes C=%d H=%d W=%d KH=%d KW=%d stride=(%d,%d) must be > 0",
                        d->C, d->H, d->W, d->KH, d->KW, d->stride_h, d->stride_w);
    if (d->KH > d->H || d->KW > d->W)
        return dt_error(DT_ERR_INVALID, fn, "pool2d window %dx%d larger than input %dx%d",
                        d->KH, d->KW, d->H, d->W);
    if ((int64_t)d->H * d->W > INT_MAX)
        return dt_error(DT_ERR_INVALID, fn, "pool2d plane %dx%d too large", d->H, d->W);
    if (OH) *OH = (d->H - d->KH) / d->stride_h + 1;
    if (OW) *OW = (d->W - d->KW) / d->stride_w + 1;
    return DT_OK;
}

int dt_pool2d_out_hw(const dt_pool2d_desc *d, int *OH, int *OW) {
    return desc_check(__func__, d, OH, OW);
}

int dt_avgpool2d_forward(float *out, const float *inp, int B, const dt_pool2d_desc *d) {
    int OH = 0, OW = 0;
    int rc = desc_check(__func__, d, &OH, &OW);
    if (rc) return rc;
    if (!out || !inp) return DT_ERR(DT_ERR_INVALID, "NULL out or inp");
    if (B <= 0) return DT_ERR(DT_ERR_INVALID, "batch size %d must be > 0", B);
    const size_t planes = (size_t)B * (size_t)d->C;
    const size_t in_plane = (size_t)d->H * (size_t)d->W, out_plane = (size_t)OH * (size_t)OW;
    const float scale = 1.0f / (float)(d->KH * d->KW);
    for (size_t p = 0; p < planes; p++) {
        const float *x = inp + p * in_plane;
        float *y = out + p * out_plane;
        if (d->KH == 2 && d->KW == 2 && d->stride_h == 2 && d->stride_w == 2) {
            for (int oh = 0; oh < OH; oh++) {
                const float *r0 = x + (size_t)(2 * oh) * (size_t)d->W, *r1 = r0 + d->W;
                float *yr = y + (size_t)oh * (size_t)OW;
                for (int ow = 0; ow < OW; ow++)
                    yr[ow] = ((r0[2 * ow] + r0[2 * ow + 1]) + (r1[2 * ow] + r1[2 * ow + 1])) *
                             scale;
            }
            continue;
        }
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                float s = 0.0f;
                for (int kh = 0; kh < d->KH; kh++) {
                    const float *r =
                        x + (size_t)(oh * d->stride_h + kh) * (size_t)d->W + (size_t)ow * (size_t)d->stride_w;
                    for (int kw = 0; kw < d->KW; kw++) s += r[kw];
                }
                y[(size_t)oh * (size_t)OW + (size_t)ow] = s * scale;
            }
    }
    return DT_OK;
}

int dt_avgpool2d_backward(float *dinp, const float *dout, int B, const dt_pool2d_desc *d) {
    return dt_nn_avgpool2d_backward_ex(dinp, dout, B, d, 1);
}

int dt_nn_avgpool2d_backward_ex(float *dinp, const float *dout, int B, const dt_pool2d_desc *d,
                                int acc) {
    int OH = 0, OW = 0;
    int rc = desc_check(__func__, d, &OH, &OW);
    if (rc) return rc;
    if (!dinp || !dout) return DT_ERR(DT_ERR_INVALID, "NULL dinp or dout");
    if (B <= 0) return DT_ERR(DT_ERR_INVALID, "batch size %d must be > 0", B);
    const size_t planes = (size_t)B * (size_t)d->C;
    const size_t in_plane = (size_t)d->H * (size_t)d->W, out_plane = (size_t)OH * (size_t)OW;
    const float scale = 1.0f / (float)(d->KH * d->KW);
    const int fast = d->KH == 2 && d->KW == 2 && d->stride_h == 2 && d->stride_w == 2;
    /* overwrite mode: windows may overlap or leave gaps, so zero first; the
     * 2x2/2 fast path writes every covered element exactly once and only
     * zeroes the uncovered odd last row/column */
    if (!acc && !fast) memset(dinp, 0, planes * in_plane * sizeof(float));
    for (size_t p = 0; p < planes; p++) {
        float *dx = dinp + p * in_plane;
        const float *dy = dout + p * out_plane;
        if (fast) {
            if (!acc && (d->H != 2 * OH || d->W != 2 * OW)) memset(dx, 0, in_plane * sizeof(float));
            for (int oh = 0; oh < OH; oh++) {
                float *r0 = dx + (size_t)(2 * oh) * (size_t)d->W, *r1 = r0 + d->W;
                const float *g = dy + (size_t)oh * (size_t)OW;
                if (acc)
                    for (int ow = 0; ow < OW; ow++) {
                        float v = g[ow] * scale;
                        r0[2 * ow] += v;
                        r0[2 * ow + 1] += v;
                        r1[2 * ow] += v;
                        r1[2 * ow + 1] += v;
                    }
                else
                    for (int ow = 0; ow < OW; ow++) {
                        float v = g[ow] * scale;
                        r0[2 * ow] = v;
                        r0[2 * ow + 1] = v;
                        r1[2 * ow] = v;
                        r1[2 * ow + 1] = v;
                    }
            }
            continue;
        }
        for (int oh = 0; oh < OH; oh++)
            for (int kh = 0; kh < d->KH; kh++) {
                float *r = dx + (size_t)(oh * d->stride_h + kh) * (size_t)d->W;
                const float *g = dy + (size_t)oh * (size_t)OW;
                for (int ow = 0; ow < OW; ow++) {
                    float v = g[ow] * scale;
                    float *rw = r + (size_t)ow * (size_t)d->stride_w;
                    for (int kw = 0; kw < d->KW; kw++) rw[kw] += v;
                }
            }
    }
    return DT_OK;
}

int dt_maxpool2d_forward(float *out, int32_t *argmax, const float *inp, int B,
                         const dt_pool2d_desc *d) {
    int OH = 0, OW = 0;
    int rc = desc_check(__func__, d, &OH, &OW);
    if (rc) return rc;
    if (!out || !argmax || !inp) return DT_ERR(DT_ERR_INVALID, "NULL out, argmax or inp");
    if (B <= 0) return DT_ERR(DT_ERR_INVALID, "batch size %d must be > 0", B);
    const size_t planes = (size_t)B * (size_t)d->C;
    const size_t in_plane = (size_t)d->H * (size_t)d->W, out_plane = (size_t)OH * (size_t)OW;
    const int fast = d->KH == 2 && d->KW == 2 && d->stride_h == 2 && d->stride_w == 2;
    for (size_t p = 0; p < planes; p++) {
        const float *x = inp + p * in_plane;
        float *y = out + p * out_plane;
        int32_t *am = argmax + p * out_plane;
        if (fast) {
            /* the same candidates in the same order as the generic loop */
            for (int oh = 0; oh < OH; oh++) {
                const int32_t i0 = 2 * oh * d->W;
                const float *r0 = x + i0, *r1 = r0 + d->W;
                float *yr = y + (size_t)oh * (size_t)OW;
                int32_t *ar = am + (size_t)oh * (size_t)OW;
                for (int ow = 0; ow < OW; ow++) {
                    float v0 = r0[2 * ow], v1 = r0[2 * ow + 1], v2 = r1[2 * ow], v3 = r1[2 * ow + 1];
                    float m = v0;
                    int32_t best = i0 + 2 * ow;
                    if (v0 == v0 && v1 == v1 && v2 == v2 && v3 == v3) {
                        /* no NaN (the predictable case): selects without branches */
                        int32_t j1 = i0 + 2 * ow + 1, j2 = i0 + d->W + 2 * ow, j3 = j2 + 1;
                        best = v1 > m ? j1 : best;
                        m = v1 > m ? v1 : m;
                        best = v2 > m ? j2 : best;
                        m = v2 > m ? v2 : m;
                        best = v3 > m ? j3 : best;
                        m = v3 > m ? v3 : m;
                    } else {
                        /* the first NaN wins */
                        float v[4] = {v0, v1, v2, v3};
                        int32_t j[4] = {i0 + 2 * ow, i0 + 2 * ow + 1, i0 + d->W + 2 * ow,
                                        i0 + d->W + 2 * ow + 1};
                        for (int q = 0; q < 4; q++)
                            if (v[q] != v[q]) {
                                m = v[q];
                                best = j[q];
                                break;
                            }
                    }
                    yr[ow] = m;
                    ar[ow] = best;
                }
            }
            continue;
        }
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                int h0 = oh * d->stride_h, w0 = ow * d->stride_w;
                int32_t best = h0 * d->W + w0;
                float m = x[best];
                for (int kh = 0; kh < d->KH; kh++)
                    for (int kw = 0; kw < d->KW; kw++) {
                        int32_t idx = (h0 + kh) * d->W + (w0 + kw);
                        float v = x[idx];
                        if (v > m || (v != v && m == m)) {
                            m = v;
                            best = idx;
                        }
                    }
                y[(size_t)oh * (size_t)OW + (size_t)ow] = m;
                am[(size_t)oh * (size_t)OW + (size_t)ow] = best;
            }
    }
    return DT_OK;
}

int dt_maxpool2d_backward(float *dinp, const float *dout, const int32_t *argmax, int B,
                          const dt_pool2d_desc *d) {
    return dt_nn_maxpool2d_backward_ex(dinp, dout, argmax, B, d, 1);
}

int dt_nn_maxpool2d_backward_ex(float *dinp, const float *dout, const int32_t *argmax, int B,
                                const dt_pool2d_desc *d, int acc) {
    int OH = 0, OW = 0;
    int rc = desc_check(__func__, d, &OH, &OW);
    if (rc) return rc;
    if (!dinp || !dout || !argmax) return DT_ERR(DT_ERR_INVALID, "NULL dinp, dout or argmax");
    if (B <= 0) return DT_ERR(DT_ERR_INVALID, "batch size %d must be > 0", B);
    const size_t planes = (size_t)B * (size_t)d->C;
    const size_t in_plane = (size_t)d->H * (size_t)d->W, out_plane = (size_t)OH * (size_t)OW;
    const int32_t limit = (int32_t)in_plane;
    if (!acc) memset(dinp, 0, planes * in_plane * sizeof(float));
    for (size_t p = 0; p < planes; p++) {
        float *dx = dinp + p * in_plane;
        const float *dy = dout + p * out_plane;
        const int32_t *am = argmax + p * out_plane;
        for (size_t i = 0; i < out_plane; i++) {
            int32_t idx = am[i];
            if (idx < 0 || idx >= limit)
                return DT_ERR(DT_ERR_INVALID, "argmax %d out of range [0,%d)", idx, limit);
            dx[idx] += dy[i];
        }
    }
    return DT_OK;
}
