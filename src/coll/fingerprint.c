/* src/coll/fingerprint.c - collective fingerprints: building the header of a
 * call, running the call checked (the backend compares the headers of the
 * group before the data moves, or together with it for small allreduces),
 * and the DT_ERR_MISMATCH message, built from every rank's view so that it
 * is the same on every rank (apart from "this rank called ..."). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coll/coll_internal.h"
#include "bootstrap/bootstrap.h"
#include "comm/registry.h"
#include "watchdog/watchdog.h"
#include "core/error.h"

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return h;
}

/* The header of d without its hash (fp 0): what the watchdog shows and the
 * check's messages name. Every rank of a call passes the same memory kind:
 * device calls say so in the flags (and so in the hash). */
void dt_fp_fill(dt_fp_hdr *h, const dt_coll_desc *d, uint64_t seq) {
    const dt_comm *c = d->comm;
    memset(h, 0, sizeof *h);
    h->seq = seq;
    /* one tensor per rank moves what dt_reduce_scatter moves: the same call */
    h->kind = (uint16_t)(d->kind == DT_COLL_REDUCE_SCATTER_PER_RANK ? DT_COLL_REDUCE_SCATTER : d->kind);
    h->cid = c->cid;
    h->gkey = c->gkey;
    h->world_rank = (uint32_t)c->info.world_rank;
    h->root = -1;
    h->dtype = (uint8_t)d->dtype;
    h->op = DT_FP_NONE;
    h->count = d->count;
    if (d->mem == DT_MEM_DEVICE) h->flags |= DT_FP_DEVICE;
    switch (d->kind) {
    case DT_COLL_ALLREDUCE: case DT_COLL_REDUCE_SCATTER: case DT_COLL_REDUCE_SCATTER_PER_RANK:
        h->op = (uint8_t)d->op;
        break;
    case DT_COLL_REDUCE:
        h->op = (uint8_t)d->op;
        h->root = c->world_ranks[d->root];
        break;
    case DT_COLL_BROADCAST: case DT_COLL_GATHER: case DT_COLL_SCATTER:
    case DT_COLL_SEND: case DT_COLL_RECV: /* the peer */
        h->root = c->world_ranks[d->root];
        break;
    case DT_COLL_BARRIER:
        h->dtype = DT_FP_NONE;
        h->count = 0;
        break;
    case DT_COLL_ALLREDUCE_LIST: case DT_COLL_ALLGATHER_LIST: case DT_COLL_REDUCE_SCATTER_LIST: {
        uint64_t sig = mix(d->list_sig, (uint64_t)d->n); /* summed by validation, which every call passes */
        h->dtype = d->list_dtype >= 0 ? (uint8_t)d->list_dtype : DT_FP_NONE;
        h->count = d->list_count;
        h->nlist = (uint32_t)d->n;
        h->layout = (uint32_t)(sig ^ (sig >> 32));
        if (d->kind != DT_COLL_ALLGATHER_LIST) h->op = (uint8_t)d->op;
        break;
    }
    default:
        break;
    }
    if (d->wire && d->kind != DT_COLL_SEND && d->kind != DT_COLL_RECV)
        h->flags |= (uint32_t)d->wire << DT_FP_WIRE_SHIFT; /* compressed: another exchange, so another call */
}

/* h->fp: the hash of everything that must agree across the group, for the
 * check (only a checked call needs it). d: the call h was filled from (or its
 * staged twin), for the list layout's full 64 bits. */
static void seal(dt_fp_hdr *h, const dt_coll_desc *d) {
    if (h->kind == DT_COLL_SEND || h->kind == DT_COLL_RECV) {
        /* the same value on both ends of a matching pair: (sender, receiver) */
        int src = h->kind == DT_COLL_SEND ? (int)h->world_rank : h->root;
        int dst = h->kind == DT_COLL_SEND ? h->root : (int)h->world_rank;
        uint64_t f = mix(mix(mix(0x7032700000000000ull, h->seq), h->dtype), h->count);
        h->fp = mix(mix(mix(f, h->gkey), (uint64_t)src), (uint64_t)dst);
    } else {
        int list = h->kind == DT_COLL_ALLREDUCE_LIST || h->kind == DT_COLL_ALLGATHER_LIST ||
                   h->kind == DT_COLL_REDUCE_SCATTER_LIST;
        uint64_t sig = list ? mix(d->list_sig, (uint64_t)d->n) : 0;
        uint64_t f = mix(mix(mix(0x636f6c6c00000000ull, h->seq), h->kind), h->dtype);
        f = mix(mix(mix(f, h->op), h->count), (uint64_t)(int64_t)h->root);
        h->fp = mix(mix(mix(f, h->gkey), sig), h->nlist);
        unsigned wire = (h->flags >> DT_FP_WIRE_SHIFT) & 0xffu;
        if (wire) h->fp = mix(h->fp, 0x7769726500000000ull | (uint64_t)wire);
    }
    if (h->flags & DT_FP_DEVICE) h->fp = mix(h->fp, 0x6465766963650000ull);
}

int dt_fp_inline_ok(const dt_coll_desc *d) {
    if (d->kind != DT_COLL_ALLREDUCE || d->wire) return 0;
    size_t es = dt_dtype_size(d->dtype);
    if (d->count > dt_rel_inline_max() / (es ? es : 1)) return 0;
    switch (d->dtype) {
    case DT_F32: case DT_F64: case DT_I64: return 1;              /* every op, avg included */
    case DT_I8: case DT_U8: case DT_I32: return d->op != DT_AVG;  /* avg widens: not inline */
    default: return 0;                                            /* f16/bf16 widen */
    }
}

static void fn_name(char *buf, size_t cap, int kind) {
    snprintf(buf, cap, "dt_%s", dt_op_kind_name(kind));
}

static const char *view(char *buf, size_t cap, const dt_fp_hdr *h) {
    dt_op_describe(buf, cap, h->kind, h->dtype, h->count, h->op, h->root, h->seq, h->cid, h->nlist, h->layout);
    unsigned wire = (h->flags >> DT_FP_WIRE_SHIFT) & 0xffu;
    size_t n = strlen(buf);
    if (wire && n + 1 < cap) /* "allreduce(f32, count 8, sum) #5 on world [wire bf16]" */
        snprintf(buf + n, cap - n, " [wire %s]", wire == DT_WIRE_BF16 ? "bf16" : wire == DT_WIRE_F16 ? "f16" : "?");
    n = strlen(buf);
    if ((h->flags & DT_FP_DEVICE) && n + 1 < cap) snprintf(buf + n, cap - n, " on device memory");
    return buf;
}

/* every rank's view -> the DT_ERR_MISMATCH message */
static int coll_mismatch(const char *fn, dt_comm *c, const dt_fp_hdr *mine, const dt_fp_channel *ch) {
    int p = c->info.size;
    char me[256], cname[96];
    view(me, sizeof me, mine);
    dt_reg_name(c->cid, cname, sizeof cname);
    dt_fp_hdr *all = malloc(sizeof *all * (size_t)p);
    int *grp = malloc(sizeof(int) * (size_t)p);
    if (!all || !grp) {
        free(all);
        free(grp);
        return dt_error(DT_ERR_MISMATCH, fn, "collective mismatch at sequence number %llu on communicator %s: this "
                        "rank (world rank %d) called %s; the ranks of the group called something else",
                        (unsigned long long)mine->seq, cname, c->info.world_rank, me);
    }
    int rc = ch->gather_views(c, mine, all);
    if (rc) { free(all); free(grp); return rc; }
    /* group identical calls; reference = the largest group (ties: lowest rank) */
    int ngroups = 0, best = 0, best_n = 0;
    for (int i = 0; i < p; i++) {
        grp[i] = -1;
        for (int j = 0; j < i; j++)
            if (all[j].fp == all[i].fp) { grp[i] = grp[j]; break; }
        if (grp[i] < 0) grp[i] = ngroups++;
    }
    for (int g = 0; g < ngroups; g++) {
        int n = 0;
        for (int i = 0; i < p; i++) n += grp[i] == g;
        if (n > best_n) { best_n = n; best = g; }
    }
    char differ[256] = "", calls[640] = "", v[256];
    size_t dn = 0, cn = 0;
    for (int i = 0; i < p; i++)
        if (grp[i] != best && dn < sizeof differ)
            dn += (size_t)snprintf(differ + dn, sizeof differ - dn, "%s%u", dn ? "," : "", all[i].world_rank);
    for (int g = 0; g < ngroups && cn < sizeof calls; g++) {
        char ranks[128] = "";
        size_t rn = 0;
        int n = 0, first = -1;
        for (int i = 0; i < p; i++)
            if (grp[i] == g) {
                if (first < 0) first = i;
                if (rn < sizeof ranks) rn += (size_t)snprintf(ranks + rn, sizeof ranks - rn, "%s%u", n ? "," : "", all[i].world_rank);
                n++;
            }
        cn += (size_t)snprintf(calls + cn, sizeof calls - cn, "%s%s %s: %s", g ? " | " : "", n > 1 ? "ranks" : "rank",
                               ranks, view(v, sizeof v, &all[first]));
    }
    free(all);
    free(grp);
    return dt_error(DT_ERR_MISMATCH, fn, "collective mismatch at sequence number %llu on communicator %s: this rank "
                    "(world rank %d) called %s; ranks that differ from the most common call: %s; calls: %s",
                    (unsigned long long)mine->seq, cname, c->info.world_rank, me, differ, calls);
}

static int p2p_mismatch(const dt_coll_desc *d, const dt_fp_hdr *mine, const dt_fp_hdr *theirs) {
    char fn[48], a[256], b[256], cname[96];
    fn_name(fn, sizeof fn, d->kind);
    dt_reg_name(d->comm->cid, cname, sizeof cname);
    return dt_error(DT_ERR_MISMATCH, fn, "point-to-point mismatch on communicator %s: this rank (world rank %d) "
                    "called %s, but rank %d called %s", cname, d->comm->info.world_rank, view(a, sizeof a, mine),
                    (int)theirs->world_rank, view(b, sizeof b, theirs));
}

/* the mismatch of descriptor d, named after its function */
static int desc_mismatch(const dt_coll_desc *d, const dt_fp_hdr *mine, const dt_fp_channel *ch) {
    char fn[48];
    fn_name(fn, sizeof fn, d->kind);
    return coll_mismatch(fn, d->comm, mine, ch);
}

static int execute_sealed(const dt_coll_desc *d, dt_fp_hdr *h, const dt_fp_channel *ch,
                          int (*run)(const dt_coll_desc *d, void *arg), void *arg);

int dt_fp_execute(const dt_coll_desc *d, dt_fp_hdr *h, int (*run)(const dt_coll_desc *d, void *arg), void *arg) {
    dt_comm *c = d->comm;
    const dt_backend_ops *o = c->ops;
    dt_fp_channel ch = {o->name, o->check, o->gather_views, o->p2p_check};
    seal(h, d);
    if (dt_fp_inline_ok(d)) {
        int rc = o->allreduce_checked(c, d->send, d->recv, d->count, d->dtype, d->op, h);
        if (rc) return rc;
        if (h->flags & DT_FP_MISMATCH) return desc_mismatch(d, h, &ch);
        return DT_OK;
    }
    /* the check exchange already synchronised the group: it is the barrier */
    if (d->kind == DT_COLL_BARRIER) {
        int rc = o->check(c, h);
        if (rc) return rc;
        return (h->flags & DT_FP_MISMATCH) ? desc_mismatch(d, h, &ch) : DT_OK;
    }
    return execute_sealed(d, h, &ch, run, arg);
}

int dt_fp_execute_on(const dt_coll_desc *d, dt_fp_hdr *h, const dt_fp_channel *ch,
                     int (*run)(const dt_coll_desc *d, void *arg), void *arg) {
    seal(h, d);
    return execute_sealed(d, h, ch, run, arg);
}

static int execute_sealed(const dt_coll_desc *d, dt_fp_hdr *h, const dt_fp_channel *ch,
                          int (*run)(const dt_coll_desc *d, void *arg), void *arg) {
    dt_comm *c = d->comm;
    int rc;
    if (d->kind == DT_COLL_SEND || d->kind == DT_COLL_RECV) {
        dt_fp_hdr t;
        if (!ch->p2p_check) return DT_ERR(DT_ERR_INTERNAL, "the %s check channel has no point-to-point check", ch->name);
        rc = ch->p2p_check(c, d->root, h, &t);
        if (rc) return rc;
        if (t.fp != h->fp) return p2p_mismatch(d, h, &t);
        dt_wd_op_phase(2); /* the peer is here: the data follows */
        return run(d, arg);
    }
    rc = ch->check(c, h);
    if (rc) return rc;
    if (h->flags & DT_FP_MISMATCH) return desc_mismatch(d, h, ch);
    return run(d, arg);
}

int dt_coll_op_begin(const char *fn, dt_comm *c, int kind) {
    uint64_t seq = c->seq + 1;
    dt_fp_hdr h;
    memset(&h, 0, sizeof h);
    h.seq = seq;
    h.kind = (uint16_t)kind;
    h.cid = c->cid;
    h.gkey = c->gkey;
    h.world_rank = (uint32_t)c->info.world_rank;
    h.root = -1;
    h.dtype = h.op = DT_FP_NONE;
    uint64_t f = mix(mix(mix(0x636f6c6c00000000ull, seq), h.kind), h.dtype);
    f = mix(mix(mix(f, h.op), h.count), (uint64_t)(int64_t)h.root);
    h.fp = mix(mix(mix(f, c->gkey), 0), 0);
    dt_wd_op_begin(h.cid, kind, seq, DT_FP_NONE, 0, -1, DT_FP_NONE, 0);
    if (c->info.size > 1 && c->ops->check && dt_rel_check_on()) {
        const dt_backend_ops *o = c->ops;
        dt_fp_channel ch = {o->name, o->check, o->gather_views, o->p2p_check};
        int rc = ch.check(c, &h);
        if (rc) return rc;
        if (h.flags & DT_FP_MISMATCH) return coll_mismatch(fn, c, &h, &ch);
    }
    c->seq = seq;
    return DT_OK;
}

/* ---- the bootstrap as a check channel ------------------------------------------
 * For a communicator of every world rank (group rank == world rank): one
 * dt_boot_allgather of the headers; every rank then compares all of them,
 * so the verdict is the same everywhere, and keeps them for gather_views. */
static dt_fp_hdr *g_boot_views;
static int g_boot_n;

static int boot_check(dt_comm *c, dt_fp_hdr *hdr) {
    int p = c->info.size;
    if (p != c->info.world_size)
        return DT_ERR(DT_ERR_INTERNAL, "the bootstrap checks communicators of the whole world only (%d of %d ranks)", p,
                      c->info.world_size);
    if (g_boot_n < p) {
        dt_fp_hdr *v = realloc(g_boot_views, sizeof *v * (size_t)p);
        if (!v) return DT_ERR(DT_ERR_NOMEM, "out of memory for %d check headers", p);
        g_boot_views = v;
        g_boot_n = p;
    }
    int rc = dt_boot_allgather(hdr, g_boot_views, sizeof *hdr);
    if (rc) return rc;
    for (int r = 0; r < p; r++)
        if (g_boot_views[r].fp != hdr->fp || (g_boot_views[r].flags & DT_FP_MISMATCH)) hdr->flags |= DT_FP_MISMATCH;
    return DT_OK;
}

static int boot_views(dt_comm *c, const dt_fp_hdr *mine, dt_fp_hdr *all) {
    if (g_boot_n < c->info.size) return DT_ERR(DT_ERR_INTERNAL, "no headers from a bootstrap check to show");
    memcpy(all, g_boot_views, sizeof *all * (size_t)c->info.size);
    return DT_OK;
}

const dt_fp_channel dt_fp_boot_channel = {"bootstrap", boot_check, boot_views, NULL};

static int g_force_channel = -1;

void dt_fp_device_channel_for_testing(int choice) { g_force_channel = choice; }

int dt_fp_device_channel(int host_has_check, int spans_world, int p2p) {
    /* a forced choice, where it can serve the call */
    if (g_force_channel == 0 && host_has_check) return 0;
    if (g_force_channel == 1 && spans_world && !p2p) return 1;
    if (g_force_channel == 2) return 2;
    if (host_has_check) return 0;
    if (spans_world && !p2p) return 1;
    return 2;
}

void dt_fp_release(void) {
    free(g_boot_views);
    g_boot_views = NULL;
    g_boot_n = 0;
}
