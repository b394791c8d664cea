/* fakegpu_cublaslt: the fake cuBLASLt (fake_cublaslt*.c) against a float64
 * reference computed here, on fresh random inputs each call, with every
 * output poisoned (0xFF bytes: NaN) before the call and the padding between
 * leading dimensions checked to stay poisoned after it:
 *  - every transpose (N/T x N/T) x type combination (A/B/C/D f32; A/B bf16
 *    with C/D bf16; A/B bf16 with C/D f32) x epilogue (DEFAULT, RELU, BIAS,
 *    RELU_BIAS, GELU, GELU_AUX, GELU_BIAS, GELU_AUX_BIAS, DGELU, DGELU_BGRAD,
 *    BGRADA, BGRADB), column-major, beta 0 (C NULL or C == D), 1 (in place)
 *    and 0.5;
 *  - row-major and mixed orders, strided batches with bias and aux batch
 *    strides;
 * bound: relative L2 error (||x - ref|| / ||ref|| over each output) <= 1e-6
 * for float32 outputs, <= 1e-2 for bfloat16 ones (8 bits of mantissa).
 * And the errors the real library reports: a NULL or destroyed handle,
 * host memory, too little room, the workspace, unsupported types, compute
 * types, scale types, pointer modes, epilogues and orders (NOT_SUPPORTED),
 * mismatched sizes, aux leading dimensions, overlaps, a dead stream, another
 * device; and the descriptors' attribute calls. */
#define _POSIX_C_SOURCE 200809L
#include <cublasLt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dtrain/dtype.h"
#include "fakegpu.h"
#include "test_capture.h"
#include "testutil.h"

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;

/* uniform in [-1, 1) */
static float rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static size_t tsize(int t) { return t == CUDA_R_16BF ? 2 : 4; }

static void put_elem(unsigned char *buf, int t, int64_t i, float v) {
    if (t == CUDA_R_16BF) {
        uint16_t h = dt_f32_to_bf16(v);
        memcpy(buf + i * 2, &h, 2);
    } else {
        memcpy(buf + i * 4, &v, 4);
    }
}

static float get_elem(const unsigned char *buf, int t, int64_t i) {
    if (t == CUDA_R_16BF) {
        uint16_t h;
        memcpy(&h, buf + i * 2, 2);
        return dt_bf16_to_f32(h);
    }
    float v;
    memcpy(&v, buf + i * 4, 4);
    return v;
}

/* ---- a matrix of a test: its layout, host bytes and device copy ---------------------------- */

typedef struct tmat {
    int type, order, rows, cols, batch;
    int64_t ld, stride, span; /* elements */
    size_t bytes;
    unsigned char *h; /* all its bytes, poisoned (0xFF) where not set */
    void *d;
    cublasLtMatrixLayout_t l;
} tmat;

/* 1 if it got its memory */
static int tmat_init(tmat *x, int type, int order, int rows, int cols, int batch, int64_t ld, int64_t stride) {
    memset(x, 0, sizeof *x);
    x->type = type;
    x->order = order;
    x->rows = rows;
    x->cols = cols;
    x->batch = batch;
    int inner = order == CUBLASLT_ORDER_COL ? rows : cols, outer = order == CUBLASLT_ORDER_COL ? cols : rows;
    x->ld = ld;
    x->span = (int64_t)(outer - 1) * ld + inner;
    x->stride = stride;
    x->bytes = (size_t)((batch - 1) * stride + x->span) * tsize(type);
    x->h = malloc(x->bytes);
    if (!x->h || cudaMalloc(&x->d, x->bytes) != cudaSuccess) return 0;
    memset(x->h, 0xFF, x->bytes);
    int32_t ord = order, bc = batch;
    return cublasLtMatrixLayoutCreate(&x->l, (cudaDataType)type, (uint64_t)rows, (uint64_t)cols, ld) == 0 &&
           cublasLtMatrixLayoutSetAttribute(x->l, CUBLASLT_MATRIX_LAYOUT_ORDER, &ord, sizeof ord) == 0 &&
           cublasLtMatrixLayoutSetAttribute(x->l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc) == 0 &&
           cublasLtMatrixLayoutSetAttribute(x->l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                            sizeof stride) == 0;
}

static void tmat_free(tmat *x) {
    free(x->h);
    cudaFree(x->d);
    cublasLtMatrixLayoutDestroy(x->l);
}

static int64_t at(const tmat *x, int b, int r, int c) {
    return (int64_t)b * x->stride + (x->order == CUBLASLT_ORDER_COL ? r + (int64_t)c * x->ld : (int64_t)r * x->ld + c);
}

static float el(const tmat *x, int b, int r, int c) { return get_elem(x->h, x->type, at(x, b, r, c)); }

/* random elements (representable in the type), uploaded; the padding poisoned */
static void tmat_fill(tmat *x) {
    for (int b = 0; b < x->batch; b++)
        for (int r = 0; r < x->rows; r++)
            for (int c = 0; c < x->cols; c++) put_elem(x->h, x->type, at(x, b, r, c), rnd());
    cudaMemcpy(x->d, x->h, x->bytes, cudaMemcpyHostToDevice);
}

/* 1 if every byte of x->h outside its elements is still 0xFF */
static int padding_poisoned(const tmat *x) {
    unsigned char *mark = calloc(x->bytes, 1);
    if (!mark) return 0;
    size_t es = tsize(x->type);
    for (int b = 0; b < x->batch; b++)
        for (int r = 0; r < x->rows; r++)
            for (int c = 0; c < x->cols; c++) memset(mark + (size_t)at(x, b, r, c) * es, 1, es);
    int ok = 1;
    for (size_t i = 0; i < x->bytes; i++) ok &= mark[i] || x->h[i] == 0xFF;
    free(mark);
    return ok;
}

/* ---- the reference ---------------------------------------------------------------------------- */

#define K0 0.7978845608028654
#define K1 0.044715
static double gelu_d(double x) { return 0.5 * x * (1.0 + tanh(K0 * (x + K1 * x * x * x))); }
static double dgelu_d(double x) {
    double t = tanh(K0 * (x + K1 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * K0 * (1.0 + 3.0 * K1 * x * x);
}

enum { F_BIAS = 1, F_RELU = 2, F_GELU = 4, F_AUXOUT = 8, F_DGELU = 16, F_BGD = 32, F_BGA = 64, F_BGB = 128 };

static const struct {
    uint32_t id;
    const char *name;
    unsigned f;
} k_epi[] = {
    {CUBLASLT_EPILOGUE_DEFAULT, "DEFAULT", 0},
    {CUBLASLT_EPILOGUE_RELU, "RELU", F_RELU},
    {CUBLASLT_EPILOGUE_BIAS, "BIAS", F_BIAS},
    {CUBLASLT_EPILOGUE_RELU_BIAS, "RELU_BIAS", F_BIAS | F_RELU},
    {CUBLASLT_EPILOGUE_GELU, "GELU", F_GELU},
    {CUBLASLT_EPILOGUE_GELU_AUX, "GELU_AUX", F_GELU | F_AUXOUT},
    {CUBLASLT_EPILOGUE_GELU_BIAS, "GELU_BIAS", F_GELU | F_BIAS},
    {CUBLASLT_EPILOGUE_GELU_AUX_BIAS, "GELU_AUX_BIAS", F_GELU | F_AUXOUT | F_BIAS},
    {CUBLASLT_EPILOGUE_DGELU, "DGELU", F_DGELU},
    {CUBLASLT_EPILOGUE_DGELU_BGRAD, "DGELU_BGRAD", F_DGELU | F_BGD},
    {CUBLASLT_EPILOGUE_BGRADA, "BGRADA", F_BGA},
    {CUBLASLT_EPILOGUE_BGRADB, "BGRADB", F_BGB},
};
enum { NEPI = sizeof k_epi / sizeof k_epi[0] };

typedef struct tcase {
    int m, n, k, ta, tb;
    int ab, cd;            /* types */
    int oa, ob, ocd;       /* orders */
    int epi;               /* index into k_epi */
    int batch;
    float alpha, beta;
    int c_mode;            /* 0: C separate, 1: C == D (in place), 2: C NULL (beta 0) */
} tcase;

/* relative L2 error accumulated over an output */
typedef struct rel {
    double e2, r2;
} rel;
static void rel_add(rel *r, double x, double ref) {
    r->e2 += (x - ref) * (x - ref);
    r->r2 += ref * ref;
}
static double rel_of(const rel *r) { return r->r2 > 0 ? sqrt(r->e2 / r->r2) : sqrt(r->e2); }

static cublasLtHandle_t g_h;
static void *g_ws;
enum { WS_BYTES = 1 << 20 };

static void run_case(const tcase *t, int seq) {
    unsigned f = k_epi[t->epi].f;
    int m = t->m, n = t->n, k = t->k, B = t->batch;
    int col = t->ocd == CUBLASLT_ORDER_COL;
    tmat A, Bm, C, D, bias, aux;
    int ar = t->ta ? k : m, ac = t->ta ? m : k, br = t->tb ? n : k, bc = t->tb ? k : n;
    int64_t lda = (t->oa == CUBLASLT_ORDER_COL ? ar : ac) + 3, ldb = (t->ob == CUBLASLT_ORDER_COL ? br : bc) + 1;
    int64_t ldd = (col ? m : n) + 2;
    int ldc = t->c_mode == 1 ? (int)ldd : (int)ldd + 4, blen = f & F_BGB ? n : m;
    int64_t auxld = ((col ? m : n) + 7) / 8 * 8 + 8;
    int64_t auxspan = (int64_t)((col ? n : m) - 1) * auxld + (col ? m : n);
    /* memory, layouts (batches: strides with gaps) */
    int ok =
        tmat_init(&A, t->ab, t->oa, ar, ac, B, lda, B > 1 ? (t->oa == CUBLASLT_ORDER_COL ? ac : ar) * lda + 7 : 0) &
        tmat_init(&Bm, t->ab, t->ob, br, bc, B, ldb, B > 1 ? (t->ob == CUBLASLT_ORDER_COL ? bc : br) * ldb + 2 : 0) &
        tmat_init(&D, t->cd, t->ocd, m, n, B, ldd, B > 1 ? (col ? n : m) * ldd + 5 : 0) &
        tmat_init(&C, t->cd, t->ocd, m, n, B, ldc, B > 1 ? (col ? n : m) * ldc + (t->c_mode == 1 ? 5 : 1) : 0) &
        tmat_init(&bias, t->cd, CUBLASLT_ORDER_COL, blen, 1, B, blen, B > 1 ? blen + 3 : 0) &
        tmat_init(&aux, t->cd, t->ocd, m, n, B, auxld, B > 1 ? (auxspan + 7) / 8 * 8 + 8 : 0);
    if (!ok) {
        CHECK(ok, "case %d: memory", seq);
        tmat *all[] = {&A, &Bm, &C, &D, &bias, &aux};
        for (int i = 0; i < 6; i++) tmat_free(all[i]);
        return;
    }
    tmat_fill(&A);
    tmat_fill(&Bm);
    tmat_fill(&C);
    if (f & F_BIAS) tmat_fill(&bias);
    if (f & F_DGELU) tmat_fill(&aux);
    /* outputs poisoned; in place, D holds C (its padding poisoned) */
    if (t->c_mode == 1) memcpy(D.h, C.h, D.bytes);
    cudaMemcpy(D.d, D.h, D.bytes, cudaMemcpyHostToDevice);
    if (f & (F_BGD | F_BGA | F_BGB)) cudaMemcpy(bias.d, bias.h, bias.bytes, cudaMemcpyHostToDevice);
    if (f & F_AUXOUT) cudaMemcpy(aux.d, aux.h, aux.bytes, cudaMemcpyHostToDevice);

    cublasLtMatmulDesc_t desc;
    cublasComputeType_t comp = t->ab == CUDA_R_32F && seq % 3 ? (seq % 3 == 1 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                                : CUBLAS_COMPUTE_32F_FAST_16BF)
                                                               : CUBLAS_COMPUTE_32F;
    cublasLtMatmulDescCreate(&desc, comp, CUDA_R_32F);
    int32_t opa = t->ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = t->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    uint32_t epi = k_epi[t->epi].id;
    int64_t bstride = bias.stride, astride = aux.stride;
    ok = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa) == 0 &&
         cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb) == 0 &&
         cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) == 0 &&
         cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias.d, sizeof bias.d) == 0 &&
         cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bstride,
                                        sizeof bstride) == 0 &&
         cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux.d,
                                        sizeof aux.d) == 0 &&
         cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &auxld, sizeof auxld) == 0 &&
         cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &astride,
                                        sizeof astride) == 0;
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    uint64_t wsb = WS_BYTES;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    ok = ok && cublasLtMatmulAlgoGetHeuristic(g_h, desc, A.l, Bm.l, C.l, D.l, pref, 1, &res, &nres) == 0 &&
         nres == 1 && res.state == CUBLAS_STATUS_SUCCESS && res.workspaceSize <= WS_BYTES;
    const void *cptr = t->c_mode == 1 ? D.d : t->c_mode == 2 ? NULL : C.d;
    cublasStatus_t st = cublasLtMatmul(g_h, desc, &t->alpha, A.d, A.l, Bm.d, Bm.l, &t->beta, cptr,
                                       t->c_mode == 1 ? D.l : C.l, D.d, D.l, seq % 2 ? &res.algo : NULL,
                                       seq % 2 ? g_ws : NULL, seq % 2 ? WS_BYTES : 0, NULL);
    ok = ok && st == CUBLAS_STATUS_SUCCESS;
    cudaMemcpy(D.h, D.d, D.bytes, cudaMemcpyDeviceToHost);
    if (f & (F_BGD | F_BGA | F_BGB)) cudaMemcpy(bias.h, bias.d, bias.bytes, cudaMemcpyDeviceToHost);
    if (f & F_AUXOUT) cudaMemcpy(aux.h, aux.d, aux.bytes, cudaMemcpyDeviceToHost);

    /* the reference, in double from the inputs as stored */
    rel rd = {0, 0}, ra = {0, 0}, rb = {0, 0};
    for (int b = 0; b < B; b++) {
        for (int i = 0; i < m; i++) {
            double gsum = 0;
            for (int j = 0; j < n; j++) {
                double acc = 0;
                for (int q = 0; q < k; q++)
                    acc += (double)(t->ta ? el(&A, b, q, i) : el(&A, b, i, q)) *
                           (double)(t->tb ? el(&Bm, b, j, q) : el(&Bm, b, q, j));
                double v = t->alpha * acc;
                if (t->beta != 0.0f) v += (double)t->beta * el(&C, b, i, j);
                if (f & F_BIAS) v += el(&bias, b, i, 0);
                if (f & F_AUXOUT) rel_add(&ra, el(&aux, b, i, j), v);
                if (f & F_GELU) v = gelu_d(v);
                if (f & F_RELU) v = v > 0 ? v : 0;
                if (f & F_DGELU) v *= dgelu_d(el(&aux, b, i, j));
                rel_add(&rd, el(&D, b, i, j), v);
                gsum += v;
            }
            if (f & F_BGD) rel_add(&rb, el(&bias, b, i, 0), gsum);
        }
        if (f & (F_BGA | F_BGB))
            for (int v = 0; v < blen; v++) {
                double s = 0;
                for (int q = 0; q < k; q++)
                    s += f & F_BGA ? (t->ta ? el(&A, b, q, v) : el(&A, b, v, q))
                                   : (t->tb ? el(&Bm, b, v, q) : el(&Bm, b, q, v));
                rel_add(&rb, el(&bias, b, v, 0), s);
            }
    }
    double tol = t->cd == CUDA_R_32F ? 1e-6 : 1e-2;
    double ed = rel_of(&rd), ea = rel_of(&ra), eb = rel_of(&rb);
    int pads = padding_poisoned(&D) && (!(f & F_AUXOUT) || padding_poisoned(&aux)) &&
               (!(f & (F_BGD | F_BGA | F_BGB)) || padding_poisoned(&bias));
    CHECK(ok && ed <= tol && ea <= tol && eb <= tol && pads,
          "case %d: %s, op %c%c, A/B %s C/D %s, orders %c%c%c, %d x %d x %d, batch %d, alpha %g beta %g, C %s: "
          "status %d, relative L2 errors D %.3g aux %.3g bias %.3g (bound %g), padding %s",
          seq, k_epi[t->epi].name, t->ta ? 'T' : 'N', t->tb ? 'T' : 'N', t->ab == CUDA_R_32F ? "f32" : "bf16",
          t->cd == CUDA_R_32F ? "f32" : "bf16", t->oa ? 'R' : 'C', t->ob ? 'R' : 'C', t->ocd ? 'R' : 'C', m, n, k,
          B, (double)t->alpha, (double)t->beta, t->c_mode == 1 ? "== D" : t->c_mode == 2 ? "NULL" : "separate",
          (int)st, ed, ea, eb, tol, pads ? "untouched" : "WRITTEN");
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatmulDescDestroy(desc);
    tmat_free(&A);
    tmat_free(&Bm);
    tmat_free(&C);
    tmat_free(&D);
    tmat_free(&bias);
    tmat_free(&aux);
}

static const int k_types[3][2] = {{CUDA_R_32F, CUDA_R_32F}, {CUDA_R_16BF, CUDA_R_16BF}, {CUDA_R_16BF, CUDA_R_32F}};

static void sweep(void) {
    int seq = 0;
    const float betas[3] = {0.0f, 1.0f, 0.5f};
    /* column-major: every transpose x types x epilogue */
    for (int ty = 0; ty < 3; ty++)
        for (int e = 0; e < NEPI; e++)
            for (int tr = 0; tr < 4; tr++, seq++) {
                float beta = betas[seq % 3];
                tcase t = {17 + seq % 5, 13 + (seq % 3) * 4, 29 + (seq % 4) * 3, tr & 1, tr >> 1, k_types[ty][0],
                           k_types[ty][1], CUBLASLT_ORDER_COL, CUBLASLT_ORDER_COL, CUBLASLT_ORDER_COL, e, 1, 0.75f,
                           beta, beta == 1.0f ? 1 : beta == 0.0f ? (seq / 3) % 2 * 2 : 0};
                run_case(&t, seq);
            }
    /* row-major and mixed orders, two type combinations, four epilogues */
    const int epis[4] = {0, 7, 9, 11};
    for (int ord = 1; ord < 8; ord++)
        for (int ty = 0; ty < 2; ty++)
            for (int e = 0; e < 4; e++)
                for (int tr = 0; tr < 4; tr++, seq++) {
                    float beta = betas[seq % 3];
                    tcase t = {11 + seq % 7, 9 + seq % 5, 21 + seq % 6, tr & 1, tr >> 1, k_types[ty][0],
                               k_types[ty][1], ord & 1, ord >> 1 & 1, ord >> 2 & 1, epis[e], 1, -0.5f, beta,
                               beta == 1.0f ? 1 : 0};
                    run_case(&t, seq);
                }
    /* batches: strides between the matrices, the bias and the aux matrix */
    for (int ty = 0; ty < 3; ty++)
        for (int e = 0; e < NEPI; e++, seq++) {
            float beta = betas[seq % 3];
            tcase t = {19, 10, 23, seq & 1, seq >> 1 & 1, k_types[ty][0], k_types[ty][1], CUBLASLT_ORDER_COL,
                       seq % 5 == 0, seq % 7 == 0, e, 3, 1.25f, beta, beta == 1.0f ? 1 : 0};
            run_case(&t, seq);
        }
}

/* ---- errors ---------------------------------------------------------------------------------------- */

/* a valid f32 problem (16 x 8 x 8, column-major) whose pieces the checks
 * below replace one at a time */
typedef struct base {
    float *a, *b, *c, *d, *bias, *aux, *ws;
    cublasLtMatrixLayout_t la, lb, lc, ld;
    cublasLtMatmulDesc_t desc;
} base;

static cublasStatus_t mm(const base *x, cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha,
                         const void *a, cublasLtMatrixLayout_t la, const void *b, const void *c,
                         cublasLtMatrixLayout_t lc, void *d, cublasLtMatrixLayout_t ld, void *ws, size_t wsb,
                         cudaStream_t s) {
    static const float beta = 1.0f;
    return cublasLtMatmul(h, desc, alpha, a, la, b, x->lb, &beta, c, lc, d, ld, NULL, ws, wsb, s);
}

/* st == want and the fake's stderr line contains sub */
#define CHECK_LT(call, want, sub)                                                                   \
    do {                                                                                            \
        cap_begin();                                                                                \
        cublasStatus_t st_ = (call);                                                                \
        const char *msg_ = cap_end();                                                               \
        CHECK(st_ == (want) && strstr(msg_, sub), "%s -> %s (want %s), said '%s' (want '%s')", #call, \
              cublasLtGetStatusName(st_), cublasLtGetStatusName(want), msg_, sub);                    \
    } while (0)

static void set_i32(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, int32_t v) {
    cublasLtMatmulDescSetAttribute(d, a, &v, sizeof v);
}

/* the error checks' layouts and descriptors, destroyed at their end */
static cublasLtMatrixLayout_t g_lays[32];
static cublasLtMatmulDesc_t g_descs[16];
static int g_nlays, g_ndescs;

static cublasLtMatrixLayout_t layout(int type, int rows, int cols, int64_t ld) {
    cublasLtMatrixLayout_t l = NULL;
    cublasLtMatrixLayoutCreate(&l, (cudaDataType)type, (uint64_t)rows, (uint64_t)cols, ld);
    if (g_nlays < 32) g_lays[g_nlays++] = l;
    return l;
}

static cublasLtMatmulDesc_t mdesc(cublasComputeType_t compute, cudaDataType_t scale) {
    cublasLtMatmulDesc_t d = NULL;
    cublasLtMatmulDescCreate(&d, compute, scale);
    if (g_ndescs < 16) g_descs[g_ndescs++] = d;
    return d;
}

static void check_errors(void) {
    base x;
    float one = 1.0f, host[256] = {0};
    cudaMalloc((void **)&x.a, 16 * 8 * 4);
    cudaMalloc((void **)&x.b, 8 * 8 * 4);
    cudaMalloc((void **)&x.c, 16 * 8 * 4);
    cudaMalloc((void **)&x.d, 16 * 8 * 4);
    cudaMalloc((void **)&x.bias, 16 * 4);
    cudaMalloc((void **)&x.aux, 16 * 8 * 4);
    cudaMalloc((void **)&x.ws, 4096);
    x.la = layout(CUDA_R_32F, 16, 8, 16);
    x.lb = layout(CUDA_R_32F, 8, 8, 8);
    x.lc = layout(CUDA_R_32F, 16, 8, 16);
    x.ld = layout(CUDA_R_32F, 16, 8, 16);
    x.desc = mdesc(CUBLAS_COMPUTE_32F, CUDA_R_32F);
    CHECK(mm(&x, g_h, x.desc, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL) == CUBLAS_STATUS_SUCCESS,
          "the base problem runs");

    /* handles */
    cublasLtHandle_t dead;
    cublasLtCreate(&dead);
    cublasLtDestroy(dead);
    CHECK_LT(mm(&x, NULL, x.desc, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL),
             CUBLAS_STATUS_NOT_INITIALIZED, "the handle is NULL");
    CHECK_LT(mm(&x, dead, x.desc, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL),
             CUBLAS_STATUS_NOT_INITIALIZED, "not a live cuBLASLt handle");
    CHECK_LT(cublasLtDestroy(dead), CUBLAS_STATUS_NOT_INITIALIZED, "not a live cuBLASLt handle");
    cudaSetDevice(1);
    CHECK_LT(mm(&x, g_h, x.desc, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL),
             CUBLAS_STATUS_INVALID_VALUE, "the handle was made on device 0, the current device is 1");
    cudaSetDevice(0);

    /* memory */
    CHECK_LT(mm(&x, g_h, x.desc, &one, host, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL),
             CUBLAS_STATUS_INVALID_VALUE, "A (");
    CHECK(strstr(cap_text, "is host memory, not device memory"), "host memory, said: '%s'", cap_text);
    CHECK_LT(mm(&x, g_h, x.desc, &one, x.a, x.la, x.b, x.c, x.lc, x.d + 1, x.ld, NULL, 0, NULL),
             CUBLAS_STATUS_INVALID_VALUE, "D (");
    CHECK(strstr(cap_text, "runs past the end of its allocation"), "room, said: '%s'", cap_text);
    CHECK_LT(mm(&x, g_h, x.desc, &one, (char *)x.a + 2, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL),
             CUBLAS_STATUS_INVALID_VALUE, "is not aligned to its element");
    CHECK_LT(mm(&x, g_h, x.desc, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, host, 1024, NULL),
             CUBLAS_STATUS_INVALID_VALUE, "the workspace (");
    CHECK_LT(mm(&x, g_h, x.desc, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, x.ws, 8192, NULL),
             CUBLAS_STATUS_INVALID_VALUE, "the workspace (");
    CHECK(mm(&x, g_h, x.desc, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL) == CUBLAS_STATUS_SUCCESS &&
              mm(&x, g_h, x.desc, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, x.ws, 4096, NULL) ==
                  CUBLAS_STATUS_SUCCESS,
          "no workspace is needed (the heuristic says 0 bytes), and one that is there is taken");
    CHECK_LT(mm(&x, g_h, x.desc, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, x.b, 256, NULL),
             CUBLAS_STATUS_INVALID_VALUE, "B and the workspace overlap");
    CHECK_LT(mm(&x, g_h, x.desc, x.a, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL),
             CUBLAS_STATUS_INVALID_VALUE, "alpha is device memory");
    CHECK_LT(mm(&x, g_h, x.desc, &one, x.a, x.la, x.b, NULL, x.lc, x.d, x.ld, NULL, 0, NULL),
             CUBLAS_STATUS_INVALID_VALUE, "C (");
    CHECK_LT(mm(&x, g_h, x.desc, &one, x.a, x.la, x.b, x.c, x.lc, x.a, x.ld, NULL, 0, NULL),
             CUBLAS_STATUS_INVALID_VALUE, "A and D overlap");
    cublasLtMatrixLayout_t wide = layout(CUDA_R_32F, 16, 4, 32);
    CHECK_LT(cublasLtMatmul(g_h, x.desc, &one, x.a, x.la, x.b, layout(CUDA_R_32F, 8, 4, 8), &one, x.d, wide, x.d,
                            layout(CUDA_R_32F, 16, 4, 16), NULL, NULL, 0, NULL),
             CUBLAS_STATUS_INVALID_VALUE, "C == D (in place) with layouts that differ");
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaStreamDestroy(s);
    CHECK_LT(mm(&x, g_h, x.desc, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, s),
             CUBLAS_STATUS_EXECUTION_FAILED, "the stream is not live");
    cublasLtMatmulAlgo_t junk;
    memset(&junk, 0, sizeof junk);
    CHECK_LT(cublasLtMatmul(g_h, x.desc, &one, x.a, x.la, x.b, x.lb, &one, x.c, x.lc, x.d, x.ld, &junk, NULL, 0, NULL),
             CUBLAS_STATUS_INVALID_VALUE, "algo is not one");

    /* sizes and layouts */
    CHECK_LT(mm(&x, g_h, x.desc, &one, x.a, layout(CUDA_R_32F, 16, 7, 16), x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL),
             CUBLAS_STATUS_INVALID_VALUE, "sizes do not match");
    CHECK_LT(mm(&x, g_h, x.desc, &one, x.a, layout(CUDA_R_32F, 16, 8, 15), x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL),
             CUBLAS_STATUS_INVALID_VALUE, "not a valid layout");
    cublasLtMatrixLayout_t batched = layout(CUDA_R_32F, 16, 8, 16);
    int32_t two = 2;
    int64_t stride = 16 * 8;
    cublasLtMatrixLayoutSetAttribute(batched, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &two, sizeof two);
    cublasLtMatrixLayoutSetAttribute(batched, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
    CHECK_LT(mm(&x, g_h, x.desc, &one, x.a, x.la, x.b, x.c, x.lc, x.d, batched, NULL, 0, NULL),
             CUBLAS_STATUS_INVALID_VALUE, "batch counts");

    /* what the fake (and the real library for COMPUTE_32F) does not support */
    CHECK_LT(mm(&x, g_h, x.desc, &one, x.a, layout(CUDA_R_16F, 16, 8, 16), x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL),
             CUBLAS_STATUS_NOT_SUPPORTED, "not a combination the fake supports");
    CHECK_LT(mm(&x, g_h, x.desc, &one, x.a, layout(CUDA_R_16BF, 16, 8, 16), x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL),
             CUBLAS_STATUS_NOT_SUPPORTED, "types A bf16, B f32");
    CHECK_LT(mm(&x, g_h, x.desc, &one, x.a, x.la, x.b, x.c, layout(CUDA_R_16BF, 16, 8, 16), x.d,
                layout(CUDA_R_16BF, 16, 8, 16), NULL, 0, NULL),
             CUBLAS_STATUS_NOT_SUPPORTED, "C bf16, D bf16");
    cublasLtMatmulDesc_t d64 = mdesc(CUBLAS_COMPUTE_64F, CUDA_R_64F);
    CHECK_LT(mm(&x, g_h, d64, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL), CUBLAS_STATUS_NOT_SUPPORTED,
             "compute type");
    cublasLtMatmulDesc_t dbf = mdesc(CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F);
    cublasLtMatrixLayout_t b16a = layout(CUDA_R_16BF, 16, 8, 16), b16b = layout(CUDA_R_16BF, 8, 8, 8);
    CHECK_LT(cublasLtMatmul(g_h, dbf, &one, x.a, b16a, x.b, b16b, &one, x.c, x.lc, x.d, x.ld, NULL, NULL, 0, NULL),
             CUBLAS_STATUS_NOT_SUPPORTED, "with bf16 inputs is not supported");
    cublasLtMatmulDesc_t dscale = mdesc(CUBLAS_COMPUTE_32F, CUDA_R_16BF);
    CHECK_LT(mm(&x, g_h, dscale, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL),
             CUBLAS_STATUS_NOT_SUPPORTED, "scale type 14");
    cublasLtMatmulDesc_t dptr = mdesc(CUBLAS_COMPUTE_32F, CUDA_R_32F);
    set_i32(dptr, CUBLASLT_MATMUL_DESC_POINTER_MODE, CUBLASLT_POINTER_MODE_DEVICE);
    CHECK_LT(mm(&x, g_h, dptr, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL),
             CUBLAS_STATUS_NOT_SUPPORTED, "pointer mode 1");
    cublasLtMatmulDesc_t depi = mdesc(CUBLAS_COMPUTE_32F, CUDA_R_32F);
    uint32_t e = CUBLASLT_EPILOGUE_RELU_AUX;
    cublasLtMatmulDescSetAttribute(depi, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    CHECK_LT(mm(&x, g_h, depi, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL),
             CUBLAS_STATUS_NOT_SUPPORTED, "epilogue 130");
    cublasLtMatmulDesc_t dtc = mdesc(CUBLAS_COMPUTE_32F, CUDA_R_32F);
    set_i32(dtc, CUBLASLT_MATMUL_DESC_TRANSC, CUBLAS_OP_T);
    CHECK_LT(mm(&x, g_h, dtc, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL),
             CUBLAS_STATUS_NOT_SUPPORTED, "transc N");
    cublasLtMatrixLayout_t col32 = layout(CUDA_R_32F, 16, 8, 16);
    int32_t o32 = CUBLASLT_ORDER_COL32;
    cublasLtMatrixLayoutSetAttribute(col32, CUBLASLT_MATRIX_LAYOUT_ORDER, &o32, sizeof o32);
    CHECK_LT(mm(&x, g_h, x.desc, &one, x.a, col32, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL),
             CUBLAS_STATUS_NOT_SUPPORTED, "order 2");
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulHeuristicResult_t res;
    int nres = 7;
    CHECK_LT(cublasLtMatmulAlgoGetHeuristic(g_h, d64, x.la, x.lb, x.lc, x.ld, pref, 1, &res, &nres),
             CUBLAS_STATUS_NOT_SUPPORTED, "compute type");
    CHECK(nres == 0, "no algorithm for it (%d)", nres);
    CHECK(cublasLtMatmulAlgoGetHeuristic(g_h, x.desc, x.la, x.lb, x.lc, x.ld, pref, 0, &res, &nres) ==
              CUBLAS_STATUS_INVALID_VALUE,
          "requesting 0 algorithms");

    /* the epilogues' pointers and the aux leading dimension */
    cublasLtMatmulDesc_t dg = mdesc(CUBLAS_COMPUTE_32F, CUDA_R_32F);
    e = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    int64_t aux_ld = 16;
    cublasLtMatmulDescSetAttribute(dg, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    cublasLtMatmulDescSetAttribute(dg, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld);
    CHECK_LT(mm(&x, g_h, dg, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL), CUBLAS_STATUS_INVALID_VALUE,
             "the bias (");
    cublasLtMatmulDescSetAttribute(dg, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &x.bias, sizeof x.bias);
    CHECK_LT(mm(&x, g_h, dg, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL), CUBLAS_STATUS_INVALID_VALUE,
             "the aux matrix (");
    cublasLtMatmulDescSetAttribute(dg, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &x.aux, sizeof x.aux);
    CHECK(mm(&x, g_h, dg, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL) == CUBLAS_STATUS_SUCCESS,
          "GELU_AUX_BIAS with its pointers");
    aux_ld = 20;
    cublasLtMatmulDescSetAttribute(dg, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld);
    CHECK_LT(mm(&x, g_h, dg, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL), CUBLAS_STATUS_INVALID_VALUE,
             "aux ld 20");
    aux_ld = 16;
    cublasLtMatmulDescSetAttribute(dg, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld);
    cublasLtMatmulDescSetAttribute(dg, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &x.d, sizeof x.d);
    CHECK_LT(mm(&x, g_h, dg, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL), CUBLAS_STATUS_INVALID_VALUE,
             "D and the aux matrix overlap");

    /* the epilogues' types and strides */
    cublasLtMatmulDesc_t db = mdesc(CUBLAS_COMPUTE_32F, CUDA_R_32F);
    e = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(db, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    cublasLtMatmulDescSetAttribute(db, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &x.bias, sizeof x.bias);
    set_i32(db, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_16BF);
    CHECK_LT(mm(&x, g_h, db, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL), CUBLAS_STATUS_NOT_SUPPORTED,
             "a bf16 bias with a f32 D");
    set_i32(db, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_32F);
    int64_t neg = -16;
    cublasLtMatmulDescSetAttribute(db, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &neg, sizeof neg);
    CHECK_LT(mm(&x, g_h, db, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL), CUBLAS_STATUS_INVALID_VALUE,
             "bias batch stride -16");
    set_i32(dg, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, CUDA_R_16BF);
    CHECK_LT(mm(&x, g_h, dg, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL), CUBLAS_STATUS_NOT_SUPPORTED,
             "aux type bf16, D f32");
    CHECK_LT(cublasLtMatmulAlgoGetHeuristic(NULL, x.desc, x.la, x.lb, x.lc, x.ld, pref, 1, &res, &nres),
             CUBLAS_STATUS_NOT_INITIALIZED, "the handle is NULL");
    setenv("DTRAIN_FAKEGPU_DEVICES", "0", 1);
    cublasLtHandle_t none = NULL;
    CHECK_LT(cublasLtCreate(&none), CUBLAS_STATUS_NOT_INITIALIZED, "no device");
    setenv("DTRAIN_FAKEGPU_DEVICES", "2", 1);

    /* descriptors and their attributes */
    int32_t v32 = 0;
    size_t written = 0;
    CHECK_LT(cublasLtMatmulDescSetAttribute(x.desc, CUBLASLT_MATMUL_DESC_TRANSA, &v32, 8), CUBLAS_STATUS_INVALID_VALUE,
             "takes 4 bytes, not 8");
    CHECK_LT(cublasLtMatmulDescSetAttribute(x.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &x.a, sizeof x.a),
             CUBLAS_STATUS_NOT_SUPPORTED, "not one the fake implements");
    CHECK(cublasLtMatmulDescGetAttribute(dg, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, NULL, 0, &written) == 0 &&
              written == 8 &&
              cublasLtMatmulDescGetAttribute(dg, CUBLASLT_MATMUL_DESC_EPILOGUE, &v32, 4, &written) == 0 &&
              v32 == CUBLASLT_EPILOGUE_GELU_AUX_BIAS && written == 4 &&
              cublasLtMatmulDescGetAttribute(dg, CUBLASLT_MATMUL_DESC_EPILOGUE, NULL, 0, NULL) ==
                  CUBLAS_STATUS_INVALID_VALUE,
          "cublasLtMatmulDescGetAttribute: the size asked, the value, no place for either");
    uint64_t rows = 0;
    CHECK(cublasLtMatrixLayoutGetAttribute(x.la, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows, &written) == 0 &&
              rows == 16 &&
              cublasLtMatrixLayoutSetAttribute(x.la, CUBLASLT_MATRIX_LAYOUT_ROWS, &v32, sizeof v32) ==
                  CUBLAS_STATUS_INVALID_VALUE,
          "cublasLtMatrixLayout{Get,Set}Attribute");
    uint64_t wsmax = 0;
    CHECK(cublasLtMatmulPreferenceGetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsmax, sizeof wsmax,
                                               &written) == 0 && wsmax == 0,
          "the workspace preference defaults to 0");
    cublasLtMatrixLayoutOpaque_t small_layout;
    CHECK(cublasLtMatrixLayoutInit_internal(&small_layout, sizeof small_layout - 8, CUDA_R_32F, 4, 4, 4) ==
              CUBLAS_STATUS_ALLOC_FAILED &&
              cublasLtMatmulPreferenceGetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsmax, 4,
                                                   &written) == CUBLAS_STATUS_INVALID_VALUE,
          "Init in too little storage; an attribute read into the wrong size");
    cublasLtMatmulDescOpaque_t on_stack;
    CHECK(cublasLtMatmulDescInit(&on_stack, CUBLAS_COMPUTE_32F, CUDA_R_32F) == 0 &&
              mm(&x, g_h, &on_stack, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0, NULL) == 0,
          "a descriptor initialised in the caller's storage");
    CHECK_LT(mm(&x, g_h, (cublasLtMatmulDesc_t)(void *)host, &one, x.a, x.la, x.b, x.c, x.lc, x.d, x.ld, NULL, 0,
                NULL),
             CUBLAS_STATUS_INVALID_VALUE, "the matmul descriptor is not one cuBLASLt made");
    CHECK(strcmp(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED") == 0 &&
              strlen(cublasLtGetStatusString(CUBLAS_STATUS_INVALID_VALUE)) > 0 &&
              cublasLtGetVersion() == CUBLAS_VERSION,
          "status names, the version (%zu)", cublasLtGetVersion());
    CHECK(cublasLtMatmulPreferenceDestroy(pref) == 0 && cublasLtMatmulDescDestroy(NULL) == 0 &&
              cublasLtMatmulDescDestroy((cublasLtMatmulDesc_t)(void *)host) == CUBLAS_STATUS_INVALID_VALUE,
          "destroy: a descriptor, NULL, not a descriptor");
    for (int i = 0; i < g_nlays; i++) cublasLtMatrixLayoutDestroy(g_lays[i]);
    for (int i = 0; i < g_ndescs; i++) cublasLtMatmulDescDestroy(g_descs[i]);
    float *bufs[] = {x.a, x.b, x.c, x.d, x.bias, x.aux, x.ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
}

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) {
        printf("fakegpu_cublaslt: skipped: needs DTRAIN_FAKEGPU_DEVICES >= 2 (this process has %d)\n", ndev);
        return 77;
    }
    CHECK(cublasLtCreate(&g_h) == CUBLAS_STATUS_SUCCESS && cudaMalloc(&g_ws, WS_BYTES) == cudaSuccess,
          "a handle and a workspace");
    sweep();
    check_errors();
    CHECK(cublasLtDestroy(g_h) == CUBLAS_STATUS_SUCCESS, "the handle is destroyed");
    cudaFree(g_ws);
    return dt_test_finish("fakegpu_cublaslt");
}
