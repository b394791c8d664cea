/* src/runtime/shared_mem.c - dt_comm_alloc_shared / dt_comm_free_shared:
 * memory that every member of an intra-node communicator can load directly
 * (the backend's alloc_shared op), so that in-place allreduces within it
 * skip the staging copies; plain memory where the backend has none (freed
 * with the communicator if the caller does not give it back). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "coll/engine.h"
#include "comm/comm_internal.h"
#include "core/error.h"

int dt_comm_alloc_shared(dt_comm *comm, size_t bytes, void **ptr) {
    if (!ptr) return DT_ERR(DT_ERR_INVALID, "ptr is NULL");
    *ptr = NULL;
    int rc = dt_comm_check(comm, __func__);
    if (rc) return rc;
    if (bytes == 0 || bytes > (size_t)PTRDIFF_MAX)
        return DT_ERR(DT_ERR_INVALID, "bytes %zu is out of range (1..%zu)", bytes, (size_t)PTRDIFF_MAX);
    if (comm->n_plain_shared == comm->cap_plain_shared) { /* room first: nothing to undo after a collective */
        int cap = comm->cap_plain_shared ? 2 * comm->cap_plain_shared : 4;
        void **t = realloc(comm->plain_shared, sizeof *t * (size_t)cap);
        if (!t) return DT_ERR(DT_ERR_NOMEM, "out of memory");
        comm->plain_shared = t;
        comm->cap_plain_shared = cap;
    }
    rc = DT_DECLINED;
    if (comm->ops->alloc_shared) { /* collective: in order with the queued collectives */
        dt_engine_exclusive_begin();
        rc = comm->ops->alloc_shared(comm, bytes, ptr);
        dt_engine_exclusive_end();
    }
    if (rc != DT_DECLINED) return rc;
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes) != 0) return DT_ERR(DT_ERR_NOMEM, "out of memory for %zu bytes", bytes);
    memset(p, 0, bytes);
    comm->plain_shared[comm->n_plain_shared++] = p;
    *ptr = p;
    return DT_OK;
}

int dt_comm_free_shared(dt_comm *comm, void *ptr) {
    int rc = dt_comm_check(comm, __func__);
    if (rc || !ptr) return rc;
    for (int i = 0; i < comm->n_plain_shared; i++)
        if (comm->plain_shared[i] == ptr) {
            free(ptr);
            comm->plain_shared[i] = comm->plain_shared[--comm->n_plain_shared];
            return DT_OK;
        }
    rc = comm->ops->free_shared ? comm->ops->free_shared(comm, ptr) : DT_DECLINED;
    if (rc == DT_DECLINED)
        return DT_ERR(DT_ERR_INVALID, "%p was not allocated by dt_comm_alloc_shared on this communicator (or is freed)", ptr);
    return rc;
}
