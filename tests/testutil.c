#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "testutil.h"
#include "comm/comm_internal.h" /* dt_fnv1a */
#include "dtrain/rng.h"
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <stdarg.h>

int dt_test_passed = 0, dt_test_failed = 0;
int dt_test_rank = -1;

void dt_test_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    dt_test_failed++;
    fprintf(stderr, "[rank %d] FAIL %s:%d: ", dt_test_rank, file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

static char g_tmpdir[256];

const char *dt_test_tmpdir(const char *prefix) {
    const char *tmp = getenv("TMPDIR");
    snprintf(g_tmpdir, sizeof g_tmpdir, "%s/%sXXXXXX", tmp && *tmp ? tmp : "/tmp", prefix);
    if (!mkdtemp(g_tmpdir)) {
        perror(g_tmpdir);
        g_tmpdir[0] = 0;
        return NULL;
    }
    return g_tmpdir;
}

const char *dt_test_path(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_tmpdir, name);
    return buf[k];
}

void dt_test_tmpdir_remove(void) {
    if (!g_tmpdir[0]) return;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmpdir);
    g_tmpdir[0] = 0;
}

int dt_test_finish(const char *name) {
    if (dt_test_rank >= 0 && (dt_test_rank == 0 || dt_test_failed))
        printf("%s rank %d: %d passed, %d failed\n", name, dt_test_rank, dt_test_passed, dt_test_failed);
    else if (dt_test_rank < 0) /* no dt_init: no rank */
        printf("%s: %d passed, %d failed\n", name, dt_test_passed, dt_test_failed);
    fflush(stdout);
    return dt_test_failed ? 1 : 0;
}

double dt_test_rel_err(const float *a, const float *b, size_t n) {
    double d = 0, m = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (e > d) d = e;
        if (fabs((double)b[i]) > m) m = fabs((double)b[i]);
    }
    return d / m;
}

int dt_test_msg_has(const char *alts) {
    const char *m = dt_last_error();
    char alt[128];
    while (*alts) {
        size_t k = 0;
        while (*alts && *alts != '|' && k + 1 < sizeof alt) alt[k++] = *alts++;
        alt[k] = '\0';
        if (*alts == '|') alts++;
        size_t al = strlen(alt);
        for (const char *p = m; al && *p; p++) {
            size_t i = 0;
            while (i < al && p[i] && tolower((unsigned char)p[i]) == tolower((unsigned char)alt[i])) i++;
            if (i == al) return 1;
        }
    }
    return 0;
}

dt_comm *dt_test_solo_comm(void) {
    int N = dt_comm_size(dt_comm_world());
    if (N < 1) { CHECK(0, "no world communicator"); return NULL; }
    int *ranks = malloc(sizeof(int) * (size_t)N), *lens = malloc(sizeof(int) * (size_t)N);
    for (int i = 0; i < N; i++) { ranks[i] = i; lens[i] = 1; }
    dt_comm *solo = NULL;
    CHECK_OK(dt_comm_from_rank_list(ranks, lens, N, &solo));
    free(ranks);
    free(lens);
    return solo;
}

int dt_test_same_on_all(uint64_t h, dt_comm *comm) {
    long long hv = (long long)(h >> 1), v[2] = {hv, -hv}, mx[2]; /* max of both: equal everywhere */
    int rc = dt_allreduce(v, mx, 2, DT_I64, DT_MAX, comm);
    if (rc) return rc;
    return mx[0] == v[0] && mx[1] == v[1];
}

int dt_test_same_bits(const void *buf, size_t bytes, dt_comm *comm) {
    return dt_test_same_on_all(dt_fnv1a(DT_FNV_BASIS, buf, bytes), comm);
}

dt_model *dt_test_gpt(int L, int NH, int C, int T, int V, uint64_t seed, int device, int precision) {
    dt_model_config cfg;
    CHECK_OK(dt_model_config_default(&cfg, "gpt-demo"));
    cfg.seed = seed, cfg.device = device, cfg.precision = precision;
    cfg.n_layer = L, cfg.n_head = NH, cfg.n_embd = C, cfg.block_size = T, cfg.vocab_size = V;
    dt_model *m = NULL;
    CHECK_OK(dt_model_create(&cfg, &m));
    return m;
}

void dt_test_tokens(uint64_t seed, int V, int n, int32_t *x, int32_t *y) {
    dt_rng r;
    dt_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) x[i] = (int32_t)dt_rng_below(&r, (uint64_t)V);
    for (int i = 0; i < n; i++) y[i] = i + 1 < n ? x[i + 1] : x[0];
}
