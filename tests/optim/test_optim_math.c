/* tests/optim/test_optim_math.c - the optimizer's per-element arithmetic
 * (src/optim/optim_math.h: what the device kernels compute, built without
 * fused multiply-adds) against dt_optim_step on the host: BIT-IDENTICAL
 * parameters and states over several steps with changing learning rates,
 * for SGD (plain, momentum, Nesterov, with and without weight decay), Adam
 * (with and without L2) and AdamW, on random parameters and gradients of
 * mixed magnitudes (zeros, tiny, huge) - with the coefficients computed
 * from the config as optim.c's step_piece does (optim_coef.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "dtrain/optim.h"
#include "dtrain/rng.h"
#include "optim/optim_math.h"
#include "optim_coef.h"

enum { N = 10007, STEPS = 5 };

static float rand_val(dt_rng *r) {
    switch (dt_rng_below(r, 8)) {
    case 0: return 0.0f;
    case 1: return (float)(dt_rng_normal(r) * 1e-30);
    case 2: return (float)(dt_rng_normal(r) * 1e6);
    default: return (float)dt_rng_normal(r);
    }
}

static void run(const char *name, const dt_optim_config *cfg) {
    dt_rng r;
    dt_rng_seed(&r, 21);
    float *p = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float)), *q = malloc(N * sizeof(float));
    float *s0 = calloc(N, sizeof(float)), *s1 = calloc(N, sizeof(float));
    for (int i = 0; i < N; i++) p[i] = q[i] = rand_val(&r);
    dt_optim *opt = NULL;
    CHECK_OK(dt_optim_create(cfg, N, &opt));
    if (!opt) return;
    long bad = 0;
    for (int t = 1; t <= STEPS; t++) {
        float lr = (float)(cfg->lr * (1.0 + 0.3 * t));
        for (int i = 0; i < N; i++) g[i] = rand_val(&r);
        CHECK_OK(dt_optim_step(opt, p, g, lr));
        optim_coef k = optim_coef_at(cfg, t, lr, 1);
        for (int i = 0; i < N; i++) {
            if (cfg->kind == DT_OPTIM_SGD)
                dt_sgd_update(&q[i], g[i], &s0[i], k.lr, k.wd, k.mom, k.nesterov, k.first);
            else
                dt_adam_update(&q[i], g[i], &s0[i], &s1[i], k.decay, k.l2, k.b1, k.c1, k.b2, k.c2, k.bc2_sqrt,
                               k.eps, k.neg_step);
        }
        const float *st0 = dt_optim_state(opt, 0, NULL);
        const float *st1 = cfg->kind == DT_OPTIM_SGD ? NULL : dt_optim_state(opt, 1, NULL);
        bad += memcmp(p, q, N * sizeof(float)) != 0;
        if (st0 && (cfg->kind != DT_OPTIM_SGD || cfg->momentum != 0.0))
            bad += memcmp(st0, s0, N * sizeof(float)) != 0;
        if (st1) bad += memcmp(st1, s1, N * sizeof(float)) != 0;
    }
    CHECK(bad == 0, "%s: %ld (step, buffer) pairs differ from dt_optim_step's bits", name, bad);
    dt_optim_free(opt);
    free(p);
    free(g);
    free(q);
    free(s0);
    free(s1);
}

int main(void) {
    dt_optim_config c;
    dt_optim_config_default(&c, DT_OPTIM_SGD);
    c.lr = 0.05;
    run("sgd", &c);
    c.weight_decay = 0.01;
    run("sgd wd", &c);
    c.momentum = 0.9;
    run("sgd momentum wd", &c);
    c.nesterov = 1;
    run("sgd nesterov wd", &c);
    c.weight_decay = 0.0;
    run("sgd nesterov", &c);

    dt_optim_config_default(&c, DT_OPTIM_ADAM);
    c.lr = 3e-3;
    run("adam", &c);
    c.weight_decay = 0.02;
    run("adam l2", &c);
    dt_optim_config_default(&c, DT_OPTIM_ADAMW);
    c.lr = 6e-4;
    c.weight_decay = 0.1;
    c.beta2 = 0.95;
    run("adamw", &c);
    c.eps = 1e-5;
    c.weight_decay = 0.0;
    run("adamw no decay", &c);
    return dt_test_finish("test_optim_math");
}
