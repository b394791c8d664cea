/* src/coll/host_path.c - the host path of a descriptor (host memory, or the
 * staged copy of device memory): the transport's op for its kind (list
 * collectives and the per-rank reduce_scatter through the fusion's staging,
 * fusion.c), fingerprint-checked first (fingerprint.c) when the check is on
 * and the group has more than one rank. */
#include "coll/coll_internal.h"
#include "core/error.h"

int dt_coll_transport(const dt_coll_desc *d) {
    dt_comm *c = d->comm;
    const dt_backend_ops *o = c->ops;
    switch (d->kind) {
    case DT_COLL_ALLREDUCE: return dt_transport_allreduce(c, d->send, d->recv, d->count, d->dtype, d->op, d->wire);
    case DT_COLL_ALLGATHER: return o->allgather(c, d->send, d->recv, d->count, d->dtype);
    case DT_COLL_REDUCE_SCATTER:
        return dt_transport_reduce_scatter(c, d->send, d->recv, d->count, d->dtype, d->op, d->wire);
    case DT_COLL_REDUCE: return dt_transport_reduce(c, d->send, d->recv, d->count, d->dtype, d->op, d->root, d->wire);
    case DT_COLL_BROADCAST: return o->broadcast(c, d->send, d->recv, d->count, d->dtype, d->root);
    case DT_COLL_GATHER: return o->gather(c, d->send, d->recv, d->count, d->dtype, d->root);
    case DT_COLL_SCATTER: return o->scatter(c, d->send, d->recv, d->count, d->dtype, d->root);
    case DT_COLL_ALL_TO_ALL: return o->all_to_all(c, d->send, d->recv, d->count, d->dtype);
    case DT_COLL_SEND: return o->send(c, d->send, d->count, d->dtype, d->root);
    case DT_COLL_RECV: return o->recv(c, d->recv, d->count, d->dtype, d->root);
    case DT_COLL_BARRIER: return o->barrier(c);
    case DT_COLL_REDUCE_SCATTER_PER_RANK: return dt_per_rank_execute(d);
    default: return dt_fusion_execute(d);
    }
}

static int run_transport(const dt_coll_desc *d, void *arg) {
    (void)arg;
    return dt_coll_transport(d);
}

int dt_coll_run_host(const dt_coll_desc *d, dt_fp_hdr *h) {
    dt_comm *c = d->comm;
    return (c->info.size > 1 && c->ops->check && dt_rel_check_on()) ? dt_fp_execute(d, h, run_transport, NULL)
                                                                    : dt_coll_transport(d);
}
