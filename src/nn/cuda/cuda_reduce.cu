/* src/nn/cuda/cuda_reduce.cu - deterministic column sums over the rows of
 * an activation matrix, added into f32 parameter gradients: the bias
 * gradient of a linear layer (dtk_colsum_*: dbias[c] += sum_n dout[n,c])
 * and LayerNorm's weight and bias gradients (dtk_lnparams_*: dweight[c] +=
 * sum_n dout[n,c] (inp[n,c] - mean[n]) rstd[n], dbias[c] += sum_n
 * dout[n,c]).
 *
 * Geometry: blocks of 32 x 8 threads; blockIdx.x picks 32 columns (one per
 * lane), blockIdx.y one of S row splits of `rps` rows (S and rps depend
 * only on N and the column count, never on the device). In a block, warp y
 * sums rows y, y+8, ... of the split in order; the 8 warps' sums are added
 * in order; with S > 1 the splits' sums go to the instance's scratch and
 * the block that arrives last at its column tile (an integer atomic
 * counter, reset by that block) adds the S sums in split order to the
 * gradient. Every addition happens in a fixed order: the same bits run to
 * run. No float atomics. */
#include "nn/cuda/cuda_common.cuh"

#define CS_COLS 32
#define CS_WARPS 8
/* rows per split: at least this many (fewer splits for small N), at most
 * CS_MAX_SPLITS splits */
#define CS_MIN_ROWS 256
#define CS_MAX_SPLITS 64

template <typename T, bool LN>
__device__ void colsum(float *out0, float *out1, float *part, unsigned *count, const T *x, const T *inp,
                       const float *mean, const float *rstd, int ld, int N, int OC, int rps) {
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int col = blockIdx.x * CS_COLS + tx;
    const int S = gridDim.y, split = blockIdx.y;
    const int r0 = split * rps, r1 = min(N, r0 + rps);
    float a0 = 0.0f, a1 = 0.0f;
    if (col < OC)
        for (int r = r0 + ty; r < r1; r += CS_WARPS) {
            const size_t at = (size_t)r * (size_t)ld + (size_t)col;
            const float dy = ldf(x[at]);
            if (LN) {
                const float nrm = (ldf(inp[at]) - mean[r]) * rstd[r];
                a0 += nrm * dy;
                a1 += dy;
            } else {
                a0 += dy;
            }
        }
    __shared__ float sh[2][CS_WARPS][CS_COLS];
    __shared__ int last;
    sh[0][ty][tx] = a0;
    sh[1][ty][tx] = a1;
    __syncthreads();
    float s0 = 0.0f, s1 = 0.0f;
    if (ty == 0)
        for (int w = 0; w < CS_WARPS; w++) {
            s0 += sh[0][w][tx];
            s1 += sh[1][w][tx];
        }
    if (S == 1) {
        if (ty == 0 && col < OC) {
            out0[col] += s0;
            if (LN) out1[col] += s1;
        }
        return;
    }
    if (ty == 0 && col < OC) {
        part[(size_t)split * OC + col] = s0;
        if (LN) part[(size_t)(S + split) * OC + col] = s1;
    }
    __threadfence();
    __syncthreads();
    if (tx == 0 && ty == 0) last = atomicAdd(&count[blockIdx.x], 1u) == (unsigned)(S - 1);
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (ty == 0 && col < OC) {
        float t0 = 0.0f, t1 = 0.0f;
        for (int s = 0; s < S; s++) {
            t0 += __ldcg(&part[(size_t)s * OC + col]);
            if (LN) t1 += __ldcg(&part[(size_t)(S + s) * OC + col]);
        }
        out0[col] += t0;
        if (LN) out1[col] += t1;
    }
    if (tx == 0 && ty == 0) count[blockIdx.x] = 0;
}

/* out[c] += sum over n < N of x[n*ld + c], c < OC */
extern "C" __global__ void __launch_bounds__(CS_COLS *CS_WARPS)
    dtk_colsum_f32(float *out, float *part, unsigned *count, const float *x, int ld, int N, int OC, int rps) {
    colsum<float, false>(out, NULL, part, count, x, NULL, NULL, NULL, ld, N, OC, rps);
}
extern "C" __global__ void __launch_bounds__(CS_COLS *CS_WARPS)
    dtk_colsum_bf16(float *out, float *part, unsigned *count, const bf16 *x, int ld, int N, int OC, int rps) {
    colsum<bf16, false>(out, NULL, part, count, x, NULL, NULL, NULL, ld, N, OC, rps);
}
/* dweight[c] += sum dout (inp - mean) rstd, dbias[c] += sum dout, c < C;
 * dout and inp [N, C] with row stride ld */
extern "C" __global__ void __launch_bounds__(CS_COLS *CS_WARPS)
    dtk_lnparams_f32(float *dweight, float *dbias, float *part, unsigned *count, const float *dout,
                     const float *inp, const float *mean, const float *rstd, int ld, int N, int C, int rps) {
    colsum<float, true>(dweight, dbias, part, count, dout, inp, mean, rstd, ld, N, C, rps);
}
extern "C" __global__ void __launch_bounds__(CS_COLS *CS_WARPS)
    dtk_lnparams_bf16(float *dweight, float *dbias, float *part, unsigned *count, const bf16 *dout,
                      const bf16 *inp, const float *mean, const float *rstd, int ld, int N, int C, int rps) {
    colsum<bf16, true>(dweight, dbias, part, count, dout, inp, mean, rstd, ld, N, C, rps);
}

/* ---- launcher ------------------------------------------------------------------------------------ */

int gpt_cuda_colsum(gpt_be *be, float *out0, float *out1, const void *x, int ld, const void *inp,
                               const float *mean, const float *rstd, int N, int OC) {
    if (N <= 0 || OC <= 0) return DT_OK;
    const int ln = inp != NULL;
    const size_t es = gpt_cuda_es(be);
    /* column tiles in chunks of at most red_count_n tiles (one counter each) */
    const int max_cols = be->red_count_n * CS_COLS;
    for (int c0 = 0; c0 < OC; c0 += max_cols) {
        const int oc = OC - c0 < max_cols ? OC - c0 : max_cols;
        int S = (N + CS_MIN_ROWS - 1) / CS_MIN_ROWS;
        if (S > CS_MAX_SPLITS) S = CS_MAX_SPLITS;
        const size_t per_split = (size_t)oc * (ln ? 2 : 1);
        if ((size_t)S * per_split > be->red_floats) S = (int)(be->red_floats / per_split);
        if (S < 1) S = 1;
        const int rps = (N + S - 1) / S;
        S = (N + rps - 1) / rps;
        const dim3 grid((unsigned)((oc + CS_COLS - 1) / CS_COLS), (unsigned)S), block(CS_COLS, CS_WARPS);
        const char *xc = (const char *)x + (size_t)c0 * es;
        int rc;
        if (ln && be->prec == GPT_BF16)
            rc = GPT_LAUNCH(dtk_lnparams_bf16, grid, block, 0, be->stream, out0 + c0, out1 + c0, be->red,
                            be->red_count, (const bf16 *)xc, (const bf16 *)((const char *)inp + (size_t)c0 * es),
                            mean, rstd, ld, N, oc, rps);
        else if (ln)
            rc = GPT_LAUNCH(dtk_lnparams_f32, grid, block, 0, be->stream, out0 + c0, out1 + c0, be->red,
                            be->red_count, (const float *)xc, (const float *)((const char *)inp + (size_t)c0 * es),
                            mean, rstd, ld, N, oc, rps);
        else if (be->prec == GPT_BF16)
            rc = GPT_LAUNCH(dtk_colsum_bf16, grid, block, 0, be->stream, out0 + c0, be->red, be->red_count,
                            (const bf16 *)xc, ld, N, oc, rps);
        else
            rc = GPT_LAUNCH(dtk_colsum_f32, grid, block, 0, be->stream, out0 + c0, be->red, be->red_count,
                            (const float *)xc, ld, N, oc, rps);
        if (rc) return rc;
    }
    return DT_OK;
}
