/* src/nn/weights_hf.c - Hugging Face's side of dtrain/weights.h: the
 * config.json beside a GPT-2 checkpoint (read and checked: what dtrain's GPT
 * has not is refused by name), and the GPT2LMHeadModel layout that dtrain
 * writes (names, Conv1D shapes, config.json). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/error.h"
#include "io/json.h"
#include "nn/weights_internal.h"

#define MAX_CONFIG_BYTES (1 << 20)

int dtw_is_conv1d_matrix(const char *name) {
    static const char *const k[] = {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
                                    "mlp.c_proj.weight"};
    const size_t n = strlen(name);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const size_t m = strlen(k[i]);
        if (n > m && name[n - m - 1] == '.' && strcmp(name + n - m, k[i]) == 0) return 1;
    }
    return 0;
}

/* ---- reading config.json ------------------------------------------------------------ */

/* config.json in the directory of path (malloc'd). */
static char *config_path_of(const char *path) {
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) + 1 : 0;
    char *p = malloc(dl + sizeof "config.json");
    if (!p) return NULL;
    memcpy(p, path, dl);
    memcpy(p + dl, "config.json", sizeof "config.json");
    return p;
}

/* An integer key: *out = its value, -1 when absent or null. */
static int int_key(const char *cp, json_t *o, const char *key, int *out) {
    json_t *v = json_object_get(o, key);
    *out = -1;
    if (!v || json_is_null(v)) return DT_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 24))
        return DT_ERR(DT_ERR_IO, "%s: %s is not a positive integer", cp, key);
    *out = (int)json_integer_value(v);
    return DT_OK;
}

/* A boolean key that must have the value `want` when present. */
static int bool_key(const char *cp, json_t *o, const char *key, int want, const char *why) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return DT_OK;
    if (!json_is_boolean(v)) return DT_ERR(DT_ERR_IO, "%s: %s is not true or false", cp, key);
    if (json_is_true(v) == want) return DT_OK;
    return DT_ERR(DT_ERR_UNSUPPORTED, "%s: %s %s is not supported: %s", cp, key, want ? "false" : "true", why);
}

static int check_config(const char *cp, json_t *o, dtw_hf_config *c) {
    if (!json_is_object(o)) return DT_ERR(DT_ERR_IO, "%s is not a JSON object", cp);
    json_t *mt = json_object_get(o, "model_type");
    if (mt && (!json_is_string(mt) || strcmp(json_string_value(mt), "gpt2") != 0))
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: model_type %s: dtrain reads Hugging Face's GPT-2 (\"gpt2\")", cp,
                      json_is_string(mt) ? json_string_value(mt) : "(not a string)");
    json_t *act = json_object_get(o, "activation_function");
    if (act) {
        const char *a = json_is_string(act) ? json_string_value(act) : NULL;
        if (!a || (strcmp(a, "gelu_new") && strcmp(a, "gelu_pytorch_tanh") && strcmp(a, "gelu_fast")))
            return DT_ERR(DT_ERR_UNSUPPORTED, "%s: activation_function %s is not supported: dtrain's GPT uses the tanh "
                          "GELU (gelu_new, gelu_pytorch_tanh or gelu_fast)", cp, a ? a : "(not a string)");
    }
    json_t *eps = json_object_get(o, "layer_norm_epsilon");
    if (eps) {
        if (!json_is_number(eps)) return DT_ERR(DT_ERR_IO, "%s: layer_norm_epsilon is not a number", cp);
        double e = json_number_value(eps);
        if (fabs(e - 1e-5) > 1e-12)
            return DT_ERR(DT_ERR_UNSUPPORTED, "%s: layer_norm_epsilon %g is not supported: dtrain's GPT uses 1e-05", cp,
                          e);
    }
    int rc;
    if ((rc = bool_key(cp, o, "scale_attn_weights", 1, "dtrain's attention scales by 1/sqrt(head size)")) ||
        (rc = bool_key(cp, o, "scale_attn_by_inverse_layer_idx", 0, "dtrain's attention has no per-layer scale")) ||
        (rc = bool_key(cp, o, "add_cross_attention", 0, "dtrain's GPT has no cross-attention")) ||
        (rc = bool_key(cp, o, "tie_word_embeddings", 1, "dtrain's GPT ties lm_head to the token embedding")))
        return rc;
    int ctx = -1, inner = -1;
    if ((rc = int_key(cp, o, "n_layer", &c->n_layer)) || (rc = int_key(cp, o, "n_embd", &c->n_embd)) ||
        (rc = int_key(cp, o, "n_head", &c->n_head)) || (rc = int_key(cp, o, "vocab_size", &c->vocab_size)) ||
        (rc = int_key(cp, o, "n_positions", &c->n_positions)) || (rc = int_key(cp, o, "n_ctx", &ctx)) ||
        (rc = int_key(cp, o, "n_inner", &inner)))
        return rc;
    if (c->n_positions < 0) c->n_positions = ctx;
    if (inner >= 0 && (c->n_embd < 0 || inner != 4 * c->n_embd))
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: n_inner %d is not supported: dtrain's MLP is 4 x n_embd wide%s", cp,
                      inner, c->n_embd < 0 ? " (and n_embd is not given)" : "");
    if (c->n_head > 0 && c->n_embd > 0 && c->n_embd % c->n_head != 0)
        return DT_ERR(DT_ERR_IO, "%s: n_embd %d is not divisible by n_head %d", cp, c->n_embd, c->n_head);
    return DT_OK;
}

int dtw_hf_config_read(const char *weights_path, int *found, char **config_path, dtw_hf_config *c) {
    *found = 0;
    *c = (dtw_hf_config){-1, -1, -1, -1, -1};
    char *cp = *config_path = config_path_of(weights_path);
    if (!cp) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    struct stat st;
    if (stat(cp, &st) != 0) {
        if (errno == ENOENT) return DT_OK;
        return DT_ERR(DT_ERR_IO, "%s: %s", cp, strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) return DT_ERR(DT_ERR_IO, "%s is not a regular file", cp);
    if (st.st_size > MAX_CONFIG_BYTES)
        return DT_ERR(DT_ERR_IO, "%s: %lld bytes, more than a model config has (limit %d)", cp, (long long)st.st_size,
                      MAX_CONFIG_BYTES);
    FILE *f = fopen(cp, "rb");
    if (!f) return DT_ERR(DT_ERR_IO, "cannot open %s: %s", cp, strerror(errno));
    char *text = malloc((size_t)st.st_size + 1);
    size_t got = text ? fread(text, 1, (size_t)st.st_size, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (!text) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    if (bad || got != (size_t)st.st_size) {
        free(text);
        return DT_ERR(DT_ERR_IO, "%s: read %zu of %lld bytes", cp, got, (long long)st.st_size);
    }
    char err[256];
    json_t *o = dtj_parse(text, got, err, sizeof err);
    free(text);
    if (!o) return DT_ERR(DT_ERR_IO, "%s is not valid JSON %s", cp, err);
    int rc = check_config(cp, o, c);
    json_decref(o);
    if (!rc) *found = 1;
    return rc;
}

/* ---- writing: GPT2LMHeadModel's names and config.json ---------------------------------------- */

int dt_weights_hf_tensor(const dt_param_slice *sl, char *name, size_t cap, int64_t shape[4], int *transpose) {
    if (!sl || !name || !shape || !transpose || cap < DT_SLICE_NAME_MAX)
        return DT_ERR(DT_ERR_INVALID, "NULL argument or name buffer under %d bytes", DT_SLICE_NAME_MAX);
    if (strncmp(sl->name, "transformer.", 12) != 0 || sl->ndim < 1 || sl->ndim > 2)
        return DT_ERR(DT_ERR_INVALID, "slice %s is not one of a gpt model's", sl->name);
    snprintf(name, cap, "%s", sl->name); /* GPT2LMHeadModel's keys are dtrain's */
    *transpose = sl->ndim == 2 && dtw_is_conv1d_matrix(sl->name);
    shape[0] = *transpose ? sl->shape[1] : sl->shape[0];
    shape[1] = *transpose ? sl->shape[0] : sl->shape[1];
    shape[2] = shape[3] = 0;
    return DT_OK;
}

int dt_weights_hf_config(const dt_model_config *c, char **out) {
    if (!c || !out) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    *out = NULL;
    if (c->n_layer < 1 || c->n_head < 1 || c->n_embd < 1 || c->block_size < 1 || c->vocab_size < 1)
        return DT_ERR(DT_ERR_INVALID, "model %s is not a gpt model: no Hugging Face config", c->name ? c->name : "?");
    json_t *o = json_object(), *arch = json_array();
    int bad = !o || !arch || json_array_append_new(arch, json_string("GPT2LMHeadModel"));
    bad |= json_object_set_new(o, "architectures", arch);
    bad |= json_object_set_new(o, "model_type", json_string("gpt2"));
    const struct { const char *k; int v; } ints[] = {
        {"vocab_size", c->vocab_size}, {"n_positions", c->block_size}, {"n_ctx", c->block_size},
        {"n_embd", c->n_embd},         {"n_layer", c->n_layer},        {"n_head", c->n_head}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        bad |= json_object_set_new(o, ints[i].k, json_integer(ints[i].v));
    bad |= json_object_set_new(o, "n_inner", json_null());
    bad |= json_object_set_new(o, "activation_function", json_string("gelu_new"));
    bad |= json_object_set_new(o, "layer_norm_epsilon", json_real(1e-5));
    bad |= json_object_set_new(o, "initializer_range", json_real(0.02));
    /* dtrain trains without dropout: the config says what the model is */
    bad |= json_object_set_new(o, "resid_pdrop", json_real(0.0));
    bad |= json_object_set_new(o, "embd_pdrop", json_real(0.0));
    bad |= json_object_set_new(o, "attn_pdrop", json_real(0.0));
    bad |= json_object_set_new(o, "scale_attn_weights", json_true());
    bad |= json_object_set_new(o, "scale_attn_by_inverse_layer_idx", json_false());
    bad |= json_object_set_new(o, "reorder_and_upcast_attn", json_false());
    bad |= json_object_set_new(o, "tie_word_embeddings", json_true());
    bad |= json_object_set_new(o, "use_cache", json_true());
    bad |= json_object_set_new(o, "torch_dtype", json_string("float32"));
    if (c->vocab_size == 50257) { /* GPT-2's <|endoftext|> */
        bad |= json_object_set_new(o, "bos_token_id", json_integer(50256));
        bad |= json_object_set_new(o, "eos_token_id", json_integer(50256));
    }
    char *text = bad ? NULL : json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    json_decref(o);
    size_t n = text ? strlen(text) : 0;
    char *t = text ? realloc(text, n + 2) : NULL;
    if (!t) {
        free(text);
        return DT_ERR(DT_ERR_NOMEM, "out of memory writing a Hugging Face config");
    }
    t[n] = '\n';
    t[n + 1] = '\0';
    *out = t;
    return DT_OK;
}
