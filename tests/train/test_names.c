/* tests/train/test_names.c - names that say what they are (issue 15): the
 * cnn's conv_channels1/2 (struct fields and the trainer's --channels1/2), the
 * refusals of flags a model does not have, and dt_model_log_probs returning
 * log-probabilities. Single process, no data files. */
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"
#include "dtrain/model.h"
#include "dtrain/train.h"

/* dt_train_parse_args over a NULL-terminated list (argv[0] added), its stderr
 * captured into err (NUL-terminated, truncated to cap). */
static int parse(dt_train_options *o, char *err, size_t cap, ...) {
    char *argv[32] = {"dtrain-train"};
    int argc = 1;
    va_list ap;
    va_start(ap, cap);
    for (char *a; argc < 31 && (a = va_arg(ap, char *)) != NULL;) argv[argc++] = a;
    va_end(ap);
    dt_train_options_default(o);
    char path[] = "/tmp/dt_test_names_XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    if (fd < 0 || saved < 0) { CHECK(0, "mkstemp/dup failed"); return DT_ERR_IO; }
    fflush(stderr);
    dup2(fd, 2);
    int rc = dt_train_parse_args(o, argc, argv);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, err, cap - 1, 0);
    err[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return rc;
}

static int conv1_channels(const dt_model_config *cfg) {
    dt_model *m = NULL;
    int rc = dt_model_create(cfg, &m);
    if (rc) return rc;
    const dt_param_slice *s = dt_model_find_slice(m, "conv1.weight", NULL);
    const dt_param_slice *s2 = dt_model_find_slice(m, "conv2.weight", NULL);
    int c = s && s2 && s2->shape[1] == s->shape[0] ? (int)s->shape[0] : -1;
    dt_model_free(m);
    return c;
}

static void test_cnn_channels(void) {
    dt_model_config cfg;
    CHECK_OK(dt_model_config_default(&cfg, "cnn"));
    CHECK(cfg.conv_channels1 == 32 && cfg.conv_channels2 == 64 && cfg.hidden3 == 128,
          "cnn defaults %d %d %d", cfg.conv_channels1, cfg.conv_channels2, cfg.hidden3);
    cfg.conv_channels1 = 6;
    cfg.conv_channels2 = 10;
    CHECK(conv1_channels(&cfg) == 6, "conv1 has %d output channels, want 6", conv1_channels(&cfg));
    cfg.conv_channels2 = 0;
    CHECK_ERR(dt_model_create(&cfg, &(dt_model *){NULL}), DT_ERR_INVALID, "conv_channels2=0");
    /* hidden1/2 are the mlp's, fields of their own: a cnn does not read them */
    CHECK_OK(dt_model_config_default(&cfg, "cnn"));
    cfg.hidden1 = 5;
    cfg.hidden2 = 7;
    CHECK(conv1_channels(&cfg) == 32, "hidden1 = 5 gave a cnn's conv1 %d channels", conv1_channels(&cfg));
}

static void test_trainer_flags(void) {
    dt_train_options o;
    char err[1024];
    CHECK_OK(parse(&o, err, sizeof err, "--model", "cnn", "--channels1", "8", "--channels2=16", NULL));
    CHECK(o.conv_channels1 == 8 && o.conv_channels2 == 16, "--channels1/2 gave %d %d", o.conv_channels1,
          o.conv_channels2);
    CHECK(err[0] == '\0', "--channels1/2 on cnn printed '%s'", err);
    /* --hidden1/2 are the mlp's: refused on cnn, naming its flags */
    CHECK_ERR(parse(&o, err, sizeof err, "--model", "cnn", "--hidden1", "12", NULL), DT_ERR_INVALID,
              "flag --hidden1: model cnn has no hidden sizes; its conv channels are --channels1/--channels2");
    CHECK_ERR(parse(&o, err, sizeof err, "--model", "cnn", "--hidden2", "12", NULL), DT_ERR_INVALID,
              "flag --hidden2: model cnn has no hidden sizes");
    /* mlp keeps --hidden1/2, silently */
    CHECK_OK(parse(&o, err, sizeof err, "--model", "mlp", "--hidden1", "64", "--hidden2", "32", NULL));
    CHECK(o.hidden1 == 64 && o.hidden2 == 32 && err[0] == '\0', "mlp --hidden1/2: %d %d '%s'", o.hidden1,
          o.hidden2, err);
    /* flags a model does not have are refused */
    dt_clear_error();
    int rc = parse(&o, err, sizeof err, "--model", "mlp", "--channels2", "8", NULL);
    CHECK(rc == DT_ERR_INVALID && strstr(dt_last_error(), "--channels2: model mlp has no conv channels") &&
              strstr(dt_last_error(), "--hidden1/--hidden2"),
          "mlp --channels2: %d '%s'", rc, dt_last_error());
    CHECK_ERR(parse(&o, err, sizeof err, "--model", "lenet", "--channels1", "8", NULL), DT_ERR_INVALID,
              "--channels1: model lenet has no conv channels");
    CHECK_ERR(parse(&o, err, sizeof err, "--model", "gpt", "--hidden2", "8", NULL), DT_ERR_INVALID,
              "--hidden2: model gpt has no hidden sizes");
    CHECK(strstr(dt_train_usage(), "--channels1 N --channels2 N"), "usage does not list --channels1/2");
}

/* dt_model_log_probs returns log-probabilities: each row's exp sums to 1, the
 * loss is the mean -log p(label); NULL before a forward. */
static void test_log_probs(void) {
    dt_model_config a;
    CHECK_OK(dt_model_config_default(&a, "mlp"));
    a.hidden1 = 8;
    a.hidden2 = 4;
    dt_model *m = NULL;
    CHECK_OK(dt_model_create(&a, &m));
    CHECK(dt_model_log_probs(m) == NULL, "outputs before a forward");
    float x[2 * 784];
    int32_t y[2] = {3, 7};
    for (int i = 0; i < 2 * 784; i++) x[i] = (float)(i % 13) / 13.0f;
    float loss = 0;
    CHECK_OK(dt_model_forward(m, x, y, 2, 1, &loss));
    const float *lp = dt_model_log_probs(m);
    double z0 = 0, z1 = 0;
    for (int k = 0; k < 10 && lp; k++) z0 += exp(lp[k]), z1 += exp(lp[10 + k]);
    CHECK(lp && fabs(z0 - 1) < 1e-5 && fabs(z1 - 1) < 1e-5 && fabs(-(lp[3] + lp[17]) / 2 - loss) < 1e-5,
          "log_probs rows sum to %g %g, loss %g", z0, z1, (double)loss);
    dt_model_free(m);
}

int main(void) {
    test_cnn_channels();
    test_trainer_flags();
    test_log_probs();
    return dt_test_finish("test_names");
}
