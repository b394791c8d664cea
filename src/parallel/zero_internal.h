/* src/parallel/zero_internal.h - internal: the ZeRO object (dtrain/zero.h)
 * shared by its two files: zero.c (create, the layer hooks, the micro-steps)
 * and zero_shard.c (this rank's shard: where it and its optimizer live, the
 * gradient pieces reduced into it, the step, the re-sharing of the updated
 * parameters, gathering and loading). */
#ifndef DT_PARALLEL_ZERO_INTERNAL_H
#define DT_PARALLEL_ZERO_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "core/mem.h"
#include "dtrain/coll.h"
#include "dtrain/ddp.h"
#include "dtrain/zero.h"

#define MAXW 64 /* pending works per layer buffer (one per owner piece) */

typedef struct wlist { dt_work *w[MAXW]; int n; } wlist;

typedef struct layerbuf { /* a reusable layer-sized buffer */
    float *buf;
    int seg;   /* segment it holds, -1 if free */
    wlist pending;
    /* offload: this rank's piece, reduced in place in buf, still to be added
     * into the (host) gradient shard once pending completes */
    size_t acc_off, acc_n;
    const float *acc_src;
} layerbuf;

typedef struct chunk { size_t a, b; dt_work *w; } chunk;

/* Where this rank's shard (its parameter and gradient slices) and the
 * optimizer's state live (dtrain/zero.h, "Device memory"). */
typedef enum zero_where {
    ZW_HOST = 0,    /* host memory: the caller's vectors are host memory */
    ZW_DEVICE = 1,  /* device memory, stepped by the device optimizer */
    ZW_OFFLOAD = 2  /* device parameters, host shard and optimizer (cfg.offload) */
} zero_where;

struct dt_zero {
    dt_comm *comm;
    dt_comm_info ci;
    dt_zero_config cfg;
    int N, r;
    int R;          /* replicas (hybrid sharding: cfg.replicas' size), else 1 */
    size_t P, S, lo, hi;
    int nsegs;
    size_t *off, *cnt, maxseg; /* maxseg: the largest segment */
    size_t maxbuf;  /* the largest segment that is not shared: gb/pb's size */
    float *params;  /* stage 1/2: caller's full vector (NULL with p16) */
    uint16_t *p16;  /* cfg.params_bf16: the caller's bf16 copy, re-shared in
                     * bf16 from the owners' f32 master slices (p_shard, own) */
    float *grads;   /* stage 1: caller's full gradients */
    /* the shard: [hi - lo] each, where `where` says (ZW_DEVICE, stages 1/2:
     * p_shard is the caller's params + lo; stage 1: g_shard its grads + lo) */
    float *p_shard, *g_shard;
    int own_p, own_g;
    dt_optim *opt;
    dt_ddp *ddp;    /* stage 1 */
    int *ddp_seg;   /* seg -> ddp segment */
    layerbuf gb[2]; /* stage 2/3 gradient layer buffers */
    layerbuf pb[2]; /* stage 3 gathered parameter buffers */
    int *owner;     /* [nsegs] segment whose parameters each computes with */
    int *umin, *umax; /* [nsegs] lowest / highest segment using each one's parameters */
    layerbuf *sp, *sg; /* [nsegs] a shared segment's own stage 3 parameter /
                        * stage 2-3 gradient buffer (buf NULL for the others) */
    chunk *chunks;  /* stage 1/2 parameter broadcasts in flight */
    int nchunks, capchunks;
    int in_step, sync;
    /* device memory (cfg.mem DT_MEM_DEVICE): params, grads (stage 1) and the
     * layer buffers live on the device */
    int dev;
    zero_where where;
    dt_coll_opts co;  /* the collectives' memory and stream */
    dt_coll_opts gco; /* co with cfg.wire: the stage 2/3 gradient reduces */
    dt_coll_opts pco; /* co with cfg.param_wire: stage 1/2's re-sharing, stage 3's gathers */
    dt_coll_opts rco; /* hybrid sharding: the shard's allreduce across the
                       * replicas (the shard's memory; host: cfg.wire) */
    float *p_dev;     /* ZW_OFFLOAD, stage 3: this rank's slice on the device
                       * (the gathers' source) */
    float *acc_host;  /* ZW_OFFLOAD, stages 2/3: [maxseg], a reduced piece
                       * copied back for the host shard */
};

/* Calls the body for each owner piece [pa, pb) of [a, b), o its owner. */
#define FOR_PIECES(z, a, b, o, pa, pb)                                                    \
    for (int o = (int)((a) / (z)->S); (size_t)o * (z)->S < (b) && o < (z)->N; o++)         \
        for (size_t pa = (a) > (size_t)o * (z)->S ? (a) : (size_t)o * (z)->S,               \
                    pb = (b) < ((size_t)o + 1) * (z)->S ? (b) : ((size_t)o + 1) * (z)->S,   \
                    once_ = 1; once_ && pa < pb; once_ = 0)

/* ---- zero.c ---- */
/* Wait for and free every work of l; the first error. */
int zero_wait_list(wlist *l);
/* The world rank of group rank o of z->comm. */
int zero_owner_world(const dt_zero *z, int o);
/* n floats copied on the configured stream, complete when it returns. */
int zero_dcopy(const dt_zero *z, void *dst, const void *src, size_t n);
/* n floats registered (sign 1) or released (-1) in category c, on the
 * device or not. */
void zero_mem(dt_mem_category c, size_t n, int device, int sign);

/* ---- zero_shard.c ---- */
/* This rank's shard and optimizer where z->where says, from the caller's
 * params (after create's broadcast; stage 1: grads, the full gradients). */
int zero_shard_create(dt_zero *z, float *params, float *grads, const dt_optim_config *ocfg);
/* Releases what zero_shard_create made (any part of it). */
void zero_shard_free(dt_zero *z);
/* Stages 2/3, this rank's owner piece [pa, pb) of layer buffer g (which
 * holds [a, ...)): reduced (with every rank's) into the gradient shard,
 * asynchronously: the work in *w. */
int zero_shard_reduce(dt_zero *z, layerbuf *g, size_t a, size_t pa, size_t pb, dt_work **w);
/* Wait for a gradient layer buffer's reduces (offload: then add this rank's
 * reduced piece into the host shard). */
int zero_wait_grads(dt_zero *z, layerbuf *g);
/* Stages 1/2: wait for the re-shared chunks overlapping [a, b). */
int zero_wait_chunks(dt_zero *z, size_t a, size_t b);
/* Stage 3: where the gathers read this rank's slice (memory of the
 * collectives' kind: device memory for device params). */
const float *zero_gather_src(const dt_zero *z);

#endif
