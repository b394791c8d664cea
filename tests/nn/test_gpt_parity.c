/* tests/nn/test_gpt_parity.c - parity of the gpt family with PyTorch 1.13.
 *
 * tests/reference/torch_gpt.py wrote fixtures/gpt.dtfx (format in the
 * script header; expected values computed in float64): a small GPT's
 * parameters (nanoGPT naming), one batch, the loss, logits, log-probs and
 * every gradient of one forward + backward, then the loss before each of 10
 * AdamW steps on that batch and every parameter after them. Here the same
 * parameters are loaded BY NAME into a dt_model (which also checks that
 * every slice name and shape is the PyTorch state_dict key/shape), the same
 * computation runs with dtrain's kernels and optimizer, and every tensor is
 * compared:  err = max|c - t| / max(max|t|, 1e-12) per tensor, err <= 1e-4
 * (torch's own float32 run is within 1e-5 of the float64 values; AdamW
 * divides each gradient by its running magnitude, so float32 rounding of
 * small gradients shows up in the parameters after the steps). T = 100 spans
 * two of the attention kernel's 64-row blocks. The same is then checked with
 * activation recomputation on, which must give bit-identical results. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "fixture.h"
#include "dtrain/model.h"
#include "dtrain/optim.h"

#ifndef DT_FIXTURE_DIR
#define DT_FIXTURE_DIR "tests/reference/fixtures"
#endif
#define TOL 1e-4

static double worst;

static void cmp(const char *tag, const char *what, const float *c, const float *t, size_t n,
                int verbose) {
    CHECK(t != NULL, "%s: fixture lacks %s", tag, what);
    CHECK(c != NULL, "%s: dtrain gave no %s: %s", tag, what, dt_last_error());
    if (!t || !c) return;
    double e = dt_fx_rel_err(c, t, n);
    CHECK(e <= TOL, "%s %s rel err %.3g > %g", tag, what, e, TOL);
    if (e > worst) worst = e;
    if (verbose) printf("  %-10s %-46s rel err %.2e\n", tag, what, e);
}

/* The AdamW of the fixture (the Python values; config.adamw holds them as
 * float32 so that a regenerated fixture with other values is noticed). */
static const double k_lr = 1e-3, k_b1 = 0.9, k_b2 = 0.95, k_eps = 1e-6, k_wd = 0.1;
static const int k_steps = 10;

/* Runs the whole comparison; returns the model (caller frees) so that the
 * recompute run can be compared bit for bit. grads0/after receive copies. */
static void run(const dt_fixture *fx, int recompute, float *grads0, float *after,
                float *step_loss) {
    const char *tag = recompute ? "recompute" : "gpt";
    const dt_fx_tensor *tc = dt_fixture_get(fx, "config.gpt");
    const float *ta = dt_fixture_f32(fx, "config.adamw", 6);
    const dt_fx_tensor *tx = dt_fixture_get(fx, "input.x");
    const dt_fx_tensor *ty = dt_fixture_get(fx, "input.y");
    CHECK(tc && tc->count == 5 && tc->dtype == 6 && ta && tx && ty && tx->ndim == 2 &&
              tx->dtype == 6 && ty->dtype == 6 && ty->count == tx->count,
          "fixture config/inputs");
    if (!(tc && tc->count == 5 && ta && tx && ty && tx->ndim == 2)) return;
    CHECK(ta[0] == (float)k_lr && ta[1] == (float)k_b1 && ta[2] == (float)k_b2 &&
              ta[3] == (float)k_eps && ta[4] == (float)k_wd && ta[5] == (float)k_steps,
          "config.adamw differs from this test's constants");
    const int32_t *c = tc->data;
    const int B = (int)tx->shape[0], T = (int)tx->shape[1], V = c[4];
    dt_model_config cfg;
    CHECK_OK(dt_model_config_default(&cfg, "gpt-test"));
    cfg.n_layer = c[0];
    cfg.n_head = c[1];
    cfg.n_embd = c[2];
    cfg.block_size = c[3];
    cfg.vocab_size = c[4];
    cfg.recompute = recompute;
    dt_model *m = NULL;
    CHECK_OK(dt_model_create(&cfg, &m));
    if (!m) return;
    CHECK(dt_model_recompute(m) == recompute, "recompute flag");
    CHECK_OK(dt_fixture_load_model(fx, m, ""));
    int nparam = 0;
    for (int i = 0; i < fx->n; i++) nparam += strncmp(fx->t[i].name, "param.", 6) == 0;
    CHECK(nparam == dt_model_num_slices(m), "fixture has %d params, model %d slices", nparam,
          dt_model_num_slices(m));
    const size_t P = dt_model_num_params(m), NV = (size_t)B * (size_t)T * (size_t)V;

    float loss = 0.0f;
    CHECK_OK(dt_model_forward_seq(m, tx->data, ty->data, B, T, 1, &loss));
    cmp(tag, "loss", &loss, dt_fixture_f32(fx, "out.loss", 1), 1, 1);
    cmp(tag, "logits", dt_model_scores(m), dt_fixture_f32(fx, "out.logits", NV), NV, 1);
    cmp(tag, "log-probs", dt_model_log_probs(m), dt_fixture_f32(fx, "out.logp", NV), NV, 1);
    CHECK_OK(dt_model_backward(m));
    char key[160];
    for (int i = 0; i < dt_model_num_slices(m); i++) {
        const dt_param_slice *s = dt_model_slice(m, i);
        snprintf(key, sizeof key, "grad.%s", s->name);
        cmp(tag, key, dt_model_grads(m) + s->offset, dt_fixture_f32(fx, key, s->count),
            s->count, !recompute);
    }
    memcpy(grads0, dt_model_grads(m), P * sizeof(float));

    /* AdamW steps on the same batch (the first uses the gradients above) */
    dt_optim_config oc;
    CHECK_OK(dt_optim_config_default(&oc, DT_OPTIM_ADAMW));
    oc.lr = k_lr;
    oc.beta1 = k_b1;
    oc.beta2 = k_b2;
    oc.eps = k_eps;
    oc.weight_decay = k_wd;
    dt_optim *opt = NULL;
    CHECK_OK(dt_optim_create(&oc, P, &opt));
    for (int s = 0; opt && s < k_steps; s++) {
        if (s > 0) {
            dt_model_zero_grad(m);
            CHECK_OK(dt_model_forward_seq(m, tx->data, ty->data, B, T, 1, &loss));
            CHECK_OK(dt_model_backward(m));
        }
        step_loss[s] = loss;
        CHECK_OK(dt_optim_step(opt, dt_model_params(m), dt_model_grads(m), (float)k_lr));
    }
    dt_optim_free(opt);
    cmp(tag, "loss before each step", step_loss,
        dt_fixture_f32(fx, "step.loss", (size_t)k_steps), (size_t)k_steps, 1);
    for (int i = 0; i < dt_model_num_slices(m); i++) {
        const dt_param_slice *s = dt_model_slice(m, i);
        snprintf(key, sizeof key, "after.param.%s", s->name);
        cmp(tag, key, dt_model_params(m) + s->offset, dt_fixture_f32(fx, key, s->count),
            s->count, !recompute);
    }
    memcpy(after, dt_model_params(m), P * sizeof(float));
    dt_model_free(m);
}

int main(void) {
    dt_fixture fx;
    CHECK_OK(dt_fixture_load(DT_FIXTURE_DIR "/gpt.dtfx", &fx));
    if (fx.n == 0) return dt_test_finish("test_gpt_parity");
    size_t P = 0;
    for (int i = 0; i < fx.n; i++)
        if (strncmp(fx.t[i].name, "param.", 6) == 0) P += fx.t[i].count;
    float *g0 = calloc(P, sizeof(float)), *a0 = calloc(P, sizeof(float));
    float *g1 = calloc(P, sizeof(float)), *a1 = calloc(P, sizeof(float));
    float l0[16], l1[16];
    run(&fx, 0, g0, a0, l0);
    printf("  worst rel err against PyTorch (float64): %.2e (tolerance %g)\n", worst, TOL);
    run(&fx, 1, g1, a1, l1);
    CHECK(memcmp(g0, g1, P * sizeof(float)) == 0,
          "recompute: gradients are not bit-identical to those without");
    CHECK(memcmp(a0, a1, P * sizeof(float)) == 0 && memcmp(l0, l1, sizeof(float) * 10) == 0,
          "recompute: the 10 AdamW steps are not bit-identical to those without");
    free(g0);
    free(a0);
    free(g1);
    free(a1);
    dt_fixture_free(&fx);
    return dt_test_finish("test_gpt_parity");
}
