/* src/io/safetensors_internal.h - internal: the reader's state
 * (dtrain/safetensors.h), shared by safetensors.c (one file) and
 * safetensors_index.c (a checkpoint sharded over several files, read through
 * one dt_st_file whose tensors live in its shards) and safetensors_view.c
 * (tensors at given offsets of a file of another format). */
#ifndef DT_IO_SAFETENSORS_INTERNAL_H
#define DT_IO_SAFETENSORS_INTERNAL_H

#include <jansson.h>
#include "dtrain/safetensors.h"

typedef struct st_tensor {
    const char *name;    /* points into the JSON document (of the shard that holds it) */
    dt_dtype dtype;
    int ndim;
    int64_t shape[DT_ST_MAX_DIMS];
    uint64_t begin, end; /* relative to the data section */
    size_t doc_order;
    int shard, src;      /* a sharded file's: the shard holding it, its index there (-1: this file's own) */
} st_tensor;

typedef struct st_meta { const char *key, *value; } st_meta;

struct dt_st_file {
    char *fname;
    int fd;                   /* -1 unless opened from a path */
    const unsigned char *mem; /* whole image for dt_st_open_memory */
    int has_data;
    uint64_t data_start;      /* 8 + N */
    uint64_t file_size;
    int n;
    st_tensor *t;             /* sorted by data offset (sharded: by shard, then offset) */
    int *by_name;             /* tensor indexes sorted by name */
    int nmeta;
    st_meta *meta;            /* sorted by key */
    json_t *doc;              /* the header; names and metadata point into it */
    int nshard;               /* dt_st_open_index: the shards, opened with dt_st_open */
    dt_st_file **shard;
};

/* A dt_st_file over a file of another format (nn/weights_llmc.c: llm.c's
 * model files): n tensors, ts[i]'s name, dtype, ndim and shape (data
 * unused), whose bytes lie at absolute offsets off[i] of path, in increasing
 * order without overlap, each inside the file (else DT_ERR_IO: truncated);
 * meta_json NULL or a JSON object of strings, the view's "__metadata__". The
 * names and strings are copied. Bytes between or after the tensors are not
 * read. DT_ERR_INVALID for a bad description (naming the tensor). */
int dtst_open_view(const char *path, const dt_st_info *ts, const uint64_t *off, int n, const char *meta_json,
                   dt_st_file **out);
/* path opened read-only as a file with no tensors yet (fd, file_size):
 * DT_ERR_IO naming it when it cannot be opened or is not a regular file. */
int dtst_open_file(const char *path, dt_st_file **out);
/* Element count x dtype size of a tensor, with overflow checks: 0 and *out,
 * or -1 for an unknown dtype, ndim outside [0, DT_ST_MAX_DIMS], a negative
 * dimension or an overflow. */
int dtst_tensor_bytes(dt_dtype dtype, int ndim, const int64_t *shape, uint64_t *out);
/* md, a JSON object of strings owned by f (f->doc), as f's metadata, sorted;
 * `status` (naming f) when md is not an object or a value not a string. */
int dtst_take_meta(dt_st_file *f, const json_t *md, int status);
/* A file with no tensors, named fname (copied); NULL when out of memory. */
dt_st_file *dtst_new_file(const char *fname);
/* Sorts f->by_name (filled with 0..n-1 here) by tensor name, and f->meta by key. */
void dtst_sort_names(dt_st_file *f);
void dtst_sort_meta(dt_st_file *f);

#endif
