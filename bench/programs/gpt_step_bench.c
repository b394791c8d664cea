/* bench/programs/gpt_step_bench.c - single-process training step time of a gpt
 * preset (forward + backward + AdamW + zero_grad), and the sgemm rate of
 * this core measured in the same run, so that the model's FLOP rate
 * (6P + 12*L*T*D FLOPs per token, forward + backward) can be given as a
 * fraction of it. Not a test: prints numbers, asserts nothing.
 *
 *   gpt_step_bench [preset=gpt-demo] [batch=8] [steps=5] [recompute=0]
 *
 * One BLAS thread (dtrain's default). For PyTorch's figure on the same model:
 *   OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
 *     /usr/bin/python3 tests/reference/torch_gpt.py --bench --preset gpt-demo --batch 8 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "dtrain/model.h"
#include "dtrain/optim.h"
#include "dtrain/rng.h"
#include "dtrain/status.h"
#include "step_clock.h"

/* Best-of-5 GFLOP/s of C[M,N] += A[M,K] @ B[N,K]^T (a linear layer's shape). */
static double sgemm_rate(int M, int N, int K) {
    float *A = malloc(sizeof(float) * (size_t)M * (size_t)K);
    float *Bm = malloc(sizeof(float) * (size_t)N * (size_t)K);
    float *Cm = calloc((size_t)M * (size_t)N, sizeof(float));
    if (!A || !Bm || !Cm) {
        free(A);
        free(Bm);
        free(Cm);
        return 0.0;
    }
    for (size_t i = 0; i < (size_t)M * (size_t)K; i++) A[i] = (float)(i % 7) * 0.01f;
    for (size_t i = 0; i < (size_t)N * (size_t)K; i++) Bm[i] = (float)(i % 5) * 0.01f;
    double best = 1e30;
    for (int r = 0; r < 6; r++) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, Bm, K, 1.0f,
                    Cm, N);
        double t = now() - t0;
        if (r > 0 && t < best) best = t;
    }
    free(A);
    free(Bm);
    free(Cm);
    return 2.0 * M * N * K / best / 1e9;
}

int main(int argc, char **argv) {
    const char *preset = argc > 1 ? argv[1] : "gpt-demo";
    const int B = argc > 2 ? atoi(argv[2]) : 8;
    const int steps = argc > 3 ? atoi(argv[3]) : 5;
    const int recompute = argc > 4 ? atoi(argv[4]) : 0;
    dt_model_config cfg;
    dt_model *m = NULL;
    if (dt_model_config_default(&cfg, preset) || (cfg.recompute = recompute, 0) ||
        dt_model_create(&cfg, &m)) {
        fprintf(stderr, "%s: %s\n", preset, dt_last_error());
        return 1;
    }
    const int T = cfg.block_size, V = cfg.vocab_size;
    const size_t P = dt_model_num_params(m), n = (size_t)B * (size_t)T;
    int32_t *x = malloc(n * sizeof(int32_t)), *y = malloc(n * sizeof(int32_t));
    double *tf = malloc(sizeof(double) * (size_t)steps), *tb = malloc(sizeof(double) * (size_t)steps);
    double *to = malloc(sizeof(double) * (size_t)steps), *tt = malloc(sizeof(double) * (size_t)steps);
    double *tc = malloc(sizeof(double) * (size_t)steps);
    dt_rng r;
    dt_rng_seed(&r, 1);
    for (size_t i = 0; i < n; i++) {
        x[i] = (int32_t)dt_rng_below(&r, (uint64_t)V);
        y[i] = (int32_t)dt_rng_below(&r, (uint64_t)V);
    }
    dt_optim_config oc;
    dt_optim *opt = NULL;
    dt_optim_config_default(&oc, DT_OPTIM_ADAMW);
    oc.lr = 1e-4;
    if (dt_optim_create(&oc, P, &opt)) {
        fprintf(stderr, "%s\n", dt_last_error());
        return 1;
    }
    float loss = 0.0f;
    int done = 0;
    for (int it = -2; it < steps; it++) {
        double c0 = cpu(), t0 = now();
        if (dt_model_forward(m, x, y, B, 1, &loss)) break;
        double t1 = now();
        if (dt_model_backward(m)) break;
        double t2 = now();
        if (dt_optim_step(opt, dt_model_params(m), dt_model_grads(m), 1e-4f)) break;
        dt_model_zero_grad(m);
        double t3 = now(), c3 = cpu();
        if (it >= 0) {
            tc[it] = c3 - c0;
            tf[it] = t1 - t0;
            tb[it] = t2 - t1;
            to[it] = t3 - t2;
            tt[it] = t3 - t0;
            done++;
        }
    }
    if (done < steps) {
        fprintf(stderr, "step failed: %s\n", dt_last_error());
        return 1;
    }
    qsort(tf, (size_t)steps, sizeof(double), cmp_double);
    qsort(tb, (size_t)steps, sizeof(double), cmp_double);
    qsort(to, (size_t)steps, sizeof(double), cmp_double);
    qsort(tt, (size_t)steps, sizeof(double), cmp_double);
    qsort(tc, (size_t)steps, sizeof(double), cmp_double);
    const int h = steps / 2;
    const double flops = (6.0 * (double)P + 12.0 * cfg.n_layer * T * cfg.n_embd) * (double)n;
    size_t act0 = 0, act1 = 0;
    dt_model_activation_bytes(m, B, T, 0, &act0);
    dt_model_activation_bytes(m, B, T, 1, &act1);
    /* the sgemm rate of one core on this model's largest linear shapes */
    const int C = cfg.n_embd;
    double g1 = sgemm_rate((int)n, 4 * C, C), g2 = sgemm_rate((int)n, C, 4 * C);
    double g3 = sgemm_rate((int)n, 3 * C, C), sg = (g1 + g2 + g3) / 3.0;
    printf("dtrain %s B=%d T=%d recompute=%d: %zu params, loss %.4f\n", preset, B, T, recompute,
           P, (double)loss);
    printf("  step median %.3f s (min %.3f; thread CPU time %.3f): forward %.3f, backward "
           "%.3f, AdamW+zero %.3f\n",
           tt[h], tt[0], tc[h], tf[h], tb[h], to[h]);
    printf("  %.0f tokens/s, %.1f GFLOP/s (6P + 12LTD per token)\n", (double)n / tt[h],
           flops / tt[h] / 1e9);
    printf("  sgemm one core: %.1f GFLOP/s (mean of [%zu,%d]x[%d,%d]^T: %.1f, %.1f, %.1f); "
           "model at %.0f%% of it\n",
           sg, n, 4 * C, C, C, g1, g2, g3, 100.0 * flops / tt[h] / 1e9 / sg);
    printf("  activation memory: %.1f MiB (recompute off), %.1f MiB (on)\n",
           (double)act0 / 1048576.0, (double)act1 / 1048576.0);
    dt_optim_free(opt);
    dt_model_free(m);
    free(x);
    free(y);
    free(tf);
    free(tb);
    free(to);
    free(tt);
    free(tc);
    return 0;
}
