/* dtrain/ckpt.h - sharded training-state checkpoints (model-agnostic).
 *
 * A checkpoint is a DIRECTORY:
 *   DIR/manifest.json        format version, generation, step, epoch, position in
 *                            the epoch, RNG state, world size, ZeRO level,
 *                            parameter/buffer counts, the named state vectors
 *                            (e.g. "params", "exp_avg", "exp_avg_sq",
 *                            "momentum_buffer", "buffers") with their total
 *                            lengths, one entry per rank file (the ranges it
 *                            holds, its byte size and CRC32) and free-form string
 *                            metadata (model name, optimizer, dist config JSON...)
 *                            for the caller's compatibility checks.
 *   DIR/rank-00000.gG.bin    one file per writing rank of generation G: a header
 *   DIR/rank-00001.gG.bin    (magic "DTCKPT01", version, rank, the ranges)
 *   ...                      followed by the raw little-endian f32 data of its
 *                            ranges, in order.
 *
 * A rank file holds any list of ranges [offset, offset + count) of any state
 * vectors (a ZeRO rank its partition of each vector; with replicated state
 * rank 0 alone may hold everything; ranges of different ranks may overlap).
 * dt_ckpt_read_range reads ANY global range of a vector by stitching the
 * pieces from whichever rank files hold it, so a checkpoint written at one
 * world size / ZeRO level can be loaded at another.
 *
 * The directory is never renamed, moved or replaced, and dtrain removes only
 * the files a manifest of the directory lists (the checkpoint a save
 * replaces) or that this process wrote: never a file found by its name, since
 * a user's file may be named like a rank file (rank-00000.g99.bin). Every
 * save is a new GENERATION (1, 2, ...) whose rank files have new names beside
 * the previous checkpoint's:
 *   1. rank 0: dt_ckpt_prepare(DIR, &G) checks that DIR may hold checkpoints
 *      (it is created, mode 0700, if missing; an existing DIR must be a
 *      directory that is empty, holds a dtrain checkpoint (manifest.json of
 *      ours), or only what looks like dtrain's leftovers of an interrupted
 *      save (rank file names, manifest.json.tmp); anything else is refused
 *      with DT_ERR_INVALID and left untouched), that a file
 *      can be created in it, and returns the next generation G (one above any
 *      generation present, rank files that only look like dtrain's
 *      included). The caller gives G to every writing rank.
 *   2. every rank that holds state: dt_ckpt_write_shard(DIR, G, rank, &shard,
 *      NULL) writes DIR/rank-RRRRR.gG.bin and fsyncs it and DIR.
 *   3. barrier (the caller's).
 *   4. rank 0: dt_ckpt_commit(DIR, &manifest) with manifest.generation = G
 *      reads the rank files' headers (or takes the table the caller gathered),
 *      checks that every vector is fully covered, writes
 *      DIR/manifest.json.tmp, fsyncs it, renames it over DIR/manifest.json
 *      (the one atomic step that switches checkpoints), fsyncs DIR, then
 *      removes the files of earlier generations it knows: the rank files the
 *      replaced manifest lists, and those this process wrote into DIR of
 *      generations below G (its interrupted or failed saves, removals that
 *      failed). A failed commit removes this generation's rank files (ranks
 *      0 .. world_size-1 of G) and the temporary manifest; the previous
 *      checkpoint stays.
 * Two processes saving into one DIR take turns: prepare and commit hold an
 * exclusive lock on DIR (flock; none where the file system has no locks), so
 * one's prepare never touches the other's manifest.json.tmp, and a commit of a
 * generation DIR already holds (both prepared it) fails with DT_ERR_STATE,
 * "already holds generation ...", instead of losing its manifest on the way.
 * Crash safety: until the rename, manifest.json names the previous
 * generation's files, which are untouched; after it, the new generation's,
 * which were fsynced before. A crash at any point therefore leaves the last
 * committed checkpoint loadable. Its leftovers: manifest.json.tmp, which the
 * next commit replaces; and rank files no manifest lists any more (of the
 * unfinished generation, or, after a crash between the switch and the
 * removal, of the replaced one), which stay unless the same process saves
 * again: dtrain cannot tell them from a user's files of the same names. Any
 * rank-RRRRR.gK.bin whose K is not manifest.json's generation is not part of
 * the checkpoint and may be deleted by hand.
 *
 * Format versions: 2 (written): "generation" field, rank files
 * rank-RRRRR.gG.bin. 1 (dtrain before generations): no "generation", rank
 * files rank-RRRRR.bin; still read (generation 0), and a save into such a
 * directory replaces it like any older generation. Format 1 writers swapped
 * DIR.tmp / DIR.old by rename; for a crash of theirs, a load of a DIR that is
 * missing or has no manifest.json uses DIR.old/manifest.json if that exists.
 *
 * Loading: dt_ckpt_load_manifest validates the manifest (strict JSON: valid
 * UTF-8, no duplicate keys, nesting at most 64 deep, integers up to 2^63-1;
 * format, version, every field, ranges inside the vectors, byte sizes
 * consistent with the ranges). Rank files are verified lazily: the first dt_ckpt_read_range that
 * needs a rank file checks its size, magic, version, rank, ranges and CRC32
 * (a full read) and caches the success in the manifest object.
 *
 * Errors name the file: missing directory / manifest / rank file, truncated
 * rank file, checksum mismatch, bad magic, manifest JSON syntax (with its
 * line, column and byte): DT_ERR_IO;
 * unsupported format version ("format version 3 not supported (this build
 * reads 1 and 2)"): DT_ERR_UNSUPPORTED; a requested range not covered by the
 * rank files, or rank files that disagree with the manifest: DT_ERR_MISMATCH;
 * bad arguments (range beyond the vector, unknown vector, a DIR that is not a
 * directory or holds someone else's files): DT_ERR_INVALID.
 * DIR may carry trailing slashes ("ckpt/" is "ckpt") and may be ".".
 * This build requires a little-endian host (DT_ERR_UNSUPPORTED otherwise). */
#ifndef DTRAIN_CKPT_H
#define DTRAIN_CKPT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DT_CKPT_FORMAT_VERSION 2      /* written; version 1 is still read */
#define DT_CKPT_FORMAT_VERSION_MIN 1
#define DT_CKPT_MAX_NAME 255            /* bytes in a vector name */
#define DT_CKPT_MAX_MANIFEST (64u << 20) /* bytes in manifest.json */
#define DT_CKPT_MAX_WORLD (1 << 20)

typedef struct dt_ckpt_vector {
    const char *name;   /* non-empty, <= DT_CKPT_MAX_NAME bytes, unique */
    uint64_t length;    /* elements (f32) */
} dt_ckpt_vector;

typedef struct dt_ckpt_kv { const char *key, *value; } dt_ckpt_kv;

typedef struct dt_ckpt_range {
    const char *vector;  /* a state vector's name */
    uint64_t offset;     /* first element, global index in the vector */
    uint64_t count;      /* elements */
    const float *data;   /* dt_ckpt_write_shard: count values; NULL elsewhere */
} dt_ckpt_range;

/* What one rank saves. */
typedef struct dt_ckpt_shard {
    int nranges;
    const dt_ckpt_range *ranges;
} dt_ckpt_shard;

/* One rank file as listed in the manifest (file name rank-%05d.g<generation>.bin;
 * rank-%05d.bin in format version 1). */
typedef struct dt_ckpt_rank_file {
    int rank;
    int nranges;
    const dt_ckpt_range *ranges; /* data unused */
    uint64_t bytes;              /* file size */
    uint32_t crc32;              /* zlib CRC-32 of the whole file */
} dt_ckpt_rank_file;

/* What dt_ckpt_write_shard wrote (gather these to rank 0 if you build the
 * rank table yourself). */
typedef struct dt_ckpt_shard_info {
    uint64_t bytes;
    uint32_t crc32;
} dt_ckpt_shard_info;

/* The manifest. For dt_ckpt_commit the caller fills it (pointers to its own
 * storage; priv_ NULL; generation from dt_ckpt_prepare; format_version
 * ignored, always written as DT_CKPT_FORMAT_VERSION). nranks == 0 asks commit
 * to discover the rank table from DIR/rank-*.gG.bin for ranks
 * 0..world_size-1 (each must exist; their CRC is computed by reading them). nranks > 0 gives the table (ranks,
 * ranges, bytes and crc32 from each rank's dt_ckpt_shard_info; commit checks
 * sizes and headers, not the CRC).
 * Objects from dt_ckpt_load_manifest / dt_ckpt_manifest_parse own all their
 * memory: free them with dt_ckpt_manifest_free; do not modify them. */
typedef struct dt_ckpt_manifest {
    int format_version;       /* 2, or 1 for a checkpoint of an older dtrain */
    uint64_t generation;      /* the save's generation (>= 1); 0 in format version 1 */
    uint64_t step;            /* optimizer steps taken */
    uint64_t epoch;
    uint64_t epoch_position;  /* position inside the epoch, in the caller's unit
                               * (dtrain-train: samples of the epoch's global
                               * order, see its "epoch_position_unit" metadata) */
    uint64_t rng_state[4];    /* written as 16-digit hex strings */
    int world_size;           /* 1..DT_CKPT_MAX_WORLD: ranks at save time */
    int zero_level;           /* 0..3 */
    uint64_t num_params;
    uint64_t num_buffers;     /* generation .. num_buffers: at most 2^63-1 (INT64_MAX),
                               * the largest integer JSON readers take back; a larger
                               * one is refused with DT_ERR_INVALID on writing */
    int nvectors;
    const dt_ckpt_vector *vectors;
    int nranks;
    const dt_ckpt_rank_file *ranks; /* ranks unique, in [0, world_size) */
    int nmeta;
    const dt_ckpt_kv *meta;         /* keys unique */
    void *priv_;                    /* library-owned (cache); NULL in caller-built */
} dt_ckpt_manifest;

/* Rank 0, before any rank writes (and, to fail early, before training):
 * creates DIR (mode 0700) if it is missing, checks that it may hold
 * checkpoints and that a file can be created in it (see above), and stores the
 * generation of the next save in *generation (may be NULL). Refusals:
 * DT_ERR_INVALID ("exists and is not a directory", "directory is not empty
 * and holds no dtrain checkpoint (it contains 'x')", a manifest.json that is
 * not a readable dtrain manifest); DT_ERR_IO (cannot create or write). */
int dt_ckpt_prepare(const char *dir, uint64_t *generation);

/* Writes DIR/rank-RRRRR.gG.bin (G = generation from dt_ckpt_prepare; DIR must
 * exist) and fsyncs it and DIR. A file of the same name (an interrupted save)
 * is replaced. Each range needs count values at data. info may be NULL. */
int dt_ckpt_write_shard(const char *dir, uint64_t generation, int rank, const dt_ckpt_shard *shard,
                        dt_ckpt_shard_info *info);

/* Rank 0, after every rank's dt_ckpt_write_shard returned (caller's barrier):
 * writes the manifest of generation m->generation and switches to it
 * atomically (see above). DT_ERR_STATE if DIR already holds that generation
 * or a later one (another writer saved into DIR meanwhile). */
int dt_ckpt_commit(const char *dir, const dt_ckpt_manifest *m);

/* Reads and validates DIR/manifest.json (or DIR.old/manifest.json of a format
 * version 1 writer's crash, see above). */
int dt_ckpt_load_manifest(const char *dir, dt_ckpt_manifest **out);

/* Parses and validates a manifest from memory (fuzzing entry point). Error
 * messages name the file "<memory>". The result can be used with
 * dt_ckpt_read_range given a directory. */
int dt_ckpt_manifest_parse(const char *json, size_t len, dt_ckpt_manifest **out);

/* Serializes m (caller-built or loaded; validated first) as manifest JSON, in
 * format version 2 (generation >= 1) or 1 (generation 0): *out is malloc'd,
 * NUL-terminated (free() it), *len its length (may be NULL). */
int dt_ckpt_manifest_to_json(const dt_ckpt_manifest *m, char **out, size_t *len);

void dt_ckpt_manifest_free(dt_ckpt_manifest *m);

/* Copies elements [offset, offset + count) of state vector `vector` into dst,
 * from whichever rank files hold them. m must come from dt_ckpt_load_manifest
 * or dt_ckpt_manifest_parse. dir: the checkpoint directory (NULL: the one m
 * was loaded from, including the DIR.old fallback). Rank files used are
 * verified once (size, header, CRC32) and the result cached in m. */
int dt_ckpt_read_range(const char *dir, dt_ckpt_manifest *m, const char *vector, uint64_t offset,
                       uint64_t count, float *dst);

/* Verifies every rank file of m now (same checks, same cache). */
int dt_ckpt_verify(const char *dir, dt_ckpt_manifest *m);

/* Index of the vector called name, or -1. */
int dt_ckpt_vector_index(const dt_ckpt_manifest *m, const char *name);
/* Metadata value for key, or NULL. */
const char *dt_ckpt_meta_get(const dt_ckpt_manifest *m, const char *key);

#ifdef __cplusplus
}
#endif
#endif
