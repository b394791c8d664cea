/* src/transport/mpi/tree_mpi.c - reduce-scatter, allreduce and allgather of
 * blocks over the members of an MPI communicator, by point-to-point messages
 * (MPI_Sendrecv), in a fixed association, optionally with 16-bit floats on
 * the wire. It runs the leg between hosts of the two-level collectives
 * (hier_mpi.c: one member per host) and the compressed collectives of groups
 * that do not take that path (every member).
 *
 * Block b (of P) belongs to member b. With pof2 the largest power of two
 * <= P and rem = P - pof2, the first 2*rem members fold pairwise: member 2i
 * hands its data to 2i+1 and takes no further part until the end. The other
 * pof2 ("virtual" members v: 2i+1 -> i for i < rem, m -> m - rem beyond)
 * halve recursively with the distance DOUBLING (1, 2, 4, ...): at distance
 * d, v and v^d swap the halves of what they hold that the other one keeps,
 * and each reduces what it keeps. Which blocks v keeps is decided by the
 * bits of the virtual owner of each block (blocks 2i, 2i+1 -> i), so after
 * the last level v holds exactly the blocks of its members, and every
 * element was reduced by one member only, as
 *     tree(v0..v_pof2) = (((x0 op x1) op (x2 op x3)) op ...),
 * a balanced binary tree over the virtual members in order, whose leaves
 * are the members' values (x_2i op x_2i+1 for folded pairs): the
 * association of the shared-memory tree (shm_internal.h), over this
 * communicator's members. The reductions are symmetric bit for bit
 * (reduce_kernels.h), so nothing depends on which member of a pair computes.
 * The allreduce then doubles back the other way (recursive doubling of
 * what each holds), and the folded members get everything from their pair.
 * Messages per member: log2(pof2) + 2 at most; bytes sent per member: about
 * (P-1)/P of the data for a reduce-scatter, twice that for an allreduce.
 *
 * Wire compression (DT_WIRE_BF16 / DT_WIRE_F16, f32 data): every value that
 * enters a reduction of two partial results is first rounded to the wire
 * type, the one received AND the member's own (rounded where it lies), and
 * the reduction is computed in f32. Rounding only at a tree node's inputs,
 * both of them, keeps the result a function of the tree alone, not of which
 * member computed which node. An allreduce's results travel back rounded,
 * so they are rounded on every member (rnd(tree)); a reduce-scatter's are
 * not rounded at the end. Error of a sum over P members with L = log2(pof2)
 * + (rem > 0) levels, u the wire type's unit roundoff (bf16 2^-8, f16
 * 2^-11): |result - exact| <= ((1 + u)^(L + 1) - 1) * sum |x_m| (+ f32
 * rounding, (P - 1) * 2^-24 * sum |x_m|), one more factor (1 + u) for an
 * allreduce's final rounding; f16 also loses values beyond its range (65504).
 * Calls run inside the engine (one thread in MPI at a time), so the staging
 * buffers are never used twice at once. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "transport/mpi/tree_internal.h"
#include "transport/reduce_kernels.h"
#include "core/bf16.h"
#include "core/error.h"

#define TAG_TREE 7430
#define MSG_MAX ((size_t)1 << 30) /* bytes per MPI message */

static char *g_send, *g_recv; /* staging, grow-only */
static size_t g_send_cap, g_recv_cap;

void dt_mpi_tree_release(void) {
    free(g_send);
    free(g_recv);
    g_send = g_recv = NULL;
    g_send_cap = g_recv_cap = 0;
}

static char *grow(char **buf, size_t *cap, size_t bytes) {
    if (bytes > *cap) {
        char *p = realloc(*buf, bytes);
        if (!p) return NULL;
        *buf = p;
        *cap = bytes;
    }
    return *buf;
}

/* ---- the wire types ------------------------------------------------------- */

size_t dt_wire_size(int wire) { return wire == DT_WIRE_NATIVE ? 0 : 2; }

void dt_wire_pack(uint16_t *dst, const float *src, size_t n, int wire) {
    if (wire == DT_WIRE_BF16) for (size_t i = 0; i < n; i++) dst[i] = dt_bf16_round(src[i]);
    else for (size_t i = 0; i < n; i++) dst[i] = dt_f32_to_f16(src[i]);
}

void dt_wire_unpack(float *dst, const uint16_t *src, size_t n, int wire) {
    if (wire == DT_WIRE_BF16) for (size_t i = 0; i < n; i++) dst[i] = dt_bf16_widen(src[i]);
    else for (size_t i = 0; i < n; i++) dst[i] = dt_f16_to_f32(src[i]);
}

void dt_wire_round(float *x, size_t n, int wire) {
    if (wire == DT_WIRE_BF16) for (size_t i = 0; i < n; i++) x[i] = dt_bf16_widen(dt_bf16_round(x[i]));
    else if (wire == DT_WIRE_F16) for (size_t i = 0; i < n; i++) x[i] = dt_f16_to_f32(dt_f32_to_f16(x[i]));
}

/* acc[i] = rnd(acc[i]) op unpack(w[i]), in pieces that stay in cache */
static void combine_wire(float *acc, const uint16_t *w, size_t n, dt_op op, int wire) {
    enum { PIECE = 2048 };
    float t[PIECE];
    for (size_t o = 0; o < n; o += PIECE) {
        size_t k = n - o < PIECE ? n - o : PIECE;
        dt_wire_round(acc + o, k, wire);
        dt_wire_unpack(t, w + o, k, wire);
        dt_reduce_kernel(acc + o, acc + o, t, k, DT_F32, op);
    }
}

/* ---- messages --------------------------------------------------------------- */

/* Swap sbytes from sbuf for rbytes into rbuf with peer, in messages of at
 * most MSG_MAX bytes (both sides know both sizes, so they agree on the
 * number of rounds). */
static int swap(MPI_Comm comm, int peer, const char *sbuf, size_t sbytes, char *rbuf, size_t rbytes) {
    for (size_t o = 0; o < sbytes || o < rbytes || o == 0; o += MSG_MAX) {
        size_t s = o < sbytes ? (sbytes - o < MSG_MAX ? sbytes - o : MSG_MAX) : 0;
        size_t r = o < rbytes ? (rbytes - o < MSG_MAX ? rbytes - o : MSG_MAX) : 0;
        DT_MPI_TRY(MPI_Sendrecv(s ? sbuf + o : sbuf, (int)s, MPI_BYTE, peer, TAG_TREE, r ? rbuf + o : rbuf, (int)r,
                                MPI_BYTE, peer, TAG_TREE, comm, MPI_STATUS_IGNORE), "MPI_Sendrecv");
        if (!sbytes && !rbytes) break;
    }
    return DT_OK;
}

/* ---- the schedule ----------------------------------------------------------- */

typedef struct sched {
    int P, me, pof2, rem, v; /* v: my virtual member, -1 if folded away */
    int lg;                  /* log2(pof2) */
} sched;

static int vowner(const sched *s, int b) { return b < 2 * s->rem ? b / 2 : b - s->rem; }
static int real_of(const sched *s, int v) { return v < s->rem ? 2 * v + 1 : v + s->rem; }

/* The sets of blocks that move: m >= 0, the blocks whose virtual owner
 * agrees with virtual member v in the bits of m; ALL; NONE. */
enum { ALL = -1, NONE = -2 };
static int in_set(const sched *s, int b, int v, int m) {
    return m == ALL || (m != NONE && (vowner(s, b) & m) == (v & m));
}

typedef struct ctx {
    MPI_Comm comm;
    dt_tree_blk *blk;
    dt_dtype dt;
    dt_op op;
    int wire;
    size_t es;   /* data element size */
    size_t ws;   /* bytes per element on the wire */
} ctx;

static size_t set_count(const sched *s, const ctx *c, int v, int m) {
    size_t n = 0;
    for (int b = 0; b < s->P; b++)
        if (in_set(s, b, v, m)) n += c->blk[b].count;
    return n;
}

/* Pack the set (v, m) into buf in the wire format. */
static void pack(const sched *s, const ctx *c, int v, int m, char *buf) {
    size_t off = 0;
    for (int b = 0; b < s->P; b++) {
        if (!in_set(s, b, v, m)) continue;
        size_t n = c->blk[b].count;
        if (n && c->wire) dt_wire_pack((uint16_t *)(void *)(buf + off), (const float *)(const void *)c->blk[b].buf, n, c->wire);
        else if (n) memcpy(buf + off, c->blk[b].buf, n * c->es);
        off += n * c->ws;
    }
}

/* Unpack buf (the set (v, m)) into the blocks: reduced into them when
 * `reduce` (with the wire: rnd(mine) op received), else stored. */
static void unpack(const sched *s, const ctx *c, int v, int m, const char *buf, int reduce) {
    size_t off = 0;
    for (int b = 0; b < s->P; b++) {
        if (!in_set(s, b, v, m)) continue;
        size_t n = c->blk[b].count;
        char *dst = c->blk[b].buf;
        const void *src = buf + off;
        if (n && reduce && c->wire) combine_wire((float *)(void *)dst, src, n, c->op, c->wire);
        else if (n && reduce) dt_reduce_kernel(dst, dst, src, n, c->dt, c->op);
        else if (n && c->wire) dt_wire_unpack((float *)(void *)dst, src, n, c->wire);
        else if (n) memcpy(dst, src, n * c->es);
        off += n * c->ws;
    }
}

/* With real member `peer`: send my set (sv, sm), receive the peer's set
 * (rv, rm) into the blocks (reduced or stored). A single native block moves
 * without staging (on the receiving side: unless it is to be reduced). */
static int exchange(const sched *s, const ctx *c, int peer, int sv, int sm, int rv, int rm, int reduce) {
    size_t sb = set_count(s, c, sv, sm) * c->ws, rb = set_count(s, c, rv, rm) * c->ws;
    int one_s = -1, one_r = -1, ks = 0, kr = 0;
    for (int b = 0; b < s->P; b++) {
        if (in_set(s, b, sv, sm) && c->blk[b].count) { one_s = b; ks++; }
        if (in_set(s, b, rv, rm) && c->blk[b].count) { one_r = b; kr++; }
    }
    const char *sp;
    char *rp;
    if (!c->wire && ks == 1) sp = c->blk[one_s].buf;
    else {
        char *t = grow(&g_send, &g_send_cap, sb + 1);
        if (!t) return DT_ERR(DT_ERR_NOMEM, "out of memory for a %zu-byte send buffer", sb);
        pack(s, c, sv, sm, t);
        sp = t;
    }
    int direct = !c->wire && !reduce && kr == 1;
    if (direct) rp = c->blk[one_r].buf;
    else if (!(rp = grow(&g_recv, &g_recv_cap, rb + 1)))
        return DT_ERR(DT_ERR_NOMEM, "out of memory for a %zu-byte receive buffer", rb);
    int rc = swap(c->comm, peer, sp, sb, rp, rb);
    if (rc) return rc;
    if (!direct) unpack(s, c, rv, rm, rp, reduce);
    return DT_OK;
}

/* Round my own values of the set (v, m) to the wire type where they lie. */
static void round_set(const sched *s, const ctx *c, int v, int m) {
    if (!c->wire) return;
    for (int b = 0; b < s->P; b++)
        if (in_set(s, b, v, m)) dt_wire_round((float *)(void *)c->blk[b].buf, c->blk[b].count, c->wire);
}

/* The allgather half: v holds the blocks agreeing with it in every bit;
 * recursive doubling, the widest distance first, undoes the halving level
 * by level (before the level of distance d, v and v^d each hold the blocks
 * agreeing with them in bits 0..log2(d)). Then the folded members get
 * everything from their pair. */
static int gather_back(const sched *s, const ctx *c, int folded) {
    int rc;
    for (int k = s->lg - 1; !folded && k >= 0; k--) {
        int d = 1 << k, held = (d << 1) - 1, pv = s->v ^ d;
        if ((rc = exchange(s, c, real_of(s, pv), s->v, held, pv, held, 0))) return rc;
    }
    if (s->me >= 2 * s->rem) return DT_OK;
    if (folded) return exchange(s, c, s->me + 1, 0, NONE, 0, ALL, 0);
    return exchange(s, c, s->me - 1, 0, ALL, 0, NONE, 0);
}

int dt_mpi_tree(MPI_Comm comm, int P, int me, dt_tree_blk *blk, dt_dtype dt, dt_op op, int wire, int mode) {
    if (P < 2) return DT_OK;
    sched s = {.P = P, .me = me, .pof2 = 1};
    while (s.pof2 <= P / 2) s.pof2 <<= 1;
    s.rem = P - s.pof2;
    for (int v = s.pof2; v > 1; v >>= 1) s.lg++;
    int folded = me < 2 * s.rem && me % 2 == 0; /* hands its data to me + 1 */
    s.v = folded ? -1 : me < 2 * s.rem ? me / 2 : me - s.rem;
    if (op == DT_AVG) op = DT_SUM; /* the caller divides */
    ctx c = {.comm = comm, .blk = blk, .dt = dt, .op = op, .wire = mode == DT_TREE_AG ? DT_WIRE_NATIVE : wire,
             .es = dt_dtype_size(dt)};
    c.ws = c.wire ? dt_wire_size(c.wire) : c.es;
    int rc;
    if (mode == DT_TREE_AG) {
        /* a folded pair first joins its blocks at 2i+1 (blocks 2i and 2i+1
         * have one virtual owner: no mask tells them apart) */
        if (me < 2 * s.rem) {
            dt_tree_blk *b = &blk[folded ? me : me - 1];
            if (folded) rc = swap(comm, me + 1, b->buf, b->count * c.es, NULL, 0);
            else rc = swap(comm, me - 1, NULL, 0, b->buf, b->count * c.es);
            if (rc) return rc;
        }
        return gather_back(&s, &c, folded);
    }
    /* ---- the reduce-scatter (the allreduce's first half) ---- */
    round_set(&s, &c, 0, ALL); /* my own values enter the tree rounded */
    if (me < 2 * s.rem) {
        if (folded) rc = exchange(&s, &c, me + 1, 0, ALL, 0, NONE, 0);
        else rc = exchange(&s, &c, me - 1, 0, NONE, 0, ALL, 1);
        if (rc) return rc;
    }
    /* before the level of distance d, v holds the blocks agreeing with it
     * in the bits below log2(d); it sends those the peer keeps (agreeing
     * with the peer in bits 0..log2(d)) and reduces those it keeps */
    for (int k = 0; !folded && k < s.lg; k++) {
        int d = 1 << k, keep = (d << 1) - 1, pv = s.v ^ d;
        if ((rc = exchange(&s, &c, real_of(&s, pv), pv, keep, s.v, keep, 1))) return rc;
    }
    if (mode == DT_TREE_RS) {
        /* a folded member's block comes back from its pair as computed (a
         * reduce-scatter's results are not rounded at the end) */
        if (me < 2 * s.rem) {
            dt_tree_blk *b = &blk[folded ? me : me - 1];
            if (folded) rc = swap(comm, me + 1, NULL, 0, b->buf, b->count * c.es);
            else rc = swap(comm, me - 1, b->buf, b->count * c.es, NULL, 0);
            if (rc) return rc;
        }
        return DT_OK;
    }
    /* ---- the allreduce's second half: the results, rounded as they travel ---- */
    if (!folded) round_set(&s, &c, s.v, s.pof2 - 1);
    return gather_back(&s, &c, folded);
}
