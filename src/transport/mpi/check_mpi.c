/* src/transport/mpi/check_mpi.c - fingerprint checks over MPI.
 *
 * Every checked collective starts with the same exchange on the check channel
 * (mpi_internal.h) of its communicator: recursive doubling of point-to-point
 * messages (MPI_Sendrecv, one tag), each message a 64-byte dt_fp_hdr
 * optionally followed by data. Because every rank of the channel runs the same
 * schedule (it depends only on the group size and rank), the exchange always
 * completes, whatever the ranks passed: a rank learns the peer's header and
 * combines it with its own (flag DT_FP_MISMATCH if the fingerprints differ or
 * the peer already knew of a mismatch). After the last round every rank has
 * combined every rank's header, so the flag is set on all ranks or on none.
 * The receive buffer always has room for the largest message any rank can
 * send (header + the agreed inline limit), so a rank that passed another count
 * never causes a truncation error or a hang.
 *
 *  - check: headers only; the normal transport call follows if no mismatch.
 *  - allreduce_checked (small allreduces): the data travels behind the header
 *    and is reduced in the same rounds (the same recursive doubling MPI uses
 *    for small allreduces); once a mismatch is known, messages shrink to the
 *    header and the data is left alone. Elementwise reductions are symmetric
 *    (a op b == b op a bit for bit, NaN and -0 included for min/max), so every
 *    rank ends with the identical result.
 *  - p2p_check: the two peers swap headers (another tag) before the data.
 * Communicators whose ranks share a memory window (shm_mpi.c) run check and
 * allreduce_checked there instead, all of them (a rank must never wait on
 * the window for a peer that sends here); p2p_check stays here.
 * Calls run inside the engine (one thread in MPI at a time), so the staging
 * buffers are never used twice at once. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "transport/mpi/mpi_internal.h"
#include "transport/reduce_kernels.h"
#include "core/error.h"

#define TAG_CHECK 7412
#define TAG_P2P_HDR 7413
#define HDR ((size_t)sizeof(dt_fp_hdr))

_Static_assert(sizeof(dt_fp_hdr) == 64, "dt_fp_hdr must stay 64 bytes");

static char *g_sbuf, *g_tbuf; /* send staging / receive buffer, 64-byte aligned */
static size_t g_cap;           /* bytes of each */

void dt_mpi_check_release(void) {
    free(g_sbuf);
    free(g_tbuf);
    g_sbuf = g_tbuf = NULL;
    g_cap = 0;
}

/* Both buffers hold at least HDR + max(inline limit, bytes). */
static int buffers(size_t bytes) {
    size_t lim = dt_rel_inline_max();
    size_t need = HDR + (bytes > lim ? bytes : lim);
    need = (need + 63) & ~(size_t)63;
    if (need <= g_cap) return DT_OK;
    char *a = aligned_alloc(64, need), *b = aligned_alloc(64, need);
    if (!a || !b) { free(a); free(b); return DT_ERR(DT_ERR_NOMEM, "out of memory for %zu-byte check buffers", need); }
    dt_mpi_check_release();
    g_sbuf = a;
    g_tbuf = b;
    g_cap = need;
    return DT_OK;
}

static MPI_Comm ccomm(const dt_comm *c) { return ((const mpi_impl *)c->impl)->chk->comm; }

/* ---- the exchange ----------------------------------------------------------
 * One message = the 64-byte header plus the first FIRST_MAX bytes of data (so
 * that small calls stay within a 4 KiB eager limit); the header's data_bytes
 * announces the rest, which follows as a second message (TAG_REST) sent
 * straight from the caller's buffer. A receiver always takes exactly what the
 * header announces, whether or not it matches its own call, so no message is
 * ever left behind. */
#define TAG_REST 7414
#define FIRST_MAX ((size_t)4096 - 2 * HDR)

static size_t first_of(size_t bytes) { return bytes < FIRST_MAX ? bytes : FIRST_MAX; }

typedef struct xfer {
    MPI_Request rq[3]; /* 0: receive of the peer's header message, 1-2: my sends */
    int nsend;
} xfer;

enum { P_RECV = 1, P_SEND = 2 };

/* Post the receive of the peer's header message (P_RECV) and/or send mine
 * (P_SEND): header and first chunk from the staging buffer (the chunk copied
 * there from `data` unless it is already there), the rest straight from
 * `data`. */
static int post(MPI_Comm cc, int peer, dt_fp_hdr *h, const char *data, size_t bytes, int what, xfer *x) {
    size_t b = (h->flags & DT_FP_MISMATCH) ? 0 : bytes, f = first_of(b);
    h->data_bytes = (uint32_t)b;
    memcpy(g_sbuf, h, HDR);
    if (f && data != g_sbuf + HDR) memcpy(g_sbuf + HDR, data, f);
    x->nsend = 0;
    x->rq[0] = MPI_REQUEST_NULL;
    if (what & P_RECV)
        DT_MPI_TRY(MPI_Irecv(g_tbuf, (int)(HDR + FIRST_MAX), MPI_BYTE, peer, TAG_CHECK, cc, &x->rq[0]), "MPI_Irecv");
    if (!(what & P_SEND)) return DT_OK;
    DT_MPI_TRY(MPI_Isend(g_sbuf, (int)(HDR + f), MPI_BYTE, peer, TAG_CHECK, cc, &x->rq[1 + x->nsend++]), "MPI_Isend");
    if (b > f)
        DT_MPI_TRY(MPI_Isend(data + f, (int)(b - f), MPI_BYTE, peer, TAG_REST, cc, &x->rq[1 + x->nsend++]), "MPI_Isend");
    return DT_OK;
}

/* Complete an exchange: the peer's header (combined into h) and its data
 * (first chunk in the receive buffer, the rest at rest_dst when the calls
 * match, else drained into the receive buffer). *ok: the data may be used. */
static int complete(MPI_Comm cc, int peer, dt_fp_hdr *h, size_t bytes, char *rest_dst, xfer *x, int *ok) {
    MPI_Status st;
    DT_MPI_TRY(MPI_Wait(&x->rq[0], &st), "MPI_Wait");
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    dt_fp_hdr peer_h;
    memset(&peer_h, 0, sizeof peer_h);
    if (got >= (int)HDR) memcpy(&peer_h, g_tbuf, HDR);
    size_t pb = peer_h.data_bytes, pf = first_of(pb);
    if (got < (int)HDR || (size_t)got != HDR + pf || pb > g_cap - HDR) {
        DT_MPI_TRY(MPI_Waitall(x->nsend, x->rq + 1, MPI_STATUSES_IGNORE), "MPI_Waitall");
        return DT_ERR(DT_ERR_INTERNAL, "malformed fingerprint message from group rank %d (%d bytes)", peer, got);
    }
    if ((peer_h.flags & DT_FP_MISMATCH) || peer_h.fp != h->fp) h->flags |= DT_FP_MISMATCH;
    *ok = !(h->flags & DT_FP_MISMATCH) && pb == bytes;
    if (!(h->flags & DT_FP_MISMATCH) && pb != bytes) h->flags |= DT_FP_MISMATCH; /* cannot happen: fp covers it */
    if (pb > pf) {
        char *dst = (*ok && rest_dst) ? rest_dst : g_tbuf + HDR + pf;
        DT_MPI_TRY(MPI_Recv(dst, (int)(pb - pf), MPI_BYTE, peer, TAG_REST, cc, MPI_STATUS_IGNORE), "MPI_Recv");
    }
    DT_MPI_TRY(MPI_Waitall(x->nsend, x->rq + 1, MPI_STATUSES_IGNORE), "MPI_Waitall");
    return DT_OK;
}

/* Recursive doubling (MPICH's schedule; with a non-power-of-two size the
 * first 2*rem ranks fold pairwise). `in` holds this rank's bytes of data
 * (none for a plain check); the reduction lands in `out` unless a mismatch
 * is found. Intermediate sums live in the staging buffer, so `out` is only
 * written once everything matched. */
static int exchange(dt_comm *c, dt_fp_hdr *h, const void *in, size_t bytes, size_t n, dt_dtype dt, dt_op op,
                    void *out) {
    MPI_Comm cc = ccomm(c);
    int p = c->info.size, me = c->info.rank, ok = 0, rc;
    char *sdata = g_sbuf + HDR, *tdata = g_tbuf + HDR;
    const char *acc = in; /* my current partial result */
    xfer x;
    int pof2 = 1;
    while (pof2 <= p / 2) pof2 <<= 1;
    int rem = p - pof2, newrank, fold = me < 2 * rem;
    size_t f = first_of(bytes);
#define X(call) do { if ((rc = (call)) != DT_OK) return rc; } while (0)
    if (fold && me % 2 == 0) { /* hand my part to me+1, receive the final result */
        X(post(cc, me + 1, h, acc, bytes, P_RECV | P_SEND, &x));
        X(complete(cc, me + 1, h, bytes, (char *)out + f, &x, &ok));
        if (ok && f) memcpy(out, tdata, f);
        return DT_OK;
    }
    if (fold) {
        X(post(cc, me - 1, h, acc, bytes, P_RECV, &x));
        X(complete(cc, me - 1, h, bytes, tdata + f, &x, &ok));
        if (ok && bytes) { dt_reduce_kernel(sdata, acc, tdata, n, dt, op); acc = sdata; }
        newrank = me / 2;
    } else {
        newrank = me - rem;
    }
    int in_out = 0;
    for (int mask = 1; mask < pof2; mask <<= 1) {
        int nd = newrank ^ mask, dst = nd < rem ? nd * 2 + 1 : nd + rem;
        X(post(cc, dst, h, acc, bytes, P_RECV | P_SEND, &x));
        X(complete(cc, dst, h, bytes, tdata + f, &x, &ok));
        if (ok && bytes) {
            if ((mask << 1) >= pof2 && !fold) { /* last round: straight into the output */
                dt_reduce_kernel(out, acc, tdata, n, dt, op);
                in_out = 1;
            } else {
                dt_reduce_kernel(sdata, acc, tdata, n, dt, op);
                acc = sdata;
            }
        }
    }
    if (fold) { /* the final result back to me-1 */
        X(post(cc, me - 1, h, acc, bytes, P_SEND, &x));
        DT_MPI_TRY(MPI_Waitall(x.nsend, x.rq + 1, MPI_STATUSES_IGNORE), "MPI_Waitall");
    }
#undef X
    if (bytes && !in_out && !(h->flags & DT_FP_MISMATCH)) memcpy(out, acc, bytes);
    return DT_OK;
}

int dt_mpi_check(dt_comm *c, dt_fp_hdr *hdr) {
    if (((mpi_impl *)c->impl)->shm) return dt_mpi_shm_check(c, hdr);
    int rc = buffers(0);
    if (rc) return rc;
    return exchange(c, hdr, NULL, 0, 0, DT_F32, DT_SUM, NULL);
}

int dt_mpi_allreduce_checked(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt,
                             dt_op op, dt_fp_hdr *hdr) {
    if (((mpi_impl *)c->impl)->shm) return dt_mpi_shm_allreduce_checked(c, send, recv, count, dt, op, hdr);
    size_t bytes = count * dt_dtype_size(dt);
    int rc = buffers(bytes);
    if (rc) return rc;
    rc = exchange(c, hdr, send, bytes, count, dt, op, recv);
    if (rc) return rc;
    if (op == DT_AVG && !(hdr->flags & DT_FP_MISMATCH)) dt_reduce_divide(recv, count, dt, c->info.size);
    return DT_OK;
}

int dt_mpi_gather_views(dt_comm *c, const dt_fp_hdr *mine, dt_fp_hdr *all) {
    DT_MPI_TRY(MPI_Allgather(mine, (int)HDR, MPI_BYTE, all, (int)HDR, MPI_BYTE, ccomm(c)), "MPI_Allgather");
    return DT_OK;
}

int dt_mpi_p2p_check(dt_comm *c, int peer, const dt_fp_hdr *mine, dt_fp_hdr *theirs) {
    MPI_Status st;
    memset(theirs, 0, sizeof *theirs);
    DT_MPI_TRY(MPI_Sendrecv(mine, (int)HDR, MPI_BYTE, peer, TAG_P2P_HDR, theirs, (int)HDR, MPI_BYTE, peer,
                            TAG_P2P_HDR, ccomm(c), &st), "MPI_Sendrecv");
    return DT_OK;
}
