/* src/nn/gpt_generate.c - sampling from a gpt model: one position at a
 * time with a key/value cache (see dt_model_generate in dtrain/model.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "nn/gpt_internal.h"

typedef struct gen_state {
    dt_model *m;
    dt_gpt *g;
    float *kc, *vc;   /* [L, maxT, C] keys and values of the cached positions */
    float *x;         /* [C] residual stream of the current position */
    float *ln;        /* [C] LayerNorm output */
    float *qkv;       /* [3C] */
    float *atty;      /* [C] */
    float *fch;       /* [4C] */
    float *logits;    /* [V] */
    float *scratch;   /* [maxT] attention weights */
    float mean, rstd; /* LayerNorm statistics (not used afterwards) */
    int n;            /* positions in the cache */
} gen_state;

/* Run token `tok` at position st->n, append its keys/values, leave the
 * logits of the next token in st->logits. */
static void step(gen_state *st, int32_t tok) {
    dt_model *m = st->m;
    const dt_gpt *g = st->g;
    const int C = g->C, L = g->L, V = g->V, pos = st->n;
    const size_t cs = (size_t)C;
    const float *E = dtm_params(m, GPT_UNIT_EMBED);
    gpt_encoder_forward(st->x, &tok, E, E + (size_t)V * cs + (size_t)pos * cs, 1, 1, C);
    for (int l = 0; l < L; l++) {
        gpt_block_params p;
        gpt_block_params_at(&p, dtm_params(m, GPT_UNIT_BLOCK(l)), C);
        float *kc = st->kc + (size_t)l * (size_t)g->maxT * cs;
        float *vc = st->vc + (size_t)l * (size_t)g->maxT * cs;
        gpt_layernorm_forward(st->ln, &st->mean, &st->rstd, st->x, p.ln1w, p.ln1b, 1, C);
        gpt_matmul_forward(st->qkv, NULL, st->ln, p.qkvw, p.qkvb, 1, C, 3 * C);
        memcpy(kc + (size_t)pos * cs, st->qkv + cs, cs * sizeof(float));
        memcpy(vc + (size_t)pos * cs, st->qkv + 2 * cs, cs * sizeof(float));
        gpt_attention_step(st->atty, st->scratch, st->qkv, kc, vc, pos + 1, C, g->NH);
        gpt_matmul_forward(st->x, st->x, st->atty, p.attprojw, p.attprojb, 1, C, C);
        gpt_layernorm_forward(st->ln, &st->mean, &st->rstd, st->x, p.ln2w, p.ln2b, 1, C);
        gpt_matmul_forward(st->fch, NULL, st->ln, p.fcw, p.fcb, 1, C, 4 * C);
        gpt_gelu_forward(st->fch, st->fch, 4 * cs);
        gpt_matmul_forward(st->x, st->x, st->fch, p.fcprojw, p.fcprojb, 1, 4 * C, C);
    }
    const float *F = dtm_params(m, GPT_UNIT_LNF(L));
    gpt_layernorm_forward(st->ln, &st->mean, &st->rstd, st->x, F, F + C, 1, C);
    gpt_matmul_forward(st->logits, NULL, st->ln, E, NULL, 1, C, V);
    st->n = pos + 1;
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

int gpt_generate(dt_model *m, const int32_t *prompt, int prompt_len, int n_new,
                 float temperature, uint64_t seed, int32_t *out) {
    dt_gpt *g = gpt_of(m);
    const int C = g->C, maxT = g->maxT;
    for (int u = 0; u < m->nlayers; u++)
        if (m->units[u].param_count && !dtm_params(m, u))
            return DT_ERR(DT_ERR_STATE, "layer %d (%s) has no resident parameters", u,
                          m->units[u].name);
    if (n_new == 0) return DT_OK;
    gen_state st = {.m = m, .g = g};
    const size_t cache = (size_t)g->L * (size_t)maxT * (size_t)C;
    const size_t rows = 10 * (size_t)C + (size_t)g->V + (size_t)maxT;
    float *mem = malloc((2 * cache + rows) * sizeof(float));
    int32_t *win = malloc((size_t)maxT * sizeof(int32_t)); /* tokens in the cache */
    if (!mem || !win) {
        free(mem);
        free(win);
        return DT_ERR(DT_ERR_NOMEM, "out of memory for the key/value cache (%zu floats)",
                      2 * cache);
    }
    st.kc = mem;
    st.vc = mem + cache;
    st.x = st.vc + cache;
    st.ln = st.x + C;
    st.qkv = st.ln + C;
    st.atty = st.qkv + 3 * C;
    st.fch = st.atty + C;
    st.logits = st.fch + 4 * C;
    st.scratch = st.logits + g->V;
    dt_rng rng;
    dt_rng_seed(&rng, seed);

    /* the prompt's last maxT tokens */
    const int p0 = prompt_len > maxT ? prompt_len - maxT : 0;
    for (int i = p0; i < prompt_len; i++) {
        win[st.n] = prompt[i];
        step(&st, prompt[i]);
    }
    for (int i = 0; i < n_new; i++) {
        out[i] = pick(st.logits, g->V, temperature, &rng);
        if (i == n_new - 1) break;
        if (st.n == maxT) {
            /* full: restart the cache from the last maxT/2 tokens */
            const int keep = maxT / 2;
            memmove(win, win + (maxT - keep), (size_t)keep * sizeof(int32_t));
            st.n = 0;
            for (int j = 0; j < keep; j++) step(&st, win[j]);
        }
        win[st.n] = out[i];
        step(&st, out[i]);
    }
    free(mem);
    free(win);
    return DT_OK;
}
