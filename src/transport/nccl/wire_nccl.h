/* src/transport/nccl/wire_nccl.h - internal: the NCCL transport's compressed
 * wire kernels (wire_nccl.cu; coll.h, "options: compressed communication",
 * device memory). An f32 reduction whose call asks for a 16-bit wire runs as
 * pack (f32 -> the wire type, into the transport's scratch), NCCL's own
 * reduction in the wire type, unpack (the wire type -> f32, divided by the
 * group size for an average). Each enqueues one kernel on `stream` and
 * returns DT_OK, or DT_ERR_BACKEND naming the kernel when the launch fails. */
#ifndef DT_TRANSPORT_NCCL_WIRE_NCCL_H
#define DT_TRANSPORT_NCCL_WIRE_NCCL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = src[i] rounded to nearest, ties to even, to bfloat16 (wire
 * DT_WIRE_BF16, 1) or IEEE half (DT_WIRE_F16, 2); i in [0, n). The bits of
 * core/dtype.c's dt_f32_to_bf16 / dt_f32_to_f16 for every finite float and
 * infinity. */
int dt_nccl_wire_pack(uint16_t *dst, const float *src, size_t n, int wire, void *stream);
/* dst[i] = widen(src[i]) / divisor (divisor 1: exactly the widened value;
 * the division is IEEE's, correctly rounded). */
int dt_nccl_wire_unpack(float *dst, const uint16_t *src, size_t n, int wire, int divisor, void *stream);

#ifdef __cplusplus
}
#endif

#endif
