/* src/nn/gpt_pass.c - the gpt family's forward and backward passes over its
 * units (embeddings, blocks, ln_f, the tied head), with the model hooks
 * around each unit and activation recomputation. Every kernel is reached
 * through the model's backend table (gpt_backend.h); a failing kernel's
 * message names the unit it was computing. */
#include <string.h>
#include "core/error.h"
#include "nn/gpt_internal.h"

#define K (g->K)
#define BE (g->be)

/* The elements of a weight vector in the compute precision. */
static const void *at(const dt_gpt *g, const void *w, size_t i) { return (const char *)w + i * g->es; }

/* ---- one transformer block --------------------------------------------------- */

int gpt_block_forward(dt_gpt *g, void *res_out, gpt_block_acts *a, const void *x, const gpt_block_params *p,
                      int B, int T, int l) {
    const int N = B * T, C = g->C;
    const size_t n4 = (size_t)N * 4 * (size_t)C;
    int rc;
#define RUN(call, what)                                                                      \
    do {                                                                                     \
        if ((rc = (call))) return gpt_fail(rc, "transformer.h.%d %s forward", l, what);     \
    } while (0)
    /* attention branch: res2 = x + c_proj(attn(c_attn(ln_1(x)))) */
    RUN(K->layernorm_forward(BE, a->ln1, a->ln1_mean, a->ln1_rstd, x, p->ln1w, p->ln1b, N, C), "ln_1");
    RUN(K->matmul_forward(BE, a->qkv, NULL, a->ln1, p->qkvw, p->qkvb, N, C, 3 * C, 3 * C), "attn.c_attn");
    RUN(K->attention_forward(BE, a->atty, a->att, g->att_scratch, a->qkv, B, T, C, g->NH), "attention");
    RUN(K->matmul_forward(BE, a->res2, x, a->atty, p->attprojw, p->attprojb, N, C, C, C), "attn.c_proj");
    /* MLP branch: out = res2 + mlp.c_proj(gelu(mlp.c_fc(ln_2(res2)))) */
    RUN(K->layernorm_forward(BE, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, p->ln2w, p->ln2b, N, C), "ln_2");
    if (K->matmul_gelu_forward) {
        RUN(K->matmul_gelu_forward(BE, a->fchg, a->fch, a->ln2, p->fcw, p->fcb, N, C, 4 * C), "mlp.c_fc + gelu");
    } else {
        RUN(K->matmul_forward(BE, a->fch, NULL, a->ln2, p->fcw, p->fcb, N, C, 4 * C, 4 * C), "mlp.c_fc");
        RUN(K->gelu_forward(BE, a->fchg, a->fch, n4), "gelu");
    }
    if (res_out)
        RUN(K->matmul_forward(BE, res_out, a->res2, a->fchg, p->fcprojw, p->fcprojb, N, 4 * C, C, C), "mlp.c_proj");
#undef RUN
    return DT_OK;
}

/* dres [N,C]: on entry the gradient of the block's output, on return that
 * of its input x [N,C]. Parameter gradients (f32) accumulate into gp. */
static int block_backward(dt_gpt *g, const gpt_block_acts *a, const gpt_block_params *p,
                          const gpt_block_params *gp, const void *x, int B, int T, int l) {
    const int N = B * T, C = g->C;
    void *dres = g->dres;
    int rc;
#define RUN(call, what)                                                                      \
    do {                                                                                     \
        if ((rc = (call))) return gpt_fail(rc, "transformer.h.%d %s backward", l, what);    \
    } while (0)
    /* MLP branch */
    RUN(K->matmul_backward(BE, g->dfch, gp->fcprojw, gp->fcprojb, dres, a->fchg, p->fcprojw, N, 4 * C, C, C),
        "mlp.c_proj");
    RUN(K->gelu_backward(BE, g->dfch, a->fch, g->dfch, (size_t)N * 4 * (size_t)C), "gelu");
    RUN(K->matmul_backward(BE, g->dln, gp->fcw, gp->fcb, g->dfch, a->ln2, p->fcw, N, C, 4 * C, 4 * C), "mlp.c_fc");
    /* dres += ln_2's input gradient: now the gradient of res2 */
    RUN(K->layernorm_backward(BE, dres, gp->ln2w, gp->ln2b, g->dln, a->res2, p->ln2w, a->ln2_mean, a->ln2_rstd,
                              N, C),
        "ln_2");
    /* attention branch */
    RUN(K->matmul_backward(BE, g->datty, gp->attprojw, gp->attprojb, dres, a->atty, p->attprojw, N, C, C, C),
        "attn.c_proj");
    RUN(K->attention_backward(BE, g->dqkv, g->att_scratch, g->datty, a->qkv, a->att, B, T, C, g->NH), "attention");
    RUN(K->matmul_backward(BE, g->dln, gp->qkvw, gp->qkvb, g->dqkv, a->ln1, p->qkvw, N, C, 3 * C, 3 * C),
        "attn.c_attn");
    /* dres += ln_1's input gradient: now the gradient of x */
    RUN(K->layernorm_backward(BE, dres, gp->ln1w, gp->ln1b, g->dln, x, p->ln1w, a->ln1_mean, a->ln1_rstd, N, C),
        "ln_1");
#undef RUN
    return DT_OK;
}

/* ---- the passes ------------------------------------------------------------------- */

int gpt_forward(dt_model *m, const void *x, const int32_t *labels, int B, int T, int train) {
    (void)train; /* no dropout, no batch statistics */
    dt_gpt *g = gpt_of(m);
    int rc = gpt_ensure_arena(m, B, T);
    if (rc) return rc;
    const int N = B * T, C = g->C, V = g->V, L = g->L;
    g->scores_valid = 0;
    g->stats_valid = 0;
    g->logp_valid = 0;
    memcpy(g->tok, x, (size_t)N * sizeof(int32_t));
    if (labels) memcpy(g->tgt, labels, (size_t)N * sizeof(int32_t));
    if (K->device) {
        if ((rc = K->upload(BE, g->tok_b, g->tok, (size_t)N * sizeof(int32_t))) ||
            (labels && (rc = K->upload(BE, g->tgt_b, g->tgt, (size_t)N * sizeof(int32_t)))))
            return gpt_fail(rc, "the tokens of the batch");
    }

    DTM_HOOK(m, pre_forward, GPT_UNIT_EMBED);
    if ((rc = gpt_need_params(m, GPT_UNIT_EMBED)) || (rc = gpt_cast_unit(m, GPT_UNIT_EMBED))) return rc;
    const void *E = gpt_wgt(m, GPT_UNIT_EMBED); /* wte [V,C], then wpe [maxT,C] */
    if ((rc = K->encoder_forward(BE, g->res[0], g->tok_b, E, at(g, E, (size_t)V * (size_t)C), B, T, C)))
        return gpt_fail(rc, "transformer.wte/wpe forward");
    DTM_HOOK(m, post_forward, GPT_UNIT_EMBED);

    for (int l = 0; l < L; l++) {
        const int u = GPT_UNIT_BLOCK(l);
        DTM_HOOK(m, pre_forward, u);
        if ((rc = gpt_need_params(m, u)) || (rc = gpt_cast_unit(m, u))) return rc;
        gpt_block_params p;
        gpt_block_params_at(&p, gpt_wgt(m, u), g->es, C);
        if ((rc = gpt_block_forward(g, g->res[l + 1], &g->acts[l], g->res[l], &p, B, T, l))) return rc;
        DTM_HOOK(m, post_forward, u);
    }

    const int uf = GPT_UNIT_LNF(L);
    DTM_HOOK(m, pre_forward, uf);
    if ((rc = gpt_need_params(m, uf)) || (rc = gpt_cast_unit(m, uf))) return rc;
    const void *F = gpt_wgt(m, uf);
    if ((rc = K->layernorm_forward(BE, g->lnf, g->lnf_mean, g->lnf_rstd, g->res[L], F, at(g, F, (size_t)C), N, C)))
        return gpt_fail(rc, "transformer.ln_f forward");
    DTM_HOOK(m, post_forward, uf);

    /* the tied head reads wte through its owner's current pointer (cast by
     * the owner's forward: the values are the owner's; cast again if the
     * bf16 copy is one unit's) */
    const int uh = GPT_UNIT_HEAD(L);
    DTM_HOOK(m, pre_forward, uh);
    if ((rc = gpt_need_params(m, GPT_UNIT_EMBED)) || (rc = gpt_use_unit(m, GPT_UNIT_EMBED))) return rc;
    if ((rc = K->matmul_forward(BE, g->logits, NULL, g->lnf, gpt_wgt(m, GPT_UNIT_EMBED), NULL, N, C, V, g->Vp)))
        return gpt_fail(rc, "lm_head forward");
    DTM_HOOK(m, post_forward, uh);

    if ((rc = K->crossentropy_forward(BE, g->lse, g->tlogit, g->hit, g->logits, labels ? g->tgt_b : NULL, N, V,
                                      g->Vp)))
        return gpt_fail(rc, "the cross-entropy");
    g->scores_valid = 1;
    g->stats_valid = labels != NULL;
    return DT_OK;
}

int gpt_backward(dt_model *m, float scale) {
    dt_gpt *g = gpt_of(m);
    const int B = m->B, T = m->T, N = B * T, C = g->C, V = g->V, L = g->L;
    int rc;

    /* d(mean loss)/d(logits), in place of the logits */
    g->scores_valid = 0;
    if ((rc = K->crossentropy_backward(BE, g->logits, g->logits, g->lse, g->tgt_b, N, V, g->Vp, scale / (float)N)))
        return gpt_fail(rc, "the cross-entropy backward");

    /* head: dln = dlogits @ wte; wte's gradient += dlogits^T @ ln_f output
     * (the owner's current gradient pointer: see SHARED PARAMETERS) */
    const int uh = GPT_UNIT_HEAD(L);
    DTM_HOOK(m, pre_backward, uh);
    if ((rc = gpt_use_unit(m, GPT_UNIT_EMBED))) return rc;
    if ((rc = K->matmul_backward(BE, g->dln, dtm_grads(m, GPT_UNIT_EMBED), NULL, g->logits, g->lnf,
                                 gpt_wgt(m, GPT_UNIT_EMBED), N, C, V, g->Vp)))
        return gpt_fail(rc, "lm_head backward");
    DTM_HOOK(m, post_backward, uh);

    const int uf = GPT_UNIT_LNF(L);
    DTM_HOOK(m, pre_backward, uf);
    if ((rc = gpt_use_unit(m, uf))) return rc;
    const void *F = gpt_wgt(m, uf);
    float *dF = dtm_grads(m, uf);
    if ((rc = K->zero(BE, g->dres, (size_t)N * (size_t)C * g->es)) ||
        (rc = K->layernorm_backward(BE, g->dres, dF, dF + C, g->dln, g->res[L], F, g->lnf_mean, g->lnf_rstd, N, C)))
        return gpt_fail(rc, "transformer.ln_f backward");
    DTM_HOOK(m, grad_ready, uf);
    DTM_HOOK(m, post_backward, uf);

    for (int l = L - 1; l >= 0; l--) {
        const int u = GPT_UNIT_BLOCK(l);
        DTM_HOOK(m, pre_backward, u);
        if ((rc = gpt_use_unit(m, u))) return rc;
        gpt_block_params p, gp;
        gpt_block_params_at(&p, gpt_wgt(m, u), g->es, C);
        gpt_block_params_at(&gp, dtm_grads(m, u), sizeof(float), C);
        /* recompute: the shared set still holds the last block's activations */
        if (g->recompute && l != L - 1 && (rc = gpt_block_forward(g, NULL, &g->acts[l], g->res[l], &p, B, T, l)))
            return rc;
        if ((rc = block_backward(g, &g->acts[l], &p, &gp, g->res[l], B, T, l))) return rc;
        DTM_HOOK(m, grad_ready, u);
        DTM_HOOK(m, post_backward, u);
    }

    DTM_HOOK(m, pre_backward, GPT_UNIT_EMBED);
    float *dE = dtm_grads(m, GPT_UNIT_EMBED);
    if ((rc = K->encoder_backward(BE, dE, dE + (size_t)V * (size_t)C, g->dres, g->tok_b, g->tok, B, T, C)))
        return gpt_fail(rc, "transformer.wte/wpe backward");
    DTM_HOOK(m, grad_ready, GPT_UNIT_EMBED);
    DTM_HOOK(m, post_backward, GPT_UNIT_EMBED);
    return DT_OK;
}
