/* tests/gpu/test_wire_kernels.c - the NCCL transport's compressed wire
 * kernels (src/transport/nccl/wire_nccl.cu: dt_nccl_wire_pack / _unpack)
 * against dtrain's host conversions (dtrain/dtype.h), BIT FOR BIT:
 *  - pack, f32 -> bf16 and f16: fresh random floats over the whole exponent
 *    range, the ties of each format (round half to even), zeros, subnormals,
 *    infinities, the largest finite values and f16's overflow edge; a NaN
 *    stays a NaN (bf16: the host's quiet bits; f16: any NaN);
 *  - unpack, bf16 and f16 -> f32: every one of the 65536 16-bit values, with
 *    divisor 1 (exact) and 3 and 4 (one correctly rounded division);
 *  - at sizes 1, 255, 256, 257, 100003 and 2^22 + 1 (more elements than the
 *    grid's threads: the grid-stride loop), into outputs poisoned beforehand,
 *    and nothing written past n (a poisoned guard after it).
 * Built three times: tests/gpu; tests/fakegpu, where the kernels run as
 * their twins (tests/fakegpu/twin_wire.c); and fakegpu_wire_kernels_emu,
 * where they run as their own bodies compiled for the host
 * (tests/fakegpu/emu). Skipped (77) without a device. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gpu_common.h"
#include "testutil.h"
#include "dtrain/dtype.h"
#include "transport/nccl/wire_nccl.h"

#define GUARD 64 /* poisoned elements after n */

static uint32_t g_seed;
static uint32_t next(void) {
    g_seed = g_seed * 1664525u + 1013904223u;
    uint32_t x = g_seed;
    x ^= x >> 15;
    x *= 2246822519u;
    return x ^ (x >> 13);
}

static float as_f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* element i of the pack input: mostly random bits (every exponent), a share
 * of ties and edge values */
static float pack_input(size_t i) {
    static const uint32_t edge[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x7f800000u, 0xff800000u,
                                    0x7f7fffffu, 0x477fefffu, 0x477ff000u, 0x477ff001u, 0xc77ff000u, 0x33000000u,
                                    0x33000001u, 0x387fc000u, 0x3f808000u, 0x3f818000u, 0x7fc00001u, 0xffa00000u};
    uint32_t r = next();
    switch (i % 8) {
    case 0: return as_f(edge[(r >> 8) % (sizeof edge / sizeof *edge)]);
    case 1: return as_f((r & 0xffff0000u) | 0x8000u); /* a bf16 tie */
    case 2: return as_f((r & 0xbfffe000u) | 0x1000u); /* an f16-range tie (mostly) */
    default: return as_f(r);
    }
}

static void pack_case(size_t n, int wire) {
    float *h = malloc(n * sizeof(float));
    uint16_t *got = malloc((n + GUARD) * sizeof(uint16_t));
    CHECK(h && got, "out of memory");
    for (size_t i = 0; i < n; i++) h[i] = pack_input(i);
    float *ds = gpu_alloc(n * sizeof(float));
    uint16_t *dd = gpu_alloc((n + GUARD) * sizeof(uint16_t));
    gpu_h2d(ds, h, n * sizeof(float));
    gpu_check(cudaMemset(dd, 0xA5, (n + GUARD) * sizeof(uint16_t)), "cudaMemset");
    CHECK_OK(dt_nccl_wire_pack(dd, ds, n, wire, NULL));
    gpu_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    gpu_d2h(got, dd, (n + GUARD) * sizeof(uint16_t));
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t want = wire == DT_WIRE_BF16 ? dt_f32_to_bf16(h[i]) : dt_f32_to_f16(h[i]);
        int ok = got[i] == want;
        if (!ok && isnan(h[i])) /* f16: any NaN */
            ok = wire == DT_WIRE_F16 && (got[i] & 0x7c00u) == 0x7c00u && (got[i] & 0x03ffu);
        if (!ok && !bad++) first = i;
    }
    uint32_t in;
    memcpy(&in, &h[first], sizeof in);
    CHECK(bad == 0, "pack %s, n %zu: %zu of %zu differ from the host's (first at %zu: 0x%08x -> 0x%04x, want 0x%04x)",
          wire == DT_WIRE_BF16 ? "bf16" : "f16", n, bad, n, first, in, got[first],
          wire == DT_WIRE_BF16 ? dt_f32_to_bf16(h[first]) : dt_f32_to_f16(h[first]));
    size_t past = 0;
    for (size_t i = n; i < n + GUARD; i++) past += got[i] != 0xA5A5u;
    CHECK(past == 0, "pack, n %zu: %zu elements written past the end", n, past);
    free(h);
    free(got);
    gpu_release(ds);
    gpu_release(dd);
}

static void unpack_case(size_t n, int wire, int divisor) {
    uint16_t *h = malloc(n * sizeof(uint16_t));
    float *got = malloc((n + GUARD) * sizeof(float));
    CHECK(h && got, "out of memory");
    for (size_t i = 0; i < n; i++) h[i] = (uint16_t)(n >= 65536 ? i : next());
    uint16_t *ds = gpu_alloc(n * sizeof(uint16_t));
    float *dd = gpu_alloc((n + GUARD) * sizeof(float));
    gpu_h2d(ds, h, n * sizeof(uint16_t));
    gpu_check(cudaMemset(dd, 0xA5, (n + GUARD) * sizeof(float)), "cudaMemset");
    CHECK_OK(dt_nccl_wire_unpack(dd, ds, n, wire, divisor, NULL));
    gpu_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    gpu_d2h(got, dd, (n + GUARD) * sizeof(float));
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        float v = wire == DT_WIRE_BF16 ? dt_bf16_to_f32(h[i]) : dt_f16_to_f32(h[i]);
        float want = divisor == 1 ? v : v / (float)divisor;
        int ok = memcmp(&got[i], &want, sizeof want) == 0 || (isnan(want) && isnan(got[i]));
        if (!ok && !bad++) first = i;
    }
    CHECK(bad == 0, "unpack %s / %d, n %zu: %zu of %zu differ from the host's (first at %zu: 0x%04x -> %a)",
          wire == DT_WIRE_BF16 ? "bf16" : "f16", divisor, n, bad, n, first, h[first], (double)got[first]);
    uint32_t poison = 0xA5A5A5A5u;
    size_t past = 0;
    for (size_t i = n; i < n + GUARD; i++) past += memcmp(&got[i], &poison, 4) != 0;
    CHECK(past == 0, "unpack, n %zu: %zu elements written past the end", n, past);
    free(h);
    free(got);
    gpu_release(ds);
    gpu_release(dd);
}

int main(void) {
    gpu_require("wire_kernels");
    const char *s = getenv("DT_TEST_SEED");
    g_seed = s ? (uint32_t)strtoul(s, NULL, 10) : (uint32_t)time(NULL);
    printf("wire_kernels: seed %u (DT_TEST_SEED)\n", g_seed);
    static const size_t sizes[] = {1, 255, 256, 257, 100003, (1u << 22) + 1};
    for (int w = DT_WIRE_BF16; w <= DT_WIRE_F16; w++) {
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) pack_case(sizes[k], w);
        unpack_case(65536, w, 1);
        unpack_case(65536, w, 3);
        unpack_case(65536, w, 4);
        unpack_case(257, w, 2);
        unpack_case((1u << 22) + 1, w, 1);
    }
    CHECK_OK(dt_nccl_wire_pack(NULL, NULL, 0, DT_WIRE_BF16, NULL)); /* nothing to do: no launch */
    return dt_test_finish("wire_kernels");
}
