/* src/nn/conv2d.c - 2-D convolution (cross-correlation) by im2col + GEMM.
 *
 * One sample at a time: col [K = C*KH*KW, N = OH*OW] is built from the
 * sample, then out_b [OC,N] = weight [OC,K] @ col. Backward reuses the same
 * workspace: first im2col for dweight += dout_b @ col^T, then
 * dcol = weight^T @ dout_b, scattered back by col2im. */
#include <cblas.h>
#include <limits.h>
#include <string.h>
#include "dtrain/nn.h"
#include "core/error.h"
#include "nn/nn_internal.h"

static int desc_check(const char *fn, const dt_conv2d_desc *d, int *OH, int *OW) {
    if (!d) return dt_error(DT_ERR_INVALID, fn, "NULL conv2d descriptor");
    if (d->C <= 0 || d->H <= 0 || d->W <= 0 || d->OC <= 0 || d->KH <= 0 || d->KW <= 0)
        return dt_error(DT_ERR_INVALID, fn,
                        "conv2d sizes C=%d H=%d W=%d OC=%d KH=%d KW=%d must be > 0", d->C,
                        d->H, d->W, d->OC, d->KH, d->KW);
    if (d->stride_h <= 0 || d->stride_w <= 0 || d->pad_h < 0 || d->pad_w < 0)
        return dt_error(DT_ERR_INVALID, fn,
                        "conv2d stride (%d,%d) must be >= 1 and padding (%d,%d) >= 0",
                        d->stride_h, d->stride_w, d->pad_h, d->pad_w);
    if (d->H > INT_MAX / 4 || d->W > INT_MAX / 4 || d->pad_h > INT_MAX / 4 ||
        d->pad_w > INT_MAX / 4)
        return dt_error(DT_ERR_INVALID, fn, "conv2d sizes too large");
    int hp = d->H + 2 * d->pad_h, wp = d->W + 2 * d->pad_w;
    if (hp < d->KH || wp < d->KW)
        return dt_error(DT_ERR_INVALID, fn,
                        "conv2d kernel %dx%d larger than padded input %dx%d", d->KH, d->KW,
                        hp, wp);
    int oh = (hp - d->KH) / d->stride_h + 1, ow = (wp - d->KW) / d->stride_w + 1;
    /* GEMM dimensions must fit in int */
    if ((int64_t)d->C * d->KH * d->KW > INT_MAX || (int64_t)oh * ow > INT_MAX ||
        (int64_t)d->OC * oh * ow > INT_MAX)
        return dt_error(DT_ERR_INVALID, fn, "conv2d GEMM dimensions exceed int range");
    if (OH) *OH = oh;
    if (OW) *OW = ow;
    return DT_OK;
}

int dt_conv2d_out_hw(const dt_conv2d_desc *d, int *OH, int *OW) {
    return desc_check(__func__, d, OH, OW);
}

size_t dt_conv2d_workspace_size(const dt_conv2d_desc *d) {
    int oh = 0, ow = 0;
    if (desc_check(__func__, d, &oh, &ow)) return 0;
    return (size_t)d->C * (size_t)d->KH * (size_t)d->KW * (size_t)oh * (size_t)ow;
}

/* True when col == the sample itself (1x1 kernel, stride 1, no padding). */
static int is_pointwise(const dt_conv2d_desc *d) {
    return d->KH == 1 && d->KW == 1 && d->stride_h == 1 && d->stride_w == 1 &&
           d->pad_h == 0 && d->pad_w == 0;
}

/* Valid output range [lo, hi) along one axis for kernel offset k: the
 * outputs o with 0 <= o*s - p + k < n. */
static void valid_range(int n, int s, int p, int k, int on, int *lo, int *hi) {
    int a = p - k; /* need o*s >= a */
    int l = a <= 0 ? 0 : (a + s - 1) / s;
    int b = n + p - k; /* need o*s < b  <=> o <= (b-1)/s */
    int h = b <= 0 ? 0 : (b - 1) / s + 1;
    if (h > on) h = on;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* col [C*KH*KW, OH*OW] from one sample x [C,H,W]. */
static void im2col(float *col, const float *x, const dt_conv2d_desc *d, int OH, int OW) {
    const int H = d->H, W = d->W, sh = d->stride_h, sw = d->stride_w;
    const int ph = d->pad_h, pw = d->pad_w;
    const size_t N = (size_t)OH * (size_t)OW;
    for (int c = 0; c < d->C; c++) {
        const float *xc = x + (size_t)c * (size_t)H * (size_t)W;
        for (int kh = 0; kh < d->KH; kh++) {
            int oh_lo, oh_hi;
            valid_range(H, sh, ph, kh, OH, &oh_lo, &oh_hi);
            for (int kw = 0; kw < d->KW; kw++) {
                int ow_lo, ow_hi;
                valid_range(W, sw, pw, kw, OW, &ow_lo, &ow_hi);
                float *row = col + (((size_t)c * (size_t)d->KH + (size_t)kh) * (size_t)d->KW +
                                    (size_t)kw) * N;
                if (oh_lo > 0) memset(row, 0, (size_t)oh_lo * (size_t)OW * sizeof(float));
                for (int oh = oh_lo; oh < oh_hi; oh++) {
                    float *r = row + (size_t)oh * (size_t)OW;
                    const float *xr = xc + (size_t)(oh * sh - ph + kh) * (size_t)W;
                    for (int ow = 0; ow < ow_lo; ow++) r[ow] = 0.0f;
                    if (sw == 1) {
                        int iw0 = ow_lo - pw + kw;
                        if (ow_hi > ow_lo)
                            memcpy(r + ow_lo, xr + iw0, (size_t)(ow_hi - ow_lo) * sizeof(float));
                    } else {
                        for (int ow = ow_lo; ow < ow_hi; ow++) r[ow] = xr[ow * sw - pw + kw];
                    }
                    for (int ow = ow_hi; ow < OW; ow++) r[ow] = 0.0f;
                }
                if (oh_hi < OH)
                    memset(row + (size_t)oh_hi * (size_t)OW, 0,
                           (size_t)(OH - oh_hi) * (size_t)OW * sizeof(float));
            }
        }
    }
}

/* dx [C,H,W] += scatter of dcol [C*KH*KW, OH*OW]. */
static void col2im_add(float *dx, const float *dcol, const dt_conv2d_desc *d, int OH, int OW) {
    const int H = d->H, W = d->W, sh = d->stride_h, sw = d->stride_w;
    const int ph = d->pad_h, pw = d->pad_w;
    const size_t N = (size_t)OH * (size_t)OW;
    for (int c = 0; c < d->C; c++) {
        float *xc = dx + (size_t)c * (size_t)H * (size_t)W;
        for (int kh = 0; kh < d->KH; kh++) {
            int oh_lo, oh_hi;
            valid_range(H, sh, ph, kh, OH, &oh_lo, &oh_hi);
            for (int kw = 0; kw < d->KW; kw++) {
                int ow_lo, ow_hi;
                valid_range(W, sw, pw, kw, OW, &ow_lo, &ow_hi);
                const float *row = dcol + (((size_t)c * (size_t)d->KH + (size_t)kh) *
                                               (size_t)d->KW + (size_t)kw) * N;
                for (int oh = oh_lo; oh < oh_hi; oh++) {
                    const float *r = row + (size_t)oh * (size_t)OW;
                    float *xr = xc + (size_t)(oh * sh - ph + kh) * (size_t)W;
                    if (sw == 1) {
                        float *xo = xr + (ow_lo - pw + kw);
                        for (int ow = ow_lo; ow < ow_hi; ow++) xo[ow - ow_lo] += r[ow];
                    } else {
                        for (int ow = ow_lo; ow < ow_hi; ow++) xr[ow * sw - pw + kw] += r[ow];
                    }
                }
            }
        }
    }
}

int dt_conv2d_forward(float *out, float *work, const float *inp, const float *weight,
                      const float *bias, int B, const dt_conv2d_desc *d) {
    int OH = 0, OW = 0;
    int rc = desc_check(__func__, d, &OH, &OW);
    if (rc) return rc;
    if (!out || !inp || !weight) return DT_ERR(DT_ERR_INVALID, "NULL out, inp or weight");
    if (B <= 0) return DT_ERR(DT_ERR_INVALID, "batch size %d must be > 0", B);
    int pointwise = is_pointwise(d);
    if (!work && !pointwise) return DT_ERR(DT_ERR_INVALID, "NULL workspace");
    dt_nn_blas_init();
    const int K = d->C * d->KH * d->KW, N = OH * OW;
    const size_t in_sz = (size_t)d->C * (size_t)d->H * (size_t)d->W;
    const size_t out_sz = (size_t)d->OC * (size_t)N;
    for (int b = 0; b < B; b++) {
        const float *xb = inp + (size_t)b * in_sz;
        float *ob = out + (size_t)b * out_sz;
        const float *col = xb;
        if (!pointwise) {
            im2col(work, xb, d, OH, OW);
            col = work;
        }
        float beta = 0.0f;
        if (bias) {
            for (int o = 0; o < d->OC; o++) {
                float *r = ob + (size_t)o * (size_t)N;
                for (int i = 0; i < N; i++) r[i] = bias[o];
            }
            beta = 1.0f;
        }
        /* out_b[OC,N] (+)= weight[OC,K] @ col[K,N] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d->OC, N, K, 1.0f, weight, K,
                    col, N, beta, ob, N);
    }
    return DT_OK;
}

int dt_conv2d_backward(float *dinp, float *dweight, float *dbias, float *work,
                       const float *dout, const float *inp, const float *weight, int B,
                       const dt_conv2d_desc *d) {
    return dt_nn_conv2d_backward_ex(dinp, dweight, dbias, work, dout, inp, weight, B, d, 1);
}

int dt_nn_conv2d_backward_ex(float *dinp, float *dweight, float *dbias, float *work,
                             const float *dout, const float *inp, const float *weight, int B,
                             const dt_conv2d_desc *d, int acc) {
    int OH = 0, OW = 0;
    int rc = desc_check(__func__, d, &OH, &OW);
    if (rc) return rc;
    if (!dout) return DT_ERR(DT_ERR_INVALID, "NULL dout");
    if (B <= 0) return DT_ERR(DT_ERR_INVALID, "batch size %d must be > 0", B);
    if (dinp && !weight) return DT_ERR(DT_ERR_INVALID, "dinp requested but weight is NULL");
    if (dweight && !inp) return DT_ERR(DT_ERR_INVALID, "dweight requested but inp is NULL");
    int pointwise = is_pointwise(d);
    if (!work && !pointwise && (dinp || dweight))
        return DT_ERR(DT_ERR_INVALID, "NULL workspace");
    dt_nn_blas_init();
    const int K = d->C * d->KH * d->KW, N = OH * OW;
    const size_t in_sz = (size_t)d->C * (size_t)d->H * (size_t)d->W;
    const size_t out_sz = (size_t)d->OC * (size_t)N;
    for (int b = 0; b < B; b++) {
        const float *gb = dout + (size_t)b * out_sz;
        if (dbias)
            for (int o = 0; o < d->OC; o++) {
                const float *r = gb + (size_t)o * (size_t)N;
                float s = 0.0f;
                for (int i = 0; i < N; i++) s += r[i];
                dbias[o] += s;
            }
        if (dweight) {
            const float *col = inp + (size_t)b * in_sz;
            if (!pointwise) {
                im2col(work, col, d, OH, OW);
                col = work;
            }
            /* dweight[OC,K] += dout_b[OC,N] @ col[K,N]^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d->OC, K, N, 1.0f, gb, N,
                        col, N, 1.0f, dweight, K);
        }
        if (dinp) {
            float *db = dinp + (size_t)b * in_sz;
            if (pointwise) {
                /* dinp_b[C,N] (+)= weight^T[K=C,OC] @ dout_b[OC,N] */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, N, d->OC, 1.0f, weight,
                            K, gb, N, acc ? 1.0f : 0.0f, db, N);
            } else {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, N, d->OC, 1.0f, weight,
                            K, gb, N, 0.0f, work, N);
                if (!acc) memset(db, 0, in_sz * sizeof(float));
                col2im_add(db, work, d, OH, OW);
            }
        }
    }
    return DT_OK;
}
