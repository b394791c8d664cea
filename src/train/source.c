/* src/train/source.c - the trainer's model families: which data each trains
 * on, how its model is configured from the flags and which of its sizes a
 * checkpoint records (see source.h). */
#include <stdio.h>
#include <string.h>
#include "core/error.h"
#include "dtrain/text.h"
#include "train/source.h"

static int configure_sequential(dt_model_config *c, const dt_train_options *o) {
    if (o->hidden1) c->hidden1 = o->hidden1; /* mlp widths */
    if (o->hidden2) c->hidden2 = o->hidden2;
    if (o->conv_channels1) c->conv_channels1 = o->conv_channels1; /* cnn channels */
    if (o->conv_channels2) c->conv_channels2 = o->conv_channels2;
    if (o->dropout >= 0) c->dropout = o->dropout;
    c->seed = o->seed;
    return DT_OK;
}

static int configure_gpt(dt_model_config *c, const dt_train_options *o) {
    if (o->n_layer) c->n_layer = o->n_layer;
    if (o->n_head) c->n_head = o->n_head;
    if (o->n_embd) c->n_embd = o->n_embd;
    if (o->block_size) c->block_size = o->block_size;
    c->seq_len = o->seq_len; /* 0: block_size; checked against it by dt_model_create */
    /* the data's vocabulary unless given: bytes, or llm.c's GPT-2 tokens
     * (--init-from replaces it with the file's, dt_trainer_init_config) */
    if (o->vocab_size) c->vocab_size = o->vocab_size;
    else c->vocab_size = dt_text_is_tokens(*o->data_dir ? o->data_dir : DT_FORTUNES_DIR) == 1 ? DT_TEXT_GPT2_VOCAB : 256;
    c->recompute = o->recompute;
    c->seed = o->seed;
    return DT_OK;
}

/* the manifest's keys for both mlp widths and cnn channels (the format of
 * checkpoints written when they shared their storage): the flags' values */
static int meta_sequential(const dt_model_config *c, const dt_train_options *o, char keys[][16], char vals[][24]) {
    (void)c;
    int n = 0, cnn = strcmp(o->model, "cnn") == 0;
    snprintf(keys[n], 16, "hidden1");
    snprintf(vals[n++], 24, "%d", cnn ? o->conv_channels1 : o->hidden1);
    snprintf(keys[n], 16, "hidden2");
    snprintf(vals[n++], 24, "%d", cnn ? o->conv_channels2 : o->hidden2);
    return n;
}

/* a sequence model: its sizes (after --init-from, the file's) */
static int meta_gpt(const dt_model_config *c, const dt_train_options *o, char keys[][16], char vals[][24]) {
    (void)o;
    const struct { const char *k; int v; } kv[] = {{"n_layer", c->n_layer}, {"n_head", c->n_head},
                                                   {"n_embd", c->n_embd}, {"block_size", c->block_size},
                                                   {"vocab_size", c->vocab_size}};
    int n = 0;
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++, n++) {
        snprintf(keys[n], 16, "%s", kv[i].k);
        snprintf(vals[n], 24, "%d", kv[i].v);
    }
    return n;
}

static const char *const k_seq_models[] = {"mlp", "lenet", "cnn", NULL};
static const char *const k_gpt_models[] = {"gpt", NULL};

static const struct {
    const char *const *models; /* --model values */
    dt_train_family f;
} k_families[] = {
    {k_seq_models, {"sequential", &dt_source_fashion_mnist, configure_sequential, 1, 500, meta_sequential}},
    {k_gpt_models, {"gpt", &dt_source_text, configure_gpt, 2, 0, meta_gpt}},
};
#define NFAM ((int)(sizeof k_families / sizeof k_families[0]))

const dt_train_family *dt_train_family_of(const char *model) {
    char known[128] = "";
    size_t k = 0;
    for (int f = 0; f < NFAM; f++)
        for (const char *const *n = k_families[f].models; *n; n++) {
            if (model && strcmp(*n, model) == 0) return &k_families[f].f;
            if (k < sizeof known) k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", k ? ", " : "", *n);
        }
    DT_ERR(DT_ERR_INVALID, "model '%s' is not one the trainer knows (%s)", model ? model : "(null)", known);
    return NULL;
}

const char *dt_train_model_name(const dt_train_options *o) {
    return *o->preset ? o->preset : o->model;
}
