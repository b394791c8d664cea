/* src/nn/gpt_generate.c - sampling from a gpt model: one position at a
 * time with a key/value cache (see dt_model_generate in dtrain/model.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "dtrain/dtype.h"
#include "nn/gpt_internal.h"

typedef struct gen_state {
    dt_model *m;
    dt_gpt *g;
    /* backend memory (compute precision unless noted) */
    char *kc, *vc;    /* [L, maxT, C] keys and values of the cached positions */
    void *x;          /* [C] residual stream of the current position */
    void *ln;         /* [C] LayerNorm output */
    void *qkv;        /* [3C] */
    void *atty;       /* [C] */
    void *fch;        /* [4C] */
    void *logits;     /* [V] */
    void *scratch;    /* the attention step's workspace */
    float *stats;     /* [2] LayerNorm mean and rstd (f32; not used afterwards) */
    int32_t *tok;     /* [1] the current token (int32) */
    float *logits_h;  /* host [V]: the logits as f32 */
    void *raw_h;      /* host [V]: a device model's downloaded logits */
    int n;            /* positions in the cache */
} gen_state;

#define K (g->K)
#define BE (g->be)

/* Run token `tok` at position st->n, append its keys/values, leave the
 * logits of the next token in st->logits_h. */
static int step(gen_state *st, int32_t tok) {
    dt_model *m = st->m;
    const dt_gpt *g = st->g;
    const int C = g->C, L = g->L, V = g->V, pos = st->n;
    const size_t cs = (size_t)C, es = g->es, row = cs * es;
    int rc = K->upload(BE, st->tok, &tok, sizeof tok);
    const char *E = gpt_wgt(m, GPT_UNIT_EMBED);
    if (!rc) rc = K->encoder_forward(BE, st->x, st->tok, E, E + ((size_t)V * cs + (size_t)pos * cs) * es, 1, 1, C);
    if (rc) return gpt_fail(rc, "generation: the embedding at position %d", pos);
    for (int l = 0; l < L; l++) {
        gpt_block_params p;
        gpt_block_params_at(&p, gpt_wgt(m, GPT_UNIT_BLOCK(l)), es, C);
        char *kc = st->kc + (size_t)l * (size_t)g->maxT * row;
        char *vc = st->vc + (size_t)l * (size_t)g->maxT * row;
        const char *qkv = st->qkv;
        rc = K->layernorm_forward(BE, st->ln, st->stats, st->stats + 1, st->x, p.ln1w, p.ln1b, 1, C);
        if (!rc) rc = K->matmul_forward(BE, st->qkv, NULL, st->ln, p.qkvw, p.qkvb, 1, C, 3 * C, 3 * C);
        if (!rc) rc = K->copy(BE, kc + (size_t)pos * row, qkv + row, row);
        if (!rc) rc = K->copy(BE, vc + (size_t)pos * row, qkv + 2 * row, row);
        if (!rc) rc = K->attention_step(BE, st->atty, st->scratch, st->qkv, kc, vc, pos + 1, C, g->NH);
        if (!rc) rc = K->matmul_forward(BE, st->x, st->x, st->atty, p.attprojw, p.attprojb, 1, C, C, C);
        if (!rc) rc = K->layernorm_forward(BE, st->ln, st->stats, st->stats + 1, st->x, p.ln2w, p.ln2b, 1, C);
        if (!rc) rc = K->matmul_forward(BE, st->fch, NULL, st->ln, p.fcw, p.fcb, 1, C, 4 * C, 4 * C);
        if (!rc) rc = K->gelu_forward(BE, st->fch, st->fch, 4 * cs);
        if (!rc) rc = K->matmul_forward(BE, st->x, st->x, st->fch, p.fcprojw, p.fcprojb, 1, 4 * C, C, C);
        if (rc) return gpt_fail(rc, "generation: transformer.h.%d at position %d", l, pos);
    }
    const char *F = gpt_wgt(m, GPT_UNIT_LNF(L));
    rc = K->layernorm_forward(BE, st->ln, st->stats, st->stats + 1, st->x, F, F + cs * es, 1, C);
    if (!rc) rc = K->matmul_forward(BE, st->logits, NULL, st->ln, E, NULL, 1, C, V, V);
    if (rc) return gpt_fail(rc, "generation: the logits at position %d", pos);
    if (K->device) {
        if ((rc = K->download(BE, st->raw_h, st->logits, (size_t)V * es)))
            return gpt_fail(rc, "generation: the logits at position %d", pos);
        for (int i = 0; i < V; i++)
            st->logits_h[i] = es == 2 ? dt_bf16_to_f32(((const uint16_t *)st->raw_h)[i]) : ((const float *)st->raw_h)[i];
    }
    st->n = pos + 1;
    return DT_OK;
}

/* The next token from st->logits: argmax (temperature 0) or a draw from
 * softmax(logits / temperature). */
static int32_t pick(const float *logits, int V, float temperature, dt_rng *rng) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    if (temperature == 0.0f) return best;
    const double mx = logits[best], inv = 1.0 / (double)temperature;
    double sum = 0.0;
    for (int i = 0; i < V; i++) sum += exp(((double)logits[i] - mx) * inv);
    double r = dt_rng_uniform_f64(rng) * sum, c = 0.0;
    for (int i = 0; i < V; i++) {
        c += exp(((double)logits[i] - mx) * inv);
        if (r < c) return i;
    }
    return best; /* r == sum after rounding: the largest */
}

static int generate(dt_model *m, const int32_t *prompt, int prompt_len, int n_new, float temperature,
                    uint64_t seed, int32_t *out);

/* Generation reads every unit at every token: with the bf16 copy kept one
 * unit at a time (ZeRO-3), a whole copy while it runs. */
int gpt_generate(dt_model *m, const int32_t *prompt, int prompt_len, int n_new,
                 float temperature, uint64_t seed, int32_t *out) {
    dt_gpt *g = gpt_of(m);
    if (g->prec == GPT_F32 || g->wc || n_new == 0) return generate(m, prompt, prompt_len, n_new, temperature, seed, out);
    int rc = K->alloc(BE, m->nparams * g->es, "the bf16 copy of the parameters for generation", &g->wc);
    if (rc) return gpt_fail(rc, "generation");
    rc = generate(m, prompt, prompt_len, n_new, temperature, seed, out);
    K->free(BE, g->wc);
    g->wc = NULL;
    return rc;
}

static int generate(dt_model *m, const int32_t *prompt, int prompt_len, int n_new, float temperature,
                    uint64_t seed, int32_t *out) {
    dt_gpt *g = gpt_of(m);
    const int C = g->C, maxT = g->maxT;
    int rc = DT_OK;
    for (int u = 0; !rc && u < m->nlayers; u++) rc = gpt_need_params(m, u);
    if (rc || n_new == 0) return rc;
    for (int u = 0; !rc && u < m->nlayers; u++) rc = gpt_cast_unit(m, u); /* bf16: the current parameters */
    if (rc) return rc;
    gen_state st = {.m = m, .g = g};
    size_t att_saved, att_scratch;
    K->attention_sizes(1, maxT, C, g->NH, (gpt_prec)g->prec, &att_saved, &att_scratch);
    const size_t es = g->es, cache = (size_t)g->L * (size_t)maxT * (size_t)C * es;
    const size_t rows = (10 * (size_t)C + (size_t)g->V) * es, scr = (att_scratch + 63) & ~(size_t)63;
    char *mem = NULL;
    rc = K->alloc(BE, 2 * cache + rows + scr + 64, "the key/value cache of generation", (void **)&mem);
    int32_t *win = malloc((size_t)maxT * sizeof(int32_t)); /* tokens in the cache */
    float *lh = K->device ? malloc((size_t)g->V * (sizeof(float) + es)) : NULL;
    if (rc || !win || (K->device && !lh)) {
        if (mem) K->free(BE, mem);
        free(win);
        free(lh);
        return rc ? rc : DT_ERR(DT_ERR_NOMEM, "out of memory for generation (%d tokens of context)", maxT);
    }
    /* the [2] statistics and the token first (aligned), the scratch, then the rows */
    st.stats = (float *)(void *)mem;
    st.tok = (int32_t *)(void *)(mem + 2 * sizeof(float));
    st.scratch = mem + 64;
    st.kc = mem + 64 + scr;
    st.vc = st.kc + cache;
    char *r = st.vc + cache;
    st.x = r;
    st.ln = r + (size_t)C * es;
    st.qkv = r + 2 * (size_t)C * es;
    st.atty = r + 5 * (size_t)C * es;
    st.fch = r + 6 * (size_t)C * es;
    st.logits = r + 10 * (size_t)C * es;
    st.logits_h = K->device ? lh : st.logits; /* the cpu backend's memory is the host's */
    st.raw_h = K->device ? lh + g->V : NULL;
    dt_rng rng;
    dt_rng_seed(&rng, seed);

    /* the prompt's last maxT tokens */
    const int p0 = prompt_len > maxT ? prompt_len - maxT : 0;
    for (int i = p0; !rc && i < prompt_len; i++) {
        win[st.n] = prompt[i];
        rc = step(&st, prompt[i]);
    }
    for (int i = 0; !rc && i < n_new; i++) {
        out[i] = pick(st.logits_h, g->V, temperature, &rng);
        if (i == n_new - 1) break;
        if (st.n == maxT) {
            /* full: restart the cache from the last maxT/2 tokens */
            const int keep = maxT / 2;
            memmove(win, win + (maxT - keep), (size_t)keep * sizeof(int32_t));
            st.n = 0;
            for (int j = 0; !rc && j < keep; j++) rc = step(&st, win[j]);
        }
        win[st.n] = out[i];
        if (!rc) rc = step(&st, out[i]);
    }
    K->free(BE, mem);
    free(win);
    free(lh);
    return rc;
}
