/* tests/fakegpu/fake_cublaslt.c - the cuBLASLt calls a GPT trainer makes
 * besides the product itself, on the CPU (fakegpu.h): handles (checked, tied
 * to the device current at creation), the matmul, matrix-layout and
 * preference descriptors with their attributes (each checked for its size,
 * as the real library does; an attribute the fake does not implement is
 * refused with CUBLAS_STATUS_NOT_SUPPORTED and a line on stderr rather than
 * ignored), status names, the version. The product and the heuristic are
 * fake_cublaslt_matmul.c's. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fake_cublaslt.h"
#include "fakegpu.h"

/* ---- handles --------------------------------------------------------------------------- */

enum { HANDLE_LIVE = 0x6c74686e, HANDLE_DEAD = 0xdead };

/* Never freed: a destroyed handle stays on the list, marked dead, so that a
 * use after destroy is reported, not undefined. */
struct cublasLtContext {
    int magic;
    int dev;
    struct cublasLtContext *next;
};
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct cublasLtContext *g_handles;

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
    if (!h) return CUBLAS_STATUS_INVALID_VALUE;
    *h = NULL;
    if (fk_device_count() == 0) {
        fprintf(stderr, "fakegpu: cublasLtCreate: no device (DTRAIN_FAKEGPU_DEVICES=0)\n");
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    struct cublasLtContext *c = calloc(1, sizeof *c);
    if (!c) return CUBLAS_STATUS_ALLOC_FAILED;
    c->magic = HANDLE_LIVE;
    c->dev = fk_current_device();
    pthread_mutex_lock(&g_mu);
    c->next = g_handles;
    g_handles = c;
    pthread_mutex_unlock(&g_mu);
    *h = c;
    return CUBLAS_STATUS_SUCCESS;
}

/* 1 if h is on the list and live (with kill: then marked dead) */
static int handle_live(cublasLtHandle_t h, int *dev, int kill) {
    int ok = 0;
    pthread_mutex_lock(&g_mu);
    for (struct cublasLtContext *c = g_handles; c; c = c->next)
        if (c == h) {
            ok = c->magic == HANDLE_LIVE;
            if (ok && dev) *dev = c->dev;
            if (ok && kill) c->magic = HANDLE_DEAD;
            break;
        }
    pthread_mutex_unlock(&g_mu);
    return ok;
}

int fk_lt_handle_ok(cublasLtHandle_t h, int *dev, const char *who) {
    if (handle_live(h, dev, 0)) return 1;
    fprintf(stderr, "fakegpu: %s: %s\n", who, h ? "not a live cuBLASLt handle" : "the handle is NULL");
    return 0;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    if (handle_live(h, NULL, 1)) return CUBLAS_STATUS_SUCCESS;
    fprintf(stderr, "fakegpu: cublasLtDestroy: %s\n", h ? "not a live cuBLASLt handle" : "the handle is NULL");
    return CUBLAS_STATUS_NOT_INITIALIZED;
}

/* ---- status and version ------------------------------------------------------------------- */

const char *cublasLtGetStatusName(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

const char *cublasLtGetStatusString(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "an error was detected when checking the current licensing";
    default: return "unknown error";
    }
}

/* the headers' version: the one the caller compiled against */
size_t cublasLtGetVersion(void) { return CUBLAS_VER_MAJOR * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH; }

size_t cublasLtGetCudartVersion(void) { return CUDART_VERSION; }

/* ---- attributes: one table of (attribute, place, size) per descriptor kind ---------------- */

typedef struct slot {
    int attr;
    size_t off, size;
} slot;

#define SLOT(a, type, field) {a, offsetof(type, field), sizeof(((type *)0)->field)}
/* the pointer attributes are stored as pointers (8 bytes here, as cuBLASLt) */

static const slot k_desc_slots[] = {
    SLOT(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, fk_lt_desc, compute),
    SLOT(CUBLASLT_MATMUL_DESC_SCALE_TYPE, fk_lt_desc, scale),
    SLOT(CUBLASLT_MATMUL_DESC_POINTER_MODE, fk_lt_desc, pointer_mode),
    SLOT(CUBLASLT_MATMUL_DESC_TRANSA, fk_lt_desc, transa),
    SLOT(CUBLASLT_MATMUL_DESC_TRANSB, fk_lt_desc, transb),
    SLOT(CUBLASLT_MATMUL_DESC_TRANSC, fk_lt_desc, transc),
    SLOT(CUBLASLT_MATMUL_DESC_FILL_MODE, fk_lt_desc, fill_mode),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE, fk_lt_desc, epilogue),
    SLOT(CUBLASLT_MATMUL_DESC_BIAS_POINTER, fk_lt_desc, bias),
    SLOT(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, fk_lt_desc, bias_batch_stride),
    SLOT(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, fk_lt_desc, bias_type),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, fk_lt_desc, aux),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, fk_lt_desc, aux_ld),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, fk_lt_desc, aux_batch_stride),
    SLOT(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, fk_lt_desc, aux_type),
    SLOT(CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, fk_lt_desc, sm_count_target),
    SLOT(CUBLASLT_MATMUL_DESC_FAST_ACCUM, fk_lt_desc, fast_accum),
};

static const slot k_layout_slots[] = {
    SLOT(CUBLASLT_MATRIX_LAYOUT_TYPE, fk_lt_layout, type),
    SLOT(CUBLASLT_MATRIX_LAYOUT_ORDER, fk_lt_layout, order),
    SLOT(CUBLASLT_MATRIX_LAYOUT_ROWS, fk_lt_layout, rows),
    SLOT(CUBLASLT_MATRIX_LAYOUT_COLS, fk_lt_layout, cols),
    SLOT(CUBLASLT_MATRIX_LAYOUT_LD, fk_lt_layout, ld),
    SLOT(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, fk_lt_layout, batch),
    SLOT(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, fk_lt_layout, batch_stride),
    SLOT(CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET, fk_lt_layout, plane_offset),
    SLOT(CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, fk_lt_layout, batch_mode),
};

static const slot k_pref_slots[] = {
    SLOT(CUBLASLT_MATMUL_PREF_SEARCH_MODE, fk_lt_pref, search_mode),
    SLOT(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, fk_lt_pref, max_workspace),
    SLOT(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, fk_lt_pref, reduction_mask),
    SLOT(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, fk_lt_pref, align[0]),
    SLOT(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, fk_lt_pref, align[1]),
    SLOT(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, fk_lt_pref, align[2]),
    SLOT(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, fk_lt_pref, align[3]),
    SLOT(CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT, fk_lt_pref, max_waves),
    SLOT(CUBLASLT_MATMUL_PREF_IMPL_MASK, fk_lt_pref, impl_mask),
};

#define NSLOTS(t) (sizeof(t) / sizeof((t)[0]))

static const slot *slot_of(const slot *t, size_t n, int attr) {
    for (size_t i = 0; i < n; i++)
        if (t[i].attr == attr) return &t[i];
    return NULL;
}

/* state (a descriptor's struct) <- buf, as cublasLt*SetAttribute */
static cublasStatus_t attr_set(const slot *t, size_t n, void *state, int attr, const void *buf, size_t size,
                               const char *who) {
    const slot *s = slot_of(t, n, attr);
    if (!s) {
        fprintf(stderr, "fakegpu: %s: attribute %d is not one the fake implements\n", who, attr);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (!buf || size != s->size) {
        fprintf(stderr, "fakegpu: %s: attribute %d takes %zu bytes, not %zu%s\n", who, attr, s->size, size,
                buf ? "" : " (buf is NULL)");
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    memcpy((char *)state + s->off, buf, size);
    return CUBLAS_STATUS_SUCCESS;
}

/* buf <- state, as cublasLt*GetAttribute (size 0: only the size needed) */
static cublasStatus_t attr_get(const slot *t, size_t n, const void *state, int attr, void *buf, size_t size,
                               size_t *written, const char *who) {
    const slot *s = slot_of(t, n, attr);
    if (!s) {
        fprintf(stderr, "fakegpu: %s: attribute %d is not one the fake implements\n", who, attr);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (size == 0) {
        if (!written) return CUBLAS_STATUS_INVALID_VALUE;
        *written = s->size;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!buf || size != s->size) {
        fprintf(stderr, "fakegpu: %s: attribute %d takes %zu bytes, not %zu\n", who, attr, s->size, size);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    memcpy(buf, (const char *)state + s->off, size);
    if (written) *written = size;
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- descriptors: the struct in the opaque bytes ------------------------------------------ */

_Static_assert(sizeof(fk_lt_desc) <= sizeof(cublasLtMatmulDescOpaque_t), "matmul descriptor fits");
_Static_assert(sizeof(fk_lt_layout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout fits");
_Static_assert(sizeof(fk_lt_pref) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "preference fits");

/* the struct in opaque's bytes if its magic is `live` (0), else -1 said on stderr */
static int read_opaque(const void *opaque, void *out, size_t size, uint32_t live, const char *what, const char *who) {
    uint32_t magic = 0;
    if (opaque) memcpy(&magic, opaque, sizeof magic);
    if (magic != live) {
        fprintf(stderr, "fakegpu: %s: %s is %s\n", who, what,
                !opaque ? "NULL" : magic == FK_LT_DEAD ? "destroyed" : "not one cuBLASLt made");
        return -1;
    }
    memcpy(out, opaque, size);
    return 0;
}

int fk_lt_desc_read(cublasLtMatmulDesc_t d, fk_lt_desc *out, const char *who) {
    return read_opaque(d, out, sizeof *out, FK_LT_DESC_LIVE, "the matmul descriptor", who);
}

int fk_lt_layout_read(cublasLtMatrixLayout_t l, fk_lt_layout *out, const char *who) {
    return read_opaque(l, out, sizeof *out, FK_LT_LAYOUT_LIVE, "a matrix layout", who);
}

int fk_lt_pref_read(cublasLtMatmulPreference_t p, fk_lt_pref *out, const char *who) {
    return read_opaque(p, out, sizeof *out, FK_LT_PREF_LIVE, "the preference", who);
}

/* marks a descriptor dead and frees it (NULL: nothing); -1 if not live */
static cublasStatus_t destroy_opaque(void *opaque, uint32_t live, const char *who) {
    if (!opaque) return CUBLAS_STATUS_SUCCESS;
    uint32_t magic;
    memcpy(&magic, opaque, sizeof magic);
    if (magic != live) {
        fprintf(stderr, "fakegpu: %s: not a live descriptor of its kind\n", who);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    magic = FK_LT_DEAD;
    memcpy(opaque, &magic, sizeof magic);
    free(opaque);
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- matmul descriptors ---------------------------------------------------------------------- */

cublasStatus_t cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t d, size_t size, cublasComputeType_t compute,
                                               cudaDataType_t scale) {
    if (!d || size < sizeof *d) return CUBLAS_STATUS_ALLOC_FAILED;
    fk_lt_desc s = {.magic = FK_LT_DESC_LIVE, .compute = compute, .scale = scale,
                    .pointer_mode = CUBLASLT_POINTER_MODE_HOST, .transa = CUBLAS_OP_N, .transb = CUBLAS_OP_N,
                    .transc = CUBLAS_OP_N, .fill_mode = CUBLAS_FILL_MODE_FULL, .epilogue = CUBLASLT_EPILOGUE_DEFAULT,
                    .bias_type = -1, .aux_type = -1};
    memset(d, 0, sizeof *d);
    memcpy(d, &s, sizeof s);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute, cudaDataType_t scale) {
    if (!d) return CUBLAS_STATUS_INVALID_VALUE;
    *d = malloc(sizeof **d);
    if (!*d) return CUBLAS_STATUS_ALLOC_FAILED;
    return cublasLtMatmulDescInit_internal(*d, sizeof **d, compute, scale);
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    return destroy_opaque(d, FK_LT_DESC_LIVE, "cublasLtMatmulDescDestroy");
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size) {
    fk_lt_desc s;
    if (fk_lt_desc_read(d, &s, "cublasLtMatmulDescSetAttribute")) return CUBLAS_STATUS_INVALID_VALUE;
    cublasStatus_t st = attr_set(k_desc_slots, NSLOTS(k_desc_slots), &s, attr, buf, size,
                                 "cublasLtMatmulDescSetAttribute");
    if (st == CUBLAS_STATUS_SUCCESS) memcpy(d, &s, sizeof s);
    return st;
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, void *buf,
                                              size_t size, size_t *written) {
    fk_lt_desc s;
    if (fk_lt_desc_read(d, &s, "cublasLtMatmulDescGetAttribute")) return CUBLAS_STATUS_INVALID_VALUE;
    return attr_get(k_desc_slots, NSLOTS(k_desc_slots), &s, attr, buf, size, written,
                    "cublasLtMatmulDescGetAttribute");
}

/* ---- matrix layouts ------------------------------------------------------------------------------ */

cublasStatus_t cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t l, size_t size, cudaDataType type,
                                                 uint64_t rows, uint64_t cols, int64_t ld) {
    if (!l || size < sizeof *l) return CUBLAS_STATUS_ALLOC_FAILED;
    fk_lt_layout s = {.magic = FK_LT_LAYOUT_LIVE, .type = (uint32_t)type, .order = CUBLASLT_ORDER_COL, .batch = 1,
                      .batch_mode = CUBLASLT_BATCH_MODE_STRIDED, .rows = rows, .cols = cols, .ld = ld};
    memset(l, 0, sizeof *l);
    memcpy(l, &s, sizeof s);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
    if (!l) return CUBLAS_STATUS_INVALID_VALUE;
    *l = malloc(sizeof **l);
    if (!*l) return CUBLAS_STATUS_ALLOC_FAILED;
    return cublasLtMatrixLayoutInit_internal(*l, sizeof **l, type, rows, cols, ld);
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    return destroy_opaque(l, FK_LT_LAYOUT_LIVE, "cublasLtMatrixLayoutDestroy");
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t size) {
    fk_lt_layout s;
    if (fk_lt_layout_read(l, &s, "cublasLtMatrixLayoutSetAttribute")) return CUBLAS_STATUS_INVALID_VALUE;
    cublasStatus_t st = attr_set(k_layout_slots, NSLOTS(k_layout_slots), &s, attr, buf, size,
                                 "cublasLtMatrixLayoutSetAttribute");
    if (st == CUBLAS_STATUS_SUCCESS) memcpy(l, &s, sizeof s);
    return st;
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                void *buf, size_t size, size_t *written) {
    fk_lt_layout s;
    if (fk_lt_layout_read(l, &s, "cublasLtMatrixLayoutGetAttribute")) return CUBLAS_STATUS_INVALID_VALUE;
    return attr_get(k_layout_slots, NSLOTS(k_layout_slots), &s, attr, buf, size, written,
                    "cublasLtMatrixLayoutGetAttribute");
}

/* ---- preferences ------------------------------------------------------------------------------------ */

cublasStatus_t cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t p, size_t size) {
    if (!p || size < sizeof *p) return CUBLAS_STATUS_ALLOC_FAILED;
    fk_lt_pref s = {.magic = FK_LT_PREF_LIVE, .search_mode = CUBLASLT_SEARCH_BEST_FIT,
                    .reduction_mask = CUBLASLT_REDUCTION_SCHEME_MASK, .align = {256, 256, 256, 256},
                    .impl_mask = ~(uint64_t)0};
    memset(p, 0, sizeof *p);
    memcpy(p, &s, sizeof s);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    if (!p) return CUBLAS_STATUS_INVALID_VALUE;
    *p = malloc(sizeof **p);
    if (!*p) return CUBLAS_STATUS_ALLOC_FAILED;
    return cublasLtMatmulPreferenceInit_internal(*p, sizeof **p);
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    return destroy_opaque(p, FK_LT_PREF_LIVE, "cublasLtMatmulPreferenceDestroy");
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t size) {
    fk_lt_pref s;
    if (fk_lt_pref_read(p, &s, "cublasLtMatmulPreferenceSetAttribute")) return CUBLAS_STATUS_INVALID_VALUE;
    cublasStatus_t st = attr_set(k_pref_slots, NSLOTS(k_pref_slots), &s, attr, buf, size,
                                 "cublasLtMatmulPreferenceSetAttribute");
    if (st == CUBLAS_STATUS_SUCCESS) memcpy(p, &s, sizeof s);
    return st;
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, void *buf,
                                                    size_t size, size_t *written) {
    fk_lt_pref s;
    if (fk_lt_pref_read(p, &s, "cublasLtMatmulPreferenceGetAttribute")) return CUBLAS_STATUS_INVALID_VALUE;
    return attr_get(k_pref_slots, NSLOTS(k_pref_slots), &s, attr, buf, size, written,
                    "cublasLtMatmulPreferenceGetAttribute");
}
