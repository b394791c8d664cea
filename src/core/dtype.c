/* src/core/dtype.c - dtype/op names and sizes, f16/bf16 conversions. */
#include <string.h>
#include "core/bf16.h"
#include "core/error.h"
#include "dtrain/dtype.h"

static const size_t dt_sizes[DT_NUM_DTYPES] = {4, 8, 2, 2, 1, 1, 4, 8};
static const char *const dt_names[DT_NUM_DTYPES] = {"f32", "f64", "f16", "bf16",
                                                    "i8",  "u8",  "i32", "i64"};
static const char *const dt_op_names[DT_NUM_OPS] = {"sum", "prod", "min", "max", "avg"};

size_t dt_dtype_size(dt_dtype dtype) {
    return ((unsigned)dtype < DT_NUM_DTYPES) ? dt_sizes[dtype] : 0;
}

const char *dt_dtype_name(dt_dtype dtype) {
    return ((unsigned)dtype < DT_NUM_DTYPES) ? dt_names[dtype] : "?";
}

int dt_dtype_parse(const char *name, dt_dtype *out) {
    static const struct { const char *alias; dt_dtype dt; } aliases[] = {
        {"float", DT_F32},  {"float32", DT_F32}, {"double", DT_F64}, {"float64", DT_F64},
        {"half", DT_F16},   {"float16", DT_F16}, {"bfloat16", DT_BF16}, {"int8", DT_I8},
        {"uint8", DT_U8},   {"int32", DT_I32},   {"int", DT_I32},    {"int64", DT_I64}};
    if (!name || !out) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    for (int i = 0; i < DT_NUM_DTYPES; i++)
        if (strcmp(name, dt_names[i]) == 0) { *out = (dt_dtype)i; return DT_OK; }
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(name, aliases[i].alias) == 0) { *out = aliases[i].dt; return DT_OK; }
    return DT_ERR(DT_ERR_INVALID, "unknown dtype '%s' (expected f32, f64, f16, bf16, i8, u8, i32 or i64)", name);
}

const char *dt_op_name(dt_op op) {
    return ((unsigned)op < DT_NUM_OPS) ? dt_op_names[op] : "?";
}

int dt_op_parse(const char *name, dt_op *out) {
    if (!name || !out) return DT_ERR(DT_ERR_INVALID, "NULL argument");
    for (int i = 0; i < DT_NUM_OPS; i++)
        if (strcmp(name, dt_op_names[i]) == 0) { *out = (dt_op)i; return DT_OK; }
    return DT_ERR(DT_ERR_INVALID, "unknown reduction op '%s' (expected sum, prod, min, max or avg)", name);
}

float dt_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return dt_u32_as_f32(sign | 0x7f800000u | (man << 13)); /* inf / nan */
    if (exp == 0) {
        if (man == 0) return dt_u32_as_f32(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return dt_u32_as_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t dt_f32_to_f16(float f) {
    uint32_t u = dt_f32_as_u32(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) /* inf or nan (keep nan quiet and non-zero) */
        return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (a < 0x38800000u) { /* result is subnormal or zero: round(|f| * 2^24) */
        float v = dt_u32_as_f32(a) * 16777216.0f; /* exact scaling */
        /* round half to even on the integer */
        uint32_t i = (uint32_t)v;
        float rem = v - (float)i;
        if (rem > 0.5f || (rem == 0.5f && (i & 1u))) i++;
        return (uint16_t)(sign | i);
    }
    uint32_t mant = a & 0x7fffffu, exp = (a >> 23) - 112u;
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++; /* may carry into exponent: fine */
    return (uint16_t)(sign | h);
}

float dt_bf16_to_f32(uint16_t h) { return dt_bf16_widen(h); }

uint16_t dt_f32_to_bf16(float f) { return dt_bf16_round(f); }
