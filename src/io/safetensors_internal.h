/* src/io/safetensors_internal.h - internal: the reader's state
 * (dtrain/safetensors.h), shared by safetensors.c (one file) and
 * safetensors_index.c (a checkpoint sharded over several files, read through
 * one dt_st_file whose tensors live in its shards). */
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

/* A file with no tensors, named fname (copied); NULL when out of memory. */
dt_st_file *dtst_new_file(const char *fname);
/* Sorts f->by_name (filled with 0..n-1 here) by tensor name, and f->meta by key. */
void dtst_sort_names(dt_st_file *f);
void dtst_sort_meta(dt_st_file *f);

#endif
