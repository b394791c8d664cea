/* tests/fakegpu/fake_shm.h - the fake NCCL's data path between processes
 * (fakegpu.h): one shared-memory segment per communicator, holding a barrier,
 * one slot of FK_CHUNK bytes per rank for the collectives, and one mailbox of
 * FK_CHUNK bytes per ordered pair of ranks for send/recv. Buffers given to
 * these functions are host addresses (device memory's shadows). */
#ifndef DT_FAKE_SHM_H
#define DT_FAKE_SHM_H

#include <nccl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define FK_MAXR 64
#define FK_CHUNK ((size_t)64 << 10)

typedef struct fk_box {
    _Atomic uint32_t full; /* 1 while the data waits for the receiver */
    uint32_t bytes;        /* in this chunk */
    uint64_t total;        /* bytes of the whole message */
} fk_box;

typedef struct fk_shared {
    _Atomic uint32_t arrived, gen; /* the barrier */
    _Atomic int aborted;           /* 1 + the rank that called ncclCommAbort */
    int32_t color[FK_MAXR], key[FK_MAXR];
    uint64_t where[FK_MAXR];       /* host and device of each rank */
} fk_shared;

enum { FK_COMM_LIVE = 0xcc11 }; /* ncclComm.magic of a live communicator */

struct ncclComm {
    int magic;
    char name[160];
    int n, rank, dev, world;
    fk_shared *sh;
    size_t maplen;
    unsigned splits;        /* ncclCommSplit calls so far: the same on every rank */
    _Atomic int aborted;    /* this rank called ncclCommAbort */
    _Atomic int async;      /* what ncclCommGetAsyncError reports */
    long calls;             /* collective calls so far */
    char last[384];         /* ncclGetLastError */
};

/* Join communicator `name` (a segment name made by ncclGetUniqueId or a
 * split) as rank `rank` of `n`, on device dev; collective over the n ranks.
 * Refuses two ranks on one device of one host unless
 * NCCL_MULTI_RANK_GPU_ENABLE=1. On error *out is NULL and last (if given)
 * says why. */
ncclResult_t fk_open(const char *name, int n, int rank, int dev, struct ncclComm **out, char *last, size_t cap);
/* Unmap and free (not collective). */
void fk_close(struct ncclComm *c);
/* Every rank of c; fails (ncclRemoteError) once a rank aborted c. */
ncclResult_t fk_barrier(struct ncclComm *c);
/* ncclSuccess, or the error a waiting call returns after an abort. */
ncclResult_t fk_alive(struct ncclComm *c);
/* Wait a little (spin, then yield, then sleep) after `spins` vain tries. */
void fk_backoff(unsigned *spins);
fk_box *fk_box_of(struct ncclComm *c, int src, int dst);
char *fk_box_data(fk_box *b);

size_t fk_type_size(ncclDataType_t t); /* 0: not a type the fake has */

/* The collectives, blocking, on host addresses. */
ncclResult_t fk_allreduce(struct ncclComm *c, const char *s, char *r, size_t count, ncclDataType_t t, ncclRedOp_t op);
ncclResult_t fk_reduce(struct ncclComm *c, const char *s, char *r, size_t count, ncclDataType_t t, ncclRedOp_t op,
                       int root);
ncclResult_t fk_broadcast(struct ncclComm *c, const char *s, char *r, size_t count, ncclDataType_t t, int root);
ncclResult_t fk_allgather(struct ncclComm *c, const char *s, char *r, size_t count, ncclDataType_t t);
ncclResult_t fk_reduce_scatter(struct ncclComm *c, const char *s, char *r, size_t count, ncclDataType_t t,
                               ncclRedOp_t op);

#endif
