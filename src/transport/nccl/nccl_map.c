/* src/transport/nccl/nccl_map.c - dtrain's dtypes and ops as NCCL's. Every
 * dtype of dtrain has an NCCL type; bf16 and avg need NCCL 2.10 or later
 * (the library loaded at run time may be older than the header). */
#include <nccl.h>
#include <stdio.h>
#include "core/error.h"
#include "transport/nccl/nccl_map.h"

static int version_str(int v, char *buf, size_t cap) {
    return snprintf(buf, cap, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
}

int dt_nccl_dtype(dt_dtype dt, int version, int *out) {
    switch (dt) {
    case DT_F32: *out = ncclFloat32; return DT_OK;
    case DT_F64: *out = ncclFloat64; return DT_OK;
    case DT_F16: *out = ncclFloat16; return DT_OK;
    case DT_I8: *out = ncclInt8; return DT_OK;
    case DT_U8: *out = ncclUint8; return DT_OK;
    case DT_I32: *out = ncclInt32; return DT_OK;
    case DT_I64: *out = ncclInt64; return DT_OK;
    case DT_BF16:
        if (version >= DT_NCCL_BF16_AVG) { *out = ncclBfloat16; return DT_OK; }
        break;
    default:
        return DT_ERR(DT_ERR_INVALID, "dtype %d is not a dtrain dtype", (int)dt);
    }
    char v[32];
    version_str(version, v, sizeof v);
    return DT_ERR(DT_ERR_UNSUPPORTED, "NCCL %s has no %s type (bf16 needs NCCL 2.10 or later); use the staged path "
                  "(DTRAIN_DEVICE_PATH=staged) or another dtype", v, dt_dtype_name(dt));
}

int dt_nccl_op(dt_op op, int version, int *out) {
    switch (op) {
    case DT_SUM: *out = ncclSum; return DT_OK;
    case DT_PROD: *out = ncclProd; return DT_OK;
    case DT_MIN: *out = ncclMin; return DT_OK;
    case DT_MAX: *out = ncclMax; return DT_OK;
    case DT_AVG:
        if (version >= DT_NCCL_BF16_AVG) { *out = ncclAvg; return DT_OK; }
        break;
    default:
        return DT_ERR(DT_ERR_INVALID, "reduction op %d is not a dtrain op", (int)op);
    }
    char v[32];
    version_str(version, v, sizeof v);
    return DT_ERR(DT_ERR_UNSUPPORTED, "NCCL %s has no avg reduction (ncclAvg needs NCCL 2.10 or later); use sum and "
                  "divide, or the staged path (DTRAIN_DEVICE_PATH=staged)", v);
}
