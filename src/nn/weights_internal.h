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

/* llm.c's model files (weights_llmc.c): the header's sizes */
typedef struct dtw_llmc_sizes {
    int block_size, vocab_size, n_layer, n_head, n_embd, padded_vocab;
} dtw_llmc_sizes;
/* 1 when path starts with llm.c's model magic (20240326, little-endian)
 * and a non-zero version (which no safetensors file has there) */
int dtw_llmc_probe(const char *path);
/* Opens an llm.c model file as a view: every block's tensors named as
 * dtrain's GPT names them, wte's first V rows; metadata format "llm.c",
 * llmc_version, n_head. DT_ERR_IO for a malformed header or a size that is
 * not the header's, DT_ERR_UNSUPPORTED for a version other than 3 or 5. */
int dtw_llmc_open(const char *path, dt_st_file **out);
/* The number of tensors of an L-layer file, and its layout: ts (names in
 * names), each tensor's absolute offset, the elements stored for it (wte:
 * Vp x C, the others their own count) and the file's size in *end.
 * Returns the count. */
int dtw_llmc_count(int n_layer);
int dtw_llmc_layout(const dtw_llmc_sizes *s, dt_dtype dtype, dt_st_info *ts, char (*names)[DT_SLICE_NAME_MAX],
                    uint64_t *off, uint64_t *stored, uint64_t *end);

/* 1 for the four gpt matrices that Hugging Face's Conv1D stores [in, out]:
 * names ending in attn.c_attn.weight, attn.c_proj.weight, mlp.c_fc.weight,
 * mlp.c_proj.weight. */
int dtw_is_conv1d_matrix(const char *name);

#endif
