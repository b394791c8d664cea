/* src/nn/gpt_backend.h - internal: the gpt family's kernel backends.
 *
 * The gpt family's passes (gpt_pass.c), its generation (gpt_generate.c) and
 * its activation arena (gpt_model.c) reach their kernels only through one
 * table, a gpt_backend: the CPU kernels (gpt_cpu.c over gpt_kernels.c and
 * gpt_attention.c, OpenBLAS) are one entry, the CUDA kernels (cuda/: one
 * kernel per op with its launcher, matrix products on cuBLASLt) another. A
 * new backend is one folder defining a gpt_backend plus one entry in
 * k_backends (gpt_backend.c).
 *
 * MEMORY. "Backend memory" is host memory for the cpu backend and device
 * memory of the process's current CUDA device for cuda. Every pointer a
 * kernel takes is backend memory unless its comment says "host". alloc
 * returns zeroed memory; the generic model code (model_build.c) allocates
 * the flat parameter and gradient buffers through the same table, so that
 * a model's params/grads and its activations live in one place.
 *
 * PRECISION (gpt_prec, fixed per backend instance at open):
 *   GPT_F32   activations and the parameters computed with are float32: the
 *             CPU GPT's arithmetic ("parity").
 *   GPT_BF16  activations ("act" below) and the parameters computed with
 *             ("wgt") are bfloat16, stored as uint16_t bits (dtrain/dtype.h:
 *             the top 16 bits of a binary32; rounding to nearest even); the
 *             master parameters (the model's flat buffer), every parameter
 *             GRADIENT, the LayerNorm statistics, lse/tlogit and the loss
 *             stay float32, and every reduction accumulates in float32.
 * So: `void *` act/wgt pointers hold float (GPT_F32) or uint16_t (GPT_BF16)
 * elements; `float *` pointers are float32 in both.
 *
 * ORDER AND ERRORS. Every call is enqueued on the instance's stream in call
 * order (cpu: computed before it returns); nothing waits for the device
 * except download and sync. Each returns DT_OK or a negative dt_status with
 * dt_last_error() naming the kernel or library call and what failed
 * (a launch error, a cuBLASLt status); callers add which tensor it was.
 *
 * KERNEL CONVENTIONS are gpt_internal.h's (llm.c style): outputs first, then
 * inputs, then sizes; N = B*T rows, C = n_embd, NH = heads, hs = C/NH, V =
 * vocab. Backward kernels ACCUMULATE (+=) into parameter gradients always
 * and into input gradients where the comment says "+="; "=" marks an output
 * that is written whole. Kernels check no arguments (the family validated
 * them) and allocate nothing (workspaces are given or were made at open).
 * In-place use is allowed only where a comment says so.
 */
#ifndef DT_NN_GPT_BACKEND_H
#define DT_NN_GPT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gpt_prec { GPT_F32 = 0, GPT_BF16 = 1 } gpt_prec;

/* One backend instance (per model): the stream, library handles,
 * workspaces. Opaque to the family. */
typedef struct gpt_be gpt_be;

typedef struct gpt_backend {
    const char *name;      /* "cpu", "cuda" */
    int device;            /* 1: backend memory is CUDA device memory */
    unsigned precisions;   /* supported: bit (1u << GPT_F32) | (1u << GPT_BF16) */

    /* ---- life -------------------------------------------------------------- */
    /* A new instance on the current device computing in `prec`. */
    int (*open)(gpt_be **be, gpt_prec prec);
    void (*close)(gpt_be *be); /* NULL is a no-op; waits for queued work first */
    /* The stream the instance enqueues on (a cudaStream_t; NULL for cpu):
     * what data parallelism orders its bucket events after. */
    void *(*stream)(gpt_be *be);

    /* ---- sizes (no instance needed) ---------------------------------------- */
    /* The logits' row stride for vocabulary V (>= V): cuda pads to a multiple
     * of 128 for aligned rows (the padding columns are never written nor
     * read: nothing predicts them); cpu: V. */
    int (*vocab_pad)(int V);
    /* Bytes the attention keeps per block from forward to backward (*saved)
     * and the workspace all blocks share for forward, backward and one
     * generation step at up to T positions (*scratch), for a batch of B at
     * length T. */
    void (*attention_sizes)(int B, int T, int C, int NH, gpt_prec prec, size_t *saved, size_t *scratch);

    /* ---- memory ------------------------------------------------------------- */
    /* bytes of zeroed backend memory; `what` names it in the error (device
     * out of memory: what did not fit, its size, and how much is free). */
    int (*alloc)(gpt_be *be, size_t bytes, const char *what, void **p);
    void (*free)(gpt_be *be, void *p); /* NULL is a no-op */
    /* host src -> backend dst, in stream order; src may be reused on return */
    int (*upload)(gpt_be *be, void *dst, const void *src, size_t bytes);
    /* backend src -> host dst; returns when dst holds it (waits for the
     * work queued before) */
    int (*download)(gpt_be *be, void *dst, const void *src, size_t bytes);
    /* backend -> backend (non-overlapping) */
    int (*copy)(gpt_be *be, void *dst, const void *src, size_t bytes);
    int (*zero)(gpt_be *be, void *p, size_t bytes);
    /* wait until every queued call has completed (and report its error) */
    int (*sync)(gpt_be *be);
    /* dst[n] (wgt) = src[n] (f32 master parameters) in the compute
     * precision (GPT_BF16: rounded to nearest even). Not called for GPT_F32:
     * the kernels then compute with the master parameters themselves. */
    int (*cast)(gpt_be *be, void *dst, const float *src, size_t n);

    /* ---- embeddings --------------------------------------------------------- */
    /* out[N,C] (act) = wte[tok[b,t],:] + wpe[t,:]; tok [B,T] (backend int32),
     * wte [V,C], wpe [>=T,C] (wgt). */
    int (*encoder_forward)(gpt_be *be, void *out, const int32_t *tok, const void *wte, const void *wpe,
                           int B, int T, int C);
    /* dwte[V,C] +=, dwpe[>=T,C] += (f32) the rows of dout [N,C] (act) by token
     * and by position. DETERMINISTIC: the same bits run to run (each row of
     * dwte sums its positions in one fixed order). tok [B,T] is backend
     * memory, tok_host the same tokens in host memory (a backend may index
     * them on the host first). */
    int (*encoder_backward)(gpt_be *be, float *dwte, float *dwpe, const void *dout, const int32_t *tok,
                            const int32_t *tok_host, int B, int T, int C);

    /* ---- LayerNorm (eps 1e-5, biased variance; statistics in f32) ------------ */
    /* out[N,C] (act) = (inp - mean) * rstd * weight + bias; mean, rstd [N]
     * (f32) saved for backward; inp [N,C] (act); weight, bias [C] (wgt). */
    int (*layernorm_forward)(gpt_be *be, void *out, float *mean, float *rstd, const void *inp,
                             const void *weight, const void *bias, int N, int C);
    /* dinp[N,C] += (act); dweight[C] +=, dbias[C] += (f32); from dout [N,C]
     * (act), inp [N,C] (act), weight [C] (wgt), mean/rstd [N] of the
     * forward. */
    int (*layernorm_backward)(gpt_be *be, void *dinp, float *dweight, float *dbias, const void *dout,
                              const void *inp, const void *weight, const float *mean, const float *rstd,
                              int N, int C);

    /* ---- linear layers ------------------------------------------------------- */
    /* out[N,OC] (act, row stride ldo >= OC) = resid[N,OC] + inp[N,C] @
     * weight[OC,C]^T + bias[OC]. resid (act) may be NULL (nothing added) or
     * equal to out (in place); it is NULL whenever ldo != OC. bias (wgt) may
     * be NULL. inp act, weight wgt. */
    int (*matmul_forward)(gpt_be *be, void *out, const void *resid, const void *inp, const void *weight,
                          const void *bias, int N, int C, int OC, int ldo);
    /* Optional (NULL: the family calls matmul_forward then gelu_forward):
     * pre[N,OC] = inp @ weight^T + bias and out[N,OC] = gelu(pre), both act,
     * in one pass where the backend fuses it (cuBLASLt's GELU_AUX_BIAS
     * epilogue). */
    int (*matmul_gelu_forward)(gpt_be *be, void *out, void *pre, const void *inp, const void *weight,
                               const void *bias, int N, int C, int OC);
    /* dinp[N,C] (act) = dout[N,OC] @ weight[OC,C] (written; dinp NULL:
     * skipped); dweight[OC,C] (f32) += dout^T @ inp[N,C]; dbias[OC] (f32) +=
     * the column sums of dout (NULL: skipped). dout (act) has row stride
     * lddo >= OC; inp act, weight wgt. */
    int (*matmul_backward)(gpt_be *be, void *dinp, float *dweight, float *dbias, const void *dout,
                           const void *inp, const void *weight, int N, int C, int OC, int lddo);

    /* ---- GELU (tanh approximation) ------------------------------------------- */
    /* out[n] = gelu(inp[n]) (act; out may equal inp) */
    int (*gelu_forward)(gpt_be *be, void *out, const void *inp, size_t n);
    /* dinp[n] = gelu'(inp[n]) * dout[n] (act, written; dinp may equal dout) */
    int (*gelu_backward)(gpt_be *be, void *dinp, const void *inp, const void *dout, size_t n);

    /* ---- causal multi-head self-attention ------------------------------------ *
     * qkv [B,T,3C] (act) holds q, k, v in its three C-wide parts, head h in
     * columns [h*hs, (h+1)*hs) of each; scale 1/sqrt(hs). */
    /* out[B,T,C] (act, written) = per head softmax(q k^T * scale, causal) v;
     * saved: the block's attention_sizes() bytes, kept for the backward;
     * scratch: the shared workspace. */
    int (*attention_forward)(gpt_be *be, void *out, void *saved, void *scratch, const void *qkv, int B,
                             int T, int C, int NH);
    /* dqkv[B,T,3C] (act, written) from dout [B,T,C] (act), with qkv and saved
     * from the forward. */
    int (*attention_backward)(gpt_be *be, void *dqkv, void *scratch, const void *dout, const void *qkv,
                              const void *saved, int B, int T, int C, int NH);
    /* One query position against a key/value cache (generation): out[C]
     * (act) for the query q[C] (the q part of one qkv row), keys kc[n,C] and
     * values vc[n,C] (act; positions 0..n-1, the query's own included). */
    int (*attention_step)(gpt_be *be, void *out, void *scratch, const void *q, const void *kc,
                          const void *vc, int n, int C, int NH);

    /* ---- softmax cross-entropy over the vocabulary --------------------------- *
     * logits [N,V] (act) with row stride ldl >= V; columns >= V are padding:
     * never read. */
    /* lse[N] (f32) = log-sum-exp of each row (computed in f32). With targets
     * [N] (backend int32; NULL: only lse): tlogit[N] (f32) = the row's logit
     * at its target, hit[N] (int32) = 1 if the row's first maximum is at the
     * target, else 0. The loss of row n is lse[n] - tlogit[n]. */
    int (*crossentropy_forward)(gpt_be *be, float *lse, float *tlogit, int32_t *hit, const void *logits,
                                const int32_t *targets, int N, int V, int ldl);
    /* dlogits[N,V] (act, row stride ldl, written) = (softmax(logits) -
     * onehot(target)) * dscale, from logits and the forward's lse; dlogits
     * may equal logits (in place). */
    int (*crossentropy_backward)(gpt_be *be, void *dlogits, const void *logits, const float *lse,
                                 const int32_t *targets, int N, int V, int ldl, float dscale);
} gpt_backend;

/* The backends (gpt_backend.c): the one named `name` ("cpu", "cuda"), or
 * NULL with DT_ERR_UNSUPPORTED naming what this build has. */
const gpt_backend *gpt_backend_find(const char *name);
extern const gpt_backend gpt_backend_cpu;
#ifdef DTRAIN_HAVE_CUDA
extern const gpt_backend gpt_backend_cuda;
#endif

#ifdef __cplusplus
}
#endif
#endif
