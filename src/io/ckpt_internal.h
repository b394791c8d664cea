/* src/io/ckpt_internal.h - internal: what the files of the checkpoint store
 * share (include/dtrain/ckpt.h is the contract). The store is split along its
 * seams:
 *   ckpt_manifest.c  the manifest: validation, JSON in and out, lookups
 *   ckpt_rankfile.c  rank files: names in the directory (and vector names),
 *                    writing one rank's shard, reading and verifying one;
 *                    the tests' fault hook
 *   ckpt_commit.c    saving: prepare the directory, commit (one atomic rename
 *                    of the manifest), remove older generations
 *   ckpt_read.c      loading: a directory's manifest, verification, reading
 *                    ranges at any layout (resharding)
 * Every function returns DT_OK or a negative status with DT_ERR's message,
 * unless said otherwise. */
#ifndef DT_IO_CKPT_INTERNAL_H
#define DT_IO_CKPT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/ckpt.h"
#include "io/ckpt_fault.h"
#include "io/json.h"

#define RF_MAGIC "DTCKPT01"
#define RF_VERSION 1u
#define RF_FIXED 32u                  /* fixed part of a rank file header */
#define RF_MAX_HEADER (64u << 20)
#define MAX_VECTOR_LEN (1ull << 60)   /* elements; keeps byte counts far from overflow */
#define MANIFEST "manifest.json"
#define MANIFEST_TMP "manifest.json.tmp"
#define FORMAT_NAME "dtrain-checkpoint"

#define BE_CHECK()                                                                       \
    do {                                                                                 \
        if (!dtio_little_endian())                                                       \
            return DT_ERR(DT_ERR_UNSUPPORTED, "checkpoints need a little-endian host");  \
    } while (0)

/* The body of a public entry point: returns IMPL(dir without trailing
 * slashes, ...) (ck_norm_dir's status if dir is NULL, empty or "/"). */
#define CK_RETURN_IN_DIR(dir, IMPL, ...)                 \
    do {                                                 \
        char *ck_dir_;                                   \
        int ck_rc_ = ck_norm_dir((dir), &ck_dir_);       \
        if (!ck_rc_) ck_rc_ = IMPL(ck_dir_, __VA_ARGS__); \
        free(ck_dir_);                                   \
        return ck_rc_;                                   \
    } while (0)

/* ---- the manifest (ckpt_manifest.c) ------------------------------------------ */
/* What a manifest made by the store owns besides the public fields. */
typedef struct ck_priv {
    json_t *doc;               /* the parsed manifest; strings point into it */
    dt_ckpt_vector *vectors;
    dt_ckpt_rank_file *ranks;
    dt_ckpt_range *ranges;
    dt_ckpt_kv *meta;
    unsigned char *verified;   /* per rank entry */
    char *dir_arg;             /* directory given to load (NULL after parse) */
    char *dir_resolved;        /* the one actually read (DIR or DIR.old) */
    char *cache_dir;           /* directory `verified` refers to */
} ck_priv;

typedef struct ck_holder { dt_ckpt_manifest m; ck_priv p; } ck_holder;

/* Validates a manifest's contents (not the files). st: status for problems
 * (DT_ERR_IO for a file read from disk, DT_ERR_INVALID for a caller-built one). */
int ck_validate(const char *fname, const dt_ckpt_manifest *m, int st);
/* Parses and validates manifest text; fname names it in messages. */
int ck_parse_manifest(const char *fname, const char *json, size_t len, ck_holder **out);
/* m (validated) as manifest.json text, malloc'd, *len its length (if len);
 * NULL when out of memory. */
char *ck_to_json(const dt_ckpt_manifest *m, size_t *len);

/* ---- rank files (ckpt_rankfile.c) ---------------------------------------------- */
/* A parsed rank file header; names point into buf. */
typedef struct rf_hdr {
    unsigned char *buf;
    uint32_t rank, nranges, hbytes;
    uint64_t dbytes;
    dt_ckpt_range *ranges;
    char **names;
} rf_hdr;

/* The fault hook's verdict for a step (0: proceed). */
int ck_fault(const char *step);
/* 1 if s is a valid vector name: 1..DT_CKPT_MAX_NAME bytes of UTF-8. */
int ck_name_ok(const char *s);
/* rank-RRRRR.gG.bin, or rank-RRRRR.bin for generation 0 (format version 1). */
void ck_rank_name(char *buf, size_t cap, int rank, uint64_t gen);
/* malloc'd dir/ck_rank_name; NULL when out of memory. */
char *ck_rank_path(const char *dir, int rank, uint64_t gen);
/* 1 if name is exactly what ck_rank_name writes for some rank and generation
 * (then *gen is set), else 0. */
int ck_parse_rank_name(const char *name, uint64_t *gen);
/* Removes the rank files this process wrote into dir (dt_ckpt_write_shard)
 * of generations below gen, and forgets them; -1 if a removal failed (those
 * are kept for the next call). */
int ck_written_remove_older(const char *dir, uint64_t gen);
/* dir without trailing slashes, malloc'd in *out. */
int ck_norm_dir(const char *dir, char **out);
/* Header and data bytes of a rank file holding these ranges. */
uint64_t ck_rf_header_bytes(const dt_ckpt_range *r, int n);
uint64_t ck_rf_data_bytes(const dt_ckpt_range *r, int n);
/* Reads and checks the header of the rank file open as fd (fsize bytes). */
int ck_rf_read_header(const char *path, int fd, uint64_t fsize, rf_hdr *h);
void ck_rf_hdr_free(rf_hdr *h);
/* CRC32 of the first size bytes of fd. */
int ck_file_crc(const char *path, int fd, uint64_t size, uint32_t *out);
/* The end of writing a file of the checkpoint (fd open on path, in dir): the
 * fault hook at `step`, fsync, close, fsync of dir. *fd is closed and set to
 * -1 in every case; *crashed tells whether the hook simulated a crash (then
 * the caller leaves its files as a crash would). DT_ERR_IO naming the file. */
int ck_sync_close(const char *dir, const char *path, int *fd, const char *step, int *crashed);
/* Full verification of one rank file against its manifest entry (its CRC32
 * too if check_crc). */
int ck_verify_rank_file(const char *dir, uint64_t gen, const dt_ckpt_rank_file *rf, int check_crc);

#endif
