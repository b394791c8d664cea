/* tests/nn/test_gpt_torch_live.c - a dtrain GPT exported as safetensors
 * loads into the PyTorch reference model and gives the same loss, checked
 * live against Debian's torch (/usr/bin/python3): the model is trained a few
 * AdamW steps (so that no tensor is at its initial constant), its parameters
 * written by name with dtrain's safetensors writer (the slices, as the
 * trainer's --save-model does), and a batch with dtrain's loss and logits
 * written as a .dtfx file; tests/reference/torch_gpt.py --live loads both
 * with load_state_dict(strict=False) (only the tied lm_head.weight missing)
 * and compares the loss and the logits (float64 and float32 torch,
 * relative error <= 1e-4). Exits 77 (skipped), saying why, when
 * /usr/bin/python3 or its torch is missing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil.h"
#include "fixture.h"
#include "dtrain/model.h"
#include "dtrain/optim.h"
#include "dtrain/rng.h"
#include "dtrain/safetensors.h"

#ifndef DT_SOURCE_DIR
#define DT_SOURCE_DIR "."
#endif
#define PYTHON "/usr/bin/python3"

static int export_model(dt_model *m, const char *path) {
    const int n = dt_model_num_slices(m);
    dt_st_info *info = calloc((size_t)n, sizeof *info);
    if (!info) return DT_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        const dt_param_slice *s = dt_model_slice(m, i);
        info[i].name = s->name;
        info[i].dtype = DT_F32;
        info[i].ndim = s->ndim;
        for (int d = 0; d < s->ndim; d++) info[i].shape[d] = s->shape[d];
        info[i].data = dt_model_params(m) + s->offset;
    }
    int rc = dt_st_save(path, info, n,
                        "{\"format\": \"pt\", \"model\": \"gpt\", \"written_by\": \"dtrain\"}");
    free(info);
    return rc;
}

int main(void) {
    if (access(PYTHON, X_OK) != 0) {
        printf("SKIP: %s not found: the live PyTorch check needs Debian's python3-torch\n",
               PYTHON);
        return 77;
    }
    const int L = 2, NH = 4, C = 32, BS = 48, V = 256, B = 2, T = 40;
    dt_model_config cfg;
    CHECK_OK(dt_model_config_default(&cfg, "gpt-test"));
    cfg.n_layer = L;
    cfg.n_head = NH;
    cfg.n_embd = C;
    cfg.block_size = BS;
    cfg.vocab_size = V;
    cfg.seed = 2024;
    dt_model *m = NULL;
    CHECK_OK(dt_model_create(&cfg, &m));
    if (!m) return dt_test_finish("test_gpt_torch_live");
    int32_t x[2 * 40], y[2 * 40];
    dt_rng r;
    dt_rng_seed(&r, 77);
    for (int i = 0; i < B * T; i++) {
        x[i] = (int32_t)dt_rng_below(&r, V);
        y[i] = (int32_t)dt_rng_below(&r, V);
    }
    /* a few AdamW steps, so that biases and LayerNorm weights are not 0/1 */
    dt_optim_config oc;
    dt_optim *opt = NULL;
    CHECK_OK(dt_optim_config_default(&oc, DT_OPTIM_ADAMW));
    CHECK_OK(dt_optim_create(&oc, dt_model_num_params(m), &opt));
    float loss = 0.0f;
    for (int s = 0; opt && s < 3; s++) {
        dt_model_zero_grad(m);
        CHECK_OK(dt_model_forward_seq(m, x, y, B, T, 1, &loss));
        CHECK_OK(dt_model_backward(m));
        CHECK_OK(dt_optim_step(opt, dt_model_params(m), dt_model_grads(m), 1e-2f));
    }
    dt_optim_free(opt);
    /* the batch the Python side evaluates: other tokens */
    for (int i = 0; i < B * T; i++) {
        x[i] = (int32_t)dt_rng_below(&r, V);
        y[i] = (int32_t)dt_rng_below(&r, V);
    }
    CHECK_OK(dt_model_forward_seq(m, x, y, B, T, 0, &loss));
    const float *logits = dt_model_scores(m);

    char dir[256], path[320];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/dt_gpt_live_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK_OK(export_model(m, path));
    int32_t conf[5] = {L, NH, C, BS, V};
    dt_fx_tensor t[5];
    memset(t, 0, sizeof t);
    snprintf(t[0].name, sizeof t[0].name, "config.gpt");
    t[0].dtype = 6, t[0].ndim = 1, t[0].shape[0] = 5, t[0].count = 5, t[0].data = conf;
    snprintf(t[1].name, sizeof t[1].name, "input.x");
    t[1].dtype = 6, t[1].ndim = 2, t[1].shape[0] = B, t[1].shape[1] = T;
    t[1].count = (size_t)B * T, t[1].data = x;
    snprintf(t[2].name, sizeof t[2].name, "input.y");
    t[2] = t[1];
    snprintf(t[2].name, sizeof t[2].name, "input.y");
    t[2].data = y;
    snprintf(t[3].name, sizeof t[3].name, "out.loss");
    t[3].dtype = 0, t[3].ndim = 1, t[3].shape[0] = 1, t[3].count = 1, t[3].data = &loss;
    snprintf(t[4].name, sizeof t[4].name, "out.logits");
    t[4].dtype = 0, t[4].ndim = 3, t[4].shape[0] = B, t[4].shape[1] = T, t[4].shape[2] = V;
    t[4].count = (size_t)B * T * V, t[4].data = (void *)logits;
    snprintf(path, sizeof path, "%s/batch.dtfx", dir);
    CHECK_OK(dt_fixture_write(path, t, 5));
    dt_model_free(m);

    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s/tests/reference/torch_gpt.py --live %s", PYTHON,
             DT_SOURCE_DIR, dir);
    printf("%s\n", cmd);
    fflush(stdout);
    int st = system(cmd);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (!getenv("DT_KEEP_LIVE_DIR")) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
    if (code == 77) {
        printf("SKIP: %s has no torch (Debian package python3-torch)\n", PYTHON);
        return 77;
    }
    CHECK(code == 0, "torch_gpt.py --live exited with %d", code);
    return dt_test_finish("test_gpt_torch_live");
}
