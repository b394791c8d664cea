/* src/optim/optim.c - SGD / Adam / AdamW over one contiguous range of floats.
 *
 * The element-wise kernels mirror PyTorch's single-tensor implementations
 * (torch/optim/sgd.py, adam.py, adamw.py): each tensor op there becomes one
 * float32 expression here, in the same order, and the scalar coefficients are
 * computed in double (PyTorch computes them in Python floats) and rounded to
 * float once, as PyTorch does when it passes them to a kernel. Every kernel is
 * a single restrict-qualified loop with no cross-element dependency, so the
 * compiler can vectorise it and the result of an element never depends on its
 * position (sharding gives bit-identical results). */
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE__) || defined(_M_X64)
#include <xmmintrin.h>
#elif defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#include "core/device.h"
#include "core/error.h"
#include "dtrain/dtype.h"
#include "dtrain/optim.h"
#include "optim/optim_kernels.h"

#define DT_OPTIM_MAX_STATES 2

struct dt_optim {
    dt_optim_config cfg;
    size_t n;
    long step;
    int nstates;
    float *state[DT_OPTIM_MAX_STATES];
    const char *state_name[DT_OPTIM_MAX_STATES];
    dt_optim_range *nodecay; /* sorted, disjoint, in instance coordinates */
    int n_nodecay;
    size_t nodecay_elems;
    /* DT_DEVICE_CUDA: the state is device memory, updated by dk on stream */
    int device;
    void *stream;
    const dt_optim_kernels *dk;
};

/* ---- configuration ------------------------------------------------------ */

int dt_optim_config_default(dt_optim_config *cfg, dt_optim_kind kind) {
    if (!cfg) return DT_ERR(DT_ERR_INVALID, "cfg is NULL");
    if (kind != DT_OPTIM_SGD && kind != DT_OPTIM_ADAM && kind != DT_OPTIM_ADAMW)
        return DT_ERR(DT_ERR_INVALID, "unknown optimizer kind %d", (int)kind);
    memset(cfg, 0, sizeof *cfg);
    cfg->kind = kind;
    cfg->lr = 1e-3;
    cfg->weight_decay = kind == DT_OPTIM_ADAMW ? 1e-2 : 0.0;
    cfg->momentum = 0.0;
    cfg->nesterov = 0;
    cfg->beta1 = 0.9;
    cfg->beta2 = 0.999;
    cfg->eps = 1e-8;
    return DT_OK;
}

static int ieq(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
    return *a == *b;
}

int dt_optim_kind_parse(const char *name, dt_optim_kind *kind) {
    if (!name || !kind) return DT_ERR(DT_ERR_INVALID, "name or kind is NULL");
    if (ieq(name, "sgd")) *kind = DT_OPTIM_SGD;
    else if (ieq(name, "adam")) *kind = DT_OPTIM_ADAM;
    else if (ieq(name, "adamw")) *kind = DT_OPTIM_ADAMW;
    else return DT_ERR(DT_ERR_INVALID, "unknown optimizer '%s' (expected sgd, adam or adamw)", name);
    return DT_OK;
}

const char *dt_optim_kind_name(dt_optim_kind kind) {
    switch (kind) {
    case DT_OPTIM_SGD: return "sgd";
    case DT_OPTIM_ADAM: return "adam";
    case DT_OPTIM_ADAMW: return "adamw";
    default: return "?";
    }
}

int dt_optim_config_validate(const dt_optim_config *cfg) {
    if (!cfg) return DT_ERR(DT_ERR_INVALID, "cfg is NULL");
    const char *k = dt_optim_kind_name(cfg->kind);
    if (cfg->kind != DT_OPTIM_SGD && cfg->kind != DT_OPTIM_ADAM && cfg->kind != DT_OPTIM_ADAMW)
        return DT_ERR(DT_ERR_INVALID, "unknown optimizer kind %d", (int)cfg->kind);
    if (!isfinite(cfg->lr) || cfg->lr < 0.0)
        return DT_ERR(DT_ERR_INVALID, "%s: invalid learning rate lr=%g (must be finite and >= 0)",
                      k, cfg->lr);
    if (!isfinite(cfg->weight_decay) || cfg->weight_decay < 0.0)
        return DT_ERR(DT_ERR_INVALID, "%s: invalid weight_decay=%g (must be finite and >= 0)", k,
                      cfg->weight_decay);
    if (cfg->kind == DT_OPTIM_SGD) {
        if (!(cfg->momentum >= 0.0 && cfg->momentum < 1.0))
            return DT_ERR(DT_ERR_INVALID, "sgd: invalid momentum=%g (must be in [0, 1))",
                          cfg->momentum);
        if (cfg->nesterov != 0 && cfg->nesterov != 1)
            return DT_ERR(DT_ERR_INVALID, "sgd: nesterov=%d must be 0 or 1", cfg->nesterov);
        if (cfg->nesterov && cfg->momentum == 0.0)
            return DT_ERR(DT_ERR_INVALID, "sgd: nesterov requires momentum > 0 (momentum=0)");
    } else {
        if (!(cfg->beta1 >= 0.0 && cfg->beta1 < 1.0))
            return DT_ERR(DT_ERR_INVALID, "%s: invalid beta1=%g (must be in [0, 1))", k,
                          cfg->beta1);
        if (!(cfg->beta2 >= 0.0 && cfg->beta2 < 1.0))
            return DT_ERR(DT_ERR_INVALID, "%s: invalid beta2=%g (must be in [0, 1))", k,
                          cfg->beta2);
        if (!isfinite(cfg->eps) || cfg->eps <= 0.0)
            return DT_ERR(DT_ERR_INVALID, "%s: invalid eps=%g (must be finite and > 0)", k,
                          cfg->eps);
    }
    return DT_OK;
}

/* ---- lifetime and state access ------------------------------------------ */

/* n floats of zeroed state (at least one, so that dt_optim_state never
 * returns NULL), on the host or the instance's device */
static int state_alloc(dt_optim *o, size_t n, float **p) {
    size_t bytes = (n ? n : 1) * sizeof(float);
    if (!o->device) {
        *p = calloc(n ? n : 1, sizeof(float));
        return *p ? DT_OK : DT_ERR_NOMEM;
    }
    int rc = dt_dev()->dev_alloc(bytes, (void **)p);
    if (rc) return rc;
    rc = dt_dev()->memset_async(*p, 0, bytes, o->stream);
    return rc ? rc : dt_dev()->stream_sync(o->stream);
}

int dt_optim_create_on(const dt_optim_config *cfg, size_t n, int device, void *stream, dt_optim **out) {
    if (out) *out = NULL;
    if (!cfg || !out) return DT_ERR(DT_ERR_INVALID, "cfg or out is NULL");
    if (device != DT_DEVICE_CPU && device != DT_DEVICE_CUDA)
        return DT_ERR(DT_ERR_INVALID, "device %d is not DT_DEVICE_CPU or DT_DEVICE_CUDA", device);
    int rc = dt_optim_config_validate(cfg);
    if (rc != DT_OK) return rc;
    if (n > SIZE_MAX / sizeof(float) / DT_OPTIM_MAX_STATES)
        return DT_ERR(DT_ERR_INVALID, "n=%zu elements is too large", n);
    const dt_optim_kernels *dk = NULL;
    if (device == DT_DEVICE_CUDA && !(dk = dt_optim_kernels_device())) return DT_ERR_UNSUPPORTED;

    dt_optim *o = calloc(1, sizeof *o);
    if (!o) return DT_ERR(DT_ERR_NOMEM, "cannot allocate the optimizer");
    o->cfg = *cfg;
    o->n = n;
    o->device = device;
    o->stream = stream;
    o->dk = dk;
    if (cfg->kind == DT_OPTIM_SGD) {
        if (cfg->momentum != 0.0) {
            o->nstates = 1;
            o->state_name[0] = "momentum_buffer";
        }
    } else {
        o->nstates = 2;
        o->state_name[0] = "exp_avg";
        o->state_name[1] = "exp_avg_sq";
    }
    for (int i = 0; i < o->nstates; i++) {
        if ((rc = state_alloc(o, n, &o->state[i]))) {
            const char *name = o->state_name[i];
            char why[256];
            snprintf(why, sizeof why, "%s", rc == DT_ERR_NOMEM ? "out of memory" : dt_last_error());
            dt_optim_free(o);
            return DT_ERR(rc, "cannot allocate %s state '%s' of %zu floats%s: %s", dt_optim_kind_name(cfg->kind),
                          name, n, device ? " on the device" : "", why);
        }
    }
    *out = o;
    return DT_OK;
}

int dt_optim_create(const dt_optim_config *cfg, size_t n, dt_optim **out) {
    return dt_optim_create_on(cfg, n, DT_DEVICE_CPU, NULL, out);
}

int dt_optim_device(const dt_optim *opt) { return opt ? opt->device : DT_DEVICE_CPU; }

void dt_optim_free(dt_optim *opt) {
    if (!opt) return;
    for (int i = 0; i < DT_OPTIM_MAX_STATES; i++) {
        if (!opt->state[i]) continue;
        if (opt->device) dt_dev()->dev_free(opt->state[i]);
        else free(opt->state[i]);
    }
    free(opt->nodecay);
    free(opt);
}

static int cmp_range(const void *a, const void *b) {
    size_t x = ((const dt_optim_range *)a)->offset, y = ((const dt_optim_range *)b)->offset;
    return (x > y) - (x < y);
}

int dt_optim_set_no_decay(dt_optim *opt, size_t base, const dt_optim_range *ranges, int nranges) {
    if (!opt) return DT_ERR(DT_ERR_INVALID, "opt is NULL");
    if (nranges < 0 || (nranges > 0 && !ranges))
        return DT_ERR(DT_ERR_INVALID, "bad range list (nranges %d, ranges %p)", nranges, (const void *)ranges);
    dt_optim_range *all = malloc(sizeof *all * (size_t)(nranges ? nranges : 1));
    if (!all) return DT_ERR(DT_ERR_NOMEM, "out of memory for %d no-decay ranges", nranges);
    for (int i = 0; i < nranges; i++) {
        if (ranges[i].count > SIZE_MAX - ranges[i].offset) {
            free(all);
            return DT_ERR(DT_ERR_INVALID, "no-decay range %d [%zu, +%zu) overflows", i, ranges[i].offset,
                          ranges[i].count);
        }
        all[i] = ranges[i];
    }
    qsort(all, (size_t)nranges, sizeof *all, cmp_range);
    for (int i = 1; i < nranges; i++)
        if (all[i - 1].offset + all[i - 1].count > all[i].offset) {
            dt_optim_range a = all[i - 1], b = all[i];
            free(all);
            return DT_ERR(DT_ERR_INVALID, "no-decay ranges [%zu, +%zu) and [%zu, +%zu) overlap", a.offset, a.count,
                          b.offset, b.count);
        }
    /* keep the parts inside [base, base + n), in instance coordinates */
    int k = 0;
    size_t elems = 0, end = base + opt->n < base ? SIZE_MAX : base + opt->n;
    for (int i = 0; i < nranges; i++) {
        size_t a = all[i].offset, b = all[i].offset + all[i].count;
        if (a < base) a = base;
        if (b > end) b = end;
        if (a >= b) continue;
        all[k++] = (dt_optim_range){a - base, b - a};
        elems += b - a;
    }
    free(opt->nodecay);
    opt->nodecay = all;
    opt->n_nodecay = k;
    opt->nodecay_elems = elems;
    return DT_OK;
}

size_t dt_optim_no_decay_count(const dt_optim *opt) { return opt ? opt->nodecay_elems : 0; }

int dt_optim_reset(dt_optim *opt) {
    if (!opt) return DT_ERR(DT_ERR_INVALID, "opt is NULL");
    for (int i = 0; i < opt->nstates; i++) {
        if (!opt->device) {
            memset(opt->state[i], 0, opt->n * sizeof(float));
            continue;
        }
        int rc = dt_dev()->memset_async(opt->state[i], 0, opt->n * sizeof(float), opt->stream);
        if (rc) return rc;
    }
    opt->step = 0;
    return DT_OK;
}

const dt_optim_config *dt_optim_get_config(const dt_optim *opt) { return opt ? &opt->cfg : NULL; }

size_t dt_optim_numel(const dt_optim *opt) { return opt ? opt->n : 0; }

int dt_optim_num_states(const dt_optim *opt) {
    if (!opt) return DT_ERR(DT_ERR_INVALID, "opt is NULL");
    return opt->nstates;
}

float *dt_optim_state(dt_optim *opt, int i, const char **name) {
    if (!opt) {
        DT_ERR(DT_ERR_INVALID, "opt is NULL");
        return NULL;
    }
    if (i < 0 || i >= opt->nstates) {
        DT_ERR(DT_ERR_INVALID, "state index %d out of range: %s has %d state buffer(s)", i,
               dt_optim_kind_name(opt->cfg.kind), opt->nstates);
        return NULL;
    }
    if (name) *name = opt->state_name[i];
    return opt->state[i];
}

size_t dt_optim_state_bytes(const dt_optim *opt) {
    return opt ? (size_t)opt->nstates * opt->n * sizeof(float) : 0;
}

long dt_optim_get_step(const dt_optim *opt) {
    if (!opt) return DT_ERR(DT_ERR_INVALID, "opt is NULL");
    return opt->step;
}

int dt_optim_set_step(dt_optim *opt, long step) {
    if (!opt) return DT_ERR(DT_ERR_INVALID, "opt is NULL");
    if (step < 0) return DT_ERR(DT_ERR_INVALID, "step=%ld must be >= 0", step);
    opt->step = step;
    return DT_OK;
}

/* ---- kernels ------------------------------------------------------------- */

/* torch.optim.SGD, momentum == 0: p += -lr * (g + wd * p). */
static void sgd_plain(float *restrict p, const float *restrict g, size_t n, float lr, float wd) {
    for (size_t i = 0; i < n; i++) {
        float d = wd != 0.0f ? g[i] + wd * p[i] : g[i];
        p[i] = p[i] + -lr * d;
    }
}

/* First step with momentum: buf = d (torch.clone(d_p)), then the usual update. */
static void sgd_momentum_first(float *restrict p, const float *restrict g, float *restrict buf,
                               size_t n, float lr, float wd, float mom, int nesterov) {
    for (size_t i = 0; i < n; i++) {
        float d = wd != 0.0f ? g[i] + wd * p[i] : g[i];
        float b = d;
        buf[i] = b;
        float u = nesterov ? d + mom * b : b;
        p[i] = p[i] + -lr * u;
    }
}

static void sgd_momentum(float *restrict p, const float *restrict g, float *restrict buf, size_t n,
                         float lr, float wd, float mom, int nesterov) {
    for (size_t i = 0; i < n; i++) {
        float d = wd != 0.0f ? g[i] + wd * p[i] : g[i];
        float b = buf[i] * mom + d; /* dampening 0: alpha = 1 */
        buf[i] = b;
        float u = nesterov ? d + mom * b : b;
        p[i] = p[i] + -lr * u;
    }
}

/* Adam/AdamW, processed in cache-sized blocks of three loops each (the values
 * and the order of operations per element are those of one fused loop, so
 * results do not depend on block or shard boundaries):
 *   1. moments: p = p * decay (AdamW: 1 - lr * weight_decay, PyTorch's
 *      param.mul_; Adam: 1, exact), g' = g + l2 * p (Adam: weight_decay;
 *      AdamW: 0, skipped entirely as in PyTorch, so an inf/NaN parameter does
 *      not leak in through 0 * p), m and v updated; s = v;
 *   2. s = sqrt(s);
 *   3. p = p + (-step_size) * m / (s / sqrt(bc2) + eps).
 * Why the split: with the default -fmath-errno, GCC and Clang never vectorise a
 * loop that calls sqrtf (it may set errno), which made the fused loop ~4x
 * slower. Loops 1 and 3 auto-vectorise; loop 2 uses SSE / NEON square roots,
 * which are correctly rounded IEEE operations exactly like sqrtf. */
#define ADAM_BLOCK 512

static void adam_moments(float *restrict p, const float *restrict g, float *restrict m,
                         float *restrict v, float *restrict s, size_t n, float decay, float l2,
                         float b1, float c1, float b2, float c2) {
    for (size_t i = 0; i < n; i++) {
        float pi = p[i] * decay;
        float gi = l2 != 0.0f ? g[i] + l2 * pi : g[i];
        float mi = m[i] * b1 + c1 * gi;
        float vi = v[i] * b2 + c2 * gi * gi;
        p[i] = pi;
        m[i] = mi;
        v[i] = vi;
        s[i] = vi;
    }
}

static void sqrt_inplace(float *restrict x, size_t n) {
    size_t i = 0;
#if defined(__SSE__) || defined(_M_X64)
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(x + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
#elif defined(__aarch64__) && defined(__ARM_NEON)
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, vsqrtq_f32(vld1q_f32(x + i)));
#endif
    for (; i < n; i++) x[i] = sqrtf(x[i]);
}

static void adam_update(float *restrict p, const float *restrict m, const float *restrict s,
                        size_t n, float bc2_sqrt, float eps, float neg_step_size) {
    for (size_t i = 0; i < n; i++) {
        float denom = s[i] / bc2_sqrt + eps;
        p[i] = p[i] + neg_step_size * m[i] / denom;
    }
}

static void adam_kernel(float *p, const float *g, float *m, float *v, size_t n, float decay,
                        float l2, float b1, float c1, float b2, float c2, float bc2_sqrt,
                        float eps, float neg_step_size) {
    float s[ADAM_BLOCK];
    for (size_t i0 = 0; i0 < n; i0 += ADAM_BLOCK) {
        const size_t len = n - i0 < ADAM_BLOCK ? n - i0 : ADAM_BLOCK;
        adam_moments(p + i0, g + i0, m + i0, v + i0, s, len, decay, l2, b1, c1, b2, c2);
        sqrt_inplace(s, len);
        adam_update(p + i0, m + i0, s, len, bc2_sqrt, eps, neg_step_size);
    }
}

static int overlaps(const void *a, size_t an, const void *b, size_t bn) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + bn && y < x + an;
}

/* The update of elements [off, off + n) of one parameter group: with the
 * config's weight decay (decayed != 0) or without (a group with
 * weight_decay 0). */
static int step_piece(dt_optim *opt, float *params, const float *grads, float lr, size_t off, size_t n,
                      int decayed) {
    const dt_optim_config *c = &opt->cfg;
    const long t = opt->step + 1;
    const double wdd = decayed ? c->weight_decay : 0.0;
    /* PyTorch passes Python floats to float kernels: rounded once to float */
    const float wd = (float)wdd, mom = (float)c->momentum;
    if (c->kind == DT_OPTIM_SGD) {
        float *buf = c->momentum != 0.0 ? opt->state[0] + off : NULL;
        if (opt->device) return opt->dk->sgd(opt->stream, params, grads, buf, n, lr, wd, mom, c->nesterov, opt->step == 0);
        if (!buf)
            sgd_plain(params, grads, n, lr, wd);
        else if (opt->step == 0)
            sgd_momentum_first(params, grads, buf, n, lr, wd, mom, c->nesterov);
        else
            sgd_momentum(params, grads, buf, n, lr, wd, mom, c->nesterov);
    } else {
        const double b1 = c->beta1, b2 = c->beta2;
        const int adamw = c->kind == DT_OPTIM_ADAMW;
        const float decay = adamw ? (float)(1.0 - (double)lr * wdd) : 1.0f;
        const float l2 = adamw ? 0.0f : wd;
        const double bc1 = 1.0 - pow(b1, (double)t);
        const double bc2 = 1.0 - pow(b2, (double)t);
        const double step_size = (double)lr / bc1;
        float *m = opt->state[0] + off, *v = opt->state[1] + off;
        if (opt->device)
            return opt->dk->adam(opt->stream, params, grads, m, v, n, decay, l2, (float)b1, (float)(1.0 - b1),
                                 (float)b2, (float)(1.0 - b2), (float)sqrt(bc2), (float)c->eps, (float)-step_size);
        adam_kernel(params, grads, m, v, n, decay, l2, (float)b1, (float)(1.0 - b1), (float)b2, (float)(1.0 - b2),
                    (float)sqrt(bc2), (float)c->eps, (float)-step_size);
    }
    return DT_OK;
}

/* The update of elements [off, off + n) with the step counter's next t. */
static int step_range(dt_optim *opt, float *params, const float *grads, float lr, size_t off, size_t n) {
    if (!opt) return DT_ERR(DT_ERR_INVALID, "opt is NULL");
    const dt_optim_config *c = &opt->cfg;
    const char *k = dt_optim_kind_name(c->kind);
    if (off > opt->n || n > opt->n - off)
        return DT_ERR(DT_ERR_INVALID, "%s: range [%zu, +%zu) outside the instance's %zu elements", k, off, n, opt->n);
    if (n > 0 && (!params || !grads))
        return DT_ERR(DT_ERR_INVALID, "%s: params or grads is NULL (n=%zu)", k, n);
    if (!isfinite(lr) || lr < 0.0f)
        return DT_ERR(DT_ERR_INVALID, "%s: invalid learning rate lr=%g (must be finite and >= 0)",
                      k, (double)lr);
    if (n > 0 && overlaps(params, n * sizeof(float), grads, n * sizeof(float)))
        return DT_ERR(DT_ERR_INVALID, "%s: params and grads overlap", k);
    if (opt->step == LONG_MAX)
        return DT_ERR(DT_ERR_INVALID, "%s: step counter overflow", k);

    /* the pieces of [off, off + n) alternate between the decayed group and
     * the no-decay ranges (sorted): each piece is one kernel call */
    size_t pos = off, end = off + n;
    int r = 0;
    while (r < opt->n_nodecay && opt->nodecay[r].offset + opt->nodecay[r].count <= pos) r++;
    while (pos < end) {
        size_t stop = end;
        int decayed = 1;
        if (r < opt->n_nodecay && opt->nodecay[r].offset <= pos) {
            decayed = 0;
            size_t re = opt->nodecay[r].offset + opt->nodecay[r].count;
            if (re < stop) stop = re;
            r++;
        } else if (r < opt->n_nodecay && opt->nodecay[r].offset < stop) {
            stop = opt->nodecay[r].offset;
        }
        int rc = step_piece(opt, params + (pos - off), grads + (pos - off), lr, pos, stop - pos, decayed);
        if (rc) return rc;
        pos = stop;
    }
    return DT_OK;
}

int dt_optim_step(dt_optim *opt, float *params, const float *grads, float lr) {
    int rc = step_range(opt, params, grads, lr, 0, opt ? opt->n : 0);
    if (rc) return rc;
    opt->step++;
    return DT_OK;
}

int dt_optim_step_range(dt_optim *opt, float *params, const float *grads, float lr, size_t offset,
                        size_t count) {
    return step_range(opt, params, grads, lr, offset, count);
}

int dt_optim_step_finish(dt_optim *opt) {
    if (!opt) return DT_ERR(DT_ERR_INVALID, "opt is NULL");
    if (opt->step == LONG_MAX) return DT_ERR(DT_ERR_INVALID, "%s: step counter overflow", dt_optim_kind_name(opt->cfg.kind));
    opt->step++;
    return DT_OK;
}

/* ---- gradient helpers where the state lives ---------------------------------------- */

int dt_optim_grad_sqnorm(const dt_optim *opt, const float *g, size_t n, double *out) {
    if (!opt || !out || (n && !g)) return DT_ERR(DT_ERR_INVALID, "NULL opt, out or gradients");
    if (!opt->device) {
        *out = dt_grad_sqnorm(g, n);
        return DT_OK;
    }
    *out = 0.0;
    return n ? opt->dk->sqnorm(opt->stream, g, n, out) : DT_OK;
}

int dt_optim_grad_scale(const dt_optim *opt, float *g, size_t n, float s) {
    if (!opt || (n && !g)) return DT_ERR(DT_ERR_INVALID, "NULL opt or gradients");
    if (!opt->device) {
        dt_grad_scale(g, n, s);
        return DT_OK;
    }
    return n ? opt->dk->scale(opt->stream, g, n, s) : DT_OK;
}
int dt_optim_params_to_bf16(const dt_optim *opt, uint16_t *dst, const float *src, size_t n) {
    if (!opt || (n && (!dst || !src))) return DT_ERR(DT_ERR_INVALID, "NULL opt, dst or src");
    if (!opt->device) {
        for (size_t i = 0; i < n; i++) dst[i] = dt_f32_to_bf16(src[i]);
        return DT_OK;
    }
    return n ? opt->dk->to_bf16(opt->stream, dst, src, n) : DT_OK;
}

int dt_optim_grad_add(const dt_optim *opt, float *g, const float *src, size_t n) {
    if (!opt || (n && (!g || !src))) return DT_ERR(DT_ERR_INVALID, "NULL opt or gradients");
    if (!opt->device) {
        for (size_t i = 0; i < n; i++) g[i] += src[i];
        return DT_OK;
    }
    return n ? opt->dk->add(opt->stream, g, src, n) : DT_OK;
}
