/* tests/fakegpu/twin_gpt.c - the CPU twins of src/nn/cuda's kernels
 * (fakegpu.h): for each kernel, what it computes from the launch's
 * arguments, after checking that every pointer is device memory of the
 * current device with room for what the kernel touches (else
 * cudaErrorIllegalAddress) and that the geometry covers the problem (else
 * cudaErrorInvalidConfiguration: a launcher bug that a GPU would show as
 * unwritten outputs).
 *
 * Arithmetic: a twin computes the kernel's operation with dtrain's CPU
 * kernels (gpt_kernels.c, gpt_internal.h's row helpers) wherever the
 * operation is the CPU's, so that on the fake the f32 CUDA backend gives the
 * CPU GPT's bits; it differs from the device kernel only in the order of its
 * f32 reductions and in the exp (dt_nn_expf vs CUDA's expf). Where the
 * kernel's own order is the CPU's (the embedding backward, the column sums,
 * the causal softmax's backward), the twin follows it. bf16 twins widen
 * their inputs to float, compute as the f32 twin does and round the outputs
 * to nearest even, as the kernels do. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dtrain/dtype.h"
#include "fakegpu.h"
#include "nn/gpt_internal.h"

/* ---- helpers ------------------------------------------------------------------------------- */

static cudaError_t geometry(const fk_launch *l, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "fakegpu: kernel %s: grid (%u,%u,%u) block (%u,%u,%u) does not cover the problem: ", l->name,
            l->grid.x, l->grid.y, l->grid.z, l->block.x, l->block.y, l->block.z);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return cudaErrorInvalidConfiguration;
}

/* a 1-D launch of whole warps (blockDim (32k, 1, 1), grid (g, 1, 1)) */
static int warps_1d(const fk_launch *l) {
    return l->block.x % 32 == 0 && l->block.y == 1 && l->block.z == 1 && l->grid.y == 1 && l->grid.z == 1;
}
static size_t warps(const fk_launch *l) { return (size_t)l->grid.x * (l->block.x / 32); }

static cudaError_t nomem(const fk_launch *l) {
    fprintf(stderr, "fakegpu: kernel %s: the twin is out of host memory\n", l->name);
    return cudaErrorMemoryAllocation;
}

static float get(const void *p, size_t es, size_t i) {
    return es == 4 ? ((const float *)p)[i] : dt_bf16_to_f32(((const uint16_t *)p)[i]);
}
static void put(void *p, size_t es, size_t i, float v) {
    if (es == 4)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = dt_f32_to_bf16(v);
}

/* p's n elements as floats: p itself for f32, else a widened copy (*tmp,
 * freed by the caller; NULL when out of memory) */
static float *as_f32(void *p, size_t es, size_t n, float **tmp) {
    *tmp = NULL;
    if (es == 4) return (float *)p;
    float *f = malloc((n ? n : 1) * sizeof *f);
    if (f)
        for (size_t i = 0; i < n; i++) f[i] = get(p, es, i);
    *tmp = f;
    return f;
}
/* f (from as_f32) back into p: rounded for bf16, nothing for f32 */
static void back(void *p, size_t es, const float *f, size_t n) {
    if (es == 4) return;
    for (size_t i = 0; i < n; i++) put(p, es, i, f[i]);
}

#define DEV(var, i, bytes)                                                   \
    void *var = fk_dev_arg(l, (i), (bytes));                                  \
    if (!var) return cudaErrorIllegalAddress

/* one twin per precision from a function of (launch, element size) */
#define BOTH(fn)                                                                 \
    static cudaError_t fn##_f32(const fk_launch *l) { return fn(l, 4); }        \
    static cudaError_t fn##_bf16(const fk_launch *l) { return fn(l, 2); }

/* ---- element-wise ------------------------------------------------------------------------------- */

/* dtk_gelu_fwd_*(out, inp, n): grid-stride */
static cudaError_t gelu_fwd(const fk_launch *l, size_t es) {
    const size_t n = fk_size_arg(l, 2);
    DEV(out, 0, n * es);
    DEV(inp, 1, n * es);
    float *t1, *x = as_f32(inp, es, n, &t1);
    if (!x) return nomem(l);
    gpt_gelu_forward(es == 4 ? (float *)out : x, x, n); /* in place allowed */
    back(out, es, x, n);
    free(t1);
    return cudaSuccess;
}
BOTH(gelu_fwd)

/* dtk_gelu_bwd_*(dinp, inp, dout, n): grid-stride */
static cudaError_t gelu_bwd(const fk_launch *l, size_t es) {
    const size_t n = fk_size_arg(l, 3);
    DEV(dinp, 0, n * es);
    DEV(inp, 1, n * es);
    DEV(dout, 2, n * es);
    float *t1, *t2, *x = as_f32(inp, es, n, &t1), *d = as_f32(dout, es, n, &t2);
    cudaError_t rc = cudaSuccess;
    if (!x || !d)
        rc = nomem(l);
    else {
        gpt_gelu_backward(es == 4 ? (float *)dinp : d, x, d, n); /* dinp may equal dout */
        back(dinp, es, d, n);
    }
    free(t1);
    free(t2);
    return rc;
}
BOTH(gelu_bwd)

/* dtk_cast_f32_bf16(dst, src, n): grid-stride (also src/optim's dtk_to_bf16,
 * the same arguments and rounding: fakegpu.h) */
cudaError_t fk_twin_cast_f32_bf16(const fk_launch *l) {
    const size_t n = fk_size_arg(l, 2);
    DEV(dst, 0, n * 2);
    DEV(src, 1, n * 4);
    for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = dt_f32_to_bf16(((const float *)src)[i]);
    return cudaSuccess;
}

/* ---- embeddings --------------------------------------------------------------------------------- */

/* dtk_encoder_fwd_*(out, tok, wte, wpe, B, T, C): grid-stride */
static cudaError_t encoder_fwd(const fk_launch *l, size_t es) {
    const int B = fk_int_arg(l, 4), T = fk_int_arg(l, 5), C = fk_int_arg(l, 6);
    const size_t N = (size_t)B * (size_t)T;
    DEV(tokv, 1, N * 4);
    const int32_t *tok = tokv;
    int32_t maxtok = 0;
    for (size_t n = 0; n < N; n++) {
        if (tok[n] < 0) {
            fprintf(stderr, "fakegpu: kernel %s: token %d at %zu\n", l->name, tok[n], n);
            return cudaErrorIllegalAddress;
        }
        maxtok = tok[n] > maxtok ? tok[n] : maxtok;
    }
    DEV(out, 0, N * (size_t)C * es);
    DEV(wte, 2, ((size_t)maxtok + 1) * (size_t)C * es);
    DEV(wpe, 3, (size_t)T * (size_t)C * es);
    if (es == 4) {
        gpt_encoder_forward(out, tok, wte, wpe, B, T, C);
        return cudaSuccess;
    }
    for (size_t n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            const size_t t = n % (size_t)T;
            put(out, es, n * (size_t)C + (size_t)c,
                get(wte, es, (size_t)tok[n] * (size_t)C + (size_t)c) + get(wpe, es, t * (size_t)C + (size_t)c));
        }
    return cudaSuccess;
}
BOTH(encoder_fwd)

/* dtk_encoder_bwd_wte_*(dwte, dout, idx, U, C): one block per distinct token;
 * idx = uniq[U], start[U+1], pos[start[U]] */
static cudaError_t encoder_bwd_wte(const fk_launch *l, size_t es) {
    const int U = fk_int_arg(l, 3), C = fk_int_arg(l, 4);
    if (l->grid.x < (unsigned)U) return geometry(l, "%d tokens, one block each", U);
    DEV(idxv, 2, (2 * (size_t)U + 1) * 4);
    const int32_t *uniq = idxv, *start = uniq + U;
    const size_t np = (size_t)start[U];
    DEV(idxall, 2, (2 * (size_t)U + 1 + np) * 4);
    const int32_t *pos = (const int32_t *)idxall + 2 * U + 1;
    int32_t maxtok = 0, maxpos = 0;
    for (int u = 0; u < U; u++) maxtok = uniq[u] > maxtok ? uniq[u] : maxtok;
    for (size_t p = 0; p < np; p++) maxpos = pos[p] > maxpos ? pos[p] : maxpos;
    DEV(dwte, 0, ((size_t)maxtok + 1) * (size_t)C * 4);
    DEV(dout, 1, ((size_t)maxpos + 1) * (size_t)C * es);
    for (int u = 0; u < U; u++) {
        float *d = (float *)dwte + (size_t)uniq[u] * (size_t)C;
        for (int c = 0; c < C; c++) {
            float x = d[c];
            for (int p = start[u]; p < start[u + 1]; p++) x += get(dout, es, (size_t)pos[p] * (size_t)C + (size_t)c);
            d[c] = x;
        }
    }
    return cudaSuccess;
}
BOTH(encoder_bwd_wte)

/* dtk_encoder_bwd_wpe_*(dwpe, dout, B, T, C): one block per position */
static cudaError_t encoder_bwd_wpe(const fk_launch *l, size_t es) {
    const int B = fk_int_arg(l, 2), T = fk_int_arg(l, 3), C = fk_int_arg(l, 4);
    if (l->grid.x < (unsigned)T) return geometry(l, "%d positions, one block each", T);
    DEV(dwpe, 0, (size_t)T * (size_t)C * 4);
    DEV(dout, 1, (size_t)B * (size_t)T * (size_t)C * es);
    for (int t = 0; t < T; t++) {
        float *d = (float *)dwpe + (size_t)t * (size_t)C;
        for (int c = 0; c < C; c++) {
            float x = d[c];
            for (int b = 0; b < B; b++) x += get(dout, es, ((size_t)b * (size_t)T + (size_t)t) * (size_t)C + (size_t)c);
            d[c] = x;
        }
    }
    return cudaSuccess;
}
BOTH(encoder_bwd_wpe)

/* ---- LayerNorm ------------------------------------------------------------------------------------ */

/* dtk_layernorm_fwd_*(out, mean, rstd, inp, weight, bias, N, C): a warp per row */
static cudaError_t layernorm_fwd(const fk_launch *l, size_t es) {
    const int N = fk_int_arg(l, 6), C = fk_int_arg(l, 7);
    if (!warps_1d(l) || warps(l) < (size_t)N) return geometry(l, "%d rows, a warp each", N);
    const size_t nc = (size_t)N * (size_t)C;
    DEV(out, 0, nc * es);
    DEV(mean, 1, (size_t)N * 4);
    DEV(rstd, 2, (size_t)N * 4);
    DEV(inp, 3, nc * es);
    DEV(w, 4, (size_t)C * es);
    DEV(b, 5, (size_t)C * es);
    float *t1, *t2, *t3, *t4 = NULL;
    float *x = as_f32(inp, es, nc, &t1), *wf = as_f32(w, es, (size_t)C, &t2), *bf = as_f32(b, es, (size_t)C, &t3);
    float *o = es == 4 ? (float *)out : (t4 = malloc((nc ? nc : 1) * sizeof(float)));
    cudaError_t rc = cudaSuccess;
    if (!x || !wf || !bf || !o)
        rc = nomem(l);
    else {
        gpt_layernorm_forward(o, mean, rstd, x, wf, bf, N, C);
        back(out, es, o, nc);
    }
    free(t1), free(t2), free(t3), free(t4);
    return rc;
}
BOTH(layernorm_fwd)

/* dtk_layernorm_bwd_*(dinp, dout, inp, weight, mean, rstd, N, C): a warp per
 * row; the input gradient only (gpt_layernorm_backward's, whose parameter
 * gradients go to a scratch here: dtk_lnparams_* computes those) */
static cudaError_t layernorm_bwd(const fk_launch *l, size_t es) {
    const int N = fk_int_arg(l, 6), C = fk_int_arg(l, 7);
    if (!warps_1d(l) || warps(l) < (size_t)N) return geometry(l, "%d rows, a warp each", N);
    const size_t nc = (size_t)N * (size_t)C;
    DEV(dinp, 0, nc * es);
    DEV(dout, 1, nc * es);
    DEV(inp, 2, nc * es);
    DEV(w, 3, (size_t)C * es);
    DEV(mean, 4, (size_t)N * 4);
    DEV(rstd, 5, (size_t)N * 4);
    float *t1, *t2, *t3, *t4;
    float *dx = as_f32(dinp, es, nc, &t1), *dy = as_f32(dout, es, nc, &t2), *x = as_f32(inp, es, nc, &t3);
    float *wf = as_f32(w, es, (size_t)C, &t4), *junk = calloc(2 * (size_t)(C ? C : 1), sizeof(float));
    cudaError_t rc = cudaSuccess;
    if (!dx || !dy || !x || !wf || !junk)
        rc = nomem(l);
    else {
        gpt_layernorm_backward(dx, junk, junk + C, dy, x, wf, mean, rstd, N, C);
        back(dinp, es, dx, nc);
    }
    free(t1), free(t2), free(t3), free(t4), free(junk);
    return rc;
}
BOTH(layernorm_bwd)

/* the column sums' geometry: blocks of 32 x 8, 32 columns per block in x,
 * row splits of rps rows in y; the partial sums' scratch and the counters */
static cudaError_t colsum_geometry(const fk_launch *l, int N, int OC, int rps, int parts, int ipart, int icount) {
    if (l->block.x != 32 || l->block.y != 8 || l->block.z != 1 || l->grid.z != 1 ||
        (size_t)l->grid.x * 32 < (size_t)OC || rps < 1 || (size_t)l->grid.y * (size_t)rps < (size_t)N)
        return geometry(l, "%d rows in splits of %d, %d columns; blocks of 32 x 8", N, rps, OC);
    if (l->grid.y > 1 && !fk_dev_arg(l, ipart, (size_t)l->grid.y * (size_t)OC * (size_t)parts * 4))
        return cudaErrorIllegalAddress;
    if (!fk_dev_arg(l, icount, (size_t)l->grid.x * 4)) return cudaErrorIllegalAddress;
    return cudaSuccess;
}

/* dtk_lnparams_*(dweight, dbias, part, count, dout, inp, mean, rstd, ld, N, C,
 * rps): gpt_layernorm_backward's parameter gradients, in its order */
static cudaError_t lnparams(const fk_launch *l, size_t es) {
    const int ld = fk_int_arg(l, 8), N = fk_int_arg(l, 9), C = fk_int_arg(l, 10), rps = fk_int_arg(l, 11);
    cudaError_t g = colsum_geometry(l, N, C, rps, 2, 2, 3);
    if (g != cudaSuccess) return g;
    const size_t span = N > 0 ? (size_t)(N - 1) * (size_t)ld + (size_t)C : 0;
    DEV(dw, 0, (size_t)C * 4);
    DEV(db, 1, (size_t)C * 4);
    DEV(dout, 4, span * es);
    DEV(inp, 5, span * es);
    DEV(meanv, 6, (size_t)N * 4);
    DEV(rstdv, 7, (size_t)N * 4);
    const float *mean = meanv, *rstd = rstdv;
    float *dweight = dw, *dbias = db;
    for (int n = 0; n < N; n++)
        for (int i = 0; i < C; i++) {
            const size_t at = (size_t)n * (size_t)ld + (size_t)i;
            const float dy = get(dout, es, at), nrm = (get(inp, es, at) - mean[n]) * rstd[n];
            dbias[i] += dy;
            dweight[i] += nrm * dy;
        }
    return cudaSuccess;
}
BOTH(lnparams)

/* dtk_colsum_*(out, part, count, x, ld, N, OC, rps): out[c] += x[n, c] over n
 * in order (gpt_matmul_backward's bias gradient) */
static cudaError_t colsum(const fk_launch *l, size_t es) {
    const int ld = fk_int_arg(l, 4), N = fk_int_arg(l, 5), OC = fk_int_arg(l, 6), rps = fk_int_arg(l, 7);
    cudaError_t g = colsum_geometry(l, N, OC, rps, 1, 1, 2);
    if (g != cudaSuccess) return g;
    const size_t span = N > 0 ? (size_t)(N - 1) * (size_t)ld + (size_t)OC : 0;
    DEV(outv, 0, (size_t)OC * 4);
    DEV(x, 3, span * es);
    float *out = outv;
    for (int n = 0; n < N; n++)
        for (int c = 0; c < OC; c++) out[c] += get(x, es, (size_t)n * (size_t)ld + (size_t)c);
    return cudaSuccess;
}
BOTH(colsum)

/* ---- attention ------------------------------------------------------------------------------------- */

/* dtk_att_split_*(q, k, v, src, B, T, C, NH, ld) and dtk_att_merge_*(dst, q,
 * k, v, B, T, C, NH, ld): rows [B*T, ld] <-> parts [B, NH, T, hs]; k, v may
 * be NULL; grid-stride over the rows */
static cudaError_t att_move(const fk_launch *l, size_t es, int split) {
    const int B = fk_int_arg(l, 4), T = fk_int_arg(l, 5), C = fk_int_arg(l, 6), NH = fk_int_arg(l, 7),
              ld = fk_int_arg(l, 8);
    const size_t rows = (size_t)B * (size_t)T, part = rows * (size_t)C;
    const int iq = split ? 0 : 1, irows = split ? 3 : 0;
    void *p[3] = {NULL, NULL, NULL};
    int np = 0;
    for (int k = 0; k < 3; k++) {
        if (k > 0 && fk_ptr_arg_is_null(l, iq + k)) break;
        if (!(p[k] = fk_dev_arg(l, iq + k, part * es))) return cudaErrorIllegalAddress;
        np = k + 1;
    }
    const size_t span = rows ? (rows - 1) * (size_t)ld + (size_t)np * (size_t)C : 0;
    DEV(r, irows, span * es);
    const int hs = C / NH;
    for (size_t n = 0; n < rows; n++) {
        const size_t b = n / (size_t)T, t = n % (size_t)T;
        for (int c = 0; c < C; c++) {
            const size_t h = (size_t)(c / hs), d = (size_t)(c % hs);
            const size_t at = ((b * (size_t)NH + h) * (size_t)T + t) * (size_t)hs + d;
            for (int k = 0; k < np; k++) {
                char *row = (char *)r + (n * (size_t)ld + (size_t)k * (size_t)C + (size_t)c) * es;
                char *x = (char *)p[k] + at * es;
                if (split)
                    memcpy(x, row, es);
                else
                    memcpy(row, x, es);
            }
        }
    }
    return cudaSuccess;
}
static cudaError_t att_split(const fk_launch *l, size_t es) { return att_move(l, es, 1); }
static cudaError_t att_merge(const fk_launch *l, size_t es) { return att_move(l, es, 0); }
BOTH(att_split)
BOTH(att_merge)

/* dtk_att_softmax_*(att, BNH, T, ldt): a warp per row; the CPU's causal
 * softmax of row t (gpt_attention.c: gpt_row_max, gpt_row_exp_sum, times
 * 1/sum), zeros in t+1..T-1 */
static cudaError_t att_softmax(const fk_launch *l, size_t es) {
    const int BNH = fk_int_arg(l, 1), T = fk_int_arg(l, 2), ldt = fk_int_arg(l, 3);
    const size_t rows = (size_t)BNH * (size_t)T;
    if (!warps_1d(l) || warps(l) < rows) return geometry(l, "%zu rows, a warp each", rows);
    DEV(att, 0, rows ? ((rows - 1) * (size_t)ldt + (size_t)T) * es : 0);
    float *tmp = malloc((size_t)(T ? T : 1) * sizeof(float));
    if (!tmp) return nomem(l);
    for (size_t r = 0; r < rows; r++) {
        const int t = (int)(r % (size_t)T);
        const size_t o = r * (size_t)ldt;
        float *row = es == 4 ? (float *)att + o : tmp;
        if (es != 4)
            for (int j = 0; j <= t; j++) row[j] = get(att, es, o + (size_t)j);
        float mx = gpt_row_max(row, t + 1);
        float s = gpt_row_exp_sum(row, row, t + 1, mx);
        float inv = 1.0f / s;
        for (int j = 0; j <= t; j++) row[j] *= inv;
        for (int j = t + 1; j < T; j++) row[j] = 0.0f;
        if (es != 4)
            for (int j = 0; j < T; j++) put(att, es, o + (size_t)j, row[j]);
    }
    free(tmp);
    return cudaSuccess;
}
BOTH(att_softmax)

/* dtk_att_softmax_bwd_*(datt, att, BNH, T, ldt): a warp per row; the CPU's
 * softmax backward (gpt_attention_backward's loop: 16-lane dot product) */
static cudaError_t att_softmax_bwd(const fk_launch *l, size_t es) {
    const int BNH = fk_int_arg(l, 2), T = fk_int_arg(l, 3), ldt = fk_int_arg(l, 4);
    const size_t rows = (size_t)BNH * (size_t)T;
    if (!warps_1d(l) || warps(l) < rows) return geometry(l, "%zu rows, a warp each", rows);
    const size_t span = rows ? ((rows - 1) * (size_t)ldt + (size_t)T) * es : 0;
    DEV(datt, 0, span);
    DEV(att, 1, span);
    float *tp = malloc(2 * (size_t)(T ? T : 1) * sizeof(float));
    if (!tp) return nomem(l);
    float *td = tp + T;
    for (size_t r = 0; r < rows; r++) {
        const int t = (int)(r % (size_t)T);
        const size_t o = r * (size_t)ldt;
        float *p = es == 4 ? (float *)att + o : tp, *d = es == 4 ? (float *)datt + o : td;
        if (es != 4)
            for (int j = 0; j <= t; j++) p[j] = get(att, es, o + (size_t)j), d[j] = get(datt, es, o + (size_t)j);
        float acc[GPT_LANES] = {0};
        int j = 0;
        for (; j + GPT_LANES <= t + 1; j += GPT_LANES)
            for (int kk = 0; kk < GPT_LANES; kk++) acc[kk] += p[j + kk] * d[j + kk];
        float sdot = 0.0f;
        for (; j <= t; j++) sdot += p[j] * d[j];
        for (int kk = 0; kk < GPT_LANES; kk++) sdot += acc[kk];
        for (j = 0; j <= t; j++) d[j] = p[j] * (d[j] - sdot);
        for (j = t + 1; j < T; j++) d[j] = 0.0f;
        if (es != 4)
            for (j = 0; j < T; j++) put(datt, es, o + (size_t)j, d[j]);
    }
    free(tp);
    return cudaSuccess;
}
BOTH(att_softmax_bwd)

/* dtk_att_step_*(out, scratch, q, kc, vc, n, C, NH): a block per head;
 * gpt_attention_step (its scratch: the first n floats of the kernel's) */
static cudaError_t att_step(const fk_launch *l, size_t es) {
    const int n = fk_int_arg(l, 5), C = fk_int_arg(l, 6), NH = fk_int_arg(l, 7);
    if (l->grid.x < (unsigned)NH || !warps_1d(l) || l->block.x > 128)
        return geometry(l, "%d heads, a block each of whole warps, at most 128 threads (its shared arrays)", NH);
    DEV(out, 0, (size_t)C * es);
    DEV(scratch, 1, (size_t)NH * (size_t)n * 4);
    DEV(q, 2, (size_t)C * es);
    DEV(kc, 3, (size_t)n * (size_t)C * es);
    DEV(vc, 4, (size_t)n * (size_t)C * es);
    float *t1, *t2, *t3, *t4 = NULL;
    float *qf = as_f32(q, es, (size_t)C, &t1), *kf = as_f32(kc, es, (size_t)n * (size_t)C, &t2);
    float *vf = as_f32(vc, es, (size_t)n * (size_t)C, &t3);
    float *o = es == 4 ? (float *)out : (t4 = malloc((size_t)(C ? C : 1) * sizeof(float)));
    cudaError_t rc = cudaSuccess;
    if (!qf || !kf || !vf || !o)
        rc = nomem(l);
    else {
        gpt_attention_step(o, scratch, qf, kf, vf, n, C, NH);
        back(out, es, o, (size_t)C);
    }
    free(t1), free(t2), free(t3), free(t4);
    return rc;
}
BOTH(att_step)

/* ---- cross-entropy ------------------------------------------------------------------------------------ */

/* the classifier's blocks: at most 512 threads, whole warps (its shared
 * arrays); grid-stride over the rows */
static int ce_block_ok(const fk_launch *l) { return warps_1d(l) && l->block.x <= 512; }

/* dtk_crossentropy_fwd_*(lse, tlogit, hit, logits, targets, N, V, ldl):
 * gpt_crossentropy_forward (lse; with targets the target's logit and
 * whether the row's first maximum is the target), row by row */
static cudaError_t ce_fwd(const fk_launch *l, size_t es) {
    const int N = fk_int_arg(l, 5), V = fk_int_arg(l, 6), ldl = fk_int_arg(l, 7);
    if (!ce_block_ok(l)) return geometry(l, "blocks of whole warps, at most 512 threads");
    DEV(lsev, 0, (size_t)N * 4);
    DEV(logits, 3, N > 0 ? ((size_t)(N - 1) * (size_t)ldl + (size_t)V) * es : 0);
    const int with_t = !fk_ptr_arg_is_null(l, 4);
    const int32_t *tg = NULL;
    float *tlogit = NULL;
    int32_t *hit = NULL;
    if (with_t) {
        if (!(tg = fk_dev_arg(l, 4, (size_t)N * 4))) return cudaErrorIllegalAddress;
        if (!fk_ptr_arg_is_null(l, 1) && !(tlogit = fk_dev_arg(l, 1, (size_t)N * 4))) return cudaErrorIllegalAddress;
        if (!fk_ptr_arg_is_null(l, 2) && !(hit = fk_dev_arg(l, 2, (size_t)N * 4))) return cudaErrorIllegalAddress;
        for (int n = 0; n < N; n++)
            if (tg[n] < 0 || tg[n] >= V) {
                fprintf(stderr, "fakegpu: kernel %s: target %d of row %d outside [0, %d)\n", l->name, tg[n], n, V);
                return cudaErrorIllegalAddress;
            }
    }
    float *tmp = es == 4 ? NULL : malloc((size_t)(V ? V : 1) * sizeof(float));
    if (es != 4 && !tmp) return nomem(l);
    float *lse = lsev;
    for (int n = 0; n < N; n++) {
        const size_t o = (size_t)n * (size_t)ldl;
        const float *x = es == 4 ? (const float *)logits + o : tmp;
        if (es != 4)
            for (int i = 0; i < V; i++) tmp[i] = get(logits, es, o + (size_t)i);
        float tl = 0.0f;
        int32_t h = 0;
        gpt_crossentropy_forward(&lse[n], &tl, &h, x, with_t ? &tg[n] : NULL, 1, V, V);
        if (tlogit) tlogit[n] = tl;
        if (hit) hit[n] = h;
    }
    free(tmp);
    return cudaSuccess;
}
BOTH(ce_fwd)

/* dtk_crossentropy_bwd_*(dlogits, logits, lse, targets, N, V, ldl, dscale):
 * gpt_crossentropy_backward (in place allowed) */
static cudaError_t ce_bwd(const fk_launch *l, size_t es) {
    const int N = fk_int_arg(l, 4), V = fk_int_arg(l, 5), ldl = fk_int_arg(l, 6);
    const float dscale = fk_float_arg(l, 7);
    if (!ce_block_ok(l)) return geometry(l, "blocks of whole warps, at most 512 threads");
    const size_t span = N > 0 ? ((size_t)(N - 1) * (size_t)ldl + (size_t)V) * es : 0;
    DEV(dlogits, 0, span);
    DEV(logits, 1, span);
    DEV(lsev, 2, (size_t)N * 4);
    DEV(tgv, 3, (size_t)N * 4);
    const float *lse = lsev;
    const int32_t *tg = tgv;
    for (int n = 0; n < N; n++)
        if (tg[n] < 0 || tg[n] >= V) {
            fprintf(stderr, "fakegpu: kernel %s: target %d of row %d outside [0, %d)\n", l->name, tg[n], n, V);
            return cudaErrorIllegalAddress;
        }
    if (es == 4) {
        gpt_crossentropy_backward(dlogits, logits, lse, tg, N, V, ldl, dscale);
        return cudaSuccess;
    }
    float *tmp = malloc((size_t)(V ? V : 1) * sizeof(float));
    if (!tmp) return nomem(l);
    for (int n = 0; n < N; n++) {
        const size_t o = (size_t)n * (size_t)ldl;
        for (int i = 0; i < V; i++) tmp[i] = get(logits, es, o + (size_t)i);
        gpt_crossentropy_backward(tmp, tmp, &lse[n], &tg[n], 1, V, V, dscale);
        for (int i = 0; i < V; i++) put(dlogits, es, o + (size_t)i, tmp[i]);
    }
    free(tmp);
    return cudaSuccess;
}
BOTH(ce_bwd)

/* ---- the table ------------------------------------------------------------------------------------------ */

#define PAIR(kernel, twin) {#kernel "_f32", twin##_f32}, {#kernel "_bf16", twin##_bf16}

const fk_twin fk_twins_gpt[] = {
    PAIR(dtk_gelu_fwd, gelu_fwd),
    PAIR(dtk_gelu_bwd, gelu_bwd),
    {"dtk_cast_f32_bf16", fk_twin_cast_f32_bf16},
    PAIR(dtk_encoder_fwd, encoder_fwd),
    PAIR(dtk_encoder_bwd_wte, encoder_bwd_wte),
    PAIR(dtk_encoder_bwd_wpe, encoder_bwd_wpe),
    PAIR(dtk_layernorm_fwd, layernorm_fwd),
    PAIR(dtk_layernorm_bwd, layernorm_bwd),
    PAIR(dtk_lnparams, lnparams),
    PAIR(dtk_colsum, colsum),
    PAIR(dtk_att_split, att_split),
    PAIR(dtk_att_merge, att_merge),
    PAIR(dtk_att_softmax, att_softmax),
    PAIR(dtk_att_softmax_bwd, att_softmax_bwd),
    PAIR(dtk_att_step, att_step),
    PAIR(dtk_crossentropy_fwd, ce_fwd),
    PAIR(dtk_crossentropy_bwd, ce_bwd),
    {NULL, NULL},
};
