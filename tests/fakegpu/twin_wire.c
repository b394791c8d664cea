/* tests/fakegpu/twin_wire.c - the CPU twins of src/transport/nccl's
 * compressed wire kernels (wire_nccl.cu, fakegpu.h): f32 to bfloat16 or half
 * through dtrain's own conversions (dtrain/dtype.h: round to nearest, ties to
 * even, the kernels' bits for every finite float and infinity) and back,
 * divided by the divisor as the kernel divides (IEEE, correctly rounded). */
#include <stdint.h>
#include "dtrain/dtype.h"
#include "fakegpu.h"

#define DEV(var, i, bytes)                  \
    void *var = fk_dev_arg(l, (i), (bytes)); \
    if (!var) return cudaErrorIllegalAddress

/* dtk_wire_pack(dst, src, n, wire): grid-stride */
static cudaError_t pack(const fk_launch *l) {
    const size_t n = fk_size_arg(l, 2);
    const int wire = fk_int_arg(l, 3);
    if (wire != DT_WIRE_BF16 && wire != DT_WIRE_F16) return cudaErrorInvalidValue;
    DEV(dst, 0, n * 2);
    DEV(src, 1, n * 4);
    uint16_t *d = dst;
    const float *s = src;
    for (size_t i = 0; i < n; i++) d[i] = wire == DT_WIRE_BF16 ? dt_f32_to_bf16(s[i]) : dt_f32_to_f16(s[i]);
    return cudaSuccess;
}

/* dtk_wire_unpack(dst, src, n, wire, divisor): grid-stride */
static cudaError_t unpack(const fk_launch *l) {
    const size_t n = fk_size_arg(l, 2);
    const int wire = fk_int_arg(l, 3), divisor = fk_int_arg(l, 4);
    if ((wire != DT_WIRE_BF16 && wire != DT_WIRE_F16) || divisor < 1) return cudaErrorInvalidValue;
    DEV(dst, 0, n * 4);
    DEV(src, 1, n * 2);
    float *d = dst, q = (float)divisor;
    const uint16_t *s = src;
    for (size_t i = 0; i < n; i++) {
        float v = wire == DT_WIRE_BF16 ? dt_bf16_to_f32(s[i]) : dt_f16_to_f32(s[i]);
        d[i] = divisor == 1 ? v : v / q;
    }
    return cudaSuccess;
}

const fk_twin fk_twins_wire[] = {
    {"dtk_wire_pack", pack},
    {"dtk_wire_unpack", unpack},
    {NULL, NULL},
};
