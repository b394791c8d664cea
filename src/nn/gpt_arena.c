/* src/nn/gpt_arena.c - the gpt family's activation arena (with and without
 * recomputation) in its backend's memory, the compute-precision parameters,
 * and the outputs of the last forward: loss, row statistics, scores,
 * log-probabilities and layer outputs (host copies for a device model). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "dtrain/dtype.h"
#include "nn/gpt_internal.h"

int gpt_fail(int rc, const char *fmt, ...) {
    char what[160], why[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(why, sizeof why, "%s", dt_last_error());
    return dt_error(rc, "dt_model", "%s: %s", what, why);
}

/* ---- compute-precision parameters ------------------------------------------------------ */

int gpt_need_params(dt_model *m, int u) {
    if (m->units[u].param_count && !gpt_ofc(m)->wc_only && !m->units[u].param16 && !dtm_params(m, u))
        return DT_ERR(DT_ERR_STATE, "layer %d (%s) has no resident parameters", u, m->units[u].name);
    return DT_OK;
}

void *gpt_wgt(dt_model *m, int u) {
    const dt_gpt *g = gpt_ofc(m);
    if (g->prec == GPT_F32) return dtm_params(m, u);
    if (m->units[u].param16) return (void *)m->units[u].param16; /* given in bf16 */
    if (!g->wc) return g->wslot; /* one unit at a time */
    return (char *)g->wc + m->units[u].param_off * g->es;
}

int gpt_cast_unit(dt_model *m, int u) {
    dt_gpt *g = gpt_of(m);
    const dt_unit *U = &m->units[u];
    if (g->prec == GPT_F32 || !U->param_count || g->wc_only || U->param16) return DT_OK;
    if (!g->wc && !g->wslot)
        return DT_ERR(DT_ERR_STATE, "%s: its parameters are f32, and the model takes its layers in bf16 (no bf16 copy "
                      "to cast them into: give it the layer with dt_model_set_layer_params16)", U->name);
    g->wslot_unit = -1;
    int rc = g->K->cast(g->be, gpt_wgt(m, u), dtm_params(m, u), U->param_count);
    if (rc) return gpt_fail(rc, "%s: the bf16 copy of its parameters", U->name);
    if (!g->wc) g->wslot_unit = u;
    return DT_OK;
}

int gpt_use_unit(dt_model *m, int u) {
    const dt_gpt *g = gpt_ofc(m);
    if (g->prec == GPT_F32 || g->wc || m->units[u].param16 || g->wslot_unit == u) return DT_OK;
    int rc = gpt_need_params(m, u);
    return rc ? rc : gpt_cast_unit(m, u);
}

int gpt_params_released(dt_model *m) {
    dt_gpt *g = gpt_of(m);
    if (g->prec == GPT_F32 || !g->wc) return DT_OK;
    size_t most = 0;
    for (int u = 0; u < m->nlayers; u++)
        if (m->units[u].param_count > most) most = m->units[u].param_count;
    void *slot = NULL;
    int rc = g->K->alloc(g->be, most * g->es, "the bf16 copy of one layer's parameters", &slot);
    if (rc) return gpt_fail(rc, "ZeRO-3's layer-by-layer bf16 copy");
    g->K->free(g->be, g->wc);
    g->wc = NULL;
    g->wslot = slot;
    g->wslot_bytes = most * g->es;
    g->wslot_unit = -1;
    return DT_OK;
}

int gpt_layers_bf16(dt_model *m) {
    dt_gpt *g = gpt_of(m);
    if (g->wc) return DT_ERR(DT_ERR_STATE, "the model keeps a bf16 copy of all its parameters: release them first "
                             "(dt_model_release_flat)");
    g->K->free(g->be, g->wslot);
    g->wslot = NULL;
    g->wslot_bytes = 0;
    g->wslot_unit = -1;
    return DT_OK;
}

size_t gpt_compute_copy_bytes(const dt_model *m, int *per_layer) {
    const dt_gpt *g = gpt_ofc(m);
    if (g->prec == GPT_F32) return 0;
    if (g->wc) return m->nparams * g->es;
    if (per_layer) *per_layer = 1;
    return g->wslot_bytes;
}

uint16_t *gpt_compute_copy(const dt_model *m) {
    const dt_gpt *g = gpt_ofc(m);
    return g->prec == GPT_F32 ? NULL : g->wc;
}

int gpt_params_from_copy(dt_model *m) {
    dt_gpt *g = gpt_of(m);
    if (!gpt_compute_copy(m)) return DT_ERR(DT_ERR_UNSUPPORTED, "the gpt has no whole bf16 copy to compute from");
    g->wc_only = 1;
    return DT_OK;
}

/* ---- the arena ----------------------------------------------------------------------------- */

static size_t r64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* Size in bytes of the arena for (B, T, recompute); with base != NULL the
 * pointers of g are set into base as well. */
static size_t layout(dt_gpt *g, int B, int T, int recompute, char *base) {
    const size_t N = (size_t)B * (size_t)T, C = (size_t)g->C, NC = N * C, es = g->es, f = sizeof(float);
    size_t saved, scratch, off = 0;
    g->K->attention_sizes(B, T, g->C, g->NH, (gpt_prec)g->prec, &saved, &scratch);
#define TAKE(ptr, bytes)                          \
    do {                                          \
        if (base) (ptr) = (void *)(base + off);   \
        off += r64(bytes);                        \
    } while (0)
    for (int l = 0; l <= g->L; l++) TAKE(g->res[l], NC * es);
    const int nsets = recompute ? 1 : g->L;
    for (int l = 0; l < nsets; l++) {
        gpt_block_acts *a = &g->acts[l];
        TAKE(a->ln1, NC * es);
        TAKE(a->ln1_mean, N * f);
        TAKE(a->ln1_rstd, N * f);
        TAKE(a->qkv, 3 * NC * es);
        TAKE(a->att, saved);
        TAKE(a->atty, NC * es);
        TAKE(a->res2, NC * es);
        TAKE(a->ln2, NC * es);
        TAKE(a->ln2_mean, N * f);
        TAKE(a->ln2_rstd, N * f);
        TAKE(a->fch, 4 * NC * es);
        TAKE(a->fchg, 4 * NC * es);
    }
    if (base)
        for (int l = nsets; l < g->L; l++) g->acts[l] = g->acts[0];
    TAKE(g->lnf, NC * es);
    TAKE(g->lnf_mean, N * f);
    TAKE(g->lnf_rstd, N * f);
    TAKE(g->logits, N * (size_t)g->Vp * es);
    TAKE(g->lse, N * f);
    TAKE(g->tlogit, N * f);
    TAKE(g->hit, N * sizeof(int32_t));
    TAKE(g->dres, NC * es);
    TAKE(g->dln, NC * es);
    TAKE(g->datty, NC * es);
    TAKE(g->dqkv, 3 * NC * es);
    TAKE(g->dfch, 4 * NC * es);
    TAKE(g->att_scratch, scratch);
    if (g->K->device) { /* the tokens and targets in device memory */
        TAKE(g->tok_b, N * sizeof(int32_t));
        TAKE(g->tgt_b, N * sizeof(int32_t));
    }
#undef TAKE
    return off;
}

void gpt_free_arena(dt_gpt *g) {
    if (g->arena) g->K->free(g->be, g->arena);
    free(g->tok);
    g->arena = NULL;
    g->tok = g->tgt = g->tok_b = g->tgt_b = NULL;
    g->bmax = g->tmax = 0;
}

int gpt_ensure_arena(dt_model *m, int B, int T) {
    dt_gpt *g = gpt_of(m);
    if (g->arena && B <= g->bmax && T <= g->tmax && g->arena_recompute == g->recompute) return DT_OK;
    const int bmax = B > g->bmax ? B : g->bmax, tmax = T > g->tmax ? T : g->tmax;
    const size_t n = layout(g, bmax, tmax, g->recompute, NULL);
    const size_t nt = (size_t)bmax * (size_t)tmax;
    gpt_free_arena(g);
    void *arena = NULL;
    char what[96];
    snprintf(what, sizeof what, "the activations of batch %d x T %d%s", B, T, g->recompute ? " (recompute)" : "");
    int rc = g->K->alloc(g->be, n, what, &arena); /* zeroed: nothing uninitialised is ever read */
    int32_t *tok = malloc(2 * nt * sizeof(int32_t));
    if (rc || !tok) {
        if (arena) g->K->free(g->be, arena);
        free(tok);
        return rc ? rc : DT_ERR(DT_ERR_NOMEM, "out of memory for the tokens of batch %d x T %d", B, T);
    }
    layout(g, bmax, tmax, g->recompute, arena);
    g->arena = arena;
    g->tok = tok;
    g->tgt = tok + nt;
    if (!g->K->device) { /* host memory: the kernels read the host tokens */
        g->tok_b = g->tok;
        g->tgt_b = g->tgt;
    }
    g->bmax = bmax;
    g->tmax = tmax;
    g->arena_recompute = g->recompute;
    return DT_OK;
}

int gpt_activation_bytes(const dt_model *m, int B, int T, int recompute, size_t *bytes) {
    /* layout() with base NULL only reads the sizes */
    size_t n = layout((dt_gpt *)gpt_ofc(m), B, T, recompute, NULL);
    *bytes = n + 2 * (size_t)B * (size_t)T * sizeof(int32_t);
    return DT_OK;
}

/* ---- loss and row statistics ----------------------------------------------------------- */

/* The last forward's lse, tlogit, hit in host memory (a device model's
 * downloaded into *buf, freed by the caller). */
static int stats_host(dt_model *m, const float **lse, const float **tl, const int32_t **hit, void **buf) {
    dt_gpt *g = gpt_of(m);
    *buf = NULL;
    if (!g->stats_valid) return DT_ERR(DT_ERR_STATE, "the last forward had no labels");
    if (!g->K->device) {
        *lse = g->lse, *tl = g->tlogit, *hit = g->hit;
        return DT_OK;
    }
    const size_t N = (size_t)m->B * (size_t)m->T;
    char *h = malloc(3 * N * sizeof(float));
    if (!h) return DT_ERR(DT_ERR_NOMEM, "out of memory for %zu rows of statistics", N);
    int rc = g->K->download(g->be, h, g->lse, N * sizeof(float));
    if (!rc) rc = g->K->download(g->be, h + N * sizeof(float), g->tlogit, N * sizeof(float));
    if (!rc) rc = g->K->download(g->be, h + 2 * N * sizeof(float), g->hit, N * sizeof(int32_t));
    if (rc) {
        free(h);
        return gpt_fail(rc, "the loss of the last forward");
    }
    *lse = (const float *)h, *tl = (const float *)(h + N * sizeof(float));
    *hit = (const int32_t *)(h + 2 * N * sizeof(float));
    *buf = h;
    return DT_OK;
}

int gpt_loss(dt_model *m, float *loss) {
    const float *lse, *tl;
    const int32_t *hit;
    void *buf;
    int rc = stats_host(m, &lse, &tl, &hit, &buf);
    if (rc) return rc;
    const size_t N = (size_t)m->B * (size_t)m->T;
    double total = 0.0;
    for (size_t n = 0; n < N; n++) total += (double)lse[n] - (double)tl[n];
    *loss = (float)(total / (double)N);
    free(buf);
    return DT_OK;
}

int gpt_row_stats(dt_model *m, size_t rows, double *correct, double *loss_sum) {
    const float *lse, *tl;
    const int32_t *hit;
    void *buf;
    int rc = stats_host(m, &lse, &tl, &hit, &buf);
    if (rc) return rc;
    double c = 0.0, s = 0.0;
    for (size_t n = 0; n < rows; n++) {
        c += hit[n];
        s += (double)lse[n] - (double)tl[n];
    }
    *correct = c;
    *loss_sum = s;
    free(buf);
    return DT_OK;
}

/* ---- outputs of the last forward --------------------------------------------------------- */

/* A device model's [rows, cols] activations (row stride ld, compute
 * precision) as host floats in g->view. */
static const float *view_of(const dt_model *m, const void *src, size_t rows, size_t cols, size_t ld) {
    dt_gpt *g = gpt_of((dt_model *)m);
    const size_t n = rows * cols, bytes = rows * ld * g->es;
    if (n > g->view_cap) {
        float *p = malloc(n * sizeof(float));
        if (!p) {
            DT_ERR(DT_ERR_NOMEM, "out of memory for a host copy of %zu x %zu activations", rows, cols);
            return NULL;
        }
        free(g->view);
        g->view = p;
        g->view_cap = n;
    }
    char *raw = malloc(bytes ? bytes : 1);
    if (!raw) {
        DT_ERR(DT_ERR_NOMEM, "out of memory for a host copy of %zu bytes of activations", bytes);
        return NULL;
    }
    int rc = g->K->download(g->be, raw, src, bytes);
    for (size_t r = 0; !rc && r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            size_t i = r * ld + c;
            g->view[r * cols + c] = g->es == 2 ? dt_bf16_to_f32(((const uint16_t *)(const void *)raw)[i])
                                               : ((const float *)(const void *)raw)[i];
        }
    free(raw);
    if (rc) {
        gpt_fail(rc, "a host copy of the activations");
        return NULL;
    }
    return g->view;
}

const float *gpt_scores(const dt_model *m) {
    const dt_gpt *g = gpt_ofc(m);
    if (!g->scores_valid) {
        DT_ERR(DT_ERR_STATE, "the logits of the last forward were consumed by its backward");
        return NULL;
    }
    if (!g->K->device) return g->logits; /* f32, row stride V */
    return view_of(m, g->logits, (size_t)m->B * (size_t)m->T, (size_t)g->V, (size_t)g->Vp);
}

const float *gpt_log_probs(dt_model *m) {
    dt_gpt *g = gpt_of(m);
    if (g->logp_valid) return g->logp;
    if (!g->scores_valid) {
        DT_ERR(DT_ERR_STATE, "the log-probabilities must be asked for before the forward's backward");
        return NULL;
    }
    const size_t N = (size_t)m->B * (size_t)m->T, n = N * (size_t)g->V;
    if (n > g->logp_cap) {
        float *p = aligned_alloc(64, r64(n * sizeof(float)));
        if (!p) {
            DT_ERR(DT_ERR_NOMEM, "out of memory for %zu log-probabilities", n);
            return NULL;
        }
        free(g->logp);
        g->logp = p;
        g->logp_cap = r64(n * sizeof(float)) / sizeof(float);
    }
    const float *logits = gpt_scores(m), *lse = g->lse;
    float *lse_h = NULL;
    if (logits && g->K->device) { /* the row maxima in host memory too */
        lse_h = malloc(N * sizeof(float));
        int rc = lse_h ? g->K->download(g->be, lse_h, g->lse, N * sizeof(float)) : DT_ERR_NOMEM;
        if (rc) {
            free(lse_h);
            if (rc == DT_ERR_NOMEM) DT_ERR(DT_ERR_NOMEM, "out of memory for %zu rows", N);
            else gpt_fail(rc, "the log-sum-exp of the last forward");
            return NULL;
        }
        lse = lse_h;
    }
    if (!logits) return NULL;
    /* host logits are [N, V] here (cpu: Vp == V; device: the compacted copy) */
    gpt_log_softmax(g->logp, logits, lse, (int)N, g->V, g->V);
    free(lse_h);
    g->logp_valid = 1;
    return g->logp;
}

const float *gpt_layer_output(const dt_model *m, int layer) {
    const dt_gpt *g = gpt_ofc(m);
    if (layer == GPT_UNIT_HEAD(g->L)) return gpt_scores(m);
    const void *p = layer == GPT_UNIT_LNF(g->L) ? g->lnf : g->res[layer]; /* 0: embeddings; 1 + l: block l */
    if (!g->K->device) return p;
    return view_of(m, p, (size_t)m->B * (size_t)m->T, (size_t)g->C, (size_t)g->C);
}

size_t gpt_layer_output_size(const dt_model *m, int layer) {
    const dt_gpt *g = gpt_ofc(m);
    const size_t T = (size_t)(m->T ? m->T : g->maxT);
    return T * (size_t)(layer == GPT_UNIT_HEAD(g->L) ? g->V : g->C);
}
