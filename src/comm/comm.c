/* src/comm/comm.c - communicator objects: creation with their attributes,
 * attributes and rank translation, the world. (Which transport serves a
 * communicator, dt_comm_backend and dt_comm_device_path, and destroying one
 * through its transports: transport/transport.c.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bootstrap/bootstrap.h"
#include "comm/comm_internal.h"
#include "comm/registry.h"
#include "core/error.h"

static dt_comm *g_world; /* set by the runtime between dt_init and dt_finalize */

void dt_comm_set_world(dt_comm *world) { g_world = world; }

int dt_is_initialized(void) { return g_world != NULL; }

dt_comm *dt_comm_world(void) { return g_world; }

uint64_t dt_fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) { h ^= p[i]; h *= 1099511628211ull; }
    return h;
}

void dt_comm_set_identity(dt_comm *c, uint32_t cid) {
    const char *key = c->key ? c->key : "world";
    uint64_t g = dt_fnv1a(DT_FNV_BASIS, key, strlen(key));
    c->cid = cid;
    c->gkey = dt_fnv1a(g, &c->info.group_id, sizeof c->info.group_id);
    dt_reg_add(cid, c->key, c->info.world_size, c->info.group_id, c->world_ranks, c->info.size);
}

int dt_comm_check(const dt_comm *comm, const char *func) {
    if (!dt_is_initialized())
        return dt_error(DT_ERR_STATE, func, "dtrain is not initialised (call dt_init first, and not after dt_finalize)");
    if (!comm) return dt_error(DT_ERR_INVALID, func, "communicator is NULL");
    if (comm->magic != DT_COMM_MAGIC)
        return dt_error(DT_ERR_INVALID, func, "communicator %p is not a live dtrain communicator", (const void *)comm);
    return DT_OK;
}

int dt_comm_info_get(const dt_comm *comm, dt_comm_info *info) {
    int rc = dt_comm_check(comm, __func__);
    if (rc) return rc;
    if (!info) return DT_ERR(DT_ERR_INVALID, "info is NULL");
    *info = comm->info;
    return DT_OK;
}

int dt_comm_rank(const dt_comm *comm) {
    int rc = dt_comm_check(comm, __func__);
    return rc ? rc : comm->info.rank;
}

int dt_comm_size(const dt_comm *comm) {
    int rc = dt_comm_check(comm, __func__);
    return rc ? rc : comm->info.size;
}

int dt_comm_group_rank(const dt_comm *comm, int world_rank) {
    int rc = dt_comm_check(comm, __func__);
    if (rc) return rc;
    /* world_ranks is ascending: binary search */
    int lo = 0, hi = comm->info.size - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int w = comm->world_ranks[mid];
        if (w == world_rank) return mid;
        if (w < world_rank) lo = mid + 1; else hi = mid - 1;
    }
    char members[160];
    int n = 0;
    for (int i = 0; i < comm->info.size && n < (int)sizeof members - 16; i++)
        n += snprintf(members + n, sizeof members - (size_t)n, "%s%d", i ? "," : "", comm->world_ranks[i]);
    if (n >= (int)sizeof members - 16) snprintf(members + n, sizeof members - (size_t)n, ",...");
    return DT_ERR(DT_ERR_INVALID, "world rank %d is not a member of this communicator (members: [%s])",
                  world_rank, members);
}

int dt_comm_world_rank_of(const dt_comm *comm, int rank) {
    int rc = dt_comm_check(comm, __func__);
    if (rc) return rc;
    if (rank < 0 || rank >= comm->info.size)
        return DT_ERR(DT_ERR_INVALID, "rank %d out of range [0, %d)", rank, comm->info.size);
    return comm->world_ranks[rank];
}

int dt_comm_host_of(const dt_comm *comm, int rank) {
    int rc = dt_comm_check(comm, __func__);
    if (rc) return rc;
    if (rank < 0 || rank >= comm->info.size)
        return DT_ERR(DT_ERR_INVALID, "rank %d out of range [0, %d)", rank, comm->info.size);
    const dt_boot *b = dt_boot_get();
    return b && b->host ? b->host[comm->world_ranks[rank]] : 0;
}

int dt_comm_make_standalone(const struct dt_backend_ops *ops, int world_rank, int world_size, int group_id,
                            int group_size, dt_comm **out) {
    dt_comm *c = calloc(1, sizeof *c);
    int *wr = malloc(sizeof *wr);
    if (!c || !wr) { free(c); free(wr); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    wr[0] = world_rank;
    c->magic = DT_COMM_MAGIC;
    c->ops = ops;
    c->world_ranks = wr;
    c->info = (dt_comm_info){.rank = 0, .size = 1, .local_rank = 0, .local_size = 1,
                             .world_rank = world_rank, .world_size = world_size,
                             .group_id = group_id, .group_size = group_size};
    *out = c;
    return DT_OK;
}

int dt_comm_make(const struct dt_backend_ops *ops, int *world_ranks, int size, int rank, int group_id, int group_size,
                 dt_comm **out) {
    const dt_boot *b = dt_boot_get();
    dt_comm *c = calloc(1, sizeof *c);
    if (!c) { free(world_ranks); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    c->magic = DT_COMM_MAGIC;
    c->ops = ops;
    c->world_ranks = world_ranks;
    c->info = (dt_comm_info){.rank = rank, .size = size, .local_rank = 0, .local_size = 1,
                             .world_rank = world_ranks[rank], .world_size = b ? b->size : 1,
                             .group_id = group_id, .group_size = group_size};
    /* local attributes: the members on this rank's host, by world rank */
    if (b && b->host) {
        int mine = b->host[c->info.world_rank];
        c->info.local_rank = c->info.local_size = 0;
        for (int i = 0; i < size; i++)
            if (b->host[world_ranks[i]] == mine) {
                if (i < rank) c->info.local_rank++;
                c->info.local_size++;
            }
    }
    *out = c;
    return DT_OK;
}

void dt_comm_free(dt_comm *c) {
    if (!c) return;
    c->magic = 0;
    /* plain dt_comm_alloc_shared memory the caller did not give back */
    for (int i = 0; i < c->n_plain_shared; i++) free(c->plain_shared[i]);
    free(c->plain_shared);
    free(c->world_ranks);
    free(c->key);
    free(c->p2p_seq);
    free(c);
}
