/* src/transport/reduce_kernels.c - elementwise reduction kernels (see
 * reduce_kernels.h). */
#include <math.h>
#include <stdint.h>
#include "transport/reduce_kernels.h"

int dt_reduce_kernel_ok(dt_dtype dt, dt_op op) {
    switch (dt) {
    case DT_F32: case DT_F64: case DT_I64: return (unsigned)op <= DT_AVG;
    case DT_I8: case DT_U8: case DT_I32: return (unsigned)op < DT_AVG;
    default: return 0;
    }
}


/* Symmetric min/max for floating point: NaN wins, then -0 < +0, so the result
 * does not depend on which operand is "mine". */
#define FMIN(T, x, y) ((x) < (y) ? (x) : (y) < (x) ? (y) : (x) != (x) ? (x) : (y) != (y) ? (y) \
                       : (signbit(x) ? (x) : (y)))
#define FMAX(T, x, y) ((x) > (y) ? (x) : (y) > (x) ? (y) : (x) != (x) ? (x) : (y) != (y) ? (y) \
                       : (signbit(x) ? (y) : (x)))

/* Three shapes, each with restrict pointers so the compiler vectorises
 * without a run-time overlap check (whose failure, e.g. for d == a, would
 * fall back to a scalar loop): d = a op b with no overlap, d == a, d == b
 * (operands always in the order a op b). */
#define LOOP(T, EXPR) do { \
    if (d == a) { T *restrict d_ = d; const T *restrict b_ = b; \
        for (size_t i = 0; i < n; i++) { T x = d_[i], y = b_[i]; d_[i] = (EXPR); } } \
    else if (d == b) { T *restrict d_ = d; const T *restrict a_ = a; \
        for (size_t i = 0; i < n; i++) { T x = a_[i], y = d_[i]; d_[i] = (EXPR); } } \
    else { T *restrict d_ = d; const T *restrict a_ = a, *restrict b_ = b; \
        for (size_t i = 0; i < n; i++) { T x = a_[i], y = b_[i]; d_[i] = (EXPR); } } } while (0)

/* integers: wrap-around arithmetic in the unsigned type (what MPI does) */
#define IREDUCE(T, U) do { switch (op) { \
    case DT_SUM: case DT_AVG: LOOP(T, (T)(U)((U)x + (U)y)); break; \
    case DT_PROD: LOOP(T, (T)(U)((U)x * (U)y)); break; \
    case DT_MIN: LOOP(T, x < y ? x : y); break; \
    case DT_MAX: LOOP(T, x > y ? x : y); break; \
    default: break; } } while (0)

#define FREDUCE(T) do { switch (op) { \
    case DT_SUM: case DT_AVG: LOOP(T, x + y); break; \
    case DT_PROD: LOOP(T, x * y); break; \
    case DT_MIN: LOOP(T, FMIN(T, x, y)); break; \
    case DT_MAX: LOOP(T, FMAX(T, x, y)); break; \
    default: break; } } while (0)

void dt_reduce_kernel(void *d, const void *a, const void *b, size_t n, dt_dtype dt, dt_op op) {
    switch (dt) {
    case DT_F32: FREDUCE(float); break;
    case DT_F64: FREDUCE(double); break;
    case DT_I8: IREDUCE(int8_t, uint8_t); break;
    case DT_U8: IREDUCE(uint8_t, uint8_t); break;
    case DT_I32: IREDUCE(int32_t, uint32_t); break;
    case DT_I64: IREDUCE(int64_t, uint64_t); break;
    default: break;
    }
}

/* avg: divide by the group size (the MPI backend's semantics) */
void dt_reduce_divide(void *buf, size_t n, dt_dtype dt, int div) {
    switch (dt) {
    case DT_F32: { float *x = buf; float q = (float)div; for (size_t i = 0; i < n; i++) x[i] /= q; break; }
    case DT_F64: { double *x = buf; double q = div; for (size_t i = 0; i < n; i++) x[i] /= q; break; }
    case DT_I64: { int64_t *x = buf; for (size_t i = 0; i < n; i++) x[i] /= div; break; }
    default: break;
    }
}

