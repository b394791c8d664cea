/* tests/optim/test_optim_parity.c - dtrain optimizers vs PyTorch, and sharding.
 *
 * 1. Parity: tests/reference/fixtures/optim_ref.bin holds, for a 1000-element
 *    parameter vector and 3 gradient steps (per-step learning rates), the
 *    parameters and optimizer states PyTorch 1.13 produced after each step for
 *    SGD plain / momentum / nesterov + weight decay, Adam with and without
 *    weight decay, and AdamW (generator and format:
 *    tests/reference/torch_optim.py). We replay the same steps and compare
 *    every buffer after every step.
 *    Measure: for a buffer r (reference) and c (ours) of n floats,
 *        err = max_i |c_i - r_i| / max(|r_i|, mean_j |r_j|)
 *    i.e. the relative error, with the buffer's mean magnitude as the floor for
 *    elements near zero (where a parameter update cancels the old value, the
 *    rounding error is relative to the operands, not to the result).
 *    Required: err <= 1e-6. (PyTorch's CPU kernels use fused multiply-add,
 *    ours do not, so a few ulps of difference are expected and allowed.)
 * 2. Sharding: stepping the vector in pieces with one optimizer instance per
 *    piece (including an empty piece) is bit-for-bit equal to stepping it whole.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/optim.h"
#include "testutil.h"

#ifndef DT_FIXTURE_DIR
#define DT_FIXTURE_DIR "tests/reference/fixtures"
#endif

#define TOL 1e-6
#define NAME_LEN 32

typedef struct {
    const unsigned char *p, *end;
    int bad;
} reader;

static uint32_t rd_u32(reader *r) {
    if (r->end - r->p < 4) { r->bad = 1; return 0; }
    uint32_t v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 |
                 (uint32_t)r->p[3] << 24;
    r->p += 4;
    return v;
}
static int32_t rd_i32(reader *r) {
    uint32_t u = rd_u32(r);
    int32_t v;
    memcpy(&v, &u, 4);
    return v;
}
static float rd_f32(reader *r) {
    uint32_t u = rd_u32(r);
    float v;
    memcpy(&v, &u, 4);
    return v;
}
static double rd_f64(reader *r) {
    uint64_t lo = rd_u32(r), hi = rd_u32(r), u = lo | hi << 32;
    double v;
    memcpy(&v, &u, 8);
    return v;
}
static void rd_f32s(reader *r, float *out, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = rd_f32(r);
}
static void rd_name(reader *r, char *out) {
    if (r->end - r->p < NAME_LEN) { r->bad = 1; out[0] = 0; return; }
    memcpy(out, r->p, NAME_LEN);
    out[NAME_LEN - 1] = 0;
    r->p += NAME_LEN;
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); return NULL; }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    fclose(f);
    *len = n;
    return buf;
}

/* err as documented at the top; *exact counts bit-identical elements. */
static double rel_err(const float *c, const float *r, size_t n, size_t *exact) {
    double mean = 0.0;
    for (size_t i = 0; i < n; i++) mean += fabs((double)r[i]);
    mean /= (double)n;
    double worst = 0.0;
    *exact = 0;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&c[i], &r[i], sizeof(float)) == 0) (*exact)++;
        double den = fabs((double)r[i]) > mean ? fabs((double)r[i]) : mean;
        double e = den > 0 ? fabs((double)c[i] - (double)r[i]) / den : fabs((double)c[i]);
        if (!(e <= worst)) worst = e; /* NaN propagates as a failure */
    }
    return worst;
}

/* ---- sharding -------------------------------------------------------------- */

static void test_sharding(const dt_optim_config *cfg, const float *p0, float *const *grads,
                          const float *lrs, size_t n, int nsteps, const char *name) {
    /* pieces: [0, cut1), [cut1, cut1) (empty), [cut1, cut2), [cut2, n) */
    const size_t cut1 = n / 2 + 1, cut2 = n - 7;
    const size_t lo[4] = {0, cut1, cut1, cut2}, hi[4] = {cut1, cut1, cut2, n};
    float *whole = malloc(n * sizeof(float)), *parts = malloc(n * sizeof(float));
    dt_optim *w = NULL, *s[4] = {NULL, NULL, NULL, NULL};
    CHECK(whole && parts, "malloc");
    if (!whole || !parts) goto out;
    memcpy(whole, p0, n * sizeof(float));
    memcpy(parts, p0, n * sizeof(float));
    CHECK_OK(dt_optim_create(cfg, n, &w));
    for (int k = 0; k < 4; k++) CHECK_OK(dt_optim_create(cfg, hi[k] - lo[k], &s[k]));
    if (!w || !s[0] || !s[1] || !s[2] || !s[3]) goto out;
    /* a few more steps than the fixture, reusing its gradients */
    for (int step = 0; step < 2 * nsteps; step++) {
        const float *g = grads[step % nsteps];
        float lr = lrs[step % nsteps];
        CHECK_OK(dt_optim_step(w, whole, g, lr));
        for (int k = 0; k < 4; k++)
            CHECK_OK(dt_optim_step(s[k], parts + lo[k], g + lo[k], lr));
    }
    CHECK(memcmp(whole, parts, n * sizeof(float)) == 0, "%s: sharded params differ from whole",
          name);
    int ns = dt_optim_num_states(w);
    for (int i = 0; i < ns; i++) {
        const float *ws = dt_optim_state(w, i, NULL);
        int same = 1;
        for (int k = 0; k < 4; k++) {
            const float *ss = dt_optim_state(s[k], i, NULL);
            CHECK(ss != NULL, "%s: state %d of shard %d", name, i, k);
            if (ss && hi[k] > lo[k] &&
                memcmp(ws + lo[k], ss, (hi[k] - lo[k]) * sizeof(float)) != 0)
                same = 0;
        }
        CHECK(same, "%s: sharded state %d differs from whole", name, i);
    }
    for (int k = 0; k < 4; k++)
        CHECK(dt_optim_get_step(s[k]) == 2 * nsteps, "%s: shard %d step", name, k);
out:
    dt_optim_free(w);
    for (int k = 0; k < 4; k++) dt_optim_free(s[k]);
    free(whole);
    free(parts);
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : DT_FIXTURE_DIR "/optim_ref.bin";
    size_t len = 0;
    unsigned char *blob = slurp(path, &len);
    CHECK(blob != NULL, "cannot read fixture %s (generate it with tests/reference/torch_optim.py)",
          path);
    if (!blob) return dt_test_finish("optim_parity");
    reader r = {blob, blob + len, 0};

    CHECK(len >= 8 && memcmp(blob, "DTOPTREF", 8) == 0, "fixture magic");
    r.p += 8;
    uint32_t version = rd_u32(&r), n = rd_u32(&r), nsteps = rd_u32(&r), ncases = rd_u32(&r);
    CHECK(version == 1 && n > 16 && n < 1000000 && nsteps >= 1 && nsteps <= 16 && ncases >= 1,
          "fixture header: version %u n %u nsteps %u ncases %u", version, n, nsteps, ncases);
    if (r.bad || version != 1 || n <= 16 || n >= 1000000 || nsteps < 1 || nsteps > 16) {
        free(blob);
        return dt_test_finish("optim_parity");
    }
    float *p0 = malloc(n * sizeof(float)), *params = malloc(n * sizeof(float));
    float *ref = malloc(n * sizeof(float));
    float *grads[16] = {0};
    for (uint32_t k = 0; k < nsteps; k++) grads[k] = malloc(n * sizeof(float));
    rd_f32s(&r, p0, n);
    for (uint32_t k = 0; k < nsteps; k++) rd_f32s(&r, grads[k], n);

    double worst_all = 0.0;
    int cases_run = 0;
    for (uint32_t c = 0; c < ncases && !r.bad; c++) {
        char name[NAME_LEN];
        rd_name(&r, name);
        dt_optim_config cfg;
        int32_t kind = rd_i32(&r);
        CHECK_OK(dt_optim_config_default(&cfg, (dt_optim_kind)kind));
        cfg.weight_decay = rd_f64(&r);
        cfg.momentum = rd_f64(&r);
        cfg.nesterov = rd_i32(&r);
        cfg.beta1 = rd_f64(&r);
        cfg.beta2 = rd_f64(&r);
        cfg.eps = rd_f64(&r);
        float lrs[16];
        rd_f32s(&r, lrs, nsteps);
        cfg.lr = lrs[0];
        int32_t nstates = rd_i32(&r);
        char snames[2][NAME_LEN];
        CHECK(nstates >= 0 && nstates <= 2, "%s: nstates %d", name, nstates);
        if (nstates < 0 || nstates > 2 || r.bad) break;
        for (int i = 0; i < nstates && i < 2; i++) rd_name(&r, snames[i]);

        dt_optim *opt = NULL;
        CHECK_OK(dt_optim_create(&cfg, n, &opt));
        if (!opt) break;
        CHECK(dt_optim_num_states(opt) == nstates, "%s: %d states, torch has %d", name,
              dt_optim_num_states(opt), nstates);
        for (int i = 0; i < nstates && i < dt_optim_num_states(opt); i++) {
            const char *sn = NULL;
            dt_optim_state(opt, i, &sn);
            CHECK(sn && strcmp(sn, snames[i]) == 0, "%s: state %d named '%s', torch '%s'", name,
                  i, sn ? sn : "(null)", snames[i]);
        }
        memcpy(params, p0, n * sizeof(float));
        double worst = 0.0;
        size_t exact_sum = 0, total = 0;
        for (uint32_t k = 0; k < nsteps && !r.bad; k++) {
            CHECK_OK(dt_optim_step(opt, params, grads[k], lrs[k]));
            CHECK(dt_optim_get_step(opt) == (long)k + 1, "%s: step counter", name);
            for (int b = 0; b <= nstates; b++) {
                rd_f32s(&r, ref, n);
                if (r.bad) break;
                if (b > 0 && b - 1 >= dt_optim_num_states(opt)) continue;
                const float *mine = b == 0 ? params : dt_optim_state(opt, b - 1, NULL);
                size_t exact = 0;
                double e = rel_err(mine, ref, n, &exact);
                exact_sum += exact;
                total += n;
                CHECK(e <= TOL, "%s step %u %s: err %.3g > %.0e", name, k + 1,
                      b == 0 ? "params" : snames[b - 1], e, TOL);
                if (e > worst) worst = e;
            }
        }
        printf("  %-18s max err %.3g, %5.1f%% of values bit-identical to torch\n", name, worst,
               total ? 100.0 * (double)exact_sum / (double)total : 0.0);
        if (worst > worst_all) worst_all = worst;
        dt_optim_free(opt);

        test_sharding(&cfg, p0, grads, lrs, n, (int)nsteps, name);
        cases_run++;
    }
    CHECK(!r.bad, "fixture %s is truncated", path);
    CHECK(r.p == r.end, "fixture %s has %ld trailing bytes", path, (long)(r.end - r.p));
    CHECK(cases_run == (int)ncases && cases_run >= 6, "ran %d of %u cases", cases_run, ncases);
    printf("  overall max err %.3g (tolerance %.0e)\n", worst_all, TOL);

    for (uint32_t k = 0; k < nsteps; k++) free(grads[k]);
    free(p0);
    free(params);
    free(ref);
    free(blob);
    return dt_test_finish("optim_parity");
}
