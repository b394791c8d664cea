/* src/nn/model_internal.h - internal: the family-independent model (the
 * layout contract: units, flat buffers, slices, redirection, hooks) and the
 * family vtable a model family implements (model_family.c holds the table). */
#ifndef DT_NN_MODEL_INTERNAL_H
#define DT_NN_MODEL_INTERNAL_H

#include "dtrain/model.h"
#include "dtrain/rng.h"

#define DT_UNIT_NAME_MAX 48

/* One layer ("unit") of the layout contract. */
typedef struct dt_unit {
    char name[DT_UNIT_NAME_MAX]; /* module name: "fc1", "transformer.h.0" */
    const char *kind;            /* static string: "linear", "block", ... */
    size_t param_off, param_count;
    size_t buf_off, buf_count;
    float *param_ptr, *grad_ptr; /* redirection; NULL = the flat buffers */
    const void *param16;         /* the parameters in the compute precision (bf16),
                                    given by the caller (dt_model_set_layer_params16;
                                    cleared by dt_model_set_layer_params); NULL: none */
    int owner;                   /* unit whose parameters this one uses (itself
                                    unless shared, e.g. gpt's tied head) */
} dt_unit;

typedef struct dtm_family dtm_family;

/* Where a model's flat buffers (params, grads, buffers) live when not in
 * host memory: a family whose model computes on a device sets m->mem in its
 * build, and the generic code allocates, zeroes and copies through it (in
 * the family's stream order). NULL: host memory (malloc, memset, memcpy). */
typedef struct dtm_mem {
    int (*alloc)(dt_model *m, size_t bytes, const char *what, void **p); /* zeroed */
    void (*free)(dt_model *m, void *p);
    int (*upload)(dt_model *m, void *dst, const void *src, size_t bytes);   /* host -> model */
    int (*download)(dt_model *m, void *dst, const void *src, size_t bytes); /* model -> host, waits */
    int (*copy)(dt_model *m, void *dst, const void *src, size_t bytes);     /* model -> model */
    int (*zero)(dt_model *m, void *p, size_t bytes);
    void *(*stream)(dt_model *m);                                          /* cudaStream_t */
} dtm_mem;

struct dt_model {
    const dtm_family *fam;
    char name[32];
    dt_model_config cfg;         /* cfg.name points to name */
    dt_model_io io;
    int nlayers, cap_layers;
    dt_unit *units;              /* [nlayers] */
    size_t nparams, nbuffers;
    float *params, *grads, *buffers;
    int grads_external;          /* grads is the caller's (dt_model_use_grad_buffer) */
    const dtm_mem *mem;          /* device memory: set by the family's build; NULL: host */
    dt_param_slice *slices, *bslices;
    int nslices, nbslices, cap_slices, cap_bslices;
    dt_model_hooks hooks;
    /* runtime state of the last forward */
    int B, T;                    /* 0: no valid forward */
    int can_backward;            /* last forward was train with labels, not yet
                                    back-propagated */
    int has_labels;
    float loss;
    void *impl;                  /* the family's state */
};

/* A model family (one table entry in model_family.c). Generic code
 * (model.c, model_build.c, model_info.c) validates arguments, keeps the
 * state flags (B, T, can_backward) and calls these. */
struct dtm_family {
    const char *name;            /* "sequential", "gpt" */
    const char *const *models;   /* NULL-terminated model names it builds */
    /* cfg is zeroed and cfg->name set to the static name from `models`;
     * fill the family's defaults. */
    int (*config_default)(dt_model_config *cfg);
    /* Validate cfg, declare units/params/buffers (dtm_add_unit, ...), set
     * m->io and m->impl. On failure the generic code frees the model
     * (free_impl is called if impl was set). */
    int (*build)(dt_model *m, const dt_model_config *cfg);
    /* Initialise the parameters and buffers (flat buffers exist, zeroed). */
    void (*init)(dt_model *m);
    void (*free_impl)(void *impl);
    /* Forward: inputs validated (B >= 1, T in range, labels/tokens in
     * range), m->has_labels set. Set m->loss (NAN without labels). */
    int (*forward)(dt_model *m, const void *x, const int32_t *labels, int B, int T, int train);
    /* Backward of the last forward (validated: it can be back-propagated). */
    int (*backward)(dt_model *m, float scale);
    /* Outputs of the last forward (m->B > 0 checked by the caller). */
    const float *(*log_probs)(dt_model *m);
    const float *(*scores)(const dt_model *m);
    const float *(*layer_output)(const dt_model *m, int layer);
    size_t (*layer_output_size)(const dt_model *m, int layer);
    /* Optional: the mean loss of the last forward with labels (NULL: m->loss,
     * set by forward), for families whose loss waits on a device. */
    int (*loss)(dt_model *m, float *loss);
    /* Over the first `rows` predictions of the last forward with labels
     * (rows validated), the number whose first maximum is the label and the
     * sum of their losses; valid also after that forward's backward. */
    int (*row_stats)(dt_model *m, size_t rows, double *correct, double *loss_sum);
    /* Optional (NULL: not supported). */
    int (*seed_dropout)(dt_model *m, uint64_t seed);
    int (*set_recompute)(dt_model *m, int on);
    int (*activation_bytes)(const dt_model *m, int B, int T, int recompute, size_t *bytes);
    int (*generate)(dt_model *m, const int32_t *prompt, int prompt_len, int n_new,
                    float temperature, uint64_t seed, int32_t *out);
    /* Optional: the model's flat parameters were released (ZeRO-3: every
     * layer is redirected before a pass); a family keeping a copy of them
     * in another precision may now keep it layer by layer. A failure leaves
     * the model as it was (the parameters released). */
    int (*params_released)(dt_model *m);
    /* Optional (NULL: none): the bytes of the compute-precision copy of the
     * parameters the model keeps, and whether it is one layer's (*per_layer
     * 1: re-cast at each use) rather than all of them. */
    size_t (*compute_copy_bytes)(const dt_model *m, int *per_layer);
    /* Optional (NULL: none): the whole compute-precision copy (NULL: none
     * now), and the switch to computing from it as the caller writes it,
     * made before the model frees its f32 parameters (DT_ERR_UNSUPPORTED:
     * no whole copy, nothing changed). */
    uint16_t *(*compute_copy)(const dt_model *m);
    int (*params_from_copy)(dt_model *m);
    /* Optional (NULL: the family computes in f32 only): every layer's
     * parameters will be given in bf16 before each use (units' param16):
     * a one-layer copy is no longer needed. */
    int (*layers_bf16)(dt_model *m);
};

/* The model's memory (model_mem.c): host memory, or the family's through
 * m->mem. n in floats; alloc zeroes (at least one element); copy within the
 * model's memory. */
int dtm_buf_alloc(dt_model *m, size_t n, const char *what, float **p);
void dtm_buf_free(dt_model *m, float *p);
int dtm_buf_zero(dt_model *m, float *p, size_t n);
int dtm_buf_copy(dt_model *m, float *dst, const float *src, size_t n);

/* The families (model_family.c). */
const dtm_family *dtm_family_of(const char *model_name);
/* "mlp, lenet, cnn, ..." into buf[0..n) for messages (cut if too small). */
void dtm_known_models(char *buf, size_t n);
extern const dtm_family dt_family_sequential;
extern const dtm_family dt_family_gpt;

/* ---- builders (model_build.c), for a family's build() -------------------------
 * A unit starts at the current end of the flat vectors; params and buffers
 * added afterwards belong to the last unit. Each returns DT_OK or a
 * negative status with the message set. */
int dtm_add_unit(dt_model *m, const char *name, const char *kind);
/* Append a parameter tensor named `name` (full state_dict key) of shape
 * shape[0..ndim) to the last unit. */
int dtm_add_param(dt_model *m, const char *name, int ndim, const int64_t *shape);
int dtm_add_buffer(dt_model *m, const char *name, int ndim, const int64_t *shape);

/* Current parameter / gradient base of unit u: read at every use, so that
 * dt_model_set_layer_params/grads (possibly called from hooks) take effect. */
static inline float *dtm_params(dt_model *m, int u) {
    const dt_unit *U = &m->units[u];
    if (U->param_ptr) return U->param_ptr;
    return m->params ? m->params + U->param_off : NULL; /* NULL: released, not redirected */
}
static inline float *dtm_grads(dt_model *m, int u) {
    const dt_unit *U = &m->units[u];
    if (U->grad_ptr) return U->grad_ptr;
    return m->grads ? m->grads + U->param_off : NULL;
}

/* The T of dt_model_forward: 1 without a sequence axis, else cfg.seq_len
 * (block_size when 0; the family's build checked it). */
static inline int dtm_seq_len(const dt_model *m) {
    if (m->io.max_seq <= 0) return 1;
    return m->cfg.seq_len > 0 ? m->cfg.seq_len : m->io.max_seq;
}

/* Hook return value -> status (negative values pass through untouched). */
int dtm_hook_status(int rc, const char *which, int layer);

#define DTM_HOOK(m, fn, layer)                                                              \
    do {                                                                                    \
        if ((m)->hooks.fn) {                                                                \
            int hrc_ = (m)->hooks.fn((m)->hooks.ctx, (layer));                              \
            if (hrc_) return dtm_hook_status(hrc_, #fn, (layer));                           \
        }                                                                                   \
    } while (0)

#endif
