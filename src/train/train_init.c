/* src/train/train_init.c - the trainer's --init-from (dtrain/train.h, INIT
 * FROM): the model's sizes from the weights file merged with the flags, the
 * file's parameters read, and the one function that writes a full
 * parameter vector into the model before the strategy takes it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "dtrain/weights.h"
#include "train/trainer_internal.h"

/* a file that does not fit the flags, or holds what the model has not: exit 2 */
static int input(int rc) {
    return rc == DT_ERR_MISMATCH || rc == DT_ERR_UNSUPPORTED || rc == DT_ERR_INVALID ? dt_trainer_mark_input(rc) : rc;
}

/* a size flag given (non-zero) must be the file's */
static int flag_fits(const dt_weights *w, const char *flag, int given, const char *size, int file, const char *where) {
    if (!given || given == file) return DT_OK;
    return DT_ERR(DT_ERR_MISMATCH, "flag %s %d: %s has %s %d (%s; the sizes come from the file: leave the flag out)",
                  flag, given, dt_weights_path(w), size, file, where);
}

int dt_trainer_init_config(dt_trainer *t, dt_model_config *mc) {
    const dt_train_options *o = &t->o;
    int rc = input(dt_weights_open(o->init_from, &t->init));
    if (rc || strcmp(t->fam->family, "gpt") != 0) return rc; /* the classifiers: the flags' sizes */
    dt_weights_gpt a;
    const dt_weights *w = t->init;
    if ((rc = input(dt_weights_gpt_arch(w, &a)))) return rc;
    char wte[48], wpe[48], blocks[48];
    snprintf(wte, sizeof wte, "wte.weight [%d, %d]", a.vocab_size, a.n_embd);
    snprintf(wpe, sizeof wpe, "wpe.weight [%d, %d]", a.block_size, a.n_embd);
    snprintf(blocks, sizeof blocks, "the blocks h.0 .. h.%d", a.n_layer - 1);
    if ((rc = flag_fits(w, "--n-layer", o->n_layer, "n_layer", a.n_layer, blocks)) ||
        (rc = flag_fits(w, "--n-embd", o->n_embd, "n_embd", a.n_embd, wte)) ||
        (rc = flag_fits(w, "--vocab-size", o->vocab_size, "vocab_size", a.vocab_size, wte)) ||
        (rc = flag_fits(w, "--block-size", o->block_size, "block_size (n_positions)", a.block_size, wpe)))
        return dt_trainer_mark_input(rc);
    if (o->seq_len > a.block_size)
        return dt_trainer_mark_input(DT_ERR(DT_ERR_INVALID, "flag --seq-len %d: %s has %d positions (%s); a window is "
                                            "at most that", o->seq_len, dt_weights_path(w), a.block_size, wpe));
    mc->n_layer = a.n_layer;
    mc->n_embd = a.n_embd;
    mc->vocab_size = a.vocab_size;
    mc->block_size = a.block_size;
    /* the number of heads is in no shape: the flag, the file's word, the preset */
    if (o->n_head) mc->n_head = o->n_head;
    else if (a.n_head) mc->n_head = a.n_head;
    else if (!*o->preset)
        return dt_trainer_mark_input(DT_ERR(DT_ERR_INVALID, "%s does not say how many attention heads its model has (no "
                                            "dtrain metadata, no config.json beside it): give --n-head",
                                            dt_weights_path(w)));
    if (t->ci.rank == 0 && !o->quiet) {
        printf("init: weights of %s (%s; %s names%s): %d layers, %d heads%s, width %d, %d positions, vocabulary %d\n",
               dt_weights_path(w), a.conv1d ? "Hugging Face Conv1D matrices" : "torch.nn.Linear matrices",
               a.prefixed ? "transformer." : "unprefixed", a.has_config ? ", config.json" : "", mc->n_layer,
               mc->n_head, o->n_head ? " (--n-head)" : a.n_head ? "" : " (--preset)", mc->n_embd, mc->block_size,
               mc->vocab_size);
        fflush(stdout);
    }
    return DT_OK;
}

/* Writes the full parameter vector params [num_params] (host floats, the
 * model's layout order) and the buffers [num_buffers] (may be NULL when
 * there are none) into the model. It runs before the strategy is created:
 * DDP broadcasts and ZeRO shards what the model holds then. THE one place a
 * full parameter vector goes into the model: a model whose parameters live
 * in device memory gets them uploaded here. */
int dt_trainer_set_params(dt_trainer *t, const float *params, const float *buffers) {
    if (t->st) return DT_ERR(DT_ERR_STATE, "the parameters are set before the strategy takes the model");
    const size_t P = dt_model_num_params(t->model), NB = dt_model_num_buffers(t->model);
    float *p = dt_model_params(t->model);
    if (!p) return DT_ERR(DT_ERR_STATE, "the model's parameters were released");
    /* host memory, or the device's (in the model's stream order) */
    int rc = dt_model_copy_from_host(t->model, p, params, P);
    if (!rc && NB) rc = dt_model_copy_from_host(t->model, dt_model_buffers(t->model), buffers, NB);
    return rc;
}

int dt_trainer_init_weights(dt_trainer *t) {
    const size_t P = dt_model_num_params(t->model), NB = dt_model_num_buffers(t->model);
    float *p = malloc(P * sizeof(float)), *b = NB ? malloc(NB * sizeof(float)) : NULL;
    int rc = !p || (NB && !b) ? DT_ERR(DT_ERR_NOMEM, "out of memory for the weights of %s", t->o.init_from) : DT_OK;
    if (!rc) rc = input(dt_weights_read(t->init, t->model, p, b));
    if (!rc) rc = dt_trainer_set_params(t, p, b);
    free(p);
    free(b);
    dt_weights_close(t->init);
    t->init = NULL;
    return rc;
}
