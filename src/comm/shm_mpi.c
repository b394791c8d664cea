/* src/comm/shm_mpi.c - allreduce through an MPI-3 shared-memory window, for
 * communicators whose ranks all run on one host.
 *
 * Every rank of such a communicator owns two buffers of `slot` bytes (the
 * agreed DTRAIN_SHM_CHUNK_BYTES, default 8 MiB) in one
 * window made by MPI_Win_allocate_shared, which every member can load and
 * store directly. A call is cut into chunks of one buffer each (k elements;
 * chunk part q = elements [k*q/p, k*(q+1)/p) belongs to group rank q):
 *   A. each rank copies the parts of the chunk OTHER ranks own from its input
 *      into its buffer (gathering straight from the caller's tensors);
 *   -- window sync + barrier --
 *   B. each rank reduces its own part: its input is read where it lies, the
 *      other ranks' values straight from their buffers; the result goes into
 *      its own buffer (where that part was left free in A) and its output;
 *   -- window sync + barrier --
 *   C. each rank copies the other parts' results from their owners' buffers
 *      into its output (scattering straight into the caller's tensors).
 * Chunks alternate between the two buffers, so C of one chunk never races A
 * of the next: a rank can only be one barrier ahead of another.
 * Per rank this moves (p-1)/p of the data in, reduces 1/p and moves (p-1)/p
 * out, with no pack/unpack of fused lists and no system calls: on one host
 * it beats MPI_Allreduce over the point-to-point transport (README, bench/).
 *
 * Every element is reduced by one rank, in the fixed association of the
 * recursive doubling of check_mpi.c (a balanced tree over the ranks, the
 * first 2*rem ranks folded pairwise), so results are bit-identical on every
 * rank and do not depend on the call's size, chunking or list layout.
 * Calls run inside the engine (one thread in MPI at a time). */
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include "comm/mpi_internal.h"
#include "comm/reduce_kernels.h"
#include "core/error.h"

#define BLOCK_BYTES ((size_t)16 << 10) /* phase B works in blocks of this size */
/* Each rank's part of the window: a page holding its barrier counter, then
 * its two buffers from PAGE + stagger(q): the ranks' buffers start at
 * different offsets within a 4 KiB page (q * PAGE / p), so that streams over
 * two ranks' buffers in phase B never alias in the low 12 address bits (a
 * load matching an earlier store there stalls on x86: "4K aliasing"). The
 * head is two pages: the counter's, and room for the stagger. */
#define PAGE ((size_t)4096)
#define HEAD_BYTES (2 * PAGE)
static size_t stagger(int q, int p) { return ((size_t)q * PAGE / (size_t)p) & ~(size_t)63; }

struct mpi_shm {
    MPI_Win win;
    int refs;
    int parity;        /* buffer of the next chunk */
    size_t slot;       /* bytes of each of a rank's two buffers */
    uint64_t seq;      /* barriers passed */
    int p, pof2, rem;  /* group size; tree shape (check_mpi.c's recursive doubling) */
    char **base;       /* [p] each rank's two buffers */
    char **ctrl;       /* [p] each rank's barrier counter */
    const char **x;    /* [p] operand pointers of the block being reduced */
    char *scratch;     /* [levels][BLOCK_BYTES] partial results of the tree */
};

static void shm_free(mpi_shm *s, int finalized) {
    if (!s) return;
    if (!finalized && s->win != MPI_WIN_NULL) {
        MPI_Win_unlock_all(s->win);
        MPI_Win_free(&s->win);
    }
    free(s->base);
    free(s->ctrl);
    free(s->x);
    free(s->scratch);
    free(s);
}

void dt_mpi_shm_detach(mpi_impl *impl, int finalized) {
    mpi_shm *s = impl->shm;
    impl->shm = NULL;
    if (s && --s->refs == 0) shm_free(s, finalized);
}

int dt_mpi_shm_attach(dt_comm *c, const dt_comm *same) {
    mpi_impl *impl = c->impl;
    const mpi_impl *si = (same && same->ops == &dt_backend_mpi) ? same->impl : NULL;
    if (si && si->shm) {
        impl->shm = si->shm;
        impl->shm->refs++;
        return DT_OK;
    }
    int p = c->info.size;
    /* identical on every member: size, host layout, agreed settings */
    if (p < 2 || c->info.local_size != p || !dt_rel_shm_on()) return DT_OK;
    /* Room for the window: Open MPI and MPICH back it with a file in /dev/shm,
     * where running out means SIGBUS on first touch (containers often give
     * /dev/shm 64 MB). Every member needs twice the window free there, or
     * none uses the path (agreed: the same branch on every member). */
    double need = (double)p * (double)(HEAD_BYTES + 2 * dt_rel_shm_chunk());
    struct statvfs sv;
    int ok = statvfs("/dev/shm", &sv) != 0 || (double)sv.f_bavail * (double)sv.f_frsize >= 2.0 * need, all_ok = 0;
    DT_MPI_TRY(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, impl->comm), "MPI_Allreduce");
    if (!all_ok) return DT_OK;
    mpi_shm *s = calloc(1, sizeof *s);
    if (!s) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    s->win = MPI_WIN_NULL;
    s->refs = 1;
    s->p = p;
    s->pof2 = 1;
    while (s->pof2 <= p / 2) s->pof2 <<= 1;
    s->rem = p - s->pof2;
    int levels = 0;
    for (int v = s->pof2; v > 1; v >>= 1) levels++;
    s->base = calloc((size_t)p, sizeof *s->base);
    s->ctrl = calloc((size_t)p, sizeof *s->ctrl);
    s->x = calloc((size_t)p, sizeof *s->x);
    s->scratch = malloc(BLOCK_BYTES * (size_t)(levels ? levels : 1));
    s->slot = dt_rel_shm_chunk();
    if (!s->base || !s->ctrl || !s->x || !s->scratch) { shm_free(s, 1); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    char *mine = NULL;
    int rc = MPI_Win_allocate_shared((MPI_Aint)(HEAD_BYTES + 2 * s->slot), 1, MPI_INFO_NULL, impl->comm, &mine, &s->win);
    if (rc != MPI_SUCCESS) { shm_free(s, 1); return dt_mpi_fail(rc, "MPI_Win_allocate_shared"); }
    for (int q = 0; q < p; q++) {
        MPI_Aint sz = 0;
        int du = 0;
        rc = MPI_Win_shared_query(s->win, q, &sz, &du, &s->ctrl[q]);
        size_t want = HEAD_BYTES + 2 * s->slot;
        if (rc != MPI_SUCCESS || (size_t)sz < want) {
            MPI_Win_free(&s->win);
            shm_free(s, 1);
            return rc != MPI_SUCCESS ? dt_mpi_fail(rc, "MPI_Win_shared_query")
                                     : DT_ERR(DT_ERR_BACKEND, "shared window of rank %d has %ld bytes, expected %zu", q, (long)sz, want);
        }
    }
    for (int q = 0; q < p; q++) s->base[q] = s->ctrl[q] + PAGE + stagger(q, p);
    atomic_store((_Atomic uint64_t *)(void *)mine, 0);
    rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, s->win);
    if (rc == MPI_SUCCESS) rc = MPI_Win_sync(s->win);
    if (rc == MPI_SUCCESS) rc = MPI_Barrier(impl->comm); /* every counter is 0 before anyone counts */
    if (rc != MPI_SUCCESS) { MPI_Win_free(&s->win); shm_free(s, 1); return dt_mpi_fail(rc, "MPI_Win_lock_all"); }
    impl->shm = s;
    return DT_OK;
}

/* ---- walking the virtual concatenation of the spans ---------------------- */

typedef struct walk {
    const dt_span *s;
    int n, i;
    size_t base; /* element index where span i starts */
    size_t es;
} walk;

/* Position the walk on the span holding element pos (< total): backwards
 * at the start of a range that lies behind, forwards as pieces are taken. */
static inline void seek(walk *w, size_t pos) {
    while (w->i > 0 && pos < w->base) { w->i--; w->base -= w->s[w->i].count; }
    while (w->i < w->n - 1 && pos >= w->base + w->s[w->i].count) { w->base += w->s[w->i].count; w->i++; }
}

/* Next piece of [pos, end): *in / *out point at element pos; returns its
 * length. With many small tensors the hardware prefetchers start afresh on
 * each one, so the next span's first lines (input, or output when
 * `output`) are requested now. */
static inline size_t piece(walk *w, size_t pos, size_t end, const char **in, char **out, int output) {
    seek(w, pos);
    const dt_span *sp = &w->s[w->i];
    size_t off = pos - w->base, len = sp->count - off;
    if (len > end - pos) len = end - pos;
    *in = (const char *)sp->in + off * w->es;
    *out = (char *)sp->out + off * w->es;
    if (w->i + 1 < w->n) {
        const char *nx = output ? (const char *)sp[1].out : (const char *)sp[1].in;
        if (output) __builtin_prefetch(nx, 1);
        else __builtin_prefetch(nx, 0);
    }
    return len;
}

/* dst (contiguous) <- inputs of elements [from, to) */
static void gather(walk *w, size_t from, size_t to, char *dst) {
    for (size_t pos = from; pos < to;) {
        const char *in;
        char *out;
        size_t len = piece(w, pos, to, &in, &out, 0);
        memcpy(dst + (pos - from) * w->es, in, len * w->es);
        pos += len;
    }
}

/* outputs of elements [from, to) <- src (contiguous) */
static void scatter(walk *w, size_t from, size_t to, const char *src) {
    for (size_t pos = from; pos < to;) {
        const char *in;
        char *out;
        size_t len = piece(w, pos, to, &in, &out, 1);
        memcpy(out, src + (pos - from) * w->es, len * w->es);
        pos += len;
    }
}

/* ---- phase B: the tree over the ranks ------------------------------------ */

/* Reduce virtual ranks [lo, hi) of n elements (operands in s->x); returns the
 * result, which is in dst unless it is a single rank's operand. */
static const char *tree(mpi_shm *s, int lo, int hi, char *dst, int level, size_t n, dt_dtype dt, dt_op op) {
    if (hi - lo == 1) {
        if (lo < s->rem) { /* a folded pair */
            dt_reduce_kernel(dst, s->x[2 * lo], s->x[2 * lo + 1], n, dt, op);
            return dst;
        }
        return s->x[lo + s->rem];
    }
    int mid = (lo + hi) / 2;
    const char *a = tree(s, lo, mid, dst, level + 1, n, dt, op);
    const char *b = tree(s, mid, hi, s->scratch + (size_t)level * BLOCK_BYTES, level + 1, n, dt, op);
    dt_reduce_kernel(dst, a, b, n, dt, op);
    return dst;
}

static _Atomic uint64_t *counter(const mpi_shm *s, int q) { return (_Atomic uint64_t *)(void *)s->ctrl[q]; }

/* Barrier over the window: publish my count (release: my stores to my buffer
 * before it are visible to whoever sees it), wait until every peer's count
 * has reached it (acquire). Waiting yields the processor after a short spin,
 * so that a rank with more threads than cores (computing while its
 * communication thread waits here) keeps its compute thread running. */
static void sync_all(mpi_shm *s, int me) {
    uint64_t t = ++s->seq;
    atomic_store_explicit(counter(s, me), t, memory_order_release);
    for (int q = 0; q < s->p; q++) {
        if (q == me) continue;
        for (unsigned spin = 0; atomic_load_explicit(counter(s, q), memory_order_acquire) < t; spin++)
            if (spin >= 100) sched_yield();
    }
}

/* 1 if outputs may be written while other inputs are still to be read: no
 * output overlaps another span's input, and none overlaps its own input
 * other than exactly (in place). Exact when the inputs and the outputs each
 * ascend through memory in list order, as tensors allocated one after the
 * other do (a merge of the two sorted interval lists); otherwise only when
 * every span is in place or the outputs' address range misses the inputs'.
 * (Calls of one chunk read every input before they write any output, so
 * they need no such condition.) */
static int safe_layout(const dt_span *sp, int n, size_t es) {
    int in_place = 1, ascending = 1;
    const char *ilo = NULL, *ihi = NULL, *olo = NULL, *ohi = NULL;
    for (int i = 0; i < n; i++) {
        if (!sp[i].count) continue;
        const char *a = sp[i].in, *b = sp[i].out;
        size_t bytes = sp[i].count * es;
        if (a != b) in_place = 0;
        if (ilo && (a < ihi || b < ohi)) ascending = 0; /* starts before the previous span ended */
        if (!ilo || a < ilo) ilo = a;
        if (!ihi || a + bytes > ihi) ihi = a + bytes;
        if (!olo || b < olo) olo = b;
        if (!ohi || b + bytes > ohi) ohi = b + bytes;
    }
    if (in_place || !ilo || ohi <= ilo || olo >= ihi) return 1;
    if (!ascending) return 0;
    for (int i = 0, j = 0; i < n && j < n;) { /* input i, output j */
        if (!sp[i].count) { i++; continue; }
        if (!sp[j].count) { j++; continue; }
        const char *a = sp[i].in, *b = sp[j].out;
        if (b + sp[j].count * es <= a) j++;
        else if (a + sp[i].count * es <= b) i++;
        else if (i == j && a == b) { i++; j++; }
        else return 0;
    }
    return 1;
}

int dt_mpi_shm_allreduce(dt_comm *c, const dt_span *spans, int n, size_t total, dt_dtype dt, dt_op op) {
    mpi_impl *impl = c->impl;
    mpi_shm *s = impl->shm;
    size_t es = dt_dtype_size(dt);
    if (!s || n < 1 || !dt_reduce_kernel_ok(dt, op) || total == 0 || total < dt_rel_shm_min() / es)
        return DT_DECLINED;
    /* direct: outputs may be written while inputs are still being read */
    int direct = n == 1 || safe_layout(spans, n, es);
    if (!direct && total > s->slot / es) return DT_DECLINED;
    int p = s->p, me = c->info.rank;
    size_t K = s->slot / es, B = BLOCK_BYTES / es;
    walk w = {.s = spans, .n = n, .i = 0, .base = 0, .es = es};
    for (size_t off = 0; off < total; off += K) {
        size_t k = total - off < K ? total - off : K;
        size_t lo = k * (size_t)me / (size_t)p, hi = k * (size_t)(me + 1) / (size_t)p;
        size_t slot_off = (size_t)s->parity * s->slot;
        char *mine = s->base[me] + slot_off;
        s->parity ^= 1;
        /* A: the other ranks' parts of my input into my buffer */
        gather(&w, off, off + lo, mine);
        gather(&w, off + hi, off + k, mine + hi * es);
        sync_all(s, me);
        /* B: my part, in blocks, into my buffer; my operand is read where
         * it lies. Direct: each block's result is copied to my output while
         * it is in cache (a kernel storing to both at once ran into the
         * compiler's aliasing fallback: scalar, 4x slower). Otherwise (a
         * single chunk whose outputs may overlap other inputs) the results
         * are scattered only after B, when every input has been read: A read
         * the other parts, B mine. */
        for (size_t pos = off + lo; pos < off + hi;) {
            const char *in;
            char *out;
            size_t len = piece(&w, pos, off + hi, &in, &out, 0);
            if (len > B) len = B;
            size_t rel = (pos - off) * es;
            for (int q = 0; q < p; q++) s->x[q] = q == me ? in : s->base[q] + slot_off + rel;
            char *dst = mine + rel;
            tree(s, 0, s->pof2, dst, 0, len, dt, op);
            if (op == DT_AVG) dt_reduce_divide(dst, len, dt, p);
            if (direct) memcpy(out, dst, len * es);
            pos += len;
        }
        if (!direct) scatter(&w, off + lo, off + hi, mine + lo * es);
        sync_all(s, me);
        /* C: the other parts' results into my output */
        for (int q = 0; q < p; q++) {
            if (q == me) continue;
            size_t ql = k * (size_t)q / (size_t)p, qh = k * (size_t)(q + 1) / (size_t)p;
            scatter(&w, off + ql, off + qh, s->base[q] + slot_off + ql * es);
        }
    }
    return DT_OK;
}
