/* src/comm/comm_internal.h - internal: the communicator object and the
 * backend vtable. A backend implements the data movement for one transport
 * (void = standalone size-1, mpi; nccl later) on arguments the collective layer
 * has already validated: counts fit, buffers non-NULL, roots/peers are GROUP
 * ranks, in-place requests follow coll.h's conventions. */
#ifndef DT_COMM_INTERNAL_H
#define DT_COMM_INTERNAL_H

#include <stddef.h>
#include "dtrain/comm.h"
#include "dtrain/dtype.h"

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
    /* Collective over the world communicator `world`: build the communicator of
     * this rank's group (color >= 0, members sorted by world rank) into `out`
     * (info and world_ranks filled by the caller except local_rank/local_size,
     * which the backend sets). Only called with color >= 0 and size > 1. */
    int (*split)(dt_comm *world, int color, dt_comm *out);
    /* Largest element count one call can move per rank block. */
    size_t max_count;
    void (*destroy)(dt_comm *c);
} dt_backend_ops;

struct dt_comm {
    unsigned magic;             /* DT_COMM_MAGIC while alive */
    const dt_backend_ops *ops;
    dt_comm_info info;
    int *world_ranks;           /* [size] world rank of each member, ascending */
    void *impl;                 /* backend state (e.g. the MPI_Comm) */
    char *key;                  /* canonical rank_list (pool entries), NULL for world */
    struct dt_comm *next;       /* pool list */
};

#define DT_COMM_MAGIC 0xd7c0330du

extern const dt_backend_ops dt_backend_void;
extern const dt_backend_ops dt_backend_mpi;

/* Build a standalone (size 1, void backend) communicator for this process. */
int dt_comm_make_standalone(int world_rank, int world_size, int group_id, int group_size,
                            dt_comm **out);
void dt_comm_destroy(dt_comm *c);
/* DT_OK if comm is usable (runtime initialised, comm non-NULL and alive). */
int dt_comm_check(const dt_comm *comm, const char *func);

/* MPI backend entry points used by the runtime. */
int dt_mpi_world_create(dt_comm **out, int *we_initialized);
int dt_mpi_finalize(int we_initialized);
/* Thread level MPI granted (MPI_THREAD_* value), -1 when MPI is not in use. */
int dt_mpi_thread_level(void);
/* Max-combine `n` uint64 words over the world (used to compare rank_lists). */
int dt_mpi_world_max_u64(dt_comm *world, unsigned long long *vals, int n);

/* Pool, called by the runtime at finalize. */
void dt_pool_clear(void);

#endif
