/* src/train/source.h - internal: the trainer's data sources, one per model
 * family, and how the trainer builds a model of each family.
 *
 * The trainer does not assume a kind of model or data: it asks the model
 * for its io description (dtrain/model.h, dt_model_get_io) and the family's
 * entry here for the model config (from the flags), for batches and for
 * the model sizes its checkpoints record. A family is added with one
 * dt_train_family entry in source.c (and, for a new kind of data, a file
 * implementing dt_source_ops).
 *
 * A source gives the training set as EPOCHS over a global order of samples:
 * a micro-step takes one global micro-batch of batch_size x dp_size samples,
 * of which this data-parallel rank trains its part; the position in the
 * epoch is counted in samples of that global order (what checkpoints store,
 * so that any layout resumes at the same sample). Evaluation samples are
 * numbered 0..eval_count-1 and fetched by index.
 *   fashion-mnist  images [B,784] float32, labels [B]; the distributed
 *                  sampler (dtrain/data.h): a permutation per epoch, ranks
 *                  take strided parts, the tail padded (or dropped);
 *                  evaluation: the test set.
 *   text           byte windows x/y [B,T] int32 (dtrain/text.h): sample g
 *                  of the run is window perm_e(g mod W) of epoch e = g / W
 *                  (W windows, or --train-limit of them per epoch); a
 *                  global micro-batch is cut into dp_size contiguous parts
 *                  (dt_text_rank_first); an epoch has floor(W / (B x N))
 *                  micro-batches (the tail is not trained: no partial step);
 *                  evaluation: --test-limit validation windows spread evenly
 *                  over the split (default: every non-overlapping window). */
#ifndef DT_TRAIN_SOURCE_H
#define DT_TRAIN_SOURCE_H

#include <stdint.h>
#include "dtrain/model.h"
#include "dtrain/train.h"

typedef struct dt_source dt_source;

typedef struct dt_source_args {
    const dt_train_options *o;   /* data path, seed, shuffle, drop_last, limits, batch size */
    dt_model_io io;              /* what the model takes */
    int seq_len;                 /* sequence models: the windows' length T (the T of
                                    dt_model_forward, <= io.max_seq); else 1 */
    int dp_rank, dp_size;        /* this rank's part of every global micro-batch */
} dt_source_args;

typedef struct dt_source_ops {
    const char *name;            /* "fashion-mnist", "text" */
    const char *default_path;    /* used when --data is not given */
    /* A failure because the data does not fit the flags (an empty corpus, a
     * block size larger than a split) is marked with dt_trainer_mark_input:
     * dtrain-train exits 2 for it. */
    int (*open)(const dt_source_args *a, dt_source **out);
    void (*close)(dt_source *s);
    /* training samples (an epoch's global order) and evaluation samples */
    int64_t (*train_count)(const dt_source *s);
    int64_t (*eval_count)(const dt_source *s);
    /* start epoch `epoch` at sample `start` of its global order */
    int (*begin_epoch)(dt_source *s, uint64_t epoch, int64_t start);
    /* micro-batches this rank has left in the epoch (the same on every rank) */
    int64_t (*batches_left)(const dt_source *s);
    /* the next micro-batch into x / y; *B its size (<= batch_size).
     * Returns 1, 0 at the end of the epoch, or a negative status. */
    int (*next)(dt_source *s, void *x, int32_t *y, int *B);
    /* samples of the current epoch's global order consumed so far */
    int64_t (*position)(const dt_source *s);
    /* evaluation samples idx[0..B) into x / y */
    int (*eval_batch)(dt_source *s, const int64_t *idx, int B, void *x, int32_t *y);
} dt_source_ops;

struct dt_source {
    const dt_source_ops *ops;
    void *impl;
};

/* The trainer's side of a model family. */
typedef struct dt_train_family {
    const char *family;          /* dt_model_io.family */
    const dt_source_ops *source; /* the data it trains on */
    /* the model config from the flags (cfg from dt_model_config_default) */
    int (*configure)(dt_model_config *cfg, const dt_train_options *o);
    /* weight decay on the tensors of at least this many dimensions (1: every
     * tensor, PyTorch's single parameter group; 2: nanoGPT's matrices only) */
    int decay_min_ndim;
    /* evaluation batch (0: the training batch size) */
    int eval_batch;
    /* the model sizes a checkpoint's manifest records and a resume checks,
     * as (key, value) pairs from the model's config and the flags; returns
     * the count (<= DT_TRAIN_META_MAX) */
    int (*meta)(const dt_model_config *cfg, const dt_train_options *o, char keys[][16], char vals[][24]);
} dt_train_family;

#define DT_TRAIN_META_MAX 8

/* The entry of model name `name` (the trainer's --model value), or NULL with
 * DT_ERR_INVALID recorded. */
const dt_train_family *dt_train_family_of(const char *model_name);
/* The model name to give dt_model_config_default for the options (--preset). */
const char *dt_train_model_name(const dt_train_options *o);

extern const dt_source_ops dt_source_fashion_mnist, dt_source_text;

#endif
