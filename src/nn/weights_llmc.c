/* src/nn/weights_llmc.c - llm.c's GPT-2 model files (dtrain/weights.h):
 * gpt2_124M.bin and the like, as llm.c's train_gpt2.py writes them and its
 * train_gpt2.c / train_gpt2.cu read and write them. The format:
 *   256 int32 (1024 bytes): magic 20240326, version (3: float32, 5:
 *     bfloat16), max_seq_len, vocab_size V, num_layers L, num_heads,
 *     channels C, padded_vocab_size Vp (V rounded up to a multiple of 128);
 *   the 16 parameter tensors back to back in that dtype, little-endian,
 *   torch.nn.Linear's [out, in] for the matrices, each per-block tensor
 *   stacked over the L blocks ([L, ...]), in this order:
 *     wte [Vp, C] (rows V.. Vp-1 are padding), wpe [max_seq_len, C],
 *     ln_1.weight, ln_1.bias, attn.c_attn.weight [3C, C], attn.c_attn.bias,
 *     attn.c_proj.weight [C, C], attn.c_proj.bias, ln_2.weight, ln_2.bias,
 *     mlp.c_fc.weight [4C, C], mlp.c_fc.bias, mlp.c_proj.weight [C, 4C],
 *     mlp.c_proj.bias (each over the L blocks), ln_f.weight, ln_f.bias;
 *   nothing after them.
 * Read through a view (io/safetensors_internal.h) that names each block's
 * slice of the stacked tensors as dtrain's GPT does (transformer.h.<l>.*)
 * and wte's first V rows; the padding rows are not read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "io/fileio.h"
#include "io/safetensors_internal.h"
#include "nn/weights_internal.h"

#define LLMC_MAGIC 20240326
#define LLMC_HEADER_BYTES 1024
#define LLMC_MAX_SIZE (1 << 24)

/* the per-block tensors in file order: name, rows and columns in units of C (0: 1-d) */
static const struct { const char *name; int rows, cols; } k_block[12] = {
    {"ln_1.weight", 1, 0},        {"ln_1.bias", 1, 0},       {"attn.c_attn.weight", 3, 1}, {"attn.c_attn.bias", 3, 0},
    {"attn.c_proj.weight", 1, 1}, {"attn.c_proj.bias", 1, 0}, {"ln_2.weight", 1, 0},       {"ln_2.bias", 1, 0},
    {"mlp.c_fc.weight", 4, 1},    {"mlp.c_fc.bias", 4, 0},   {"mlp.c_proj.weight", 1, 4}, {"mlp.c_proj.bias", 1, 0},
};

int dtw_llmc_count(int n_layer) { return 4 + 12 * n_layer; }

int dtw_llmc_layout(const dtw_llmc_sizes *s, dt_dtype dtype, dt_st_info *ts, char (*names)[DT_SLICE_NAME_MAX],
                    uint64_t *off, uint64_t *stored, uint64_t *end) {
    const uint64_t es = dt_dtype_size(dtype), C = (uint64_t)s->n_embd, L = (uint64_t)s->n_layer;
    uint64_t at = LLMC_HEADER_BYTES;
    int n = 0;
#define ADD(nm, nd, r, c, elems)                                                            \
    do {                                                                                    \
        snprintf(names[n], DT_SLICE_NAME_MAX, "%s", nm);                                    \
        ts[n] = (dt_st_info){.name = names[n], .dtype = dtype, .ndim = (nd), .shape = {(int64_t)(r), (int64_t)(c)}}; \
        off[n] = at;                                                                        \
        stored[n] = (elems);                                                                \
        at += (elems) * es;                                                                 \
        n++;                                                                                \
    } while (0)
    ADD("transformer.wte.weight", 2, s->vocab_size, C, (uint64_t)s->padded_vocab * C);
    ADD("transformer.wpe.weight", 2, s->block_size, C, (uint64_t)s->block_size * C);
    for (int k = 0; k < 12; k++)
        for (uint64_t l = 0; l < L; l++) {
            char nm[DT_SLICE_NAME_MAX];
            snprintf(nm, sizeof nm, "transformer.h.%llu.%s", (unsigned long long)l, k_block[k].name);
            const uint64_t r = k_block[k].rows * C, c = k_block[k].cols * C;
            ADD(nm, c ? 2 : 1, r, c, c ? r * c : r);
        }
    ADD("transformer.ln_f.weight", 1, C, 0, C);
    ADD("transformer.ln_f.bias", 1, C, 0, C);
#undef ADD
    *end = at;
    return n;
}

/* A safetensors file starts with its header's length, a u64 below 2^32 (at
 * most DT_ST_MAX_HEADER): its bytes 4..7 are zero, llm.c's version is not. */
int dtw_llmc_probe(const char *path) {
    FILE *f = fopen(path, "rb");
    unsigned char b[8];
    int yes = f && fread(b, 1, 8, f) == 8 && dtio_get_u32(b) == LLMC_MAGIC && dtio_get_u32(b + 4) != 0;
    if (f) fclose(f);
    return yes;
}

/* header field i: an int in [1, LLMC_MAX_SIZE] */
static int field(const char *path, const unsigned char *h, int i, const char *what, int *out) {
    const int32_t v = (int32_t)dtio_get_u32(h + 4 * i);
    if (v < 1 || v > LLMC_MAX_SIZE)
        return DT_ERR(DT_ERR_IO, "%s: llm.c header field %d (%s) is %d, not in [1, %d]", path, i, what, (int)v,
                      LLMC_MAX_SIZE);
    *out = v;
    return DT_OK;
}

int dtw_llmc_open(const char *path, dt_st_file **out) {
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return DT_ERR(DT_ERR_IO, "%s: cannot open", path);
    unsigned char h[LLMC_HEADER_BYTES];
    size_t got = fread(h, 1, sizeof h, fp);
    fclose(fp);
    if (got < sizeof h)
        return DT_ERR(DT_ERR_IO, "%s: truncated: %zu bytes, llm.c's model files start with a %d-byte header", path, got,
                      LLMC_HEADER_BYTES);
    const int version = (int)(int32_t)dtio_get_u32(h + 4);
    if (version != 3 && version != 5)
        return DT_ERR(DT_ERR_UNSUPPORTED, "%s: llm.c model file version %d: dtrain reads versions 3 (float32) and 5 "
                      "(bfloat16), both with a padded vocabulary (llm.c's train_gpt2.py writes them)", path, version);
    dtw_llmc_sizes s;
    int rc;
    if ((rc = field(path, h, 2, "max_seq_len", &s.block_size)) || (rc = field(path, h, 3, "vocab_size", &s.vocab_size)) ||
        (rc = field(path, h, 4, "num_layers", &s.n_layer)) || (rc = field(path, h, 5, "num_heads", &s.n_head)) ||
        (rc = field(path, h, 6, "channels", &s.n_embd)) || (rc = field(path, h, 7, "padded_vocab_size", &s.padded_vocab)))
        return rc;
    if (s.padded_vocab < s.vocab_size)
        return DT_ERR(DT_ERR_IO, "%s: padded_vocab_size %d is below vocab_size %d", path, s.padded_vocab, s.vocab_size);
    if (s.n_embd % s.n_head)
        return DT_ERR(DT_ERR_IO, "%s: channels %d is not a multiple of num_heads %d", path, s.n_embd, s.n_head);
    if (s.n_layer > 4096) return DT_ERR(DT_ERR_IO, "%s: num_layers %d (at most 4096)", path, s.n_layer);
    const dt_dtype dtype = version == 3 ? DT_F32 : DT_BF16;
    const int n = dtw_llmc_count(s.n_layer);
    dt_st_info *ts = calloc((size_t)n, sizeof *ts);
    char(*names)[DT_SLICE_NAME_MAX] = calloc((size_t)n, sizeof *names);
    uint64_t *off = calloc((size_t)n, sizeof *off), *stored = calloc((size_t)n, sizeof *stored), end = 0;
    rc = ts && names && off && stored ? DT_OK : DT_ERR(DT_ERR_NOMEM, "%s: out of memory", path);
    if (!rc) dtw_llmc_layout(&s, dtype, ts, names, off, stored, &end);
    char meta[160];
    snprintf(meta, sizeof meta, "{\"format\": \"llm.c\", \"llmc_version\": \"%d\", \"n_head\": \"%d\"}", version,
             s.n_head);
    if (!rc) rc = dtst_open_view(path, ts, off, n, meta, out);
    if (!rc && (*out)->file_size != end) {
        rc = DT_ERR(DT_ERR_IO, "%s: %llu bytes, but its header (%d layers of %d channels, %d positions, vocabulary %d "
                    "padded to %d, %s) gives %llu", path, (unsigned long long)(*out)->file_size, s.n_layer, s.n_embd,
                    s.block_size, s.vocab_size, s.padded_vocab, version == 3 ? "float32" : "bfloat16",
                    (unsigned long long)end);
        dt_st_close(*out);
        *out = NULL;
    }
    free(ts);
    free(names);
    free(off);
    free(stored);
    return rc;
}

/* ---- writing ------------------------------------------------------------------------ */

static int sizes_of(const dt_model_config *c, dtw_llmc_sizes *s) {
    if (!c || c->n_layer < 1 || c->n_head < 1 || c->n_embd < 1 || c->block_size < 1 || c->vocab_size < 1 ||
        c->n_layer > 4096 || c->n_embd > LLMC_MAX_SIZE || c->block_size > LLMC_MAX_SIZE ||
        c->vocab_size > LLMC_MAX_SIZE - 127)
        return DT_ERR(DT_ERR_INVALID, "model %s is not a gpt model llm.c's format holds", c && c->name ? c->name : "?");
    *s = (dtw_llmc_sizes){c->block_size, c->vocab_size, c->n_layer, c->n_head, c->n_embd, (c->vocab_size + 127) / 128 * 128};
    return DT_OK;
}

int dt_weights_llmc_header(const dt_model_config *cfg, int bf16, unsigned char header[DT_WEIGHTS_LLMC_HEADER_BYTES],
                           uint64_t *file_bytes) {
    if (!header || !file_bytes) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    dtw_llmc_sizes s;
    int rc = sizes_of(cfg, &s);
    if (rc) return rc;
    memset(header, 0, DT_WEIGHTS_LLMC_HEADER_BYTES);
    const int32_t h[8] = {LLMC_MAGIC, bf16 ? 5 : 3, s.block_size, s.vocab_size, s.n_layer, s.n_head, s.n_embd,
                          s.padded_vocab};
    for (int i = 0; i < 8; i++) dtio_put_u32(header + 4 * i, (uint32_t)h[i]);
    const uint64_t es = bf16 ? 2 : 4, C = (uint64_t)s.n_embd, L = (uint64_t)s.n_layer;
    *file_bytes = LLMC_HEADER_BYTES + es * ((uint64_t)s.padded_vocab * C + (uint64_t)s.block_size * C + 2 * C +
                                           L * (12 * C * C + 13 * C));
    return DT_OK;
}

int dt_weights_llmc_place(const dt_model_config *cfg, int bf16, const dt_param_slice *sl, uint64_t *offset,
                          uint64_t *stored) {
    if (!sl || !offset || !stored) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    dtw_llmc_sizes s;
    int rc = sizes_of(cfg, &s);
    if (rc) return rc;
    const int n = dtw_llmc_count(s.n_layer);
    dt_st_info *ts = calloc((size_t)n, sizeof *ts);
    char(*names)[DT_SLICE_NAME_MAX] = calloc((size_t)n, sizeof *names);
    uint64_t *off = calloc((size_t)n, sizeof *off), *st = calloc((size_t)n, sizeof *st), end;
    rc = ts && names && off && st ? DT_OK : DT_ERR(DT_ERR_NOMEM, "out of memory");
    int found = -1;
    if (!rc) {
        dtw_llmc_layout(&s, bf16 ? DT_BF16 : DT_F32, ts, names, off, st, &end);
        for (int i = 0; i < n && found < 0; i++)
            if (strcmp(names[i], sl->name) == 0) found = i;
    }
    if (!rc && found < 0)
        rc = DT_ERR(DT_ERR_INVALID, "slice %s is not one of a %d-layer gpt model's", sl->name, s.n_layer);
    uint64_t elems = 1;
    for (int d = 0; !rc && d < ts[found].ndim; d++) elems *= (uint64_t)ts[found].shape[d];
    if (!rc && elems != sl->count)
        rc = DT_ERR(DT_ERR_INVALID, "slice %s has %zu elements, the gpt config's %s %llu", sl->name, sl->count,
                    sl->name, (unsigned long long)elems);
    if (!rc) {
        *offset = off[found];
        *stored = st[found];
    }
    free(ts);
    free(names);
    free(off);
    free(st);
    return rc;
}
