/* src/nn/weights_internal.h - internal: the state of an opened weights file
 * (dtrain/weights.h), shared by weights.c (the tensors: names, layouts,
 * reading) and weights_hf.c (Hugging Face's config.json and names). */
#ifndef DT_NN_WEIGHTS_INTERNAL_H
#define DT_NN_WEIGHTS_INTERNAL_H

#include "dtrain/safetensors.h"
#include "dtrain/weights.h"

/* What a Hugging Face config.json says (-1: the key is absent). */
typedef struct dtw_hf_config {
    int n_layer, n_embd, vocab_size, n_positions, n_head;
} dtw_hf_config;

struct dt_weights {
    char *path;
    dt_st_file *st;
    int has_config;
    char *config_path;
    dtw_hf_config hf;
};

/* Reads and checks `dir_of_path`/config.json when it exists (*found 0 when
 * not): model_type, the options dtrain's GPT lacks (refused by name,
 * DT_ERR_UNSUPPORTED), the sizes into *c. config_path gets the malloc'd
 * path of the file. */
int dtw_hf_config_read(const char *weights_path, int *found, char **config_path, dtw_hf_config *c);

/* 1 for the four gpt matrices that Hugging Face's Conv1D stores [in, out]:
 * names ending in attn.c_attn.weight, attn.c_proj.weight, mlp.c_fc.weight,
 * mlp.c_proj.weight. */
int dtw_is_conv1d_matrix(const char *name);

#endif
