/* tests/gpu/test_optim_kernels.c - the optimizer's device kernels
 * (dt_optim_kernels_device(): dt_optim_kernels_cuda) against the host's
 * dt_optim_step and gradient helpers:
 *  - adam (Adam with and without L2, AdamW) and sgd (plain with a NULL
 *    buffer, momentum, Nesterov, weight decay; the first step and later
 *    ones) over several steps with changing learning rates: parameters and
 *    states BIT-IDENTICAL to dt_optim_step's (optim_math.h, built without
 *    fused multiply-adds), at sizes with a tail after the float4 packs and
 *    at a pointer that is not 16-byte aligned;
 *  - sqnorm within 1e-12 relative of dt_grad_sqnorm (both accumulate in
 *    double, in different orders), the same bits on a second call, 0 for
 *    n = 0;
 *  - scale exact (one float multiply per element), add exact (one float
 *    add per element), also in place and at unaligned pointers;
 *  - to_bf16 (the master parameters' bf16 copy) dt_f32_to_bf16's bits on
 *    special and random values, at an unaligned destination, nothing
 *    written past n.
 * Built twice (tests/gpu, tests/fakegpu); skipped (77) without a device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "gpu_common.h"
#include "testutil.h"
#include "dtrain/dtype.h"
#include "dtrain/optim.h"
#include "dtrain/rng.h"
#include "optim/optim_kernels.h"
#include "../optim/optim_coef.h"

static void *dput(const float *h, size_t n) {
    void *d = gpu_alloc((n + 1) * sizeof(float));
    if (n) gpu_h2d(d, h, n * sizeof(float));
    return d;
}
static void dget(float *h, const void *d, size_t n) {
    if (n) gpu_d2h(h, d, n * sizeof(float));
}

static float rand_val(dt_rng *r) {
    switch (dt_rng_below(r, 8)) {
    case 0: return 0.0f;
    case 1: return (float)(dt_rng_normal(r) * 1e-30);
    case 2: return (float)(dt_rng_normal(r) * 1e5);
    default: return (float)dt_rng_normal(r);
    }
}

/* `steps` updates of n elements at offset `off` floats into the device
 * buffers (off 1: not 16-byte aligned) on the device and on the host */
static void run_step(const dt_optim_kernels *k, cudaStream_t st, const char *name, const dt_optim_config *cfg, size_t n,
                     size_t off) {
    dt_rng r;
    dt_rng_seed(&r, 31 + n);
    const size_t all = n + off;
    float *p = calloc(all + 1, 4), *g = calloc(all + 1, 4), *hp = calloc(all + 1, 4), *hs0 = calloc(all + 1, 4);
    float *hs1 = calloc(all + 1, 4), *z = calloc(all + 1, 4);
    for (size_t i = off; i < all; i++) p[i] = rand_val(&r);
    dt_optim *opt = NULL;
    CHECK_OK(dt_optim_create(cfg, n, &opt));
    if (!opt) return;
    float *dp = dput(p, all), *dg = dput(g, all), *ds0 = dput(z, all), *ds1 = dput(z, all);
    const int sgd = cfg->kind == DT_OPTIM_SGD, has_buf = !sgd || cfg->momentum != 0.0;
    int bad = 0;
    for (long t = 1; t <= 4; t++) {
        const float lr = (float)(cfg->lr * (1.0 + 0.25 * (double)t));
        for (size_t i = off; i < all; i++) g[i] = rand_val(&r);
        gpu_h2d(dg, g, all * 4);
        optim_coef c = optim_coef_at(cfg, t, lr, 1);
        if (sgd)
            CHECK_OK(k->sgd(st, dp + off, dg + off, has_buf ? ds0 + off : NULL, n, c.lr, c.wd, c.mom, c.nesterov,
                            c.first));
        else
            CHECK_OK(k->adam(st, dp + off, dg + off, ds0 + off, ds1 + off, n, c.decay, c.l2, c.b1, c.c1, c.b2, c.c2,
                             c.bc2_sqrt, c.eps, c.neg_step));
        CHECK_OK(dt_optim_step(opt, p + off, g + off, lr));
        dget(hp, dp, all);
        bad += memcmp(hp + off, p + off, n * 4) != 0;
        if (has_buf) {
            dget(hs0, ds0, all);
            bad += memcmp(hs0 + off, dt_optim_state(opt, 0, NULL), n * 4) != 0;
        }
        if (!sgd) {
            dget(hs1, ds1, all);
            bad += memcmp(hs1 + off, dt_optim_state(opt, 1, NULL), n * 4) != 0;
        }
    }
    CHECK(bad == 0, "%s (n=%zu, offset %zu): %d (step, buffer) pairs differ from dt_optim_step's bits", name, n, off,
          bad);
    dt_optim_free(opt);
    gpu_release(dp), gpu_release(dg), gpu_release(ds0), gpu_release(ds1);
    free(p), free(g), free(hp), free(hs0), free(hs1), free(z);
}

static void test_steps(const dt_optim_kernels *k, cudaStream_t st) {
    static const size_t sizes[][2] = {{1, 0}, {4099, 0}, {4099, 1}, {300001, 0}};
    dt_optim_config c;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const size_t n = sizes[s][0], off = sizes[s][1];
        dt_optim_config_default(&c, DT_OPTIM_SGD);
        c.lr = 0.05;
        run_step(k, st, "sgd", &c, n, off);
        c.weight_decay = 0.01, c.momentum = 0.9;
        run_step(k, st, "sgd momentum", &c, n, off);
        c.nesterov = 1;
        run_step(k, st, "sgd nesterov", &c, n, off);
        dt_optim_config_default(&c, DT_OPTIM_ADAM);
        c.lr = 3e-3, c.weight_decay = 0.02;
        run_step(k, st, "adam l2", &c, n, off);
        dt_optim_config_default(&c, DT_OPTIM_ADAMW);
        c.lr = 6e-4, c.weight_decay = 0.1, c.beta2 = 0.95;
        run_step(k, st, "adamw", &c, n, off);
    }
}

static void test_sqnorm_scale(const dt_optim_kernels *k, cudaStream_t st) {
    static const size_t sizes[] = {1, 255, 256, 257, 100003, 262144 + 17, 3000001};
    dt_rng r;
    dt_rng_seed(&r, 41);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const size_t n = sizes[s];
        float *g = malloc(n * 4), *h = malloc(n * 4);
        for (size_t i = 0; i < n; i++) g[i] = (float)(dt_rng_normal(&r) * (i % 97 == 0 ? 1e4 : 1.0));
        float *d = dput(g, n);
        double a = -1.0, b = -2.0, ref = dt_grad_sqnorm(g, n);
        CHECK_OK(k->sqnorm(st, d, n, &a));
        CHECK_OK(k->sqnorm(st, d, n, &b));
        CHECK(fabs(a - ref) <= 1e-12 * ref, "sqnorm n=%zu: %.17g vs dt_grad_sqnorm %.17g (rel %.3g)", n, a, ref,
              fabs(a - ref) / ref);
        CHECK(memcmp(&a, &b, sizeof a) == 0, "sqnorm n=%zu: two calls differ", n);
        const float sc = 0.37f;
        CHECK_OK(k->scale(st, d + (n > 1), n - (n > 1), sc)); /* n > 1: at an unaligned pointer */
        dt_grad_scale(g + (n > 1), n - (n > 1), sc);
        cudaStreamSynchronize(st);
        dget(h, d, n);
        CHECK(memcmp(h, g, n * 4) == 0, "scale n=%zu: not the host's bits", n);
        /* add: the scaled vector onto itself shifted by one (unaligned src), then in place */
        float *src = malloc(n * 4);
        for (size_t i = 0; i < n; i++) src[i] = (float)(dt_rng_normal(&r) * 1e-3);
        float *ds = dput(src, n);
        CHECK_OK(k->add(st, d, ds + (n > 1), n - (n > 1)));
        for (size_t i = 0; i + (n > 1) < n; i++) g[i] += src[i + (n > 1)];
        CHECK_OK(k->add(st, d + (n > 1), d + (n > 1), n - (n > 1)));
        for (size_t i = n > 1; i < n; i++) g[i] += g[i];
        cudaStreamSynchronize(st);
        dget(h, d, n);
        CHECK(memcmp(h, g, n * 4) == 0, "add n=%zu: not the host's bits", n);
        gpu_release(ds);
        free(src);
        gpu_release(d);
        free(g), free(h);
    }
    double z = -1.0;
    CHECK_OK(k->sqnorm(st, NULL, 0, &z));
    CHECK(z == 0.0, "sqnorm of nothing: %g", z);
    CHECK_OK(k->add(st, NULL, NULL, 0));
}

/* to_bf16: every element dt_f32_to_bf16's bits, over special values (zeros,
 * infinities, NaNs, the largest finite, subnormals, ties) and random ones, at
 * sizes with a tail and at an unaligned destination; the element past the end
 * keeps its poison */
static void test_to_bf16(const dt_optim_kernels *k, cudaStream_t st) {
    static const size_t sizes[] = {1, 7, 1024, 100003, 3000001};
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
                                       0xffbfffffu, 0x7f7fffffu, 0x00000001u, 0x807fffffu, 0x3f808000u, 0x3f818000u,
                                       0x3f80ffffu, 0xc0008001u};
    dt_rng r;
    dt_rng_seed(&r, 43);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const size_t n = sizes[s], ns = sizeof special / sizeof special[0];
        float *src = malloc(n * 4);
        uint16_t *want = malloc((n + 2) * 2), *got = malloc((n + 2) * 2);
        for (size_t i = 0; i < n; i++) {
            if (i < ns) memcpy(&src[i], &special[i], 4);
            else src[i] = rand_val(&r);
            want[i] = dt_f32_to_bf16(src[i]);
        }
        float *d = dput(src, n);
        uint16_t *d16 = gpu_alloc((n + 2) * 2), poison = 0x7fa5;
        for (size_t i = 0; i < n + 2; i++) got[i] = poison;
        gpu_h2d(d16, got, (n + 2) * 2);
        CHECK_OK(k->to_bf16(st, d16 + 1, d, n)); /* an odd (unaligned) destination */
        gpu_check(cudaStreamSynchronize(st), "cudaStreamSynchronize");
        gpu_d2h(got, d16, (n + 2) * 2);
        size_t bad = 0, first = n;
        for (size_t i = 0; i < n; i++)
            if (got[i + 1] != want[i]) bad++, first = first < i ? first : i;
        CHECK(bad == 0, "to_bf16 n=%zu: %zu values not dt_f32_to_bf16's (first [%zu]: 0x%04x, want 0x%04x)", n, bad,
              first, first < n ? got[first + 1] : 0, first < n ? want[first] : 0);
        CHECK(got[0] == poison && got[n + 1] == poison, "to_bf16 n=%zu: wrote outside [0, n)", n);
        gpu_release(d16);
        gpu_release(d);
        free(src), free(want), free(got);
    }
    CHECK_OK(k->to_bf16(st, NULL, NULL, 0));
}

int main(int argc, char **argv) {
    const char *name = argc > 0 && strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : "optim_kernels";
    gpu_require(name);
    const dt_optim_kernels *k = dt_optim_kernels_device();
    CHECK(k != NULL && strcmp(k->name, "cuda") == 0, "dt_optim_kernels_device: %s", k ? k->name : dt_last_error());
    if (!k) return dt_test_finish(name);
    cudaStream_t st;
    gpu_check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    test_steps(k, st);
    test_sqnorm_scale(k, st);
    test_to_bf16(k, st);
    gpu_check(cudaStreamSynchronize(st), "cudaStreamSynchronize");
    cudaStreamDestroy(st);
    return dt_test_finish(name);
}
