/* src/nn/model_seq.c - the sequential family's runtime: activation arena,
 * forward, backward, outputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "nn/nn_internal.h"
#include "nn/seq_internal.h"


static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Size (or, with base != NULL, carve) the activation arena for bmax rows. */
static size_t arena_layout(dt_seq *m, int bmax, float *base) {
    size_t off = 0;
    const size_t B = (size_t)bmax;
#define TAKE(ptr, n)                                 \
    do {                                             \
        if (base) (ptr) = base + off;                \
        off += round16(n);                           \
    } while (0)
    TAKE(m->x, B * (size_t)m->in_c * (size_t)m->in_h * (size_t)m->in_w);
    TAKE(m->logp, B * (size_t)m->ncls);
    for (int l = 0; l < m->nlayers; l++) {
        dt_layer *L = &m->layers[l];
        if (L->kind == DTL_FLATTEN) {
            if (base) {
                L->out = l ? m->layers[l - 1].out : m->x;
                L->dout = l ? m->layers[l - 1].dout : NULL;
            }
            continue;
        }
        TAKE(L->out, B * L->out_size);
        /* layer 0's input gradient is never computed, so a flatten at 0
         * has no dout; every other layer's output needs one */
        TAKE(L->dout, B * L->out_size);
        if (L->kind == DTL_BN1D || L->kind == DTL_BN2D) {
            TAKE(L->save_mean, (size_t)L->in_c);
            TAKE(L->save_rstd, (size_t)L->in_c);
        }
        if (L->kind == DTL_DROPOUT) TAKE(L->mask, B * L->out_size);
    }
#undef TAKE
    return off;
}

static size_t work_need(const dt_seq *m, int bmax) {
    size_t need = 1;
    for (int l = 0; l < m->nlayers; l++) {
        const dt_layer *L = &m->layers[l];
        size_t w = 0;
        if (L->kind == DTL_LINEAR) w = (size_t)bmax * (size_t)L->out_c;
        else if (L->kind == DTL_CONV2D) w = dt_conv2d_workspace_size(&L->conv);
        else if (L->kind == DTL_BN1D || L->kind == DTL_BN2D) w = 2 * (size_t)L->in_c + 1;
        if (w > need) need = w;
    }
    return need;
}

static int ensure_batch(dt_seq *m, int B) {
    if (B <= m->bmax) return DT_OK;
    size_t n = arena_layout(m, B, NULL);
    size_t wn = work_need(m, B);
    float *arena = aligned_alloc(64, round16(n) * sizeof(float));
    float *work = aligned_alloc(64, round16(wn) * sizeof(float));
    int32_t *labels = malloc((size_t)B * sizeof(int32_t));
    int32_t *am[DT_SEQ_MAX_LAYERS] = {0};
    int ok = arena && work && labels;
    for (int l = 0; ok && l < m->nlayers; l++)
        if (m->layers[l].kind == DTL_MAXPOOL) {
            am[l] = malloc((size_t)B * m->layers[l].out_size * sizeof(int32_t));
            ok = am[l] != NULL;
        }
    if (!ok) {
        free(arena);
        free(work);
        free(labels);
        for (int l = 0; l < m->nlayers; l++) free(am[l]);
        return DT_ERR(DT_ERR_NOMEM, "out of memory for activations of batch %d", B);
    }
    /* zero once so that nothing uninitialised is ever read (e.g. logits
     * of a failed forward) */
    memset(arena, 0, round16(n) * sizeof(float));
    free(m->arena);
    free(m->work);
    free(m->labels);
    m->arena = arena;
    m->work = work;
    m->work_size = wn;
    m->labels = labels;
    for (int l = 0; l < m->nlayers; l++) {
        free(m->layers[l].argmax);
        m->layers[l].argmax = am[l];
    }
    arena_layout(m, B, arena);
    m->bmax = B;
    return DT_OK;
}

static int layer_forward(dt_model *mm, int l, int B, int train) {
    dt_seq *m = seq_of(mm);
    dt_layer *L = &m->layers[l];
    const float *in = l ? m->layers[l - 1].out : m->x;
    const size_t n = (size_t)B * L->out_size;
    switch (L->kind) {
    case DTL_LINEAR: {
        const float *W = dtm_params(mm, l);
        return dt_linear_forward(L->out, m->work, in, W, L->has_bias ? W + L->weight_count : NULL,
                                 B, (int)L->in_size, L->out_c);
    }
    case DTL_CONV2D: {
        const float *W = dtm_params(mm, l);
        return dt_conv2d_forward(L->out, m->work, in, W,
                                 L->has_bias ? W + L->weight_count : NULL, B, &L->conv);
    }
    case DTL_BN1D:
    case DTL_BN2D: {
        const float *P = dtm_params(mm, l);
        float *rm = mm->buffers + mm->units[l].buf_off;
        return dt_batchnorm_forward(L->out, L->save_mean, L->save_rstd, in, P,
                                    P + L->weight_count, rm, rm + L->in_c, m->work, B, L->in_c,
                                    L->in_h * L->in_w, train, L->momentum, L->eps,
                                    train ? mm->hooks.sync_stats : NULL, mm->hooks.ctx);
    }
    case DTL_RELU: return dt_relu_forward(L->out, in, n);
    case DTL_GELU: return dt_gelu_forward(L->out, in, n);
    case DTL_SIGMOID: return dt_sigmoid_forward(L->out, in, n);
    case DTL_TANH: return dt_tanh_forward(L->out, in, n);
    case DTL_AVGPOOL: return dt_avgpool2d_forward(L->out, in, B, &L->pool);
    case DTL_MAXPOOL: return dt_maxpool2d_forward(L->out, L->argmax, in, B, &L->pool);
    case DTL_FLATTEN: return DT_OK; /* L->out aliases the input */
    case DTL_DROPOUT:
        L->mask_active = train && L->p > 0.0f;
        if (!L->mask_active) {
            memcpy(L->out, in, n * sizeof(float));
            return DT_OK;
        } else {
            int rc = dt_dropout_mask(L->mask, n, L->p, &m->drop_rng);
            if (rc) return rc;
            return dt_dropout_forward(L->out, in, L->mask, n);
        }
    }
    return DT_ERR(DT_ERR_INTERNAL, "unknown layer kind %d", (int)L->kind);
}

/* Back-propagate layer l. The input gradient (the previous layer's dout) is
 * OVERWRITTEN (acc = 0 kernels), so activation gradients are never zeroed;
 * parameter gradients accumulate. */
static int layer_backward(dt_model *mm, int l, int B) {
    dt_seq *m = seq_of(mm);
    dt_layer *L = &m->layers[l];
    const float *in = l ? m->layers[l - 1].out : m->x;
    float *dinp = l ? m->layers[l - 1].dout : NULL;
    const size_t n = (size_t)B * L->out_size;
    if (L->kind == DTL_FLATTEN) return DT_OK; /* gradients alias */
    switch (L->kind) {
    case DTL_LINEAR: {
        const float *W = dtm_params(mm, l);
        float *G = dtm_grads(mm, l);
        return dt_nn_linear_backward_ex(dinp, G, L->has_bias ? G + L->weight_count : NULL,
                                        L->dout, in, W, B, (int)L->in_size, L->out_c, 0);
    }
    case DTL_CONV2D: {
        const float *W = dtm_params(mm, l);
        float *G = dtm_grads(mm, l);
        return dt_nn_conv2d_backward_ex(dinp, G, L->has_bias ? G + L->weight_count : NULL,
                                        m->work, L->dout, in, W, B, &L->conv, 0);
    }
    case DTL_BN1D:
    case DTL_BN2D: {
        const float *P = dtm_params(mm, l);
        float *G = dtm_grads(mm, l);
        return dt_nn_batchnorm_backward_ex(dinp, G, G + L->weight_count, m->work, L->dout, in,
                                           P, L->save_mean, L->save_rstd, B, L->in_c,
                                           L->in_h * L->in_w, 1, mm->hooks.sync_stats,
                                           mm->hooks.ctx, 0);
    }
    default: break;
    }
    if (!dinp) return DT_OK;
    switch (L->kind) {
    case DTL_RELU: return dt_nn_relu_backward_ex(dinp, L->dout, L->out, n, 0);
    case DTL_GELU: return dt_nn_gelu_backward_ex(dinp, L->dout, in, n, 0);
    case DTL_SIGMOID: return dt_nn_sigmoid_backward_ex(dinp, L->dout, L->out, n, 0);
    case DTL_TANH: return dt_nn_tanh_backward_ex(dinp, L->dout, L->out, n, 0);
    case DTL_AVGPOOL: return dt_nn_avgpool2d_backward_ex(dinp, L->dout, B, &L->pool, 0);
    case DTL_MAXPOOL:
        return dt_nn_maxpool2d_backward_ex(dinp, L->dout, L->argmax, B, &L->pool, 0);
    case DTL_DROPOUT:
        if (L->mask_active) return dt_nn_dropout_backward_ex(dinp, L->dout, L->mask, n, 0);
        return dt_nn_identity_backward_ex(dinp, L->dout, n, 0);
    default: break;
    }
    return DT_ERR(DT_ERR_INTERNAL, "unknown layer kind %d", (int)L->kind);
}

int dt_seq_forward(dt_model *mm, const void *xv, const int32_t *labels, int B, int T,
                   int train) {
    (void)T; /* 1, checked by the caller */
    dt_seq *m = seq_of(mm);
    const float *x = xv;
    int rc = ensure_batch(m, B);
    if (rc) return rc;
    const size_t in_size = (size_t)m->in_c * (size_t)m->in_h * (size_t)m->in_w;
    memcpy(m->x, x, (size_t)B * in_size * sizeof(float));
    if (labels) memcpy(m->labels, labels, (size_t)B * sizeof(int32_t));
    for (int l = 0; l < m->nlayers; l++) {
        DTM_HOOK(mm, pre_forward, l);
        rc = layer_forward(mm, l, B, train);
        if (rc) return rc;
        DTM_HOOK(mm, post_forward, l);
    }
    const float *scores = m->layers[m->nlayers - 1].out;
    if ((rc = dt_log_softmax_forward(m->logp, scores, B, m->ncls))) return rc;
    mm->loss = NAN;
    if (labels && (rc = dt_nll_loss_forward(&mm->loss, m->logp, m->labels, B, m->ncls)))
        return rc;
    return DT_OK;
}

int dt_seq_backward(dt_model *mm, float scale) {
    dt_seq *m = seq_of(mm);
    const int B = mm->B;
    dt_layer *last = &m->layers[m->nlayers - 1];
    memset(last->dout, 0, (size_t)B * last->out_size * sizeof(float)); /* [B,10]: tiny */
    int rc = dt_cross_entropy_backward(last->dout, m->logp, m->labels, B, m->ncls, scale);
    if (rc) return rc;
    for (int l = m->nlayers - 1; l >= 0; l--) {
        DTM_HOOK(mm, pre_backward, l);
        rc = layer_backward(mm, l, B);
        if (rc) return rc;
        if (mm->units[l].param_count) DTM_HOOK(mm, grad_ready, l);
        DTM_HOOK(mm, post_backward, l);
    }
    return DT_OK;
}

const float *dt_seq_log_probs(dt_model *m) { return seq_of(m)->logp; }

int dt_seq_row_stats(dt_model *mm, size_t rows, double *correct, double *loss_sum) {
    const dt_seq *m = seq_of(mm);
    double c = 0, s = 0;
    for (size_t r = 0; r < rows; r++) {
        const float *row = m->logp + r * (size_t)m->ncls;
        int best = 0;
        for (int v = 1; v < m->ncls; v++)
            if (row[v] > row[best]) best = v;
        c += best == m->labels[r];
        s -= row[m->labels[r]];
    }
    *correct = c;
    *loss_sum = s;
    return DT_OK;
}

const float *dt_seq_scores(const dt_model *m) {
    const dt_seq *S = seq_ofc(m);
    return S->layers[S->nlayers - 1].out;
}

const float *dt_seq_layer_output(const dt_model *m, int layer) {
    return seq_ofc(m)->layers[layer].out;
}

size_t dt_seq_layer_output_size(const dt_model *m, int layer) {
    return seq_ofc(m)->layers[layer].out_size;
}

int dt_seq_seed_dropout(dt_model *m, uint64_t seed) {
    dt_rng_seed2(&seq_of(m)->drop_rng, seed, 0x64726f70u);
    return DT_OK;
}

int dt_seq_activation_bytes(const dt_model *m, int B, int T, int recompute, size_t *bytes) {
    (void)T;
    (void)recompute; /* checked by the caller */
    const dt_seq *S = seq_ofc(m);
    size_t n = round16(arena_layout((dt_seq *)S, B, NULL)) + round16(work_need(S, B));
    size_t b = n * sizeof(float) + (size_t)B * sizeof(int32_t);
    for (int l = 0; l < S->nlayers; l++)
        if (S->layers[l].kind == DTL_MAXPOOL)
            b += (size_t)B * S->layers[l].out_size * sizeof(int32_t);
    *bytes = b;
    return DT_OK;
}

void dt_seq_free(void *impl) {
    dt_seq *S = impl;
    if (!S) return;
    free(S->arena);
    free(S->labels);
    free(S->work);
    for (int l = 0; l < S->nlayers; l++) free(S->layers[l].argmax);
    free(S);
}
