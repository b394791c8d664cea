/* dtrain/dtype.h - element types, reduction operators and wire types. */
#ifndef DTRAIN_DTYPE_H
#define DTRAIN_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_dtype {
    DT_F32 = 0, /* IEEE binary32 */
    DT_F64 = 1, /* IEEE binary64 */
    DT_F16 = 2, /* IEEE binary16, stored as uint16_t bits */
    DT_BF16 = 3,/* bfloat16 (top 16 bits of binary32), stored as uint16_t bits */
    DT_I8 = 4,
    DT_U8 = 5,
    DT_I32 = 6,
    DT_I64 = 7,
    DT_NUM_DTYPES = 8
} dt_dtype;

typedef enum dt_op {
    DT_SUM = 0,
    DT_PROD = 1,
    DT_MIN = 2,
    DT_MAX = 3,
    DT_AVG = 4, /* sum / group size; integer types divide truncating toward zero */
    DT_NUM_OPS = 5
} dt_op;

/* The type floating-point data travels in between processes (dt_coll_opts.wire:
 * its meaning and numerics are dtrain/coll.h's, "options: compressed
 * communication"). */
typedef enum dt_wire { DT_WIRE_NATIVE = 0, DT_WIRE_BF16 = 1, DT_WIRE_F16 = 2 } dt_wire;

/* Size in bytes of one element; 0 for an unknown dtype. */
size_t dt_dtype_size(dt_dtype dtype);
/* "f32", "f64", "f16", "bf16", "i8", "u8", "i32", "i64"; "?" if unknown. */
const char *dt_dtype_name(dt_dtype dtype);
/* Parse a dtype name (also accepts "float", "double", "half", "bfloat16",
 * "int8", "uint8", "int32", "int", "int64"). Returns DT_OK or DT_ERR_INVALID. */
int dt_dtype_parse(const char *name, dt_dtype *out);
/* "sum", "prod", "min", "max", "avg"; "?" if unknown. */
const char *dt_op_name(dt_op op);
/* Parse an op name. Returns DT_OK or DT_ERR_INVALID. */
int dt_op_parse(const char *name, dt_op *out);

/* Half-precision conversions (round to nearest even; NaN stays NaN). */
float dt_f16_to_f32(uint16_t h);
uint16_t dt_f32_to_f16(float f);
float dt_bf16_to_f32(uint16_t h);
uint16_t dt_f32_to_bf16(float f);

#ifdef __cplusplus
}
#endif
#endif
