/* src/nn/weights.c - a model's weights from a safetensors file of dtrain,
 * PyTorch / nanoGPT or Hugging Face (see dtrain/weights.h): the file's
 * naming and layout, the GPT-2 sizes its shapes give, and reading every
 * tensor into the model's layout (dtype conversion, Conv1D transposition),
 * with every tensor of the file accounted for. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/error.h"
#include "dtrain/dtype.h"
#include "io/fileio.h"
#include "nn/weights_internal.h"

#define PREFIX "transformer."
#define PREFIX_LEN 12

const char *dt_weights_path(const dt_weights *w) { return w ? w->path : "?"; }

void dt_weights_close(dt_weights *w) {
    if (!w) return;
    dt_st_close(w->st);
    free(w->path);
    free(w->config_path);
    free(w);
}

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

/* The file path names: itself, or in a directory model.safetensors, else
 * model.safetensors.index.json (malloc'd in *file; *index 1 for an index). */
static int resolve(const char *path, char **file, int *index) {
    struct stat st;
    *index = 0;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        static const char *const names[] = {"model.safetensors", "model.safetensors.index.json"};
        for (int k = 0; k < 2; k++) {
            char *p = ends_with(path, "/") ? dtio_cat(path, names[k]) : dtio_join(path, names[k]);
            if (!p) return DT_ERR(DT_ERR_NOMEM, "out of memory");
            if (stat(p, &st) == 0) {
                *file = p;
                *index = k == 1;
                return DT_OK;
            }
            free(p);
        }
        return DT_ERR(DT_ERR_IO, "%s is a directory with neither model.safetensors nor model.safetensors.index.json",
                      path);
    }
    if (!(*file = dtio_cat(path, ""))) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    *index = ends_with(path, ".json");
    return DT_OK;
}

int dt_weights_open(const char *path, dt_weights **out) {
    if (!path || !*path || !out) return DT_ERR(DT_ERR_INVALID, "NULL or empty argument");
    *out = NULL;
    dt_weights *w = calloc(1, sizeof *w);
    if (!w) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    int index = 0, rc = resolve(path, &w->path, &index);
    const int llmc = !rc && !index && dtw_llmc_probe(w->path);
    if (!rc) rc = index ? dt_st_open_index(w->path, &w->st) : llmc ? dtw_llmc_open(w->path, &w->st)
                                                                   : dt_st_open(w->path, &w->st);
    if (!rc && !llmc) rc = dtw_hf_config_read(w->path, &w->has_config, &w->config_path, &w->hf);
    if (rc) {
        dt_weights_close(w);
        return rc;
    }
    *out = w;
    return DT_OK;
}

/* ---- shapes ------------------------------------------------------------------------ */

static void shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* Index of tensor `name` (with the prefix when the file has it), or -1. */
static int find(const dt_weights *w, int prefixed, const char *name) {
    char key[DT_SLICE_NAME_MAX + PREFIX_LEN + 8];
    snprintf(key, sizeof key, "%s%s", prefixed ? PREFIX : "", name);
    return dt_st_find(w->st, key);
}

static int info_of(const dt_weights *w, int i, dt_st_info *in) { return dt_st_tensor_info(w->st, i, in, NULL, NULL); }

/* The size config.json gives (-1: absent) against the tensors' */
static int agree(const dt_weights *w, const char *key, int cfg, int shapes, const char *what) {
    if (cfg < 0 || cfg == shapes) return DT_OK;
    return DT_ERR(DT_ERR_MISMATCH, "%s says %s %d, but %s of %s gives %d", w->config_path, key, cfg, what, w->path,
                  shapes);
}

int dt_weights_gpt_arch(const dt_weights *w, dt_weights_gpt *a) {
    if (!w || !a) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    memset(a, 0, sizeof *a);
    int i = dt_st_find(w->st, PREFIX "wte.weight");
    a->prefixed = i >= 0;
    if (i < 0) i = dt_st_find(w->st, "wte.weight");
    if (i < 0)
        return DT_ERR(DT_ERR_MISMATCH, "%s holds no GPT-2 state_dict: no tensor transformer.wte.weight or wte.weight",
                      w->path);
    dt_st_info te, pe, at;
    char s1[64], s2[64];
    int rc = info_of(w, i, &te);
    if (rc) return rc;
    if (te.ndim != 2)
        return DT_ERR(DT_ERR_MISMATCH, "%s: the token embedding %s has %d dimensions, not 2 [vocab_size, n_embd]",
                      w->path, te.name, te.ndim);
    a->vocab_size = (int)te.shape[0];
    a->n_embd = (int)te.shape[1];
    int j = find(w, a->prefixed, "wpe.weight");
    if (j < 0) return DT_ERR(DT_ERR_MISMATCH, "%s: no position embedding %swpe.weight", w->path, a->prefixed ? PREFIX : "");
    if ((rc = info_of(w, j, &pe))) return rc;
    if (pe.ndim != 2 || pe.shape[1] != te.shape[1]) {
        shape_str(s1, sizeof s1, pe.ndim, pe.shape);
        shape_str(s2, sizeof s2, te.ndim, te.shape);
        return DT_ERR(DT_ERR_MISMATCH, "%s: tensor %s has shape %s, not [n_positions, %d] (%s is %s)", w->path,
                      pe.name, s1, a->n_embd, te.name, s2);
    }
    a->block_size = (int)pe.shape[0];
    char key[64];
    for (;; a->n_layer++) {
        snprintf(key, sizeof key, "h.%d.ln_1.weight", a->n_layer);
        if (find(w, a->prefixed, key) < 0) break;
    }
    if (a->n_layer == 0)
        return DT_ERR(DT_ERR_MISMATCH, "%s: no transformer block (no tensor %sh.0.ln_1.weight)", w->path,
                      a->prefixed ? PREFIX : "");
    int k = find(w, a->prefixed, "h.0.attn.c_attn.weight");
    if (k < 0) return DT_ERR(DT_ERR_MISMATCH, "%s: no tensor %sh.0.attn.c_attn.weight", w->path, a->prefixed ? PREFIX : "");
    if ((rc = info_of(w, k, &at))) return rc;
    const int64_t C = te.shape[1];
    if (at.ndim == 2 && at.shape[0] == 3 * C && at.shape[1] == C) a->conv1d = 0;
    else if (at.ndim == 2 && at.shape[0] == C && at.shape[1] == 3 * C) a->conv1d = 1;
    else {
        shape_str(s1, sizeof s1, at.ndim, at.shape);
        return DT_ERR(DT_ERR_MISMATCH, "%s: tensor %s has shape %s: neither [3C, C] (torch.nn.Linear) nor [C, 3C] "
                      "(Hugging Face Conv1D) for n_embd C = %lld", w->path, at.name, s1, (long long)C);
    }
    /* n_head: dtrain's metadata, config.json (which must agree with the shapes) */
    const char *mh = dt_st_metadata_get(w->st, "n_head");
    if (mh) {
        char *end;
        long v = strtol(mh, &end, 10);
        if (end == mh || *end || v < 1 || v > 1 << 16)
            return DT_ERR(DT_ERR_IO, "%s: metadata n_head '%.40s' is not a positive integer", w->path, mh);
        a->n_head = (int)v;
    }
    if (w->has_config) {
        a->has_config = 1;
        if ((rc = agree(w, "n_layer", w->hf.n_layer, a->n_layer, "the number of blocks h.<i>")) ||
            (rc = agree(w, "n_embd", w->hf.n_embd, a->n_embd, "the token embedding's columns")) ||
            (rc = agree(w, "vocab_size", w->hf.vocab_size, a->vocab_size, "the token embedding's rows")) ||
            (rc = agree(w, "n_positions", w->hf.n_positions, a->block_size, "the position embedding's rows")))
            return rc;
        if (w->hf.n_head > 0 && a->n_head > 0 && w->hf.n_head != a->n_head)
            return DT_ERR(DT_ERR_MISMATCH, "%s says n_head %d, the metadata of %s n_head %d", w->config_path,
                          w->hf.n_head, w->path, a->n_head);
        if (w->hf.n_head > 0) a->n_head = w->hf.n_head;
    }
    return DT_OK;
}

/* ---- reading --------------------------------------------------------------------------- */

/* count floats of src (dtype) into dst, transposed from [r, c] to [c, r]
 * when transpose (the stored shape is [r, c]). */
static int convert(const void *src, dt_dtype dt, size_t count, int transpose, int64_t r, int64_t c, float *dst,
                   const char *name, const char *path) {
    for (size_t i = 0; i < count; i++) {
        float v;
        switch (dt) {
        case DT_F32: v = ((const float *)src)[i]; break;
        case DT_F64: v = (float)((const double *)src)[i]; break;
        case DT_F16: v = dt_f16_to_f32(((const uint16_t *)src)[i]); break;
        case DT_BF16: v = dt_bf16_to_f32(((const uint16_t *)src)[i]); break;
        default:
            return DT_ERR(DT_ERR_UNSUPPORTED, "%s: tensor %s is %s: parameters are read from F32, F64, F16 or BF16",
                          path, name, dt_st_dtype_name(dt));
        }
        if (transpose) { /* stored [r, c] at (i / c, i % c) -> model [c, r] */
            const size_t a = i / (size_t)c, b = i % (size_t)c;
            dst[b * (size_t)r + a] = v;
        } else {
            dst[i] = v;
        }
    }
    return DT_OK;
}

/* Tensor i of the file into dst (sl's count floats, the model's layout). */
static int read_tensor(dt_weights *w, int i, const dt_param_slice *sl, int transpose, float *dst) {
    dt_st_info in;
    uint64_t nb;
    int rc = dt_st_tensor_info(w->st, i, &in, &nb, NULL);
    if (rc) return rc;
    if (in.dtype == DT_F32 && !transpose) return dt_st_read(w->st, i, dst, sl->count * sizeof(float));
    void *tmp = malloc(nb ? (size_t)nb : 1);
    if (!tmp) return DT_ERR(DT_ERR_NOMEM, "out of memory reading %s of %s", in.name, w->path);
    rc = dt_st_read(w->st, i, tmp, (size_t)nb);
    if (!rc)
        rc = convert(tmp, in.dtype, sl->count, transpose, in.ndim == 2 ? in.shape[0] : 1, in.ndim == 2 ? in.shape[1] : 1,
                     dst, in.name, w->path);
    free(tmp);
    return rc;
}

/* Tensor i of the file holds sl (ndim and shape, transposed when stored as Conv1D). */
static int check_shape(const dt_weights *w, int i, const dt_param_slice *sl, int transpose) {
    dt_st_info in;
    int rc = info_of(w, i, &in);
    if (rc) return rc;
    int64_t want[4] = {sl->shape[0], sl->shape[1], sl->shape[2], sl->shape[3]};
    if (transpose) want[0] = sl->shape[1], want[1] = sl->shape[0];
    int same = in.ndim == sl->ndim;
    for (int d = 0; same && d < sl->ndim; d++) same = in.shape[d] == want[d];
    if (same) return DT_OK;
    char s1[96], s2[96];
    shape_str(s1, sizeof s1, in.ndim, in.shape);
    shape_str(s2, sizeof s2, sl->ndim, want);
    return DT_ERR(DT_ERR_MISMATCH, "tensor %s: %s has shape %s, the model needs %s%s", in.name, w->path, s1, s2,
                  transpose ? " (Hugging Face's Conv1D layout [in, out])" : "");
}

/* HF's per-block buffers: the causal mask h.<i>.attn.bias and h.<i>.attn.masked_bias */
static int ignorable(const char *name, int prefixed) {
    if (prefixed && strncmp(name, PREFIX, PREFIX_LEN) == 0) name += PREFIX_LEN;
    int l, n = 0;
    char rest[32];
    if (sscanf(name, "h.%d.attn.%31s%n", &l, rest, &n) != 2 || name[n] != '\0') return 0;
    return strcmp(rest, "bias") == 0 || strcmp(rest, "masked_bias") == 0;
}

/* An lm_head.weight in the file must be the token embedding (a tied head). */
static int check_head(dt_weights *w, int i, const dt_param_slice *wte, const float *wte_vals) {
    int rc = check_shape(w, i, wte, 0);
    float *h = rc ? NULL : malloc(wte->count * sizeof(float));
    if (!rc && !h) rc = DT_ERR(DT_ERR_NOMEM, "out of memory reading lm_head.weight of %s", w->path);
    if (!rc) rc = read_tensor(w, i, wte, 0, h);
    if (!rc && memcmp(h, wte_vals, wte->count * sizeof(float)) != 0)
        rc = DT_ERR(DT_ERR_UNSUPPORTED, "%s: lm_head.weight differs from the token embedding: an untied LM head is not "
                    "supported (dtrain's GPT ties lm_head to transformer.wte.weight)", w->path);
    free(h);
    return rc;
}

int dt_weights_read(dt_weights *w, const dt_model *m, float *params, float *buffers) {
    if (!w || !m || (!params && dt_model_num_params(m)) || (!buffers && dt_model_num_buffers(m)))
        return DT_ERR(DT_ERR_INVALID, "NULL argument");
    const int gpt = strcmp(dt_model_family(m), "gpt") == 0;
    dt_weights_gpt a = {0};
    int rc = gpt ? dt_weights_gpt_arch(w, &a) : DT_OK;
    if (rc) return rc;
    const int nt = dt_st_num_tensors(w->st), np = dt_model_num_slices(m), nb = dt_model_num_buffer_slices(m);
    unsigned char *used = calloc((size_t)(nt ? nt : 1), 1);
    if (!used) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    const dt_param_slice *wte = NULL;
    for (int s = 0; !rc && s < np + nb; s++) {
        const dt_param_slice *sl = s < np ? dt_model_slice(m, s) : dt_model_buffer_slice(m, s - np);
        float *dst = s < np ? params + sl->offset : buffers + sl->offset;
        const char *name = sl->name;
        if (gpt && strncmp(name, PREFIX, PREFIX_LEN) == 0) name += PREFIX_LEN;
        const int i = gpt ? find(w, a.prefixed, name) : dt_st_find(w->st, name);
        const int transpose = gpt && a.conv1d && dtw_is_conv1d_matrix(sl->name);
        if (i < 0) {
            char s1[96];
            shape_str(s1, sizeof s1, sl->ndim, sl->shape);
            rc = DT_ERR(DT_ERR_MISMATCH, "%s has no tensor %s%s: the model %s needs it (shape %s)", w->path,
                        gpt && a.prefixed ? PREFIX : "", name, dt_model_name(m), s1);
            break;
        }
        if (!(rc = check_shape(w, i, sl, transpose))) rc = read_tensor(w, i, sl, transpose, dst);
        used[i] = 1;
        if (gpt && strcmp(sl->name, PREFIX "wte.weight") == 0) wte = sl;
    }
    for (int i = 0; !rc && i < nt; i++) {
        dt_st_info in;
        if (used[i] || (rc = info_of(w, i, &in))) continue;
        if (gpt && ignorable(in.name, a.prefixed)) continue;
        if (gpt && wte && strcmp(in.name, "lm_head.weight") == 0) {
            rc = check_head(w, i, wte, params + wte->offset);
            continue;
        }
        char s1[96];
        shape_str(s1, sizeof s1, in.ndim, in.shape);
        rc = DT_ERR(DT_ERR_UNSUPPORTED, "%s holds tensor %s %s, which the model %s does not have%s: refused rather "
                    "than dropped", w->path, in.name, s1, dt_model_name(m),
                    gpt && strstr(in.name, "bias") ? " (a bias GPT-2 has not)" : "");
    }
    free(used);
    return rc;
}
