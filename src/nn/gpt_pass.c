/* src/nn/gpt_pass.c - the gpt family's forward and backward passes over its
 * units (embeddings, blocks, ln_f, the tied head), with the model hooks
 * around each unit and activation recomputation. */
#include <string.h>
#include "core/error.h"
#include "nn/gpt_internal.h"

/* ---- one transformer block --------------------------------------------------- */

void gpt_block_forward(float *res_out, gpt_block_acts *a, const float *x,
                       const gpt_block_params *p, int B, int T, int C, int NH) {
    const int N = B * T;
    /* attention branch: res2 = x + c_proj(attn(c_attn(ln_1(x)))) */
    gpt_layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, x, p->ln1w, p->ln1b, N, C);
    gpt_matmul_forward(a->qkv, NULL, a->ln1, p->qkvw, p->qkvb, N, C, 3 * C);
    gpt_attention_forward(a->atty, a->att, a->qkv, B, T, C, NH);
    gpt_matmul_forward(a->res2, x, a->atty, p->attprojw, p->attprojb, N, C, C);
    /* MLP branch: out = res2 + mlp.c_proj(gelu(mlp.c_fc(ln_2(res2)))) */
    gpt_layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, p->ln2w, p->ln2b, N, C);
    gpt_matmul_forward(a->fch, NULL, a->ln2, p->fcw, p->fcb, N, C, 4 * C);
    gpt_gelu_forward(a->fchg, a->fch, (size_t)N * 4 * (size_t)C);
    if (res_out) gpt_matmul_forward(res_out, a->res2, a->fchg, p->fcprojw, p->fcprojb, N, 4 * C, C);
}

/* dres [N,C]: on entry the gradient of the block's output, on return that
 * of its input x [N,C]. Parameter gradients accumulate into gp. */
static void block_backward(dt_gpt *g, const gpt_block_acts *a, const gpt_block_params *p,
                           const gpt_block_params *gp, const float *x, int B, int T) {
    const int N = B * T, C = g->C;
    float *dres = g->dres;
    /* MLP branch */
    gpt_matmul_backward(g->dfch, gp->fcprojw, gp->fcprojb, dres, a->fchg, p->fcprojw, N, 4 * C,
                        C);
    gpt_gelu_backward(g->dfch, a->fch, g->dfch, (size_t)N * 4 * (size_t)C);
    gpt_matmul_backward(g->dln, gp->fcw, gp->fcb, g->dfch, a->ln2, p->fcw, N, C, 4 * C);
    /* dres += ln_2's input gradient: now the gradient of res2 */
    gpt_layernorm_backward(dres, gp->ln2w, gp->ln2b, g->dln, a->res2, p->ln2w, a->ln2_mean,
                           a->ln2_rstd, N, C);
    /* attention branch */
    gpt_matmul_backward(g->datty, gp->attprojw, gp->attprojb, dres, a->atty, p->attprojw, N, C,
                        C);
    gpt_attention_backward(g->dqkv, g->dscratch, g->datty, a->qkv, a->att, B, T, C, g->NH);
    gpt_matmul_backward(g->dln, gp->qkvw, gp->qkvb, g->dqkv, a->ln1, p->qkvw, N, C, 3 * C);
    /* dres += ln_1's input gradient: now the gradient of x */
    gpt_layernorm_backward(dres, gp->ln1w, gp->ln1b, g->dln, x, p->ln1w, a->ln1_mean,
                           a->ln1_rstd, N, C);
}

/* ---- the passes ------------------------------------------------------------------- */

int gpt_forward(dt_model *m, const void *x, const int32_t *labels, int B, int T, int train) {
    (void)train; /* no dropout, no batch statistics */
    dt_gpt *g = gpt_of(m);
    int rc = gpt_ensure_arena(m, B, T);
    if (rc) return rc;
    const int N = B * T, C = g->C, V = g->V, L = g->L;
    g->scores_valid = 0;
    g->logp_valid = 0;
    memcpy(g->tok, x, (size_t)N * sizeof(int32_t));
    if (labels) memcpy(g->tgt, labels, (size_t)N * sizeof(int32_t));

    DTM_HOOK(m, pre_forward, GPT_UNIT_EMBED);
    const float *E = dtm_params(m, GPT_UNIT_EMBED); /* wte [V,C], then wpe [maxT,C] */
    gpt_encoder_forward(g->res[0], g->tok, E, E + (size_t)V * (size_t)C, B, T, C);
    DTM_HOOK(m, post_forward, GPT_UNIT_EMBED);

    for (int l = 0; l < L; l++) {
        const int u = GPT_UNIT_BLOCK(l);
        DTM_HOOK(m, pre_forward, u);
        gpt_block_params p;
        gpt_block_params_at(&p, dtm_params(m, u), C);
        gpt_block_forward(g->res[l + 1], &g->acts[l], g->res[l], &p, B, T, C, g->NH);
        DTM_HOOK(m, post_forward, u);
    }

    const int uf = GPT_UNIT_LNF(L);
    DTM_HOOK(m, pre_forward, uf);
    const float *F = dtm_params(m, uf);
    gpt_layernorm_forward(g->lnf, g->lnf_mean, g->lnf_rstd, g->res[L], F, F + C, N, C);
    DTM_HOOK(m, post_forward, uf);

    /* the tied head reads wte through its owner's current pointer */
    const int uh = GPT_UNIT_HEAD(L);
    DTM_HOOK(m, pre_forward, uh);
    gpt_matmul_forward(g->logits, NULL, g->lnf, dtm_params(m, GPT_UNIT_EMBED), NULL, N, C, V);
    DTM_HOOK(m, post_forward, uh);

    double total = gpt_crossentropy_forward(g->lse, g->logits, labels ? g->tgt : NULL, N, V);
    m->loss = (float)(total / (double)N);
    g->scores_valid = 1;
    return DT_OK;
}

int gpt_backward(dt_model *m, float scale) {
    dt_gpt *g = gpt_of(m);
    const int B = m->B, T = m->T, N = B * T, C = g->C, V = g->V, L = g->L;

    /* d(mean loss)/d(logits), in place of the logits */
    gpt_crossentropy_backward(g->logits, g->logits, g->lse, g->tgt, N, V, scale / (float)N);
    g->scores_valid = 0;

    /* head: dln = dlogits @ wte; wte's gradient += dlogits^T @ ln_f output
     * (the owner's current gradient pointer: see SHARED PARAMETERS) */
    const int uh = GPT_UNIT_HEAD(L);
    DTM_HOOK(m, pre_backward, uh);
    gpt_matmul_backward(g->dln, dtm_grads(m, GPT_UNIT_EMBED), NULL, g->logits, g->lnf,
                        dtm_params(m, GPT_UNIT_EMBED), N, C, V);
    DTM_HOOK(m, post_backward, uh);

    const int uf = GPT_UNIT_LNF(L);
    DTM_HOOK(m, pre_backward, uf);
    const float *F = dtm_params(m, uf);
    float *dF = dtm_grads(m, uf);
    memset(g->dres, 0, (size_t)N * (size_t)C * sizeof(float));
    gpt_layernorm_backward(g->dres, dF, dF + C, g->dln, g->res[L], F, g->lnf_mean, g->lnf_rstd,
                           N, C);
    DTM_HOOK(m, grad_ready, uf);
    DTM_HOOK(m, post_backward, uf);

    for (int l = L - 1; l >= 0; l--) {
        const int u = GPT_UNIT_BLOCK(l);
        DTM_HOOK(m, pre_backward, u);
        gpt_block_params p, gp;
        gpt_block_params_at(&p, dtm_params(m, u), C);
        gpt_block_params_at(&gp, dtm_grads(m, u), C);
        /* recompute: the shared set still holds the last block's activations */
        if (g->recompute && l != L - 1)
            gpt_block_forward(NULL, &g->acts[l], g->res[l], &p, B, T, C, g->NH);
        block_backward(g, &g->acts[l], &p, &gp, g->res[l], B, T);
        DTM_HOOK(m, grad_ready, u);
        DTM_HOOK(m, post_backward, u);
    }

    DTM_HOOK(m, pre_backward, GPT_UNIT_EMBED);
    float *dE = dtm_grads(m, GPT_UNIT_EMBED);
    gpt_encoder_backward(dE, dE + (size_t)V * (size_t)C, g->dres, g->tok, B, T, C);
    DTM_HOOK(m, grad_ready, GPT_UNIT_EMBED);
    DTM_HOOK(m, post_backward, GPT_UNIT_EMBED);
    return DT_OK;
}
