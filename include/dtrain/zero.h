/* dtrain/zero.h - ZeRO sharding (Rajbhandari et al., arXiv 1910.02054) over a
 * flat parameter vector of P f32 elements split into SEGMENTS (one per layer,
 * forward order; a segment may be empty).
 *
 * Each rank of the communicator (N ranks, group rank r) owns one contiguous
 * slice [lo, hi) of the flat vector: S = ceil(P / N), lo = min(r*S, P),
 * hi = min(lo + S, P). Its optimizer (dtrain/optim.h) holds state for that
 * slice only.
 *  stage 1  gradients averaged over ranks as in data parallelism (fused
 *           buckets overlapped with backward, dtrain/ddp.h) in the caller's full
 *           gradient buffer; the optimizer updates the slice; the updated
 *           slices are broadcast from their owners in chunks, asynchronously,
 *           and waited for per layer just before the layer's next forward.
 *  stage 2  as stage 1, but each layer's gradients are written into one of two
 *           reusable layer buffers and reduced straight into the owner's
 *           gradient shard as soon as the layer's backward is done; no full
 *           gradient buffer exists.
 *  stage 3  parameters are sharded too: before a layer's forward, and again
 *           before its backward, its parameters are gathered from their owners
 *           into one of two temporary buffers (the next layer's gather is
 *           prefetched asynchronously while the current one computes) and
 *           released after use; gradients as in stage 2.
 * A layer range that spans several owners moves as one broadcast (gather) or
 * one reduce (gradients) per owner piece: a variable-size reduce-scatter /
 * allgather expressed with the existing collectives.
 *
 * SHARED SEGMENTS (a model's tied parameters, dtrain/model.h's SHARED
 * PARAMETERS: gpt's lm_head computes with segment 0's wte). cfg.seg_owner
 * names, for every segment, the segment whose parameters it computes with
 * (itself, or another one: then its own count is 0). The hooks of such a user
 * hand out the OWNER's parameters and gradients: point the owner there. A
 * segment with users other than itself ("shared") gets buffers of its own:
 * stage 3 gathers its parameters at its first user of a pass (forward:
 * lowest index; backward: highest) into a dedicated buffer kept until its
 * last user of that pass is done (FSDP's treatment of root parameters; two
 * gathers per step as for any segment, never prefetched); stages 2 and 3
 * hand out one dedicated gradient buffer, zeroed at its first backward user
 * and accumulated into by every user until grad_ready(owner), which reduces
 * it. Stage 1 needs nothing (the full buffers are there). The two rotating
 * layer buffers of stages 2-3 are then the size of the largest segment that
 * is not shared (for gpt a block, while the shared wte + wpe, at GPT-2's
 * vocabulary 5.6 times a block, has its own): per rank 2 x that + each
 * shared segment, for the gradients (DT_MEM_COMM) and at stage 3 again for
 * the parameters (DT_MEM_GATHERED).
 *
 * Use: create; per micro-step begin_step -> for each layer the hooks
 * (pre_forward / post_forward, then in reverse pre_backward / grad_ready /
 * post_backward), pointing the layer's parameters/gradients where the hooks
 * say -> finish; after the last micro-step of a step, dt_zero_step (clips by
 * the global gradient norm, steps the optimizer on the slice, re-shares the
 * parameters). Gradient accumulation: stage 1 skips communication on
 * micro-steps begun with sync = 0; stages 2 and 3 reduce every micro-step into
 * the shard, which accumulates.
 *
 * HYBRID SHARDING (FSDP's HSDP, DeepSpeed's hpZ): the state is sharded over
 * `comm` and that layout is REPLICATED R times, each replica on its own
 * communicator (typically: comm = the ranks of one host, R = the number of
 * hosts; dt_zero_hybrid_comms makes these). cfg.replicas is the communicator
 * of the R ranks that hold the same shard (this rank and the ranks of the
 * other replicas with the same comm rank). Everything above then happens
 * within comm only: stage 3's parameter gathers, the reductions into the
 * owners, the re-sharing; across replicas, dt_zero_step sums each gradient
 * shard over cfg.replicas (one allreduce of hi - lo elements per step, after
 * the last micro-step) before the norm and the update, so every replica
 * takes the same step and stays identical. Stage 1: the caller's full
 * gradient buffer is summed over comm only; its shard [lo, hi) holds the sum
 * over every replica after dt_zero_step. `average` divides by the size of
 * comm times R. At create the parameters are broadcast over cfg.replicas
 * from its rank 0, then over comm from rank 0: with dt_zero_hybrid_comms'
 * communicators every rank starts from world rank 0's.
 *
 * Device memory (params, and for stage 1 grads, in CUDA device memory; cfg.mem
 * DT_MEM_DEVICE, or DT_MEM_AUTO finding them there): everything that moves
 * between ranks moves on the device, through the device-memory collectives
 * (coll.h, "Device memory": NCCL, or host staging where NCCL cannot serve the
 * group), enqueued on cfg.stream: stage 1's buckets as in dtrain/ddp.h's device
 * mode, the owners' re-shared slices broadcast into the caller's device vector,
 * stage 2/3's layer gradients reduced from device layer buffers, stage 3's
 * parameters gathered into device layer buffers (the hooks then hand out device
 * pointers). Where this rank's shard and its optimizer live is cfg.offload's:
 *  offload 0 (default): ON THE DEVICE. The fp32 parameter slice (stages 1/2:
 *           the caller's device vector at [lo, hi); stage 3: a device buffer
 *           of its own, the gathers' source), the gradient slice (stage 1: the
 *           caller's averaged device gradients at [lo, hi); stages 2/3: a
 *           device buffer into which each layer's owner piece is added, by a
 *           kernel, and reduced in place) and the optimizer's state
 *           (dt_optim_create_on(DT_DEVICE_CUDA) on cfg.stream) are device
 *           memory; the replicas' sum, averaging, the norm, clipping and the
 *           update are device collectives and the device optimizer's kernels
 *           (the host's arithmetic: the same bits as the host path, except the
 *           norm's double sum, added in another order, see dtrain/optim.h);
 *           the updated slices are re-shared from the device. Nothing of the
 *           shard crosses to the host. Needs the CUDA runtime (a test's fake
 *           device runtime: DT_ERR_UNSUPPORTED from dt_zero_create, naming
 *           cfg.offload).
 *  offload 1: ON THE HOST, as ZeRO-Offload: the parameter and gradient
 *           slices are host copies, the gradient slice copied from the device
 *           at dt_zero_step (stage 1) or added as each layer's reduction
 *           completes (stages 2, 3), the optimizer steps on the host, and the
 *           updated slice is copied back to the device (stage 3: into a device
 *           copy of the slice, the gathers' source) before it is re-shared.
 * dt_zero_shard_mem says which. Hooks wait on the host for the communication
 * they depend on (as on host memory), then the caller's kernels on cfg.stream
 * are ordered after it. dt_zero_gather_range's dst and
 * dt_zero_load_param_shard's slice are host memory either way.
 *
 * Memory accounting (dtrain/mem.h): the shard's slices this object allocates
 * (DT_MEM_PARAMS, DT_MEM_GRADS), the optimizer's state (DT_MEM_OPTIM), the
 * layer buffers (DT_MEM_COMM, DT_MEM_GATHERED), each counted as device memory
 * where it is. */
#ifndef DTRAIN_ZERO_H
#define DTRAIN_ZERO_H

#include <stddef.h>
#include <stdint.h>
#include "dtrain/coll.h"
#include "dtrain/comm.h"
#include "dtrain/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_zero dt_zero;

typedef struct dt_zero_config {
    int stage;                 /* 1, 2 or 3 */
    size_t bucket_cap_bytes;   /* stage 1 gradient buckets and stage 1/2 parameter
                                * broadcast chunks (default 25 MiB; 0 = per layer) */
    size_t first_bucket_bytes; /* stage 1 first bucket (default 1 MiB) */
    int overlap;               /* reduce during backward (default 1) */
    int prefetch;              /* stage 3: prefetch the next layer's gather (default 1) */
    int average;               /* 1 (default): gradients become sum / N; 0: the caller
                                * pre-scaled its gradients (e.g. backward by 1/N) */
    dt_mem_kind mem;           /* where params (and stage 1's grads) live: DT_MEM_AUTO
                                * (default: asks the device runtime once, at create),
                                * DT_MEM_HOST or DT_MEM_DEVICE (see "Device memory") */
    void *stream;              /* device memory: the cudaStream_t the caller's forward and
                                * backward run on (NULL: the default stream) */
    const int *seg_owner;      /* NULL (default: every segment its own), or [nsegs]:
                                * the segment whose parameters segment s computes with
                                * (see SHARED SEGMENTS); read by dt_zero_create only */
    int wire;                  /* the gradients' wire type (dt_wire; default
                                * DT_WIRE_NATIVE): stage 1's buckets as
                                * dt_ddp_config.wire; stages 2 and 3 pass it to the
                                * per-owner-piece dt_reduce_ex (coll.h: the owner's
                                * sum is rounded to the wire type unless it went
                                * through a one-host window, exact); with replicas,
                                * also to the shard's allreduce across them (the leg
                                * between hosts). With gradient accumulation (several
                                * backward passes before a step) the owner's running
                                * shard is its own input to the next micro-step's
                                * reduce, so it is rounded to the wire type again at
                                * each one. Unknown: DT_ERR_INVALID; not native
                                * with device memory: DT_ERR_UNSUPPORTED (host memory
                                * only), from dt_zero_create */
    dt_comm *replicas;         /* NULL (default): comm holds the only copy of the state;
                                * or the ranks holding this rank's shard in the other
                                * replicas (HYBRID SHARDING): each of them must have the
                                * same rank and size in its own comm; must outlive z */
    int param_wire;            /* the parameters' wire type (dt_wire; default
                                * DT_WIRE_NATIVE): stage 1/2's re-sharing of each
                                * owner's updated slice and stage 3's gathers travel
                                * in 16 bits (FSDP's MixedPrecision param_dtype):
                                * every other rank receives the owner's values rounded
                                * to the type, the owner keeps its f32 (its master).
                                * Lossless for a model that computes with bf16 copies
                                * of its parameters (dtrain-train --precision bf16
                                * sets it at stage 3 and with offload; stages 1/2
                                * use params_bf16); dt_zero_gather_range then takes each
                                * piece from its owner. Device memory over a device
                                * transport only (nccl, or one rank): otherwise
                                * DT_ERR_UNSUPPORTED from dt_zero_create; unknown:
                                * DT_ERR_INVALID */
    int offload;               /* device memory only (see "Device memory"): 0 (default)
                                * the shard and the optimizer on the device, 1 on the
                                * host (ZeRO-Offload); ignored for host memory. Not 0
                                * or 1: DT_ERR_INVALID */
    uint16_t *params_bf16;     /* NULL (default), or stages 1/2 (MIXED PRECISION): the
                                * bf16 copy of all num_params parameters the caller's
                                * model computes with, in params' kind of memory. ZeRO
                                * then keeps this rank's f32 slice as the master copy
                                * of its own (hi - lo floats, DT_MEM_PARAMS; what
                                * dt_zero_param_shard returns), writes its bf16
                                * rounding (dt_optim_params_to_bf16) into
                                * params_bf16[lo, hi) after each step and load, and
                                * re-shares params_bf16 in bf16 (half the bytes of f32);
                                * create writes all of it from the broadcast params.
                                * params is then read during create only and may be
                                * released afterwards (as at stage 3), the hooks hand
                                * out no parameter pointers (the model computes from
                                * params_bf16), and dt_zero_gather_range takes each
                                * piece from its owner's f32 master. Per rank: 2P +
                                * 4P/N bytes of parameters, not 4P. Stage 3 or
                                * cfg.offload 1: DT_ERR_INVALID */
    int gather_bf16;           /* 0 (default), or 1 at stage 3 (MIXED PRECISION, as
                                * FSDP's param_dtype bf16): the gathers assemble each
                                * segment's parameters in bf16, each owner's piece its
                                * f32 master's rounding (dt_optim_params_to_bf16, into
                                * the layer buffer): layer buffers of half the bytes,
                                * half the bytes moved, the same values a model
                                * computing in bf16 casts. The hooks then hand out no
                                * f32 parameter pointers: dt_zero_params_bf16 gives
                                * the bf16 ones. dt_zero_gather_range still takes the
                                * f32 masters. Stages 1/2 (see params_bf16) or
                                * cfg.offload 1: DT_ERR_INVALID */
} dt_zero_config;

void dt_zero_config_default(dt_zero_config *cfg);

/* Collective over comm. seg_offset/seg_count: nsegs segments in forward
 * order, inside [0, num_params); cfg->seg_owner (if not NULL) in [0, nsegs),
 * a segment with another owner must be empty and the owner must own itself
 * (DT_ERR_INVALID otherwise); cfg->replicas whose members do not all have the
 * same rank and size in their comm: DT_ERR_INVALID on every rank. params: the full flat vector; for stages 1
 * and 2 it stays the caller's working copy (kept in sync), for stage 3 it is
 * read during create only (after rank 0's values are broadcast into it) and
 * may be released afterwards. grads: the caller's full gradient buffer, stage
 * 1 only (NULL for stages 2 and 3). ocfg: optimizer for the slice. */
/* The communicators of hybrid sharding over `world` (the world communicator:
 * every world rank calls this, as for any rank_list sub-communicator):
 * *shard = the ranks of this rank's host, *replicas = the ranks with this
 * rank's local rank on every host (one per host, in host order; a
 * communicator of one rank on one host). Owned by the communicator pool.
 * Errors, identical on every rank: DT_ERR_INVALID when hosts run different
 * numbers of ranks (naming them) or world is not the world communicator. */
int dt_zero_hybrid_comms(dt_comm *world, dt_comm **shard, dt_comm **replicas);

int dt_zero_create(dt_comm *comm, const dt_zero_config *cfg, size_t num_params,
                   const size_t *seg_offset, const size_t *seg_count, int nsegs,
                   float *params, float *grads, const dt_optim_config *ocfg, dt_zero **out);
void dt_zero_free(dt_zero *z);

/* Start a micro-step; sync = 0 skips gradient communication (stage 1 only). */
int dt_zero_begin_step(dt_zero *z, int sync);
/* Layer hooks. *params / *grads receive where the parameters / gradients of
 * segment seg's owner (seg itself unless cfg.seg_owner says otherwise) live
 * for this pass (NULL when the owner is empty); point the OWNER there. Stage
 * 1/2 pre_forward waits for the owner's pending parameter broadcasts.
 * Gradient buffers handed out by pre_backward are zeroed (a shared owner's:
 * at its first user of the backward only). */
int dt_zero_pre_forward(dt_zero *z, int seg, float **params);
int dt_zero_post_forward(dt_zero *z, int seg);
int dt_zero_pre_backward(dt_zero *z, int seg, float **params, float **grads);
int dt_zero_grad_ready(dt_zero *z, int seg);
int dt_zero_post_backward(dt_zero *z, int seg);
/* cfg.gather_bf16: the bf16 parameters of seg's owner that the last
 * dt_zero_pre_forward / pre_backward of seg gathered (count values, memory
 * of params' kind), valid until the matching post hook; NULL otherwise (no
 * gather_bf16, an empty owner, not acquired, NULL z or a bad index). */
const uint16_t *dt_zero_params_bf16(const dt_zero *z, int seg);
/* Wait for this micro-step's gradient communication. */
int dt_zero_finish(dt_zero *z);
/* After the last micro-step: if max_grad_norm > 0, scale the gradients by
 * min(1, max_grad_norm / (norm + 1e-6)) where norm is the L2 norm over ALL
 * shards (as torch.nn.utils.clip_grad_norm_); step the optimizer on the slice
 * with lr; zero the gradient shard (stages 2, 3); start re-sharing the
 * parameters (stages 1, 2). *grad_norm (may be NULL) receives the norm before
 * clipping. The norm (a pass over the shard and a scalar allreduce) is only
 * computed when max_grad_norm > 0 or grad_norm is not NULL; the call is
 * collective either way, but every rank must pass the same choice. */
int dt_zero_step(dt_zero *z, float lr, double max_grad_norm, double *grad_norm);

/* This rank's slice [*lo, *hi). */
int dt_zero_shard(const dt_zero *z, size_t *lo, size_t *hi);
/* This rank's parameter and gradient slices, [hi - lo] floats each, and the
 * optimizer over them: memory of the kind dt_zero_shard_mem says (device
 * memory, and a device optimizer, dtrain/optim.h's dt_optim_create_on, for
 * device params without cfg.offload). Stages 1/2 on the device: views of the
 * caller's params and (stage 1) grads at [lo, hi), except with
 * cfg.params_bf16, where the parameter slice is ZeRO's own. Stages 2/3 zero the
 * gradient slice at the end of dt_zero_step; offload's stage 1 fills its host
 * copy at the start of it. */
float *dt_zero_param_shard(dt_zero *z);
float *dt_zero_grad_shard(dt_zero *z);
dt_optim *dt_zero_optim(dt_zero *z);
/* DT_MEM_DEVICE when the shard and the optimizer's state are device memory,
 * DT_MEM_HOST otherwise (host params, or cfg.offload; also for NULL). */
dt_mem_kind dt_zero_shard_mem(const dt_zero *z);
/* Copy the global range [offset, offset + count) of the parameters into dst
 * on the rank with world rank `root`, a member of comm (dst may be NULL
 * elsewhere). Collective over comm (with replicas: only root's replica calls it);
 * moves only the pieces other ranks own (for consolidated checkpoints of
 * stage 3, layer by layer). */
int dt_zero_gather_range(dt_zero *z, size_t offset, size_t count, float *dst, int root);
/* Replace this rank's parameter slice with `slice` (host memory, hi - lo
 * floats; e.g. after loading a checkpoint): copied into the shard wherever it
 * lives (offload: and into the device copy); stages 1/2 re-share it with
 * every rank. Collective. */
int dt_zero_load_param_shard(dt_zero *z, const float *slice);

#ifdef __cplusplus
}
#endif
#endif
