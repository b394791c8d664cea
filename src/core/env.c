/* src/core/env.c - settings from the environment. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <strings.h>
#include "core/env.h"
#include "core/error.h"

int dt_env_bool(const char *var, int dflt, int *on) {
    static const char *const t[] = {"1", "true", "yes", "on"}, *const f[] = {"0", "false", "no", "off"};
    const char *v = getenv(var);
    *on = dflt;
    if (!v || !*v) return DT_OK;
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(v, t[i]) == 0) { *on = 1; return DT_OK; }
        if (strcasecmp(v, f[i]) == 0) { *on = 0; return DT_OK; }
    }
    return DT_ERR(DT_ERR_INVALID, "%s='%s' is not a boolean (expected 1/0, true/false, yes/no, on/off)", var, v);
}

int dt_env_number(const char *var, double lo, double hi, double *out, int *found) {
    const char *v = getenv(var);
    *found = 0;
    if (!v || !*v) return DT_OK;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    while (*end == ' ' || *end == '\t') end++;
    if (end == v || *end || errno || !isfinite(x) || x < lo || x > hi)
        return DT_ERR(DT_ERR_INVALID, "%s='%s' is not a number in [%g, %g]", var, v, lo, hi);
    *out = x;
    *found = 1;
    return DT_OK;
}
