/* src/nn/gpt_cpu.c - the gpt family's CPU backend (gpt_backend.h): host
 * memory, the kernels of gpt_kernels.c and gpt_attention.c (OpenBLAS),
 * float32 only. Every call computes before it returns and cannot fail. */
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "nn/gpt_internal.h"

struct gpt_be {
    gpt_prec prec;
};

static int c_open(gpt_be **be, gpt_prec prec) {
    if (prec != GPT_F32)
        return DT_ERR(DT_ERR_UNSUPPORTED, "the cpu backend computes in fp32 only (bf16 needs --device cuda)");
    *be = calloc(1, sizeof **be);
    if (!*be) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    (*be)->prec = prec;
    return DT_OK;
}

static void c_close(gpt_be *be) { free(be); }
static void *c_stream(gpt_be *be) { return NULL; }
static int c_vocab_pad(int V) { return V; }

static void c_attention_sizes(int B, int T, int C, int NH, gpt_prec prec, size_t *saved, size_t *scratch) {
    *saved = (size_t)B * (size_t)NH * (size_t)T * (size_t)T * sizeof(float); /* the probabilities */
    /* backward: [min(T, GPT_ATT_ROWS), T]; a generation step: [T] */
    *scratch = (size_t)(T < GPT_ATT_ROWS ? T : GPT_ATT_ROWS) * (size_t)T * sizeof(float);
}

/* ---- memory ------------------------------------------------------------------------- */

static int c_alloc(gpt_be *be, size_t bytes, const char *what, void **p) {
    size_t n = ((bytes ? bytes : 1) + 63) & ~(size_t)63;
    *p = aligned_alloc(64, n);
    if (!*p) return DT_ERR(DT_ERR_NOMEM, "out of memory for %s (%zu bytes)", what, bytes);
    memset(*p, 0, n);
    return DT_OK;
}

static void c_free(gpt_be *be, void *p) { free(p); }

static int c_copy(gpt_be *be, void *dst, const void *src, size_t bytes) {
    if (bytes) memcpy(dst, src, bytes);
    return DT_OK;
}

static int c_zero(gpt_be *be, void *p, size_t bytes) {
    if (bytes) memset(p, 0, bytes);
    return DT_OK;
}

static int c_sync(gpt_be *be) { return DT_OK; }

/* ---- kernels ---------------------------------------------------------------------------- */

static int c_encoder_forward(gpt_be *be, void *out, const int32_t *tok, const void *wte, const void *wpe, int B,
                             int T, int C) {
    gpt_encoder_forward(out, tok, wte, wpe, B, T, C);
    return DT_OK;
}

static int c_encoder_backward(gpt_be *be, float *dwte, float *dwpe, const void *dout, const int32_t *tok,
                              const int32_t *tok_host, int B, int T, int C) {
    gpt_encoder_backward(dwte, dwpe, dout, tok, B, T, C);
    return DT_OK;
}

static int c_layernorm_forward(gpt_be *be, void *out, float *mean, float *rstd, const void *inp, const void *weight,
                               const void *bias, int N, int C) {
    gpt_layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
    return DT_OK;
}

static int c_layernorm_backward(gpt_be *be, void *dinp, float *dweight, float *dbias, const void *dout,
                                const void *inp, const void *weight, const float *mean, const float *rstd, int N,
                                int C) {
    gpt_layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    return DT_OK;
}

/* ldo and lddo equal OC here: vocab_pad pads nothing */
static int c_matmul_forward(gpt_be *be, void *out, const void *resid, const void *inp, const void *weight,
                            const void *bias, int N, int C, int OC, int ldo) {
    gpt_matmul_forward(out, resid, inp, weight, bias, N, C, OC);
    return DT_OK;
}

static int c_matmul_backward(gpt_be *be, void *dinp, float *dweight, float *dbias, const void *dout, const void *inp,
                             const void *weight, int N, int C, int OC, int lddo) {
    gpt_matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
    return DT_OK;
}

static int c_gelu_forward(gpt_be *be, void *out, const void *inp, size_t n) {
    gpt_gelu_forward(out, inp, n);
    return DT_OK;
}

static int c_gelu_backward(gpt_be *be, void *dinp, const void *inp, const void *dout, size_t n) {
    gpt_gelu_backward(dinp, inp, dout, n);
    return DT_OK;
}

static int c_attention_forward(gpt_be *be, void *out, void *saved, void *scratch, const void *qkv, int B, int T,
                               int C, int NH) {
    gpt_attention_forward(out, saved, qkv, B, T, C, NH);
    return DT_OK;
}

static int c_attention_backward(gpt_be *be, void *dqkv, void *scratch, const void *dout, const void *qkv,
                                const void *saved, int B, int T, int C, int NH) {
    gpt_attention_backward(dqkv, scratch, dout, qkv, saved, B, T, C, NH);
    return DT_OK;
}

static int c_attention_step(gpt_be *be, void *out, void *scratch, const void *q, const void *kc, const void *vc,
                            int n, int C, int NH) {
    gpt_attention_step(out, scratch, q, kc, vc, n, C, NH);
    return DT_OK;
}

static int c_crossentropy_forward(gpt_be *be, float *lse, float *tlogit, int32_t *hit, const void *logits,
                                  const int32_t *targets, int N, int V, int ldl) {
    gpt_crossentropy_forward(lse, tlogit, hit, logits, targets, N, V, ldl);
    return DT_OK;
}

static int c_crossentropy_backward(gpt_be *be, void *dlogits, const void *logits, const float *lse,
                                   const int32_t *targets, int N, int V, int ldl, float dscale) {
    gpt_crossentropy_backward(dlogits, logits, lse, targets, N, V, ldl, dscale);
    return DT_OK;
}

const gpt_backend gpt_backend_cpu = {
    .name = "cpu",
    .device = 0,
    .precisions = 1u << GPT_F32,
    .open = c_open,
    .close = c_close,
    .stream = c_stream,
    .vocab_pad = c_vocab_pad,
    .attention_sizes = c_attention_sizes,
    .alloc = c_alloc,
    .free = c_free,
    .upload = c_copy,
    .download = c_copy,
    .copy = c_copy,
    .zero = c_zero,
    .sync = c_sync,
    .cast = NULL, /* fp32 only: the kernels compute with the f32 parameters */
    .encoder_forward = c_encoder_forward,
    .encoder_backward = c_encoder_backward,
    .layernorm_forward = c_layernorm_forward,
    .layernorm_backward = c_layernorm_backward,
    .matmul_forward = c_matmul_forward,
    .matmul_gelu_forward = NULL, /* matmul, then GELU */
    .matmul_backward = c_matmul_backward,
    .gelu_forward = c_gelu_forward,
    .gelu_backward = c_gelu_backward,
    .attention_forward = c_attention_forward,
    .attention_backward = c_attention_backward,
    .attention_step = c_attention_step,
    .crossentropy_forward = c_crossentropy_forward,
    .crossentropy_backward = c_crossentropy_backward,
};
