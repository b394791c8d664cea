/* dtrain/coll.h - collectives on any communicator (world or sub-communicator).
 *
 * Conventions (those of NCCL):
 *  - Counts are numbers of elements (size_t), never bytes. A count whose byte
 *    size overflows, or exceeds what the backend can address, is DT_ERR_INVALID.
 *  - In-place operation is requested by passing the same pointer as send and
 *    receive buffer, or, for allgather, sendbuf == recvbuf + rank*count*esize,
 *    and for reduce_scatter, recvbuf == sendbuf + rank*recvcount*esize.
 *  - Roots and peers are WORLD ranks and must belong to comm's group; dtrain
 *    translates them to group ranks (dt_comm_group_rank).
 *  - Buffers are host (CPU) memory, or CUDA device memory (see "Device
 *    memory" below). A count of 0 is valid and moves nothing, but every rank
 *    of the group must still make the call.
 *  - f16 and bf16 reductions accumulate in f32: the data is widened, reduced
 *    in f32 and rounded once to the 16-bit type.
 *  - DT_AVG on integer types truncates toward zero.
 *  - Every rank of the group must call the same collectives in the same order
 *    with matching arguments. This is checked before any data moves (collective
 *    fingerprints, dtrain/reliability.h): a disagreement returns
 *    DT_ERR_MISMATCH on every rank of the group, receive buffers untouched, and
 *    the call does not count in the communicator's sequence numbers.
 *    Point-to-point pairs are checked the same way (both ends fail).
 *  - Every blocking call is watched by a timeout (DTRAIN_TIMEOUT, default
 *    300 s): a call that does not complete in time ends the job with a stall
 *    report naming the ranks that did not arrive (reliability.h).
 *
 * Collective results and settings (MPI backend; how the paths work:
 * docs/shared-memory.md, not API):
 *  - On a communicator whose ranks all run on one host, allreduce,
 *    reduce_scatter, reduce, allgather and broadcast of f32, f64 and the
 *    integer types (narrow integers: not avg) of at least DTRAIN_SHM_MIN_BYTES
 *    take dtrain's shared-memory path. Its results: every element is reduced
 *    in one fixed association (a balanced tree over the group ranks), so
 *    floating-point results are bit-identical on every rank AND do not depend
 *    on how the data is cut into calls, lists or buckets; a reduce_scatter's
 *    block and a reduce's result are bit for bit those of the allreduce of
 *    the same data.
 *  - Its settings, environment variables read by dt_init:
 *      DTRAIN_SHM_ALLREDUCE=0      turns the path off;
 *      DTRAIN_SHM_MIN_BYTES=N      smallest call it takes (default 16 KiB;
 *                                  smaller calls that the fingerprint check
 *                                  takes inline, up to 64 KiB, use it too);
 *      DTRAIN_SHM_CHUNK_BYTES=N    each rank's two buffers (default 1 MiB;
 *                                  larger calls run in chunks of it);
 *      DTRAIN_SHM_STREAM_BYTES=N   out-of-place calls of at least N bytes
 *                                  (default 16 MiB) write their outputs with
 *                                  streaming stores: such an output is left
 *                                  in memory, not in cache.
 *    The first three are agreed over the world at dt_init (off if any rank
 *    says off; the largest threshold and chunk); the stream threshold is each
 *    rank's own (results do not depend on it). A communicator takes the path
 *    only if /dev/shm has room for twice its window on every member (else
 *    MPI's algorithms, as across hosts).
 *  - Two levels, on a communicator whose ranks span hosts, for allreduce,
 *    reduce_scatter and allgather: within each host through its window, across
 *    hosts only 1/L of the data per rank (L ranks on a host). Settings:
 *      DTRAIN_TWO_LEVEL=auto|1|0   auto (default): when some host has more
 *                                  than one of the group's ranks; 1: wherever
 *                                  the group spans hosts; 0: off;
 *      DTRAIN_TWO_LEVEL_MIN_BYTES=N  smallest call under auto (default 64 KiB).
 *    Both agreed over the world at dt_init (off if any rank says off, else
 *    auto if any says auto; the largest threshold). Results: each element is
 *    a balanced tree over the hosts (in order of their lowest group rank) of
 *    the balanced trees over each host's ranks: bit-identical on every rank,
 *    independent of the call's size and cuts. Needs the windows (off with
 *    DTRAIN_SHM_ALLREDUCE=0, unless every host has one rank).
 *  - f16/bf16, across hosts below the threshold, or with the paths off, MPI's
 *    own algorithms run: results are identical on every rank but may depend
 *    on the call's size.
 *
 * Ordering and threads: each process has one communication engine. Work runs
 * in submission order, blocking calls included: a blocking call made while
 * asynchronous work is pending waits for that work first. Asynchronous work
 * runs on one background thread, created on first use. Buffers of async work
 * must stay valid and untouched until the work completes.
 *
 * Device memory (CUDA builds; the _ex forms below, or found per buffer):
 *  - The memory kind of a call is dt_coll_opts.mem: DT_MEM_HOST (no detection
 *    at all: the plain calls' speed), DT_MEM_DEVICE, or DT_MEM_AUTO (what the
 *    plain calls use): each buffer is classified with cudaPointerGetAttributes
 *    when the process has a CUDA device (dt_init found one), and is host
 *    memory without a CUDA call otherwise. Device and managed memory count as
 *    device memory; pinned host memory (cudaHostAlloc) as host memory. Host
 *    and device buffers in one call are DT_ERR_INVALID naming the buffers
 *    (also with DT_MEM_DEVICE, which classifies every buffer as a check), and
 *    every rank of the group must pass the same kind (part of the fingerprint:
 *    a rank on host memory and one on device memory is DT_ERR_MISMATCH).
 *  - DT_MEM_DEVICE over NCCL classifies a buffer once: an address found to be
 *    device memory of the communicator's device (or managed memory) is
 *    remembered, and a call on buffers seen before asks CUDA nothing but
 *    NCCL's enqueue and its own event (no cudaPointerGetAttributes, about as
 *    costly as enqueueing a small allreduce). dtrain forgets them all when it
 *    frees device memory itself and at dt_finalize, but it cannot see the
 *    caller's cudaFree: an address the caller freed and got back as host
 *    memory or as another device's memory then goes to NCCL unchecked (as
 *    every buffer does with NCCL alone), the one mistake the check misses.
 *    DTRAIN_DEVICE_BUFFER_CACHE=0 (read by dt_init) classifies every buffer
 *    of every call, the check complete. DT_MEM_AUTO always classifies (it
 *    decides the path), and host answers are never remembered.
 *  - Path (dt_comm_device_path): "nccl" when the communicator has an NCCL
 *    communicator (every rank on its own GPU; DTRAIN_DEVICE_PATH=auto|nccl);
 *    "local" for a group of one rank without one (its collectives are
 *    copies on the stream); else "staged": device -> pinned host memory, the
 *    host path above (the world's transport: MPI), pinned host -> device,
 *    with the host path's results. DTRAIN_DEVICE_PATH=staged forces staging
 *    (docs/gpu.md).
 *  - Over NCCL, the operation is enqueued on dt_coll_opts.stream (NULL: the
 *    default stream), after the work already queued there; buffers must lie
 *    on the device of the communicator (the current device at dt_init) and
 *    start at a multiple of their element size (NCCL's kernels load whole
 *    elements; dtrain does not check this, and a misaligned buffer ends in
 *    NCCL's or CUDA's error, reported by the watchdog).
 *    Fingerprint checks run on the host before anything is enqueued (over the
 *    world's transport under MPI; over the bootstrap for communicators of the
 *    whole world, else over a second NCCL communicator of the same members).
 *    Results follow NCCL's numerics: f16/bf16 are reduced in their own type,
 *    avg of floats pre-multiplies by 1/size, so these may differ from the host
 *    path in the last bits; integers and min/max are exact.
 *  - Blocking calls return once the operation has completed (the host waited,
 *    watched by the timeout like any blocking call): its results are visible
 *    to any stream and to the host.
 *  - Asynchronous calls over NCCL (and local ones) return once the operation
 *    is enqueued; the handle completes on a CUDA event recorded after it:
 *    dt_work_test polls it, dt_work_wait blocks the host until it,
 *    dt_work_stream_wait makes another stream wait for it without a host
 *    wait, and dt_work_free
 *    releases the handle without waiting (the operation stays ordered on its
 *    stream). Staged asynchronous calls complete before they return (no
 *    overlap; the handle is complete). Either way, work queued on a stream
 *    after dt_work_wait or dt_work_stream_wait(work, stream) sees the results.
 *  - Host buffers with a stream: the stream is synchronised before the call
 *    reads them (ordering with the caller's device work that produced them).
 *
 * All functions return DT_OK or a negative dt_status (message in
 * dt_last_error()). Errors in arguments are detected before anything moves.
 */
#ifndef DTRAIN_COLL_H
#define DTRAIN_COLL_H

#include <stddef.h>
#include "dtrain/comm.h"
#include "dtrain/dtype.h"
#include "dtrain/reliability.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A buffer for list (fused) collectives: `count` elements of `dtype`. */
typedef struct dt_tensor {
    void *data;
    size_t count;
    dt_dtype dtype;
} dt_tensor;

/* Handle of asynchronous work. */
typedef struct dt_work dt_work;

/* ---- blocking collectives ------------------------------------------------ */

/* recvbuf[i] = op over ranks of sendbuf[i], on every rank; count elements. */
int dt_allreduce(const void *sendbuf, void *recvbuf, size_t count, dt_dtype dtype,
                 dt_op op, dt_comm *comm);
/* recvbuf (size*count elements) = concatenation of every rank's sendbuf
 * (count elements) in rank order. */
int dt_allgather(const void *sendbuf, void *recvbuf, size_t count, dt_dtype dtype,
                 dt_comm *comm);
/* sendbuf holds `count` elements (count divisible by the group size, else
 * DT_ERR_INVALID); rank k receives in recvbuf the count/size elements of block
 * k of the reduction. */
int dt_reduce_scatter(const void *sendbuf, void *recvbuf, size_t count,
                      dt_dtype dtype, dt_op op, dt_comm *comm);
/* The reduction lands in recvbuf on `root` only (recvbuf may be NULL on other
 * ranks). */
int dt_reduce(const void *sendbuf, void *recvbuf, size_t count, dt_dtype dtype,
              dt_op op, int root, dt_comm *comm);
/* root's sendbuf is copied into every rank's recvbuf (sendbuf is read on root
 * only and may be NULL elsewhere; in-place when sendbuf == recvbuf). */
int dt_broadcast(const void *sendbuf, void *recvbuf, size_t count, dt_dtype dtype,
                 int root, dt_comm *comm);
/* root's recvbuf (size*count) receives every rank's sendbuf (count) in rank
 * order; recvbuf may be NULL off root. */
int dt_gather(const void *sendbuf, void *recvbuf, size_t count, dt_dtype dtype,
              int root, dt_comm *comm);
/* Block k (count elements) of root's sendbuf (size*count) lands in rank k's
 * recvbuf; sendbuf may be NULL off root. */
int dt_scatter(const void *sendbuf, void *recvbuf, size_t count, dt_dtype dtype,
               int root, dt_comm *comm);
/* Block j (count elements) of rank i's sendbuf lands as block i of rank j's
 * recvbuf; both hold size*count elements; in-place allowed. */
int dt_all_to_all(const void *sendbuf, void *recvbuf, size_t count, dt_dtype dtype,
                  dt_comm *comm);
/* Point to point; peer is a world rank in comm, not the caller itself. */
int dt_send(const void *buf, size_t count, dt_dtype dtype, int peer, dt_comm *comm);
int dt_recv(void *buf, size_t count, dt_dtype dtype, int peer, dt_comm *comm);
/* Returns once every rank of comm has entered. */
int dt_barrier(dt_comm *comm);

/* ---- fused lists --------------------------------------------------------
 * n tensors, each handled as by the single op: in[i] and out[i] must have
 * equal dtype, and counts as the single op requires (allgather: out[i].count
 * == size*in[i].count; reduce_scatter_fused: in[i].count == size*out[i].count,
 * rank k receiving block k of the reduction of in[i]). Tensors of one dtype
 * are packed into one buffer and moved by ONE collective, then unpacked
 * (in == out allowed, per tensor). Mixed dtypes: one collective per dtype, in
 * order of first use. dt_reduce_scatter_fused is NOT the list form of RAF's
 * and PyTorch's reduce_scatter (one tensor per rank): that is
 * dt_reduce_scatter_per_rank below. */
int dt_allreduce_list(const dt_tensor *in, const dt_tensor *out, int n, dt_op op,
                      dt_comm *comm);
int dt_allgather_list(const dt_tensor *in, const dt_tensor *out, int n,
                      dt_comm *comm);
int dt_reduce_scatter_fused(const dt_tensor *in, const dt_tensor *out, int n,
                            dt_op op, dt_comm *comm);

/* ---- reduce_scatter of one tensor per rank ---------------------------------
 * RAF's raf.reduce_scatter(x_list) and PyTorch's dist.reduce_scatter(output,
 * input_list): in holds n tensors, n == the group size (DT_ERR_INVALID
 * otherwise), in[k] for group rank k, all of out->count elements of
 * out->dtype; the caller's out receives the reduction over the group of
 * every rank's in[r], r its group rank. No copy when in[0..n) lie back to
 * back in memory and out is elsewhere (then this is dt_reduce_scatter on
 * in[0].data); otherwise the inputs are first gathered into a staging buffer
 * (one copy of n*count elements, made when the call runs; in place with
 * back-to-back inputs, only the result is staged). In place: out->data ==
 * in[r].data; otherwise out overlaps no input (DT_ERR_INVALID). No input other
 * than the in-place one is modified. A rank may call this where the others
 * call dt_reduce_scatter with the same per-rank count (the same call, for the
 * collective check). */
int dt_reduce_scatter_per_rank(const dt_tensor *in, int n, const dt_tensor *out,
                               dt_op op, dt_comm *comm);

/* ---- options: compressed communication -----------------------------------
 * The _ex forms take options (NULL or a zero-initialised dt_coll_opts: the
 * defaults, the plain call) and run blocking when work is NULL, else
 * asynchronously into *work as the _async forms do.
 *
 * wire: the type in which the data travels between processes (dt_wire,
 * declared in dtrain/dtype.h with the element types).
 *   DT_WIRE_NATIVE  as it is (the default).
 *   DT_WIRE_BF16, DT_WIRE_F16  16-bit floats on the wire, reductions in f32:
 *     for f32, f16 and bf16 data (any other dtype, or an unknown wire, is
 *     DT_ERR_INVALID before anything moves); every op. Compressed is what
 *     travels in messages between processes: what a shared-memory window
 *     reduces is read as f32 where it lies. So on a group on one host whose
 *     call takes the window nothing is rounded (the f32 result, exactly);
 *     on a group spanning hosts that takes the two-level path only the leg
 *     between the hosts is compressed; everything else (hosts of one rank,
 *     groups below the thresholds, the path off, f16/bf16 data) sends the
 *     whole exchange compressed. Every rank of the group must pass the
 *     same wire (part of the collective check).
 *   Numerics: each value entering a reduction between processes is rounded
 *   to the wire type first (on both sides, so the bits do not depend on
 *   which rank computed it), the reduction is in f32, in the fixed
 *   association of the tree the uncompressed call uses; an allreduce's
 *   result travels back rounded, so it is rounded on every rank; a
 *   reduce_scatter's is not rounded again. Results are bit-identical on every
 *   rank. Error bound of a sum of P contributions x_r over L = ceil(log2 P)
 *   levels of messages (u = 2^-8 for bf16, 2^-11 for f16):
 *     reduce_scatter  |result - exact| <= ((1+u)^L - 1 + P * 2^-23) * sum_r |x_r|
 *     allreduce       |result - exact| <= ((1+u)^(L+1) - 1 + P * 2^-23) * sum_r |x_r|
 *     reduce          as allreduce
 *   (f16 also loses values beyond 65504). On the two-level path P is the
 *   number of hosts and x_r the hosts' f32 partial sums (whose own f32
 *   rounding the P * 2^-23 term covers with P the group size). With bf16 a
 *   sum keeps about 2-3 significant digits, and the bytes between hosts
 *   halve.
 *   A reduce (dt_reduce_ex) with a wire runs as the allreduce's first half
 *   (the reduce-scatter, in its tree) followed by each rank's block sent to
 *   the root in the wire type: the root's result is rounded to the wire
 *   type, the very bits a compressed allreduce of the same data gives when
 *   it takes the same path (rounded, so that the step to the root also
 *   sends 16 bits: an f32 gather would double what the root receives).
 *   f32 through a one-host group's window is exact, as above; a reduce has
 *   no two-level form, so otherwise the whole exchange is compressed, on one
 *   host or several. Only the root's recvbuf is written. */
/* The wire is dt_coll_opts.wire of the _ex forms below (memory kinds and
 * streams): dt_allreduce_ex, dt_reduce_scatter_ex, dt_reduce_ex,
 * dt_allreduce_list_ex and dt_reduce_scatter_fused_ex take it (and
 * dt_broadcast_ex, below; lists: the
 * tensors of one dtype fused as dt_allreduce_list and dt_reduce_scatter_fused
 * do; every tensor must be f32, f16 or bf16 when the wire is not native); any
 * other call with a wire that is not native is DT_ERR_INVALID.
 * Device memory: over a device transport (nccl) each f32 reduction is packed
 * to the wire type by a kernel on the caller's stream (into the transport's
 * scratch), reduced by NCCL in the wire type (an average as a sum), and
 * widened back to f32 by a kernel (divided by the group size for an average),
 * as PyTorch's bf16_compress_hook: the bytes on the wire halve, but NCCL
 * rounds each partial sum to the wire type, so the bound is that of P
 * roundings, |result - exact| <= ((1+u)^(P+1) - 1 + P * 2^-23) * sum_r |x_r|
 * (P the group size; NCCL's results are the same bits on every rank). f16
 * and bf16 data reduce in their own type, as without a wire. Staged device
 * memory takes the host path above (the same bits as host memory); a group of
 * one rank moves nothing (exact).
 * dt_broadcast_ex takes a wire too, on device memory over a device transport
 * only (f32 data; a group of one rank: nothing moves): the root packs its
 * values, the others receive them rounded to the wire type (bits of
 * dt_f32_to_bf16 / dt_f32_to_f16), the root's buffer keeps its f32 (copied
 * when out of place). Host memory, or device memory staged through the host:
 * DT_ERR_UNSUPPORTED (ZeRO's bf16 parameters, dtrain/zero.h param_wire). */

/* ---- asynchronous forms --------------------------------------------------
 * Same arguments plus `work`: on DT_OK *work is a handle the caller must
 * release with dt_work_free (after completion, or it waits). Argument errors
 * are returned at submission; transport errors at dt_work_wait/dt_work_test.
 * List forms copy the dt_tensor arrays (not the data) at submission. */
int dt_allreduce_async(const void *sendbuf, void *recvbuf, size_t count,
                       dt_dtype dtype, dt_op op, dt_comm *comm, dt_work **work);
int dt_allgather_async(const void *sendbuf, void *recvbuf, size_t count,
                       dt_dtype dtype, dt_comm *comm, dt_work **work);
int dt_reduce_scatter_async(const void *sendbuf, void *recvbuf, size_t count,
                            dt_dtype dtype, dt_op op, dt_comm *comm, dt_work **work);
int dt_reduce_async(const void *sendbuf, void *recvbuf, size_t count, dt_dtype dtype,
                    dt_op op, int root, dt_comm *comm, dt_work **work);
int dt_broadcast_async(const void *sendbuf, void *recvbuf, size_t count,
                       dt_dtype dtype, int root, dt_comm *comm, dt_work **work);
int dt_gather_async(const void *sendbuf, void *recvbuf, size_t count, dt_dtype dtype,
                    int root, dt_comm *comm, dt_work **work);
int dt_scatter_async(const void *sendbuf, void *recvbuf, size_t count, dt_dtype dtype,
                     int root, dt_comm *comm, dt_work **work);
int dt_all_to_all_async(const void *sendbuf, void *recvbuf, size_t count,
                        dt_dtype dtype, dt_comm *comm, dt_work **work);
int dt_send_async(const void *buf, size_t count, dt_dtype dtype, int peer,
                  dt_comm *comm, dt_work **work);
int dt_recv_async(void *buf, size_t count, dt_dtype dtype, int peer, dt_comm *comm,
                  dt_work **work);
int dt_barrier_async(dt_comm *comm, dt_work **work);
int dt_allreduce_list_async(const dt_tensor *in, const dt_tensor *out, int n,
                            dt_op op, dt_comm *comm, dt_work **work);
int dt_allgather_list_async(const dt_tensor *in, const dt_tensor *out, int n,
                            dt_comm *comm, dt_work **work);
int dt_reduce_scatter_fused_async(const dt_tensor *in, const dt_tensor *out, int n,
                                  dt_op op, dt_comm *comm, dt_work **work);
int dt_reduce_scatter_per_rank_async(const dt_tensor *in, int n, const dt_tensor *out,
                                     dt_op op, dt_comm *comm, dt_work **work);

/* ---- memory kinds and streams: the _ex forms ------------------------------
 * The calls above with options, blocking when work is NULL and asynchronous
 * (as the _async forms) otherwise; opts NULL = DT_COLL_OPTS_INIT, which is
 * what the plain calls pass. */
typedef enum dt_mem_kind {
    DT_MEM_AUTO = 0,   /* classified per buffer (host when the process has no device) */
    DT_MEM_HOST = 1,   /* host memory: no detection, no CUDA call */
    DT_MEM_DEVICE = 2  /* CUDA device memory */
} dt_mem_kind;

typedef struct dt_coll_opts {
    dt_mem_kind mem;
    void *stream;      /* cudaStream_t: device work is ordered on it (NULL: the
                        * default stream); host buffers: synchronised first */
    dt_wire wire;      /* allreduce / reduce_scatter (and their lists) / reduce
                        * only: the type on the wire (see "options: compressed
                        * communication") */
} dt_coll_opts;
#define DT_COLL_OPTS_INIT {.mem = DT_MEM_AUTO, .stream = NULL, .wire = DT_WIRE_NATIVE}

int dt_allreduce_ex(const void *sendbuf, void *recvbuf, size_t count, dt_dtype dtype, dt_op op,
                    dt_comm *comm, const dt_coll_opts *opts, dt_work **work);
int dt_allgather_ex(const void *sendbuf, void *recvbuf, size_t count, dt_dtype dtype, dt_comm *comm,
                    const dt_coll_opts *opts, dt_work **work);
int dt_reduce_scatter_ex(const void *sendbuf, void *recvbuf, size_t count, dt_dtype dtype, dt_op op,
                         dt_comm *comm, const dt_coll_opts *opts, dt_work **work);
int dt_reduce_ex(const void *sendbuf, void *recvbuf, size_t count, dt_dtype dtype, dt_op op, int root,
                 dt_comm *comm, const dt_coll_opts *opts, dt_work **work);
int dt_broadcast_ex(const void *sendbuf, void *recvbuf, size_t count, dt_dtype dtype, int root,
                    dt_comm *comm, const dt_coll_opts *opts, dt_work **work);
int dt_gather_ex(const void *sendbuf, void *recvbuf, size_t count, dt_dtype dtype, int root,
                 dt_comm *comm, const dt_coll_opts *opts, dt_work **work);
int dt_scatter_ex(const void *sendbuf, void *recvbuf, size_t count, dt_dtype dtype, int root,
                  dt_comm *comm, const dt_coll_opts *opts, dt_work **work);
int dt_all_to_all_ex(const void *sendbuf, void *recvbuf, size_t count, dt_dtype dtype, dt_comm *comm,
                     const dt_coll_opts *opts, dt_work **work);
int dt_send_ex(const void *buf, size_t count, dt_dtype dtype, int peer, dt_comm *comm,
               const dt_coll_opts *opts, dt_work **work);
int dt_recv_ex(void *buf, size_t count, dt_dtype dtype, int peer, dt_comm *comm,
               const dt_coll_opts *opts, dt_work **work);
/* A barrier has no buffers: with DT_MEM_AUTO or DT_MEM_HOST it is the host
 * barrier; with DT_MEM_DEVICE it is ordered on the stream (over NCCL: a
 * one-element allreduce). */
int dt_barrier_ex(dt_comm *comm, const dt_coll_opts *opts, dt_work **work);
int dt_allreduce_list_ex(const dt_tensor *in, const dt_tensor *out, int n, dt_op op, dt_comm *comm,
                         const dt_coll_opts *opts, dt_work **work);
int dt_allgather_list_ex(const dt_tensor *in, const dt_tensor *out, int n, dt_comm *comm,
                         const dt_coll_opts *opts, dt_work **work);
int dt_reduce_scatter_fused_ex(const dt_tensor *in, const dt_tensor *out, int n, dt_op op,
                               dt_comm *comm, const dt_coll_opts *opts, dt_work **work);
int dt_reduce_scatter_per_rank_ex(const dt_tensor *in, int n, const dt_tensor *out, dt_op op,
                                  dt_comm *comm, const dt_coll_opts *opts, dt_work **work);

/* Work queued on `stream` (a cudaStream_t; NULL the default stream) after
 * this call waits for the work: without a host wait for asynchronous device
 * work over NCCL (cudaStreamWaitEvent); otherwise this waits on the host as
 * dt_work_wait does. Returns the work's status when it waited. */
int dt_work_stream_wait(dt_work *work, void *stream);

/* *done = 1 if the work has completed (then returns its status), else 0 and
 * DT_OK. Never blocks. */
int dt_work_test(dt_work *work, int *done);
/* Blocks until the work completes; returns its status. */
int dt_work_wait(dt_work *work);
/* Waits if still running, then releases the handle (asynchronous device work
 * over NCCL: released without waiting, see above). NULL is a no-op. */
void dt_work_free(dt_work *work);

/* When the work's collective started and finished executing, in microseconds
 * of the trace clock (dt_trace_now_us); DT_ERR_STATE if not complete yet. */
int dt_work_times(const dt_work *work, double *start_us, double *end_us);

/* Waits for every asynchronous work item submitted so far by this process. */
int dt_coll_sync(void);

#ifdef __cplusplus
}
#endif
#endif
