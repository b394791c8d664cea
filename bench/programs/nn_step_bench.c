/* bench/programs/nn_step_bench.c - single-process step time of the built-in models
 * (forward + backward + plain SGD update + zero_grad), 1 BLAS thread unless
 * told otherwise. Not a test: prints numbers, asserts nothing.
 *
 *   nn_step_bench [model|all] [batch=64] [steps=200] [threads=1]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "dtrain/model.h"
#include "dtrain/nn.h"
#include "dtrain/rng.h"
#include "dtrain/status.h"
#include "step_clock.h"

static int bench(const char *name, int B, int steps) {
    dt_model_config cfg;
    dt_model *m = NULL;
    if (dt_model_config_default(&cfg, name) || dt_model_create(&cfg, &m)) {
        fprintf(stderr, "%s: %s\n", name, dt_last_error());
        return 1;
    }
    float *x = malloc((size_t)B * 784 * sizeof(float));
    int32_t *y = malloc((size_t)B * sizeof(int32_t));
    dt_rng r;
    dt_rng_seed(&r, 1);
    for (size_t i = 0; i < (size_t)B * 784; i++) x[i] = dt_rng_uniform(&r);
    for (int b = 0; b < B; b++) y[b] = (int32_t)dt_rng_below(&r, 10);
    const size_t n = dt_model_num_params(m);
    float *p = dt_model_params(m), *g = dt_model_grads(m);
    double *tf = malloc((size_t)steps * sizeof(double)), *tb = malloc((size_t)steps * sizeof(double));
    double *tt = malloc((size_t)steps * sizeof(double));
    double *tu = malloc((size_t)steps * sizeof(double)), *tc = malloc((size_t)steps * sizeof(double));
    float loss = 0.0f;
    for (int it = -10; it < steps; it++) {
        double c0 = cpu();
        double t0 = now();
        if (dt_model_forward(m, x, y, B, 1, &loss)) break;
        double t1 = now();
        if (dt_model_backward(m)) break;
        double t2 = now();
        for (size_t i = 0; i < n; i++) p[i] -= 0.01f * g[i];
        double c2 = cpu();
        dt_model_zero_grad(m);
        double t3 = now(), c3 = cpu();
        if (it >= 0) {
            tf[it] = t1 - t0;
            tb[it] = t2 - t1;
            tt[it] = t3 - t0;
            tc[it] = c2 - c0;
            tu[it] = c3 - c0;
        }
    }
    qsort(tf, (size_t)steps, sizeof(double), cmp_double);
    qsort(tb, (size_t)steps, sizeof(double), cmp_double);
    double mean = 0.0;
    for (int i = 0; i < steps; i++) mean += tt[i];
    mean /= steps;
    qsort(tt, (size_t)steps, sizeof(double), cmp_double);
    qsort(tc, (size_t)steps, sizeof(double), cmp_double);
    qsort(tu, (size_t)steps, sizeof(double), cmp_double);
    printf("%-6s batch %d, %zu params, %d thread(s), %d steps (loss %.4f)\n"
           "   wall: step median %.3f ms (mean %.3f, min %.3f)  forward %.3f  backward %.3f\n"
           "   cpu:  forward+backward median %.3f ms, with SGD+zero_grad %.3f ms\n",
           name, B, n, dt_get_num_threads(), steps, (double)loss, 1e3 * tt[steps / 2],
           1e3 * mean, 1e3 * tt[0], 1e3 * tf[steps / 2], 1e3 * tb[steps / 2],
           1e3 * tc[steps / 2], 1e3 * tu[steps / 2]);
    free(tc);
    free(tu);
    free(tf);
    free(tb);
    free(tt);
    free(x);
    free(y);
    dt_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "all";
    int B = argc > 2 ? atoi(argv[2]) : 64;
    int steps = argc > 3 ? atoi(argv[3]) : 200;
    int threads = argc > 4 ? atoi(argv[4]) : 1;
    if (B < 1 || steps < 1 || dt_set_num_threads(threads)) {
        fprintf(stderr, "usage: %s [mlp|lenet|cnn|all] [batch] [steps] [threads]\n", argv[0]);
        return 2;
    }
    int rc = 0;
    if (strcmp(which, "all") == 0) {
        rc |= bench("mlp", B, steps);
        rc |= bench("lenet", B, steps);
        rc |= bench("cnn", B, steps > 50 ? 50 : steps);
    } else {
        rc = bench(which, B, steps);
    }
    return rc;
}
