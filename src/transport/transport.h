/* src/transport/transport.h - internal: the communicator object and the
 * backend vtable. A backend implements the data movement for one transport
 * (void = standalone size-1, mpi; nccl later) on arguments the collective layer
 * has already validated: counts fit, buffers non-NULL, roots/peers are GROUP
 * ranks, in-place requests follow coll.h's conventions. */
#ifndef DT_TRANSPORT_H
#define DT_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include "dtrain/comm.h"
#include "dtrain/dtype.h"

/* ---- collective fingerprints (reliability.h) -------------------------------
 * The wire header every checked call exchanges before (or together with) its
 * data. 64 bytes, so data placed right behind it keeps 64-byte alignment.
 * `fp` hashes everything that must agree across the group (seq, kind, dtype,
 * count, root, op, list signature, communicator key); the other fields are the
 * sender's view, kept for the error message. */
typedef struct dt_fp_hdr {
    uint64_t fp;
    uint64_t seq;        /* per-communicator sequence number (1-based); p2p: per peer */
    uint64_t count;      /* elements (lists: total over the tensors) */
    uint64_t gkey;       /* hash of the communicator's rank_list key and group */
    int32_t root;        /* world rank of the root / peer, -1 if none */
    uint32_t cid;        /* communicator creation index (0 = world) */
    uint32_t world_rank; /* sender */
    uint32_t flags;      /* DT_FP_* */
    uint32_t data_bytes; /* bytes of data following the header in this message */
    uint16_t kind;       /* dt_coll_kind */
    uint8_t dtype, op;   /* 0xff: none / mixed */
    uint32_t nlist;      /* tensors in a list collective */
    uint32_t layout;     /* lists: 32-bit hash of the tensors' dtypes and counts */
} dt_fp_hdr;
#define DT_FP_MISMATCH 1u
#define DT_FP_NONE 0xffu

/* One piece of a fused allreduce: `count` elements read from `in`, the
 * result written to `out` (in == out: in place). */
typedef struct dt_span {
    const void *in;
    void *out;
    size_t count;
} dt_span;

/* Returned (positive) by optional backend ops that do not handle a call:
 * the caller takes its generic path instead. Never seen by users. */
#define DT_DECLINED 1

typedef struct dt_backend_ops {
    const char *name;
    int (*allreduce)(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op);
    int (*allgather)(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt);
    /* count = elements each rank receives (input holds size*count) */
    int (*reduce_scatter)(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op);
    int (*reduce)(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op, int root);
    int (*broadcast)(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, int root);
    int (*gather)(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, int root);
    int (*scatter)(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, int root);
    int (*all_to_all)(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt);
    int (*send)(dt_comm *c, const void *buf, size_t count, dt_dtype dt, int peer);
    int (*recv)(dt_comm *c, void *buf, size_t count, dt_dtype dt, int peer);
    int (*barrier)(dt_comm *c);
    /* Optional (NULL: not offered): allreduce of the virtual concatenation of
     * spans[0..n) (total elements, all of dtype dt) with the results written
     * through the spans' out pointers, without packing the spans first.
     * Returns DT_DECLINED when this call is not one it handles. */
    int (*allreduce_spans)(dt_comm *c, const dt_span *spans, int n, size_t total, dt_dtype dt, dt_op op);
    /* Optional: memory every member can load directly (dt_comm_alloc_shared),
     * zeroed. Collective. DT_DECLINED when the backend has none for c (the
     * same answer on every member). */
    int (*alloc_shared)(dt_comm *c, size_t bytes, void **ptr);
    /* Optional: release alloc_shared's ptr; DT_DECLINED if it is not one. */
    int (*free_shared)(dt_comm *c, void *ptr);
    /* ---- fingerprint checks (NULL in backends whose groups have one rank) ----
     * check: every rank of c's "check group" (the ranks of c; communicators with
     * the same members share one) passes its header; on return DT_FP_MISMATCH
     * is set in hdr->flags on EVERY rank if any two headers differ. The
     * exchange also synchronises like a barrier. */
    int (*check)(dt_comm *c, dt_fp_hdr *hdr);
    /* allreduce and check in one exchange, for calls accepted by
     * dt_fp_inline_ok (small, natively reducible). On a mismatch recv is left
     * untouched. */
    int (*allreduce_checked)(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt,
                             dt_op op, dt_fp_hdr *hdr);
    /* After a mismatch seen by every rank: all ranks' headers, in rank order
     * (all[size]). */
    int (*gather_views)(dt_comm *c, const dt_fp_hdr *mine, dt_fp_hdr *all);
    /* Point to point: swap headers with group rank `peer`. */
    int (*p2p_check)(dt_comm *c, int peer, const dt_fp_hdr *mine, dt_fp_hdr *theirs);
    /* Collective over the world communicator `world`: build the communicator of
     * this rank's group (color >= 0, members sorted by world rank) into `out`
     * (info and world_ranks filled by the caller except local_rank/local_size,
     * which the backend sets). Only called with color >= 0 and size > 1.
     * `same_members` is an existing communicator with exactly out's members
     * (identical on every member), or NULL: out then shares its check group. */
    int (*split)(dt_comm *world, int color, dt_comm *out, dt_comm *same_members);
    /* Largest element count one call can move per rank block. */
    size_t max_count;
    void (*destroy)(dt_comm *c);
} dt_backend_ops;

struct dt_comm {
    unsigned magic;             /* DT_COMM_MAGIC while alive */
    const dt_backend_ops *ops;
    dt_comm_info info;
    int *world_ranks;           /* [size] world rank of each member, ascending */
    void *impl;                 /* backend state (e.g. the MPI_Comm) */
    char *key;                  /* canonical rank_list (pool entries), NULL for world */
    struct dt_comm *next;       /* pool list */
    /* reliability: fingerprints and the watchdog */
    uint32_t cid;               /* creation index: 0 world, then 1, 2, ... (same on every rank) */
    uint64_t gkey;              /* hash of key and group_id: the "group" of a fingerprint */
    uint64_t seq;               /* collectives executed on this communicator */
    uint64_t *p2p_seq;          /* [2*size]: sends to / receives from each group rank */
    void **plain_shared;        /* dt_comm_alloc_shared memory the backend declined: plain */
    int n_plain_shared, cap_plain_shared;
};

#define DT_COMM_MAGIC 0xd7c0330du

extern const dt_backend_ops dt_backend_void;
extern const dt_backend_ops dt_backend_mpi;

/* shared_mem.c: free the plain dt_comm_alloc_shared memory left on c (destroy). */
void dt_comm_shared_release(dt_comm *c);

/* Build a standalone (size 1, void backend) communicator for this process. */
int dt_comm_make_standalone(int world_rank, int world_size, int group_id, int group_size,
                            dt_comm **out);
void dt_comm_destroy(dt_comm *c);
/* DT_OK if comm is usable (runtime initialised, comm non-NULL and alive). */
int dt_comm_check(const dt_comm *comm, const char *func);

/* MPI backend entry points used by the runtime. */
int dt_mpi_world_create(dt_comm **out, int *we_initialized);
int dt_mpi_finalize(int we_initialized);
/* Thread level MPI granted (MPI_THREAD_* value), -1 when MPI is not in use. */
int dt_mpi_thread_level(void);
/* Collective over c's members (all take the same branch): share `same`'s
 * shared-memory window (shm_mpi.c), or create one when every member is on
 * this host, the group has more than one rank and the feature is on. */
int dt_mpi_shm_attach(dt_comm *c, const dt_comm *same);
/* Max-combine `n` uint64 words over the world (used to compare rank_lists). */
int dt_mpi_world_max_u64(dt_comm *world, unsigned long long *vals, int n);

/* Pool, called by the runtime at finalize. */
void dt_pool_clear(void);

/* ---- reliability settings (runtime.c) ---- */
/* 1 if collectives are fingerprint-checked (DTRAIN_CHECK_COLLECTIVES, agreed
 * over the world at dt_init). */
int dt_rel_check_on(void);
/* Largest allreduce (bytes) whose check travels with the data. */
size_t dt_rel_inline_max(void);
/* Benchmarks and tests only: switch the check / set the inline limit at run
 * time. Every rank must make the same call at the same point (between
 * collectives), or checked and unchecked calls will meet and hang. */
void dt_rel_set_for_testing(int check, size_t inline_max);
/* Shared-memory allreduce (DTRAIN_SHM_ALLREDUCE, DTRAIN_SHM_MIN_BYTES,
 * DTRAIN_SHM_CHUNK_BYTES, agreed over the world at dt_init): on/off, the
 * smallest call (bytes) it takes, the bytes of each per-rank buffer (larger
 * calls run in chunks of it). */
int dt_rel_shm_on(void);
size_t dt_rel_shm_min(void);
size_t dt_rel_shm_chunk(void);
/* DTRAIN_SHM_STREAM_BYTES (this rank's own, not agreed: results do not depend
 * on it): out-of-place shared-memory allreduces of at least this many bytes
 * write their outputs with streaming stores. */
size_t dt_rel_shm_stream(void);
/* MPI: agree on the settings over the world (max of `check`, min of
 * `inline_max`, min of `shm_on`, max of `shm_min` and of `shm_chunk`);
 * collective. */
int dt_mpi_agree_settings(dt_comm *world, int *check, size_t *inline_max, int *shm_on, size_t *shm_min,
                          size_t *shm_chunk);
/* 64-bit FNV-1a of a string, continuing from h (start: DT_FNV_BASIS). */
#define DT_FNV_BASIS 1469598103934665603ull
uint64_t dt_fnv1a(uint64_t h, const void *data, size_t n);
/* Set cid / gkey of a new communicator and register its name and members for
 * messages (stall reports, mismatches). */
void dt_comm_set_identity(dt_comm *c, uint32_t cid);

#endif
