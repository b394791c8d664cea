/* src/transport/mpi/shm_internal.h - internal to the shared-memory files of
 * the MPI transport: the window of a set of ranks on one host (shm_mpi.c:
 * the window, its barrier, the fingerprint check, allreduce and reduce;
 * shm_coll.c: reduce-scatter, allgather and broadcast through it, and the
 * block engines the two-level collectives of hier_mpi.c run on). Nothing
 * outside transport/mpi/ includes it.
 *
 * Layout of the window: each member owns a part holding a page with its
 * barrier counter (and beside it its call descriptor and check headers),
 * then its two buffers of `slot` bytes each from PAGE + stagger(q) (the
 * members' buffers start at different offsets within a 4 KiB page, q * PAGE
 * / p, so that streams over two members' buffers never alias in the low 12
 * address bits: "4K aliasing" stalls loads on x86), then two slots for the
 * data of small checked allreduces.
 *
 * Every operation through the window follows one discipline, which lets
 * operations of any kind follow each other with nothing but the barrier
 * between their chunks: a chunk takes the next of the two buffers (parity),
 * its members WRITE their own buffer, pass a barrier, then READ the others'
 * buffers (and, for the allreduce, write their own part and pass a second
 * barrier before the others read it). The next chunk uses the other buffer;
 * the one after that writes this buffer again only after the next chunk's
 * barrier, which every member passes only once done reading this one. */
#ifndef DT_SHM_INTERNAL_H
#define DT_SHM_INTERNAL_H

#include <stdint.h>
#include "transport/mpi/mpi_internal.h"

#define DT_SHM_PAGE ((size_t)4096)
#define DT_SHM_BLOCK_BYTES ((size_t)16 << 10) /* reductions work in blocks of this size */

/* Memory from dt_comm_alloc_shared: a window of `bytes` per member, each
 * member's segment loadable by all. Kept until the members' window goes
 * (releasing a window is collective; dt_comm_free_shared is not). */
typedef struct shm_region {
    MPI_Win win;
    char **base;      /* [p] each member's segment */
    size_t bytes;     /* per member */
    uint64_t id;      /* 1, 2, ... in allocation order: the same on every member */
    int live;         /* 0 once freed by the caller */
    struct shm_region *next;
} shm_region;

struct mpi_shm {
    MPI_Win win;
    int refs;
    int parity;        /* buffer of the next chunk */
    size_t slot;       /* bytes of each of a member's two buffers */
    uint64_t seq;      /* barriers passed */
    int p, me;         /* members; this process's index among them */
    int pof2, rem;     /* tree shape (check_mpi.c's recursive doubling) */
    char **base;       /* [p] each member's two buffers */
    char **ctrl;       /* [p] each member's barrier counter */
    const char **x;    /* [p] operand pointers of the block being reduced */
    char *scratch;     /* [levels + 1][BLOCK_BYTES] partial results of the tree, then a result block */
    int levels;
    shm_region *regions;  /* dt_comm_alloc_shared memory of these members, newest first */
    uint64_t nregions;    /* regions allocated so far (the same on every member) */
    uint64_t checks;      /* fingerprint checks passed (the same on every member) */
};

/* A window over the p members of comm, this process being member me, for
 * the agreed chunk size. Collective over comm. check_room: *out = NULL (and
 * DT_OK) when some member lacks room for it in /dev/shm (agreed over comm);
 * 0: the caller agreed on that already (dt_shm_room). */
int dt_shm_open(MPI_Comm comm, int p, int me, int check_room, mpi_shm **out);
/* The bytes of a window per member, for the agreed chunk size. */
size_t dt_shm_window_bytes(void);
/* *all_ok = 1 if every member of comm has `ok` and twice `need` bytes free
 * in /dev/shm. Open MPI and MPICH back shared windows with a file there,
 * where running out means SIGBUS on first touch (containers often give
 * /dev/shm 64 MB). Collective over comm. */
int dt_shm_room(MPI_Comm comm, double need, int ok, int *all_ok);
/* Drop a reference; the last one frees the window (collective then, unless
 * MPI is finalized). */
void dt_shm_release(mpi_shm *s, int finalized);

/* Barrier over the window: publish my count (release), wait until every
 * member's count has reached it (acquire), yielding after a short spin. */
void dt_shm_sync(mpi_shm *s);
/* Reduce n elements (n * size <= DT_SHM_BLOCK_BYTES) of the operands s->x[0..p)
 * in the fixed association (a balanced tree over the members, the first
 * 2*rem folded pairwise). The result is written to dst, which may equal one
 * operand only when p == 2. */
void dt_shm_tree(mpi_shm *s, char *dst, size_t n, dt_dtype dt, dt_op op);
/* Member q's buffer of the given parity. */
static inline char *dt_shm_buf(const mpi_shm *s, int q, int parity) {
    return s->base[q] + (size_t)parity * s->slot;
}
/* The parity of the next chunk (and flips it). */
static inline int dt_shm_next(mpi_shm *s) {
    int p = s->parity;
    s->parity ^= 1;
    return p;
}
/* dst <- src, n bytes; `stream`: with streaming stores (call dt_shm_fence
 * once done). */
void dt_shm_copy_out(char *dst, const char *src, size_t n, int stream);
void dt_shm_fence(void);

/* Single copy from dt_comm_alloc_shared memory (shm_mpi.c): a reduce_scatter
 * whose input, an allgather whose input, a broadcast whose root's input lies
 * in a region on every member that has input (any offset; exchanged in one
 * barrier), of at least 512 KiB in all: each member reads straight from the
 * others' memory into its output. DT_DECLINED (on every member alike) when
 * some input is not in a region. reduce_scatter: (dt, op) must reduce
 * natively. */
enum { DT_SHM_REGION_REDUCE_SCATTER, DT_SHM_REGION_ALLGATHER, DT_SHM_REGION_BROADCAST };
int dt_shm_region_collective(mpi_shm *s, int kind, const void *send, void *recv, size_t count, dt_dtype dt, dt_op op,
                             int root);

/* ---- block engines (shm_coll.c) --------------------------------------------
 * Reduce-scatter of blocks: block b is elements [off, off + count) of every
 * member's input `in` (in_count elements), reduced for member `owner` into
 * its `out` (read on the owner only). Every member passes the same blocks
 * (out aside). An owner's out either lies outside its input or is exactly
 * in + off (in place). Chunked: every block advances by the same number of
 * elements per chunk; one barrier per chunk. avg: sum, then divided by
 * `div` when div > 0 (left as a sum when 0). DT_DECLINED if (dt, op) do not
 * reduce natively or the blocks do not fit the buffers (nb * size > slot). */
typedef struct shm_block {
    size_t off, count;
    int owner;
    void *out;
} shm_block;
int dt_shm_reduce_blocks(mpi_shm *s, const void *in, size_t in_count, const shm_block *b, int nb, dt_dtype dt,
                         dt_op op, int div, int stream);
/* Allgather of pieces: piece i (count elements) is read from `src` on its
 * owner and lands at `dst` on every member (dst == src on the owner: in
 * place; otherwise the owner copies it too). Every member passes the same
 * counts and owners. One barrier per chunk. DT_DECLINED if an owner's pieces
 * do not fit its buffer (their number * size > slot). */
typedef struct shm_piece {
    size_t count;
    int owner;
    const void *src;
    void *dst;
} shm_piece;
int dt_shm_gather_pieces(mpi_shm *s, const shm_piece *pc, int np, size_t es, int stream);

#endif
