/* src/comm/op_kind.h - internal: the kinds of operations dtrain runs
 * (collectives, and the other blocking operations the watchdog watches),
 * their names, and the one-line description of a call used by mismatch
 * messages and stall reports. */
#ifndef DT_COMM_OP_KIND_H
#define DT_COMM_OP_KIND_H

#include <stddef.h>
#include <stdint.h>

typedef enum dt_coll_kind {
    DT_COLL_ALLREDUCE, DT_COLL_ALLGATHER, DT_COLL_REDUCE_SCATTER, DT_COLL_REDUCE,
    DT_COLL_BROADCAST, DT_COLL_GATHER, DT_COLL_SCATTER, DT_COLL_ALL_TO_ALL,
    DT_COLL_SEND, DT_COLL_RECV, DT_COLL_BARRIER,
    DT_COLL_ALLREDUCE_LIST, DT_COLL_ALLGATHER_LIST, DT_COLL_REDUCE_SCATTER_LIST,
    DT_COLL_REDUCE_SCATTER_PER_RANK /* in: one tensor per rank; recv/count/dtype: the output */
} dt_coll_kind;

/* Operations that are not collectives (dt_coll_kind values are below 64).
 * Creation and release of a sub-communicator are checked operations on the
 * world: they take the world's next sequence number, like a collective. */
enum { DT_OP_COMM_CREATE = 64, DT_OP_FINALIZE = 65, DT_OP_COMM_RELEASE = 66 };

/* The dtype or op of an operation that has none (a barrier's), or of a list
 * that mixes several; also in fingerprint headers (transport/transport.h). */
#define DT_FP_NONE 0xffu

/* "allreduce", ..., "dt_finalize", "sub-communicator creation"; "?" if unknown. */
const char *dt_op_kind_name(int kind);

/* "allreduce(f32, count 1024, sum) #5 on world" (dtype/op DT_FP_NONE when
 * not applicable, root a world rank or -1, nlist and layout (0: not shown)
 * for list collectives; communicator names from the registry). */
const char *dt_op_describe(char *buf, size_t cap, int kind, int dtype, uint64_t count, int op,
                           int root, uint64_t seq, uint32_t cid, uint32_t nlist, uint32_t layout);
/* The same for a call made by world rank `who` (its group's name). */
const char *dt_op_describe_of(int who, char *buf, size_t cap, int kind, int dtype, uint64_t count, int op,
                              int root, uint64_t seq, uint32_t cid, uint32_t nlist, uint32_t layout);

#endif
