/* dtrain/weights.h - a model's weights from other tools' files, and the
 * Hugging Face layout of the gpt family for writing them back.
 *
 * READING (dt_weights_*). A safetensors file (dtrain/safetensors.h) of one
 * of these producers:
 *  - dtrain's own --save-model / dt_trainer_save_model (any family): the
 *    model's state_dict names and shapes; its "__metadata__" records the gpt
 *    sizes (n_head, ...);
 *  - a PyTorch / nanoGPT GPT-2 state_dict (torch.nn.Linear matrices
 *    [out, in]; tests/reference/torch_gpt.py's model);
 *  - a Hugging Face transformers GPT-2 checkpoint (GPT2LMHeadModel /
 *    GPT2Model model.safetensors): the four matrices attn.c_attn,
 *    attn.c_proj, mlp.c_fc, mlp.c_proj stored as Conv1D [in, out] and
 *    transposed on reading; and the config.json in the same directory.
 *  - llm.c's model file (gpt2_124M.bin, gpt2_124M_bf16.bin: the format of
 *    llm.c's train_gpt2.py write_model and train_gpt2.c/.cu, recognised by
 *    its magic 20240326 whatever the name): a 1024-byte header of the sizes,
 *    then the tensors in float32 (version 3) or bfloat16 (version 5),
 *    torch.nn.Linear's layout, each per-block tensor stacked over the blocks,
 *    wte padded to a multiple of 128 rows (the padding is not read); its size
 *    must be exactly what the header says. Other versions are
 *    DT_ERR_UNSUPPORTED. No config.json is read for it.
 * The path may name a file, a sharded checkpoint's index
 * ("model.safetensors.index.json", dt_st_open_index: the shards beside it,
 * as save_pretrained writes a model beyond max_shard_size), or a directory
 * holding model.safetensors or, failing that, model.safetensors.index.json
 * (as from_pretrained takes a directory).
 * For the gpt family, names may carry the "transformer." prefix or not
 * (GPT2Model's files have none); the tied lm_head.weight may be absent, or
 * present and equal to the token embedding (an untied head is refused); the
 * per-block buffers of HF files (h.<i>.attn.bias, the causal mask, and
 * h.<i>.attn.masked_bias) are ignored. The layout (Linear or Conv1D) is the
 * one the shape of h.0.attn.c_attn.weight ([3C, C] or [C, 3C]) says, for
 * all four matrices of every block. Tensors may be stored as F32, F64, F16
 * or BF16 and are converted to float (F32 is copied bit for bit).
 *
 * config.json (read when it exists beside the file; every key optional):
 * model_type "gpt2"; n_layer, n_embd, vocab_size, n_positions (or n_ctx)
 * must agree with the tensors' shapes; n_head is taken; the options dtrain's
 * GPT does not have are refused by name: activation_function other than
 * gelu_new / gelu_pytorch_tanh / gelu_fast (all the tanh GELU),
 * layer_norm_epsilon other than 1e-5, n_inner other than null or 4 x
 * n_embd, scale_attn_weights false, scale_attn_by_inverse_layer_idx true,
 * add_cross_attention true, tie_word_embeddings false.
 *
 * Every tensor of the file must become a parameter of the model: a tensor
 * the model does not have (lm_head.bias, a bias GPT-2 has not, a block
 * beyond n_layer) is refused by name rather than dropped, and every
 * parameter must be in the file. A shape that differs is an error naming
 * the tensor and both shapes.
 *
 * WRITING the Hugging Face layout (dt_weights_hf_*): the names and shapes
 * of each gpt slice as GPT2LMHeadModel stores them ("transformer." prefix,
 * the four matrices transposed to [in, out], no lm_head.weight: from_pretrained
 * ties it), and the config.json that describes the model (architectures
 * GPT2LMHeadModel, activation gelu_new, layer_norm_epsilon 1e-5, dropouts 0:
 * dtrain trains without dropout). A directory with model.safetensors in that
 * layout (metadata "format": "pt") and that config.json loads with
 * transformers.GPT2LMHeadModel.from_pretrained(dir).
 *
 * All int functions return DT_OK or a negative dt_status with a message in
 * dt_last_error(): DT_ERR_IO for unreadable or malformed files (naming them),
 * DT_ERR_MISMATCH for a tensor or size that does not fit the model (naming
 * the tensor or key and both values), DT_ERR_UNSUPPORTED for an option
 * dtrain's model does not have (naming it), DT_ERR_INVALID for bad
 * arguments, DT_ERR_NOMEM. */
#ifndef DTRAIN_WEIGHTS_H
#define DTRAIN_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>
#include "dtrain/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_weights dt_weights;

/* What a file says about a GPT-2 model. */
typedef struct dt_weights_gpt {
    int n_layer;      /* blocks h.0 .. h.<n_layer-1> */
    int n_embd;       /* C: the columns of wte */
    int vocab_size;   /* the rows of wte */
    int block_size;   /* the rows of wpe (n_positions) */
    int n_head;       /* from dtrain's metadata or config.json; 0: not said */
    int conv1d;       /* 1: Hugging Face's Conv1D [in, out] matrices */
    int prefixed;     /* 1: names start with "transformer." */
    int has_config;   /* 1: a config.json beside the file was read */
} dt_weights_gpt;

/* Open a safetensors file, a sharded checkpoint's index (a path ending in
 * ".json") or a directory holding either (see READING) and, if there is one,
 * the config.json beside it (checked as above). Data is read by
 * dt_weights_read; dt_weights_path names what was opened (the file inside a
 * directory). */
int dt_weights_open(const char *path, dt_weights **out);
void dt_weights_close(dt_weights *w);
/* The file's path (as given); "?" for NULL. */
const char *dt_weights_path(const dt_weights *w);
/* The GPT-2 sizes the tensors and config.json give (see dt_weights_gpt).
 * DT_ERR_MISMATCH when the file holds no GPT-2 state_dict (no
 * [transformer.]wte.weight), when config.json disagrees with a shape, or
 * when the blocks are not h.0 .. h.<L-1>. */
int dt_weights_gpt_arch(const dt_weights *w, dt_weights_gpt *arch);
/* Every parameter and buffer of m from the file, by state_dict name, into
 * params [dt_model_num_params(m)] and buffers [dt_model_num_buffers(m)]
 * (may be NULL when there are none), in the model's layout order. Nothing
 * of the model itself is written. Errors as above; on error the outputs
 * are partly written. */
int dt_weights_read(dt_weights *w, const dt_model *m, float *params, float *buffers);

/* The Hugging Face name (GPT2LMHeadModel's state_dict key) and shape of a
 * gpt slice: name gets the key (cap >= DT_SLICE_NAME_MAX), shape[0..ndim)
 * the stored shape, *transpose 1 when the data must be written transposed
 * ([out, in] -> [in, out]: the four Conv1D matrices). DT_ERR_INVALID for a
 * slice that is not one of a gpt model's. */
int dt_weights_hf_tensor(const dt_param_slice *sl, char *name, size_t cap, int64_t shape[4], int *transpose);
/* The config.json text of a gpt model config (NUL-terminated, ending in a
 * newline), malloc'd into *out (free()). bos/eos_token_id 50256 are written
 * for GPT-2's vocabulary of 50257 only. DT_ERR_INVALID for a config that is
 * not a gpt one. */
int dt_weights_hf_config(const dt_model_config *cfg, char **out);

/* WRITING llm.c's model file (the format READING describes), for a gpt model
 * config: dt_weights_llmc_header fills the 1024-byte header (version 5 with
 * bf16, else 3: float32; the vocabulary padded to a multiple of 128, as
 * llm.c pads it) and the file's size in bytes; dt_weights_llmc_place says
 * where a gpt slice goes: its byte offset in the file and the elements
 * stored there (its count; for transformer.wte.weight Vp x C: the writer
 * appends (Vp - V) x C zeros, the padding rows). The slices are stored in
 * their own layout (torch.nn.Linear's), in the file's dtype (bfloat16:
 * rounded to nearest even, dt_f32_to_bf16). A file written so loads with
 * llm.c's train_gpt2cu -e FILE (version 5 for its default bf16 build, 3
 * for PRECISION=FP32) and with dt_weights_open. DT_ERR_INVALID for a config
 * that is not a gpt one or a slice that is not one of its. */
#define DT_WEIGHTS_LLMC_HEADER_BYTES 1024
int dt_weights_llmc_header(const dt_model_config *cfg, int bf16, unsigned char header[DT_WEIGHTS_LLMC_HEADER_BYTES],
                           uint64_t *file_bytes);
int dt_weights_llmc_place(const dt_model_config *cfg, int bf16, const dt_param_slice *sl, uint64_t *offset,
                          uint64_t *stored);

#ifdef __cplusplus
}
#endif
#endif
