/* src/parallel/zero_hybrid.c - the communicators of hybrid sharding (ZeRO
 * sharded within each host, replicated across hosts; dtrain/zero.h): one
 * rank_list of the hosts' ranks, one of the ranks of each local rank. */
#include <stdio.h>
#include <stdlib.h>
#include "core/error.h"
#include "dtrain/zero.h"

int dt_zero_hybrid_comms(dt_comm *world, dt_comm **shard, dt_comm **replicas) {
    if (!world || !shard || !replicas) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    *shard = *replicas = NULL;
    dt_comm_info ci;
    int rc = dt_comm_info_get(world, &ci);
    if (rc) return rc;
    if (ci.size != ci.world_size)
        return DT_ERR(DT_ERR_INVALID, "hybrid sharding (shard_group host) needs the world communicator (this one has "
                      "%d of the %d world ranks)", ci.size, ci.world_size);
    const int N = ci.size;
    int *host = malloc(sizeof(int) * (size_t)N), *count = calloc((size_t)N, sizeof(int));
    int *ranks = malloc(sizeof(int) * (size_t)N), *lens = malloc(sizeof(int) * (size_t)N);
    if (!host || !count || !ranks || !lens) {
        rc = DT_ERR(DT_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* hosts are numbered in the order of their lowest world rank: 0..H-1 */
    int H = 0;
    for (int r = 0; r < N; r++) {
        if ((host[r] = dt_comm_host_of(world, r)) < 0 || host[r] >= N) {
            rc = host[r] < 0 ? host[r] : DT_ERR(DT_ERR_INTERNAL, "host %d of rank %d out of range", host[r], r);
            goto out;
        }
        if (host[r] >= H) H = host[r] + 1;
        count[host[r]]++;
    }
    const int L = count[0];
    for (int h = 1; h < H; h++)
        if (count[h] != L) {
            char who[128] = "";
            int k = 0;
            for (int r = 0; r < N && k < (int)sizeof who - 16; r++)
                if (host[r] == h) k += snprintf(who + k, sizeof who - (size_t)k, "%s%d", k ? "," : "", r);
            rc = DT_ERR(DT_ERR_INVALID, "shard_group host needs the same number of ranks on every host: host 0 (of "
                        "world rank 0) runs %d, host %d (world ranks %s) runs %d; launch as many ranks on each host "
                        "or use shard_group world", L, h, who, count[h]);
            goto out;
        }
    /* the hosts' ranks: [[host 0's], [host 1's], ...] (ascending in each) */
    int n = 0;
    for (int h = 0; h < H; h++) {
        lens[h] = L;
        for (int r = 0; r < N; r++) if (host[r] == h) ranks[n++] = r;
    }
    if ((rc = dt_comm_from_rank_list(ranks, lens, H, shard))) goto out;
    /* the ranks of each local rank, one per host: [[l0 of host 0, l0 of host 1, ...], [l1 ...], ...]
     * (ranks[] lists host h's local rank l at h * L + l) */
    int *byl = malloc(sizeof(int) * (size_t)N);
    if (!byl) {
        rc = DT_ERR(DT_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int l = 0; l < L; l++) {
        lens[l] = H;
        for (int h = 0; h < H; h++) byl[l * H + h] = ranks[h * L + l];
    }
    rc = dt_comm_from_rank_list(byl, lens, L, replicas);
    free(byl);
out:
    if (rc) *shard = *replicas = NULL;
    free(host);
    free(count);
    free(ranks);
    free(lens);
    return rc;
}
