/* src/coll/coll_internal.h - internal: a validated collective call. The
 * collective layer sits on the communicator layer (comm/: objects, operation
 * kinds, registry, watchdog) and the transports; nothing below includes it. */
#ifndef DT_COLL_INTERNAL_H
#define DT_COLL_INTERNAL_H

#include "comm/comm_internal.h"
#include "comm/op_kind.h"
#include "dtrain/coll.h"

typedef struct dt_coll_desc {
    dt_coll_kind kind;
    dt_comm *comm;
    const void *send;
    void *recv;
    size_t count;        /* per-op meaning as in the backend vtable */
    dt_dtype dtype;
    dt_op op;
    int root;            /* GROUP rank (root or peer) */
    int wire;            /* dt_wire of allreduce / reduce_scatter (and their lists) */
    const dt_tensor *in; /* lists */
    const dt_tensor *out;
    int n;
    /* lists, summarised by validation for the fingerprint and the fusion */
    int list_dtype;      /* the one dtype of every tensor; -2 mixed; -1 empty */
    size_t list_count;   /* elements per rank (outputs for reduce_scatter) */
    uint64_t list_sig;   /* FNV-1a over the tensors' (count, dtype) */
} dt_coll_desc;

/* Run one validated descriptor (called by the engine): assigns its sequence
 * number, publishes it for the watchdog, and runs it fingerprint-checked when
 * the check is on and the group has more than one rank. */
int dt_coll_execute(const dt_coll_desc *d);
/* The bare transport call of a descriptor (no check). */
int dt_coll_transport(const dt_coll_desc *d);
/* The transport's allreduce / reduce_scatter of c with the wire type (its
 * _wire op when the wire is not native and it has one). */
int dt_coll_allreduce_op(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, dt_op op, int wire);
int dt_coll_reduce_scatter_op(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, dt_op op, int wire);

/* Fingerprints (fingerprint.c). */
/* Header of d with sequence number seq (also the watchdog's description). */
void dt_fp_fill(dt_fp_hdr *h, const dt_coll_desc *d, uint64_t seq);
/* 1 if d is an allreduce whose check travels with its data. */
int dt_fp_inline_ok(const dt_coll_desc *d);
/* Run d checked: DT_ERR_MISMATCH (message from every rank's view) if the
 * group's headers differ, else the transport's status. */
int dt_fp_execute(const dt_coll_desc *d, dt_fp_hdr *h);
/* A blocking operation on c that is not a collective but must meet the
 * group's collectives in order (sub-communicator creation and release on
 * the world: kind DT_OP_COMM_*): publishes it for the watchdog (the caller
 * ends it with dt_wd_op_end after its own work, whatever this returns), takes
 * c's next sequence number and, when the check is on, runs the fingerprint
 * check of that number, so a rank that calls a collective where the others
 * create a communicator (or the reverse) gets DT_ERR_MISMATCH on every rank
 * instead of a hang. On a mismatch the sequence number is not consumed. */
int dt_coll_op_begin(const char *fn, dt_comm *c, int kind);
/* Fused list collectives (fusion.c). */
int dt_fusion_execute(const dt_coll_desc *d);
void dt_fusion_release(void);
/* The fusion's first staging buffer, grown to `bytes` (NULL: out of memory);
 * for use inside the engine only. */
void *dt_fusion_stage(size_t bytes);
/* reduce_scatter of one tensor per rank (coll_per_rank.c). */
int dt_per_rank_execute(const dt_coll_desc *d);

#endif
