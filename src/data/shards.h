/* src/data/shards.h - internal: llm.c's token shards (dtrain/text.h, TOKEN
 * SHARDS), read-only mappings of the files behind a dt_text_dataset of
 * tokens. text.c draws windows; this file finds, checks, maps and reads the
 * shards.
 *
 * A shard file (llm.c dev/data/data_common.py, write_datafile, "gpt-2"):
 *   256 little-endian int32: [0] magic 20240520, [1] version 1, [2] the
 *   token count n >= 1, the rest unused; then n little-endian uint16 tokens,
 *   and nothing after them. */
#ifndef DT_DATA_SHARDS_H
#define DT_DATA_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#define DT_SHARD_MAGIC 20240520
#define DT_SHARD_VERSION 1
#define DT_SHARD_HEADER_BYTES 1024
#define DT_SHARD_VOCAB 50257 /* GPT-2's tokens: the format's vocabulary */

typedef struct dt_shard {
    char *path;          /* as found (for messages) */
    const uint16_t *tok; /* the n tokens (inside the mapping) */
    int64_t n;
    int64_t start;       /* index of tok[0] in the dataset's token stream */
    void *map;
    size_t map_len;
    int val;             /* 1: named as a validation shard (*_val_*, *_val.bin) */
} dt_shard;

struct dt_text_shards {
    int n;
    dt_shard *s;         /* in stream order: training shards, then validation shards */
};

/* 1 if `path` names llm.c token shards: a glob pattern (one of * ? [) that is
 * not itself an existing path, a regular file that starts with one of llm.c's
 * magics (GPT-2 shards; llama-3 shards and evaluation files, which
 * dt_shards_open refuses by name), or a directory holding such a "*.bin"
 * file; 0 if not (byte text, or a missing path); DT_ERR_INVALID for NULL. */
int dt_shards_detect(const char *path);

/* Find, check and map the shards of `path` (a file, a directory's "*.bin"
 * files, or a glob pattern's matches), ordered training then validation
 * shards, each group by name; sets *sh (free with dt_shards_free), *ntrain
 * (tokens of the training shards; the total when none is named a validation
 * shard) and *total. Errors name the file: DT_ERR_IO for unreadable,
 * truncated or corrupt shards (magic, version, token count against the
 * file size), DT_ERR_UNSUPPORTED for llm.c's other formats (llama-3 tokens,
 * evaluation files), DT_ERR_INVALID for a pattern or directory without
 * shards, several shards of which some are named neither train nor val
 * while others are val, or validation shards without training shards. */
int dt_shards_open(const char *path, struct dt_text_shards **sh, int64_t *ntrain, int64_t *total);
void dt_shards_free(struct dt_text_shards *sh);

/* Tokens [pos, pos + n) of the stream into dst (int32), checked below vocab:
 * DT_ERR_IO naming the shard and the token's index in it otherwise.
 * DT_ERR_INVALID for a range outside the stream. */
int dt_shards_read(const struct dt_text_shards *sh, int64_t pos, int64_t n, int vocab, int32_t *dst);

#endif
