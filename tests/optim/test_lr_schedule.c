/* tests/optim/test_lr_schedule.c - dt_lr_at against values computed by hand
 * from the formula documented in include/dtrain/optim.h. */
#include <math.h>

#include "dtrain/optim.h"
#include "testutil.h"

#define LR(s, step, want) CHECK(fabs((double)dt_lr_at(&(s), (step)) - (want)) <= 1e-7 * fabs(want) + 1e-12, \
                                "lr(%ld) = %.9g, want %.9g", (long)(step), (double)dt_lr_at(&(s), (step)), (double)(want))

int main(void) {
    dt_lr_schedule s;

    /* constant */
    dt_lr_schedule_default(&s, 0.1f);
    CHECK_OK(dt_lr_schedule_validate(&s));
    LR(s, 0, 0.1f);
    LR(s, 1000000, 0.1f);
    LR(s, -5, 0.1f);

    /* linear warm-up from 0 over 10 steps, then constant */
    s.warmup_steps = 10;
    CHECK_OK(dt_lr_schedule_validate(&s));
    LR(s, 0, 0.0);
    LR(s, -3, 0.0);
    LR(s, 1, 0.01);
    LR(s, 5, 0.05);
    LR(s, 9, 0.09);
    LR(s, 10, 0.1f);
    LR(s, 11, 0.1f);

    /* warm-up from a fraction: base 0.2, f 0.25, W 4: 0.05, 0.0875, 0.125, 0.1625, 0.2 */
    dt_lr_schedule_default(&s, 0.2f);
    s.warmup_steps = 4;
    s.warmup_start = 0.25f;
    CHECK_OK(dt_lr_schedule_validate(&s));
    LR(s, 0, 0.05);
    LR(s, 1, 0.0875);
    LR(s, 2, 0.125);
    LR(s, 3, 0.1625);
    LR(s, 4, 0.2f);

    /* cosine, base 1, min 0.1, W 10, T 110: lr = 0.1 + 0.45 (1 + cos(pi (s-10)/100)) */
    dt_lr_schedule_default(&s, 1.0f);
    s.min_lr = 0.1f;
    s.warmup_steps = 10;
    s.total_steps = 110;
    s.decay = DT_LR_COSINE;
    CHECK_OK(dt_lr_schedule_validate(&s));
    LR(s, 0, 0.0);
    LR(s, 5, 0.5);
    LR(s, 10, 1.0);
    LR(s, 35, 0.868198052);  /* 0.1 + 0.45 (1 + sqrt(2)/2) */
    LR(s, 60, 0.55);         /* cos(pi/2) = 0 */
    LR(s, 85, 0.231801948);  /* 0.1 + 0.45 (1 - sqrt(2)/2) */
    LR(s, 109, 0.100222047); /* 0.1 + 0.45 (1 + cos(0.99 pi)) */
    LR(s, 110, 0.1f);
    LR(s, 1000, 0.1f);

    /* cosine without warm-up to 0: base 0.5, T 4 */
    dt_lr_schedule_default(&s, 0.5f);
    s.total_steps = 4;
    s.decay = DT_LR_COSINE;
    CHECK_OK(dt_lr_schedule_validate(&s));
    LR(s, 0, 0.5);
    LR(s, 1, 0.426776695); /* 0.25 (1 + sqrt(2)/2) */
    LR(s, 2, 0.25);
    LR(s, 3, 0.073223305); /* 0.25 (1 - sqrt(2)/2) */
    LR(s, 4, 0.0);

    /* the schedule is monotone non-increasing after warm-up */
    dt_lr_schedule_default(&s, 3e-4f);
    s.min_lr = 3e-5f;
    s.warmup_steps = 100;
    s.total_steps = 10000;
    s.decay = DT_LR_COSINE;
    int mono = 1;
    for (long t = 101; t <= 10001; t++) mono &= dt_lr_at(&s, t) <= dt_lr_at(&s, t - 1);
    CHECK(mono, "cosine is non-increasing");

    /* validation */
    dt_lr_schedule_default(&s, -1.0f);
    CHECK_ERR(dt_lr_schedule_validate(&s), DT_ERR_INVALID, "base_lr=-1");
    dt_lr_schedule_default(&s, 0.1f);
    s.min_lr = 0.2f;
    CHECK_ERR(dt_lr_schedule_validate(&s), DT_ERR_INVALID, "min_lr=0.2 must be in [0, base_lr=0.1]");
    s.min_lr = 0.0f;
    s.warmup_steps = -1;
    CHECK_ERR(dt_lr_schedule_validate(&s), DT_ERR_INVALID, "warmup_steps=-1");
    s.warmup_steps = 5;
    s.warmup_start = 1.5f;
    CHECK_ERR(dt_lr_schedule_validate(&s), DT_ERR_INVALID, "warmup_start=1.5");
    s.warmup_start = 0.0f;
    s.decay = DT_LR_COSINE;
    s.total_steps = 5;
    CHECK_ERR(dt_lr_schedule_validate(&s), DT_ERR_INVALID,
              "cosine decay needs total_steps (5) > warmup_steps (5)");
    s.decay = (dt_lr_decay)7;
    CHECK_ERR(dt_lr_schedule_validate(&s), DT_ERR_INVALID, "unknown decay 7");
    CHECK_ERR(dt_lr_schedule_validate(NULL), DT_ERR_INVALID, "NULL");
    CHECK(dt_lr_at(NULL, 3) == 0.0f, "NULL schedule gives 0");
    return dt_test_finish("optim_lr_schedule");
}
