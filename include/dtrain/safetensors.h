/* dtrain/safetensors.h - reading and writing .safetensors files.
 *
 * Format (https://github.com/huggingface/safetensors):
 *   8 bytes   N, unsigned little-endian: length of the header
 *   N bytes   UTF-8 JSON object: tensor name -> {"dtype": "F32", "shape": [2, 3],
 *             "data_offsets": [begin, end]} with offsets in bytes relative to the
 *             start of the data section, plus an optional "__metadata__" object
 *             mapping strings to strings. Must start with '{'; may be padded
 *             with trailing spaces (the writer pads N to a multiple of 8).
 *   rest      the data section: raw little-endian tensor data, row-major.
 * Supported dtypes: F32 F64 F16 BF16 I8 U8 I32 I64 (dt_dtype's eight). Other
 * names of the specification (BOOL, U16, I16, U32, U64, F8_*) are refused with
 * DT_ERR_UNSUPPORTED; anything else is a malformed file.
 *
 * A scalar has shape [] (one element); a dimension may be 0 (an empty tensor,
 * data_offsets [x, x]).
 *
 * The reader is strict: the JSON syntax (RFC 8259, valid UTF-8, no duplicate
 * keys, no NUL in names, nesting at most 64 deep, integers up to 2^63-1; a
 * syntax error is reported with its line, column and byte), every field, the dtype names, element count x dtype size == byte
 * length, and the offsets are checked: sorted by offset, the tensors must tile
 * the data section exactly (contiguous, no overlap, no gap) and the data
 * section must end exactly at the end of the file. The header length must be
 * at most DT_ST_MAX_HEADER bytes and fit in the file. Every error message
 * starts with the file name (or "<memory>") and says what is wrong; malformed
 * or truncated files return DT_ERR_IO.
 *
 * Tensors are numbered in the order of their data in the file (which is the
 * writer's order); dt_st_find looks a name up in O(log n).
 *
 * This build requires a little-endian host (the data is copied unchanged);
 * on a big-endian host every function returns DT_ERR_UNSUPPORTED. */
#ifndef DTRAIN_SAFETENSORS_H
#define DTRAIN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "dtrain/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DT_ST_MAX_DIMS 16                 /* more dimensions: DT_ERR_UNSUPPORTED */
#define DT_ST_MAX_HEADER 100000000ull     /* same limit as the reference implementation */

/* One tensor. For the writer: name (non-empty UTF-8, not "__metadata__"),
 * dtype, ndim (0..DT_ST_MAX_DIMS) and shape[0..ndim) (each >= 0); data is
 * used by dt_st_save only (may be NULL for an empty tensor). For the reader,
 * dt_st_tensor_info fills name (owned by the file, valid until dt_st_close),
 * dtype, ndim, shape; data is set to NULL. */
typedef struct dt_st_info {
    const char *name;
    dt_dtype dtype;
    int ndim;
    int64_t shape[DT_ST_MAX_DIMS];
    const void *data;
} dt_st_info;

/* Byte length of a tensor (elements x dtype size); 0 with DT_ERR_INVALID
 * recorded if the description is invalid or the size overflows. */
uint64_t dt_st_nbytes(const dt_st_info *info);

/* ---- writing -------------------------------------------------------------
 * Streaming writer. dt_st_writer_open validates the descriptions, computes the
 * offsets (tensors laid out in the given order, no padding between them),
 * creates "<path>.tmp.<pid>" and writes the 8-byte length and the header
 * (padded with spaces to a multiple of 8). metadata_json is NULL or a JSON
 * object text of string -> string pairs, stored as "__metadata__". The data
 * section may hold at most 2^63-1 bytes (offsets are JSON integers).
 *
 * dt_st_writer_write(w, i, data) writes tensor i's dt_st_nbytes bytes at its
 * offset (pwrite): tensors may be written in ANY order, each exactly once
 * (writing one twice is DT_ERR_INVALID). Only one tensor's data needs to be in
 * memory at a time (gather a layer, write it, free it).
 *
 * dt_st_writer_close checks that every tensor was written, fsyncs the file,
 * renames it to path and fsyncs the directory: a crash never leaves a partial
 * file under the final name. On any failure it removes the temporary file.
 * dt_st_writer_abort removes the temporary file. Both free w (NULL is a
 * no-op). After a failed dt_st_writer_write the writer must still be closed
 * or aborted (close then fails and removes the file). */
typedef struct dt_st_writer dt_st_writer;

/* The target: path may be missing or a regular file, or a symbolic link to a
 * regular file (which is then replaced, the link kept). A directory, device,
 * FIFO or socket (/dev/null, /dev/stdout on a terminal or pipe) is refused
 * with DT_ERR_INVALID by dt_st_writer_open and dt_st_writer_check: the file is
 * renamed into place, which must never replace a special file.
 * dt_st_writer_check(path) checks that now, without writing the model: the
 * target's kind, and that a file can be created beside it (DT_ERR_IO naming
 * the path and the reason otherwise); for callers that want to fail before
 * hours of work rather than after. */
int dt_st_writer_check(const char *path);

int dt_st_writer_open(const char *path, const dt_st_info *tensors, int n, const char *metadata_json,
                      dt_st_writer **out);
int dt_st_writer_write(dt_st_writer *w, int i, const void *data);
int dt_st_writer_close(dt_st_writer *w);
void dt_st_writer_abort(dt_st_writer *w);

/* One shot: open, write every tensors[i].data, close. */
int dt_st_save(const char *path, const dt_st_info *tensors, int n, const char *metadata_json);

/* ---- reading ------------------------------------------------------------- */
typedef struct dt_st_file dt_st_file;

/* Opens path, reads and validates the header. Data is read on demand. */
int dt_st_open(const char *path, dt_st_file **out);
/* A checkpoint sharded over several files (Hugging Face's
 * "model.safetensors.index.json", written by transformers' save_pretrained
 * beyond max_shard_size): path is the index, a JSON object whose
 * "weight_map" maps each tensor name to its shard, a plain file name in the
 * index's folder ("metadata", e.g. total_size, is not read; other keys are
 * ignored). Every shard is opened and checked as dt_st_open checks a file,
 * then the index and the shards must agree both ways: each listed tensor is
 * in the shard named, and each tensor of each shard is listed under that
 * shard (so no name is in two shards). The result reads like one file: its
 * tensors numbered shard by shard (shards in name order), each in the order
 * of its data; dt_st_tensor_info's offset is within the tensor's shard; the
 * metadata are the shards' "__metadata__" merged (a key the shards give
 * different values is refused). Errors are DT_ERR_IO and name the index and,
 * where one is at fault, the shard; the shards stay open until dt_st_close. */
int dt_st_open_index(const char *path, dt_st_file **out);
/* Validates a complete file image in memory (fuzzing entry point, or a file
 * the caller mapped). buf is NOT copied: it must outlive the dt_st_file. */
int dt_st_open_memory(const void *buf, size_t len, dt_st_file **out);
/* Header only: buf holds the first len bytes of a file (at least 8 + N) whose
 * total size is file_size. Validates everything dt_st_open does; the result
 * describes the tensors but dt_st_read on it returns DT_ERR_STATE. */
int dt_st_parse_header(const void *buf, size_t len, uint64_t file_size, dt_st_file **out);
void dt_st_close(dt_st_file *f);

int dt_st_num_tensors(const dt_st_file *f);
/* Fills *info for tensor i (0 <= i < dt_st_num_tensors); nbytes/offset may be
 * NULL, offset is the absolute byte offset of the data in the file (in its
 * shard, for dt_st_open_index). */
int dt_st_tensor_info(const dt_st_file *f, int i, dt_st_info *info, uint64_t *nbytes, uint64_t *offset);
/* Index of the tensor called name, or -1 (no error recorded). */
int dt_st_find(const dt_st_file *f, const char *name);
/* Copies tensor i's bytes into dst; dst_bytes must be >= its byte length. */
int dt_st_read(dt_st_file *f, int i, void *dst, size_t dst_bytes);

/* "__metadata__" entries, sorted by key. Strings owned by f. */
int dt_st_num_metadata(const dt_st_file *f);
int dt_st_metadata_at(const dt_st_file *f, int i, const char **key, const char **value);
/* Value for key, or NULL. */
const char *dt_st_metadata_get(const dt_st_file *f, const char *key);

/* Specification dtype names: "F32", "F64", "F16", "BF16", "I8", "U8", "I32",
 * "I64"; "?" if unknown. */
const char *dt_st_dtype_name(dt_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
