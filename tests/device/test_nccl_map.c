/* dev_nccl_map: dtrain's dtypes and ops as NCCL's (nccl_map.c), for the NCCL
 * of this build and for an older one without bf16 and avg (2.9.3): every
 * dtype and op maps, what an NCCL lacks is DT_ERR_UNSUPPORTED naming it,
 * what is no dtype or op DT_ERR_INVALID. No GPU needed. */
#define _POSIX_C_SOURCE 200809L
#include <nccl.h>
#include "testutil.h"
#include "transport/nccl/nccl_map.h"

int main(void) {
    static const int want_t[DT_NUM_DTYPES] = {
        [DT_F32] = ncclFloat32, [DT_F64] = ncclFloat64, [DT_F16] = ncclFloat16, [DT_BF16] = ncclBfloat16,
        [DT_I8] = ncclInt8, [DT_U8] = ncclUint8, [DT_I32] = ncclInt32, [DT_I64] = ncclInt64};
    static const int want_o[DT_NUM_OPS] = {[DT_SUM] = ncclSum, [DT_PROD] = ncclProd, [DT_MIN] = ncclMin,
                                           [DT_MAX] = ncclMax, [DT_AVG] = ncclAvg};
    int v;
    for (int dt = 0; dt < DT_NUM_DTYPES; dt++) {
        CHECK(dt_nccl_dtype((dt_dtype)dt, NCCL_VERSION_CODE, &v) == DT_OK && v == want_t[dt], "dtype %s -> %d",
              dt_dtype_name((dt_dtype)dt), v);
        int old = dt_nccl_dtype((dt_dtype)dt, 20903, &v);
        CHECK(dt == DT_BF16 ? old == DT_ERR_UNSUPPORTED : old == DT_OK, "dtype %s in NCCL 2.9.3: %s",
              dt_dtype_name((dt_dtype)dt), dt_status_str(old));
    }
    for (int op = 0; op < DT_NUM_OPS; op++) {
        CHECK(dt_nccl_op((dt_op)op, NCCL_VERSION_CODE, &v) == DT_OK && v == want_o[op], "op %s -> %d",
              dt_op_name((dt_op)op), v);
        int old = dt_nccl_op((dt_op)op, 20903, &v);
        CHECK(op == DT_AVG ? old == DT_ERR_UNSUPPORTED : old == DT_OK, "op %s in NCCL 2.9.3: %s",
              dt_op_name((dt_op)op), dt_status_str(old));
    }
    CHECK_ERR(dt_nccl_dtype(DT_BF16, 20903, &v), DT_ERR_UNSUPPORTED,
              "NCCL 2.9.3 has no bf16 type (bf16 needs NCCL 2.10 or later)");
    CHECK_ERR(dt_nccl_op(DT_AVG, 20903, &v), DT_ERR_UNSUPPORTED, "NCCL 2.9.3 has no avg reduction");
    CHECK_ERR(dt_nccl_dtype((dt_dtype)DT_NUM_DTYPES, NCCL_VERSION_CODE, &v), DT_ERR_INVALID, "is not a dtrain dtype");
    CHECK_ERR(dt_nccl_op((dt_op)-1, NCCL_VERSION_CODE, &v), DT_ERR_INVALID, "is not a dtrain op");
    return dt_test_finish("dev_nccl_map");
}
