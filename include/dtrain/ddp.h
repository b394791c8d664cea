/* dtrain/ddp.h - data parallelism: gradients averaged across ranks in fused
 * buckets, each submitted while backward is still running.
 *
 * The wrapper knows nothing of dtrain's layers. A program describes its
 * parameters as SEGMENTS in forward order (a segment = one layer's, or one
 * tensor's, parameters and gradients; f32). Buckets are formed from the
 * segments in REVERSE order (gradients become ready back to front), a segment
 * never split across buckets: the first bucket closes once it holds at least
 * first_bucket_bytes, later ones at bucket_cap_bytes (PyTorch DDP's rule;
 * bucket_cap_bytes 0 = one bucket per segment). A bucket whose segments lie
 * back to back in memory is reduced in place as one view (no copy); otherwise
 * it is packed by the fused list collective. On one host, keep the gradients
 * in one buffer from dt_comm_alloc_shared (comm.h; dtrain's trainer does):
 * such bucket views are then reduced straight between the ranks' buffers,
 * with about half the memory traffic of the staged shared-memory path.
 *
 * Per step:  dt_ddp_begin_step -> backward, calling dt_ddp_grad_ready(seg) as
 * each segment's gradients become final -> dt_ddp_finish (all buckets reduced;
 * gradients now hold the AVERAGE over ranks, or the sum with average = 0)
 * -> optimizer step.
 * Buckets are submitted to the communication engine strictly in bucket order
 * (a completed bucket waits for earlier buckets), so every rank issues the same
 * sequence of collectives even if a segment produced no gradient: buckets not
 * complete at finish are flushed then, never waited on forever.
 *
 * no_sync: dt_ddp_set_grad_sync(ddp, 0) makes steps skip all communication, so
 * gradients accumulate locally; the next step with sync on reduces the
 * accumulated sum (scale by 1/k yourself if you want the mean of k steps).
 *
 * Device memory (cfg.mem = DT_MEM_DEVICE; coll.h, "Device memory"): the
 * segments are CUDA device memory and backward runs on cfg.stream. Buckets are
 * reduced on a communication stream of the wrapper's own: when a bucket is
 * complete (dt_ddp_grad_ready of its last segment, called after that
 * segment's backward kernels are enqueued), an event recorded on cfg.stream
 * orders the bucket's allreduce after them, with no host wait; finish makes
 * cfg.stream wait for every bucket (stream order: the optimizer's kernels
 * enqueued on cfg.stream afterwards see the averaged gradients; done() is
 * called in bucket order as each wait is enqueued). Parameters and buffers
 * are broadcast on cfg.stream. Over the staged path (no NCCL communicator)
 * each bucket completes before its submission returns (no overlap).
 * Bucket times (dt_ddp_bucket_times) are then the host's view: submission to
 * finish. The default, DT_MEM_AUTO, leaves the memory kind to each
 * collective (device segments then run on the default stream, each bucket
 * waited for on the host at finish).
 */
#ifndef DTRAIN_DDP_H
#define DTRAIN_DDP_H

#include <stddef.h>
#include "dtrain/coll.h"
#include "dtrain/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_ddp dt_ddp;

typedef struct dt_ddp_config {
    size_t bucket_cap_bytes;   /* default 25 MiB; 0 = one bucket per segment */
    size_t first_bucket_bytes; /* default 1 MiB */
    int overlap;               /* 1 (default): reduce buckets during backward; 0: all at finish */
    int root;                  /* world rank whose parameters/buffers everyone starts from (0) */
    int broadcast_buffers;     /* 1 (default): buffers re-broadcast from root at each begin_step */
    int average;               /* 1 (default): gradients become sum/size. 0: plain sum, for
                                * callers that pre-scale their gradients by 1/size (e.g. in
                                * backward, as PyTorch's reducer pre-divides): saves a pass */
    int wire;                  /* DT_WIRE_NATIVE (0, default), DT_WIRE_BF16 or DT_WIRE_F16
                                * (dtrain/coll.h): the type the buckets travel in between
                                * processes (the config's grad_comm_dtype); sums stay f32,
                                * results identical on every rank, within coll.h's bound
                                * (device memory over NCCL: packed on the device and
                                * summed by NCCL in the wire type, coll.h) */
    dt_mem_kind mem;           /* segments and buffers: DT_MEM_AUTO (default), DT_MEM_HOST, or
                                * DT_MEM_DEVICE (see "Device memory" above) */
    void *stream;              /* DT_MEM_DEVICE: the cudaStream_t backward runs on (NULL: the
                                * default stream) */
} dt_ddp_config;

/* A segment: `count` f32 elements of parameters and of their gradients. */
typedef struct dt_ddp_segment {
    float *param;
    float *grad;
    size_t count;
} dt_ddp_segment;

/* A non-parameter buffer (e.g. batch-norm running statistics). */
typedef struct dt_ddp_buffer {
    float *data;
    size_t count;
} dt_ddp_buffer;

void dt_ddp_config_default(dt_ddp_config *cfg);

/* Create the wrapper over comm (collective: every rank of comm calls it with
 * the same segment counts). Broadcasts every segment's parameters and every
 * buffer from cfg->root. The arrays are copied; the memory they point at must
 * outlive the wrapper. cfg NULL = defaults. Errors: NULL/empty arguments,
 * segment counts that differ across ranks (DT_ERR_MISMATCH), root not in comm,
 * an unknown cfg->wire (DT_ERR_INVALID). A wire that differs across ranks is
 * found by the first bucket's collective check (DT_ERR_MISMATCH). */
int dt_ddp_create(dt_comm *comm, const dt_ddp_segment *segs, int nsegs,
                  const dt_ddp_buffer *bufs, int nbufs, const dt_ddp_config *cfg,
                  dt_ddp **out);
void dt_ddp_free(dt_ddp *ddp);

/* Gradient sync on (1, default) or off (0: no_sync accumulation). */
int dt_ddp_set_grad_sync(dt_ddp *ddp, int enabled);
/* Start a step: clears readiness; broadcasts buffers if configured. */
int dt_ddp_begin_step(dt_ddp *ddp);
/* Segment `seg` (index in forward order) has final gradients. Calling it twice
 * for one segment in a step is DT_ERR_STATE. */
int dt_ddp_grad_ready(dt_ddp *ddp, int seg);
/* Flush buckets not yet submitted, wait for all; gradients are then averaged. */
int dt_ddp_finish(dt_ddp *ddp);
/* dt_ddp_finish, calling done(user, first_seg, last_seg) as soon as each
 * bucket's reduction has completed, in bucket order (reverse layer order),
 * while later buckets may still be in flight: the caller can use those
 * gradients at once, e.g. step the optimizer on those parameters
 * (dt_optim_step_range). A non-zero return from done stops the calls (the
 * remaining buckets are still waited for) and is returned. With gradient sync
 * off (no_sync) nothing is reduced and done is not called. */
int dt_ddp_finish_each(dt_ddp *ddp, int (*done)(void *user, int first_seg, int last_seg), void *user);
/* Broadcast parameters (and buffers) from root again, e.g. after loading. */
int dt_ddp_broadcast_params(dt_ddp *ddp);

int dt_ddp_num_buckets(const dt_ddp *ddp);
/* Bucket i: first and last segment index (forward order) and bytes. */
int dt_ddp_bucket_info(const dt_ddp *ddp, int i, int *first_seg, int *last_seg, size_t *bytes);

/* Timing of the last synced step, in microseconds of the trace clock
 * (dt_trace_now_us): for bucket i, when its collective started and ended on the
 * communication thread. */
int dt_ddp_bucket_times(const dt_ddp *ddp, int i, double *start_us, double *end_us);

#ifdef __cplusplus
}
#endif
#endif
