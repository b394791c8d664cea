/* tests/fakegpu/test_lt_noalgo.c - the GPT's CUDA backend when cuBLASLt's
 * heuristic finds no algorithm for a product, as a real library may for a
 * type combination, epilogue or alignment it does not cover. The fake is told
 * which problems to refuse (DTRAIN_FAKEGPU_LT_NOALGO, fakegpu.h), in both of
 * the ways cuBLASLt reports it: a count of 0, and CUBLAS_STATUS_NOT_SUPPORTED.
 *   1. No fused GELU epilogue (bf16's MLP, GELU_AUX_BIAS). The backend computes
 *      the product, then the GELU kernel, and asks cuBLASLt only once per
 *      model. Training goes on: the losses stay within 1% of the fused run's
 *      (the GELU input is rounded to bf16 before the GELU), and are the same
 *      bits whichever way the refusal came.
 *   2. No bf16 x bf16 -> f32 product (the weight gradients; docs/gpu-first-run.md,
 *      "Least sure" 1). The backward fails with DT_ERR_UNSUPPORTED, naming the
 *      product, its types and its shape. The model is freed cleanly, and a new
 *      one trains with the first run's bits once the refusal is lifted.
 *   3. fp32 asks for neither: its GELU is never the epilogue's, and its
 *      products are f32 x f32. With both refused it trains with the same bits
 *      as without.
 * The shape is small: every kernel runs as its CPU twin. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "fakegpu.h"
#include "testutil.h"
#include "dtrain/model.h"
#include "dtrain/optim.h"

enum { L = 2, NH = 2, C = 32, T = 16, V = 200, B = 2, STEPS = 3 };

static dt_model *make(int prec) { return dt_test_gpt(L, NH, C, T, V, 5, DT_DEVICE_CUDA, prec); }
static void batch(uint64_t seed, int32_t *x, int32_t *y) { dt_test_tokens(seed, V, B * T, x, y); }

/* up to `steps` AdamW steps of a new model of precision prec: each step's
 * loss into loss[]; returns the status of the first call that failed (its
 * message kept in dt_last_error) or DT_OK */
static int train(int prec, int steps, float *loss) {
    dt_model *m = make(prec);
    if (!m) return DT_ERR_INVALID;
    dt_optim_config oc;
    dt_optim_config_default(&oc, DT_OPTIM_ADAMW);
    dt_optim *opt = NULL;
    int rc = dt_optim_create_on(&oc, dt_model_num_params(m), dt_model_device(m), dt_model_stream(m), &opt);
    int32_t x[B * T], y[B * T];
    for (int s = 0; s < steps && rc == DT_OK; s++) {
        batch(40, x, y); /* the same batch: the loss falls */
        dt_model_zero_grad(m);
        rc = dt_model_forward_seq(m, x, y, B, T, 1, NULL);
        if (rc == DT_OK) rc = dt_model_backward(m);
        if (rc == DT_OK) rc = dt_model_loss(m, &loss[s]);
        if (rc == DT_OK) rc = dt_optim_step(opt, dt_model_params(m), dt_model_grads(m), 1e-3f);
    }
    dt_optim_free(opt);
    dt_model_free(m);
    return rc;
}

static void refuse(const char *what) {
    if (what) setenv("DTRAIN_FAKEGPU_LT_NOALGO", what, 1);
    else unsetenv("DTRAIN_FAKEGPU_LT_NOALGO");
}

/* 1 */
static void test_gelu(const float *fused) {
    float count0[STEPS], status[STEPS];
    long before = fk_lt_refused();
    refuse("gelu_aux");
    CHECK_OK(train(DT_PRECISION_BF16, STEPS, count0));
    CHECK(fk_lt_refused() - before == 1, "the fused GELU was asked for %ld times after its refusal (want once)",
          fk_lt_refused() - before);
    before = fk_lt_refused();
    refuse("status,gelu_aux");
    CHECK_OK(train(DT_PRECISION_BF16, STEPS, status));
    CHECK(fk_lt_refused() - before == 1, "refused with a status: asked %ld times (want once)",
          fk_lt_refused() - before);
    refuse(NULL);
    double worst = 0;
    for (int s = 0; s < STEPS; s++) {
        const double e = fabs((double)count0[s] - fused[s]) / fused[s];
        worst = e > worst ? e : worst;
        CHECK(e <= 0.01, "step %d: loss %.7g without the fused GELU vs %.7g with it (%.3g > 1%%)", s + 1, count0[s],
              fused[s], e);
    }
    CHECK(memcmp(count0, status, sizeof status) == 0, "the two ways of refusing give different losses: %.9g vs %.9g",
          count0[STEPS - 1], status[STEPS - 1]);
    printf("1. no fused GELU: the product, then the GELU kernel; losses within %.2e of the fused run's\n", worst);
}

/* 2 */
static void test_dweight(const float *fused) {
    const char *how[2] = {"bf16_f32", "bf16_f32,status"};
    float l[STEPS];
    for (int i = 0; i < 2; i++) {
        refuse(how[i]);
        const long before = fk_lt_refused();
        CHECK_ERR(train(DT_PRECISION_BF16, STEPS, l), DT_ERR_UNSUPPORTED, "matmul_backward (dweight)");
        CHECK(dt_test_msg_has("bf16 x bf16 -> f32") && dt_test_msg_has("m=") && dt_test_msg_has("alignment of A"),
              "%s: the message names the types, the shape and the alignments: '%s'", how[i], dt_last_error());
        CHECK(fk_lt_refused() - before == 1, "%s: %ld refusals (want 1: the first weight gradient)", how[i],
              fk_lt_refused() - before);
    }
    printf("2. no bf16 x bf16 -> f32 product: '%s'\n", dt_last_error());
    refuse(NULL);
    CHECK_OK(train(DT_PRECISION_BF16, STEPS, l));
    CHECK(memcmp(l, fused, sizeof l) == 0, "after the refusals, a new model's losses %.9g are not the first run's %.9g",
          l[STEPS - 1], fused[STEPS - 1]);
}

/* 3 */
static void test_fp32(void) {
    float plain[STEPS], refused[STEPS];
    CHECK_OK(train(DT_PRECISION_FP32, STEPS, plain));
    const long before = fk_lt_refused();
    refuse("gelu_aux,bf16_f32");
    CHECK_OK(train(DT_PRECISION_FP32, STEPS, refused));
    refuse(NULL);
    CHECK(fk_lt_refused() == before, "fp32 asked for a refused product (%ld times)", fk_lt_refused() - before);
    CHECK(memcmp(plain, refused, sizeof plain) == 0, "fp32's losses changed: %.9g vs %.9g", refused[STEPS - 1],
          plain[STEPS - 1]);
    printf("3. fp32 asks for neither: losses %.6f -> %.6f, the same bits\n", plain[0], plain[STEPS - 1]);
}

int main(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("fakegpu_lt_noalgo: skipped: the fake has no device (DTRAIN_FAKEGPU_DEVICES=0)\n");
        return 77;
    }
    refuse(NULL);
    float fused[STEPS];
    CHECK_OK(train(DT_PRECISION_BF16, STEPS, fused));
    CHECK(fk_lt_refused() == 0, "%ld refusals with nothing refused", fk_lt_refused());
    CHECK(isfinite(fused[0]) && fused[STEPS - 1] < fused[0], "bf16 losses %.6f -> %.6f do not fall", fused[0],
          fused[STEPS - 1]);
    test_gelu(fused);
    test_dweight(fused);
    test_fp32();
    return dt_test_finish("fakegpu_lt_noalgo");
}
