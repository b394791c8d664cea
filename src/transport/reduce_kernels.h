/* src/transport/reduce_kernels.h - internal: elementwise reduction kernels of the
 * MPI backend, used where dtrain reduces data itself (fingerprint-checked
 * small allreduces in check_mpi.c, the shared-memory allreduce in shm_mpi.c)
 * and by backend_mpi.c for avg. */
#ifndef DT_REDUCE_KERNELS_H
#define DT_REDUCE_KERNELS_H

#include <stddef.h>
#include "dtrain/dtype.h"

/* 1 if dt_reduce_kernel handles (dt, op): f32, f64 and the integer types
 * with sum/prod/min/max, and avg for f32, f64 and i64 (the narrow integers
 * and the 16-bit floats need widening, which these kernels do not do). */
int dt_reduce_kernel_ok(dt_dtype dt, dt_op op);

/* d[i] = a[i] op b[i] for i < n (avg: sum). d may equal a or b; otherwise
 * the three must not overlap. Symmetric bit for bit (a op b == b op a, NaN
 * and -0 included for min/max), integers wrap around as in MPI. */
void dt_reduce_kernel(void *d, const void *a, const void *b, size_t n, dt_dtype dt, dt_op op);

/* buf[i] /= div (f32: divided by (float)div; f64; i64 truncating), the
 * second half of avg. Other dtypes are left alone. */
void dt_reduce_divide(void *buf, size_t n, dt_dtype dt, int div);

#endif
