/* tests/nn/test_nn_parity.c - parity of the models with PyTorch 1.13.
 *
 * tests/reference/torch_models.py wrote, per model, the PyTorch parameters,
 * inputs and the results of one train-mode forward+backward of the mean NLL
 * loss and of one eval-mode forward (format in the script header; expected
 * values computed in float64). Here the same parameters are loaded BY NAME
 * into a dt_model (which also checks that every dt_param_slice name and
 * shape is the PyTorch state_dict key/shape), the same step is run, and
 * every tensor is compared:
 *     err = max|c - t| / max(max|t|, 1e-12)   per tensor,   err <= 1e-5.
 * Tensors: loss, log-probabilities, raw scores, every parameter gradient,
 * the batch-norm running statistics after the step, eval log-probs and loss. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "fixture.h"
#include "dtrain/model.h"

#ifndef DT_FIXTURE_DIR
#define DT_FIXTURE_DIR "tests/reference/fixtures"
#endif
#define TOL 1e-5

static void cmp(const char *model, const char *what, const float *c, const float *t,
                size_t n) {
    CHECK(t != NULL, "%s: fixture lacks %s", model, what);
    if (!t) return;
    double e = dt_fx_rel_err(c, t, n);
    CHECK(e <= TOL, "%s %s rel err %.3g > %g", model, what, e, TOL);
    printf("  %-6s %-28s rel err %.2e\n", model, what, e);
}

static void run(const char *file) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", DT_FIXTURE_DIR, file);
    dt_fixture fx;
    CHECK_OK(dt_fixture_load(path, &fx));
    if (fx.n == 0) return;
    const dt_fx_tensor *tn = dt_fixture_get(&fx, "config.name");
    const dt_fx_tensor *ts = dt_fixture_get(&fx, "config.sizes");
    const float *tp = dt_fixture_f32(&fx, "config.dropout", 1);
    const dt_fx_tensor *tx = dt_fixture_get(&fx, "input.x");
    const dt_fx_tensor *ty = dt_fixture_get(&fx, "input.y");
    CHECK(tn && ts && ts->count == 3 && tp && tx && ty && ty->dtype == 6, "%s: config", file);
    if (!(tn && ts && ts->count == 3 && tp && tx && ty)) {
        dt_fixture_free(&fx);
        return;
    }
    char name[32] = {0};
    memcpy(name, tn->data, tn->count < 31 ? tn->count : 31);
    const int32_t *sizes = ts->data;
    const int B = (int)ty->count;
    dt_model_config cfg;
    CHECK_OK(dt_model_config_default(&cfg, name));
    int cnn = strcmp(name, "cnn") == 0; /* its first two sizes are channels */
    if (sizes[0]) *(cnn ? &cfg.conv_channels1 : &cfg.hidden1) = sizes[0];
    if (sizes[1]) *(cnn ? &cfg.conv_channels2 : &cfg.hidden2) = sizes[1];
    if (sizes[2]) cfg.hidden3 = sizes[2];
    cfg.dropout = tp[0];
    dt_model *m = NULL;
    CHECK_OK(dt_model_create(&cfg, &m));
    if (!m) {
        dt_fixture_free(&fx);
        return;
    }
    CHECK_OK(dt_fixture_load_model(&fx, m, ""));
    /* no parameter of the PyTorch model is missing from dt_model */
    int nparam = 0, nbuf = 0;
    for (int i = 0; i < fx.n; i++) {
        nparam += strncmp(fx.t[i].name, "param.", 6) == 0;
        nbuf += strncmp(fx.t[i].name, "buffer.", 7) == 0;
    }
    CHECK(nparam == dt_model_num_slices(m) && nbuf == dt_model_num_buffer_slices(m),
          "%s: fixture has %d params %d buffers, model %d %d", name, nparam, nbuf,
          dt_model_num_slices(m), dt_model_num_buffer_slices(m));

    float loss;
    CHECK_OK(dt_model_forward(m, tx->data, ty->data, B, 1, &loss));
    CHECK_OK(dt_model_backward(m));
    cmp(name, "loss", &loss, dt_fixture_f32(&fx, "out.loss", 1), 1);
    cmp(name, "log-probs", dt_model_log_probs(m), dt_fixture_f32(&fx, "out.logits", (size_t)B * 10),
        (size_t)B * 10);
    cmp(name, "scores", dt_model_scores(m), dt_fixture_f32(&fx, "out.scores", (size_t)B * 10),
        (size_t)B * 10);
    char key[160];
    for (int i = 0; i < dt_model_num_slices(m); i++) {
        const dt_param_slice *s = dt_model_slice(m, i);
        snprintf(key, sizeof key, "grad.%s", s->name);
        cmp(name, key, dt_model_grads(m) + s->offset, dt_fixture_f32(&fx, key, s->count),
            s->count);
    }
    for (int i = 0; i < dt_model_num_buffer_slices(m); i++) {
        const dt_param_slice *s = dt_model_buffer_slice(m, i);
        snprintf(key, sizeof key, "buffer_after.%s", s->name);
        cmp(name, key, dt_model_buffers(m) + s->offset, dt_fixture_f32(&fx, key, s->count),
            s->count);
    }
    CHECK_OK(dt_model_forward(m, tx->data, ty->data, B, 0, &loss));
    cmp(name, "eval.loss", &loss, dt_fixture_f32(&fx, "eval.loss", 1), 1);
    cmp(name, "eval.log-probs", dt_model_log_probs(m),
        dt_fixture_f32(&fx, "eval.logits", (size_t)B * 10), (size_t)B * 10);
    dt_model_free(m);
    dt_fixture_free(&fx);
}

int main(void) {
    run("mlp.dtfx");
    run("lenet.dtfx");
    run("cnn.dtfx");
    /* reader errors */
    dt_fixture fx;
    CHECK_ERR(dt_fixture_load(DT_FIXTURE_DIR "/missing.dtfx", &fx), DT_ERR_IO, "cannot open");
    return dt_test_finish("test_nn_parity");
}
