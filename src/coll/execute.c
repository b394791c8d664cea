/* src/coll/execute.c - what the engine runs (coll/engine.c): one validated
 * descriptor gets its sequence number and is published for the watchdog,
 * then takes the device path (device memory: device_path.c) or the host path
 * (host_path.c). */
#include <stdint.h>
#include <stdlib.h>
#include "coll/coll_internal.h"
#include "core/error.h"
#include "watchdog/watchdog.h"

int dt_coll_execute(const dt_coll_desc *d, dt_fp_hdr *hdr_out) {
    dt_comm *c = d->comm;
    uint64_t *counter = &c->seq;
    if (d->kind == DT_COLL_SEND || d->kind == DT_COLL_RECV) {
        /* per peer and direction, so both ends of a pair count alike */
        if (!c->p2p_seq && !(c->p2p_seq = calloc(2 * (size_t)c->info.size, sizeof *c->p2p_seq)))
            return DT_ERR(DT_ERR_NOMEM, "out of memory for point-to-point sequence numbers");
        counter = &c->p2p_seq[2 * (size_t)d->root + (d->kind == DT_COLL_RECV)];
    }
    uint64_t seq = ++*counter;
    dt_fp_hdr mine, *h = hdr_out ? hdr_out : &mine;
    dt_fp_fill(h, d, seq);
    dt_wd_op_begin(h->cid, h->kind, seq, h->dtype, h->count, h->root, h->op, h->nlist);
    int rc = d->mem == DT_MEM_DEVICE ? dt_dev_execute(d, h) : dt_coll_run_host(d, h);
    dt_wd_op_end();
    /* A mismatched call does not count (every rank that took part rolls
     * back), so the ranks stay in step for the calls that follow. */
    if (rc == DT_ERR_MISMATCH) --*counter;
    return rc;
}
