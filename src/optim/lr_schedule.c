/* src/optim/lr_schedule.c - warm-up + constant / cosine learning-rate schedule.
 * The formula is documented with dt_lr_at in include/dtrain/optim.h. */
#include <math.h>

#include "core/error.h"
#include "dtrain/optim.h"

void dt_lr_schedule_default(dt_lr_schedule *s, float base_lr) {
    if (!s) return;
    s->base_lr = base_lr;
    s->min_lr = 0.0f;
    s->warmup_steps = 0;
    s->warmup_start = 0.0f;
    s->total_steps = 0;
    s->decay = DT_LR_CONSTANT;
}

int dt_lr_schedule_validate(const dt_lr_schedule *s) {
    if (!s) return DT_ERR(DT_ERR_INVALID, "schedule is NULL");
    if (!isfinite(s->base_lr) || s->base_lr < 0.0f)
        return DT_ERR(DT_ERR_INVALID, "base_lr=%g must be finite and >= 0", (double)s->base_lr);
    if (!(s->min_lr >= 0.0f && s->min_lr <= s->base_lr))
        return DT_ERR(DT_ERR_INVALID, "min_lr=%g must be in [0, base_lr=%g]", (double)s->min_lr,
                      (double)s->base_lr);
    if (s->warmup_steps < 0)
        return DT_ERR(DT_ERR_INVALID, "warmup_steps=%ld must be >= 0", s->warmup_steps);
    if (!(s->warmup_start >= 0.0f && s->warmup_start <= 1.0f))
        return DT_ERR(DT_ERR_INVALID, "warmup_start=%g must be a fraction in [0, 1]",
                      (double)s->warmup_start);
    if (s->decay != DT_LR_CONSTANT && s->decay != DT_LR_COSINE)
        return DT_ERR(DT_ERR_INVALID, "unknown decay %d (expected DT_LR_CONSTANT or DT_LR_COSINE)",
                      (int)s->decay);
    if (s->decay == DT_LR_COSINE && s->total_steps <= s->warmup_steps)
        return DT_ERR(DT_ERR_INVALID,
                      "cosine decay needs total_steps (%ld) > warmup_steps (%ld)",
                      s->total_steps, s->warmup_steps);
    return DT_OK;
}

float dt_lr_at(const dt_lr_schedule *s, long step) {
    if (!s) return 0.0f;
    const double base = s->base_lr;
    const long w = s->warmup_steps > 0 ? s->warmup_steps : 0;
    if (step < 0) step = 0;
    if (step < w) {
        const double f = s->warmup_start;
        return (float)(base * (f + (1.0 - f) * (double)step / (double)w));
    }
    if (s->decay != DT_LR_COSINE) return (float)base;
    if (step >= s->total_steps || s->total_steps <= w) return s->min_lr;
    const double lo = s->min_lr;
    const double progress = (double)(step - w) / (double)(s->total_steps - w);
    return (float)(lo + (base - lo) * 0.5 * (1.0 + cos(3.14159265358979323846 * progress)));
}
