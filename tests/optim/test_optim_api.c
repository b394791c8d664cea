/* tests/optim/test_optim_api.c - optimizer configuration, validation, state
 * access, checkpoint/restore, hand-computed updates and gradient helpers. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/dtype.h"
#include "dtrain/optim.h"
#include "testutil.h"

static int close_rel(double a, double b, double tol) {
    double d = fabs(a - b), s = fabs(b) > 1e-30 ? fabs(b) : 1.0;
    return d <= tol * s;
}

static void test_config(void) {
    dt_optim_config c;
    CHECK_OK(dt_optim_config_default(&c, DT_OPTIM_SGD));
    CHECK(c.kind == DT_OPTIM_SGD && c.lr == 1e-3 && c.momentum == 0.0 && c.nesterov == 0 &&
              c.weight_decay == 0.0, "sgd defaults");
    CHECK_OK(dt_optim_config_validate(&c));
    CHECK_OK(dt_optim_config_default(&c, DT_OPTIM_ADAM));
    CHECK(c.beta1 == 0.9 && c.beta2 == 0.999 && c.eps == 1e-8 && c.weight_decay == 0.0,
          "adam defaults");
    CHECK_OK(dt_optim_config_default(&c, DT_OPTIM_ADAMW));
    CHECK(c.beta1 == 0.9 && c.beta2 == 0.999 && c.eps == 1e-8 && c.weight_decay == 0.01,
          "adamw defaults");
    CHECK_ERR(dt_optim_config_default(&c, (dt_optim_kind)9), DT_ERR_INVALID, "unknown optimizer kind");
    CHECK_ERR(dt_optim_config_default(NULL, DT_OPTIM_SGD), DT_ERR_INVALID, "NULL");

    dt_optim_kind k = DT_OPTIM_ADAM;
    CHECK_OK(dt_optim_kind_parse("sgd", &k));
    CHECK(k == DT_OPTIM_SGD, "parse sgd");
    CHECK_OK(dt_optim_kind_parse("Adam", &k));
    CHECK(k == DT_OPTIM_ADAM, "parse Adam");
    CHECK_OK(dt_optim_kind_parse("ADAMW", &k));
    CHECK(k == DT_OPTIM_ADAMW, "parse ADAMW");
    CHECK_ERR(dt_optim_kind_parse("rmsprop", &k), DT_ERR_INVALID, "unknown optimizer 'rmsprop'");
    CHECK_ERR(dt_optim_kind_parse("adamww", &k), DT_ERR_INVALID, "expected sgd, adam or adamw");
    CHECK_ERR(dt_optim_kind_parse(NULL, &k), DT_ERR_INVALID, "NULL");
    CHECK(strcmp(dt_optim_kind_name(DT_OPTIM_SGD), "sgd") == 0 &&
              strcmp(dt_optim_kind_name(DT_OPTIM_ADAM), "adam") == 0 &&
              strcmp(dt_optim_kind_name(DT_OPTIM_ADAMW), "adamw") == 0 &&
              strcmp(dt_optim_kind_name((dt_optim_kind)5), "?") == 0, "kind names");
}

static void test_validate(void) {
    dt_optim_config c;
    dt_optim *o = (dt_optim *)&c; /* must be reset to NULL by a failing create */

    dt_optim_config_default(&c, DT_OPTIM_SGD);
    c.lr = -0.1f;
    CHECK_ERR(dt_optim_config_validate(&c), DT_ERR_INVALID, "sgd: invalid learning rate lr=-0.1");
    CHECK_ERR(dt_optim_create(&c, 10, &o), DT_ERR_INVALID, "lr=-0.1");
    CHECK(o == NULL, "create failure sets *out = NULL");
    c.lr = NAN;
    CHECK_ERR(dt_optim_config_validate(&c), DT_ERR_INVALID, "learning rate");
    c.lr = 0.0f; /* lr 0 is allowed */
    CHECK_OK(dt_optim_config_validate(&c));
    c.momentum = 1.0f;
    CHECK_ERR(dt_optim_config_validate(&c), DT_ERR_INVALID, "momentum=1 (must be in [0, 1))");
    c.momentum = -0.5f;
    CHECK_ERR(dt_optim_config_validate(&c), DT_ERR_INVALID, "momentum=-0.5");
    c.momentum = 0.0f;
    c.nesterov = 1;
    CHECK_ERR(dt_optim_config_validate(&c), DT_ERR_INVALID, "nesterov requires momentum > 0");
    c.nesterov = 2;
    c.momentum = 0.9f;
    CHECK_ERR(dt_optim_config_validate(&c), DT_ERR_INVALID, "nesterov=2");
    c.nesterov = 1;
    CHECK_OK(dt_optim_config_validate(&c));
    c.weight_decay = -1e-4f;
    CHECK_ERR(dt_optim_config_validate(&c), DT_ERR_INVALID, "weight_decay=-0.0001");
    c.weight_decay = 0.0f;
    c.beta1 = 5.0f; /* Adam fields are ignored for SGD */
    c.eps = -1.0f;
    CHECK_OK(dt_optim_config_validate(&c));

    dt_optim_config_default(&c, DT_OPTIM_ADAM);
    c.momentum = 7.0f; /* SGD fields are ignored for Adam */
    CHECK_OK(dt_optim_config_validate(&c));
    c.beta1 = 1.0f;
    CHECK_ERR(dt_optim_config_validate(&c), DT_ERR_INVALID, "adam: invalid beta1=1");
    c.beta1 = 0.0f; /* allowed */
    CHECK_OK(dt_optim_config_validate(&c));
    c.beta2 = -0.1f;
    CHECK_ERR(dt_optim_config_validate(&c), DT_ERR_INVALID, "invalid beta2=-0.1");
    c.beta2 = NAN;
    CHECK_ERR(dt_optim_config_validate(&c), DT_ERR_INVALID, "beta2");
    c.beta2 = 0.999f;
    c.eps = 0.0f;
    CHECK_ERR(dt_optim_config_validate(&c), DT_ERR_INVALID, "invalid eps=0");
    c.eps = INFINITY;
    CHECK_ERR(dt_optim_config_validate(&c), DT_ERR_INVALID, "eps=inf");
    dt_optim_config_default(&c, DT_OPTIM_ADAMW);
    c.weight_decay = INFINITY;
    CHECK_ERR(dt_optim_create(&c, 4, &o), DT_ERR_INVALID, "adamw: invalid weight_decay=inf");
    c.weight_decay = 0.01f;
    c.kind = (dt_optim_kind)3;
    CHECK_ERR(dt_optim_config_validate(&c), DT_ERR_INVALID, "unknown optimizer kind 3");
    CHECK_ERR(dt_optim_config_validate(NULL), DT_ERR_INVALID, "NULL");
    CHECK_ERR(dt_optim_create(NULL, 4, &o), DT_ERR_INVALID, "NULL");
    dt_optim_config_default(&c, DT_OPTIM_SGD);
    CHECK_ERR(dt_optim_create(&c, 4, NULL), DT_ERR_INVALID, "NULL");
}

static void test_states(void) {
    dt_optim_config c;
    dt_optim *o = NULL;
    const char *name = NULL;

    dt_optim_config_default(&c, DT_OPTIM_SGD);
    CHECK_OK(dt_optim_create(&c, 100, &o));
    CHECK(dt_optim_num_states(o) == 0 && dt_optim_state_bytes(o) == 0 && dt_optim_numel(o) == 100,
          "plain sgd has no state");
    dt_clear_error();
    CHECK(dt_optim_state(o, 0, &name) == NULL && strstr(dt_last_error(), "out of range"),
          "state 0 of plain sgd: '%s'", dt_last_error());
    CHECK(dt_optim_get_config(o) && dt_optim_get_config(o)->kind == DT_OPTIM_SGD, "get_config");
    dt_optim_free(o);

    c.momentum = 0.9f;
    CHECK_OK(dt_optim_create(&c, 100, &o));
    CHECK(dt_optim_num_states(o) == 1 && dt_optim_state_bytes(o) == 400, "momentum sgd: 1 state");
    float *b = dt_optim_state(o, 0, &name);
    CHECK(b && name && strcmp(name, "momentum_buffer") == 0, "momentum_buffer");
    CHECK(b && b[0] == 0.0f && b[99] == 0.0f, "state starts at zero");
    CHECK(dt_optim_state(o, 1, NULL) == NULL, "state 1 out of range");
    CHECK(dt_optim_state(o, -1, NULL) == NULL, "state -1 out of range");
    dt_optim_free(o);

    dt_optim_config_default(&c, DT_OPTIM_ADAMW);
    CHECK_OK(dt_optim_create(&c, 100, &o));
    CHECK(dt_optim_num_states(o) == 2 && dt_optim_state_bytes(o) == 800, "adamw: 2 states");
    CHECK(dt_optim_state(o, 0, &name) && strcmp(name, "exp_avg") == 0, "exp_avg");
    CHECK(dt_optim_state(o, 1, &name) && strcmp(name, "exp_avg_sq") == 0, "exp_avg_sq");
    CHECK(dt_optim_get_step(o) == 0, "step starts at 0");
    CHECK_OK(dt_optim_set_step(o, 41));
    CHECK(dt_optim_get_step(o) == 41, "set_step");
    CHECK_ERR(dt_optim_set_step(o, -1), DT_ERR_INVALID, "step=-1 must be >= 0");
    dt_optim_state(o, 1, NULL)[5] = 3.0f;
    CHECK_OK(dt_optim_reset(o));
    CHECK(dt_optim_get_step(o) == 0 && dt_optim_state(o, 1, NULL)[5] == 0.0f, "reset");
    dt_optim_free(o);

    /* empty shard */
    CHECK_OK(dt_optim_create(&c, 0, &o));
    CHECK(dt_optim_numel(o) == 0 && dt_optim_state_bytes(o) == 0, "empty shard");
    CHECK(dt_optim_state(o, 0, NULL) != NULL, "empty shard state pointer is not NULL");
    CHECK_OK(dt_optim_step(o, NULL, NULL, 0.1f));
    CHECK(dt_optim_get_step(o) == 1, "empty shard counts steps");
    dt_optim_free(o);

    CHECK(dt_optim_num_states(NULL) < 0 && dt_optim_get_step(NULL) < 0, "NULL opt");
    CHECK(dt_optim_state(NULL, 0, NULL) == NULL && dt_optim_numel(NULL) == 0 &&
              dt_optim_state_bytes(NULL) == 0 && dt_optim_get_config(NULL) == NULL, "NULL opt");
    CHECK_ERR(dt_optim_set_step(NULL, 1), DT_ERR_INVALID, "NULL");
    CHECK_ERR(dt_optim_reset(NULL), DT_ERR_INVALID, "NULL");
    dt_optim_free(NULL);
}

static void test_step_errors(void) {
    dt_optim_config c;
    dt_optim *o = NULL;
    float buf[8] = {1, 2, 3, 4, 5, 6, 7, 8}, g[4] = {1, 1, 1, 1};
    dt_optim_config_default(&c, DT_OPTIM_ADAM);
    CHECK_OK(dt_optim_create(&c, 4, &o));
    CHECK_ERR(dt_optim_step(NULL, buf, g, 0.1f), DT_ERR_INVALID, "NULL");
    CHECK_ERR(dt_optim_step(o, NULL, g, 0.1f), DT_ERR_INVALID, "params or grads is NULL");
    CHECK_ERR(dt_optim_step(o, buf, NULL, 0.1f), DT_ERR_INVALID, "params or grads is NULL");
    CHECK_ERR(dt_optim_step(o, buf, g, -0.5f), DT_ERR_INVALID, "adam: invalid learning rate lr=-0.5");
    CHECK_ERR(dt_optim_step(o, buf, g, INFINITY), DT_ERR_INVALID, "lr=inf");
    CHECK_ERR(dt_optim_step(o, buf, buf, 0.1f), DT_ERR_INVALID, "params and grads overlap");
    CHECK_ERR(dt_optim_step(o, buf, buf + 3, 0.1f), DT_ERR_INVALID, "overlap");
    CHECK(buf[0] == 1 && buf[3] == 4 && dt_optim_get_step(o) == 0 &&
              dt_optim_state(o, 0, NULL)[0] == 0.0f, "failed steps modify nothing");
    CHECK_OK(dt_optim_step(o, buf, buf + 4, 0.1f)); /* adjacent is fine */
    CHECK(dt_optim_get_step(o) == 1, "step counted");
    dt_optim_free(o);
}

/* Small cases worked out by hand (float results compared to 1e-6 relative). */
static void test_hand(void) {
    dt_optim_config c;
    dt_optim *o = NULL;

    /* plain SGD: p -= lr * g */
    float p[3] = {1.0f, 2.0f, -3.0f};
    const float g1[3] = {0.5f, -1.0f, 2.0f}, g2[3] = {1.0f, 1.0f, -1.0f};
    dt_optim_config_default(&c, DT_OPTIM_SGD);
    CHECK_OK(dt_optim_create(&c, 3, &o));
    CHECK_OK(dt_optim_step(o, p, g1, 0.1f));
    CHECK(close_rel(p[0], 0.95, 1e-6) && close_rel(p[1], 2.1, 1e-6) && close_rel(p[2], -3.2, 1e-6),
          "sgd: %g %g %g", p[0], p[1], p[2]);
    dt_optim_free(o);

    /* momentum 0.9, wd 0.5: d1 = g1 + 0.5 p0 = [1, 0, 0.5]; buf = d1;
     * p1 = p0 - 0.1 d1 = [0.9, 2, -3.05];
     * d2 = g2 + 0.5 p1 = [1.45, 2, -2.525]; buf = 0.9 [1, 0, 0.5] + d2 = [2.35, 2, -2.075];
     * p2 = p1 - 0.1 buf = [0.665, 1.8, -2.8425] */
    float q[3] = {1.0f, 2.0f, -3.0f};
    c.momentum = 0.9f;
    c.weight_decay = 0.5f;
    CHECK_OK(dt_optim_create(&c, 3, &o));
    CHECK_OK(dt_optim_step(o, q, g1, 0.1f));
    CHECK(close_rel(q[0], 0.9, 1e-6) && close_rel(q[1], 2.0, 1e-6) && close_rel(q[2], -3.05, 1e-6),
          "momentum step 1: %g %g %g", q[0], q[1], q[2]);
    CHECK_OK(dt_optim_step(o, q, g2, 0.1f));
    const float *b = dt_optim_state(o, 0, NULL);
    CHECK(close_rel(b[0], 2.35, 1e-6) && close_rel(b[1], 2.0, 1e-6) && close_rel(b[2], -2.075, 1e-6),
          "momentum buf: %g %g %g", b[0], b[1], b[2]);
    CHECK(close_rel(q[0], 0.665, 1e-6) && close_rel(q[1], 1.8, 1e-6) &&
              close_rel(q[2], -2.8425, 1e-6), "momentum step 2: %g %g %g", q[0], q[1], q[2]);
    /* set_step(0): the next step re-initialises the (non-zero) buffer from d */
    CHECK_OK(dt_optim_set_step(o, 0));
    float r[3] = {0.0f, 0.0f, 0.0f};
    CHECK_OK(dt_optim_step(o, r, g1, 1.0f));
    CHECK(b[0] == 0.5f && b[1] == -1.0f && b[2] == 2.0f && r[0] == -0.5f,
          "set_step(0) re-initialises the momentum buffer: %g %g %g", b[0], b[1], b[2]);
    dt_optim_free(o);

    /* nesterov, momentum 0.5, step 1: buf = g, update = g + 0.5 g = 1.5 g */
    float s[3] = {0.0f, 0.0f, 0.0f};
    dt_optim_config_default(&c, DT_OPTIM_SGD);
    c.momentum = 0.5f;
    c.nesterov = 1;
    CHECK_OK(dt_optim_create(&c, 3, &o));
    CHECK_OK(dt_optim_step(o, s, g1, 1.0f));
    CHECK(s[0] == -0.75f && s[1] == 1.5f && s[2] == -3.0f, "nesterov: %g %g %g", s[0], s[1], s[2]);
    dt_optim_free(o);

    /* Adam step 1: m_hat = g, v_hat = g^2, p -= lr * g / (|g| + eps) ~ lr * sign(g) */
    float a[3] = {1.0f, 2.0f, -3.0f};
    dt_optim_config_default(&c, DT_OPTIM_ADAM);
    CHECK_OK(dt_optim_create(&c, 3, &o));
    CHECK_OK(dt_optim_step(o, a, g1, 0.01f));
    CHECK(close_rel(a[0], 0.99, 1e-6) && close_rel(a[1], 2.01, 1e-6) && close_rel(a[2], -3.01, 1e-6),
          "adam step 1: %.9g %.9g %.9g", a[0], a[1], a[2]);
    CHECK(close_rel(dt_optim_state(o, 0, NULL)[2], 0.2, 1e-6) &&
              close_rel(dt_optim_state(o, 1, NULL)[2], 0.004, 1e-6), "adam moments %.9g %.9g",
          dt_optim_state(o, 0, NULL)[2], dt_optim_state(o, 1, NULL)[2]);
    dt_optim_free(o);

    /* AdamW step 1, wd 0.1, lr 0.01: p = p (1 - 0.001) - 0.01 sign(g) */
    float w[3] = {1.0f, 2.0f, -3.0f};
    dt_optim_config_default(&c, DT_OPTIM_ADAMW);
    c.weight_decay = 0.1f;
    CHECK_OK(dt_optim_create(&c, 3, &o));
    CHECK_OK(dt_optim_step(o, w, g1, 0.01f));
    CHECK(close_rel(w[0], 0.989, 1e-6) && close_rel(w[1], 2.008, 1e-6) &&
              close_rel(w[2], -3.007, 1e-6), "adamw step 1: %.9g %.9g %.9g", w[0], w[1], w[2]);
    dt_optim_free(o);
}

/* Checkpoint after 2 steps, restore into a fresh instance, continue: identical. */
static void test_checkpoint(dt_optim_kind kind, float momentum) {
    enum { N = 257 };
    dt_optim_config c;
    dt_optim_config_default(&c, kind);
    c.momentum = momentum;
    c.weight_decay = 0.01f;
    float pa[N], pb[N], g[4][N];
    for (int i = 0; i < N; i++) {
        pa[i] = pb[i] = sinf(0.1f * (float)i);
        for (int k = 0; k < 4; k++) g[k][i] = cosf(0.37f * (float)i + (float)k) * (float)(k + 1);
    }
    dt_optim *a = NULL, *b = NULL, *r = NULL;
    CHECK_OK(dt_optim_create(&c, N, &a));
    CHECK_OK(dt_optim_create(&c, N, &b));
    if (!a || !b) goto out;
    for (int k = 0; k < 4; k++) CHECK_OK(dt_optim_step(a, pa, g[k], 0.01f));
    for (int k = 0; k < 2; k++) CHECK_OK(dt_optim_step(b, pb, g[k], 0.01f));
    /* "save" b, destroy it, "load" into r */
    int ns = dt_optim_num_states(b);
    float saved[2][N];
    for (int i = 0; i < ns; i++) memcpy(saved[i], dt_optim_state(b, i, NULL), sizeof saved[i]);
    long step = dt_optim_get_step(b);
    dt_optim_free(b);
    CHECK_OK(dt_optim_create(&c, N, &r));
    if (!r) goto out;
    for (int i = 0; i < ns; i++) memcpy(dt_optim_state(r, i, NULL), saved[i], sizeof saved[i]);
    CHECK_OK(dt_optim_set_step(r, step));
    for (int k = 2; k < 4; k++) CHECK_OK(dt_optim_step(r, pb, g[k], 0.01f));
    CHECK(memcmp(pa, pb, sizeof pa) == 0, "%s: restored run differs", dt_optim_kind_name(kind));
    for (int i = 0; i < ns; i++)
        CHECK(memcmp(dt_optim_state(a, i, NULL), dt_optim_state(r, i, NULL), sizeof saved[i]) == 0,
              "%s: restored state %d differs", dt_optim_kind_name(kind), i);
out:
    dt_optim_free(a);
    dt_optim_free(r);
}

/* Sharding over several Adam blocks and odd cut points: bit-for-bit equal. */
static void test_sharding_large(dt_optim_kind kind) {
    enum { N = 5003, S = 3 };
    static float whole[N], parts[N], g[N];
    const size_t cut[S + 1] = {0, 1237, 1238, N}; /* includes a 1-element shard */
    dt_optim_config c;
    dt_optim_config_default(&c, kind);
    c.momentum = kind == DT_OPTIM_SGD ? 0.9 : 0.0;
    c.weight_decay = 0.02;
    dt_optim *w = NULL, *sh[S] = {NULL, NULL, NULL};
    CHECK_OK(dt_optim_create(&c, N, &w));
    for (int k = 0; k < S; k++) CHECK_OK(dt_optim_create(&c, cut[k + 1] - cut[k], &sh[k]));
    for (int i = 0; i < N; i++) whole[i] = parts[i] = cosf(0.013f * (float)i);
    for (int step = 0; step < 4 && w && sh[0] && sh[1] && sh[2]; step++) {
        for (int i = 0; i < N; i++) g[i] = sinf(0.7f * (float)i + (float)step) * (float)(i % 5);
        CHECK_OK(dt_optim_step(w, whole, g, 0.01f));
        for (int k = 0; k < S; k++)
            CHECK_OK(dt_optim_step(sh[k], parts + cut[k], g + cut[k], 0.01f));
    }
    CHECK(memcmp(whole, parts, sizeof whole) == 0, "%s: 3 shards == whole, bit for bit",
          dt_optim_kind_name(kind));
    dt_optim_free(w);
    for (int k = 0; k < S; k++) dt_optim_free(sh[k]);
}

/* dt_optim_step_range over pieces (visited last to first, as data-parallel
 * buckets are) + dt_optim_step_finish == dt_optim_step, bit for bit, params
 * and state, for every optimizer shape; and its errors. */
static void test_step_range(dt_optim_kind kind, float momentum, int nesterov) {
    enum { N = 4099, S = 4 };
    static float a[N], b[N], g[N];
    const size_t cut[S + 1] = {0, 1, 2048, 2049, N};
    dt_optim_config c;
    dt_optim_config_default(&c, kind);
    c.momentum = momentum;
    c.nesterov = nesterov;
    c.weight_decay = 0.01;
    dt_optim *whole = NULL, *ranged = NULL;
    CHECK_OK(dt_optim_create(&c, N, &whole));
    CHECK_OK(dt_optim_create(&c, N, &ranged));
    if (!whole || !ranged) return;
    for (int i = 0; i < N; i++) a[i] = b[i] = sinf(0.011f * (float)i);
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < N; i++) g[i] = cosf(0.3f * (float)i + (float)step) * (float)(1 + i % 3);
        CHECK_OK(dt_optim_step(whole, a, g, 0.02f));
        for (int k = S - 1; k >= 0; k--)
            CHECK_OK(dt_optim_step_range(ranged, b + cut[k], g + cut[k], 0.02f, cut[k], cut[k + 1] - cut[k]));
        CHECK(dt_optim_get_step(ranged) == step, "%s: step counter advanced before finish", dt_optim_kind_name(kind));
        CHECK_OK(dt_optim_step_finish(ranged));
    }
    CHECK(memcmp(a, b, sizeof a) == 0, "%s (momentum %g, nesterov %d): ranges == whole step, bit for bit",
          dt_optim_kind_name(kind), (double)momentum, nesterov);
    for (int i = 0; i < dt_optim_num_states(whole); i++)
        CHECK(memcmp(dt_optim_state(whole, i, NULL), dt_optim_state(ranged, i, NULL), sizeof(float) * N) == 0,
              "%s: state %d differs", dt_optim_kind_name(kind), i);
    CHECK(dt_optim_get_step(whole) == dt_optim_get_step(ranged), "step counters differ");
    CHECK_ERR(dt_optim_step_range(ranged, b, g, 0.02f, N - 1, 2), DT_ERR_INVALID, "outside");
    CHECK_ERR(dt_optim_step_range(ranged, b, g, 0.02f, N + 1, 0), DT_ERR_INVALID, "outside");
    CHECK_ERR(dt_optim_step_range(ranged, NULL, g, 0.02f, 0, 5), DT_ERR_INVALID, "NULL");
    CHECK_ERR(dt_optim_step_range(ranged, b, g, -1.0f, 0, 5), DT_ERR_INVALID, "learning rate");
    CHECK_ERR(dt_optim_step_range(NULL, b, g, 0.02f, 0, 5), DT_ERR_INVALID, "NULL");
    CHECK_ERR(dt_optim_step_finish(NULL), DT_ERR_INVALID, "NULL");
    CHECK_OK(dt_optim_step_range(ranged, b, g, 0.02f, N, 0)); /* empty range at the end */
    dt_optim_free(whole);
    dt_optim_free(ranged);
}

/* No-decay ranges: those elements get exactly the update of an instance
 * with weight_decay 0 (a PyTorch param group), the others that of the
 * config; shards given the same global list (with their base) and stepped
 * by ranges agree bit for bit with the whole; errors. */
static void test_no_decay(dt_optim_kind kind, float momentum) {
    enum { N = 3001, S = 3 };
    static float whole[N], parts[N], ref[N], g[N];
    const dt_optim_range nd[] = {{2000, 700}, {10, 5}, {1230, 20}, {1250, 1}}; /* unsorted; two touch */
    const size_t cut[S + 1] = {0, 1240, 2500, N};
    dt_optim_config c, c0;
    dt_optim_config_default(&c, kind);
    c.momentum = momentum;
    c.weight_decay = 0.1;
    c0 = c;
    c0.weight_decay = 0.0;
    dt_optim *w = NULL, *dec = NULL, *nodec = NULL, *sh[S] = {NULL, NULL, NULL};
    CHECK_OK(dt_optim_create(&c, N, &w));
    CHECK_OK(dt_optim_create(&c, N, &dec));
    CHECK_OK(dt_optim_create(&c0, N, &nodec));
    for (int k = 0; k < S; k++) CHECK_OK(dt_optim_create(&c, cut[k + 1] - cut[k], &sh[k]));
    if (!w || !dec || !nodec || !sh[0] || !sh[1] || !sh[2]) return;
    CHECK_OK(dt_optim_set_no_decay(w, 0, nd, 4));
    CHECK(dt_optim_no_decay_count(w) == 726, "no-decay elements %zu", dt_optim_no_decay_count(w));
    for (int k = 0; k < S; k++) CHECK_OK(dt_optim_set_no_decay(sh[k], cut[k], nd, 4));
    CHECK(dt_optim_no_decay_count(sh[0]) == 15 && dt_optim_no_decay_count(sh[1]) == 511 &&
              dt_optim_no_decay_count(sh[2]) == 200,
          "shards keep their parts: %zu %zu %zu", dt_optim_no_decay_count(sh[0]), dt_optim_no_decay_count(sh[1]),
          dt_optim_no_decay_count(sh[2]));
    static float a[N], b[N];
    for (int i = 0; i < N; i++) whole[i] = parts[i] = a[i] = b[i] = 0.5f + sinf(0.017f * (float)i);
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < N; i++) g[i] = cosf(0.29f * (float)i + (float)step) * (float)(1 + i % 4);
        CHECK_OK(dt_optim_step(w, whole, g, 0.05f));
        for (int k = S - 1; k >= 0; k--) /* by ranges, as data-parallel buckets */
            CHECK_OK(dt_optim_step_range(sh[k], parts + cut[k], g + cut[k], 0.05f, 0, cut[k + 1] - cut[k]));
        for (int k = 0; k < S; k++) CHECK_OK(dt_optim_step_finish(sh[k]));
        CHECK_OK(dt_optim_step(dec, a, g, 0.05f));
        CHECK_OK(dt_optim_step(nodec, b, g, 0.05f));
    }
    for (int i = 0; i < N; i++) {
        int in = 0;
        for (int r = 0; r < 4; r++) in |= (size_t)i >= nd[r].offset && (size_t)i < nd[r].offset + nd[r].count;
        ref[i] = in ? b[i] : a[i];
    }
    CHECK(memcmp(whole, ref, sizeof whole) == 0, "%s: no-decay elements as weight_decay 0, others decayed",
          dt_optim_kind_name(kind));
    CHECK(memcmp(a, b, sizeof a) != 0, "%s: the decay changes something", dt_optim_kind_name(kind));
    CHECK(memcmp(whole, parts, sizeof whole) == 0, "%s: shards == whole with no-decay ranges",
          dt_optim_kind_name(kind));
    /* errors; the list is unchanged */
    const dt_optim_range overlap[] = {{5, 10}, {14, 2}}, wrap[] = {{SIZE_MAX - 1, 5}};
    CHECK_ERR(dt_optim_set_no_decay(w, 0, overlap, 2), DT_ERR_INVALID, "overlap");
    CHECK_ERR(dt_optim_set_no_decay(w, 0, wrap, 1), DT_ERR_INVALID, "overflows");
    CHECK_ERR(dt_optim_set_no_decay(w, 0, NULL, 2), DT_ERR_INVALID, "bad range list");
    CHECK_ERR(dt_optim_set_no_decay(NULL, 0, nd, 1), DT_ERR_INVALID, "NULL");
    CHECK(dt_optim_no_decay_count(w) == 726, "unchanged after errors");
    CHECK_OK(dt_optim_set_no_decay(w, 0, NULL, 0));
    CHECK(dt_optim_no_decay_count(w) == 0, "cleared");
    dt_optim_free(w);
    dt_optim_free(dec);
    dt_optim_free(nodec);
    for (int k = 0; k < S; k++) dt_optim_free(sh[k]);
}

static void test_grad_helpers(void) {
    enum { N = 1001 };
    static float g[N];
    double ref = 0.0;
    for (int i = 0; i < N; i++) {
        g[i] = (float)(i % 17) * 0.25f - 2.0f;
        ref += (double)g[i] * (double)g[i];
    }
    CHECK(close_rel(dt_grad_sqnorm(g, N), ref, 1e-14), "sqnorm %.17g vs %.17g",
          dt_grad_sqnorm(g, N), ref);
    const float v34[2] = {3.0f, 4.0f};
    CHECK(dt_grad_sqnorm(v34, 2) == 25.0, "sqnorm [3,4]");
    CHECK(dt_grad_sqnorm(NULL, 0) == 0.0 && dt_grad_sqnorm(g, 0) == 0.0, "sqnorm empty");
    /* double accumulation: squares of 1e20 overflow float but not double */
    float big[10];
    for (int i = 0; i < 10; i++) big[i] = 1e20f;
    double bb = (double)1e20f * (double)1e20f * 10.0;
    CHECK(close_rel(dt_grad_sqnorm(big, 10), bb, 1e-14), "sqnorm big %g", dt_grad_sqnorm(big, 10));
    /* shards add up (not bit-for-bit: different partial-sum grouping) */
    double parts = dt_grad_sqnorm(g, 300) + dt_grad_sqnorm(g + 300, N - 300);
    CHECK(close_rel(parts, ref, 1e-14), "sharded sqnorm");

    dt_grad_scale(g, N, 0.5f);
    int ok = 1;
    for (int i = 0; i < N; i++) ok &= g[i] == ((float)(i % 17) * 0.25f - 2.0f) * 0.5f;
    CHECK(ok, "grad_scale");
    CHECK(close_rel(dt_grad_sqnorm(g, N), ref * 0.25, 1e-14), "sqnorm after scale");
    dt_grad_scale(NULL, 0, 2.0f);
    dt_grad_scale(g, 0, 2.0f);
    CHECK(g[1] == -0.875f, "scale n=0 is a no-op");

    /* dt_optim_grad_add: g += src where the instance's state lives (here the host) */
    dt_optim_config c;
    dt_optim *o = NULL;
    CHECK_OK(dt_optim_config_default(&c, DT_OPTIM_ADAMW));
    CHECK_OK(dt_optim_create(&c, 4, &o));
    float a[4] = {1.0f, -2.0f, 0.5f, 3.0f}, b[4] = {0.25f, 2.0f, -1.5f, 1e-8f};
    CHECK_OK(dt_optim_grad_add(o, a, b, 4));
    CHECK(a[0] == 1.25f && a[1] == 0.0f && a[2] == -1.0f && a[3] == 3.0f + 1e-8f, "grad_add: %g %g %g %g", a[0], a[1],
          a[2], a[3]);
    CHECK_OK(dt_optim_grad_add(o, a, a, 4)); /* src may be g itself */
    CHECK(a[0] == 2.5f && a[2] == -2.0f, "grad_add in place: %g %g", a[0], a[2]);
    CHECK_OK(dt_optim_grad_add(o, NULL, NULL, 0));
    CHECK_ERR(dt_optim_grad_add(NULL, a, b, 4), DT_ERR_INVALID, "NULL opt");
    CHECK_ERR(dt_optim_grad_add(o, a, NULL, 4), DT_ERR_INVALID, "dt_optim_grad_add");
    CHECK_ERR(dt_optim_grad_add(o, NULL, b, 4), DT_ERR_INVALID, "NULL opt or gradients");

    /* dt_optim_params_to_bf16: dt_f32_to_bf16's bits (round to nearest even;
     * ties both ways, a value past bf16's largest to infinity, NaN kept) */
    const float v[6] = {1.0f, 1.00390625f /* tie, even below */, 1.01171875f /* tie, even above */, -3.4e38f,
                        NAN, -0.0f};
    const uint16_t want[6] = {0x3f80, 0x3f80, 0x3f82, 0xff80, 0x7fc0, 0x8000};
    uint16_t out[7];
    memset(out, 0xa5, sizeof out);
    CHECK_OK(dt_optim_params_to_bf16(o, out, v, 6));
    for (int i = 0; i < 6; i++)
        CHECK(out[i] == want[i] && out[i] == dt_f32_to_bf16(v[i]), "params_to_bf16 [%d]: 0x%04x, want 0x%04x", i,
              out[i], want[i]);
    CHECK(out[6] == 0xa5a5, "params_to_bf16 wrote past n");
    CHECK_OK(dt_optim_params_to_bf16(o, NULL, NULL, 0));
    CHECK_ERR(dt_optim_params_to_bf16(NULL, out, v, 6), DT_ERR_INVALID, "NULL opt, dst or src");
    CHECK_ERR(dt_optim_params_to_bf16(o, NULL, v, 6), DT_ERR_INVALID, "dt_optim_params_to_bf16");
    CHECK_ERR(dt_optim_params_to_bf16(o, out, NULL, 6), DT_ERR_INVALID, "NULL opt, dst or src");
    dt_optim_free(o);
}

int main(void) {
    test_config();
    test_validate();
    test_states();
    test_step_errors();
    test_hand();
    test_checkpoint(DT_OPTIM_SGD, 0.9f);
    test_checkpoint(DT_OPTIM_ADAM, 0.0f);
    test_checkpoint(DT_OPTIM_ADAMW, 0.0f);
    test_sharding_large(DT_OPTIM_SGD);
    test_sharding_large(DT_OPTIM_ADAM);
    test_sharding_large(DT_OPTIM_ADAMW);
    test_step_range(DT_OPTIM_SGD, 0.0f, 0);
    test_step_range(DT_OPTIM_SGD, 0.9f, 0);
    test_step_range(DT_OPTIM_SGD, 0.9f, 1);
    test_step_range(DT_OPTIM_ADAM, 0.0f, 0);
    test_step_range(DT_OPTIM_ADAMW, 0.0f, 0);
    test_no_decay(DT_OPTIM_SGD, 0.9f);
    test_no_decay(DT_OPTIM_ADAM, 0.0f);
    test_no_decay(DT_OPTIM_ADAMW, 0.0f);
    test_grad_helpers();
    return dt_test_finish("optim_api");
}
