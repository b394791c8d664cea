/* tests/fakegpu/fake_cublaslt.h - internal to the fake cuBLASLt: what its
 * handles and descriptors hold (fake_cublaslt.c makes and reads them, with
 * their attributes), for the matrix product (fake_cublaslt_matmul.c).
 *
 * The descriptors are cuBLASLt's semi-opaque structs (cublasLt.h): their
 * bytes hold one of the structs below, copied in and out with memcpy, so
 * that the Init_internal calls on the caller's storage work as Create does. */
#ifndef DT_FAKE_CUBLASLT_H
#define DT_FAKE_CUBLASLT_H

#include <cublasLt.h>
#include <stdint.h>

enum {
    FK_LT_DESC_LIVE = 0x6c746d64,   /* "ltmd" */
    FK_LT_LAYOUT_LIVE = 0x6c746c79, /* "ltly" */
    FK_LT_PREF_LIVE = 0x6c747066,   /* "ltpf" */
    FK_LT_ALGO = 0x6c74616c,        /* "ltal": data[0] of the one algorithm */
    FK_LT_DEAD = 0xdead,
};

/* cublasLtMatmulDesc_t */
typedef struct fk_lt_desc {
    uint32_t magic;
    int32_t compute;      /* cublasComputeType_t */
    int32_t scale;        /* cudaDataType_t of alpha and beta */
    int32_t pointer_mode; /* cublasLtPointerMode_t */
    int32_t transa, transb, transc;
    uint32_t epilogue; /* cublasLtEpilogue_t */
    const void *bias;  /* bias, or the bias gradient's output */
    int64_t bias_batch_stride;
    int32_t bias_type; /* cudaDataType_t; -1: D's type */
    int32_t aux_type;  /* cudaDataType_t; -1: D's type */
    void *aux;
    int64_t aux_ld;
    int64_t aux_batch_stride;
    int32_t fill_mode;
    int32_t sm_count_target;
    int8_t fast_accum;
} fk_lt_desc;

/* cublasLtMatrixLayout_t */
typedef struct fk_lt_layout {
    uint32_t magic;
    uint32_t type; /* cudaDataType_t */
    int32_t order; /* cublasLtOrder_t */
    int32_t batch; /* CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT */
    uint32_t batch_mode;
    uint64_t rows, cols;
    int64_t ld;
    int64_t batch_stride; /* elements */
    int64_t plane_offset;
} fk_lt_layout;

/* cublasLtMatmulPreference_t */
typedef struct fk_lt_pref {
    uint32_t magic;
    uint32_t search_mode;
    uint64_t max_workspace;
    uint32_t reduction_mask;
    uint32_t align[4]; /* minimum alignment of A, B, C, D */
    float max_waves;
    uint64_t impl_mask;
} fk_lt_pref;

/* The descriptor's contents if it is a live one of its kind (0), else -1
 * with a line on stderr naming `who` (the calling function). */
int fk_lt_desc_read(cublasLtMatmulDesc_t d, fk_lt_desc *out, const char *who);
int fk_lt_layout_read(cublasLtMatrixLayout_t l, fk_lt_layout *out, const char *who);
int fk_lt_pref_read(cublasLtMatmulPreference_t p, fk_lt_pref *out, const char *who);
/* 1 if h is a live handle (its device in *dev), else 0 with a line on stderr */
int fk_lt_handle_ok(cublasLtHandle_t h, int *dev, const char *who);

#endif
