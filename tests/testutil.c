#include "testutil.h"
#include <math.h>
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

int dt_test_finish(const char *name) {
    if (dt_test_rank <= 0 || dt_test_failed)
        printf("%s%s%d: %d passed, %d failed\n", name, dt_test_rank >= 0 ? " rank " : "",
               dt_test_rank >= 0 ? dt_test_rank : 0, dt_test_passed, dt_test_failed);
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
