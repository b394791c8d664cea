/* src/coll/device_plan.c - pure functions of the device path (no device
 * call): the buffers a call uses on this rank (for its memory kind and for
 * staging), and the primitives a device transport enqueues for it.
 *
 * Plans (P group size, r this rank, R the root, c the count, all GROUP ranks):
 *  - allreduce, allgather, reduce_scatter, reduce, broadcast: the transport's
 *    own collective (NCCL's in-place conventions are dtrain's);
 *  - gather: every rank but R sends its block to R; R receives block k from
 *    rank k and copies its own block (unless in place);
 *  - scatter: R sends block k to rank k and copies its own (unless in place);
 *    the others receive;
 *  - all_to_all: a send and a receive per other rank and a copy of the own
 *    block; in place, the input is first copied to scratch and sent from
 *    there (the own block is already in place);
 *  - lists: one primitive per tensor, in one group (allreduce: tensors of one
 *    dtype lying back to back in memory, inputs and outputs alike, merge into
 *    one allreduce: a data-parallel bucket of views is one call);
 *  - reduce_scatter of one tensor per rank: inputs back to back, out of
 *    place: one reduce_scatter; otherwise one reduce per rank k with root k
 *    (input in[k], output only on k), so no input is staged or changed;
 *  - barrier: the transport's barrier;
 *  - a compressed wire (dt_dev_wire_plan, over a group of more than one):
 *    each f32 reduction of the plan becomes pack (f32 -> the wire type, into
 *    the scratch), the same reduction on the packed values in the wire type
 *    (in place there; an average becomes a sum) and, where the rank has a
 *    result, unpack (the wire type -> f32, divided by P for an average): the
 *    packs before the group, the unpacks after it. An f32 broadcast: the
 *    root packs and copies its own values (unless in place), the others
 *    unpack what they receive. */
#include <stdint.h>
#include "coll/coll_internal.h"

static size_t esz(const dt_coll_desc *d) { return dt_dtype_size(d->dtype); }

/* ---- regions ------------------------------------------------------------------ */

typedef struct rlist { dt_region *r; int n, cap; } rlist;

static void add(rlist *l, const void *p, size_t bytes, int in, int out, const char *name, int index) {
    if (!p) return;
    if (l->n < l->cap)
        l->r[l->n] = (dt_region){.p = p, .bytes = bytes, .in = (unsigned char)in, .out = (unsigned char)out,
                                 .name = name, .index = index};
    l->n++;
}

int dt_coll_regions(const dt_coll_desc *d, dt_region *r, int cap) {
    rlist l = {r, 0, cap};
    const dt_comm *c = d->comm;
    size_t P = (size_t)c->info.size, es = esz(d), b = d->count * es;
    int me = c->info.rank == d->root;
    switch (d->kind) {
    case DT_COLL_ALLREDUCE:
        add(&l, d->send, b, 1, 0, "sendbuf", -1);
        add(&l, d->recv, b, 0, 1, "recvbuf", -1);
        break;
    case DT_COLL_ALLGATHER:
        add(&l, d->send, b, 1, 0, "sendbuf", -1);
        add(&l, d->recv, P * b, 0, 1, "recvbuf", -1);
        break;
    case DT_COLL_REDUCE_SCATTER: /* count: per rank, after validation */
        add(&l, d->send, P * b, 1, 0, "sendbuf", -1);
        add(&l, d->recv, b, 0, 1, "recvbuf", -1);
        break;
    case DT_COLL_REDUCE:
        add(&l, d->send, b, 1, 0, "sendbuf", -1);
        if (me) add(&l, d->recv, b, 0, 1, "recvbuf", -1);
        break;
    case DT_COLL_BROADCAST:
        if (me) add(&l, d->send, b, 1, 0, "sendbuf", -1);
        add(&l, d->recv, b, 0, 1, "recvbuf", -1);
        break;
    case DT_COLL_GATHER:
        add(&l, d->send, b, 1, 0, "sendbuf", -1);
        if (me) add(&l, d->recv, P * b, 0, 1, "recvbuf", -1);
        break;
    case DT_COLL_SCATTER:
        if (me) add(&l, d->send, P * b, 1, 0, "sendbuf", -1);
        add(&l, d->recv, b, 0, 1, "recvbuf", -1);
        break;
    case DT_COLL_ALL_TO_ALL:
        add(&l, d->send, P * b, 1, 0, "sendbuf", -1);
        add(&l, d->recv, P * b, 0, 1, "recvbuf", -1);
        break;
    case DT_COLL_SEND: add(&l, d->send, b, 1, 0, "buf", -1); break;
    case DT_COLL_RECV: add(&l, d->recv, b, 0, 1, "buf", -1); break;
    case DT_COLL_BARRIER: break;
    case DT_COLL_ALLREDUCE_LIST:
    case DT_COLL_ALLGATHER_LIST:
    case DT_COLL_REDUCE_SCATTER_LIST:
        for (int i = 0; i < d->n; i++) {
            size_t e = dt_dtype_size(d->in[i].dtype);
            add(&l, d->in[i].data, d->in[i].count * e, 1, 0, "in", i);
            add(&l, d->out[i].data, d->out[i].count * e, 0, 1, "out", i);
        }
        break;
    case DT_COLL_REDUCE_SCATTER_PER_RANK:
        for (int k = 0; k < d->n; k++) add(&l, d->in[k].data, b, 1, 0, "in", k);
        add(&l, d->recv, b, 0, 1, "out", -1);
        break;
    default:
        break;
    }
    return l.n;
}

/* ---- plans -------------------------------------------------------------------- */

typedef struct plist { dt_prim *p; int n, cap; } plist;

static void prim(plist *l, int kind, int peer, dt_dtype dt, dt_op op, const void *send, void *recv, size_t count) {
    if (kind == DT_PRIM_COPY && (send == recv || count == 0)) return; /* nothing to copy */
    if (l->n < l->cap)
        l->p[l->n] = (dt_prim){.kind = kind, .peer = peer, .dtype = dt, .op = op, .send = send, .recv = recv,
                               .count = count, .divisor = 1};
    l->n++;
}

static const char *cp(const void *p) { return (const char *)p; }
/* p + off bytes; NULL stays NULL (a count of 0 may come with NULL buffers) */
static char *at(const void *p, size_t off) { return p ? (char *)p + off : NULL; }

/* tensor i + 1 of list t starts where tensor i ends */
static int adjacent(const dt_tensor *t, int i, size_t es) {
    return t[i].data && t[i + 1].data && cp(t[i].data) + t[i].count * es == cp(t[i + 1].data);
}

static void plan_allreduce_list(const dt_coll_desc *d, plist *l) {
    for (int i = 0; i < d->n;) {
        dt_dtype dt = d->in[i].dtype;
        size_t es = dt_dtype_size(dt), total = d->in[i].count;
        int j = i;
        while (j + 1 < d->n && d->in[j + 1].dtype == dt && adjacent(d->in, j, es) && adjacent(d->out, j, es)) {
            total += d->in[j + 1].count;
            j++;
        }
        const char *a = cp(d->in[i].data), *b = cp(d->out[i].data);
        /* one range: identical (in place) or disjoint; else tensor by tensor */
        if (j > i && !(a == b || a + total * es <= b || b + total * es <= a)) {
            j = i;
            total = d->in[i].count;
        }
        prim(l, DT_PRIM_ALLREDUCE, -1, dt, d->op, d->in[i].data, d->out[i].data, total);
        i = j + 1;
    }
}

static void plan_per_rank(const dt_coll_desc *d, plist *l) {
    int P = d->comm->info.size, r = d->comm->info.rank;
    size_t es = esz(d), b = d->count * es;
    int contiguous = 1;
    for (int k = 1; k < d->n && contiguous; k++) contiguous = cp(d->in[k].data) == at(d->in[0].data, (size_t)k * b);
    int inplace = b && d->recv == d->in[r].data;
    if (contiguous && !inplace) {
        prim(l, DT_PRIM_REDUCE_SCATTER, -1, d->dtype, d->op, d->in[0].data, d->recv, d->count);
        return;
    }
    for (int k = 0; k < P; k++)
        prim(l, DT_PRIM_REDUCE, k, d->dtype, d->op, d->in[k].data, k == r ? d->recv : NULL, d->count);
}

size_t dt_dev_plan_scratch(const dt_coll_desc *d) {
    if (d->kind != DT_COLL_ALL_TO_ALL || d->send != d->recv || d->comm->info.size == 1) return 0;
    return (size_t)d->comm->info.size * d->count * esz(d);
}

int dt_dev_plan(const dt_coll_desc *d, void *scratch, dt_prim *p, int cap) {
    plist l = {p, 0, cap};
    int P = d->comm->info.size, r = d->comm->info.rank, R = d->root;
    size_t c = d->count, b = c * esz(d);
    dt_dtype dt = d->dtype;
    const void *s = d->send;
    void *v = d->recv;
    switch (d->kind) {
    case DT_COLL_ALLREDUCE: prim(&l, DT_PRIM_ALLREDUCE, -1, dt, d->op, d->send, d->recv, c); break;
    case DT_COLL_ALLGATHER: prim(&l, DT_PRIM_ALLGATHER, -1, dt, d->op, d->send, d->recv, c); break;
    case DT_COLL_REDUCE_SCATTER: prim(&l, DT_PRIM_REDUCE_SCATTER, -1, dt, d->op, d->send, d->recv, c); break;
    case DT_COLL_REDUCE: prim(&l, DT_PRIM_REDUCE, R, dt, d->op, d->send, r == R ? d->recv : NULL, c); break;
    case DT_COLL_BROADCAST: /* the send buffer is read on the root only */
        prim(&l, DT_PRIM_BROADCAST, R, dt, d->op, r == R ? d->send : d->recv, d->recv, c);
        break;
    case DT_COLL_GATHER:
        if (r != R) {
            prim(&l, DT_PRIM_SEND, R, dt, d->op, d->send, NULL, c);
            break;
        }
        prim(&l, DT_PRIM_COPY, -1, dt, d->op, s, at(v, (size_t)R * b), c); /* none in place */
        for (int k = 0; k < P; k++)
            if (k != R) prim(&l, DT_PRIM_RECV, k, dt, d->op, NULL, at(v, (size_t)k * b), c);
        break;
    case DT_COLL_SCATTER:
        if (r != R) {
            prim(&l, DT_PRIM_RECV, R, dt, d->op, NULL, d->recv, c);
            break;
        }
        prim(&l, DT_PRIM_COPY, -1, dt, d->op, at(s, (size_t)R * b), v, c); /* none in place */
        for (int k = 0; k < P; k++)
            if (k != R) prim(&l, DT_PRIM_SEND, k, dt, d->op, at(s, (size_t)k * b), NULL, c);
        break;
    case DT_COLL_ALL_TO_ALL: {
        const void *from = s;
        if (s == v && P > 1) { /* in place: send from a copy; the own block stays */
            prim(&l, DT_PRIM_COPY, -1, dt, d->op, s, scratch, c * (size_t)P);
            from = scratch;
        } else {
            prim(&l, DT_PRIM_COPY, -1, dt, d->op, at(s, (size_t)r * b), at(v, (size_t)r * b), c);
        }
        for (int k = 0; k < P; k++) {
            if (k == r) continue;
            prim(&l, DT_PRIM_SEND, k, dt, d->op, at(from, (size_t)k * b), NULL, c);
            prim(&l, DT_PRIM_RECV, k, dt, d->op, NULL, at(v, (size_t)k * b), c);
        }
        break;
    }
    case DT_COLL_SEND: prim(&l, DT_PRIM_SEND, d->root, dt, d->op, d->send, NULL, c); break;
    case DT_COLL_RECV: prim(&l, DT_PRIM_RECV, d->root, dt, d->op, NULL, d->recv, c); break;
    case DT_COLL_BARRIER: prim(&l, DT_PRIM_BARRIER, -1, DT_I32, DT_SUM, NULL, NULL, 0); break;
    case DT_COLL_ALLREDUCE_LIST: plan_allreduce_list(d, &l); break;
    case DT_COLL_ALLGATHER_LIST:
        for (int i = 0; i < d->n; i++)
            prim(&l, DT_PRIM_ALLGATHER, -1, d->in[i].dtype, d->op, d->in[i].data, d->out[i].data, d->in[i].count);
        break;
    case DT_COLL_REDUCE_SCATTER_LIST:
        for (int i = 0; i < d->n; i++)
            prim(&l, DT_PRIM_REDUCE_SCATTER, -1, d->in[i].dtype, d->op, d->in[i].data, d->out[i].data,
                 d->out[i].count);
        break;
    case DT_COLL_REDUCE_SCATTER_PER_RANK: plan_per_rank(d, &l); break;
    default: break;
    }
    return l.n;
}

/* ---- compressed wire ------------------------------------------------------------ */

#define WIRE_ALIGN 256 /* bytes: each packed range starts on its own line */

static int wire_takes(const dt_prim *q) {
    return (q->kind == DT_PRIM_ALLREDUCE || q->kind == DT_PRIM_REDUCE || q->kind == DT_PRIM_REDUCE_SCATTER ||
            q->kind == DT_PRIM_BROADCAST) && q->dtype == DT_F32 && q->count > 0;
}

/* the f32 elements q reads on this rank */
static size_t wire_in(const dt_prim *q, size_t P) { return q->kind == DT_PRIM_REDUCE_SCATTER ? q->count * P : q->count; }

static size_t wire_bytes(size_t elems) { return (elems * 2 + WIRE_ALIGN - 1) & ~(size_t)(WIRE_ALIGN - 1); }

/* where q's packed result lies in its range w of the scratch (rank r): a
 * reduce_scatter's block r (NCCL's in-place convention), else w itself */
static char *wire_result(const dt_prim *q, char *w, size_t r) {
    return q->kind == DT_PRIM_REDUCE_SCATTER ? w + r * q->count * 2 : w;
}

/* q is a broadcast whose root is this rank (r): it keeps its f32 */
static int wire_bc_root(const dt_prim *q, size_t r) { return q->kind == DT_PRIM_BROADCAST && q->peer == (int)r; }

size_t dt_dev_wire_scratch(const dt_coll_desc *d, const dt_prim *p, int n) {
    size_t P = (size_t)d->comm->info.size, total = 0;
    if (d->wire == DT_WIRE_NATIVE || P < 2) return 0;
    for (int i = 0; i < n; i++)
        if (wire_takes(&p[i])) total += wire_bytes(wire_in(&p[i], P));
    return total;
}

int dt_dev_wire_plan(const dt_coll_desc *d, void *scratch, const dt_prim *p, int n, dt_prim *out, int cap) {
    plist l = {out, 0, cap};
    size_t P = (size_t)d->comm->info.size, r = (size_t)d->comm->info.rank, off = 0;
    dt_dtype wt = d->wire == DT_WIRE_BF16 ? DT_BF16 : DT_F16;
    for (int i = 0; i < n; i++) /* the packs, in order (a broadcast: its root's, and its own copy) */
        if (wire_takes(&p[i])) {
            const dt_prim *q = &p[i];
            int root = wire_bc_root(q, r);
            if (q->kind != DT_PRIM_BROADCAST || root) prim(&l, DT_PRIM_PACK, -1, wt, DT_SUM, q->send, at(scratch, off), wire_in(q, P));
            if (root) prim(&l, DT_PRIM_COPY, -1, DT_F32, DT_SUM, q->send, q->recv, q->count);
            off += wire_bytes(wire_in(q, P));
        }
    off = 0;
    for (int i = 0; i < n; i++) { /* the transfers, in the wire type where they take it */
        const dt_prim *q = &p[i];
        if (!wire_takes(q)) {
            if (l.n < l.cap) l.p[l.n] = *q;
            l.n++;
            continue;
        }
        char *w = at(scratch, off);
        void *res = q->kind == DT_PRIM_REDUCE_SCATTER || q->recv ? wire_result(q, w, r) : NULL;
        prim(&l, q->kind, q->peer, wt, q->op == DT_AVG ? DT_SUM : q->op, w, res, q->count);
        off += wire_bytes(wire_in(q, P));
    }
    off = 0;
    for (int i = 0; i < n; i++) { /* the unpacks, where this rank has a result */
        const dt_prim *q = &p[i];
        if (!wire_takes(q)) continue;
        char *w = at(scratch, off);
        off += wire_bytes(wire_in(q, P));
        if (!q->recv || wire_bc_root(q, r)) continue;
        int before = l.n;
        prim(&l, DT_PRIM_UNPACK, -1, wt, DT_SUM, wire_result(q, w, r), q->recv, q->count);
        if (before < l.cap) l.p[before].divisor = q->op == DT_AVG ? (int)P : 1;
    }
    return l.n;
}
