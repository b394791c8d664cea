/* src/transport/mpi/shm_mpi.c - allreduce (and reduce) through an MPI-3
 * shared-memory window, for communicators whose ranks all run on one host
 * (reduce-scatter, allgather and broadcast: shm_coll.c; the layout of the
 * window and the discipline every operation on it follows: shm_internal.h).
 *
 * Every rank of such a communicator owns two buffers of `slot` bytes (the
 * agreed DTRAIN_SHM_CHUNK_BYTES, default 1 MiB) in one
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
 * it beats MPI_Allreduce over the point-to-point transport (docs/benchmarks.md, bench/).
 *
 * Memory from dt_comm_alloc_shared is a second window per allocation
 * (`regions`). Once a communicator's members have any, every call of at
 * least REGION_MIN_BYTES first publishes which region span it reduces in
 * place (one barrier); when every member names the same span, the call
 * skips A and the buffers: each rank reduces its part straight from every
 * member's segment over its own input, then copies the other parts from
 * their owners, half the memory traffic.
 *
 * The fingerprint check of every collective on such a communicator runs
 * here too (dt_mpi_shm_check): each rank publishes its header beside its
 * barrier counter, one barrier, each compares them all. No MPI call, so a
 * rank that waits for a slower one yields the processor instead of polling.
 * Small allreduces (up to 64 KiB) travel with their check: each rank also
 * publishes its data, and after the one barrier reduces every rank's data
 * itself (dt_mpi_shm_allreduce_checked). Whatever each rank called, every
 * check is one barrier, so ranks whose calls differ still meet and agree.
 *
 * Out-of-place calls of at least DTRAIN_SHM_STREAM_BYTES (default 16 MiB)
 * write their outputs with streaming (non-temporal) stores: an output that
 * large leaves the caches anyway, and streaming skips reading each of its
 * lines from memory before overwriting it, a third of such a call's memory
 * traffic (16-64 MB out-of-place: 10-25% faster on this VM, docs/benchmarks.md).
 *
 * A reduce runs the same way with only the root writing its output (the
 * others take both barriers of each chunk and skip C).
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
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include "transport/mpi/shm_internal.h"
#include "transport/reduce_kernels.h"
#include "core/error.h"

#define BLOCK_BYTES DT_SHM_BLOCK_BYTES
#define PAGE DT_SHM_PAGE
/* Allreduces from this size up on members that have regions exchange the
 * descriptor that may skip the buffers: below, the data stays in cache
 * anyway and the extra barrier would cost more than the copies. */
#define REGION_MIN_BYTES ((size_t)512 << 10)
/* Each member's part of the window (shm_internal.h): the counter's page and
 * room for the stagger, then the two buffers. */
#define HEAD_BYTES (2 * PAGE)
/* Within the counter's page, each in its own cache line(s): the barrier
 * counter at 0, the call descriptor (region id, offset, bytes), and the two
 * 64-byte check header slots. */
#define CTRL_DESC 64
#define CTRL_HDRS 128
_Static_assert(CTRL_DESC + 3 * sizeof(uint64_t) <= CTRL_HDRS && CTRL_HDRS + 2 * sizeof(dt_fp_hdr) <= PAGE,
               "the counter's page holds the descriptor and both header slots");
/* After the buffers, two slots for the data of small checked allreduces
 * (dt_mpi_shm_allreduce_checked), alternating with the check count like the
 * headers, staggered like the buffers. */
#define INLINE_BYTES ((size_t)64 << 10)
static size_t inline_off(size_t slot) { return HEAD_BYTES + ((2 * slot + PAGE - 1) & ~(PAGE - 1)); }
static size_t window_bytes(size_t slot) { return inline_off(slot) + PAGE + 2 * INLINE_BYTES; }
static size_t stagger(int q, int p) { return ((size_t)q * PAGE / (size_t)p) & ~(size_t)63; }

static void shm_free(mpi_shm *s, int finalized) {
    if (!s) return;
    while (s->regions) {
        shm_region *r = s->regions;
        s->regions = r->next;
        if (!finalized) {
            MPI_Win_unlock_all(r->win);
            MPI_Win_free(&r->win);
        }
        free(r->base);
        free(r);
    }
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

void dt_shm_release(mpi_shm *s, int finalized) {
    if (s && --s->refs == 0) shm_free(s, finalized);
}

void dt_mpi_shm_detach(mpi_impl *impl, int finalized) {
    mpi_shm *s = impl->shm;
    impl->shm = NULL;
    dt_shm_release(s, finalized);
}

/* *all_ok = 1 if every member has `ok` and twice `need` bytes free in
 * /dev/shm (agreed over comm). Open MPI and MPICH back shared windows with a
 * file there, where running out means SIGBUS on first touch (containers
 * often give /dev/shm 64 MB). */
int dt_shm_room(MPI_Comm comm, double need, int ok, int *all_ok) {
    struct statvfs sv;
    ok = ok && (statvfs("/dev/shm", &sv) != 0 || (double)sv.f_bavail * (double)sv.f_frsize >= 2.0 * need);
    DT_MPI_TRY(MPI_Allreduce(&ok, all_ok, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
    return DT_OK;
}

/* A shared window of `bytes` per member of comm (p members), locked for
 * direct loads and stores by every member: base[q] receives member q's
 * segment, page-aligned when `aligned` (segments then allocated apart, each
 * a page larger). On failure nothing is left allocated. */
static int window_open(MPI_Comm comm, int p, size_t bytes, int aligned, MPI_Win *win, char **base) {
    MPI_Info info = MPI_INFO_NULL;
    if (aligned && MPI_Info_create(&info) == MPI_SUCCESS) MPI_Info_set(info, "alloc_shared_noncontig", "true");
    char *mine = NULL;
    int rc = MPI_Win_allocate_shared((MPI_Aint)(bytes + (aligned ? PAGE : 0)), 1, info, comm, &mine, win);
    if (info != MPI_INFO_NULL) MPI_Info_free(&info);
    if (rc != MPI_SUCCESS) return dt_mpi_fail(rc, "MPI_Win_allocate_shared");
    for (int q = 0; q < p; q++) {
        MPI_Aint sz = 0;
        int du = 0;
        char *raw = NULL;
        rc = MPI_Win_shared_query(*win, q, &sz, &du, &raw);
        if (rc != MPI_SUCCESS) { MPI_Win_free(win); return dt_mpi_fail(rc, "MPI_Win_shared_query"); }
        /* the offset within a page is the same in every member's mapping */
        size_t pad = aligned ? (PAGE - (uintptr_t)raw % PAGE) % PAGE : 0;
        if ((size_t)sz < bytes + pad) {
            MPI_Win_free(win);
            return DT_ERR(DT_ERR_BACKEND, "shared window of rank %d has %ld bytes, expected %zu", q, (long)sz, bytes + pad);
        }
        base[q] = raw + pad;
    }
    rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, *win);
    if (rc != MPI_SUCCESS) { MPI_Win_free(win); return dt_mpi_fail(rc, "MPI_Win_lock_all"); }
    return DT_OK;
}

size_t dt_shm_window_bytes(void) { return window_bytes(dt_shm_chunk()); }

int dt_shm_open(MPI_Comm comm, int p, int me, int check_room, mpi_shm **out) {
    *out = NULL;
    /* Room for the window: every member needs twice the window free in
     * /dev/shm, or none uses the path (agreed: the same branch everywhere). */
    int all_ok = 1, rc = check_room ? dt_shm_room(comm, (double)p * (double)window_bytes(dt_shm_chunk()), 1, &all_ok) : DT_OK;
    if (rc || !all_ok) return rc;
    mpi_shm *s = calloc(1, sizeof *s);
    if (!s) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    s->win = MPI_WIN_NULL;
    s->refs = 1;
    s->p = p;
    s->me = me;
    s->pof2 = 1;
    while (s->pof2 <= p / 2) s->pof2 <<= 1;
    s->rem = p - s->pof2;
    int levels = 0;
    for (int v = s->pof2; v > 1; v >>= 1) levels++;
    s->base = calloc((size_t)p, sizeof *s->base);
    s->ctrl = calloc((size_t)p, sizeof *s->ctrl);
    s->x = calloc((size_t)p, sizeof *s->x);
    s->levels = levels;
    s->scratch = malloc(BLOCK_BYTES * (size_t)(levels + 1));
    s->slot = dt_shm_chunk();
    if (!s->base || !s->ctrl || !s->x || !s->scratch) { shm_free(s, 1); return DT_ERR(DT_ERR_NOMEM, "out of memory"); }
    if ((rc = window_open(comm, p, window_bytes(s->slot), 0, &s->win, s->ctrl))) {
        s->win = MPI_WIN_NULL;
        shm_free(s, 1);
        return rc;
    }
    for (int q = 0; q < p; q++) s->base[q] = s->ctrl[q] + PAGE + stagger(q, p);
    atomic_store((_Atomic uint64_t *)(void *)s->ctrl[me], 0);
    rc = MPI_Win_sync(s->win);
    if (rc == MPI_SUCCESS) rc = MPI_Barrier(comm); /* every counter is 0 before anyone counts */
    if (rc != MPI_SUCCESS) { MPI_Win_free(&s->win); shm_free(s, 1); return dt_mpi_fail(rc, "MPI_Win_sync / MPI_Barrier"); }
    *out = s;
    return DT_OK;
}

int dt_mpi_shm_attach(dt_comm *c, const mpi_impl *si) {
    mpi_impl *impl = c->impl;
    if (si && si->shm) {
        impl->shm = si->shm;
        impl->shm->refs++;
        return DT_OK;
    }
    int p = c->info.size;
    /* identical on every member: size, host layout, agreed settings */
    if (p < 2 || c->info.local_size != p || !dt_shm_on()) return DT_OK;
    return dt_shm_open(impl->comm, p, c->info.rank, 1, &impl->shm);
}

/* ---- memory of the members (dt_comm_alloc_shared) ------------------------ */

int dt_mpi_shm_alloc(dt_comm *c, size_t bytes, void **ptr) {
    mpi_impl *impl = c->impl;
    mpi_shm *s = impl->shm;
    if (!s) return DT_DECLINED; /* the same on every member */
    int p = s->p, all_ok = 0;
    shm_region *r = calloc(1, sizeof *r);
    if (r && !(r->base = calloc((size_t)p, sizeof *r->base))) { free(r); r = NULL; }
    int rc = dt_shm_room(impl->comm, (double)p * (double)bytes, r != NULL, &all_ok);
    if (rc || !all_ok) {
        if (r) free(r->base);
        free(r);
        return rc ? rc : DT_DECLINED;
    }
    if ((rc = window_open(impl->comm, p, bytes, 1, &r->win, r->base))) {
        free(r->base);
        free(r);
        return rc;
    }
    char *mine = r->base[c->info.rank];
    memset(mine, 0, bytes);
    r->bytes = bytes;
    r->id = ++s->nregions;
    r->live = 1;
    r->next = s->regions;
    s->regions = r;
    *ptr = mine;
    return DT_OK;
}

int dt_mpi_shm_free(dt_comm *c, void *ptr) {
    mpi_shm *s = ((mpi_impl *)c->impl)->shm;
    for (shm_region *r = s ? s->regions : NULL; r; r = r->next)
        if (r->live && r->base[c->info.rank] == ptr) { r->live = 0; return DT_OK; }
    return DT_DECLINED;
}

/* The live region whose own segment holds [p, p + bytes), and p's offset in it. */
static const shm_region *region_of(const mpi_shm *s, int me, const void *p, size_t bytes, size_t *off) {
    for (const shm_region *r = s->regions; r; r = r->next) {
        uintptr_t b = (uintptr_t)r->base[me], a = (uintptr_t)p;
        if (r->live && a >= b && bytes <= r->bytes && a - b <= r->bytes - bytes) {
            *off = (size_t)(a - b);
            return r;
        }
    }
    return NULL;
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

/* dst <- src, n bytes; `stream`: with streaming stores, which do not read
 * dst's lines first nor keep them in cache (the caller fences once done). */
void dt_shm_copy_out(char *dst, const char *src, size_t n, int stream) {
#ifdef __SSE2__
    if (stream && n >= 256) {
        size_t head = (size_t)(-(uintptr_t)dst & 63); /* to a cache line boundary */
        memcpy(dst, src, head);
        dst += head, src += head, n -= head;
        for (; n >= 64; n -= 64, dst += 64, src += 64)
            for (int k = 0; k < 64; k += 16)
                _mm_stream_si128((__m128i *)(void *)(dst + k), _mm_loadu_si128((const __m128i *)(const void *)(src + k)));
    }
#else
    (void)stream;
#endif
    memcpy(dst, src, n);
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

/* outputs of elements [from, to) <- src (contiguous); `stream`: the
 * out-of-place pieces with streaming stores */
static void scatter(walk *w, size_t from, size_t to, const char *src, int stream) {
    for (size_t pos = from; pos < to;) {
        const char *in;
        char *out;
        size_t len = piece(w, pos, to, &in, &out, 1);
        dt_shm_copy_out(out, src + (pos - from) * w->es, len * w->es, stream && in != out);
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

void dt_shm_tree(mpi_shm *s, char *dst, size_t n, dt_dtype dt, dt_op op) {
    tree(s, 0, s->pof2, dst, 0, n, dt, op);
}

void dt_shm_fence(void) {
#ifdef __SSE2__
    _mm_sfence();
#endif
}

static _Atomic uint64_t *counter(const mpi_shm *s, int q) { return (_Atomic uint64_t *)(void *)s->ctrl[q]; }

/* MPI's progress while a rank waits here. An MPI call may return before its
 * data has left the process: Open MPI completes a send once the transport
 * holds the data, and the transport pushes it out only while the process is
 * inside MPI (weak progress). A rank that completed, say, MPI_Reduce and then
 * waits here for a host-mate that still waits inside that MPI_Reduce for the
 * rest of the first rank's data would wait forever (seen: 2 hosts x 2 ranks,
 * the leaves of MPI_Reduce's binomial tree in the next call's barrier, the
 * other two in MPI_Reduce, until the watchdog's timeout). So the wait calls
 * into MPI now and then: MPI_Iprobe on MPI_COMM_SELF matches nothing dtrain
 * sends, takes nothing from anyone, and runs MPI's progress engine. */
static void mpi_progress(void) {
    int flag = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
}

/* Barrier over the window: publish my count (release: my stores to my buffer
 * before it are visible to whoever sees it), wait until every peer's count
 * has reached it (acquire). Waiting yields the processor after a short spin,
 * so that a rank with more threads than cores (computing while its
 * communication thread waits here) keeps its compute thread running, and
 * from then on lets MPI progress every 16th time (mpi_progress). */
void dt_shm_sync(mpi_shm *s) {
    int me = s->me;
    uint64_t t = ++s->seq;
    atomic_store_explicit(counter(s, me), t, memory_order_release);
    for (int q = 0; q < s->p; q++) {
        if (q == me) continue;
        for (unsigned spin = 0; atomic_load_explicit(counter(s, q), memory_order_acquire) < t; spin++) {
            if (spin < 100) continue;
            sched_yield();
            if (spin % 16 == 0) mpi_progress();
        }
    }
}

/* The common layouts, in one pass whose branches are all predictable (lists
 * are long): 1 if each span is in place or its input and output are
 * disjoint, and each span's hull (input and output together) lies after the
 * previous spans' hulls, as tensors allocated one after the other are. */
static int hulls_ascend(const dt_span *sp, int n, size_t es) {
    uintptr_t end = 0; /* where the hulls so far end */
    for (int i = 0; i < n; i++) {
        uintptr_t a = (uintptr_t)sp[i].in, b = (uintptr_t)sp[i].out, bytes = sp[i].count * es;
        if (!bytes) continue;
        if (a <= b) {
            if (a < end || (a != b && a + bytes > b)) return 0;
            end = b + bytes;
        } else {
            if (b < end || b + bytes > a) return 0;
            end = a + bytes;
        }
    }
    return 1;
}

/* 1 if outputs may be written while other inputs are still to be read: no
 * output overlaps another span's input, and none overlaps its own input
 * other than exactly (in place). Exact for hulls that ascend, and when the
 * inputs and the outputs each ascend through memory in list order (a merge
 * of the two sorted interval lists); otherwise only when every span is in
 * place or the outputs' address range misses the inputs'. (Calls of one
 * chunk read every input before they write any output, so they need no such
 * condition.) */
static int safe_layout(const dt_span *sp, int n, size_t es) {
    if (hulls_ascend(sp, n, es)) return 1;
    int in_place = 1, ascending = 1;
    uintptr_t ilo = UINTPTR_MAX, ihi = 0, olo = UINTPTR_MAX, ohi = 0;
    for (int i = 0; i < n; i++) {
        uintptr_t a = (uintptr_t)sp[i].in, b = (uintptr_t)sp[i].out, bytes = sp[i].count * es;
        if (!bytes) continue;
        in_place &= a == b;
        ascending &= a >= ihi && b >= ohi; /* starts where the previous spans ended, or after */
        ilo = a < ilo ? a : ilo;
        ihi = a + bytes > ihi ? a + bytes : ihi;
        olo = b < olo ? b : olo;
        ohi = b + bytes > ohi ? b + bytes : ohi;
    }
    if (in_place || !ihi || ohi <= ilo || olo >= ihi) return 1;
    if (!ascending) return 0;
    for (int i = 0, j = 0; i < n && j < n;) { /* input i, output j */
        if (!sp[i].count) { i++; continue; }
        if (!sp[j].count) { j++; continue; }
        uintptr_t a = (uintptr_t)sp[i].in, b = (uintptr_t)sp[j].out;
        if (b + sp[j].count * es <= a) j++;
        else if (a + sp[i].count * es <= b) i++;
        else if (i == j && a == b) { i++; j++; }
        else return 0;
    }
    return 1;
}

/* ---- the fingerprint check through the window --------------------------- */

/* Where rank q publishes its header for check k, beside its barrier counter:
 * two slots, alternating with k. A rank can be at most one check ahead of
 * another (each check is a barrier), so it never overwrites a header that
 * another rank is still reading. */
static dt_fp_hdr *hdr_slot(const mpi_shm *s, int q, uint64_t k) {
    return (dt_fp_hdr *)(void *)(s->ctrl[q] + CTRL_HDRS + sizeof(dt_fp_hdr) * (k & 1));
}

static char *inline_slot(const mpi_shm *s, int q, uint64_t k) {
    return s->ctrl[q] + inline_off(s->slot) + stagger(q, s->p) + INLINE_BYTES * (k & 1);
}

/* Publish my header (my data already in my slot), one barrier, compare. */
static void publish(mpi_shm *s, int me, dt_fp_hdr *h, uint64_t k) {
    memcpy(hdr_slot(s, me, k), h, sizeof *h);
    dt_shm_sync(s); /* release / acquire: every header and slot is visible */
    for (int q = 0; q < s->p; q++) {
        const dt_fp_hdr *o = hdr_slot(s, q, k);
        if (q != me && (o->fp != h->fp || (o->flags & DT_FP_MISMATCH))) h->flags |= DT_FP_MISMATCH;
    }
}

int dt_mpi_shm_check(dt_comm *c, dt_fp_hdr *h) {
    mpi_shm *s = ((mpi_impl *)c->impl)->shm;
    publish(s, s->me, h, s->checks++);
    return DT_OK;
}

int dt_mpi_shm_allreduce_checked(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op,
                                 dt_fp_hdr *h) {
    mpi_shm *s = ((mpi_impl *)c->impl)->shm;
    size_t es = dt_dtype_size(dt), bytes = count * es, B = BLOCK_BYTES / es;
    if (bytes > INLINE_BYTES || !dt_reduce_kernel_ok(dt, op)) { /* the check, then the transport */
        dt_mpi_shm_check(c, h);
        return h->flags & DT_FP_MISMATCH ? DT_OK : c->ops->allreduce(c, send, recv, count, dt, op);
    }
    int me = s->me;
    uint64_t k = s->checks++;
    if (bytes) memcpy(inline_slot(s, me, k), send, bytes);
    h->data_bytes = (uint32_t)bytes;
    publish(s, me, h, k);
    if (h->flags & DT_FP_MISMATCH) return DT_OK; /* the output is left alone */
    /* every rank reduces every rank's data, in the tree's association */
    for (size_t pos = 0; pos < count; pos += B) {
        size_t len = count - pos < B ? count - pos : B;
        for (int q = 0; q < s->p; q++) s->x[q] = inline_slot(s, q, k) + pos * es;
        dt_shm_tree(s, (char *)recv + pos * es, len, dt, op);
    }
    if (op == DT_AVG) dt_reduce_divide(recv, count, dt, s->p);
    return DT_OK;
}

/* ---- in place in the members' own memory ------------------------------- */

/* Where a rank publishes, before each allreduce on members that have
 * regions, which region span its call reduces in place: region id (0: none),
 * offset, bytes. Beside its barrier counter, in its own line. */
static uint64_t *call_desc(const mpi_shm *s, int q) { return (uint64_t *)(void *)(s->ctrl[q] + CTRL_DESC); }

/* Exchange the descriptors (one barrier) and agree: 1, with *reg / *off, if
 * every member names the same region span (same offset and size) for `ptr`
 * (NULL: none); every member reaches the same answer. */
static int region_agreed_at(mpi_shm *s, const void *ptr, size_t bytes, const shm_region **reg, size_t *off) {
    int me = s->me;
    const shm_region *r = NULL;
    size_t o = 0;
    if (ptr) r = region_of(s, me, ptr, bytes, &o);
    uint64_t *d = call_desc(s, me);
    d[0] = r ? r->id : 0;
    d[1] = o;
    d[2] = bytes;
    dt_shm_sync(s); /* release / acquire: the descriptors are visible */
    for (int q = 0; q < s->p; q++) {
        const uint64_t *e = call_desc(s, q);
        if (e[0] != d[0] || e[1] != d[1] || e[2] != d[2]) return 0;
    }
    *reg = r;
    *off = o;
    return r != NULL;
}

/* The allreduce's form: one span, in place. */
static int region_agreed(mpi_shm *s, int me, const dt_span *sp, int n, size_t bytes, const shm_region **reg, size_t *off) {
    (void)me;
    return region_agreed_at(s, n == 1 && sp->in == sp->out ? sp->out : NULL, bytes, reg, off);
}

/* Allreduce of `total` elements at offset `off` of region r on every member,
 * in place, with no staging: each rank reduces its part reading every
 * member's segment directly and stores the result over its own input there;
 * then copies the other parts' results from their owners. Same association
 * (the tree) as the buffered path, so the same bits. */
static void reduce_region(mpi_shm *s, int me, const shm_region *r, size_t off, size_t total, dt_dtype dt, dt_op op) {
    int p = s->p;
    size_t es = dt_dtype_size(dt), B = BLOCK_BYTES / es;
    size_t lo = total * (size_t)me / (size_t)p, hi = total * (size_t)(me + 1) / (size_t)p;
    char *res = s->scratch + (size_t)s->levels * BLOCK_BYTES, *own = r->base[me] + off;
    for (size_t pos = lo; pos < hi;) {
        size_t len = hi - pos < B ? hi - pos : B;
        for (int q = 0; q < p; q++) s->x[q] = r->base[q] + off + pos * es;
        /* two ranks: one kernel call that reads both operands before each
         * store, so the result may go straight over mine; more: the tree
         * stores partial results before it has read every operand */
        char *dst = p == 2 ? own + pos * es : res;
        dt_shm_tree(s, dst, len, dt, op);
        if (op == DT_AVG) dt_reduce_divide(dst, len, dt, p);
        if (dst == res) memcpy(own + pos * es, res, len * es);
        pos += len;
    }
    dt_shm_sync(s);
    for (int q = 0; q < p; q++) {
        if (q == me) continue;
        size_t ql = total * (size_t)q / (size_t)p, qh = total * (size_t)(q + 1) / (size_t)p;
        memcpy(own + ql * es, r->base[q] + off + ql * es, (qh - ql) * es);
    }
    dt_shm_sync(s); /* no rank returns (and lets its caller write) while another still reads its segment */
}

/* The buffered allreduce (file comment) of the spans; root >= 0: a reduce,
 * whose outputs only member `root` writes (the others' spans are read only). */
static int shm_allreduce(mpi_shm *s, const dt_span *spans, int n, size_t total, dt_dtype dt, dt_op op, int root) {
    size_t es = dt_dtype_size(dt);
    if (n < 1 || !dt_reduce_kernel_ok(dt, op) || total == 0 || total < dt_shm_min() / es) return DT_DECLINED;
    /* direct: outputs may be written while inputs are still being read */
    int direct = n == 1 || safe_layout(spans, n, es);
    if (!direct && total > s->slot / es) return DT_DECLINED;
    int p = s->p, me = s->me, writes = root < 0 || root == me;
    /* the same on every member: regions are allocated collectively, and a
     * reduce never takes this path */
    if (root < 0 && s->nregions && total * es >= REGION_MIN_BYTES) {
        const shm_region *r = NULL;
        size_t roff = 0;
        if (region_agreed(s, me, spans, n, total * es, &r, &roff)) {
            reduce_region(s, me, r, roff, total, dt, op);
            return DT_OK;
        }
    }
    int stream = writes && total * es >= dt_shm_stream();
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
        dt_shm_sync(s);
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
            dt_shm_tree(s, dst, len, dt, op);
            if (op == DT_AVG) dt_reduce_divide(dst, len, dt, p);
            if (direct && writes) dt_shm_copy_out(out, dst, len * es, stream && out != in);
            pos += len;
        }
        if (!direct && writes) scatter(&w, off + lo, off + hi, mine + lo * es, stream);
        dt_shm_sync(s);
        /* C: the other parts' results into my output */
        for (int q = 0; q < p && writes; q++) {
            if (q == me) continue;
            size_t ql = k * (size_t)q / (size_t)p, qh = k * (size_t)(q + 1) / (size_t)p;
            scatter(&w, off + ql, off + qh, s->base[q] + slot_off + ql * es, stream);
        }
    }
    if (stream) dt_shm_fence(); /* the streamed stores are ordered before whatever reports the call done */
    return DT_OK;
}

int dt_mpi_shm_allreduce(dt_comm *c, const dt_span *spans, int n, size_t total, dt_dtype dt, dt_op op) {
    mpi_shm *s = ((mpi_impl *)c->impl)->shm;
    int rc = s ? shm_allreduce(s, spans, n, total, dt, op, -1) : DT_DECLINED;
    if (rc == DT_OK) dt_path_count[DT_PATH_SHM_ALLREDUCE]++;
    return rc;
}

int dt_mpi_shm_reduce(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op, int root) {
    mpi_shm *s = ((mpi_impl *)c->impl)->shm;
    /* off the root the span is only read (recv may be NULL there) */
    dt_span one = {send, s && s->me == root ? recv : (void *)(uintptr_t)send, count};
    int rc = s ? shm_allreduce(s, &one, 1, count, dt, op, root) : DT_DECLINED;
    if (rc == DT_OK) dt_path_count[DT_PATH_SHM_REDUCE]++;
    return rc;
}

/* ---- single copy from the members' own memory -------------------------------
 * A reduce_scatter whose input, an allgather whose input, a broadcast whose
 * root's input lies in dt_comm_alloc_shared memory (on every member that
 * has input: each at any offset of any region), of at least REGION_MIN_BYTES
 * in all, moves with no staging: after one barrier that exchanges where each
 * member's input lies (and makes it visible), each member reads what it
 * needs straight from the others' memory into its output, wherever that is;
 * a second barrier keeps every member from returning (and its caller from
 * writing its input) while another still reads it. One copy per byte
 * received, as a single-copy MPI transport, without its system calls; a
 * reduce_scatter reduces its block reading every member's input, the
 * allreduce's tree. Returns DT_DECLINED (on every member alike) unless every
 * input lies in such memory. */

/* The region of id `id` (the same id on every member: allocated collectively). */
static const shm_region *region_by_id(const mpi_shm *s, uint64_t id) {
    for (const shm_region *r = s->regions; r; r = r->next)
        if (r->id == id) return r;
    return NULL;
}

/* Where member q's input lies, from its published descriptor (NULL: not in a region). */
static const char *input_of(const mpi_shm *s, int q, size_t bytes) {
    const uint64_t *e = call_desc(s, q);
    const shm_region *r = e[0] ? region_by_id(s, e[0]) : NULL;
    return r && e[2] == bytes ? r->base[q] + e[1] : NULL;
}

int dt_shm_region_collective(mpi_shm *s, int kind, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op,
                             int root) {
    size_t es = dt_dtype_size(dt), p = (size_t)s->p, blk = count * es;
    size_t in_bytes = kind == DT_SHM_REGION_REDUCE_SCATTER ? blk * p : blk;
    if (!s->nregions || blk * (kind == DT_SHM_REGION_BROADCAST ? 1 : p) < REGION_MIN_BYTES)
        return DT_DECLINED; /* the same on every member */
    int me = s->me, has = kind != DT_SHM_REGION_BROADCAST || me == root;
    const shm_region *mine = NULL;
    size_t off = 0;
    if (has) mine = region_of(s, me, send, in_bytes, &off);
    uint64_t *d = call_desc(s, me);
    d[0] = mine ? mine->id : 0;
    d[1] = off;
    d[2] = in_bytes;
    dt_shm_sync(s); /* release / acquire: descriptors and inputs are visible */
    for (int q = 0; q < s->p; q++) /* every input in a region, or the staged path */
        if ((kind != DT_SHM_REGION_BROADCAST || q == root) && !input_of(s, q, in_bytes)) return DT_DECLINED;
    char *out = recv;
    if (kind == DT_SHM_REGION_BROADCAST) {
        if (me != root) memcpy(out, input_of(s, root, in_bytes), blk);
        else if (send != recv) memcpy(out, send, blk);
    } else if (kind == DT_SHM_REGION_ALLGATHER) {
        for (int q = 0; q < s->p; q++) {
            char *dst = out + (size_t)q * blk;
            const char *src = q == me ? send : input_of(s, q, in_bytes);
            if (dst != src) memcpy(dst, src, blk);
        }
    } else { /* my block of every member's input */
        size_t B = BLOCK_BYTES / es, lo = (size_t)me * blk;
        char *res = s->scratch + (size_t)s->levels * BLOCK_BYTES;
        int in_place = out == (const char *)send + lo;
        for (size_t pos = 0; pos < count;) {
            size_t len = count - pos < B ? count - pos : B;
            for (int q = 0; q < s->p; q++)
                s->x[q] = (q == me ? (const char *)send : input_of(s, q, in_bytes)) + lo + pos * es;
            /* over my own operand only at two members (one kernel reads both before each store) */
            char *dst = !in_place || s->p == 2 ? out + pos * es : res;
            dt_shm_tree(s, dst, len, dt, op);
            if (op == DT_AVG) dt_reduce_divide(dst, len, dt, s->p);
            if (dst == res) memcpy(out + pos * es, res, len * es);
            pos += len;
        }
    }
    dt_shm_sync(s); /* nobody returns while another still reads its input */
    return DT_OK;
}
