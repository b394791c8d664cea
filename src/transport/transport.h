/* src/transport/transport.h - internal: the transport vtable, the table of
 * transports, and destroying a communicator (comm/comm_internal.h holds the
 * object) through its transports.
 *
 * A transport moves the data of collectives for one kind of communicator:
 *   void  a group of one process (every collective is a copy); on a world of
 *         several processes without a data transport (a tcp bootstrap and no
 *         MPI), it knows the groups but refuses to move data
 *         (DT_ERR_UNSUPPORTED, naming the transport that would);
 *   mpi   host memory between processes over MPI (transport/mpi/), with the
 *         shared-memory allreduce on one host.
 * Its ops run on arguments the collective layer has already validated:
 * counts fit, buffers non-NULL, roots/peers are GROUP ranks, in-place
 * requests follow coll.h's conventions.
 *
 * Adding one = a folder transport/<name>/ with its dt_backend_ops and one
 * dt_transport entry in transport.c's table: its probe says whether it can
 * serve the job the open bootstrap (bootstrap/bootstrap.h) describes, and
 * `world` builds its state for the world communicator.
 *
 * Device transports (nccl: transport/nccl/) serve device memory BESIDE the
 * world's host transport: a communicator then has both (ops for host memory,
 * dev for device memory). They have their own table (dt_dev_transports,
 * also in transport.c) and their own vtable (dt_dev_backend): the collective
 * layer turns each device call into primitives (dt_prim: allreduce, ...,
 * send, recv, copy) that the transport enqueues as ONE group on the caller's
 * stream. Their set-up is collective over the world (an out-of-band
 * exchange, NCCL's unique id, goes over dt_boot_allgather). */
#ifndef DT_TRANSPORT_H
#define DT_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include "comm/comm_internal.h"
#include "comm/op_kind.h"
#include "dtrain/comm.h"
#include "dtrain/dtype.h"
#include "transport/settings.h"

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
    uint8_t dtype, op;   /* DT_FP_NONE (comm/op_kind.h): none / mixed */
    uint32_t nlist;      /* tensors in a list collective */
    uint32_t layout;     /* lists: 32-bit hash of the tensors' dtypes and counts */
} dt_fp_hdr;
#define DT_FP_MISMATCH 1u
#define DT_FP_DEVICE 2u  /* the call is on device memory (part of fp too) */
#define DT_FP_WIRE_SHIFT 8 /* flags bits 8..15: the call's dt_wire (part of fp too) */

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
    /* Optional (NULL: not offered, the plain op runs and the data moves as
     * it is): allreduce / reduce_scatter / reduce with `wire` (a dt_wire other than
     * DT_WIRE_NATIVE) for what travels between processes, on floating-point
     * data the collective layer has checked (f32, f16, bf16). */
    int (*allreduce_wire)(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op, int wire);
    int (*reduce_scatter_wire)(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op,
                               int wire);
    int (*reduce_wire)(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op, int root,
                       int wire);
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
     * (info and world_ranks filled by the caller, local attributes from the
     * bootstrap's hosts). Every world rank calls it: with color >= 0 and a
     * group of more than one rank, or with color -1 and out NULL (a rank
     * alone, or in no group).
     * `same_members` is an existing communicator with exactly out's members
     * (identical on every member), or NULL: out then shares its check group. */
    int (*split)(dt_comm *world, int color, dt_comm *out, dt_comm *same_members);
    /* Optional: 1 if asynchronous calls on c may run on the engine's
     * communication thread (a second thread in the transport); 0: they run at
     * submission instead. NULL: always. */
    int (*async_ok)(const dt_comm *c);
    /* Largest element count one call can move per rank block. */
    size_t max_count;
    void (*destroy)(dt_comm *c);
} dt_backend_ops;

/* ---- device transports --------------------------------------------------- */

/* What a device transport executes: one call = a list of these, enqueued as
 * one group on one stream. Peers and roots are GROUP ranks. Counts are
 * elements of dtype; allgather: what each rank sends; reduce_scatter: what
 * each rank receives. */
typedef enum dt_prim_kind {
    DT_PRIM_ALLREDUCE, DT_PRIM_ALLGATHER, DT_PRIM_REDUCE_SCATTER, DT_PRIM_REDUCE, DT_PRIM_BROADCAST,
    DT_PRIM_SEND, DT_PRIM_RECV,
    DT_PRIM_COPY,    /* count elements send -> recv on this rank, before the group's transfers */
    DT_PRIM_BARRIER, /* every rank of the group has reached it (no buffers) */
    /* a compressed wire (coll.h): dtype is the wire's element type (DT_BF16
     * or DT_F16); the transport's scratch holds the 16-bit values */
    DT_PRIM_PACK,    /* count f32 send -> dtype recv, rounded; before the group's transfers */
    DT_PRIM_UNPACK   /* count dtype send -> f32 recv, divided by `divisor`; after them */
} dt_prim_kind;

typedef struct dt_prim {
    int kind;          /* dt_prim_kind */
    int peer;          /* root (reduce, broadcast) or peer (send, recv); -1 none */
    dt_dtype dtype;
    dt_op op;          /* reductions */
    const void *send;
    void *recv;
    size_t count;
    int divisor;       /* unpack: 1, or the group size for an average */
} dt_prim;

typedef struct dt_dev_backend {
    const char *name;
    /* Enqueue p[0..n) as one group on stream (device buffers of c's device),
     * then record `done` (an event of the device runtime) on stream when it
     * is not NULL. DT_ERR_UNSUPPORTED naming a dtype or op the library lacks;
     * nothing is enqueued then. */
    int (*run)(dt_comm *c, const dt_prim *p, int n, void *stream, void *done);
    /* Fingerprint checks over the transport itself (reliability.h): the
     * contract of dt_backend_ops.check / gather_views / p2p_check. Host-side
     * (they return once every rank's header is known); used where neither
     * the host transport nor the bootstrap can serve the group. */
    int (*check)(dt_comm *c, dt_fp_hdr *hdr);
    int (*gather_views)(dt_comm *c, const dt_fp_hdr *mine, dt_fp_hdr *all);
    int (*p2p_check)(dt_comm *c, int peer, const dt_fp_hdr *mine, dt_fp_hdr *theirs);
    /* DT_OK, or the transport's asynchronous error of c (DT_ERR_BACKEND with
     * its message): a peer lost, a network failure. Cheap; any thread. */
    int (*async_error)(dt_comm *c);
    /* Collective over the world (every world rank calls it, as for
     * dt_backend_ops.split): the group of color (members by ascending world
     * rank; color -1: this rank is in no group of more than one, out NULL). */
    int (*split)(dt_comm *world, int color, dt_comm *out);
    /* The device of c's buffers. */
    int (*device)(const dt_comm *c);
    /* Device memory of c's device of at least `bytes`, owned by c (grow-only),
     * valid until the next call on c; NULL with a message on failure. The
     * calls that use it (an in-place all_to_all's copy, a compressed wire's
     * packed values) are ordered after the last such call on any stream. */
    void *(*scratch)(dt_comm *c, size_t bytes);
    size_t max_count;
    void (*destroy)(dt_comm *c);
} dt_dev_backend;

typedef struct dt_dev_transport {
    const char *name;
    const dt_dev_backend *ops;
    /* DT_OK if it can run in this process on device `dev` (the library
     * usable, the device runtime the real one); else DT_ERR_UNSUPPORTED with
     * the reason. Local, collective-free. */
    int (*probe)(int dev);
    /* Build w->dev_impl for the world on device `dev` (w->dev set by the
     * caller). Collective over the world; every rank returns the same status
     * (the transport agrees on the outcome over the bootstrap). */
    int (*world)(dt_comm *w, int dev);
    /* After every communicator is destroyed (NULL: none). */
    void (*finalize)(void);
    /* For the watchdog's thread: DT_OK, or an error status with a one-line
     * description in msg (NCCL's asynchronous error of a communicator). */
    int (*poll)(char *msg, size_t cap);
    /* For the watchdog's thread, before it ends the job: abort every
     * communicator (in-flight operations stop). */
    void (*abort_all)(void);
} dt_dev_transport;

extern const dt_backend_ops dt_backend_void;

/* The transport's allreduce / reduce_scatter / reduce of c with the wire
 * type `wire` (a dt_wire): its _wire op when the wire is not native and it
 * offers one, else the plain op (the data moves as it is). */
int dt_transport_allreduce(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, dt_op op, int wire);
int dt_transport_reduce_scatter(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, dt_op op, int wire);
int dt_transport_reduce(dt_comm *c, const void *s, void *r, size_t n, dt_dtype dt, dt_op op, int root, int wire);

/* Frees c (NULL: no-op): its device transport's state, its host transport's,
 * then the object (dt_comm_free). */
void dt_comm_destroy(dt_comm *c);

/* ---- which data path ran ------------------------------------------------------
 * Calls of this process that took each of the transports' own algorithms
 * (the others are the library's, e.g. MPI's), counted when they complete:
 * for tests and benchmarks, which must know what they measured. Written
 * inside the engine only. */
enum {
    DT_PATH_SHM_ALLREDUCE, DT_PATH_SHM_REDUCE, DT_PATH_SHM_REDUCE_SCATTER, DT_PATH_SHM_ALLGATHER,
    DT_PATH_SHM_BROADCAST, DT_PATH_TWO_LEVEL_ALLREDUCE, DT_PATH_TWO_LEVEL_REDUCE_SCATTER,
    DT_PATH_TWO_LEVEL_ALLGATHER, DT_PATH_WIRE_FLAT, DT_PATH_N
};
extern uint64_t dt_path_count[DT_PATH_N];

/* ---- the table of transports (transport.c) ---------------------------------- */
typedef struct dt_transport {
    const char *name;
    const dt_backend_ops *ops;
    /* The bootstrap this transport implies when it is asked for by name
     * (DTRAIN_BACKEND) and DTRAIN_BOOTSTRAP is auto; NULL: detect one. */
    const char *boot;
    /* DT_OK if it can serve the job of the open bootstrap, else
     * DT_ERR_UNSUPPORTED with a message saying why. Collective-free. */
    int (*probe)(void);
    /* Set up w->impl for the world communicator (info, world_ranks and ops
     * filled by the caller). Collective over the world. */
    int (*world)(dt_comm *w);
    /* After every communicator of this transport is destroyed (NULL: none). */
    void (*finalize)(void);
} dt_transport;

/* This build's transports, in the order DTRAIN_BACKEND=auto tries them,
 * NULL-terminated. */
extern const dt_transport *const dt_transports[];
/* This build's device transports, in the order DTRAIN_DEVICE_PATH=auto
 * tries them, NULL-terminated (empty without CUDA). */
extern const dt_dev_transport *const dt_dev_transports[];
/* Tests: the device transport dt_init uses instead of the table's (NULL:
 * the table). Call before dt_init. */
void dt_dev_transport_use_for_testing(const dt_dev_transport *t);
/* The table's first entry, or the test's. NULL: none. */
const dt_dev_transport *dt_dev_transport_first(void);
/* The transport named `name`, or NULL. */
const dt_transport *dt_transport_find(const char *name);
/* "mpi or void": the names, for messages. */
const char *dt_transport_names(char *buf, size_t cap);

#endif
