/* src/nn/cuda/cuda_matmul.cu - the linear layers on cuBLASLt, and the
 * one cuBLASLt entry the attention's batched products share (gpt_cuda_lt).
 *
 * Row-major tensors are cuBLASLt's column-major transposes, as in llm.c:
 *   forward   out[N,OC] (ld ldo) = inp[N,C] @ weight[OC,C]^T:
 *             D [OC x N] ld ldo = A^T B, A = weight [C x OC] ld C (trans),
 *             B = inp [C x N] ld C; bias through the BIAS epilogue (GELU_AUX_BIAS
 *             for matmul_gelu_forward in bf16, the GELU input kept in aux =
 *             pre; f32: the product, then the GELU kernel);
 *             resid through beta = 1 with C = resid.
 *   dinp      dinp[N,C] = dout[N,OC] @ weight: D [C x N] ld C = A B,
 *             A = weight [C x OC] ld C, B = dout [OC x N] ld lddo.
 *   dweight   dweight[OC,C] += dout^T @ inp: D [C x OC] ld C = A B^T + D,
 *             A = inp [C x N] ld C, B = dout [OC x N] ld lddo (trans), beta 1;
 *             f32 C/D also for bf16 A/B.
 *   dbias     the column sums of dout: gpt_cuda_colsum (cuda_reduce.cu).
 * Compute type: CUBLAS_COMPUTE_32F (f32: true f32, no TF32: the CPU's
 * arithmetic up to summation order; bf16: f32 accumulation), scale f32.
 *
 * Plans: the descriptors, layouts and the algorithm cuBLASLt's heuristic
 * chose are kept per instance, keyed by the whole problem (shapes, types,
 * transposes, epilogue, batch, and the alignment of every pointer, which
 * the heuristic is told); a call with a known key only sets its pointers. */
#include <stdlib.h>
#include <string.h>
#include "nn/cuda/cuda_common.cuh"

typedef struct lt_key {
    int m, n, k, lda, ldb, ldd, ta, tb, batch, ldaux;
    long long sa, sb, sd;
    int ab_type, d_type;
    unsigned epi;
    unsigned align[6]; /* A, B, C, D, bias, aux: bytes, at most 256 */
} lt_key;

struct lt_plan {
    int used;
    lt_key key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc, ld;
    cublasLtMatmulAlgo_t algo;
};

/* the alignment (bytes, at most 256) of every matrix of a batch at p */
static unsigned align_of(const void *p, long long stride, size_t es) {
    uintptr_t a = (uintptr_t)p | 256u | (uintptr_t)((unsigned long long)stride * es);
    return (unsigned)(a & (~a + 1));
}

static size_t type_size(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }
static const char *type_name(cudaDataType_t t) { return t == CUDA_R_32F ? "f32" : "bf16"; }

static void plan_drop(struct lt_plan *p) {
    if (!p->used) return;
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    if (p->ld) cublasLtMatrixLayoutDestroy(p->ld);
    memset(p, 0, sizeof *p);
}

void gpt_cuda_lt_release(gpt_be *be) {
    if (!be->plans) return;
    for (int i = 0; i < GPT_CUDA_PLANS; i++) plan_drop(&be->plans[i]);
    free(be->plans);
    be->plans = NULL;
}

#define LT(call, what)                                                                                 \
    do {                                                                                               \
        cublasStatus_t s_ = (call);                                                                    \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
            plan_drop(p);                                                                              \
            return dt_error(s_ == CUBLAS_STATUS_NOT_SUPPORTED ? DT_ERR_UNSUPPORTED : DT_ERR_BACKEND, what, \
                            "%s: %s", name, cublasLtGetStatusName(s_));                                            \
        }                                                                                              \
    } while (0)

static int layout(struct lt_plan *p, const char *name, cublasLtMatrixLayout_t *l, cudaDataType_t t, int rows,
                  int cols, int ld, int batch, long long stride) {
    LT(cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, (int64_t)ld), "cublasLtMatrixLayoutCreate");
    if (batch > 1) {
        int32_t bc = batch;
        int64_t st = stride;
        LT(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc),
           "cublasLtMatrixLayoutSetAttribute");
        LT(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof st),
           "cublasLtMatrixLayoutSetAttribute");
    }
    return DT_OK;
}

/* a new plan in p for key k (pointers of mm for the bias/aux attributes) */
static int plan_make(gpt_be *be, struct lt_plan *p, const lt_key *k, const gpt_lt_mm *mm, const char *name) {
    memset(p, 0, sizeof *p);
    p->used = 1;
    p->key = *k;
    LT(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    int32_t opa = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa),
       "cublasLtMatmulDescSetAttribute");
    LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb),
       "cublasLtMatmulDescSetAttribute");
    uint32_t epi = k->epi;
    LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
       "cublasLtMatmulDescSetAttribute");
    if (mm->bias) {
        int32_t bt = k->ab_type;
        LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt),
           "cublasLtMatmulDescSetAttribute");
        LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &mm->bias, sizeof mm->bias),
           "cublasLtMatmulDescSetAttribute");
    }
    if (mm->aux) {
        int64_t ldaux = k->ldaux;
        LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ldaux, sizeof ldaux),
           "cublasLtMatmulDescSetAttribute");
        LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &mm->aux,
                                          sizeof mm->aux),
           "cublasLtMatmulDescSetAttribute");
    }
    const cudaDataType_t ab = (cudaDataType_t)k->ab_type, dt = (cudaDataType_t)k->d_type;
    int rc = layout(p, name, &p->la, ab, k->ta ? k->k : k->m, k->ta ? k->m : k->k, k->lda, k->batch, k->sa);
    if (!rc) rc = layout(p, name, &p->lb, ab, k->tb ? k->n : k->k, k->tb ? k->k : k->n, k->ldb, k->batch, k->sb);
    if (!rc) rc = layout(p, name, &p->lc, dt, k->m, k->n, k->ldd, k->batch, k->sd);
    if (!rc) rc = layout(p, name, &p->ld, dt, k->m, k->n, k->ldd, k->batch, k->sd);
    if (rc) return rc;

    cublasLtMatmulPreference_t pref = NULL;
    LT(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    static const cublasLtMatmulPreferenceAttributes_t al[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &be->lt_ws_bytes, sizeof be->lt_ws_bytes);
    for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; i++) {
        uint32_t a = k->align[i];
        st = cublasLtMatmulPreferenceSetAttribute(pref, al[i], &a, sizeof a);
    }
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(be->lt, p->desc, p->la, p->lb, p->lc, p->ld, pref, 1, &h, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) found = 0; /* the library's other way of saying "none" */
    else LT(st, "cublasLtMatmulAlgoGetHeuristic");
    if (found < 1) {
        plan_drop(p);
        return dt_error(DT_ERR_UNSUPPORTED, "cublasLtMatmulAlgoGetHeuristic",
                        "%s: no algorithm for %s x %s -> %s, m=%d n=%d k=%d (epilogue %u, batch %d; alignment of "
                        "A %u, B %u, C %u, D %u bytes)",
                        name, type_name(ab), type_name(ab), type_name(dt), k->m, k->n, k->k, k->epi, k->batch,
                        k->align[0], k->align[1], k->align[2], k->align[3]);
    }
    p->algo = h.algo;
    return DT_OK;
}

int gpt_cuda_lt(gpt_be *be, const char *name, const gpt_lt_mm *mm) {
    if (mm->m <= 0 || mm->n <= 0 || mm->k <= 0) return DT_OK; /* nothing to compute (k 0: never asked) */
    lt_key k;
    memset(&k, 0, sizeof k);
    k.m = mm->m, k.n = mm->n, k.k = mm->k;
    k.lda = mm->lda, k.ldb = mm->ldb, k.ldd = mm->ldd, k.ta = mm->ta, k.tb = mm->tb;
    k.batch = mm->batch > 1 ? mm->batch : 1;
    if (k.batch > 1) k.sa = mm->sa, k.sb = mm->sb, k.sd = mm->sd;
    k.ab_type = mm->ab_type, k.d_type = mm->d_type;
    k.ldaux = mm->aux ? mm->ldaux : 0;
    k.epi = mm->aux ? (mm->bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                    : (mm->bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
    const size_t eab = type_size(mm->ab_type), ed = type_size(mm->d_type);
    const void *C = mm->beta != 0.0f && mm->C ? mm->C : mm->D;
    k.align[0] = align_of(mm->A, k.sa, eab);
    k.align[1] = align_of(mm->B, k.sb, eab);
    k.align[2] = align_of(C, k.sd, ed);
    k.align[3] = align_of(mm->D, k.sd, ed);
    k.align[4] = mm->bias ? align_of(mm->bias, 0, eab) : 0;
    k.align[5] = mm->aux ? align_of(mm->aux, 0, ed) : 0;

    if (!be->plans) {
        be->plans = (struct lt_plan *)calloc(GPT_CUDA_PLANS, sizeof(struct lt_plan));
        if (!be->plans) return dt_error(DT_ERR_NOMEM, name, "cuBLASLt plans");
    }
    struct lt_plan *p = NULL;
    for (int i = 0; i < GPT_CUDA_PLANS && !p; i++)
        if (be->plans[i].used && memcmp(&be->plans[i].key, &k, sizeof k) == 0) p = &be->plans[i];
    if (!p) {
        p = &be->plans[be->plan_next];
        be->plan_next = (be->plan_next + 1) % GPT_CUDA_PLANS;
        plan_drop(p);
        int rc = plan_make(be, p, &k, mm, name);
        if (rc) return rc;
    } else {
        if (mm->bias)
            LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &mm->bias,
                                              sizeof mm->bias),
               "cublasLtMatmulDescSetAttribute");
        if (mm->aux)
            LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &mm->aux,
                                              sizeof mm->aux),
               "cublasLtMatmulDescSetAttribute");
    }
    const float alpha = mm->alpha, beta = mm->beta;
    LT(cublasLtMatmul(be->lt, p->desc, &alpha, mm->A, p->la, mm->B, p->lb, &beta, C, p->lc, mm->D, p->ld, &p->algo,
                      be->lt_ws, be->lt_ws_bytes, be->stream),
       "cublasLtMatmul");
    return DT_OK;
}

/* ---- the linear layers --------------------------------------------------------------------- */

static cudaDataType_t act_type(const gpt_be *be) { return be->prec == GPT_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

static gpt_lt_mm forward_mm(gpt_be *be, void *out, const void *inp, const void *weight, const void *bias, int N,
                            int C, int OC, int ldo) {
    gpt_lt_mm mm;
    memset(&mm, 0, sizeof mm);
    mm.m = OC, mm.n = N, mm.k = C;
    mm.A = weight, mm.lda = C, mm.ta = 1;
    mm.B = inp, mm.ldb = C, mm.tb = 0;
    mm.D = out, mm.ldd = ldo;
    mm.alpha = 1.0f, mm.beta = 0.0f;
    mm.ab_type = mm.d_type = act_type(be);
    mm.bias = bias;
    return mm;
}

extern "C" int gpt_cuda_matmul_forward(gpt_be *be, void *out, const void *resid, const void *inp,
                                       const void *weight, const void *bias, int N, int C, int OC, int ldo) {
    gpt_lt_mm mm = forward_mm(be, out, inp, weight, bias, N, C, OC, ldo);
    if (resid) mm.C = resid, mm.beta = 1.0f;
    return gpt_cuda_lt(be, "matmul_forward", &mm);
}

extern "C" int gpt_cuda_matmul_gelu_forward(gpt_be *be, void *out, void *pre, const void *inp, const void *weight,
                                            const void *bias, int N, int C, int OC) {
    /* bf16: fused, out = gelu(pre) with pre kept through the GELU_AUX(_BIAS)
     * epilogue (its leading dimension must be a multiple of 8). f32 is the
     * CPU's arithmetic to rounding: its GELU is dt_gelu_tanh's
     * (cuda_elementwise.cu), not the epilogue's, whose precision cuBLASLt
     * does not state (CUTLASS's GELU epilogues use tanh.approx.f32, 2^-11
     * relative: within bf16's rounding, 100 times f32's); the extra pass
     * costs little beside f32's GEMMs, which run without tensor cores. */
    if (be->prec == GPT_BF16 && OC % 8 == 0 && !be->gelu_unfused) {
        gpt_lt_mm mm = forward_mm(be, out, inp, weight, bias, N, C, OC, OC);
        mm.aux = pre, mm.ldaux = OC;
        int rc = gpt_cuda_lt(be, "matmul_gelu_forward", &mm);
        if (rc != DT_ERR_UNSUPPORTED) return rc;
        dt_clear_error(); /* no fused algorithm here: the two steps, from now on */
        be->gelu_unfused = 1;
    }
    int rc = gpt_cuda_matmul_forward(be, pre, NULL, inp, weight, bias, N, C, OC, OC);
    if (rc) return rc;
    return gpt_cuda_gelu_forward(be, out, pre, (size_t)N * (size_t)OC);
}

extern "C" int gpt_cuda_matmul_backward(gpt_be *be, void *dinp, float *dweight, float *dbias, const void *dout,
                                        const void *inp, const void *weight, int N, int C, int OC, int lddo) {
    int rc;
    if (dbias && (rc = gpt_cuda_colsum(be, dbias, NULL, dout, lddo, NULL, NULL, NULL, N, OC))) return rc;
    gpt_lt_mm mm;
    if (dinp) { /* dinp [C x N] = weight [C x OC] @ dout [OC x N] */
        memset(&mm, 0, sizeof mm);
        mm.m = C, mm.n = N, mm.k = OC;
        mm.A = weight, mm.lda = C, mm.ta = 0;
        mm.B = dout, mm.ldb = lddo, mm.tb = 0;
        mm.D = dinp, mm.ldd = C;
        mm.alpha = 1.0f, mm.beta = 0.0f;
        mm.ab_type = mm.d_type = act_type(be);
        if ((rc = gpt_cuda_lt(be, "matmul_backward (dinp)", &mm))) return rc;
    }
    /* dweight [C x OC] += inp [C x N] @ dout^T [N x OC] */
    memset(&mm, 0, sizeof mm);
    mm.m = C, mm.n = OC, mm.k = N;
    mm.A = inp, mm.lda = C, mm.ta = 0;
    mm.B = dout, mm.ldb = lddo, mm.tb = 1;
    mm.D = dweight, mm.ldd = C, mm.C = dweight;
    mm.alpha = 1.0f, mm.beta = 1.0f;
    mm.ab_type = act_type(be), mm.d_type = CUDA_R_32F;
    return gpt_cuda_lt(be, "matmul_backward (dweight)", &mm);
}
