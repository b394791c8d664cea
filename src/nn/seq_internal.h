/* src/nn/seq_internal.h - internal: the "sequential" model family (a stack
 * of nn.h layers for 28x28 ten-class inputs: mlp, lenet, cnn) - its layer
 * records, its state and the builder functions the per-model files
 * (model_mlp.c, ...) use. */
#ifndef DT_NN_SEQ_INTERNAL_H
#define DT_NN_SEQ_INTERNAL_H

#include "dtrain/nn.h"
#include "nn/model_internal.h"

#define DT_SEQ_MAX_LAYERS 32
#define DT_SEQ_CLASSES 10

typedef enum dt_layer_kind {
    DTL_LINEAR,
    DTL_CONV2D,
    DTL_BN2D,
    DTL_BN1D,
    DTL_RELU,
    DTL_GELU,
    DTL_SIGMOID,
    DTL_TANH,
    DTL_AVGPOOL,
    DTL_MAXPOOL,
    DTL_FLATTEN,
    DTL_DROPOUT
} dt_layer_kind;

/* Layer l of the stack is unit l of the model (name, parameter range,
 * redirection live in m->units[l]). */
typedef struct dt_layer {
    dt_layer_kind kind;
    int in_c, in_h, in_w;    /* per-sample input shape (flat: c = features, h = w = 1) */
    int out_c, out_h, out_w; /* per-sample output shape */
    size_t in_size, out_size;
    /* kind-specific */
    int has_bias;            /* linear, conv2d */
    dt_conv2d_desc conv;     /* conv2d */
    dt_pool2d_desc pool;     /* pools */
    float p;                 /* dropout */
    float momentum, eps;     /* batch norm */
    size_t weight_count;     /* elements of the weight (the bias follows) */
    /* activations (inside the arena, sized for bmax) */
    float *out, *dout;       /* [bmax, out_size]; flatten aliases its input's */
    float *save_mean, *save_rstd; /* batch norm [C] */
    int32_t *argmax;         /* maxpool [bmax, out_size] */
    float *mask;             /* dropout [bmax, out_size] */
    int mask_active;         /* dropout applied in the last forward */
} dt_layer;

typedef struct dt_seq {
    int in_c, in_h, in_w, ncls;
    int cur_c, cur_h, cur_w, flat; /* builder: current shape */
    int nlayers;
    dt_layer layers[DT_SEQ_MAX_LAYERS];
    /* runtime */
    int bmax;              /* batch the arena is sized for */
    float *arena;          /* activations */
    float *x, *logp;       /* [bmax, in], [bmax, ncls] */
    int32_t *labels;       /* [bmax] */
    float *work;           /* shared scratch */
    size_t work_size;
    dt_rng drop_rng;
} dt_seq;

static inline dt_seq *seq_of(dt_model *m) { return (dt_seq *)m->impl; }
static inline const dt_seq *seq_ofc(const dt_model *m) { return (const dt_seq *)m->impl; }

/* Builders: append a layer to m, checking shapes; each returns DT_OK or a
 * negative status with the message set. */
int dtm_add_linear(dt_model *m, const char *name, int out_features, int bias);
int dtm_add_conv2d(dt_model *m, const char *name, int out_channels, int kernel, int stride,
                   int pad, int bias);
int dtm_add_batchnorm(dt_model *m, const char *name); /* 2d on images, 1d on flat */
int dtm_add_simple(dt_model *m, dt_layer_kind kind, const char *name); /* activations, flatten */
int dtm_add_pool(dt_model *m, dt_layer_kind kind, const char *name, int kernel, int stride);
int dtm_add_dropout(dt_model *m, const char *name, float p);

/* Per-model builders (model_mlp.c, model_lenet.c, model_cnn.c). */
int dt_model_build_mlp(dt_model *m, const dt_model_config *cfg);
int dt_model_build_lenet(dt_model *m, const dt_model_config *cfg);
int dt_model_build_cnn(dt_model *m, const dt_model_config *cfg);

/* The runtime (model_seq.c). */
int dt_seq_forward(dt_model *m, const void *x, const int32_t *labels, int B, int T, int train);
int dt_seq_backward(dt_model *m, float scale);
const float *dt_seq_log_probs(dt_model *m);
const float *dt_seq_scores(const dt_model *m);
int dt_seq_row_stats(dt_model *m, size_t rows, double *correct, double *loss_sum);
const float *dt_seq_layer_output(const dt_model *m, int layer);
size_t dt_seq_layer_output_size(const dt_model *m, int layer);
int dt_seq_seed_dropout(dt_model *m, uint64_t seed);
int dt_seq_activation_bytes(const dt_model *m, int B, int T, int recompute, size_t *bytes);
void dt_seq_free(void *impl);

#endif
