/* src/comm/comm_internal.h - internal: the communicator object (the struct
 * behind dtrain/comm.h's dt_comm), creating and checking one, its identity
 * for messages, the world and whether the runtime is up. The communicator
 * layer sits on the bootstrap and core, below the transports: a transport
 * keeps its state in a communicator (impl, dev_impl) and reads its
 * attributes, so it includes this header; this layer knows the transports
 * only as pointers to their tables (transport/transport.h destroys a
 * communicator through them, dt_comm_destroy). */
#ifndef DT_COMM_INTERNAL_H
#define DT_COMM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "dtrain/comm.h"

struct dt_backend_ops;  /* a host transport's table (transport/transport.h) */
struct dt_dev_backend;  /* a device transport's table (transport/transport.h) */

struct dt_comm {
    unsigned magic;             /* DT_COMM_MAGIC while alive */
    const struct dt_backend_ops *ops;
    const struct dt_dev_backend *dev; /* device memory over a device transport; NULL: staged */
    void *dev_impl;
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

/* A communicator of size 1 for this process on transport ops (the void
 * transport's: dt_backend_void). */
int dt_comm_make_standalone(const struct dt_backend_ops *ops, int world_rank, int world_size, int group_id,
                            int group_size, dt_comm **out);
/* A communicator of `size` members world_ranks (ascending; taken over) on
 * transport ops, this process being members[rank]: info filled (local
 * attributes from the bootstrap's hosts), impl NULL. */
int dt_comm_make(const struct dt_backend_ops *ops, int *world_ranks, int size, int rank, int group_id, int group_size,
                 dt_comm **out);
/* Frees the object c (NULL: no-op): its plain dt_comm_alloc_shared memory
 * left, its arrays, itself. The transports' state goes first, through
 * dt_comm_destroy (transport/transport.h), which ends with this. */
void dt_comm_free(dt_comm *c);
/* DT_OK if comm is usable (runtime initialised, comm non-NULL and alive). */
int dt_comm_check(const dt_comm *comm, const char *func);
/* The runtime's world communicator (NULL: not initialised). */
void dt_comm_set_world(dt_comm *world);

/* 64-bit FNV-1a of a string, continuing from h (start: DT_FNV_BASIS). */
#define DT_FNV_BASIS 1469598103934665603ull
uint64_t dt_fnv1a(uint64_t h, const void *data, size_t n);
/* Set cid / gkey of a new communicator and register its name and members for
 * messages (stall reports, mismatches). */
void dt_comm_set_identity(dt_comm *c, uint32_t cid);

#endif
