/* src/transport/mpi/hier_mpi.c - two-level collectives for groups that span
 * hosts: allreduce, reduce_scatter and allgather as a step within each host
 * through a shared-memory window, a step between the hosts over MPI
 * point-to-point messages (tree_mpi.c), and a step within each host again.
 *
 * Shape. The group's hosts, in the order of their lowest group rank, are
 * h = 0..H-1; host h has L_h members, local indices j = 0..L_h-1 by group
 * rank; Lmax = max L_h. The data is cut into Lmax slices; on host h, slice
 * s belongs to local index s mod L_h (with equal hosts: member j owns slice
 * j; a host with fewer members gives some of them several slices). For each
 * slice s, the owners of s on every host form a communicator C_s (one member
 * per host, by host position), made once per communicator with MPI_Comm_split.
 *
 *  allreduce       slice s = elements [N s / Lmax, N (s+1) / Lmax):
 *                  1. reduce-scatter of the slices within each host (the
 *                     window: dt_shm_reduce_blocks), owner's slice straight
 *                     into its output;
 *                  2. allreduce of each owned slice over C_s (dt_mpi_tree,
 *                     the slice cut into H blocks), in place in the output;
 *                     avg divided here, by the owner;
 *                  3. allgather of the slices within each host (the window:
 *                     dt_shm_gather_pieces).
 *  reduce_scatter  block g (of group rank g on host h_g, local index j_g)
 *                  belongs to slice j_g: 1. reduce-scatter within the host of
 *                  every block to the owner of its slice there (into a
 *                  staging buffer: for each owned slice, its blocks by host);
 *                  2. reduce-scatter over C_s of slice s's blocks, block
 *                  (h, s) ending at member h, that is at rank g itself.
 *  allgather       1. allgather over C_s of slice s's blocks (block (h, s)
 *                  contributed by rank (h, s)), straight into the output;
 *                  2. allgather within the host of every block from the
 *                  owner of its slice.
 * Owners take their slices in increasing s, so no two of them wait on each
 * other in different C_s (each C_s completes once its members finished the
 * slices below s).
 *
 * Association (allreduce and reduce_scatter): element i of slice s is
 *     tree over the hosts h (in order) of [ tree over host h's members ],
 * each tree balanced (shm_internal.h, tree_mpi.c: the first 2*rem members
 * folded pairwise). It does not depend on the call's size, chunking or which
 * rank computed what, so results are bit-identical on every rank and a
 * reduce_scatter's block equals the same block of the allreduce; with two
 * hosts of two ranks it is ((r0 op r1) op (r2 op r3)), the one-host tree of
 * four. With a wire type the step between hosts is compressed (tree_mpi.c).
 * Calls run inside the engine. */
#include <stdlib.h>
#include <string.h>
#include "bootstrap/bootstrap.h"
#include "transport/mpi/shm_internal.h"
#include "transport/mpi/tree_internal.h"
#include "transport/reduce_kernels.h"
#include "core/error.h"

struct mpi_hier {
    int refs;
    int p, H, Lmax;
    int me_h, me_j, me_L;  /* my host position, local index, my host's member count */
    int *L;                /* [H] members per host */
    int *host_of;          /* [p] host position of each group rank */
    int *local_of;         /* [p] local index of each group rank */
    int *grank;            /* [H * Lmax] group rank of (h, j), -1 where none */
    MPI_Comm intra;        /* my host's members (MPI_COMM_NULL when alone) */
    mpi_shm *shm;          /* intra's window (NULL when alone) */
    MPI_Comm *slice;       /* [Lmax] C_s for the slices I own, else MPI_COMM_NULL */
    char *stage;           /* reduce_scatter staging, grow-only */
    size_t stage_cap;
    dt_tree_blk *blk;      /* [H] */
    shm_block *blocks;     /* [max(p, Lmax)] */
    shm_piece *pieces;     /* [max(p, Lmax)] */
};

static int owns(const mpi_hier *h, int s) { return s % h->me_L == h->me_j; }

static void hier_free(mpi_hier *h, int finalized) {
    if (!h) return;
    if (h->slice)
        for (int s = 0; s < h->Lmax; s++)
            if (!finalized && h->slice[s] != MPI_COMM_NULL) MPI_Comm_free(&h->slice[s]);
    dt_shm_release(h->shm, finalized);
    if (!finalized && h->intra != MPI_COMM_NULL) MPI_Comm_free(&h->intra);
    free(h->L);
    free(h->host_of);
    free(h->local_of);
    free(h->grank);
    free(h->slice);
    free(h->stage);
    free(h->blk);
    free(h->blocks);
    free(h->pieces);
    free(h);
}

void dt_mpi_hier_detach(mpi_impl *impl, int finalized) {
    mpi_hier *h = impl->hier;
    impl->hier = NULL;
    if (h && --h->refs == 0) hier_free(h, finalized);
}

/* The group's shape from the bootstrap's host map; 0 if it has one host. */
static int shape(const dt_comm *c, mpi_hier *h) {
    const dt_boot *b = dt_boot_get();
    int p = c->info.size;
    if (!b || !b->host) return 0;
    int *first = malloc(sizeof(int) * (size_t)b->nhosts); /* host index -> position, or -1 */
    if (!first) return -1;
    for (int i = 0; i < b->nhosts; i++) first[i] = -1;
    h->p = p;
    h->H = 0;
    for (int g = 0; g < p; g++) { /* positions in order of lowest group rank */
        int hi = b->host[c->world_ranks[g]];
        if (first[hi] < 0) first[hi] = h->H++;
        h->host_of[g] = first[hi];
    }
    free(first);
    if (h->H < 2) return 0;
    if (!(h->L = calloc((size_t)h->H, sizeof(int)))) return -1;
    for (int g = 0; g < p; g++) h->local_of[g] = h->L[h->host_of[g]]++;
    h->Lmax = 0;
    for (int i = 0; i < h->H; i++) h->Lmax = h->L[i] > h->Lmax ? h->L[i] : h->Lmax;
    if (!(h->grank = malloc(sizeof(int) * (size_t)h->H * (size_t)h->Lmax))) return -1;
    for (int i = 0; i < h->H * h->Lmax; i++) h->grank[i] = -1;
    for (int g = 0; g < p; g++) h->grank[h->host_of[g] * h->Lmax + h->local_of[g]] = g;
    h->me_h = h->host_of[c->info.rank];
    h->me_j = h->local_of[c->info.rank];
    h->me_L = h->L[h->me_h];
    return 1;
}

int dt_mpi_hier_attach(dt_comm *c, const mpi_impl *si) {
    mpi_impl *impl = c->impl;
    if (si && si->hier) {
        impl->hier = si->hier;
        impl->hier->refs++;
        return DT_OK;
    }
    int mode = dt_two_level_mode(), p = c->info.size;
    /* identical on every member: size, host map, agreed settings */
    if (mode == DT_TWO_LEVEL_OFF || p < 2 || c->info.local_size == p) return DT_OK;
    mpi_hier *h = calloc(1, sizeof *h);
    if (!h) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    h->refs = 1;
    h->intra = MPI_COMM_NULL;
    h->host_of = malloc(sizeof(int) * (size_t)p);
    h->local_of = malloc(sizeof(int) * (size_t)p);
    int sh = h->host_of && h->local_of ? shape(c, h) : -1;
    if (sh < 0) { hier_free(h, 1); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    /* auto: only where some host has several members (else the path is
     * the tree alone, which MPI's own allreduce matches) */
    if (sh == 0 || (mode == DT_TWO_LEVEL_AUTO && h->Lmax < 2)) { hier_free(h, 1); return DT_OK; }
    int nb = p > h->Lmax ? p : h->Lmax, rc = DT_OK;
    h->slice = malloc(sizeof(MPI_Comm) * (size_t)h->Lmax);
    h->blk = malloc(sizeof *h->blk * (size_t)h->H);
    h->blocks = malloc(sizeof *h->blocks * (size_t)nb);
    h->pieces = malloc(sizeof *h->pieces * (size_t)nb);
    if (!h->slice || !h->blk || !h->blocks || !h->pieces) { hier_free(h, 1); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    for (int s = 0; s < h->Lmax; s++) h->slice[s] = MPI_COMM_NULL;
    /* every host's window, or none: the windows on (agreed) and room for
     * them, agreed over the whole group */
    int all_ok = 0;
    double need = h->me_L > 1 ? (double)h->me_L * (double)dt_shm_window_bytes() : 0;
    if ((rc = dt_shm_room(impl->comm, need, h->me_L == 1 || dt_shm_on(), &all_ok)) || !all_ok) {
        hier_free(h, 1);
        return rc;
    }
    int mrc = MPI_Comm_split(impl->comm, h->me_h, c->info.rank, &h->intra);
    for (int s = 0; mrc == MPI_SUCCESS && s < h->Lmax; s++)
        mrc = MPI_Comm_split(impl->comm, owns(h, s) ? 0 : MPI_UNDEFINED, h->me_h, &h->slice[s]);
    if (mrc != MPI_SUCCESS) { hier_free(h, 0); return dt_mpi_fail(mrc, "MPI_Comm_split"); }
    for (int s = 0; s < h->Lmax; s++)
        if (h->slice[s] != MPI_COMM_NULL) MPI_Comm_set_errhandler(h->slice[s], MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(h->intra, MPI_ERRORS_RETURN);
    if (h->me_L > 1) rc = dt_shm_open(h->intra, h->me_L, h->me_j, 0, &h->shm);
    /* the windows opened everywhere, or the group takes the flat path */
    int ok = rc == DT_OK && (h->me_L == 1 || h->shm), every = 0;
    mrc = MPI_Allreduce(&ok, &every, 1, MPI_INT, MPI_MIN, impl->comm);
    if (mrc != MPI_SUCCESS || !every) {
        hier_free(h, 0);
        return rc ? rc : mrc != MPI_SUCCESS ? dt_mpi_fail(mrc, "MPI_Allreduce") : DT_OK;
    }
    impl->hier = h;
    return DT_OK;
}

/* ---- selection --------------------------------------------------------------- */

/* The hierarchy of c if a call of `bytes` takes the two-level path (the
 * same answer on every member). */
static mpi_hier *hier_for(dt_comm *c, size_t bytes) {
    mpi_hier *h = ((mpi_impl *)c->impl)->hier;
    if (!h || !bytes) return NULL;
    if (dt_two_level_mode() != DT_TWO_LEVEL_ON && bytes < dt_two_level_min()) return NULL;
    return h;
}

/* The blocks fit every window's buffers (nb per chunk). */
static int fits(const mpi_hier *h, int nb, size_t es) { return (size_t)nb * es <= dt_shm_chunk(); }

static int wire_ok(int wire, dt_dtype dt) { return wire == DT_WIRE_NATIVE || dt == DT_F32; }

/* ---- allreduce ----------------------------------------------------------------- */

static int hier_allreduce(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op, int wire) {
    size_t es = dt_dtype_size(dt);
    mpi_hier *h = hier_for(c, count * es);
    const char *in = send;
    char *out = recv;
    if (!h || !dt_reduce_kernel_ok(dt, op) || !wire_ok(wire, dt) || !fits(h, h->Lmax, es)) return DT_DECLINED;
    int L = h->Lmax, rc;
    dt_op sum = op == DT_AVG ? DT_SUM : op;
    /* 1. within the host: each owner's slices, reduced, into its output */
    for (int s = 0; s < L; s++) {
        size_t lo = count * (size_t)s / (size_t)L, hi = count * (size_t)(s + 1) / (size_t)L;
        h->blocks[s] = (shm_block){lo, hi - lo, s % h->me_L, out + lo * es};
    }
    if (h->shm) {
        if ((rc = dt_shm_reduce_blocks(h->shm, in, count, h->blocks, L, dt, sum, 0, 0)) != DT_OK)
            return rc == DT_DECLINED ? DT_ERR(DT_ERR_INTERNAL, "two-level allreduce: the window declined") : rc;
    } else if (in != out) {
        memcpy(out, in, count * es);
    }
    /* 2. between the hosts: each owned slice, in place */
    for (int s = 0; s < L; s++) {
        if (!owns(h, s)) continue;
        size_t lo = h->blocks[s].off, n = h->blocks[s].count;
        for (int k = 0; k < h->H; k++) {
            size_t a = n * (size_t)k / (size_t)h->H, b = n * (size_t)(k + 1) / (size_t)h->H;
            h->blk[k] = (dt_tree_blk){out + (lo + a) * es, b - a};
        }
        if ((rc = dt_mpi_tree(h->slice[s], h->H, h->me_h, h->blk, dt, op, wire, DT_TREE_AR))) return rc;
        if (op == DT_AVG) dt_reduce_divide(out + lo * es, n, dt, h->p);
    }
    /* 3. within the host: every slice from its owner */
    if (!h->shm) return DT_OK;
    for (int s = 0; s < L; s++) {
        char *at = out + h->blocks[s].off * es;
        h->pieces[s] = (shm_piece){h->blocks[s].count, s % h->me_L, at, at};
    }
    rc = dt_shm_gather_pieces(h->shm, h->pieces, L, es, count * es >= dt_shm_stream());
    return rc == DT_DECLINED ? DT_ERR(DT_ERR_INTERNAL, "two-level allreduce: the window declined") : rc;
}

/* ---- reduce_scatter ---------------------------------------------------------------- */

static int hier_reduce_scatter(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op,
                               int wire) {
    size_t es = dt_dtype_size(dt);
    mpi_hier *h = c->info.size > 0 ? hier_for(c, count * (size_t)c->info.size * es) : NULL;
    if (!h || !dt_reduce_kernel_ok(dt, op) || !wire_ok(wire, dt) || !fits(h, h->p, es)) return DT_DECLINED;
    int p = h->p, H = h->H, L = h->Lmax, rc;
    dt_op sum = op == DT_AVG ? DT_SUM : op;
    /* staging: for each slice I own, H blocks (by host; empty where that
     * host has no member of that local index) */
    size_t nown = 0;
    for (int s = 0; s < L; s++) nown += owns(h, s);
    size_t need = nown * (size_t)H * count * es;
    if (need > h->stage_cap) {
        char *t = realloc(h->stage, need);
        if (!t) return DT_ERR(DT_ERR_NOMEM, "out of memory for a %zu-byte two-level staging buffer", need);
        h->stage = t;
        h->stage_cap = need;
    }
    /* where block (h', s) goes in my staging (for the slices I own) */
#define STAGE_AT(k, hh) (h->stage + (((size_t)(k) * (size_t)H + (size_t)(hh)) * count) * es)
    /* 1. within the host: block g to the owner of slice local_of[g] here */
    for (int g = 0; g < p; g++) {
        int s = h->local_of[g], k = 0;
        for (int t = 0; t < s; t++) k += owns(h, t);
        h->blocks[g] = (shm_block){(size_t)g * count, count, s % h->me_L,
                                   owns(h, s) ? STAGE_AT(k, h->host_of[g]) : NULL};
    }
    if (h->shm) {
        if ((rc = dt_shm_reduce_blocks(h->shm, send, count * (size_t)p, h->blocks, p, dt, sum, 0, 0)) != DT_OK)
            return rc == DT_DECLINED ? DT_ERR(DT_ERR_INTERNAL, "two-level reduce_scatter: the window declined") : rc;
    } else {
        for (int g = 0; g < p; g++) memcpy(h->blocks[g].out, (const char *)send + (size_t)g * count * es, count * es);
    }
    /* 2. between the hosts: slice s's blocks, block (h', s) to member h' */
    for (int s = 0, k = 0; s < L; s++) {
        if (!owns(h, s)) continue;
        for (int hh = 0; hh < H; hh++)
            h->blk[hh] = (dt_tree_blk){STAGE_AT(k, hh), h->grank[hh * L + s] >= 0 ? count : 0};
        if ((rc = dt_mpi_tree(h->slice[s], H, h->me_h, h->blk, dt, op, wire, DT_TREE_RS))) return rc;
        if (s == h->me_j) { /* my own block */
            memcpy(recv, h->blk[h->me_h].buf, count * es);
            if (op == DT_AVG) dt_reduce_divide(recv, count, dt, p);
        }
        k++;
    }
#undef STAGE_AT
    return DT_OK;
}

/* ---- allgather ------------------------------------------------------------------- */

static int hier_allgather(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt) {
    size_t es = dt_dtype_size(dt);
    mpi_hier *h = c->info.size > 0 ? hier_for(c, count * (size_t)c->info.size * es) : NULL;
    if (!h || !fits(h, h->p, es)) return DT_DECLINED;
    int p = h->p, H = h->H, L = h->Lmax, me = c->info.rank, rc;
    char *out = recv;
    if ((const char *)send != out + (size_t)me * count * es) memcpy(out + (size_t)me * count * es, send, count * es);
    /* 1. between the hosts: slice s's blocks, straight into place */
    for (int s = 0; s < L; s++) {
        if (!owns(h, s)) continue;
        for (int hh = 0; hh < H; hh++) {
            int g = h->grank[hh * L + s];
            h->blk[hh] = (dt_tree_blk){g >= 0 ? out + (size_t)g * count * es : out, g >= 0 ? count : 0};
        }
        if ((rc = dt_mpi_tree(h->slice[s], H, h->me_h, h->blk, dt, DT_SUM, DT_WIRE_NATIVE, DT_TREE_AG))) return rc;
    }
    /* 2. within the host: every block from the owner of its slice here */
    if (!h->shm) return DT_OK;
    for (int g = 0; g < p; g++) {
        char *at = out + (size_t)g * count * es;
        h->pieces[g] = (shm_piece){count, h->local_of[g] % h->me_L, at, at};
    }
    rc = dt_shm_gather_pieces(h->shm, h->pieces, p, es, count * (size_t)p * es >= dt_shm_stream());
    return rc == DT_DECLINED ? DT_ERR(DT_ERR_INTERNAL, "two-level allgather: the window declined") : rc;
}

/* ---- the transport's entries: the calls that ran, counted ---------------------- */

int dt_mpi_hier_allreduce(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op, int wire) {
    int rc = hier_allreduce(c, send, recv, count, dt, op, wire);
    if (rc == DT_OK) dt_path_count[DT_PATH_TWO_LEVEL_ALLREDUCE]++;
    return rc;
}

int dt_mpi_hier_reduce_scatter(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op,
                               int wire) {
    int rc = hier_reduce_scatter(c, send, recv, count, dt, op, wire);
    if (rc == DT_OK) dt_path_count[DT_PATH_TWO_LEVEL_REDUCE_SCATTER]++;
    return rc;
}

int dt_mpi_hier_allgather(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt) {
    int rc = hier_allgather(c, send, recv, count, dt);
    if (rc == DT_OK) dt_path_count[DT_PATH_TWO_LEVEL_ALLGATHER]++;
    return rc;
}
