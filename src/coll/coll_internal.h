/* src/coll/coll_internal.h - internal: a validated collective call. The
 * collective layer sits on the watchdog (watchdog/), the communicator layer
 * (comm/: objects, operation kinds, registry) and the transports; nothing
 * below includes it. */
#ifndef DT_COLL_INTERNAL_H
#define DT_COLL_INTERNAL_H

#include "comm/comm_internal.h"
#include "comm/op_kind.h"
#include "transport/transport.h"
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
    int wire;            /* dt_wire of allreduce / reduce_scatter (and their lists) / reduce */
    const dt_tensor *in; /* lists */
    const dt_tensor *out;
    int n;
    /* lists, summarised by validation for the fingerprint and the fusion */
    int list_dtype;      /* the one dtype of every tensor; -2 mixed; -1 empty */
    size_t list_count;   /* elements per rank (outputs for reduce_scatter) */
    uint64_t list_sig;   /* FNV-1a over the tensors' (count, dtype) */
    /* memory (set by validation): DT_MEM_HOST or DT_MEM_DEVICE, the caller's
     * stream, the device of the buffers (-1: host) */
    int mem;
    void *stream;
    int device;
    void *event;         /* asynchronous work over a device transport: recorded after it */
} dt_coll_desc;

/* The layers of the collective layer, each calling only those after it:
 *   coll.c, coll_per_rank.c  the API: validation, then the engine
 *   engine.c                 blocking and asynchronous work, in order
 *   execute.c                one descriptor: sequence number, watchdog, path
 *   device_path.c            device memory (device_plan.c: its plans)
 *   host_path.c              host memory: the transport's op, checked or not
 *   fingerprint.c            the check of a call, then what the caller runs
 *   fusion.c                 lists and per-rank tensors through staging
 * memkind.c classifies buffers for the API; call_memo.c remembers the calls
 * that passed validation on known device buffers (the API asks it first). */

/* Run one validated descriptor (execute.c; called by the engine): assigns
 * its sequence number, publishes it for the watchdog, and runs it
 * fingerprint-checked when the check is on and the group has more than one
 * rank; device memory takes the device path (device_path.c). *hdr_out (if
 * not NULL) receives the call's header (the watchdog's description of it). */
int dt_coll_execute(const dt_coll_desc *d, dt_fp_hdr *hdr_out);
/* The host path of a descriptor with header h (host_path.c; sequence number
 * assigned): fingerprint-checked when the check is on and the group has more
 * than one rank, else the bare transport call. */
int dt_coll_run_host(const dt_coll_desc *d, dt_fp_hdr *h);
/* The bare transport call of a descriptor (no check; host_path.c). */
int dt_coll_transport(const dt_coll_desc *d);

/* Memory kinds (memkind.c): set d->mem and d->device from opts (NULL: auto)
 * by classifying the buffers this rank uses; DT_ERR_INVALID naming them when
 * host and device buffers meet, DT_ERR_UNSUPPORTED for device memory without
 * a device. Call after the argument checks (roots are group ranks). */
int dt_coll_classify(const char *fn, dt_coll_desc *d, const dt_coll_opts *opts);

/* Call memo (call_memo.c): a DT_MEM_DEVICE call over a device transport with
 * exactly the arguments of an earlier one that passed validation on known
 * device buffers (core/device.h) passes again, while those stay known.
 * dt_coll_memo_get: 1 and d validated and classified (as dt_coll_classify
 * leaves it) if d, as the caller passed it, is such a call; else 0, d
 * untouched. dt_coll_memo_put: remember `key` (the arguments as passed) with
 * d, its validated and classified form. Per thread; single-buffer kinds. */
int dt_coll_memo_get(dt_coll_desc *d, const dt_coll_opts *opts);
void dt_coll_memo_put(const dt_coll_desc *key, const dt_coll_desc *d, const dt_coll_opts *opts);

/* ---- the device path (device_path.c, device_plan.c) ---- */
/* Run d (device memory) over the communicator's device transport or staged
 * through pinned host memory; h as for dt_coll_run_host. */
int dt_dev_execute(const dt_coll_desc *d, dt_fp_hdr *h);
/* 1 if d runs over a device transport (stream-ordered: asynchronous forms
 * complete on an event). */
int dt_dev_stream_ordered(const dt_coll_desc *d);
/* dt_finalize: the device path's and the bootstrap check's buffers. */
void dt_dev_path_release(void);
void dt_fp_release(void);

/* The buffers a descriptor uses on this rank, as byte ranges: what it reads
 * (in) and writes (out). Zero-byte ranges of non-NULL buffers are listed
 * (they decide a call's memory kind) with bytes 0. name/index say which
 * argument ("sendbuf", "recvbuf", "in", "out" with the tensor index). */
typedef struct dt_region {
    const void *p;
    size_t bytes;
    unsigned char in, out;
    const char *name;
    int index;           /* tensor index of lists, -1 otherwise */
} dt_region;
/* The regions of d into r[0..cap); returns how many there are (more than
 * cap: call again with room for that many). Pure. */
int dt_coll_regions(const dt_coll_desc *d, dt_region *r, int cap);

/* The primitives a device transport runs for d (peers as group ranks) into
 * p[0..cap); returns how many (more than cap: call again). `scratch` is
 * device memory of dt_dev_plan_scratch(d) bytes when that is not 0 (the
 * in-place all_to_all reads its blocks from a copy). Pure. */
int dt_dev_plan(const dt_coll_desc *d, void *scratch, dt_prim *p, int cap);
size_t dt_dev_plan_scratch(const dt_coll_desc *d);
/* A compressed wire over a device transport (d->wire not native, a group of
 * more than one): the bytes of scratch the wire needs for plan p[0..n) (0:
 * none; it takes no primitive of the plan), and the plan rewritten with
 * packs and unpacks around its f32 reductions (device_plan.c's header) into
 * out[0..cap), scratch being device memory of that many bytes; returns the
 * number of primitives (more than cap: call again with room for them). */
size_t dt_dev_wire_scratch(const dt_coll_desc *d, const dt_prim *p, int n);
int dt_dev_wire_plan(const dt_coll_desc *d, void *scratch, const dt_prim *p, int n, dt_prim *out, int cap);

/* Fingerprints (fingerprint.c). */
/* Header of d with sequence number seq (also the watchdog's description),
 * without its hash: fp is 0 until a check computes it (dt_fp_execute,
 * dt_fp_execute_on), so an unchecked call (a group of one, the check off)
 * pays no hashing. */
void dt_fp_fill(dt_fp_hdr *h, const dt_coll_desc *d, uint64_t seq);
/* 1 if d is an allreduce whose check travels with its data. */
int dt_fp_inline_ok(const dt_coll_desc *d);
/* Run d checked over its host transport: DT_ERR_MISMATCH (message from
 * every rank's view) if the group's headers differ, else run(d, arg)'s
 * status (small allreduces: their check travels with the data, and the
 * transport moves it itself; barriers: the check is the barrier). */
int dt_fp_execute(const dt_coll_desc *d, dt_fp_hdr *h, int (*run)(const dt_coll_desc *d, void *arg), void *arg);
/* A blocking operation on c that is not a collective but must meet the
 * group's collectives in order (sub-communicator creation and release on
 * the world: kind DT_OP_COMM_*): publishes it for the watchdog (the caller
 * ends it with dt_wd_op_end after its own work, whatever this returns), takes
 * c's next sequence number and, when the check is on, runs the fingerprint
 * check of that number, so a rank that calls a collective where the others
 * create a communicator (or the reverse) gets DT_ERR_MISMATCH on every rank
 * instead of a hang. On a mismatch the sequence number is not consumed. */
int dt_coll_op_begin(const char *fn, dt_comm *c, int kind);
/* Where the headers of a checked call are exchanged: the host transport's
 * ops (dt_fp_execute), the bootstrap, or a device transport's. */
typedef struct dt_fp_channel {
    const char *name;
    int (*check)(dt_comm *c, dt_fp_hdr *hdr);
    int (*gather_views)(dt_comm *c, const dt_fp_hdr *mine, dt_fp_hdr *all);
    int (*p2p_check)(dt_comm *c, int peer, const dt_fp_hdr *mine, dt_fp_hdr *theirs);
} dt_fp_channel;
/* Run d checked over channel ch: the headers are compared first, then (no
 * mismatch) run(d, arg) moves the data. Barriers: run is called too (a
 * device barrier is ordered on its stream). */
int dt_fp_execute_on(const dt_coll_desc *d, dt_fp_hdr *h, const dt_fp_channel *ch,
                     int (*run)(const dt_coll_desc *d, void *arg), void *arg);
/* The bootstrap's channel, for communicators whose members are the whole
 * world (collective checks only; p2p_check NULL). */
extern const dt_fp_channel dt_fp_boot_channel;
/* Which channel checks device calls on c: 0 the host transport's (it has
 * one), 1 the bootstrap (c spans the world; not point to point), 2 the device
 * transport's. Pure. */
int dt_fp_device_channel(int host_has_check, int spans_world, int p2p);
/* Tests: force that choice where it can serve the call (-1: decide as above). */
void dt_fp_device_channel_for_testing(int choice);
/* Fused list collectives (fusion.c); the staging buffers are freed by
 * dt_fusion_release (dt_finalize). */
int dt_fusion_execute(const dt_coll_desc *d);
void dt_fusion_release(void);
/* reduce_scatter of one tensor per rank (fusion.c; API: coll_per_rank.c). */
int dt_per_rank_execute(const dt_coll_desc *d);

#endif
