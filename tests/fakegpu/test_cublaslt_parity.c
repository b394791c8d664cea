/* fakegpu_cublaslt_parity: the fake cuBLASLt's float32 products are dtrain's
 * CPU GPT kernels (src/nn/gpt_kernels.c) bit for bit, on random inputs, at
 * (N, C, OC) = (128, 64, 192) and (37, 96, 50), so that a GPT trained on
 * the fake GPU can be compared with the CPU one exactly:
 *  - the linear layer's forward with bias and residual in place (C == D,
 *    epilogue BIAS) in cuBLASLt's column-major form (llm.c's), and without
 *    bias (also in row-major form: there, cuBLASLt's bias would be one per
 *    row of D, i.e. per token, not per output feature), without residual,
 *    without either: gpt_matmul_forward;
 *  - the fused forward with GELU (GELU_AUX_BIAS: D and the aux matrix):
 *    gpt_matmul_forward then gpt_gelu_forward;
 *  - the backward: dinp (beta 0), dweight accumulated (beta 1, in place) with
 *    the bias gradient (BGRADB, into a zeroed dbias): gpt_matmul_backward;
 *  - the GELU backward fused into dinp's product (DGELU): gpt_matmul_backward
 *    then gpt_gelu_backward. */
#define _POSIX_C_SOURCE 200809L
#include <cublasLt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fakegpu.h"
#include "nn/gpt_internal.h"
#include "testutil.h"

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;

static float rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *host_rand(size_t n) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; x && i < n; i++) x[i] = rnd();
    return x;
}

static float *dev_copy(const float *h, size_t n) {
    void *d = NULL;
    if (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) return NULL;
    if (h) cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    else cudaMemset(d, 0xFF, n * sizeof(float)); /* poison: NaN */
    return d;
}

/* 1 if the device array equals the host one bit for bit; else says where */
static int same_bits(const float *dev, const float *want, size_t n, const char *what) {
    float *got = malloc(n * sizeof *got);
    int same = got && cudaMemcpy(got, dev, n * sizeof *got, cudaMemcpyDeviceToHost) == cudaSuccess &&
               memcmp(got, want, n * sizeof *got) == 0;
    for (size_t i = 0; got && !same && i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float))) {
            fprintf(stderr, "%s: first difference at %zu: %.9g, CPU %.9g\n", what, i, (double)got[i],
                    (double)want[i]);
            break;
        }
    free(got);
    return same;
}

/* One cuBLASLt product, f32, every matrix in `order`; the layouts as stored
 * (A: ar x ac, B: br x bc, C and D: m x n). bias and aux as the epilogue wants. */
typedef struct mm {
    int order, ta, tb;
    int ar, ac, lda, br, bc, ldb, m, n, ldd;
    const float *a, *b, *c;
    float *d;
    float beta;
    uint32_t epi;
    void *bias, *aux;
    int64_t auxld;
} mm;

static cublasLtHandle_t g_h;

static cublasStatus_t run(const mm *x) {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    int32_t opa = x->ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = x->tb ? CUBLAS_OP_T : CUBLAS_OP_N, ord = x->order;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &x->epi, sizeof x->epi);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &x->bias, sizeof x->bias);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &x->aux, sizeof x->aux);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &x->auxld, sizeof x->auxld);
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, (uint64_t)x->ar, (uint64_t)x->ac, x->lda);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, (uint64_t)x->br, (uint64_t)x->bc, x->ldb);
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, (uint64_t)x->m, (uint64_t)x->n, x->ldd);
    cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_ORDER, &ord, sizeof ord);
    cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_ORDER, &ord, sizeof ord);
    cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_ORDER, &ord, sizeof ord);
    const float alpha = 1.0f;
    cublasStatus_t st = cublasLtMatmul(g_h, desc, &alpha, x->a, la, x->b, lb, &x->beta, x->c, ld, x->d, ld, NULL,
                                       NULL, 0, NULL);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
    return st;
}

enum { COL = CUBLASLT_ORDER_COL, ROW = CUBLASLT_ORDER_ROW };

static void check_size(int N, int C, int OC) {
    size_t nNC = (size_t)N * C, nNO = (size_t)N * OC, nOC = (size_t)OC * C;
    float *inp = host_rand(nNC), *w = host_rand(nOC), *bias = host_rand(OC), *resid = host_rand(nNO);
    float *dout = host_rand(nNO), *dw0 = host_rand(nOC), *pre_c = host_rand(nNC);
    float *want = malloc(nNO * sizeof *want), *want2 = malloc(nNO * sizeof *want2);
    float *wdinp = malloc(nNC * sizeof *wdinp), *wdw = malloc(nOC * sizeof *wdw), *wdb = calloc((size_t)OC, 4);
    float *d_inp = dev_copy(inp, nNC), *d_w = dev_copy(w, nOC), *d_bias = dev_copy(bias, (size_t)OC);
    float *d_out = dev_copy(NULL, nNO), *d_aux = dev_copy(NULL, (size_t)N * ((OC + 7) / 8 * 8));
    float *d_dout = dev_copy(dout, nNO), *d_dinp = dev_copy(NULL, nNC), *d_dw = dev_copy(dw0, nOC);
    float *d_db = dev_copy(NULL, (size_t)OC), *d_pre = dev_copy(pre_c, nNC);
    if (!inp || !w || !bias || !resid || !dout || !dw0 || !pre_c || !want || !want2 || !wdinp || !wdw || !wdb ||
        !d_inp || !d_w || !d_bias || !d_out || !d_aux || !d_dout || !d_dinp || !d_dw || !d_db || !d_pre) {
        CHECK(0, "memory for N=%d C=%d OC=%d", N, C, OC);
        return;
    }
    char what[96];
    snprintf(what, sizeof what, "N=%d C=%d OC=%d", N, C, OC);
    /* llm.c's column-major form: out^T[OC,N] = W^T' ... : m OC, n N, k C, A = W (C x OC) T, B = inp (C x N) N */
    mm fwd = {COL, 1, 0, C, OC, C, C, N, C, OC, N, OC, d_w, d_inp, d_out, d_out, 1.0f,
              CUBLASLT_EPILOGUE_BIAS, d_bias, NULL, 0};
    /* row-major: out[N,OC] = inp[N,C] W[OC,C]^T */
    mm fwd_row = {ROW, 0, 1, N, C, C, OC, C, C, N, OC, OC, d_inp, d_w, d_out, d_out, 1.0f,
                  CUBLASLT_EPILOGUE_BIAS, d_bias, NULL, 0};
    struct { const char *name; const mm *x; int resid, bias; } fw[] = {
        {"bias + residual in place, column-major", &fwd, 1, 1},
        {"residual in place, row-major (a bias would be one per row of D here)", &fwd_row, 1, 0},
        {"bias, no residual", &fwd, 0, 1},
        {"residual in place, no bias", &fwd, 1, 0},
        {"neither", &fwd, 0, 0},
    };
    for (size_t i = 0; i < sizeof fw / sizeof fw[0]; i++) {
        mm x = *fw[i].x;
        x.beta = fw[i].resid ? 1.0f : 0.0f;
        x.c = fw[i].resid ? d_out : NULL;
        x.epi = fw[i].bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
        memcpy(want, resid, nNO * sizeof *want);
        gpt_matmul_forward(want, fw[i].resid ? want : NULL, inp, w, fw[i].bias ? bias : NULL, N, C, OC);
        if (fw[i].resid)
            cudaMemcpy(d_out, resid, nNO * sizeof(float), cudaMemcpyHostToDevice);
        else
            cudaMemset(d_out, 0xFF, nNO * sizeof(float));
        CHECK(run(&x) == CUBLAS_STATUS_SUCCESS && same_bits(d_out, want, nNO, what),
              "%s: forward, %s: the fake's bits are gpt_matmul_forward's", what, fw[i].name);
    }

    /* GELU fused: pre = inp W^T + bias (aux, row stride auxld), out = gelu(pre) */
    int64_t auxld = (OC + 7) / 8 * 8;
    mm gl = fwd;
    gl.beta = 0.0f;
    gl.c = NULL;
    gl.epi = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    gl.aux = d_aux;
    gl.auxld = auxld;
    cudaMemset(d_out, 0xFF, nNO * sizeof(float));
    gpt_matmul_forward(want2, NULL, inp, w, bias, N, C, OC);
    gpt_gelu_forward(want, want2, nNO);
    int aux_same = run(&gl) == CUBLAS_STATUS_SUCCESS && same_bits(d_out, want, nNO, what);
    for (int n = 0; n < N && aux_same; n++)
        aux_same = same_bits(d_aux + (size_t)n * (size_t)auxld, want2 + (size_t)n * OC, (size_t)OC, what);
    CHECK(aux_same, "%s: GELU_AUX_BIAS: D is gpt_gelu_forward's, aux gpt_matmul_forward's, bit for bit", what);

    /* backward: dinp = dout W (beta 0), dweight += inp^T-ish (beta 1, in place) with BGRADB into dbias */
    memcpy(wdw, dw0, nOC * sizeof *wdw);
    gpt_matmul_backward(wdinp, wdw, wdb, dout, inp, w, N, C, OC);
    mm bdi = {COL, 0, 0, C, OC, C, OC, N, OC, C, N, C, d_w, d_dout, NULL, d_dinp, 0.0f,
              CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL, 0};
    mm bdw = {COL, 0, 1, C, N, C, OC, N, OC, C, OC, C, d_inp, d_dout, d_dw, d_dw, 1.0f,
              CUBLASLT_EPILOGUE_BGRADB, d_db, NULL, 0};
    CHECK(run(&bdi) == CUBLAS_STATUS_SUCCESS && same_bits(d_dinp, wdinp, nNC, what),
          "%s: dinp is gpt_matmul_backward's bit for bit", what);
    CHECK(run(&bdw) == CUBLAS_STATUS_SUCCESS && same_bits(d_dw, wdw, nOC, what),
          "%s: dweight (accumulated in place) is gpt_matmul_backward's bit for bit", what);
    CHECK(same_bits(d_db, wdb, (size_t)OC, what), "%s: BGRADB's bias gradient is gpt_matmul_backward's dbias "
          "(accumulated into zeros) bit for bit", what);

    /* DGELU: dpre = gelu'(pre) * (dout W) in one product */
    gpt_gelu_backward(wdinp, pre_c, wdinp, nNC);
    mm dg = bdi;
    dg.epi = CUBLASLT_EPILOGUE_DGELU;
    dg.aux = d_pre;
    dg.auxld = C;
    cudaMemset(d_dinp, 0xFF, nNC * sizeof(float));
    CHECK(run(&dg) == CUBLAS_STATUS_SUCCESS && same_bits(d_dinp, wdinp, nNC, what),
          "%s: DGELU is gpt_matmul_backward then gpt_gelu_backward, bit for bit", what);

    float *hb[] = {inp, w, bias, resid, dout, dw0, pre_c, want, want2, wdinp, wdw, wdb};
    float *db[] = {d_inp, d_w, d_bias, d_out, d_aux, d_dout, d_dinp, d_dw, d_db, d_pre};
    for (size_t i = 0; i < sizeof hb / sizeof hb[0]; i++) free(hb[i]);
    for (size_t i = 0; i < sizeof db / sizeof db[0]; i++) cudaFree(db[i]);
}

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("fakegpu_cublaslt_parity: skipped: no fake device (DTRAIN_FAKEGPU_DEVICES=0)\n");
        return 77;
    }
    CHECK(cublasLtCreate(&g_h) == CUBLAS_STATUS_SUCCESS, "a handle");
    check_size(128, 64, 192);
    check_size(37, 96, 50);
    cublasLtDestroy(g_h);
    return dt_test_finish("fakegpu_cublaslt_parity");
}
