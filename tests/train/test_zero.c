/* ZeRO stages 1-3 through the trainer: after 50 steps the parameters equal
 * data-parallel stage 0 and 1 rank (rel err <= 1e-5, max|a-b| / max|b| over
 * the whole vector) for SGD-momentum and AdamW, with and without global
 * gradient clipping and with accumulation; per-rank model-state bytes
 * (params + grads + optimizer, fp32 Adam) equal the ZeRO formulas within 5%:
 * stage 0 16P, 1 8P + 8P/N, 2 4P + 12P/N, 3 16P/N; temporary buffers bounded.
 * shard_group host on one host gives the very bits of shard_group world
 * (tests/multihost checks it across hosts).
 * grad_comm_dtype bf16 at stages 2 and 3 (the reduces to the owners
 * compressed where they travel in messages: here the pieces below the
 * window's threshold, the biases among them): 50 steps run, the parameters
 * within WIRE_TOL of the same stage's f32 run and not equal to it (N > 1),
 * stage 2's full vector the same bits on every rank. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "dtrain/config.h"
#include "dtrain/mem.h"
#include "core/mem.h"
#include "dtrain/model.h"
#include "dtrain/train.h"
#include "testutil.h"

#define B 64
#define STEPS 50

/* A sanity bound, as test_dp_equiv's: 50 steps of small-batch SGD amplify
 * the wire's rounding into another trajectory; a lost or doubled sum, or
 * garbage, is O(1). The per-element bound is tests/parallel/test_zero_wire's. */
#define WIRE_TOL 0.5

typedef struct run { const char *optim; double clip; int accum; } run;

static int g_wire;           /* grad_comm_dtype for the next run */
static int g_same_ranks = 1; /* stage 2: the ranks' full vectors had the same bits */

static float *train_in(dt_comm *comm, int zero, int group, run r, int batch, size_t *n) {
    dt_train_options o;
    dt_train_options_default(&o);
    snprintf(o.model, sizeof o.model, "mlp");
    snprintf(o.optimizer, sizeof o.optimizer, "%s", r.optim);
    o.hidden1 = 96;
    o.hidden2 = 48;
    o.lr = !strcmp(r.optim, "sgd") ? 0.05 : 5e-4;
    o.batch_size = batch / r.accum;
    o.accum_steps = r.accum;
    o.clip_grad_norm = r.clip;
    o.epochs = 1;
    o.max_steps = STEPS;
    o.train_limit = (long)B * STEPS;
    o.eval = 0;
    o.quiet = 1;
    o.seed = 11;
    o.comm = comm;
    o.dist.zero_opt_level = zero;
    o.dist.shard_group = group;
    o.dist.bucket_size_mb = 0.05; /* several buckets and broadcast chunks */
    o.dist.first_bucket_mb = 0.01;
    o.dist.grad_comm_dtype = g_wire;
    dt_trainer *t;
    int rc = dt_trainer_create(&o, &t);
    dt_train_result res;
    if (!rc) rc = dt_trainer_fit(t, &res);
    float *p = NULL;
    if (!rc) {
        *n = dt_model_num_params(dt_trainer_model(t));
        p = malloc(*n * sizeof(float));
        rc = dt_trainer_gather_params(t, p, dt_comm_world_rank_of(comm, 0));
        if (!rc && zero <= 2) { /* every rank holds the full vector: the same bits everywhere */
            int same = dt_test_same_bits(dt_model_params(dt_trainer_model(t)), *n * sizeof(float), comm);
            if (same < 0) rc = same;
            g_same_ranks = same == 1;
        }
        /* share rank 0's copy so every rank can compare */
        if (!rc) rc = dt_broadcast(p, p, *n, DT_F32, dt_comm_world_rank_of(comm, 0), comm);
    }
    if (rc) { CHECK_OK(rc); free(p); p = NULL; }
    dt_trainer_free(t);
    return p;
}

static float *train(dt_comm *comm, int zero, run r, int batch, size_t *n) {
    return train_in(comm, zero, DT_SHARD_WORLD, r, batch, n);
}

static void check_memory(dt_comm *w, int N, int rank) {
    for (int zero = 0; zero <= 3; zero++) {
        dt_mem_reset();
        dt_train_options o;
        dt_train_options_default(&o);
        snprintf(o.model, sizeof o.model, "mlp");
        snprintf(o.optimizer, sizeof o.optimizer, "adam");
        o.epochs = 1;
        o.max_steps = 2;
        o.train_limit = 512;
        o.eval = 0;
        o.quiet = 1;
        o.comm = w;
        o.dist.zero_opt_level = zero;
        dt_trainer *t;
        int rc = dt_trainer_create(&o, &t);
        if (!rc) rc = dt_trainer_fit(t, NULL);
        CHECK_OK(rc);
        if (rc) { dt_trainer_free(t); continue; }
        double P = (double)dt_model_num_params(dt_trainer_model(t));
        double have = (double)(dt_mem_current(DT_MEM_PARAMS) + dt_mem_current(DT_MEM_GRADS) + dt_mem_current(DT_MEM_OPTIM));
        double want = zero == 0 ? 16 * P : zero == 1 ? 8 * P + 8 * P / N : zero == 2 ? 4 * P + 12 * P / N : 16 * P / N;
        if (rank == 0)
            printf("memory stage %d, %d ranks: model state %.0f B = %.3f P (formula %.3f P); comm peak %lld B, gathered peak %lld B\n",
                   zero, N, have, have / P, want / P, dt_mem_peak(DT_MEM_COMM), dt_mem_peak(DT_MEM_GATHERED));
        CHECK(fabs(have - want) <= 0.05 * want, "stage %d: %.0f B vs formula %.0f B", zero, have, want);
        /* temporary buffers are bounded by two layers (largest: fc2 1024x1024 + bias) */
        double layer = 4.0 * (1024 * 1024 + 1024);
        CHECK(dt_mem_peak(DT_MEM_GATHERED) <= 2 * layer, "gathered peak %lld", dt_mem_peak(DT_MEM_GATHERED));
        CHECK(dt_mem_peak(DT_MEM_COMM) <= 2 * layer, "comm peak %lld", dt_mem_peak(DT_MEM_COMM));
        dt_trainer_free(t);
        CHECK(dt_mem_current(DT_MEM_PARAMS) == 0 && dt_mem_current(DT_MEM_OPTIM) == 0 &&
              dt_mem_current(DT_MEM_GRADS) == 0 && dt_mem_current(DT_MEM_GATHERED) == 0,
              "stage %d: accounting returns to zero after free", zero);
    }
}

int main(void) {
    CHECK_OK(dt_init());
    dt_comm *w = dt_comm_world();
    int N = dt_comm_size(w), rank = dt_comm_rank(w);
    dt_test_rank = rank;
    dt_comm *solo = dt_test_solo_comm();
    dt_comm_info wi;
    CHECK_OK(dt_comm_info_get(w, &wi));
    const int comm_is_world = wi.local_size == wi.size; /* one host (the suite's case) */

    run runs[] = {{"sgd", 0, 1}, {"adamw", 0, 1}, {"sgd", 0.5, 1}, {"adamw", 0.5, 2}};
    float *unclipped[2] = {NULL, NULL}; /* sgd, adamw without clipping */
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        size_t n0 = 0, n1 = 0, nz = 0;
        float *one = train(solo, 0, runs[k], B, &n1);
        float *dp = train(w, 0, runs[k], B / N, &n0);
        int which = strcmp(runs[k].optim, "sgd") != 0;
        if (runs[k].clip == 0 && runs[k].accum == 1) {
            unclipped[which] = malloc(n0 * sizeof(float));
            if (dp) memcpy(unclipped[which], dp, n0 * sizeof(float));
        } else if (runs[k].clip > 0 && dp && unclipped[which]) {
            double d = dt_test_rel_err(dp, unclipped[which], n0);
            CHECK(d > 1e-3, "clipping at %g changed nothing (rel diff %.3g): it must be active in this test", runs[k].clip, d);
        }
        /* at 1 rank stage 0 runs exactly as the reference (same process,
         * batch and order): compared at N > 1 only; stages 1-3 are compared
         * with both at every size (their own code paths, also at 1 rank) */
        if (one && dp && N > 1) {
            double e = dt_test_rel_err(dp, one, n0);
            if (rank == 0) printf("%s clip %g accum %d: stage 0 on %d ranks vs 1 rank: rel err %.3g\n",
                                  runs[k].optim, runs[k].clip, runs[k].accum, N, e);
            CHECK(e <= 1e-5, "stage 0 vs 1 rank: %.3g", e);
        }
        for (int zero = 1; zero <= 3; zero++) {
            float *z = train(w, zero, runs[k], B / N, &nz);
            if (z && dp && one) {
                double e0 = dt_test_rel_err(z, dp, n0), e1 = dt_test_rel_err(z, one, n0);
                if (rank == 0) printf("  stage %d: vs stage 0 %.3g, vs 1 rank %.3g\n", zero, e0, e1);
                CHECK(nz == n0 && e0 <= 1e-5 && e1 <= 1e-5, "%s clip %g accum %d stage %d: rel err %.3g / %.3g",
                      runs[k].optim, runs[k].clip, runs[k].accum, zero, e0, e1);
            }
            /* shard_group host on one host: the host is the world (the hybrid
             * code path with one replica), so the very same bits */
            if (k == 3 && comm_is_world) {
                size_t nh = 0;
                float *h = train_in(w, zero, DT_SHARD_HOST, runs[k], B / N, &nh);
                if (h && z) {
                    if (rank == 0) printf("  stage %d shard_group host (one host): %s stage %d over the world\n", zero,
                                          memcmp(h, z, nz * sizeof(float)) ? "DIFFERS from" : "bitwise equal to", zero);
                    CHECK(nh == nz && memcmp(h, z, nz * sizeof(float)) == 0,
                          "stage %d: shard_group host on one host differs from world", zero);
                }
                free(h);
            }
            free(z);
        }
        free(one);
        free(dp);
    }
    free(unclipped[0]);
    free(unclipped[1]);
    /* compressed gradients at stages 2 and 3 */
    for (int zero = 2; zero <= 3; zero++) {
        size_t nf = 0, nb = 0;
        float *f32 = train(w, zero, runs[0], B / N, &nf);
        g_wire = DT_WIRE_BF16;
        g_same_ranks = 0;
        float *bf = train(w, zero, runs[0], B / N, &nb);
        g_wire = 0;
        if (f32 && bf && nf == nb) {
            double e = dt_test_rel_err(bf, f32, nf);
            if (rank == 0) printf("stage %d grad_comm_dtype bf16 (sgd), %d ranks, %d steps: rel err %.3g vs f32\n", zero, N,
                                  STEPS, e);
            CHECK(e <= WIRE_TOL, "stage %d grad_comm_dtype bf16: rel err %.3g vs f32 > %g", zero, e, WIRE_TOL);
            if (N > 1) CHECK(e > 0, "stage %d grad_comm_dtype bf16: equal to the f32 run (not compressed?)", zero);
            if (zero == 2) CHECK(g_same_ranks, "stage 2 grad_comm_dtype bf16: the parameters differ across ranks");
        } else {
            CHECK(0, "stage %d grad_comm_dtype bf16: a run failed", zero);
        }
        free(f32);
        free(bf);
    }
    check_memory(w, N, rank);
    CHECK_OK(dt_finalize());
    return dt_test_finish("train_zero");
}
