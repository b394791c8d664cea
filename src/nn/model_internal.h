/* src/nn/model_internal.h - internal: the model structure and the builder
 * functions the per-model files (model_mlp.c, ...) use. */
#ifndef DT_NN_MODEL_INTERNAL_H
#define DT_NN_MODEL_INTERNAL_H

#include "dtrain/model.h"
#include "dtrain/nn.h"
#include "dtrain/rng.h"

#define DT_MODEL_MAX_LAYERS 32
#define DT_LAYER_NAME_MAX 32

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

typedef struct dt_layer {
    dt_layer_kind kind;
    char name[DT_LAYER_NAME_MAX];
    int in_c, in_h, in_w;    /* per-sample input shape (flat: c = features, h = w = 1) */
    int out_c, out_h, out_w; /* per-sample output shape */
    size_t in_size, out_size;
    /* kind-specific */
    int has_bias;            /* linear, conv2d */
    dt_conv2d_desc conv;     /* conv2d */
    dt_pool2d_desc pool;     /* pools */
    float p;                 /* dropout */
    float momentum, eps;     /* batch norm */
    /* layout */
    size_t param_off, param_count, weight_count;
    size_t buf_off, buf_count;
    float *param_ptr, *grad_ptr; /* redirection; NULL = default */
    /* activations (inside the model's arena, sized for bmax) */
    float *out, *dout;       /* [bmax, out_size]; flatten aliases its input's */
    float *save_mean, *save_rstd; /* batch norm [C] */
    int32_t *argmax;         /* maxpool [bmax, out_size] */
    float *mask;             /* dropout [bmax, out_size] */
    int mask_active;         /* dropout applied in the last forward */
} dt_layer;

struct dt_model {
    char name[16];
    dt_model_config cfg;
    int in_c, in_h, in_w, ncls;
    int cur_c, cur_h, cur_w, flat; /* builder: current shape */
    int nlayers;
    dt_layer layers[DT_MODEL_MAX_LAYERS];
    size_t nparams, nbuffers;
    float *params, *grads, *buffers;
    int grads_external;    /* grads is the caller's (dt_model_use_grad_buffer): never freed here */
    dt_param_slice *slices, *bslices;
    int nslices, nbslices, cap_slices, cap_bslices;
    /* runtime */
    int bmax;              /* batch the arena is sized for */
    int B;                 /* batch of the last forward (0: no valid forward) */
    int can_backward;      /* last forward was train with labels, not yet back-propagated */
    int has_labels;
    float *arena;          /* activations */
    float *x, *logp;       /* [bmax, in], [bmax, ncls] */
    int32_t *labels;       /* [bmax] */
    float *work;           /* shared scratch */
    size_t work_size;
    dt_model_hooks hooks;
    dt_rng drop_rng;
    float loss;
};

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

#endif
