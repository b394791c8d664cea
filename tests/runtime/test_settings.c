/* runtime_settings: the reliability settings (reliability.h) on the standalone
 * backend: timeout default / DTRAIN_TIMEOUT / DTRAIN_TIMEOUT_S /
 * dt_set_timeout precedence and validation, DTRAIN_CHECK_COLLECTIVES parsing,
 * the DTRAIN_SHM_* and DTRAIN_TWO_LEVEL* settings, bad values refused by dt_init with a message
 * naming the variable. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include "testutil.h"

static void clear_env(void) {
    unsetenv("DTRAIN_TIMEOUT");
    unsetenv("DTRAIN_TIMEOUT_S");
    unsetenv("DTRAIN_CHECK_COLLECTIVES");
    unsetenv("DTRAIN_CHECK_INLINE_MAX");
    unsetenv("DTRAIN_SHM_ALLREDUCE");
    unsetenv("DTRAIN_SHM_MIN_BYTES");
    unsetenv("DTRAIN_SHM_CHUNK_BYTES");
    unsetenv("DTRAIN_SHM_STREAM_BYTES");
    unsetenv("DTRAIN_TWO_LEVEL");
    unsetenv("DTRAIN_TWO_LEVEL_MIN_BYTES");
}

/* dt_init + dt_finalize with the current environment; returns dt_init's status */
static int cycle(double *timeout, int *check) {
    int rc = dt_init();
    if (rc == DT_OK) {
        *timeout = dt_get_timeout();
        *check = dt_check_collectives_enabled();
        CHECK_OK(dt_finalize());
    }
    return rc;
}

int main(void) {
    setenv("DTRAIN_BACKEND", "void", 1);
    clear_env();
    double t = 0;
    int ck = -1;
    CHECK(dt_check_collectives_enabled() == 1, "check on by default before dt_init");
    CHECK_OK(cycle(&t, &ck));
    CHECK(t == 300 && ck == 1, "defaults: timeout %g (want 300), check %d (want 1)", t, ck);

    setenv("DTRAIN_TIMEOUT", "3.5", 1);
    CHECK_OK(cycle(&t, &ck));
    CHECK(t == 3.5, "DTRAIN_TIMEOUT=3.5 gave %g", t);
    setenv("DTRAIN_TIMEOUT_S", "7", 1);
    CHECK_OK(cycle(&t, &ck));
    CHECK(t == 3.5, "DTRAIN_TIMEOUT wins over DTRAIN_TIMEOUT_S: %g", t);
    unsetenv("DTRAIN_TIMEOUT");
    CHECK_OK(cycle(&t, &ck));
    CHECK(t == 7, "DTRAIN_TIMEOUT_S=7 gave %g", t);
    setenv("DTRAIN_TIMEOUT", "0", 1);
    CHECK_OK(cycle(&t, &ck));
    CHECK(t == 0, "DTRAIN_TIMEOUT=0 (disabled) gave %g", t);

    static const char *const bad_t[] = {"abc", "-1", "5s", "nan", "inf"};
    for (int i = 0; i < 5; i++) {
        setenv("DTRAIN_TIMEOUT", bad_t[i], 1);
        CHECK_ERR(dt_init(), DT_ERR_INVALID, "DTRAIN_TIMEOUT");
        CHECK(!dt_is_initialized(), "dt_init must fail cleanly for DTRAIN_TIMEOUT='%s'", bad_t[i]);
    }
    clear_env();

    static const char *const off[] = {"0", "false", "no", "OFF"}, *const on[] = {"1", "true", "yes", "On"};
    for (int i = 0; i < 4; i++) {
        setenv("DTRAIN_CHECK_COLLECTIVES", off[i], 1);
        CHECK(dt_check_collectives_enabled() == 0, "'%s' before dt_init", off[i]);
        CHECK_OK(cycle(&t, &ck));
        CHECK(ck == 0, "DTRAIN_CHECK_COLLECTIVES=%s gave %d", off[i], ck);
        setenv("DTRAIN_CHECK_COLLECTIVES", on[i], 1);
        CHECK_OK(cycle(&t, &ck));
        CHECK(ck == 1, "DTRAIN_CHECK_COLLECTIVES=%s gave %d", on[i], ck);
    }
    setenv("DTRAIN_CHECK_COLLECTIVES", "maybe", 1);
    CHECK_ERR(dt_init(), DT_ERR_INVALID, "DTRAIN_CHECK_COLLECTIVES='maybe'");
    clear_env();
    setenv("DTRAIN_CHECK_INLINE_MAX", "-5", 1);
    CHECK_ERR(dt_init(), DT_ERR_INVALID, "DTRAIN_CHECK_INLINE_MAX");
    setenv("DTRAIN_CHECK_INLINE_MAX", "0", 1);
    CHECK_OK(cycle(&t, &ck));
    clear_env();

    /* the shared-memory allreduce's settings (coll.h) */
    static const struct { const char *var, *val; int ok; } shm[] = {
        {"DTRAIN_SHM_ALLREDUCE", "0", 1}, {"DTRAIN_SHM_ALLREDUCE", "on", 1},
        {"DTRAIN_SHM_ALLREDUCE", "maybe", 0}, {"DTRAIN_SHM_MIN_BYTES", "0", 1},
        {"DTRAIN_SHM_MIN_BYTES", "65536", 1}, {"DTRAIN_SHM_MIN_BYTES", "-1", 0},
        {"DTRAIN_SHM_MIN_BYTES", "16k", 0}, {"DTRAIN_SHM_CHUNK_BYTES", "4096", 1},
        {"DTRAIN_SHM_CHUNK_BYTES", "1073741824", 1}, {"DTRAIN_SHM_CHUNK_BYTES", "4095", 0},
        {"DTRAIN_SHM_CHUNK_BYTES", "2147483648", 0}, {"DTRAIN_SHM_CHUNK_BYTES", "", 1},
        {"DTRAIN_SHM_STREAM_BYTES", "0", 1}, {"DTRAIN_SHM_STREAM_BYTES", "1e15", 1},
        {"DTRAIN_SHM_STREAM_BYTES", "-1", 0}, {"DTRAIN_SHM_STREAM_BYTES", "16M", 0},
        {"DTRAIN_TWO_LEVEL", "auto", 1}, {"DTRAIN_TWO_LEVEL", "AUTO", 1}, {"DTRAIN_TWO_LEVEL", "1", 1},
        {"DTRAIN_TWO_LEVEL", "off", 1}, {"DTRAIN_TWO_LEVEL", "", 1}, {"DTRAIN_TWO_LEVEL", "sometimes", 0},
        {"DTRAIN_TWO_LEVEL", "2", 0}, {"DTRAIN_TWO_LEVEL_MIN_BYTES", "0", 1},
        {"DTRAIN_TWO_LEVEL_MIN_BYTES", "1048576", 1}, {"DTRAIN_TWO_LEVEL_MIN_BYTES", "-1", 0},
        {"DTRAIN_TWO_LEVEL_MIN_BYTES", "64k", 0}};
    for (size_t i = 0; i < sizeof shm / sizeof shm[0]; i++) {
        setenv(shm[i].var, shm[i].val, 1);
        if (shm[i].ok) CHECK_OK(cycle(&t, &ck));
        else {
            CHECK_ERR(dt_init(), DT_ERR_INVALID, shm[i].var);
            CHECK(!dt_is_initialized(), "dt_init must fail cleanly for %s='%s'", shm[i].var, shm[i].val);
        }
        clear_env();
    }

    /* dt_set_timeout: validation, precedence over the environment, any time */
    CHECK_ERR(dt_set_timeout(-1), DT_ERR_INVALID, "timeout");
    CHECK_ERR(dt_set_timeout(NAN), DT_ERR_INVALID, "timeout");
    CHECK_ERR(dt_set_timeout(INFINITY), DT_ERR_INVALID, "timeout");
    CHECK_OK(dt_set_timeout(42));
    setenv("DTRAIN_TIMEOUT", "3", 1);
    CHECK_OK(cycle(&t, &ck));
    CHECK(t == 42, "dt_set_timeout before dt_init wins over DTRAIN_TIMEOUT: %g", t);
    CHECK_OK(dt_init());
    CHECK_OK(dt_set_timeout(0.25));
    CHECK(dt_get_timeout() == 0.25, "dt_set_timeout after dt_init: %g", dt_get_timeout());
    CHECK_OK(dt_finalize());
    return dt_test_finish("runtime_settings");
}
