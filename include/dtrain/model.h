/* dtrain/model.h - the models of the training core (single process).
 *
 * MODEL FAMILIES. Every model belongs to a family; a family is one table
 * entry (src/nn/model_family.c) and decides what the model takes and gives:
 *
 *   family "sequential" - a stack of layers (nn.h kernels) ending in
 *     log-softmax + mean NLL loss, for Fashion-MNIST-sized images:
 *       x       float32 [B,784] (= [B,1,28,28])
 *       labels  int32 [B], each in [0,10)
 *       loss    mean over the B samples of -log p(label)
 *       logits  [B,10] log-probabilities; scores [B,10] raw outputs
 *     Models ("name" in dt_model_config):
 *     "mlp"   flatten, fc1 784->hidden1, relu, fc2 hidden1->hidden2, relu,
 *             fc3 hidden2->10                        (default hidden 1024, 1024)
 *     "lenet" as RAF's dist_example (input 1 channel): conv1 5x5 1->6 pad 2 no
 *             bias, bn1 BatchNorm2d(6), sigmoid, avgpool 2x2/2, flatten,
 *             linear1 1176->10
 *     "cnn"   conv1 3x3 1->conv_channels1 pad 1 no bias, bn1, relu, maxpool 2,
 *             conv2 3x3 conv_channels1->conv_channels2 pad 1 no bias, bn2,
 *             relu, maxpool 2, flatten, fc1 conv_channels2*49->hidden3, relu,
 *             dropout(p), fc2 hidden3->10
 *             (default 32, 64, 128, p = 0.25)
 *
 *   family "gpt" - a GPT-2 language model (Radford et al. 2019; the
 *     architecture of nanoGPT / HF GPT2LMHeadModel without dropout):
 *       x       int32 tokens [B,T], each in [0,vocab_size), 1 <= T <= block_size
 *       labels  int32 targets [B,T], each in [0,vocab_size) (the next token)
 *       loss    mean over the B*T positions of -log p(target): the mean
 *               cross-entropy per token, in nats
 *       scores  [B,T,V] logits (pre-softmax); logits [B,T,V] log-probabilities
 *     h = wte[x] + wpe[0..T); then n_layer pre-LN blocks
 *         h = h + c_proj(attn(ln_1(h)))           causal multi-head attention
 *         h = h + mlp.c_proj(gelu(mlp.c_fc(ln_2(h))))   4x wide, tanh-GELU
 *     then ln_f, and the LM head logits = ln_f(h) @ wte^T, TIED to the token
 *     embedding (no parameters of its own). LayerNorm eps 1e-5, every linear
 *     layer with a bias, attention scale 1/sqrt(n_embd/n_head).
 *     Models (n_layer, n_head, n_embd, block_size, vocab_size):
 *     "gpt-test"  2,  4,  64,   64, 256   (tests)
 *     "gpt-demo"  6,  6, 384,  256, 256   (10.84 M parameters)
 *     "gpt"       the same sizes as gpt-demo (the trainer's --model gpt,
 *                 meant to be resized by --n-layer/--n-head/...)
 *     "gpt2-124m" 12, 12, 768, 1024, 256  (GPT-2 small's shape; set
 *                 vocab_size = 50257 for its BPE vocabulary: 124.4 M)
 *     vocab 256 = bytes (src/data text datasets).
 *     Parameter tensors are named as the PyTorch GPT-2 state_dict
 *     (nanoGPT and HF transformers GPT2LMHeadModel use the same keys):
 *       transformer.wte.weight [V,C]   transformer.wpe.weight [block_size,C]
 *       transformer.h.<i>.ln_1.weight [C]          .ln_1.bias [C]
 *       transformer.h.<i>.attn.c_attn.weight [3C,C] .attn.c_attn.bias [3C]
 *       transformer.h.<i>.attn.c_proj.weight [C,C]  .attn.c_proj.bias [C]
 *       transformer.h.<i>.ln_2.weight [C]          .ln_2.bias [C]
 *       transformer.h.<i>.mlp.c_fc.weight [4C,C]   .mlp.c_fc.bias [4C]
 *       transformer.h.<i>.mlp.c_proj.weight [C,4C] .mlp.c_proj.bias [C]
 *       transformer.ln_f.weight [C]    transformer.ln_f.bias [C]
 *     (lm_head.weight is wte and is not stored separately; load a saved model
 *     with load_state_dict(strict=False), missing only lm_head.weight.)
 *     Matrices follow nanoGPT's / torch.nn.Linear's convention [out, in], not
 *     HF's Conv1D [in, out]: it is PyTorch's own layout, the one dtrain's
 *     linear layer and llm.c use, and what a model built from nn.Linear
 *     (tests/reference/torch_gpt.py) loads unchanged; for HF transformers,
 *     transpose the four matrices c_attn, attn.c_proj, c_fc, mlp.c_proj (as
 *     nanoGPT's from_pretrained does in the other direction).
 *     The q, k, v of head h are columns [h*hs, (h+1)*hs) of the c_attn
 *     output's first, second and third C-wide thirds (hs = C / n_head).
 *
 * dt_model_get_io() describes a model's inputs and outputs in code.
 *
 * LAYOUT CONTRACT (public: data parallelism and ZeRO shard/bucket these):
 *  - All parameters live in ONE contiguous float buffer (dt_model_params),
 *    gradients in a second buffer with the identical layout
 *    (dt_model_grads), and non-parameter buffers (batch-norm running_mean /
 *    running_var; num_batches_tracked is not kept) in a third flat buffer
 *    (dt_model_buffers; empty for gpt).
 *  - Layers are numbered 0..L-1 in forward order, parameterless layers
 *    included. The parameters of one layer are contiguous, and layers are
 *    laid out in forward order, so layer l owns [offset, offset+count) of
 *    the flat vector (dt_model_layer_params; count 0 for a parameterless
 *    layer). The layers of a gpt model ("units"): 0 "transformer.embed"
 *    (wte, wpe), 1..n_layer "transformer.h.<i>" (one transformer block
 *    each), n_layer+1 "transformer.ln_f", n_layer+2 "lm_head" (no
 *    parameters: it uses layer 0's wte, see SHARED PARAMETERS).
 *  - Within a layer, tensors follow PyTorch's state_dict order (weight, then
 *    bias; batch norm: weight, bias; buffers running_mean, running_var), each
 *    row-major in PyTorch's shape ([OC,C] for linear, [OC,C,KH,KW] for conv).
 *  - Each tensor is described by a dt_param_slice named with the state_dict
 *    key of the equivalent PyTorch module (tests/reference/torch_models.py,
 *    tests/reference/torch_gpt.py), e.g. "fc1.weight", "bn1.running_mean",
 *    "transformer.h.0.attn.c_attn.weight".
 *  - The buffers are 64-byte aligned; offsets are in elements, not bytes.
 *
 * SHARED PARAMETERS (gpt's tied LM head). dt_model_layer_param_owner(m, l)
 * names the layer whose parameters layer l computes with: l itself for
 * every layer except gpt's "lm_head", whose owner is layer 0 (it reads wte
 * and adds the head's part of wte's gradient). The model reads and writes
 * through the owner's CURRENT pointers (dt_model_layer_param_ptr /
 * dt_model_layer_grad_ptr of the owner) at the moment the head computes,
 * i.e. after the head's own pre_forward / pre_backward hook has returned;
 * the head has no grad_ready (it owns nothing). In one train step the
 * owner's parameters are read by layer 0's forward, by the head's forward
 * (after every block), by the head's backward (first in backward) and by
 * layer 0's backward (last); its gradient receives the head's contribution
 * first and layer 0's own last, and grad_ready(0) comes after both. So a
 * strategy that gathers/releases parameters per layer (ZeRO-3, FSDP) must
 * either keep the owner's parameters resident for the whole step (FSDP's
 * treatment of root parameters; the owner is the first and last layer of
 * both passes) or re-gather them in the head's pre_forward/pre_backward and
 * point the owner there (dt_model_set_layer_params(m, 0, p) from the head's
 * hook); and a strategy that hands out per-layer gradient buffers must give
 * the owner its buffer by the head's pre_backward and keep accumulating in
 * it (not re-zero it in layer 0's pre_backward) until grad_ready(0).
 * Nothing else is shared: a strategy that only buckets the flat vector
 * (DDP, ZeRO-1) needs to do nothing.
 *
 * Initialisation (seeded by cfg.seed through dt_rng; layer l uses the
 * stream dt_rng_seed2(seed, l), tensors in layout order). Sequential:
 * PyTorch's defaults: weights of linear/conv ~ U(-1/sqrt(fan_in),
 * +1/sqrt(fan_in)) (= kaiming_uniform with a = sqrt(5)), biases ~ the same
 * bound; batch norm weight 1, bias 0, running_mean 0, running_var 1. Gpt:
 * GPT-2 / nanoGPT's: every linear weight and both embeddings ~ N(0, 0.02),
 * the residual projections attn.c_proj.weight and mlp.c_proj.weight
 * ~ N(0, 0.02 / sqrt(2 * n_layer)), biases 0, LayerNorm weight 1, bias 0.
 * The values are NOT bit-identical to PyTorch's (different RNG).
 *
 * ACTIVATION RECOMPUTATION (gpt only: dt_model_set_recompute or
 * cfg.recompute). Off: every block keeps its activations from forward to
 * backward. On: forward keeps only each block's input (the residual stream
 * entering it); backward re-runs the block's forward from it (all of it but
 * the last projection, whose output is the next block's stored input) into
 * one shared set of buffers, right after the block's pre_backward hook, and
 * then back-propagates it. The gradients are bit-identical to those
 * without recomputation (the same kernels on the same values); the cost is
 * about one more forward of the blocks. dt_model_activation_bytes reports
 * the memory of either setting.
 *
 * Memory: activations and workspaces are allocated for the largest batch
 * (and, for gpt, the largest T) seen, grown on demand by the forward; a
 * warm model does no allocation per step. A model is not thread-safe: one
 * thread at a time.
 *
 * All int functions return DT_OK (or a count) or a negative dt_status with a
 * message in dt_last_error(); pointer-returning functions return NULL on
 * error with the message set.
 */
#ifndef DTRAIN_MODEL_H
#define DTRAIN_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "dtrain/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_model dt_model;

#define DT_SLICE_NAME_MAX 64

/* One named tensor inside a flat buffer. */
typedef struct dt_param_slice {
    char name[DT_SLICE_NAME_MAX]; /* state_dict key, e.g. "fc1.weight" */
    int ndim;                     /* 1..4 */
    int64_t shape[4];             /* PyTorch shape; entries past ndim are 0 */
    size_t offset;                /* first element in the flat buffer */
    size_t count;                 /* number of elements (product of shape) */
    int layer;                    /* owning layer index */
} dt_param_slice;

typedef struct dt_model_config {
    const char *name; /* a model name listed above: "mlp", "gpt-demo", ... */
    /* family "sequential" */
    int hidden1, hidden2; /* mlp: the widths of fc1 and fc2 (1024, 1024);
                             unused by lenet/cnn */
    int conv_channels1, conv_channels2; /* cnn: the output channels of conv1
                             and conv2 (32, 64); unused by mlp/lenet */
    int hidden3;      /* cnn: width of fc1 (128);   unused by mlp/lenet */
    float dropout;    /* cnn: dropout probability in [0,1) (0.25); must be in
                         [0,1) for every model, used by cnn only */
    uint64_t seed;    /* weight initialisation and the dropout stream */
    /* family "gpt" (ignored by the sequential models); each must be > 0,
     * n_embd divisible by n_head */
    int n_layer;      /* transformer blocks */
    int n_head;       /* attention heads per block */
    int n_embd;       /* width C */
    int block_size;   /* largest sequence length T (rows of wpe) */
    int seq_len;      /* the T of dt_model_forward and of
                         dt_model_activation_bytes(T = 0): 1..block_size,
                         0 = block_size (llm.c's -t; a model of 1024
                         positions trained on windows of 256) */
    int vocab_size;   /* V: 256 for bytes */
    int recompute;    /* 0/1: activation recomputation (gpt only; 1 is
                         DT_ERR_INVALID for the sequential family) */
    int device;       /* where the model computes (see DEVICES): DT_DEVICE_CPU
                         (0, the default) or DT_DEVICE_CUDA (gpt only) */
    int precision;    /* DT_PRECISION_FP32 (0, the default) or
                         DT_PRECISION_BF16 (gpt on DT_DEVICE_CUDA only) */
} dt_model_config;

/* DEVICES. A model computes on the CPU (DT_DEVICE_CPU) or on the process's
 * current CUDA device (DT_DEVICE_CUDA, at dt_model_create: a gpt model
 * only, in a build with CUDA). A device model's flat buffers (params,
 * grads, buffers) and activations are DEVICE memory: dt_model_params,
 * dt_model_grads, dt_model_layer_param_ptr/_grad_ptr return device pointers,
 * redirected layers (dt_model_set_layer_params/_grads) and
 * dt_model_use_grad_buffer take device memory of that device, and
 * dt_model_copy_to_host / _from_host move values between it and the host.
 * Its work is enqueued on one stream of its own (dt_model_stream) and the
 * calls return before the device has finished, except those that hand
 * values to the host (the loss, dt_model_row_stats, log-probabilities,
 * scores, layer outputs, generation: they wait). The outputs a host model
 * returns as pointers into itself (log-probabilities, scores, layer
 * outputs) are, for a device model, host copies valid until the next such
 * call or the next forward.
 * PRECISION. DT_PRECISION_FP32 computes in float32 throughout (a device
 * model's results equal the CPU model's to rounding: tests/train). 
 * DT_PRECISION_BF16 (device only) computes with bfloat16 activations and a
 * bfloat16 copy of the parameters (rounded from the float32 parameters at
 * each forward), with float32 parameters, gradients, LayerNorm statistics,
 * loss and accumulation: the mixed precision of llm.c and PyTorch's bf16
 * autocast. */
/* (dt_device_kind, dt_precision and their names: dtrain/device.h) */

/* What a model takes and gives (see MODEL FAMILIES above). */
typedef struct dt_model_io {
    const char *family;   /* "sequential" | "gpt" (static string) */
    int x_dtype;          /* dt_dtype of x: DT_F32 (sequential) or DT_I32 (gpt) */
    int x_size;           /* elements of x per sample and position: 784 | 1 */
    int max_seq;          /* 0: no sequence axis (x [B,x_size], labels [B]);
                             > 0: x [B,T,x_size] and labels [B,T] with
                             1 <= T <= max_seq (= block_size) */
    int num_classes;      /* labels in [0, num_classes); last axis of logits */
} dt_model_io;

/* Fill *cfg with the defaults of model `name` (the values listed above,
 * seed 0, recompute 0; the fields of the other family 0). cfg->name points
 * to a static string. DT_ERR_INVALID for NULL arguments or an unknown name
 * (the message lists the known ones). */
int dt_model_config_default(dt_model_config *cfg, const char *name);

/* Build a model: parameters initialised, gradients zeroed, buffers at their
 * initial values. On success *out owns everything; release with
 * dt_model_free. DT_ERR_INVALID on a bad config, naming the field: sizes
 * <= 0, dropout outside [0,1), n_embd not divisible by n_head, seq_len
 * outside [0, block_size] (gpt), recompute not 0/1 or set for a family
 * without it, a parameter count that does not fit; DT_ERR_NOMEM. */
int dt_model_create(const dt_model_config *cfg, dt_model **out);
/* Release a model (NULL is a no-op). Redirected parameter/gradient memory
 * (dt_model_set_layer_params/grads) belongs to the caller and is not freed. */
void dt_model_free(dt_model *m);

/* The model name ("mlp", "gpt-demo", ...); "?" for NULL. */
const char *dt_model_name(const dt_model *m);
/* The model's family ("sequential", "gpt"); "?" for NULL. */
const char *dt_model_family(const dt_model *m);
/* The configuration the model was created with (name points into the
 * model; recompute is the current setting); NULL for NULL. */
const dt_model_config *dt_model_get_config(const dt_model *m);
/* Inputs and outputs (dt_model_io above). DT_ERR_INVALID for NULL. */
int dt_model_get_io(const dt_model *m, dt_model_io *io);
/* Elements of x per sample for dt_model_forward: 784 (sequential) or
 * block_size tokens (gpt); and number of classes (10, or vocab_size).
 * Negative status for NULL. */
int dt_model_input_size(const dt_model *m);
int dt_model_num_classes(const dt_model *m);

/* ---- flat buffers ----------------------------------------------------------
 * Sizes in elements; 0 for NULL. The pointers stay valid for the model's
 * life (NULL for a NULL model). */
size_t dt_model_num_params(const dt_model *m);
float *dt_model_params(dt_model *m);  /* [num_params] */
float *dt_model_grads(dt_model *m);   /* [num_params], same layout */
size_t dt_model_num_buffers(const dt_model *m);
float *dt_model_buffers(dt_model *m); /* [num_buffers] (NULL-free even if 0) */

/* ---- named slices ------------------------------------------------------------
 * Parameter slices index the params/grads buffers; buffer slices the
 * buffers buffer. Both tables are in layout order. */
int dt_model_num_slices(const dt_model *m);
const dt_param_slice *dt_model_slice(const dt_model *m, int i);
int dt_model_num_buffer_slices(const dt_model *m);
const dt_param_slice *dt_model_buffer_slice(const dt_model *m, int i);
/* Look a state_dict key up in both tables. Returns the slice and sets
 * *is_buffer (may be NULL) to 0 for a parameter, 1 for a buffer; NULL with
 * DT_ERR_INVALID recorded when absent. */
const dt_param_slice *dt_model_find_slice(const dt_model *m, const char *name,
                                          int *is_buffer);

/* ---- layers ------------------------------------------------------------------ */

int dt_model_num_layers(const dt_model *m);
/* Module name ("fc1", "bn1", "relu1", "transformer.h.3", ...) and kind
 * ("linear", "conv2d", "batchnorm2d", "batchnorm1d", "relu", "gelu",
 * "sigmoid", "tanh", "avgpool2d", "maxpool2d", "flatten", "dropout";
 * gpt: "embedding", "block", "layernorm", "lm_head"); NULL on a bad index. */
const char *dt_model_layer_name(const dt_model *m, int layer);
const char *dt_model_layer_kind(const dt_model *m, int layer);
/* Range [*offset, *offset + *count) of layer's parameters in the flat
 * params/grads vector (count 0 for parameterless layers; offset is then
 * where the next parameters start). Either output may be NULL. */
int dt_model_layer_params(const dt_model *m, int layer, size_t *offset, size_t *count);
/* Same for the non-parameter buffers. */
int dt_model_layer_buffers(const dt_model *m, int layer, size_t *offset, size_t *count);
/* The layer whose parameters `layer` computes with (see SHARED PARAMETERS):
 * `layer` itself, or 0 for gpt's lm_head. Negative status on a bad index. */
int dt_model_layer_param_owner(const dt_model *m, int layer);
/* Per-sample element count of layer's output: for gpt at the T of the last
 * forward (block_size before any): T*C, or T*V for the head. 0 on a bad
 * index. */
size_t dt_model_layer_output_size(const dt_model *m, int layer);

/* ---- parameter redirection (ZeRO-3) ------------------------------------------
 * Set where layer's parameters (resp. gradients) live: ptr must hold the
 * layer's `count` floats in the layer's internal layout (the same as its
 * range of the flat vector). NULL restores the default (the model's flat
 * buffer at the layer's offset). The memory stays the caller's. Every
 * forward/backward reads the current pointer of each layer when it starts
 * that layer (after the layer's pre_* hook returns), so hooks may redirect;
 * a layer whose owner is another layer reads the owner's pointers then.
 * DT_ERR_INVALID for a bad layer index, or a non-NULL ptr for a layer
 * without parameters. */
int dt_model_set_layer_params(dt_model *m, int layer, float *ptr);
int dt_model_set_layer_grads(dt_model *m, int layer, float *ptr);
/* Free the model's own flat parameter (params != 0) and/or gradient
 * (grads != 0) buffer, for ZeRO stages that keep only shards: afterwards
 * dt_model_params/dt_model_grads return NULL and every layer with parameters
 * must be redirected (dt_model_set_layer_params/grads, or given in bf16:
 * dt_model_set_layer_params16) before a pass touches
 * it; dt_model_zero_grad must not be used for released gradients. A bf16
 * gpt keeps its bf16 copy of the parameters one layer at a time from then
 * on (dt_model_compute_copy_bytes); a device that cannot hold that layer's
 * copy: DT_ERR_NOMEM naming it (the parameters are released all the same,
 * the whole copy kept). */
int dt_model_release_flat(dt_model *m, int params, int grads);
/* Move the flat gradient buffer into caller memory: grads must hold
 * num_params floats (e.g. from dt_comm_alloc_shared, so that data-parallel
 * allreduces reduce straight between the ranks' gradient buffers). The
 * current gradients are copied there (zeros after dt_model_release_flat),
 * the model's own buffer is freed, and dt_model_grads returns grads from now
 * on. The memory stays the caller's: it must outlive the model's use of it
 * and the model never frees it. Layers redirected with
 * dt_model_set_layer_grads keep their pointers. DT_ERR_INVALID on NULL. */
int dt_model_use_grad_buffer(dt_model *m, float *grads);
/* (For a device model, grads is device memory of its device: see DEVICES.) */

/* Where the model computes (dt_device_kind) and in which precision; for
 * DT_DEVICE_CUDA the stream its work is enqueued on (a cudaStream_t; NULL
 * for a CPU model). DT_DEVICE_CPU / DT_PRECISION_FP32 / NULL for NULL. */
int dt_model_device(const dt_model *m);
int dt_model_precision(const dt_model *m);
void *dt_model_stream(const dt_model *m);
/* Bytes of the copy of the parameters in the compute precision the model
 * keeps besides its f32 parameters (model memory): DT_PRECISION_BF16's gpt
 * keeps 2 B per parameter, or, once dt_model_release_flat released its
 * parameters (ZeRO-3), one layer's worth (the largest layer's), re-cast
 * from the layer's current parameters at each use: then *per_layer is set
 * to 1 (else 0; per_layer may be NULL), and after dt_model_layers_bf16 it is
 * 0 bytes (per_layer 1). 0 for an f32 model and for NULL. */
size_t dt_model_compute_copy_bytes(const dt_model *m, int *per_layer);
/* MIXED PRECISION WITH THE MASTER OUTSIDE (ZeRO stages 1/2, dtrain/zero.h's
 * cfg.params_bf16). dt_model_compute_copy: the model's copy of ALL its
 * parameters in its compute precision (a DT_PRECISION_BF16 gpt: num_params
 * bf16 values in the flat layout, the model's memory, owned by the model),
 * or NULL (an f32 model, a copy kept layer by layer, NULL m).
 * dt_model_params_from_copy: free the model's f32 flat parameters; from then
 * on the model computes from that copy as the caller writes it, without
 * casting (the f32 master parameters are the caller's): dt_model_params
 * returns NULL, and parameters set with dt_model_set_layer_params are not
 * read (the copy is). DT_ERR_UNSUPPORTED (the model unchanged) for a model
 * without the whole copy; DT_ERR_INVALID for NULL. */
uint16_t *dt_model_compute_copy(const dt_model *m);
int dt_model_params_from_copy(dt_model *m);
/* LAYERS GIVEN IN BF16 (ZeRO-3 gathering bf16 layers, dtrain/zero.h's
 * cfg.gather_bf16). dt_model_set_layer_params16: layer's parameters in bf16
 * (its count values, the layer's layout, memory of the model's place, the
 * caller's), which its next uses compute from without casting, until
 * dt_model_set_layer_params (any pointer, NULL too) clears it or another
 * call replaces it; NULL clears it. As with dt_model_set_layer_params, a
 * layer whose owner is another layer reads the owner's. dt_model_layers_bf16:
 * every layer will be given so before each use (after dt_model_release_flat
 * of the parameters): the one-layer copy (dt_model_compute_copy_bytes) is
 * freed; a layer then given in f32 cannot be computed with (DT_ERR_STATE
 * naming it; generation makes a whole copy of its own). DT_ERR_UNSUPPORTED
 * for a model that does not compute in bf16; DT_ERR_INVALID for NULL m, a
 * bad index, or a pointer for a layer without parameters. */
int dt_model_set_layer_params16(dt_model *m, int layer, const uint16_t *ptr);
int dt_model_layers_bf16(dt_model *m);
/* Copy n floats between the host and the model's memory (its flat buffers,
 * or memory of its place such as redirected layers): host memory for a CPU
 * model (a memcpy), device memory for a device model (in stream order;
 * to_host waits until dst holds the values). DT_ERR_INVALID for NULL with
 * n > 0; a device error names the copy. */
int dt_model_copy_to_host(const dt_model *m, float *host_dst, const float *src, size_t n);
int dt_model_copy_from_host(const dt_model *m, float *dst, const float *host_src, size_t n);

/* Current parameter / gradient location of layer (NULL if the layer has no
 * parameters or the index is bad). */
float *dt_model_layer_param_ptr(dt_model *m, int layer);
float *dt_model_layer_grad_ptr(dt_model *m, int layer);

/* ---- hooks ----------------------------------------------------------------------
 * Every callback may be NULL. A callback returning non-zero aborts the
 * forward/backward: a negative value is returned unchanged (the callback's
 * own dt_last_error() message is kept), a positive value becomes
 * DT_ERR_STATE. After an aborted pass there is no valid forward state.
 *
 * Call order, forward (train or eval), for layer = 0 .. L-1:
 *     pre_forward(layer); <layer computes>; post_forward(layer)
 * then the loss is computed (no hook).
 * Backward, for layer = L-1 .. 0:
 *     pre_backward(layer); <layer computes its gradients (gpt with
 *                          recompute: first re-runs its forward)>;
 *     grad_ready(layer)    -- only for layers with parameters: the layer's
 *                             parameter gradients are final for this
 *                             backward and will not be touched again, so
 *                             communication may start while the remaining
 *                             layers run (layer 0 of gpt: after the head's
 *                             contribution too, see SHARED PARAMETERS);
 *     post_backward(layer)
 * Layer 0 computes no input gradient.
 *
 * sync_stats(ctx, buf, n): sum buf[0..n) over ranks in place (synchronised
 * batch norm). NULL = ordinary, local batch norm. When set, each batch-norm
 * layer in a TRAIN forward makes two calls ([sum x per channel, count] with
 * n = C+1, then [sum (x-mean)^2 per channel] with n = C) and in backward one
 * call ([sum dy, sum dy*xhat per channel, count], n = 2C+1; batch-norm
 * parameter gradients stay local sums); the global
 * statistics are then used. Eval passes never call it. Every rank must run
 * the same sequence of passes. With data parallelism and per-rank mean loss,
 * averaging the parameter gradients over ranks then gives the gradient of
 * the global-batch mean loss (as torch SyncBatchNorm + DDP). */
typedef struct dt_model_hooks {
    void *ctx;
    int (*pre_forward)(void *ctx, int layer);
    int (*post_forward)(void *ctx, int layer);
    int (*pre_backward)(void *ctx, int layer);
    int (*grad_ready)(void *ctx, int layer);
    int (*post_backward)(void *ctx, int layer);
    int (*sync_stats)(void *ctx, float *buf, size_t n);
} dt_model_hooks;

/* Install hooks (copied); NULL removes all hooks. */
int dt_model_set_hooks(dt_model *m, const dt_model_hooks *hooks);

/* Re-seed the dropout stream (e.g. seed + rank for data parallelism). The
 * stream starts as dt_rng_seed2(cfg.seed, 0x64726f70) and advances with
 * every train forward. A no-op for models without dropout (gpt). */
int dt_model_seed_dropout(dt_model *m, uint64_t seed);

/* ---- activation recomputation (see above) ----------------------------------------- */

/* Turn recomputation on (1) or off (0). Takes effect at the next forward
 * (the activation memory is re-laid out then); discards the last forward's
 * state (a backward needs a new forward). DT_ERR_INVALID for a value other
 * than 0/1, or 1 for a family without recomputation (sequential). */
int dt_model_set_recompute(dt_model *m, int on);
/* Current setting (0/1); negative status for NULL. */
int dt_model_recompute(const dt_model *m);
/* Bytes of activation memory (kept activations, activation gradients and
 * workspaces: what the forward allocates) for batch B at sequence length T
 * (T = 0: cfg.seq_len for gpt, or block_size when that is 0; the
 * sequential family takes T 0 or 1) with
 * recomputation off (recompute = 0) or on (1), whatever the current
 * setting. Parameters, gradients, optimizer state and the lazily built
 * dt_model_log_probs buffer of gpt are not included. DT_ERR_INVALID for B < 1,
 * T out of range, recompute 1 for a family without it. */
int dt_model_activation_bytes(const dt_model *m, int B, int T, int recompute, size_t *bytes);

/* ---- training step ----------------------------------------------------------------- */

/* Forward a batch of B samples at the family's length: T = 1
 * (sequential) or T = cfg.seq_len (gpt; block_size when 0). x is float32
 * [B,784] (sequential) or int32 tokens [B,T] (gpt), labels int32 [B] or
 * [B,T] (see MODEL FAMILIES; dt_model_get_io). Inputs are copied, so the
 * caller's arrays may change afterwards.
 * train != 0: batch norm uses batch statistics and updates its running
 * statistics; dropout is active. train == 0: running statistics, no dropout.
 * labels may be NULL: then no loss is computed and *loss (if loss != NULL)
 * is set to NAN. loss may be NULL. B >= 1. A backward is possible only
 * after a train forward with labels. DT_ERR_INVALID (naming the sample and
 * position) for a label or token outside [0, num_classes). */
int dt_model_forward(dt_model *m, const void *x, const int32_t *labels, int B, int train,
                     float *loss);
/* The T of dt_model_forward: 1 (sequential), cfg.seq_len or block_size
 * (gpt); DT_ERR_INVALID for NULL. (dt_model_seq_len: the last forward's.) */
int dt_model_forward_len(const dt_model *m);
/* The same at sequence length T: 1 <= T <= block_size for gpt (x [B,T],
 * labels [B,T]); T must be 1 for the sequential family. */
int dt_model_forward_seq(dt_model *m, const void *x, const int32_t *labels, int B, int T,
                         int train, float *loss);
/* [B,10] (sequential) or [B,T,V] (gpt) LOG-PROBABILITIES of the last
 * forward; NULL before any forward. Gpt computes them on the first call
 * after a forward (allocating [B,T,V] floats once, kept for later calls)
 * from the scores, so it must come before that forward's backward. Valid
 * until the next forward. */
const float *dt_model_log_probs(const dt_model *m);
/* [B,10] raw scores (output of the last layer, pre-softmax); gpt: the
 * logits [B,T,V]. Gpt's backward overwrites them with their gradient (NULL
 * afterwards, with DT_ERR_STATE). */
const float *dt_model_scores(const dt_model *m);
/* The mean loss of the last forward with labels (dt_model_forward's *loss:
 * a device model's forward returns before the loss is known, so that a
 * trainer can ask for it after the backward without a wait between the two).
 * DT_ERR_STATE if the last forward had no labels or there was none. */
int dt_model_loss(const dt_model *m, float *loss);
/* Over the first `rows` predictions (samples; gpt: positions, B*T of them in
 * row-major order) of the last forward with labels: *correct = how many have
 * their first maximum at the label, *loss_sum = the sum of their losses
 * (-log p(label)); either may be NULL. Valid after that forward's backward
 * too. DT_ERR_STATE without such a forward, DT_ERR_INVALID for rows outside
 * [0, B*T]. */
int dt_model_row_stats(const dt_model *m, long rows, double *correct, double *loss_sum);
/* Batch size of the last forward (0 if none). */
int dt_model_batch_size(const dt_model *m);
/* Sequence length of the last forward (1 for the sequential family; 0 if
 * none). */
int dt_model_seq_len(const dt_model *m);
/* [B, dt_model_layer_output_size(layer)] output of layer in the last
 * forward (NULL on a bad index or before any forward; gpt: the head's
 * output after a backward, see dt_model_scores). */
const float *dt_model_layer_output(const dt_model *m, int layer);
/* Number of rows (samples; gpt: positions, B*T of them) whose argmax
 * (first maximum) of the last forward equals labels (labels [B] or [B,T]).
 * B must equal the last forward's batch size. */
int dt_model_correct(const dt_model *m, const int32_t *labels, int B);

/* After a train forward with labels: grads += d(mean loss)/d(params), at
 * each layer's current gradient location. DT_ERR_STATE without such a
 * forward, or when that forward was already back-propagated. */
int dt_model_backward(dt_model *m);
/* The same with the loss scaled: grads += scale * d(mean loss)/d(params)
 * (e.g. 1/k for gradient accumulation over k micro-batches). */
int dt_model_backward_scaled(dt_model *m, float scale);
/* Zero every layer's gradients at their current location (NULL: no-op). */
void dt_model_zero_grad(dt_model *m);

/* ---- generation (gpt) ------------------------------------------------------------- */

/* Continue `prompt` (prompt_len >= 1 tokens in [0,V)) by n_new tokens
 * written to out[0..n_new). Each new token is drawn from
 * softmax(logits / temperature) of the last position (temperature > 0), or
 * is the argmax (temperature == 0), with a dt_rng seeded by `seed`: the
 * same arguments give the same tokens. Positions are processed one at a
 * time with a key/value cache (cost ~ 2 * num_params FLOPs per token); the
 * context is the last block_size tokens: when it is full, the cache is
 * rebuilt from the last block_size/2 tokens (which then sit at positions
 * 0..block_size/2-1) and generation goes on. A prompt longer than
 * block_size is cut to its last block_size tokens. Reads every layer's
 * CURRENT parameters (a sharded model must make them resident first, e.g.
 * gather them into a full copy and redirect with dt_model_set_layer_params)
 * and calls no hooks; allocates its cache per call (2 * n_layer *
 * block_size * n_embd floats) and leaves the last forward's state alone.
 * DT_ERR_STATE if a layer's parameters were released and not redirected;
 * DT_ERR_INVALID: NULL arguments, prompt_len < 1, n_new <
 * 0, a token out of range, temperature < 0 or not finite; DT_ERR_UNSUPPORTED
 * for a family that does not generate (sequential). */
int dt_model_generate(dt_model *m, const int32_t *prompt, int prompt_len, int n_new,
                      float temperature, uint64_t seed, int32_t *out);

#ifdef __cplusplus
}
#endif
#endif
