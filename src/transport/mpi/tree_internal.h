/* src/transport/mpi/tree_internal.h - internal to the MPI transport: the
 * block collectives over point-to-point messages of tree_mpi.c (the leg
 * between hosts of the two-level collectives, and the compressed ones) and
 * the 16-bit wire formats. */
#ifndef DT_TREE_INTERNAL_H
#define DT_TREE_INTERNAL_H

#include <stdint.h>
#include "transport/mpi/mpi_internal.h"

/* One block of a tree collective: `count` elements at `buf` (this member's
 * working memory for the block: its contribution, then the result). */
typedef struct dt_tree_blk {
    char *buf;
    size_t count;
} dt_tree_blk;

enum {
    DT_TREE_RS, /* in: every block holds my contribution; out: blk[me] holds its reduction */
    DT_TREE_AR, /* in: as RS; out: every block holds its reduction (the same bits everywhere) */
    DT_TREE_AG  /* in: blk[me] holds my block; out: every block holds its member's */
};

/* Collective over comm (P members, this one `me`): blocks blk[0..P), block b
 * belonging to member b, in the association tree_mpi.c describes; avg is
 * reduced as a sum (the caller divides). wire: DT_WIRE_NATIVE, or a 16-bit
 * wire type for DT_F32 data (the reductions: (dt, op) must reduce natively,
 * dt_reduce_kernel_ok). Blocks other than the result may be overwritten. */
int dt_mpi_tree(MPI_Comm comm, int P, int me, dt_tree_blk *blk, dt_dtype dt, dt_op op, int wire, int mode);
/* Frees the staging buffers (transport finalize). */
void dt_mpi_tree_release(void);

/* The wire formats (dt_wire): bytes per element (0 for native); f32 <->
 * 16 bits, rounding to nearest even (bf16: dt_f32_to_bf16's bits, inlined
 * so that the loops vectorise); x = widen(narrow(x)) in place. */
size_t dt_wire_size(int wire);
void dt_wire_pack(uint16_t *dst, const float *src, size_t n, int wire);
void dt_wire_unpack(float *dst, const uint16_t *src, size_t n, int wire);
void dt_wire_round(float *x, size_t n, int wire);

#endif
