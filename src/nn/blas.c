/* src/nn/blas.c - BLAS thread control and small shared numeric helpers. */
#include <cblas.h>
#include <pthread.h>
#include "dtrain/nn.h"
#include "core/error.h"
#include "nn/nn_internal.h"

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_default(void) { openblas_set_num_threads(1); }

void dt_nn_blas_init(void) { pthread_once(&blas_once, blas_default); }

int dt_set_num_threads(int n) {
    if (n < 1) return DT_ERR(DT_ERR_INVALID, "thread count %d must be >= 1", n);
    dt_nn_blas_init();
    openblas_set_num_threads(n);
    return DT_OK;
}

int dt_get_num_threads(void) {
    dt_nn_blas_init();
    return openblas_get_num_threads();
}

/* Eight independent partial sums: the compiler can keep them in one vector
 * register without reassociating anything. */
double dt_nn_sum_f64(const float *x, size_t n) {
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += (double)x[i + (size_t)k];
    double s = 0.0;
    for (; i < n; i++) s += (double)x[i];
    for (int k = 0; k < 8; k++) s += acc[k];
    return s;
}

double dt_nn_sumsq_centered_f64(const float *x, size_t n, double c) {
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            double d = (double)x[i + (size_t)k] - c;
            acc[k] += d * d;
        }
    double s = 0.0;
    for (; i < n; i++) {
        double d = (double)x[i] - c;
        s += d * d;
    }
    for (int k = 0; k < 8; k++) s += acc[k];
    return s;
}

double dt_nn_dot_f64(const float *a, const float *b, size_t n) {
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += (double)a[i + (size_t)k] * (double)b[i + (size_t)k];
    double s = 0.0;
    for (; i < n; i++) s += (double)a[i] * (double)b[i];
    for (int k = 0; k < 8; k++) s += acc[k];
    return s;
}

void dt_nn_sum_and_dot_centered_f64(const float *g, const float *x, size_t n, double c,
                                    double *sum, double *dot) {
    double a1[8] = {0, 0, 0, 0, 0, 0, 0, 0}, a2[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            double gv = (double)g[i + (size_t)k];
            a1[k] += gv;
            a2[k] += gv * ((double)x[i + (size_t)k] - c);
        }
    double s1 = 0.0, s2 = 0.0;
    for (; i < n; i++) {
        s1 += (double)g[i];
        s2 += (double)g[i] * ((double)x[i] - c);
    }
    for (int k = 0; k < 8; k++) {
        s1 += a1[k];
        s2 += a2[k];
    }
    *sum = s1;
    *dot = s2;
}
