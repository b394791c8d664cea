/* tests/nn/test_nn_syncbn.c - synchronised batch norm.
 *
 * Two "ranks" are two threads, each with its own model copy (same seed) and
 * one half of a batch. Their sync_stats hook sums the buffers of both copies
 * in lock-step (a barrier and two shared slots). The result must equal one
 * model that sees the full batch without synchronisation:
 *  - every batch-norm output of rank r equals rows [r*B/2, (r+1)*B/2) of the
 *    full model's output;
 *  - mean of the two losses = full loss; the average of the two ranks'
 *    gradients (what data parallelism computes) = the full gradient;
 *  - running statistics of both ranks = the full model's.
 * Tolerance: max|a-b| / max(max|b|, 1e-6) <= 1e-5 (outputs, loss, stats) and
 * <= 1e-5 (gradients too; the sums travel as float32).
 * Also checked at the layer level for BatchNorm1d (S = 1) and the number of
 * sync calls per pass. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "dtrain/model.h"
#include "dtrain/nn.h"
#include "dtrain/rng.h"

typedef struct pair_sync {
    pthread_barrier_t bar;
    float *slot[2];
    size_t n[2];
} pair_sync;

typedef struct rank_ctx {
    pair_sync *ps;
    int rank;
    int calls;
    float tmp[4096];
} rank_ctx;

static int sum2(void *ctx, float *buf, size_t n) {
    rank_ctx *r = ctx;
    pair_sync *ps = r->ps;
    ps->slot[r->rank] = buf;
    ps->n[r->rank] = n;
    pthread_barrier_wait(&ps->bar);
    int bad = ps->n[0] != ps->n[1] || n > 4096;
    if (!bad)
        for (size_t i = 0; i < n; i++) r->tmp[i] = ps->slot[0][i] + ps->slot[1][i];
    pthread_barrier_wait(&ps->bar); /* both have read both slots */
    if (bad) return DT_ERR_MISMATCH;
    memcpy(buf, r->tmp, n * sizeof(float));
    r->calls++;
    return 0;
}

static double rel_err(const float *a, const float *b, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > num || d != d) num = d;
        if (fabs((double)b[i]) > den) den = fabs((double)b[i]);
    }
    return num / (den > 1e-6 ? den : 1e-6);
}

/* ---- model level ------------------------------------------------------------ */

typedef struct rank_job {
    dt_model *m;
    rank_ctx rc;
    const float *x;
    const int32_t *y;
    int B;
    float loss;
    int status;
} rank_job;

static void *rank_main(void *arg) {
    rank_job *j = arg;
    j->status = dt_model_forward(j->m, j->x, j->y, j->B, 1, &j->loss);
    if (j->status == DT_OK) j->status = dt_model_backward(j->m);
    return NULL;
}

static dt_model *make(const char *name, uint64_t seed) {
    dt_model_config cfg;
    dt_model_config_default(&cfg, name);
    if (strcmp(name, "cnn") == 0) {
        cfg.conv_channels1 = 8;
        cfg.conv_channels2 = 8;
        cfg.hidden3 = 16;
        cfg.dropout = 0.0f;
    }
    cfg.seed = seed;
    dt_model *m = NULL;
    CHECK_OK(dt_model_create(&cfg, &m));
    return m;
}

static void test_model(const char *name) {
    enum { B = 16, H = 8 };
    float *x = malloc((size_t)B * 784 * sizeof(float));
    int32_t y[B];
    dt_rng r;
    dt_rng_seed(&r, 5);
    for (int i = 0; i < B * 784; i++) x[i] = dt_rng_uniform(&r);
    for (int b = 0; b < B; b++) y[b] = (int32_t)dt_rng_below(&r, 10);

    dt_model *full = make(name, 17);
    float loss_full;
    CHECK_OK(dt_model_forward(full, x, y, B, 1, &loss_full));
    CHECK_OK(dt_model_backward(full));

    pair_sync ps;
    pthread_barrier_init(&ps.bar, NULL, 2);
    rank_job *job = calloc(2, sizeof *job);
    pthread_t th[2];
    for (int k = 0; k < 2; k++) {
        job[k].m = make(name, 17);
        job[k].rc.ps = &ps;
        job[k].rc.rank = k;
        job[k].x = x + (size_t)k * H * 784;
        job[k].y = y + k * H;
        job[k].B = H;
        dt_model_hooks hk = {&job[k].rc, NULL, NULL, NULL, NULL, NULL, sum2};
        CHECK_OK(dt_model_set_hooks(job[k].m, &hk));
        pthread_create(&th[k], NULL, rank_main, &job[k]);
    }
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    pthread_barrier_destroy(&ps.bar);
    CHECK(job[0].status == DT_OK && job[1].status == DT_OK, "%s rank status %d %d: %s", name,
          job[0].status, job[1].status, dt_last_error());

    int nbn = 0;
    for (int l = 0; l < dt_model_num_layers(full); l++) {
        if (strncmp(dt_model_layer_kind(full, l), "batchnorm", 9) != 0) continue;
        nbn++;
        size_t sz = dt_model_layer_output_size(full, l) * H;
        const float *fo = dt_model_layer_output(full, l);
        for (int k = 0; k < 2; k++) {
            double e = rel_err(dt_model_layer_output(job[k].m, l), fo + (size_t)k * sz, sz);
            CHECK(e <= 1e-5, "%s BN layer %d rank %d output rel err %.3g", name, l, k, e);
            printf("  %-6s BN layer %d rank %d: output rel err %.2e\n", name, l, k, e);
        }
    }
    CHECK(nbn > 0, "%s has batch norm", name);
    for (int k = 0; k < 2; k++)
        CHECK(job[k].rc.calls == 3 * nbn, "%s rank %d made %d sync calls, want %d", name, k,
              job[k].rc.calls, 3 * nbn);
    float mean_loss = 0.5f * (job[0].loss + job[1].loss);
    CHECK(fabsf(mean_loss - loss_full) <= 1e-5f * fabsf(loss_full), "%s loss %g vs %g", name,
          mean_loss, loss_full);
    size_t n = dt_model_num_params(full);
    float *avg = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        avg[i] = 0.5f * (dt_model_grads(job[0].m)[i] + dt_model_grads(job[1].m)[i]);
    for (int s = 0; s < dt_model_num_slices(full); s++) {
        const dt_param_slice *sl = dt_model_slice(full, s);
        double e = rel_err(avg + sl->offset, dt_model_grads(full) + sl->offset, sl->count);
        CHECK(e <= 1e-5, "%s grad %s rel err %.3g", name, sl->name, e);
        printf("  %-6s grad %-14s rel err %.2e\n", name, sl->name, e);
    }
    size_t nb = dt_model_num_buffers(full);
    for (int k = 0; k < 2; k++) {
        double e = rel_err(dt_model_buffers(job[k].m), dt_model_buffers(full), nb);
        CHECK(e <= 1e-5, "%s running stats rank %d rel err %.3g", name, k, e);
    }
    /* eval passes never call sync_stats */
    int before = job[0].rc.calls;
    float l;
    CHECK_OK(dt_model_forward(job[0].m, x, y, 4, 0, &l));
    CHECK(job[0].rc.calls == before, "eval forward must not sync");
    free(avg);
    for (int k = 0; k < 2; k++) dt_model_free(job[k].m);
    free(job);
    dt_model_free(full);
    free(x);
}

/* ---- layer level, BatchNorm1d ----------------------------------------------------- */

enum { LB = 10, LC = 7 };

typedef struct bn_job {
    rank_ctx rc;
    const float *x, *w, *bias, *dy;
    float y[LB / 2 * LC], dx[LB / 2 * LC], dw[LC], db[LC], mean[LC], rstd[LC], rm[LC], rv[LC];
    float work[2 * LC + 1];
    int status;
} bn_job;

static void *bn_main(void *arg) {
    bn_job *j = arg;
    j->status = dt_batchnorm_forward(j->y, j->mean, j->rstd, j->x, j->w, j->bias, j->rm, j->rv,
                                     j->work, LB / 2, LC, 1, 1, 0.1f, 1e-5f, sum2, &j->rc);
    if (!j->status)
        j->status = dt_batchnorm_backward(j->dx, j->dw, j->db, j->work, j->dy, j->x, j->w,
                                          j->mean, j->rstd, LB / 2, LC, 1, 1, sum2, &j->rc);
    return NULL;
}

static void test_layer_bn1d(void) {
    float x[LB * LC], dy[LB * LC], w[LC], bias[LC];
    dt_rng r;
    dt_rng_seed(&r, 9);
    for (int i = 0; i < LB * LC; i++) {
        x[i] = 3.0f * dt_rng_uniform(&r) + 1.0f;
        dy[i] = dt_rng_uniform(&r) - 0.5f;
    }
    for (int c = 0; c < LC; c++) {
        w[c] = 0.5f + dt_rng_uniform(&r);
        bias[c] = dt_rng_uniform(&r) - 0.5f;
    }
    float y[LB * LC], dx[LB * LC] = {0}, dw[LC] = {0}, db[LC] = {0}, mean[LC], rstd[LC];
    float rm[LC] = {0}, rv[LC], work[2 * LC + 1];
    for (int c = 0; c < LC; c++) rv[c] = 1.0f;
    CHECK_OK(dt_batchnorm_forward(y, mean, rstd, x, w, bias, rm, rv, NULL, LB, LC, 1, 1, 0.1f,
                                  1e-5f, NULL, NULL));
    CHECK_OK(dt_batchnorm_backward(dx, dw, db, work, dy, x, w, mean, rstd, LB, LC, 1, 1, NULL,
                                   NULL));
    pair_sync ps;
    pthread_barrier_init(&ps.bar, NULL, 2);
    bn_job *j = calloc(2, sizeof *j);
    pthread_t th[2];
    for (int k = 0; k < 2; k++) {
        j[k].rc.ps = &ps;
        j[k].rc.rank = k;
        j[k].x = x + k * (LB / 2) * LC;
        j[k].dy = dy + k * (LB / 2) * LC;
        j[k].w = w;
        j[k].bias = bias;
        for (int c = 0; c < LC; c++) j[k].rv[c] = 1.0f;
        pthread_create(&th[k], NULL, bn_main, &j[k]);
    }
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    pthread_barrier_destroy(&ps.bar);
    CHECK(j[0].status == DT_OK && j[1].status == DT_OK, "bn1d sync status");
    float dws[LC], dbs[LC];
    for (int c = 0; c < LC; c++) {
        dws[c] = j[0].dw[c] + j[1].dw[c];
        dbs[c] = j[0].db[c] + j[1].db[c];
    }
    double e_y = fmax(rel_err(j[0].y, y, LB / 2 * LC), rel_err(j[1].y, y + LB / 2 * LC, LB / 2 * LC));
    double e_dx =
        fmax(rel_err(j[0].dx, dx, LB / 2 * LC), rel_err(j[1].dx, dx + LB / 2 * LC, LB / 2 * LC));
    double e_p = fmax(rel_err(dws, dw, LC), rel_err(dbs, db, LC));
    double e_r = fmax(rel_err(j[0].rm, rm, LC), rel_err(j[1].rv, rv, LC));
    CHECK(e_y <= 1e-5 && e_dx <= 1e-4 && e_p <= 1e-4 && e_r <= 1e-5,
          "bn1d sync: y %.3g dx %.3g dparams %.3g running %.3g", e_y, e_dx, e_p, e_r);
    printf("  bn1d layer: y %.2e dx %.2e dparams %.2e running %.2e\n", e_y, e_dx, e_p, e_r);
    CHECK(j[0].rc.calls == 3 && j[1].rc.calls == 3, "bn1d sync calls %d", j[0].rc.calls);
    free(j);
}

/* A sync callback failing aborts the layer with its status. */
static int failing_sync(void *ctx, float *buf, size_t n) {
    (void)ctx;
    (void)buf;
    (void)n;
    return DT_ERR_BACKEND;
}

static void test_sync_failure(void) {
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8], mean[2], rstd[2], work[5];
    CHECK(dt_batchnorm_forward(y, mean, rstd, x, NULL, NULL, NULL, NULL, work, 2, 2, 2, 1, 0.1f,
                               1e-5f, failing_sync, NULL) == DT_ERR_BACKEND,
          "sync failure status");
    CHECK_ERR(dt_batchnorm_forward(y, mean, rstd, x, NULL, NULL, NULL, NULL, NULL, 2, 2, 2, 1,
                                   0.1f, 1e-5f, failing_sync, NULL),
              DT_ERR_INVALID, "workspace");
}

int main(void) {
    test_model("lenet");
    test_model("cnn");
    test_layer_bn1d();
    test_sync_failure();
    return dt_test_finish("test_nn_syncbn");
}
