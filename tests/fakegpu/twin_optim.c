/* tests/fakegpu/twin_optim.c - the CPU twins of src/optim/cuda's kernels
 * (fakegpu.h): adam and sgd per element through optim_math.h (the kernels'
 * own functions: the same bits), scale, add, and the squared norm's two stages
 * in the kernels' exact order (a thread's strided sum in double, then the
 * block's halving tree), so that the fake gives the device's bits. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "fakegpu.h"
#include "optim/optim_math.h"

/* the kernels' block size for the squared norm (optim_cuda.cu) */
#define SQ_THREADS 256

#define DEV(var, i, bytes)                          \
    void *var = fk_dev_arg(l, (i), (bytes));         \
    if (!var) return cudaErrorIllegalAddress

static cudaError_t bad_geometry(const fk_launch *l, const char *what) {
    fprintf(stderr, "fakegpu: kernel %s: grid (%u,%u,%u) block (%u,%u,%u): %s\n", l->name, l->grid.x, l->grid.y,
            l->grid.z, l->block.x, l->block.y, l->block.z, what);
    return cudaErrorInvalidConfiguration;
}

/* dtk_adam(p, g, m, v, n, decay, l2, b1, c1, b2, c2, bc2_sqrt, eps, neg_step): grid-stride */
static cudaError_t adam(const fk_launch *l) {
    const size_t n = fk_size_arg(l, 4);
    DEV(p, 0, n * 4);
    DEV(g, 1, n * 4);
    DEV(m, 2, n * 4);
    DEV(v, 3, n * 4);
    float c[9];
    for (int i = 0; i < 9; i++) c[i] = fk_float_arg(l, 5 + i);
    for (size_t i = 0; i < n; i++)
        dt_adam_update((float *)p + i, ((const float *)g)[i], (float *)m + i, (float *)v + i, c[0], c[1], c[2], c[3],
                       c[4], c[5], c[6], c[7], c[8]);
    return cudaSuccess;
}

/* dtk_sgd(p, g, buf, n, lr, wd, mom, nesterov, first): grid-stride; buf NULL
 * when mom is 0 */
static cudaError_t sgd(const fk_launch *l) {
    const size_t n = fk_size_arg(l, 3);
    const float lr = fk_float_arg(l, 4), wd = fk_float_arg(l, 5), mom = fk_float_arg(l, 6);
    const int nesterov = fk_int_arg(l, 7), first = fk_int_arg(l, 8);
    DEV(p, 0, n * 4);
    DEV(g, 1, n * 4);
    float *buf = NULL, dummy = 0.0f;
    if (!fk_ptr_arg_is_null(l, 2) || mom != 0.0f) {
        if (!(buf = fk_dev_arg(l, 2, n * 4))) return cudaErrorIllegalAddress;
    }
    for (size_t i = 0; i < n; i++)
        dt_sgd_update((float *)p + i, ((const float *)g)[i], buf ? buf + i : &dummy, lr, wd, mom, nesterov, first);
    return cudaSuccess;
}

/* dtk_scale(g, n, s): grid-stride */
static cudaError_t scale(const fk_launch *l) {
    const size_t n = fk_size_arg(l, 1);
    const float s = fk_float_arg(l, 2);
    DEV(g, 0, n * 4);
    for (size_t i = 0; i < n; i++) ((float *)g)[i] *= s;
    return cudaSuccess;
}

/* dtk_add(g, src, n): grid-stride; src may be g */
static cudaError_t add(const fk_launch *l) {
    const size_t n = fk_size_arg(l, 2);
    DEV(g, 0, n * 4);
    DEV(src, 1, n * 4);
    for (size_t i = 0; i < n; i++) ((float *)g)[i] += ((const float *)src)[i];
    return cudaSuccess;
}

/* the block's halving tree over sh[SQ_THREADS] */
static double tree(double *sh) {
    for (int s = SQ_THREADS / 2; s > 0; s >>= 1)
        for (int t = 0; t < s; t++) sh[t] += sh[t + s];
    return sh[0];
}

/* dtk_sqnorm_part(part, g, n): blocks of SQ_THREADS; thread t of block b sums
 * g[i]^2 over i = b*SQ_THREADS + t + k*grid*SQ_THREADS */
static cudaError_t sqnorm_part(const fk_launch *l) {
    const size_t n = fk_size_arg(l, 2);
    if (l->block.x != SQ_THREADS || l->block.y != 1 || l->block.z != 1 || l->grid.y != 1 || l->grid.z != 1)
        return bad_geometry(l, "the squared norm's blocks are 256 x 1 x 1, its grid 1-D");
    const unsigned nb = l->grid.x;
    DEV(part, 0, (size_t)nb * sizeof(double));
    DEV(gv, 1, n * 4);
    const float *g = gv;
    const size_t step = (size_t)nb * SQ_THREADS;
    double sh[SQ_THREADS];
    for (unsigned b = 0; b < nb; b++) {
        for (int t = 0; t < SQ_THREADS; t++) {
            double a = 0.0;
            for (size_t i = (size_t)b * SQ_THREADS + (size_t)t; i < n; i += step) {
                const double x = (double)g[i];
                a += x * x;
            }
            sh[t] = a;
        }
        ((double *)part)[b] = tree(sh);
    }
    return cudaSuccess;
}

/* dtk_sqnorm_final(part, nb): one block; part[nb] = the tree over part[0, nb) */
static cudaError_t sqnorm_final(const fk_launch *l) {
    const int nb = fk_int_arg(l, 1);
    if (l->block.x != SQ_THREADS || l->block.y != 1 || l->block.z != 1 || l->grid.x != 1 || l->grid.y != 1 ||
        l->grid.z != 1)
        return bad_geometry(l, "the squared norm's final stage is one block of 256 x 1 x 1");
    DEV(pv, 0, ((size_t)nb + 1) * sizeof(double));
    double *part = pv, sh[SQ_THREADS];
    for (int t = 0; t < SQ_THREADS; t++) {
        double a = 0.0;
        for (int i = t; i < nb; i += SQ_THREADS) a += part[i];
        sh[t] = a;
    }
    part[nb] = tree(sh);
    return cudaSuccess;
}

const fk_twin fk_twins_optim[] = {
    {"dtk_adam", adam},
    {"dtk_sgd", sgd},
    {"dtk_scale", scale},
    {"dtk_add", add},
    {"dtk_to_bf16", fk_twin_cast_f32_bf16}, /* (dst, src, n): the gpt cast's twin */
    {"dtk_sqnorm_part", sqnorm_part},
    {"dtk_sqnorm_final", sqnorm_final},
    {NULL, NULL},
};
