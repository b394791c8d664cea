/* dtrain/text.h - text datasets for language models (the gpt model family):
 * a corpus of bytes (vocabulary 256: one token per byte), or llm.c's token
 * shards (GPT-2's vocabulary of 50257 tokens; see TOKEN SHARDS).
 *
 * A dataset is a stream of tokens split BY POSITION: the first part is the
 * training split, the rest the validation split. A byte corpus is one file,
 * or every regular file of a directory, read into memory; its last
 * `val_fraction` of the bytes are the validation split.
 *
 * Samples are windows of T + 1 consecutive tokens of one split: the input
 * x = tokens [p, p+T) and the target y = tokens [p+1, p+T+1) (the next token
 * at every position). A split of S tokens has S - T windows (start p in
 * [0, S-T)).
 *
 * RANDOM WINDOWS (training). Samples are numbered by a GLOBAL INDEX g =
 * 0, 1, 2, ... over the whole run, independent of the number of ranks and of
 * the batch layout. Sample g lies in epoch e = g / W (W = windows of the
 * split) at position i = g mod W, and its window starts at perm_e(i), where
 * perm_e is a pseudo-random permutation of [0, W) keyed by (seed, split,
 * e) (a Feistel network with cycle walking: no table, O(1) per sample). So:
 *  - the window of a sample is a pure function of (seed, split, T, g): a
 *    checkpoint stores the number of samples consumed and any world size or
 *    batch layout resumes the same sequence;
 *  - within one epoch no window repeats: the samples of one global batch
 *    (and of a whole epoch) are distinct windows, and ranks that take
 *    distinct indices never see the same window in an epoch.
 * The convention for data parallelism (dt_text_rank_first): a global batch
 * of G samples starting at index g0 is cut into `world` contiguous parts;
 * rank r takes g0 + r*G/world, ... (G/world samples). One rank with G
 * samples thus sees exactly the union of what N ranks see.
 *
 * EVALUATION WINDOWS. dt_text_eval_batch reads non-overlapping windows in
 * order: window k starts at k*T (k < (S-1)/T), covering the split once.
 *
 * TOKEN SHARDS (llm.c's dev/data scripts: tinyshakespeare, fineweb, ...):
 * files of 256 little-endian int32 (magic 20240520, version 1, token count
 * n, the rest unused) followed by exactly n little-endian uint16 tokens of
 * GPT-2's vocabulary (vocab_size 50257). `path` names them as
 *  - one file that starts with the magic (whatever its name; a file
 *    without it is a byte corpus): its last val_fraction of the tokens are
 *    the validation split;
 *  - a directory with a "*.bin" file that starts with the magic: its
 *    "*.bin" files (each must be a shard; other files are ignored);
 *  - a glob pattern (quoted in the shell): the files it matches.
 * Several files are read in llm.c's naming: "*_val_*" / "*_val.bin" are
 * validation shards, "*_train_*" / "*_train.bin" training shards, each
 * group in strcmp order of the paths; the stream is the training shards
 * then the validation shards, so a window never mixes the splits (it may
 * span two shards of one split). Without any validation shard the shards
 * are one stream split by val_fraction, as one file. The files are mapped
 * read-only (ranks on one host share the page cache), never copied.
 * Errors name the file: a bad magic, an unknown version, a header count of
 * tokens that the file size contradicts (truncated, or bytes after the
 * tokens) are DT_ERR_IO; llm.c's llama-3 shards (magic 20240801, uint32
 * tokens) and evaluation files (magic 20240522) DT_ERR_UNSUPPORTED; a token
 * >= 50257 is found when a window containing it is read (DT_ERR_IO naming
 * the shard and the token's index in it).
 *
 * All int functions return DT_OK (or a count) or a negative dt_status with a
 * message for dt_last_error(): DT_ERR_IO (naming the file) for unreadable
 * files, DT_ERR_INVALID for bad arguments, an empty or too short corpus or
 * split, and a block size the split cannot hold. */
#ifndef DTRAIN_TEXT_H
#define DTRAIN_TEXT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The default corpus: the Debian package `fortunes` (about 2.5 MB of English
 * text once the .dat/.u8 index files are skipped). */
#define DT_FORTUNES_DIR "/usr/share/games/fortunes"
/* The default share of the bytes in the validation split. */
#define DT_TEXT_VAL_FRACTION 0.1

typedef enum dt_text_split {
    DT_TEXT_TRAIN = 0, /* bytes [0, train_size) */
    DT_TEXT_VAL = 1    /* bytes [train_size, size) */
} dt_text_split;

/* The vocabulary of llm.c's GPT-2 token shards. */
#define DT_TEXT_GPT2_VOCAB 50257

typedef struct dt_text_dataset {
    uint8_t *data;      /* a byte corpus: the files' bytes, concatenated (owned);
                           NULL for token shards */
    int64_t size;       /* tokens in the stream (bytes of a byte corpus) */
    int64_t train_size; /* the training split's tokens (the rest is validation) */
    int nfiles;         /* files read */
    int vocab_size;     /* every token is below it: 256 (bytes) or 50257 (shards) */
    struct dt_text_shards *shards; /* token shards (mapped files; internal), or NULL */
} dt_text_dataset;

/* Load `path` (NULL: DT_FORTUNES_DIR). Token shards (dt_text_is_tokens)
 * are loaded as TOKEN SHARDS says. Otherwise a byte corpus: a file, or a
 * directory whose regular files (symbolic links followed) are read in strcmp
 * order of their names, skipping names that start with '.' or end in ".dat"
 * or ".u8" (the index files of fortune) and subdirectories. A file whose
 * size stat reports as 0 (/proc and /sys files have bytes all the same) is
 * read to its end. The last floor(size * val_fraction) tokens are the
 * validation split (shards: unless validation shards are named);
 * val_fraction in [0, 1) (0: no validation split). Errors: DT_ERR_IO
 * (missing, unreadable, not a file or directory, a corrupt shard; the
 * message names the path); DT_ERR_INVALID for val_fraction out of range, an
 * empty corpus ("no bytes", also a directory without usable files), or a
 * split of fewer than 2 tokens (one window of T = 1 needs 2);
 * DT_ERR_UNSUPPORTED and the rest as TOKEN SHARDS says; DT_ERR_NOMEM. *out
 * is zeroed on failure. Free with dt_text_free. */
int dt_text_load(const char *path, double val_fraction, dt_text_dataset *out);
/* Free the bytes (unmap the shards) and zero *ds (NULL and a zeroed
 * dataset are fine). */
void dt_text_free(dt_text_dataset *ds);

/* 1 if dt_text_load reads `path` as llm.c token shards (see TOKEN SHARDS: a
 * glob pattern that is not an existing path, a file starting with one of
 * llm.c's magics, a directory with a "*.bin" file that does), 0 for a byte
 * corpus or a missing path; a negative status for a NULL path. Reads at
 * most 4 bytes of each "*.bin" file. */
int dt_text_is_tokens(const char *path);

/* [*offset, *offset + *size) of a split in ds->data (either output may be
 * NULL). DT_ERR_INVALID for a bad split or dataset. */
int dt_text_split_range(const dt_text_dataset *ds, int split, int64_t *offset, int64_t *size);

/* Windows of T tokens (+1 target) in a split: S - T. DT_ERR_INVALID when
 * T < 1 or the split has fewer than T + 1 tokens ("block size T=... needs
 * T+1 tokens"). */
int64_t dt_text_num_windows(const dt_text_dataset *ds, int split, int T);

/* Start (offset inside the split) of the window of global sample g (see
 * RANDOM WINDOWS). Errors as dt_text_num_windows. */
int dt_text_window_start(const dt_text_dataset *ds, int split, int T, uint64_t seed, uint64_t g,
                         int64_t *start);

/* The B samples first, first + 1, ..., first + B - 1 as tokens x [B,T] and
 * targets y [B,T] (int32 token ids, the gpt model's input). B >= 1. On
 * error (a token of a corrupt shard) x and y may be partly written. */
int dt_text_batch(const dt_text_dataset *ds, int split, int T, uint64_t seed, uint64_t first,
                  int B, int32_t *x, int32_t *y);

/* The first global sample index of `rank` in the global batch of
 * global_batch samples that starts at sample batch_first, cut into `world`
 * equal contiguous parts: batch_first + rank * (global_batch / world), into
 * *first. DT_ERR_INVALID unless 0 <= rank < world and global_batch is a
 * positive multiple of world. */
int dt_text_rank_first(uint64_t batch_first, int global_batch, int rank, int world,
                       uint64_t *first);

/* Non-overlapping windows of a split in order (see EVALUATION WINDOWS):
 * the count (S - 1) / T (errors as dt_text_num_windows), and B of them from
 * window `first` (first + B <= count, else DT_ERR_INVALID). */
int64_t dt_text_num_eval_windows(const dt_text_dataset *ds, int split, int T);
int dt_text_eval_batch(const dt_text_dataset *ds, int split, int T, int64_t first, int B,
                       int32_t *x, int32_t *y);

#ifdef __cplusplus
}
#endif
#endif
