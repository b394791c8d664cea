/* src/nn/gpt_internal.h - internal: the "gpt" model family (GPT-2
 * architecture, see dtrain/model.h): its kernels (gpt_kernels.c,
 * gpt_attention.c), its state and activation layout (gpt_model.c), its
 * passes (gpt_pass.c) and generation (gpt_generate.c).
 *
 * Kernel conventions (llm.c style): outputs first, then inputs, then sizes;
 * every pointer's shape is given in its comment; N = B*T rows, C = n_embd,
 * NH = heads, hs = C/NH, V = vocab. Backward kernels ACCUMULATE (+=) into
 * parameter gradients always, and into input gradients where the comment
 * says "+="; "=" marks an input gradient that is written (no zeroing
 * needed). Kernels do no argument checking (the family validates once) and
 * no allocation. */
#ifndef DT_NN_GPT_INTERNAL_H
#define DT_NN_GPT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "nn/gpt_backend.h"
#include "nn/model_internal.h"
#include "nn/nn_internal.h"

#define GPT_LANES 16

/* The element-wise kernels are built for AVX-512 and AVX2 too and chosen at
 * load time by the CPU (GCC's target_clones, through an ifunc), as OpenBLAS
 * chooses its kernels. The clones compute the same bits: the build is ISO
 * C (-ffp-contract=off, so no fused multiply-adds) and the reductions'
 * order does not depend on the vector width. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(DT_NO_TARGET_CLONES)
#define GPT_SIMD __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GPT_SIMD
#endif

/* ---- row helpers (shared by the kernels) -----------------------------------------
 * Reductions keep GPT_LANES independent partial results so that the compiler
 * vectorises them without reassociating (no -ffast-math). */

static inline float gpt_row_sum(const float *x, int n) {
    float acc[GPT_LANES] = {0};
    int i = 0;
    for (; i + GPT_LANES <= n; i += GPT_LANES)
        for (int k = 0; k < GPT_LANES; k++) acc[k] += x[i + k];
    float s = 0.0f;
    for (; i < n; i++) s += x[i];
    for (int k = 0; k < GPT_LANES; k++) s += acc[k];
    return s;
}

static inline float gpt_row_sumsq_centered(const float *x, int n, float c) {
    float acc[GPT_LANES] = {0};
    int i = 0;
    for (; i + GPT_LANES <= n; i += GPT_LANES)
        for (int k = 0; k < GPT_LANES; k++) {
            float d = x[i + k] - c;
            acc[k] += d * d;
        }
    float s = 0.0f;
    for (; i < n; i++) {
        float d = x[i] - c;
        s += d * d;
    }
    for (int k = 0; k < GPT_LANES; k++) s += acc[k];
    return s;
}

static inline float gpt_row_max(const float *x, int n) {
    float acc[GPT_LANES];
    for (int k = 0; k < GPT_LANES; k++) acc[k] = -INFINITY;
    int i = 0;
    for (; i + GPT_LANES <= n; i += GPT_LANES)
        for (int k = 0; k < GPT_LANES; k++) acc[k] = x[i + k] > acc[k] ? x[i + k] : acc[k];
    float m = -INFINITY;
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    for (int k = 0; k < GPT_LANES; k++) m = acc[k] > m ? acc[k] : m;
    return m;
}

/* out[i] = exp(x[i] - c); returns the sum of out. */
static inline float gpt_row_exp_sum(float *out, const float *x, int n, float c) {
    float acc[GPT_LANES] = {0};
    int i = 0;
    for (; i + GPT_LANES <= n; i += GPT_LANES)
        for (int k = 0; k < GPT_LANES; k++) {
            float e = dt_nn_expf(x[i + k] - c);
            out[i + k] = e;
            acc[k] += e;
        }
    float s = 0.0f;
    for (; i < n; i++) {
        float e = dt_nn_expf(x[i] - c);
        out[i] = e;
        s += e;
    }
    for (int k = 0; k < GPT_LANES; k++) s += acc[k];
    return s;
}

/* ---- kernels (gpt_kernels.c) ------------------------------------------------ */

/* out[N,C] = wte[tok[b,t],:] + wpe[t,:]; tok [B,T], wte [V,C], wpe [maxT,C]. */
void gpt_encoder_forward(float *out, const int32_t *tok, const float *wte, const float *wpe,
                         int B, int T, int C);
/* dwte[V,C] += scatter of dout by token; dwpe[maxT,C] += sum over b; dout [N,C]. */
void gpt_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tok,
                          int B, int T, int C);
/* out[N,C] = (inp - mean) * rstd * weight + bias; mean, rstd [N] saved for
 * backward (eps 1e-5, biased variance as torch.nn.LayerNorm). */
void gpt_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C);
/* dinp[N,C] +=, dweight[C] +=, dbias[C] += from dout [N,C]; inp [N,C],
 * weight [C], mean/rstd [N] from the forward. */
void gpt_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C);
/* out[N,OC] = resid[N,OC] + inp[N,C] @ weight[OC,C]^T + bias[OC]; resid
 * may be NULL (nothing added) or equal to out; bias may be NULL. */
void gpt_matmul_forward(float *out, const float *resid, const float *inp, const float *weight,
                        const float *bias, int N, int C, int OC);
/* dinp[N,C] = dout[N,OC] @ weight[OC,C] (dinp may be NULL: skipped);
 * dweight[OC,C] += dout^T @ inp[N,C]; dbias[OC] += column sums of dout
 * (dbias may be NULL). */
void gpt_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC);
/* out[n] = gelu_tanh(inp[n]) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
void gpt_gelu_forward(float *out, const float *inp, size_t n);
/* dinp[n] = gelu_tanh'(inp[n]) * dout[n]; dinp may equal dout (in place). */
void gpt_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);
/* Cross-entropy of logits [N,V] (row stride ldl >= V) against targets [N]:
 * lse[N] = log-sum-exp of each row (saved for backward); with targets (else
 * NULL and tlogit/hit unused): tlogit[N] = the logit at the target, hit[N]
 * = 1 if the row's first maximum is at the target. The loss of row n is
 * lse[n] - tlogit[n]. */
void gpt_crossentropy_forward(float *lse, float *tlogit, int32_t *hit, const float *logits,
                              const int32_t *targets, int N, int V, int ldl);
/* dlogits[N,V] = (softmax(logits) - onehot(target)) * dscale, computed
 * from logits and lse; dlogits may equal logits (in place). */
void gpt_crossentropy_backward(float *dlogits, const float *logits, const float *lse,
                               const int32_t *targets, int N, int V, int ldl, float dscale);
/* logp[N,V] = logits - lse (log-softmax from the saved lse); logits have
 * row stride ldl, logp V. */
void gpt_log_softmax(float *logp, const float *logits, const float *lse, int N, int V, int ldl);

/* ---- attention (gpt_attention.c) ---------------------------------------------- */

/* Query rows per causal block of the attention kernels. */
#ifndef GPT_ATT_ROWS
#define GPT_ATT_ROWS 64
#endif

/* Causal multi-head self-attention. qkv [B,T,3C] holds q, k, v in its three
 * C-wide parts, head h in columns [h*hs, (h+1)*hs) of each. out [B,T,C] =
 * per head softmax(q k^T / sqrt(hs), causal) v; att [B,NH,T,T] receives the
 * probabilities (row t valid in columns 0..t; the columns after t up to the
 * end of t's block of GPT_ATT_ROWS rows are 0; later ones are not written). */
void gpt_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
                           int NH);
/* dqkv[B,T,3C] = the gradient of all three parts (written); scratch
 * [min(T,GPT_ATT_ROWS), T];
 * dout [B,T,C]; qkv and att from the forward. */
void gpt_attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                            const float *att, int B, int T, int C, int NH);
/* One query position against a key/value cache (generation): out[C] for
 * query q[C] (the q part of one qkv row), keys kc[n,C] and values vc[n,C]
 * (positions 0..n-1, the query's own included); scratch [n]. */
void gpt_attention_step(float *out, float *scratch, const float *q, const float *kc,
                        const float *vc, int n, int C, int NH);

/* ---- the family's state (gpt_model.c, gpt_arena.c) ----------------------------------
 * Activations live in backend memory (gpt_backend.h): `void *` tensors are in
 * the compute precision (element size g->es), `float *` ones are f32. */

/* Activations one block keeps from forward to backward (recompute: one shared
 * set, refilled in backward). */
typedef struct gpt_block_acts {
    void *ln1;               /* [N,C] ln_1 output */
    float *ln1_mean, *ln1_rstd; /* [N] */
    void *qkv;               /* [N,3C] c_attn output */
    void *att;               /* the attention's saved state (backend: attention_sizes) */
    void *atty;              /* [N,C] attention output (c_proj input) */
    void *res2;              /* [N,C] x + attention branch (the mid residual) */
    void *ln2;               /* [N,C] ln_2 output */
    float *ln2_mean, *ln2_rstd; /* [N] */
    void *fch;               /* [N,4C] c_fc output (pre-GELU) */
    void *fchg;              /* [N,4C] GELU output (mlp.c_proj input) */
} gpt_block_acts;

typedef struct dt_gpt {
    int L, NH, C, V, maxT;   /* n_layer, n_head, n_embd, vocab_size, block_size */
    int Vp;                  /* the logits' row stride (backend's vocab_pad(V)) */
    int recompute;           /* current setting */
    /* the kernels and their instance, the compute precision */
    const struct gpt_backend *K;
    struct gpt_be *be;
    int prec;                /* gpt_prec */
    size_t es;               /* bytes of an activation / compute-precision weight */
    void *wc;                /* GPT_BF16: [P] the parameters in bf16, cast per unit at
                                its forward; NULL for GPT_F32 (the f32 parameters)
                                and once the parameters are released (ZeRO-3): */
    void *wslot;             /* then [largest unit] one unit's parameters in bf16,
                                cast at each use (gpt_use_unit) */
    size_t wslot_bytes;
    int wslot_unit;          /* the unit wslot holds (-1: none) */
    int wc_only;             /* wc is the parameters, written by the caller (ZeRO's
                                f32 master slices, dt_model_params_from_copy): no casts */
    /* the arena, laid out for (bmax, tmax, arena_recompute) */
    int bmax, tmax, arena_recompute;
    void *arena;             /* backend memory */
    int32_t *tok, *tgt;      /* host [bmax*tmax]: tokens and targets of the last forward */
    int32_t *tok_b, *tgt_b;  /* the same in backend memory (== tok, tgt for cpu) */
    void **res;              /* [L+1] residual stream [N,C]: res[0] the embedding
                                output, res[l+1] block l's output = block l+1's input */
    gpt_block_acts *acts;    /* [L]; with recompute all equal to acts[0] */
    void *lnf;               /* [N,C] ln_f output */
    float *lnf_mean, *lnf_rstd; /* [N] */
    void *logits;            /* [N,Vp]; overwritten by their gradient in backward */
    float *lse;              /* [N] log-sum-exp of each logits row */
    float *tlogit;           /* [N] the logit at the target (with labels) */
    int32_t *hit;            /* [N] 1: the row's first maximum is the target */
    /* backward scratch */
    void *dres;              /* [N,C] gradient of the residual stream */
    void *dln;               /* [N,C] gradient of a LayerNorm output */
    void *datty;             /* [N,C] */
    void *dqkv;              /* [N,3C] */
    void *dfch;              /* [N,4C] */
    void *att_scratch;       /* the attention's workspace (backend: attention_sizes) */
    int scores_valid;        /* logits hold the last forward's logits */
    int stats_valid;         /* lse/tlogit/hit hold the last forward's (with labels) */
    /* host copies handed out by the outputs of the last forward (built
     * lazily; a device model's are downloaded) */
    float *logp;             /* [logp_cap] dt_model_log_probs */
    size_t logp_cap;
    int logp_valid;
    float *view;             /* [view_cap] a device model's scores / layer output */
    size_t view_cap;
} dt_gpt;

static inline dt_gpt *gpt_of(dt_model *m) { return (dt_gpt *)m->impl; }
static inline const dt_gpt *gpt_ofc(const dt_model *m) { return (const dt_gpt *)m->impl; }

/* Units: 0 embeddings, 1..L blocks, L+1 ln_f, L+2 lm_head. */
#define GPT_UNIT_EMBED 0
#define GPT_UNIT_BLOCK(l) (1 + (l))
#define GPT_UNIT_LNF(L) ((L) + 1)
#define GPT_UNIT_HEAD(L) ((L) + 2)

/* Parameters (or gradients) of one block inside its unit's range, for
 * elements of `es` bytes from `base`. */
typedef struct gpt_block_params {
    void *ln1w, *ln1b;       /* [C] */
    void *qkvw, *qkvb;       /* [3C,C], [3C] */
    void *attprojw, *attprojb; /* [C,C], [C] */
    void *ln2w, *ln2b;       /* [C] */
    void *fcw, *fcb;         /* [4C,C], [4C] */
    void *fcprojw, *fcprojb; /* [C,4C], [C] */
} gpt_block_params;

void gpt_block_params_at(gpt_block_params *p, void *base, size_t es, int C);

/* A unit's parameters, released by a strategy and not redirected, cannot be
 * computed with: DT_ERR_STATE naming it. */
int gpt_need_params(dt_model *m, int u);
/* The compute-precision parameters of unit u (the f32 ones for GPT_F32; for
 * GPT_BF16 the ones given in bf16 (param16), else the bf16 copy, valid after
 * the unit's forward cast them). */
void *gpt_wgt(dt_model *m, int u);
/* GPT_BF16: cast unit u's current f32 parameters into the bf16 copy (no-op
 * for GPT_F32 and for units without parameters). */
int gpt_cast_unit(dt_model *m, int u);
/* Before a use of unit u's compute-precision parameters after its forward
 * (backward, the tied head): with the one-unit copy (wslot), cast them again
 * unless it holds u's; a no-op otherwise (the forward's cast holds). */
int gpt_use_unit(dt_model *m, int u);
/* The model's flat parameters were released (ZeRO-3): the bf16 copy goes
 * from all units to one unit at a time (gpt_arena.c). */
int gpt_params_released(dt_model *m);
size_t gpt_compute_copy_bytes(const dt_model *m, int *per_layer);
/* The whole bf16 copy (NULL: f32, or one unit at a time), and the switch to
 * computing from it as the caller writes it (gpt_arena.c). */
uint16_t *gpt_compute_copy(const dt_model *m);
int gpt_params_from_copy(dt_model *m);
/* Every unit comes in bf16 from now on (units' param16): the one-unit copy
 * is freed (gpt_arena.c). */
int gpt_layers_bf16(dt_model *m);

/* Make the arena fit (B, T) with the current recompute setting. */
int gpt_ensure_arena(dt_model *m, int B, int T);
/* The family's outputs of the last forward and its arena's size (gpt_arena.c). */
int gpt_activation_bytes(const dt_model *m, int B, int T, int recompute, size_t *bytes);
const float *gpt_scores(const dt_model *m);
const float *gpt_log_probs(dt_model *m);
const float *gpt_layer_output(const dt_model *m, int layer);
size_t gpt_layer_output_size(const dt_model *m, int layer);
int gpt_loss(dt_model *m, float *loss);
int gpt_row_stats(dt_model *m, size_t rows, double *correct, double *loss_sum);
void gpt_free_arena(dt_gpt *g);

/* A failed kernel's message, with the tensor (or unit) it was computing
 * prefixed: "transformer.h.3 attention forward: cublasLtMatmul: ...". */
int gpt_fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The passes (gpt_pass.c). */
int gpt_forward(dt_model *m, const void *x, const int32_t *labels, int B, int T, int train);
int gpt_backward(dt_model *m, float scale);
/* One block's forward (gpt_pass.c): res_out may be NULL (recompute: the
 * last projection is skipped); p in the compute precision. */
int gpt_block_forward(dt_gpt *g, void *res_out, gpt_block_acts *a, const void *x,
                      const gpt_block_params *p, int B, int T, int l);

/* Generation (gpt_generate.c). */
int gpt_generate(dt_model *m, const int32_t *prompt, int prompt_len, int n_new,
                 float temperature, uint64_t seed, int32_t *out);

#endif
