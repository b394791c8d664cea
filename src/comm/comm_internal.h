/* src/comm/comm_internal.h - internal: the communicator layer (above the
 * bootstrap and the transports, below the collectives): creating and
 * checking communicator objects, their identity for messages, the world and
 * whether the runtime is up. */
#ifndef DT_COMM_INTERNAL_H
#define DT_COMM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "transport/transport.h"

/* A communicator of size 1 on the void transport for this process. */
int dt_comm_make_standalone(int world_rank, int world_size, int group_id, int group_size,
                            dt_comm **out);
/* A communicator of `size` members world_ranks (ascending; taken over) on
 * transport ops, this process being members[rank]: info filled (local
 * attributes from the bootstrap's hosts), impl NULL. */
int dt_comm_make(const dt_backend_ops *ops, int *world_ranks, int size, int rank, int group_id, int group_size,
                 dt_comm **out);
/* Frees c: the transport's state, plain dt_comm_alloc_shared memory left. */
void dt_comm_destroy(dt_comm *c);
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
