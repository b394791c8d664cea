/* tests/optim/optim_coef.h - the per-step coefficients of the optimizer's
 * element kernels (optim_kernels.h: dt_optim_kernels.adam / .sgd), computed
 * from a config as optim.c's step_piece computes them, for the tests that
 * compare the kernels and optim_math.h against dt_optim_step
 * (tests/optim/test_optim_math.c, tests/gpu/test_gpt_kernels.c). */
#ifndef DT_TEST_OPTIM_COEF_H
#define DT_TEST_OPTIM_COEF_H

#include <math.h>
#include "dtrain/optim.h"

typedef struct optim_coef {
    /* adam */
    float decay, l2, b1, c1, b2, c2, bc2_sqrt, eps, neg_step;
    /* sgd */
    float lr, wd, mom;
    int nesterov, first;
} optim_coef;

/* step t (1 on the first), learning rate lr, weight decay applied or not */
static inline optim_coef optim_coef_at(const dt_optim_config *c, long t, float lr, int decayed) {
    optim_coef k;
    const double wdd = decayed ? c->weight_decay : 0.0;
    k.lr = lr;
    k.wd = (float)wdd;
    k.mom = (float)c->momentum;
    k.nesterov = c->nesterov;
    k.first = t == 1;
    const int adamw = c->kind == DT_OPTIM_ADAMW;
    k.decay = adamw ? (float)(1.0 - (double)lr * wdd) : 1.0f;
    k.l2 = adamw ? 0.0f : (float)wdd;
    k.b1 = (float)c->beta1;
    k.c1 = (float)(1.0 - c->beta1);
    k.b2 = (float)c->beta2;
    k.c2 = (float)(1.0 - c->beta2);
    k.bc2_sqrt = (float)sqrt(1.0 - pow(c->beta2, (double)t));
    k.eps = (float)c->eps;
    k.neg_step = (float)-((double)lr / (1.0 - pow(c->beta1, (double)t)));
    return k;
}

#endif
