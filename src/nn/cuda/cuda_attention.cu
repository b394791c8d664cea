/* src/nn/cuda/cuda_attention.cu - causal multi-head self-attention through
 * batched cuBLASLt products and a softmax kernel (llm.c's non-flash path),
 * and the one-query step of generation.
 *
 * Layout. saved [B*NH, T, Tp] (act): the attention probabilities, row t
 * valid in columns 0..t and 0 in t+1..T-1 (the padding columns T..Tp-1,
 * Tp = T rounded up to 8 so that every row is 16-byte aligned, are never
 * touched). scratch: four slices of [B, NH, T, hs] (act, each rounded up
 * to 256 bytes), then (backward) one [B*NH, T, Tp] matrix:
 *   forward   q, k, v (split from qkv), y;
 *   backward  q, k, v, dy (split from dout), datt; dv then replaces v,
 *             dq dy and dk k as they stop being read.
 * Forward:  split -> saved = scale k^T q (per head: scale q k^T, the
 *           causal softmax's input) -> softmax in place -> y = att v ->
 *           merge y into out.
 * Backward: split qkv and dout -> datt = dy v^T -> dv = att^T dy ->
 *           softmax backward in place (datt becomes dpreatt) -> dq = scale
 *           dpreatt k, dk = scale dpreatt^T q -> merge dq, dk, dv into dqkv.
 * The products run over whole T x T matrices (the zeros above the diagonal
 * included), batched over B*NH (BATCH_COUNT, STRIDED_BATCH_OFFSET).
 *
 * Kernels and geometry:
 *   dtk_att_split_*    q/k/v[B,NH,T,hs] = the parts of src[B*T rows, ld];
 *                      one block per row (grid-stride), threads over C
 *   dtk_att_merge_*    the inverse: dst rows [B*T, ld] from the parts
 *   dtk_att_softmax_*  in place, one warp per row, 8 rows per block,
 *                      online softmax (gpt_math.h) in f32
 *   dtk_att_softmax_bwd_*  in place, one warp per row, 8 rows per block
 *   dtk_att_step_*     one block per head (128 threads): scores into the
 *                      f32 scratch [NH, n], softmax, out = p v */
#include <string.h>
#include "nn/cuda/cuda_common.cuh"

#define ATT_THREADS 256
#define ATT_WARPS 8
#define STEP_THREADS 128

static inline int att_tp(int T) { return (T + 7) / 8 * 8; }

extern "C" void gpt_cuda_attention_sizes(int B, int T, int C, int NH, gpt_prec prec, size_t *saved,
                                         size_t *scratch) {
    const size_t es = prec == GPT_BF16 ? 2 : 4;
    const size_t att = gpt_cuda_align256((size_t)B * (size_t)NH * (size_t)T * (size_t)att_tp(T) * es);
    const size_t slice = gpt_cuda_align256((size_t)B * (size_t)T * (size_t)C * es);
    const size_t bwd = 4 * slice + att, step = gpt_cuda_align256((size_t)NH * (size_t)T * sizeof(float));
    *saved = att;
    *scratch = bwd > step ? bwd : step;
}

/* ---- split and merge ----------------------------------------------------------------------- */

/* part p of row r of src (columns [p*C, (p+1)*C) of a row of stride ld) <->
 * row t of head h of batch b in the part's [B, NH, T, hs]; k and v may be
 * NULL (one part) */
template <typename T, bool SPLIT>
__device__ void att_move(T *rows, T *q, T *k, T *v, int B, int T_, int C, int NH, int ld) {
    constexpr int P = pack16<T>::n;
    const int hs = C / NH, nrows = B * T_;
    const bool vec = hs % P == 0 && ld % P == 0 && aligned16(rows) && aligned16(q) && (!k || aligned16(k)) &&
                     (!v || aligned16(v));
    const int w = vec ? P : 1;
    for (int r = blockIdx.x; r < nrows; r += gridDim.x) {
        const int b = r / T_, t = r - b * T_;
        T *src = rows + (size_t)r * (size_t)ld;
        for (int c = threadIdx.x * w; c < C; c += blockDim.x * w) {
            const int h = c / hs, d = c - h * hs;
            const size_t at = (((size_t)b * NH + h) * (size_t)T_ + t) * (size_t)hs + d;
            T *parts[3] = {q, k, v};
#pragma unroll
            for (int p = 0; p < 3; p++) {
                T *x = parts[p];
                if (!x) continue;
                T *s = src + (size_t)p * C + c;
                if (vec) {
                    if (SPLIT) st16(x + at, ld16(s));
                    else st16(s, ld16(x + at));
                } else {
                    if (SPLIT) x[at] = *s;
                    else *s = x[at];
                }
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(ATT_THREADS)
    dtk_att_split_f32(float *q, float *k, float *v, const float *src, int B, int T, int C, int NH, int ld) {
    att_move<float, true>(const_cast<float *>(src), q, k, v, B, T, C, NH, ld);
}
extern "C" __global__ void __launch_bounds__(ATT_THREADS)
    dtk_att_split_bf16(bf16 *q, bf16 *k, bf16 *v, const bf16 *src, int B, int T, int C, int NH, int ld) {
    att_move<bf16, true>(const_cast<bf16 *>(src), q, k, v, B, T, C, NH, ld);
}
extern "C" __global__ void __launch_bounds__(ATT_THREADS)
    dtk_att_merge_f32(float *dst, const float *q, const float *k, const float *v, int B, int T, int C, int NH,
                      int ld) {
    att_move<float, false>(dst, const_cast<float *>(q), const_cast<float *>(k), const_cast<float *>(v), B, T, C,
                           NH, ld);
}
extern "C" __global__ void __launch_bounds__(ATT_THREADS)
    dtk_att_merge_bf16(bf16 *dst, const bf16 *q, const bf16 *k, const bf16 *v, int B, int T, int C, int NH,
                       int ld) {
    att_move<bf16, false>(dst, const_cast<bf16 *>(q), const_cast<bf16 *>(k), const_cast<bf16 *>(v), B, T, C, NH,
                          ld);
}

/* ---- the causal softmax ---------------------------------------------------------------------- */

/* att [BNH*T rows, stride ldt]: row r (position t = r % T) holds the scaled
 * scores in 0..t; becomes their softmax there and 0 in t+1..T-1 */
template <typename T> __device__ void att_softmax(T *att, int BNH, int T_, int ldt) {
    const int lane = threadIdx.x & 31;
    const long long r = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= (long long)BNH * T_) return;
    const int t = (int)(r % T_);
    T *p = att + (size_t)r * (size_t)ldt;
    dt_softmax_acc a = dt_softmax_empty();
    for (int j = lane; j <= t; j += 32) a = dt_softmax_push(a, ldf(p[j]));
    a = warp_softmax(a);
    const float inv = 1.0f / a.s;
    for (int j = lane; j < T_; j += 32) p[j] = stf<T>(j <= t ? expf(ldf(p[j]) - a.m) * inv : 0.0f);
}

/* datt (in: d loss / d att; out: d loss / d preatt, unscaled) from att:
 * datt[j] = att[j] (datt[j] - sum_j' att[j'] datt[j']) for j <= t, 0 up to T */
template <typename T> __device__ void att_softmax_bwd(T *datt, const T *att, int BNH, int T_, int ldt) {
    const int lane = threadIdx.x & 31;
    const long long r = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= (long long)BNH * T_) return;
    const int t = (int)(r % T_);
    const T *p = att + (size_t)r * (size_t)ldt;
    T *d = datt + (size_t)r * (size_t)ldt;
    float s = 0.0f;
    for (int j = lane; j <= t; j += 32) s += ldf(p[j]) * ldf(d[j]);
    s = warp_sum(s);
    for (int j = lane; j < T_; j += 32) d[j] = stf<T>(j <= t ? ldf(p[j]) * (ldf(d[j]) - s) : 0.0f);
}

extern "C" __global__ void __launch_bounds__(ATT_THREADS) dtk_att_softmax_f32(float *att, int BNH, int T, int ldt) {
    att_softmax(att, BNH, T, ldt);
}
extern "C" __global__ void __launch_bounds__(ATT_THREADS) dtk_att_softmax_bf16(bf16 *att, int BNH, int T, int ldt) {
    att_softmax(att, BNH, T, ldt);
}
extern "C" __global__ void __launch_bounds__(ATT_THREADS)
    dtk_att_softmax_bwd_f32(float *datt, const float *att, int BNH, int T, int ldt) {
    att_softmax_bwd(datt, att, BNH, T, ldt);
}
extern "C" __global__ void __launch_bounds__(ATT_THREADS)
    dtk_att_softmax_bwd_bf16(bf16 *datt, const bf16 *att, int BNH, int T, int ldt) {
    att_softmax_bwd(datt, att, BNH, T, ldt);
}

/* ---- one query against the cache (generation) -------------------------------------------------- */

/* out [C] (act) = per head h (one block each) softmax(q_h . k_h,j * scale over
 * j < n) v; q [C], kc, vc [n, C] (act); scratch [NH, n] (f32): the scores,
 * then the probabilities */
template <typename T>
__device__ void att_step(T *out, float *scratch, const T *q, const T *kc, const T *vc, int n, int C, int NH) {
    const int h = blockIdx.x;
    if (h >= NH) return;
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    float *s = scratch + (size_t)h * (size_t)n;
    const T *qh = q + (size_t)h * hs;
    dt_softmax_acc a = dt_softmax_empty();
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const T *kj = kc + (size_t)j * (size_t)C + (size_t)h * hs;
        float dot = 0.0f;
        for (int i = 0; i < hs; i++) dot += ldf(qh[i]) * ldf(kj[i]);
        s[j] = dot * scale;
        a = dt_softmax_push(a, s[j]);
    }
    __shared__ float sm[STEP_THREADS / 32], ss[STEP_THREADS / 32];
    a = warp_softmax(a);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) sm[warp] = a.m, ss[warp] = a.s;
    __syncthreads();
    a = dt_softmax_empty();
    for (int w = 0; w < nw; w++) {
        dt_softmax_acc b;
        b.m = sm[w], b.s = ss[w];
        a = dt_softmax_merge(a, b);
    }
    const float inv = 1.0f / a.s;
    for (int j = threadIdx.x; j < n; j += blockDim.x) s[j] = expf(s[j] - a.m) * inv;
    __syncthreads();
    for (int i = threadIdx.x; i < hs; i += blockDim.x) {
        float o = 0.0f;
        for (int j = 0; j < n; j++) o += s[j] * ldf(vc[(size_t)j * (size_t)C + (size_t)h * hs + i]);
        out[(size_t)h * hs + i] = stf<T>(o);
    }
}

extern "C" __global__ void __launch_bounds__(STEP_THREADS)
    dtk_att_step_f32(float *out, float *scratch, const float *q, const float *kc, const float *vc, int n, int C,
                     int NH) {
    att_step(out, scratch, q, kc, vc, n, C, NH);
}
extern "C" __global__ void __launch_bounds__(STEP_THREADS)
    dtk_att_step_bf16(bf16 *out, float *scratch, const bf16 *q, const bf16 *kc, const bf16 *vc, int n, int C,
                      int NH) {
    att_step(out, scratch, q, kc, vc, n, C, NH);
}

/* ---- launchers ------------------------------------------------------------------------------------ */

static int split(gpt_be *be, void *q, void *k, void *v, const void *src, int B, int T, int C, int NH, int ld) {
    const int P = be->prec == GPT_BF16 ? 8 : 4, per = (C + P - 1) / P;
    const int threads = per < ATT_THREADS ? (per + 31) / 32 * 32 : ATT_THREADS;
    const unsigned g = gpt_cuda_grid(be, (size_t)B * (size_t)T * (size_t)threads, threads);
    if (be->prec == GPT_BF16)
        return GPT_LAUNCH(dtk_att_split_bf16, g, threads, 0, be->stream, (bf16 *)q, (bf16 *)k, (bf16 *)v,
                          (const bf16 *)src, B, T, C, NH, ld);
    return GPT_LAUNCH(dtk_att_split_f32, g, threads, 0, be->stream, (float *)q, (float *)k, (float *)v,
                      (const float *)src, B, T, C, NH, ld);
}

static int merge(gpt_be *be, void *dst, const void *q, const void *k, const void *v, int B, int T, int C, int NH,
                 int ld) {
    const int P = be->prec == GPT_BF16 ? 8 : 4, per = (C + P - 1) / P;
    const int threads = per < ATT_THREADS ? (per + 31) / 32 * 32 : ATT_THREADS;
    const unsigned g = gpt_cuda_grid(be, (size_t)B * (size_t)T * (size_t)threads, threads);
    if (be->prec == GPT_BF16)
        return GPT_LAUNCH(dtk_att_merge_bf16, g, threads, 0, be->stream, (bf16 *)dst, (const bf16 *)q,
                          (const bf16 *)k, (const bf16 *)v, B, T, C, NH, ld);
    return GPT_LAUNCH(dtk_att_merge_f32, g, threads, 0, be->stream, (float *)dst, (const float *)q,
                      (const float *)k, (const float *)v, B, T, C, NH, ld);
}

/* D = alpha op(A) op(B), batched over B*NH heads (strides in elements) */
static int head_mm(gpt_be *be, const char *what, void *D, int ldd, long long sd, const void *A, int lda, int ta,
                   long long sa, const void *Bm, int ldb, int tb, long long sb, int m, int n, int k, float alpha,
                   int batch) {
    gpt_lt_mm mm;
    memset(&mm, 0, sizeof mm);
    mm.m = m, mm.n = n, mm.k = k;
    mm.A = A, mm.lda = lda, mm.ta = ta;
    mm.B = Bm, mm.ldb = ldb, mm.tb = tb;
    mm.D = D, mm.ldd = ldd;
    mm.alpha = alpha, mm.beta = 0.0f;
    mm.ab_type = mm.d_type = be->prec == GPT_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    mm.batch = batch, mm.sa = sa, mm.sb = sb, mm.sd = sd;
    return gpt_cuda_lt(be, what, &mm);
}

static int softmax(gpt_be *be, void *att, const void *satt, int BNH, int T, int backward) {
    const size_t rows = (size_t)BNH * (size_t)T;
    const unsigned g = (unsigned)((rows + ATT_WARPS - 1) / ATT_WARPS);
    const int Tp = att_tp(T);
    if (backward) {
        if (be->prec == GPT_BF16)
            return GPT_LAUNCH(dtk_att_softmax_bwd_bf16, g, ATT_WARPS * 32, 0, be->stream, (bf16 *)att,
                              (const bf16 *)satt, BNH, T, Tp);
        return GPT_LAUNCH(dtk_att_softmax_bwd_f32, g, ATT_WARPS * 32, 0, be->stream, (float *)att,
                          (const float *)satt, BNH, T, Tp);
    }
    if (be->prec == GPT_BF16)
        return GPT_LAUNCH(dtk_att_softmax_bf16, g, ATT_WARPS * 32, 0, be->stream, (bf16 *)att, BNH, T, Tp);
    return GPT_LAUNCH(dtk_att_softmax_f32, g, ATT_WARPS * 32, 0, be->stream, (float *)att, BNH, T, Tp);
}

extern "C" int gpt_cuda_attention_forward(gpt_be *be, void *out, void *saved, void *scratch, const void *qkv,
                                          int B, int T, int C, int NH) {
    if (B <= 0 || T <= 0) return DT_OK;
    const int hs = C / NH, Tp = att_tp(T), BNH = B * NH;
    const size_t slice = gpt_cuda_align256((size_t)B * (size_t)T * (size_t)C * gpt_cuda_es(be));
    char *q = (char *)scratch, *k = q + slice, *v = k + slice, *y = v + slice;
    const float scale = 1.0f / sqrtf((float)hs);
    const long long sq = (long long)T * hs, satt = (long long)T * Tp;
    int rc = split(be, q, k, v, qkv, B, T, C, NH, 3 * C);
    /* preatt [T x T per head] = scale * (k^T q in cuBLASLt's column-major: row i of saved is query i) */
    if (!rc) rc = head_mm(be, "attention_forward (q k^T)", saved, Tp, satt, k, hs, 1, sq, q, hs, 0, sq, T, T, hs, scale,
                          BNH);
    if (!rc) rc = softmax(be, saved, NULL, BNH, T, 0);
    /* y [hs x T per head] = v [hs x T] att' [T x T] */
    if (!rc) rc = head_mm(be, "attention_forward (att v)", y, hs, sq, v, hs, 0, sq, saved, Tp, 0, satt, hs, T, T,
                          1.0f, BNH);
    if (!rc) rc = merge(be, out, y, NULL, NULL, B, T, C, NH, C);
    return rc;
}

extern "C" int gpt_cuda_attention_backward(gpt_be *be, void *dqkv, void *scratch, const void *dout, const void *qkv,
                                           const void *saved, int B, int T, int C, int NH) {
    if (B <= 0 || T <= 0) return DT_OK;
    const int hs = C / NH, Tp = att_tp(T), BNH = B * NH;
    const size_t slice = gpt_cuda_align256((size_t)B * (size_t)T * (size_t)C * gpt_cuda_es(be));
    char *q = (char *)scratch, *k = q + slice, *v = k + slice, *dy = v + slice, *datt = dy + slice;
    const float scale = 1.0f / sqrtf((float)hs);
    const long long sq = (long long)T * hs, satt = (long long)T * Tp;
    int rc = split(be, q, k, v, qkv, B, T, C, NH, 3 * C);
    if (!rc) rc = split(be, dy, NULL, NULL, dout, B, T, C, NH, C);
    /* datt = dy v^T (rows: queries) */
    if (!rc) rc = head_mm(be, "attention_backward (dy v^T)", datt, Tp, satt, v, hs, 1, sq, dy, hs, 0, sq, T, T, hs,
                          1.0f, BNH);
    /* dv = att^T dy, into v's slice (v is not read again) */
    char *dv = v;
    if (!rc) rc = head_mm(be, "attention_backward (att^T dy)", dv, hs, sq, dy, hs, 0, sq, saved, Tp, 1, satt, hs, T,
                          T, 1.0f, BNH);
    if (!rc) rc = softmax(be, datt, saved, BNH, T, 1);
    /* dq = scale dpreatt k, into dy's slice; dk = scale dpreatt^T q, into k's */
    char *dq = dy, *dk = k;
    if (!rc) rc = head_mm(be, "attention_backward (dS k)", dq, hs, sq, k, hs, 0, sq, datt, Tp, 0, satt, hs, T, T,
                          scale, BNH);
    if (!rc) rc = head_mm(be, "attention_backward (dS^T q)", dk, hs, sq, q, hs, 0, sq, datt, Tp, 1, satt, hs, T, T,
                          scale, BNH);
    if (!rc) rc = merge(be, dqkv, dq, dk, dv, B, T, C, NH, 3 * C);
    return rc;
}

extern "C" int gpt_cuda_attention_step(gpt_be *be, void *out, void *scratch, const void *q, const void *kc,
                                       const void *vc, int n, int C, int NH) {
    if (n <= 0) return DT_OK;
    if (be->prec == GPT_BF16)
        return GPT_LAUNCH(dtk_att_step_bf16, (unsigned)NH, STEP_THREADS, 0, be->stream, (bf16 *)out,
                          (float *)scratch, (const bf16 *)q, (const bf16 *)kc, (const bf16 *)vc, n, C, NH);
    return GPT_LAUNCH(dtk_att_step_f32, (unsigned)NH, STEP_THREADS, 0, be->stream, (float *)out, (float *)scratch,
                      (const float *)q, (const float *)kc, (const float *)vc, n, C, NH);
}
