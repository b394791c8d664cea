/* src/optim/grad.c - gradient helpers: squared L2 norm and in-place scaling. */
#include "dtrain/optim.h"

double dt_grad_sqnorm(const float *g, size_t n) {
    if (!g || n == 0) return 0.0;
    /* 8 independent partial sums over consecutive elements: vectorisable without
     * reassociation, so the result is identical whatever the compiler does. */
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += (double)g[i + k] * (double)g[i + k];
    for (int k = 0; i < n; i++, k++) acc[k] += (double)g[i] * (double)g[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static void scale(float *restrict g, size_t n, float s) {
    for (size_t i = 0; i < n; i++) g[i] *= s;
}

void dt_grad_scale(float *g, size_t n, float s) {
    if (!g || n == 0) return;
    scale(g, n, s);
}
