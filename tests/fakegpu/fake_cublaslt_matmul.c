/* tests/fakegpu/fake_cublaslt_matmul.c - cublasLtMatmul and its heuristic on
 * the CPU (fakegpu.h): D = alpha op(A) op(B) + beta C with cuBLASLt's
 * epilogues, on the shadows of device memory, through OpenBLAS.
 *
 * WHAT IS SUPPORTED (anything else: CUBLAS_STATUS_NOT_SUPPORTED and a line on
 * stderr): A/B/C/D float32, or A/B bfloat16 with C/D bfloat16 or float32;
 * compute CUBLAS_COMPUTE_32F (bf16 inputs), or 32F, 32F_FAST_TF32,
 * 32F_FAST_16BF (f32 inputs), all computed in float32 here; scale type f32,
 * alpha and beta in host memory; op N or T (C is T for real types); orders
 * COL and ROW (C and D the same); strided batches; the epilogues DEFAULT,
 * RELU, BIAS, RELU_BIAS, GELU, GELU_AUX, GELU_BIAS, GELU_AUX_BIAS, DGELU,
 * DGELU_BGRAD, BGRADA, BGRADB. The bias (and bias gradient) type defaults to
 * D's and may be f32 (or bf16 with a bf16 D); it has one element per row of D
 * (BGRADB: per column), in ROW order too; the aux matrix has D's type and
 * D's order, with its own leading dimension (>= D's rows for COL, cols for
 * ROW; a multiple of 8). Bias gradients are written, not accumulated.
 *
 * HOW (bit parity with dtrain's CPU kernels, gpt_kernels.c): bf16 operands
 * are widened to float; a bias epilogue first fills D with beta*C + bias
 * (beta 1: C + bias; beta 0: bias), then one cblas_sgemm with beta 1;
 * without a bias C is copied into D (unless C == D) and cblas_sgemm runs with
 * beta (beta 0: D zeroed first). The column-major layouts go to
 * cblas_sgemm(CblasColMajor, ...) as they are (a row-major matrix is its
 * transpose in column-major; a row-major D swaps A and B), which is the call
 * OpenBLAS makes of dtrain's row-major ones: the same kernel, the same bits.
 * The epilogue then works on D in float: GELU and its gradient through
 * dtrain's gpt_gelu_forward / gpt_gelu_backward (aux: the pre-GELU value,
 * bias included), bias gradients summed in float in index order from 0;
 * finally a bf16 D is rounded to nearest even.
 *
 * CHECKS: the handle (CUBLAS_STATUS_NOT_INITIALIZED), the descriptors, the
 * sizes and leading dimensions, every matrix, the bias, the aux and the
 * workspace as device memory of the handle's device, aligned to its element
 * and with room for its layout and batches, no output overlapping another
 * operand or the workspace (C == D in place with the same layout aside):
 * CUBLAS_STATUS_INVALID_VALUE;
 * the stream live (CUBLAS_STATUS_EXECUTION_FAILED). The one algorithm needs no
 * workspace. */
#define _GNU_SOURCE
#include <cblas.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dtrain/dtype.h"
#include "fake_cublaslt.h"
#include "fakegpu.h"
#include "nn/gpt_internal.h"

/* ---- the epilogues ----------------------------------------------------------------------- */

enum {
    E_BIAS = 1,       /* adds the bias vector (D's rows) */
    E_RELU = 2,
    E_GELU = 4,
    E_AUX_OUT = 8,    /* writes the pre-activation into aux */
    E_DGELU = 16,     /* multiplies by gelu'(aux) */
    E_BGRAD_D = 32,   /* bias gradient: D's rows summed over its columns */
    E_BGRAD_A = 64,   /* bias gradient: op(A) summed over k */
    E_BGRAD_B = 128,  /* bias gradient: op(B) summed over k (D's columns) */
};

typedef struct epi {
    uint32_t id;
    const char *name;
    unsigned what;
} epi;

static const epi k_epis[] = {
    {CUBLASLT_EPILOGUE_DEFAULT, "DEFAULT", 0},
    {CUBLASLT_EPILOGUE_RELU, "RELU", E_RELU},
    {CUBLASLT_EPILOGUE_BIAS, "BIAS", E_BIAS},
    {CUBLASLT_EPILOGUE_RELU_BIAS, "RELU_BIAS", E_BIAS | E_RELU},
    {CUBLASLT_EPILOGUE_GELU, "GELU", E_GELU},
    {CUBLASLT_EPILOGUE_GELU_AUX, "GELU_AUX", E_GELU | E_AUX_OUT},
    {CUBLASLT_EPILOGUE_GELU_BIAS, "GELU_BIAS", E_GELU | E_BIAS},
    {CUBLASLT_EPILOGUE_GELU_AUX_BIAS, "GELU_AUX_BIAS", E_GELU | E_AUX_OUT | E_BIAS},
    {CUBLASLT_EPILOGUE_DGELU, "DGELU", E_DGELU},
    {CUBLASLT_EPILOGUE_DGELU_BGRAD, "DGELU_BGRAD", E_DGELU | E_BGRAD_D},
    {CUBLASLT_EPILOGUE_BGRADA, "BGRADA", E_BGRAD_A},
    {CUBLASLT_EPILOGUE_BGRADB, "BGRADB", E_BGRAD_B},
};

#define E_BIAS_PTR (E_BIAS | E_BGRAD_D | E_BGRAD_A | E_BGRAD_B)
#define E_BGRAD (E_BGRAD_D | E_BGRAD_A | E_BGRAD_B)
#define E_AUX (E_AUX_OUT | E_DGELU)

/* ---- the problem: descriptors checked and decoded ----------------------------------------- */

typedef struct mat {
    fk_lt_layout l;
    size_t esize;   /* bytes per element */
    int64_t rs, cs; /* element (r, c) at r*rs + c*cs */
    int64_t span;   /* elements one matrix reaches (gaps included) */
    size_t bytes;   /* all the batch's matrices reach */
} mat;

typedef struct problem {
    fk_lt_desc d;
    mat a, b, c, dd;
    int m, n, k;
    int ta, tb;        /* op(A), op(B) transposed */
    int batch;
    unsigned what;     /* E_* */
    int bias_type;     /* cudaDataType_t of the bias or its gradient */
    size_t bias_len;   /* elements */
    int64_t aux_rs, aux_cs, aux_span;
    size_t bias_bytes, aux_bytes; /* the batch's */
} problem;

static size_t type_size(int t) { return t == CUDA_R_16BF ? 2 : 4; }

static const char *type_name(int t) {
    return t == CUDA_R_32F ? "f32" : t == CUDA_R_16BF ? "bf16" : t == CUDA_R_16F ? "f16" : "another type";
}

/* bytes of `batch` arrays of `span` elements, `stride` elements apart:
 * 0, or -1 if the stride is negative or the size overflows */
static int batch_bytes(int64_t batch, int64_t stride, int64_t span, size_t esize, size_t *bytes) {
    int64_t elems;
    if (stride < 0 || __builtin_mul_overflow(batch - 1, stride, &elems) ||
        __builtin_add_overflow(elems, span, &elems) || __builtin_mul_overflow((size_t)elems, esize, bytes))
        return -1;
    return 0;
}

static int mat_init(mat *x, const fk_lt_layout *l, const char *name, const char *who, cublasStatus_t *st) {
    x->l = *l;
    x->esize = type_size((int)l->type);
    if (l->order != CUBLASLT_ORDER_COL && l->order != CUBLASLT_ORDER_ROW) {
        fprintf(stderr, "fakegpu: %s: %s: order %d (the fake has COL and ROW)\n", who, name, l->order);
        *st = CUBLAS_STATUS_NOT_SUPPORTED;
        return -1;
    }
    if (l->batch_mode != CUBLASLT_BATCH_MODE_STRIDED || l->plane_offset != 0) {
        fprintf(stderr, "fakegpu: %s: %s: pointer-array batches and planar layouts are not supported\n", who, name);
        *st = CUBLAS_STATUS_NOT_SUPPORTED;
        return -1;
    }
    int col = l->order == CUBLASLT_ORDER_COL;
    uint64_t inner = col ? l->rows : l->cols, outer = col ? l->cols : l->rows;
    x->span = 0;
    if (l->rows >= 1 && l->cols >= 1 && l->rows <= INT_MAX && l->cols <= INT_MAX && l->ld <= INT_MAX)
        x->span = (int64_t)(outer - 1) * l->ld + (int64_t)inner;
    if (x->span == 0 || l->ld < (int64_t)inner || l->batch < 1 ||
        batch_bytes(l->batch, l->batch_stride, x->span, x->esize, &x->bytes)) {
        fprintf(stderr, "fakegpu: %s: %s: %llu x %llu, ld %lld (%s-major), batch %d, stride %lld: not a valid layout\n",
                who, name, (unsigned long long)l->rows, (unsigned long long)l->cols, (long long)l->ld,
                col ? "column" : "row", l->batch, (long long)l->batch_stride);
        *st = CUBLAS_STATUS_INVALID_VALUE;
        return -1;
    }
    x->rs = col ? 1 : l->ld;
    x->cs = col ? l->ld : 1;
    return 0;
}

/* Checks what needs no pointer; fills p. CUBLAS_STATUS_SUCCESS or the status
 * the real library gives, with the reason on stderr. */
static cublasStatus_t problem_init(problem *p, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t A,
                                   cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
                                   const char *who) {
    fk_lt_layout la, lb, lc, ld;
    memset(p, 0, sizeof *p);
    if (fk_lt_desc_read(desc, &p->d, who) || fk_lt_layout_read(A, &la, who) || fk_lt_layout_read(B, &lb, who) ||
        fk_lt_layout_read(C, &lc, who) || fk_lt_layout_read(D, &ld, who))
        return CUBLAS_STATUS_INVALID_VALUE;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    int ta = (int)la.type, tc = (int)lc.type;
    if (la.type != lb.type || lc.type != ld.type || !(ta == CUDA_R_32F || ta == CUDA_R_16BF) ||
        !(tc == CUDA_R_32F || (tc == CUDA_R_16BF && ta == CUDA_R_16BF))) {
        fprintf(stderr, "fakegpu: %s: types A %s, B %s, C %s, D %s: not a combination the fake supports\n", who,
                type_name(ta), type_name((int)lb.type), type_name(tc), type_name((int)ld.type));
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    int cp = p->d.compute;
    if (!(cp == CUBLAS_COMPUTE_32F ||
          (ta == CUDA_R_32F && (cp == CUBLAS_COMPUTE_32F_FAST_TF32 || cp == CUBLAS_COMPUTE_32F_FAST_16BF)))) {
        fprintf(stderr, "fakegpu: %s: compute type %d with %s inputs is not supported\n", who, cp, type_name(ta));
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (p->d.scale != CUDA_R_32F || p->d.pointer_mode != CUBLASLT_POINTER_MODE_HOST ||
        p->d.transc != CUBLAS_OP_N || p->d.fill_mode != CUBLAS_FILL_MODE_FULL) {
        fprintf(stderr, "fakegpu: %s: scale type %d, pointer mode %d, transc %d, fill mode %d: the fake has f32 "
                "scalars in host memory, transc N, fill mode FULL\n", who, p->d.scale, p->d.pointer_mode,
                p->d.transc, p->d.fill_mode);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    int32_t tra = p->d.transa, trb = p->d.transb;
    if (tra < CUBLAS_OP_N || tra > CUBLAS_OP_C || trb < CUBLAS_OP_N || trb > CUBLAS_OP_C) {
        fprintf(stderr, "fakegpu: %s: transa %d, transb %d are not operations\n", who, tra, trb);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    p->ta = tra != CUBLAS_OP_N;
    p->tb = trb != CUBLAS_OP_N;
    if (mat_init(&p->a, &la, "A", who, &st) || mat_init(&p->b, &lb, "B", who, &st) ||
        mat_init(&p->c, &lc, "C", who, &st) || mat_init(&p->dd, &ld, "D", who, &st))
        return st;
    p->m = (int)ld.rows;
    p->n = (int)ld.cols;
    int am = (int)(p->ta ? la.cols : la.rows), ak = (int)(p->ta ? la.rows : la.cols);
    int bk = (int)(p->tb ? lb.cols : lb.rows), bn = (int)(p->tb ? lb.rows : lb.cols);
    if (am != p->m || bn != p->n || ak != bk || lc.rows != ld.rows || lc.cols != ld.cols) {
        fprintf(stderr, "fakegpu: %s: sizes do not match: op(A) %d x %d, op(B) %d x %d, C %llu x %llu, D %d x %d\n",
                who, am, ak, bk, bn, (unsigned long long)lc.rows, (unsigned long long)lc.cols, p->m, p->n);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    p->k = ak;
    if (lc.order != ld.order) {
        fprintf(stderr, "fakegpu: %s: C and D have different orders\n", who);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (la.batch != ld.batch || lb.batch != ld.batch || lc.batch != ld.batch) {
        fprintf(stderr, "fakegpu: %s: batch counts A %d, B %d, C %d, D %d differ\n", who, la.batch, lb.batch,
                lc.batch, ld.batch);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    p->batch = ld.batch;
    const epi *e = NULL;
    for (size_t i = 0; i < sizeof k_epis / sizeof k_epis[0]; i++)
        if (k_epis[i].id == p->d.epilogue) e = &k_epis[i];
    if (!e) {
        fprintf(stderr, "fakegpu: %s: epilogue %u is not one the fake supports\n", who, p->d.epilogue);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    p->what = e->what;
    p->bias_type = tc;
    if (p->what & E_BIAS_PTR) {
        p->bias_type = p->d.bias_type == -1 ? tc : p->d.bias_type;
        if (!(p->bias_type == CUDA_R_32F || (p->bias_type == CUDA_R_16BF && tc == CUDA_R_16BF))) {
            fprintf(stderr, "fakegpu: %s: epilogue %s: a %s bias with a %s D is not supported\n", who, e->name,
                    type_name(p->bias_type), type_name(tc));
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
        p->bias_len = (size_t)(p->what & E_BGRAD_B ? p->n : p->m);
        if (batch_bytes(p->batch, p->d.bias_batch_stride, (int64_t)p->bias_len, type_size(p->bias_type),
                        &p->bias_bytes)) {
            fprintf(stderr, "fakegpu: %s: bias batch stride %lld: negative, or the batches overflow\n", who, (long long)p->d.bias_batch_stride);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    if (p->what & E_AUX) {
        int at = p->d.aux_type == -1 ? tc : p->d.aux_type;
        int col = ld.order == CUBLASLT_ORDER_COL;
        int64_t inner = col ? p->m : p->n, outer = col ? p->n : p->m, ald = p->d.aux_ld;
        if (at != tc) {
            fprintf(stderr, "fakegpu: %s: epilogue %s: aux type %s, D %s: the fake keeps aux in D's type\n", who,
                    e->name, type_name(at), type_name(tc));
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
        if (ald < inner || ald > INT_MAX || ald % 8 || p->d.aux_batch_stride < 0 || p->d.aux_batch_stride % 8) {
            fprintf(stderr, "fakegpu: %s: epilogue %s: aux ld %lld, batch stride %lld (ld >= %lld, both multiples "
                    "of 8)\n", who, e->name, (long long)ald, (long long)p->d.aux_batch_stride, (long long)inner);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        p->aux_rs = col ? 1 : ald;
        p->aux_cs = col ? ald : 1;
        p->aux_span = (outer - 1) * ald + inner;
        if (batch_bytes(p->batch, p->d.aux_batch_stride, p->aux_span, type_size(tc), &p->aux_bytes)) {
            fprintf(stderr, "fakegpu: %s: epilogue %s: the aux matrix's batches overflow\n", who, e->name);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- the heuristic: one algorithm for everything supported ---------------------------------- */

/* DTRAIN_FAKEGPU_LT_NOALGO (fakegpu.h): whether p is one the heuristic is
 * told to find no algorithm for; *as_status: refuse with
 * CUBLAS_STATUS_NOT_SUPPORTED rather than a count of 0 */
static _Atomic long g_refused;
long fk_lt_refused(void) { return g_refused; }

static int has_token(const char *list, const char *tok) {
    const size_t n = strlen(tok);
    for (const char *s = list; (s = strstr(s, tok)) != NULL; s += n)
        if ((s == list || s[-1] == ',') && (s[n] == '\0' || s[n] == ','))
            return 1;
    return 0;
}

static int told_to_refuse(const problem *p, int *as_status) {
    const char *v = getenv("DTRAIN_FAKEGPU_LT_NOALGO");
    if (!v || !*v) return 0;
    const int gelu_aux = (p->what & E_GELU) && (p->what & E_AUX_OUT);
    const int bf16_f32 = p->a.l.type == CUDA_R_16BF && p->dd.l.type == CUDA_R_32F;
    if (!(gelu_aux && has_token(v, "gelu_aux")) && !(bf16_f32 && has_token(v, "bf16_f32"))) return 0;
    *as_status = has_token(v, "status");
    return 1;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                                              cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int *count) {
    const char *who = "cublasLtMatmulAlgoGetHeuristic";
    if (count) *count = 0;
    if (!fk_lt_handle_ok(h, NULL, who)) return CUBLAS_STATUS_NOT_INITIALIZED;
    fk_lt_pref pr;
    if (fk_lt_pref_read(pref, &pr, who)) return CUBLAS_STATUS_INVALID_VALUE;
    if (requested <= 0 || !results || !count) {
        fprintf(stderr, "fakegpu: %s: %d results asked for, into %p (count %p)\n", who, requested, (void *)results,
                (void *)count);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    problem p;
    cublasStatus_t st = problem_init(&p, desc, A, B, C, D, who);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    int as_status = 0;
    if (told_to_refuse(&p, &as_status)) {
        g_refused++;
        return as_status ? CUBLAS_STATUS_NOT_SUPPORTED : CUBLAS_STATUS_SUCCESS;
    }
    memset(&results[0], 0, sizeof results[0]);
    results[0].algo.data[0] = FK_LT_ALGO;
    results[0].workspaceSize = 0;
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *count = 1;
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- operands: device memory checked, reached through its shadow ----------------------------- */

typedef struct operand {
    const char *name;
    const char *dev;  /* the caller's pointer (device address) */
    size_t bytes;
    char *host;       /* its shadow */
    int out;          /* written by the product */
} operand;

/* x->dev..+bytes as device memory of device `dev`, aligned to `align`: x->host */
static int operand_check(operand *x, int dev, size_t align, const char *who) {
    int kind, d;
    void *host;
    const char *why = NULL;
    if (!x->dev)
        why = "is NULL";
    else if ((uintptr_t)x->dev % align)
        why = "is not aligned to its element";
    else {
        int rc = fk_mem(x->dev, x->bytes, &kind, &d, &host);
        if (kind != FK_DEVICE && kind != FK_MANAGED)
            why = kind == FK_HOST ? "is pinned host memory, not device memory" : "is host memory, not device memory";
        else if (kind == FK_DEVICE && d != dev)
            why = "is device memory of another device than the handle's";
        else if (rc)
            why = "runs past the end of its allocation";
    }
    if (why) {
        fprintf(stderr, "fakegpu: %s: %s (%p, %zu bytes) %s\n", who, x->name, (const void *)x->dev, x->bytes, why);
        return -1;
    }
    x->host = host;
    return 0;
}

static int overlap(const operand *x, const operand *y) {
    return x->dev < y->dev + y->bytes && y->dev < x->dev + x->bytes;
}

/* ---- element access in float --------------------------------------------------------------- */

static float get(const char *base, int type, int64_t i) {
    if (type == CUDA_R_32F) {
        float f;
        memcpy(&f, base + (size_t)i * 4, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, base + (size_t)i * 2, 2);
    return dt_bf16_to_f32(h);
}

static void put(char *base, int type, int64_t i, float v) {
    if (type == CUDA_R_32F) {
        memcpy(base + (size_t)i * 4, &v, 4);
        return;
    }
    uint16_t h = dt_f32_to_bf16(v);
    memcpy(base + (size_t)i * 2, &h, 2);
}

/* x's matrix (span elements from base) as float: base itself for f32 (aligned,
 * checked), else a widened copy (*tmp, to free) */
static float *as_float(char *base, const mat *x, float **tmp) {
    *tmp = NULL;
    if (x->l.type == CUDA_R_32F) return (float *)(void *)base;
    float *f = malloc((size_t)x->span * sizeof *f);
    if (f)
        for (int64_t i = 0; i < x->span; i++) f[i] = get(base, (int)x->l.type, i);
    *tmp = f;
    return f;
}

/* ---- one product of the batch ------------------------------------------------------------------ */

typedef struct ptrs {
    char *a, *b, *c, *d, *bias, *aux; /* shadows at this batch's matrices */
} ptrs;

static cublasStatus_t one(const problem *p, float alpha, float beta, const ptrs *q, int c_is_d) {
    float *ta_, *tb_, *td_ = NULL;
    const float *af = as_float(q->a, &p->a, &ta_), *bf = as_float(q->b, &p->b, &tb_);
    int dtype = (int)p->dd.l.type, ctype = (int)p->c.l.type;
    float *dw = dtype == CUDA_R_32F ? (float *)(void *)q->d : (td_ = calloc((size_t)p->dd.span, sizeof *td_));
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    if (!af || !bf || !dw) {
        fprintf(stderr, "fakegpu: cublasLtMatmul: out of host memory widening bf16 operands\n");
        st = CUBLAS_STATUS_ALLOC_FAILED;
        goto out;
    }
    const int m = p->m, n = p->n, col = p->dd.l.order == CUBLASLT_ORDER_COL;
    const int inner = col ? m : n, outer = col ? n : m;
    const int64_t lddw = p->dd.l.ld;
#define D_AT(i, j) ((int64_t)(i) * p->dd.rs + (int64_t)(j) * p->dd.cs)
#define C_AT(i, j) ((int64_t)(i) * p->c.rs + (int64_t)(j) * p->c.cs)
    /* D's starting values: beta C (+ bias) */
    float sbeta = beta;
    int need_c = beta != 0.0f && !(c_is_d && dtype == CUDA_R_32F);
    for (int o = 0; o < outer; o++)
        for (int in = 0; in < inner; in++) {
            int i = col ? in : o, j = col ? o : in;
            if (p->what & E_BIAS) {
                float b = get(q->bias, p->bias_type, i);
                float cv = beta != 0.0f ? get(q->c, ctype, C_AT(i, j)) : 0.0f;
                dw[D_AT(i, j)] = beta == 1.0f ? cv + b : beta == 0.0f ? b : beta * cv + b;
            } else if (need_c) {
                dw[D_AT(i, j)] = get(q->c, ctype, C_AT(i, j));
            } else if (beta == 0.0f) {
                dw[D_AT(i, j)] = 0.0f;
            }
        }
    if (p->what & E_BIAS) sbeta = 1.0f;
    /* the product: the stored column-major matrices as they are */
    enum CBLAS_TRANSPOSE fa = p->ta != (p->a.l.order == CUBLASLT_ORDER_ROW) ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE fb = p->tb != (p->b.l.order == CUBLASLT_ORDER_ROW) ? CblasTrans : CblasNoTrans;
    int lda = (int)p->a.l.ld, ldb = (int)p->b.l.ld;
    if (col)
        cblas_sgemm(CblasColMajor, fa, fb, m, n, p->k, alpha, af, lda, bf, ldb, sbeta, dw, (int)lddw);
    else
        cblas_sgemm(CblasColMajor, fb == CblasTrans ? CblasNoTrans : CblasTrans,
                    fa == CblasTrans ? CblasNoTrans : CblasTrans, n, m, p->k, alpha, bf, ldb, af, lda, sbeta, dw,
                    (int)lddw);
    /* the epilogue, one line of D's storage (a column, or a row) at a time */
    float *line = NULL;
    if (p->what & E_DGELU) {
        line = malloc((size_t)inner * sizeof *line);
        if (!line) {
            st = CUBLAS_STATUS_ALLOC_FAILED;
            goto out;
        }
    }
    for (int o = 0; o < outer; o++) {
        float *x = dw + (int64_t)o * lddw;
        int64_t aux0 = (int64_t)o * (col ? p->aux_cs : p->aux_rs), aux1 = col ? p->aux_rs : p->aux_cs;
        if (p->what & E_AUX_OUT)
            for (int in = 0; in < inner; in++) put(q->aux, dtype, aux0 + in * aux1, x[in]);
        if (p->what & E_GELU) gpt_gelu_forward(x, x, (size_t)inner);
        if (p->what & E_RELU)
            for (int in = 0; in < inner; in++) x[in] = x[in] > 0.0f ? x[in] : 0.0f;
        if (p->what & E_DGELU) {
            for (int in = 0; in < inner; in++) line[in] = get(q->aux, dtype, aux0 + in * aux1);
            gpt_gelu_backward(x, line, x, (size_t)inner);
        }
    }
    free(line);
    /* bias gradients, summed in index order */
    if (p->what & E_BGRAD) {
        const mat *s = p->what & E_BGRAD_A ? &p->a : &p->b;
        const float *sf = p->what & E_BGRAD_A ? af : bf;
        int tr = p->what & E_BGRAD_A ? p->ta : p->tb;
        int len = (int)p->bias_len, red = p->what & E_BGRAD_D ? n : p->k;
        for (int v = 0; v < len; v++) {
            float acc = 0.0f;
            for (int r = 0; r < red; r++) {
                if (p->what & E_BGRAD_D)
                    acc += dw[D_AT(v, r)];
                else if (p->what & E_BGRAD_A) /* op(A)[v, r] */
                    acc += sf[tr ? r * s->rs + v * s->cs : v * s->rs + r * s->cs];
                else /* op(B)[r, v] */
                    acc += sf[tr ? v * s->rs + r * s->cs : r * s->rs + v * s->cs];
            }
            put(q->bias, p->bias_type, v, acc);
        }
    }
    if (dtype != CUDA_R_32F)
        for (int o = 0; o < outer; o++)
            for (int in = 0; in < inner; in++) {
                int64_t at = (int64_t)o * lddw + in;
                put(q->d, dtype, at, dw[at]);
            }
#undef D_AT
#undef C_AT
out:
    free(ta_);
    free(tb_);
    free(td_);
    return st;
}

/* ---- cublasLtMatmul -------------------------------------------------------------------------- */

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc,
                              const void *beta, const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream) {
    const char *who = "cublasLtMatmul";
    int dev;
    if (!fk_lt_handle_ok(h, &dev, who)) return CUBLAS_STATUS_NOT_INITIALIZED;
    problem p;
    cublasStatus_t st = problem_init(&p, desc, Adesc, Bdesc, Cdesc, Ddesc, who);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (dev != fk_current_device()) {
        fprintf(stderr, "fakegpu: %s: the handle was made on device %d, the current device is %d\n", who, dev,
                fk_current_device());
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (algo && algo->data[0] != FK_LT_ALGO) {
        fprintf(stderr, "fakegpu: %s: algo is not one cublasLtMatmulAlgoGetHeuristic returned\n", who);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    /* alpha and beta: host memory (POINTER_MODE_HOST) */
    float sc[2];
    const void *sp[2] = {alpha, beta};
    for (int i = 0; i < 2; i++) {
        int kind = FK_UNREG, d;
        void *host = NULL;
        if (sp[i]) fk_mem(sp[i], sizeof(float), &kind, &d, &host);
        if (!sp[i] || kind == FK_DEVICE) {
            fprintf(stderr, "fakegpu: %s: %s is %s (pointer mode host)\n", who, i ? "beta" : "alpha",
                    sp[i] ? "device memory" : "NULL");
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        memcpy(&sc[i], host, sizeof(float));
    }
    if (!fk_stream_ok(stream)) {
        fprintf(stderr, "fakegpu: %s: the stream is not live\n", who);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    /* the operands */
    size_t bsize = type_size(p.bias_type), dsize = p.dd.esize;
    operand ops[7] = {
        {"A", A, p.a.bytes, NULL, 0},
        {"B", B, p.b.bytes, NULL, 0},
        {"C", C, p.c.bytes, NULL, 0},
        {"D", D, p.dd.bytes, NULL, 1},
        {"the bias", p.d.bias, p.bias_bytes, NULL, (p.what & E_BGRAD) != 0},
        {"the aux matrix", p.d.aux, p.aux_bytes, NULL, (p.what & E_AUX_OUT) != 0},
        {"the workspace", workspace, workspaceSizeInBytes, NULL, 1},
    };
    int used[7] = {1, 1, C != NULL || sc[1] != 0.0f, 1, (p.what & E_BIAS_PTR) != 0, (p.what & E_AUX) != 0,
                   workspaceSizeInBytes > 0};
    size_t align[7] = {p.a.esize, p.b.esize, p.c.esize, dsize, bsize, dsize, 1};
    for (int i = 0; i < 7; i++)
        if (used[i] && operand_check(&ops[i], dev, align[i], who)) return CUBLAS_STATUS_INVALID_VALUE;
    int c_is_d = used[2] && C == D;
    if (c_is_d && (p.c.l.type != p.dd.l.type || p.c.l.ld != p.dd.l.ld || p.c.l.batch_stride != p.dd.l.batch_stride)) {
        fprintf(stderr, "fakegpu: %s: C == D (in place) with layouts that differ\n", who);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    for (int i = 0; i < 7; i++)
        for (int j = i + 1; j < 7; j++)
            if (used[i] && used[j] && (ops[i].out || ops[j].out) && !(i == 2 && j == 3 && c_is_d) &&
                overlap(&ops[i], &ops[j])) {
                fprintf(stderr, "fakegpu: %s: %s and %s overlap, and %s written\n", who, ops[i].name, ops[j].name,
                        ops[i].out && ops[j].out ? "both are" : "one is");
                return CUBLAS_STATUS_INVALID_VALUE;
            }
    for (int b = 0; b < p.batch; b++) {
        ptrs q = {
            ops[0].host + (size_t)b * (size_t)p.a.l.batch_stride * p.a.esize,
            ops[1].host + (size_t)b * (size_t)p.b.l.batch_stride * p.b.esize,
            used[2] ? ops[2].host + (size_t)b * (size_t)p.c.l.batch_stride * p.c.esize : NULL,
            ops[3].host + (size_t)b * (size_t)p.dd.l.batch_stride * dsize,
            used[4] ? ops[4].host + (size_t)b * (size_t)p.d.bias_batch_stride * bsize : NULL,
            used[5] ? ops[5].host + (size_t)b * (size_t)p.d.aux_batch_stride * dsize : NULL,
        };
        st = one(&p, sc[0], sc[1], &q, c_is_d);
        if (st != CUBLAS_STATUS_SUCCESS) return st;
    }
    return CUBLAS_STATUS_SUCCESS;
}
