/* src/transport/nccl/nccl_map.h - internal: dtrain's dtypes and reduction
 * ops as NCCL's, for a given NCCL version (pure; unit-tested). */
#ifndef DT_NCCL_MAP_H
#define DT_NCCL_MAP_H

#include "dtrain/dtype.h"

/* NCCL_VERSION_CODE of releases that matter here: bf16 and ncclAvg came with
 * 2.10; ncclCommSplit with 2.18. */
#define DT_NCCL_V(x, y, z) ((x) * 10000 + (y) * 100 + (z))
#define DT_NCCL_BF16_AVG DT_NCCL_V(2, 10, 0)
#define DT_NCCL_SPLIT DT_NCCL_V(2, 18, 0)

/* *out = the ncclDataType_t / ncclRedOp_t of dt / op in NCCL `version`
 * (NCCL_VERSION_CODE, e.g. 22809); DT_ERR_UNSUPPORTED naming them when that
 * NCCL lacks them, DT_ERR_INVALID for values that are no dtype / op. */
int dt_nccl_dtype(dt_dtype dt, int version, int *out);
int dt_nccl_op(dt_op op, int version, int *out);

#endif
