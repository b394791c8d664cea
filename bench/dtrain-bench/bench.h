/* bench/dtrain-bench/bench.h - internal to dtrain-bench: the collectives it measures,
 * their buffer layouts, data generation/validation and the calls themselves.
 *
 *   bench_data.c  value generator, expected results, fill / check helpers
 *   bench_ops.c   per-op buffer layout, init + verify, dtrain and MPI calls
 *   dtrain_bench.c command line, timing loop, table and JSON output
 */
#ifndef DTRAIN_BENCH_H
#define DTRAIN_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include "dtrain/dtrain.h"

/* ---- operations ----------------------------------------------------------- */
typedef enum bench_op {
    B_ALLREDUCE = 0,
    B_ALLGATHER,
    B_REDUCE_SCATTER,
    B_REDUCE,
    B_BROADCAST,
    B_GATHER,
    B_SCATTER,
    B_ALL_TO_ALL,
    B_SENDRECV,
    B_BARRIER,
    B_NUM_OPS
} bench_op;

typedef struct bench_op_info {
    const char *name;
    int reduces;   /* takes a reduction op (-r) */
    int rooted;    /* takes a root (-R) */
    int blocked;   /* size is split into one block per rank */
    int inplace;   /* has an in-place form in the dtrain contract */
} bench_op_info;

const bench_op_info *bench_op_get(bench_op op);
int bench_op_parse(const char *name, bench_op *out);
/* nccl-tests bus bandwidth factor for n ranks. */
double bench_bus_factor(bench_op op, int nranks);

/* ---- API modes ------------------------------------------------------------- */
typedef enum bench_mode {
    M_SINGLE = 0,  /* one call on one contiguous buffer (per op) */
    M_LIST,        /* allreduce only: one dt_allreduce_list over N tensors */
    M_SEPARATE     /* allreduce only: N dt_allreduce calls, one per tensor */
} bench_mode;

/* ---- value generation -------------------------------------------------------
 * Every value is a small integer, chosen per dtype, op and group size so that
 * any reduction order gives the exact same result (and so that the result is
 * representable exactly in the dtype): results can be compared bitwise. */
typedef enum gen_kind {
    G_MOVE = 0,   /* data movement, min, max: wide range */
    G_SUM,        /* sum; avg on integers (expected = sum / n, truncated) */
    G_AVGF,       /* avg on floating types: per-rank offsets cancel, sum = n*base */
    G_PROD        /* +-1 and +-2 with few 2s: products are exact powers of two */
} gen_kind;

typedef struct bench_gen {
    dt_dtype dtype;
    dt_op op;          /* reduction op, or -1 for data movement */
    gen_kind kind;
    int nranks;
    int has_sign;      /* dtype can hold negative values */
    int64_t m;         /* G_MOVE/G_SUM: values in [-m, m] (or [0, m]) */
    int64_t lim;       /* G_SUM with m == 0: values 0/1 on the first lim ranks */
    int kmax;          /* G_PROD: ranks >= kmax only contribute +-1 */
    uint64_t seed;
} bench_gen;

void bench_gen_init(bench_gen *g, dt_dtype dtype, int op /* dt_op or -1 */, int nranks,
                    uint64_t seed);
/* Value held by rank q at global element index idx. */
int64_t bench_gen_value(const bench_gen *g, int q, uint64_t idx);
/* Expected reduction over all ranks at index idx (g->op must be a dt_op). */
int64_t bench_gen_expected(const bench_gen *g, uint64_t idx);

/* Store value v (exactly representable) as element i of buf. */
void bench_store(dt_dtype dtype, void *buf, size_t i, int64_t v);
/* Fill count elements with a sentinel no generator produces (NaN, INT_MAX...). */
void bench_fill_sentinel(dt_dtype dtype, void *buf, size_t count);
/* Element i of buf as a double (for messages). */
double bench_load(dt_dtype dtype, const void *buf, size_t i);

/* First mismatch found by the check functions since the last reset; the
 * driver prints it (per rank) when a row has wrong elements. */
typedef struct bench_mismatch {
    int have;
    char what[64];         /* which buffer */
    uint64_t index;        /* element index inside that buffer */
    double want, got;
    uint64_t want_bits, got_bits;
} bench_mismatch;
extern bench_mismatch bench_first_bad;
void bench_mismatch_reset(void);

/* buf[i] = value(q, gbase + i). */
void bench_fill(const bench_gen *g, void *buf, size_t count, uint64_t gbase, int q);
/* Number of i with buf[i] != value(q, gbase + i) bitwise. */
size_t bench_check_move(const bench_gen *g, const void *buf, size_t count, uint64_t gbase,
                        int q, const char *what);
/* Number of i with buf[i] != expected(gbase + i) bitwise. */
size_t bench_check_reduce(const bench_gen *g, const void *buf, size_t count,
                          uint64_t gbase, const char *what);

/* ---- one benchmark case (op, dtype, redop, root, size) -------------------- */
typedef struct bench_set {
    unsigned char *send, *recv;      /* contiguous buffers (M_SINGLE; MPI ref of M_LIST) */
    unsigned char **tin, **tout;     /* M_LIST / M_SEPARATE: ntensors separate mallocs */
    dt_tensor *lin, *lout;           /* dt_tensor views for out-of-place */
} bench_set;

typedef struct bench_case {
    bench_op op;
    dt_dtype dtype;
    int redop;          /* dt_op, or -1 for ops that do not reduce */
    int root;           /* world rank, -1 for rootless ops */
    int rank, nranks;
    size_t esize;
    size_t count;       /* element count passed to the call (per rank / per block) */
    size_t send_elems;  /* elements in each contiguous send / recv buffer */
    size_t recv_elems;
    size_t bytes;       /* size S of the row (nccl-tests convention) */
    size_t total_elems; /* bytes / esize: the "count" column */
    bench_mode mode;
    int ntensors;       /* M_LIST / M_SEPARATE: number of tensors */
    size_t tcount;      /* elements per tensor */
    int async;          /* time the *_async forms (submit + wait) */
    int shared_mem;     /* send / recv slabs from dt_comm_alloc_shared */
    int need_slab;      /* M_LIST with --vs-mpi / --vs-single: contiguous slabs for the reference */
    int ref_single;     /* --vs-single: the reference is ONE dt_allreduce on the slabs, not MPI */
    int wire;           /* --wire: dt_wire of allreduce / reduce_scatter (the _ex forms) */
    dt_comm *comm;
} bench_case;

/* Fill in the layout of c for a row of (about) `bytes` bytes. op, dtype,
 * redop, root, rank, nranks, mode, ntensors, async, comm must already be set. */
void bench_case_layout(bench_case *c, size_t bytes);
/* Bytes one buffer set takes. */
size_t bench_set_bytes(const bench_case *c);
/* Allocate / free one buffer set; returns 0 or -1 (out of memory). */
int bench_set_alloc(const bench_case *c, bench_set *s);
void bench_set_free(const bench_case *c, bench_set *s);

/* Write the inputs (and sentinels into outputs) for one call. */
void bench_init(const bench_case *c, const bench_gen *g, bench_set *s, int inplace);
/* Count wrong output elements on this rank (and modified inputs). */
size_t bench_verify(const bench_case *c, const bench_gen *g, const bench_set *s,
                    int inplace);

/* One iteration of the dtrain call (blocking or async per c->async). Returns
 * DT_OK or the failing dt_status; *what names the failing function. */
int bench_call_dtrain(const bench_case *c, bench_set *s, int inplace, const char **what);
/* 1 if a raw-MPI reference exists for this case (and placement). */
int bench_mpi_available(const bench_case *c, int inplace);
/* One iteration of the matching raw MPI call(s) on MPI_COMM_WORLD; MPI_SUCCESS
 * or the MPI error code. */
int bench_call_mpi(const bench_case *c, bench_set *s, int inplace);

/* ---- --device (bench_device.c, CUDA builds) ------------------------------------ */
#ifdef DTRAIN_HAVE_CUDA
/* Before dt_init: the device of this rank (its launcher's local rank modulo
 * the devices). */
void bench_device_select(void);
/* The device-buffer allreduce table; returns the exit status. Collective. */
int bench_device_main(size_t minb, size_t maxb, size_t factor, int iters, int warmup, int rounds, int vs_nccl,
                      int vs_mpi, dt_comm *world);
#endif

#endif
