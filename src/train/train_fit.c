/* src/train/train_fit.c - the training loop: optimizer steps over the data
 * source's micro-batches through the parallel strategy, periodic and
 * per-epoch evaluation (or the evaluation alone: --max-steps 0), metrics,
 * the end-of-run export and sample (train_sample.c). */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/device.h"
#include "core/error.h"
#include "dtrain/coll.h"
#include "dtrain/optim.h"
#include "dtrain/trace.h"
#include "dtrain/train.h"
#include "train/trainer_internal.h"

static volatile sig_atomic_t g_stop_requested;

void dt_trainer_request_stop(void) { g_stop_requested = 1; }

/* The step whose loss or gradient norm was not finite on some rank (the
 * ranks agree: the first such step over all ranks), or 0: nothing may be
 * saved after it. */
static int nonfinite_agreed(dt_trainer *t, long *step) {
    long v = t->nonfinite_step ? t->nonfinite_step : -1;
    int rc = t->ci.size > 1 ? dt_allreduce(&v, &v, 1, DT_I64, DT_MAX, t->comm) : DT_OK;
    *step = v > 0 ? v : 0;
    return rc;
}

static int nonfinite_error(dt_trainer *t, long step) {
    char what[96];
    if (t->nonfinite_step == step) snprintf(what, sizeof what, "the %s is not finite", t->nonfinite_what);
    else snprintf(what, sizeof what, "another rank's loss or gradient norm is not finite");
    return dt_error(DT_ERR_STATE, "dt_trainer_fit", "step %ld: %s; stopping before anything more is saved (the last "
                    "checkpoint, if any, holds the last good state)", step, what);
}

/* Before a checkpoint or the model is written: every rank's steps so far were
 * finite (collective). */
static int check_finite(dt_trainer *t) {
    long bad;
    int rc = nonfinite_agreed(t, &bad);
    return rc ? rc : bad ? nonfinite_error(t, bad) : DT_OK;
}

/* 1 if any rank was asked to stop (all ranks get the same answer); with a
 * non-finite step on some rank, *rc says so. One collective per step. */
static int stop_agreed(dt_trainer *t, int *rc) {
    long v[2] = {g_stop_requested ? 1 : 0, t->nonfinite_step ? t->nonfinite_step : -1};
    if (t->ci.size > 1 && (*rc = dt_allreduce(v, v, 2, DT_I64, DT_MAX, t->comm))) return 1;
    if (v[1] > 0) {
        *rc = nonfinite_error(t, v[1]);
        return 1;
    }
    return v[0] != 0;
}

/* What a token of a sequence model is: a byte (vocabulary 256) or a token. */
static const char *unit(const dt_trainer *t) { return t->io.num_classes == 256 ? "byte" : "token"; }

/* Training statistics over some steps: predictions, correct ones, loss sum. */
typedef struct tally {
    double loss_sum, correct, count;
} tally;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void progress(const dt_trainer *t, int epoch, long done, long total, double loss) {
    int w = 30, f = total ? (int)(w * done / total) : w;
    char bar[32];
    for (int i = 0; i < w; i++) bar[i] = i < f ? '#' : '.';
    bar[w] = '\0';
    printf("\repoch %d/%d [%s] %3ld%% loss %.4f", epoch + 1, t->o.epochs, bar, total ? 100 * done / total : 100, loss);
    fflush(stdout);
}

/* One optimizer step over accum_steps micro-batches. Returns 1 if a step was
 * taken, 0 at the end of the epoch, or a negative status. */
static int train_step(dt_trainer *t, tally *ep, tally *win, double *step_loss) {
    const int k = t->o.accum_steps;
    const dt_source_ops *so = t->src->ops;
    if (so->batches_left(t->src) < k) return 0; /* epoch ends: no partial step */
    double t0 = dt_trace_now_us();
    *step_loss = 0;
    /* the gradient norm costs a pass over the gradients: computed when
     * clipping, and on the last planned step for the result */
    /* and before a checkpoint: a non-finite gradient must not be saved */
    const int ckpt_due = *t->o.checkpoint_dir && t->o.checkpoint_every > 0 && (t->step + 1) % t->o.checkpoint_every == 0;
    dt_strategy_step st = {.lr = dt_lr_at(&t->sched, t->step), .clip = t->o.clip_grad_norm,
                           .want_norm = t->o.clip_grad_norm > 0 || t->step + 1 >= t->planned_steps || ckpt_due,
                           .norm = -1, .opt_t0 = -1};
    const double P = (double)t->positions;
    for (int m = 0; m < k; m++) {
        int B;
        int rc = so->next(t->src, t->x, t->y, &B);
        if (rc <= 0) return rc < 0 ? rc : DT_ERR(DT_ERR_INTERNAL, "the data source ended inside a step");
        /* the dropout stream depends only on (seed, rank, step, micro-step): a
         * resumed run draws the same masks as an uninterrupted one */
        const uint64_t dseed = (t->o.seed * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)t->ci.world_rank << 48) ^
                               ((uint64_t)t->step * 64 + (uint64_t)m);
        rc = dt_strategy_seed_dropout(t->st, dseed); /* the model's, and its replicas' */
        if (!rc) rc = dt_strategy_begin_micro(t->st, m, k);
        if (rc) return rc;
        /* mean over k micro-batches, and over the data-parallel ranks when
         * the strategy sums their gradients */
        const float scale = 1.0f / (float)k / (float)t->st->dp_size;
        /* forward and backward: on the model, or on its replicas in this
         * process (--dp-threads), through the strategy */
        float l;
        int c;
        double b0;
        if ((rc = dt_strategy_pass(t->st, t->x, t->y, B, scale, &l, &c, &b0))) return rc;
        for (tally *s = ep; s; s = s == ep ? win : NULL) {
            s->loss_sum += (double)l * B * P;
            s->correct += c;
            s->count += B * P;
        }
        *step_loss += l / k;
        if ((rc = dt_strategy_finish_micro(t->st, m, k, &st, b0, dt_trace_now_us()))) return rc;
    }
    double o0 = dt_trace_now_us();
    int rc = dt_strategy_update(t->st, &st);
    if (rc) return rc;
    t->grad_norm = st.want_norm ? st.norm : -1;
    if (!t->nonfinite_step && (!isfinite(*step_loss) || (st.want_norm && !isfinite(st.norm)))) {
        t->nonfinite_step = t->step + 1;
        const double v = !isfinite(*step_loss) ? *step_loss : st.norm;
        snprintf(t->nonfinite_what, sizeof t->nonfinite_what, "%s (%s)",
                 !isfinite(*step_loss) ? "training loss" : "gradient norm", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
    }
    double t1 = dt_trace_now_us();
    if (t->tracing) dt_trace_event("optimizer step", "optimizer", DT_TRACE_COMPUTE, st.opt_t0 >= 0 ? st.opt_t0 : o0, t1);
    if (t->nstep_s == t->cap_step_s) {
        long nc = t->cap_step_s ? 2 * t->cap_step_s : 1024;
        double *p = realloc(t->step_s, sizeof(double) * (size_t)nc);
        if (!p) return DT_ERR(DT_ERR_NOMEM, "out of memory");
        t->step_s = p;
        t->cap_step_s = nc;
    }
    const double secs = (t1 - t0) * 1e-6, tps = secs > 0 ? (double)t->step_tokens / secs : 0;
    t->step_s[t->nstep_s++] = secs;
    dt_metrics_step(&t->metrics, t->step + 1, t->epoch, so->position(t->src), *step_loss, st.lr, secs, t->grad_norm, tps,
             t->peak_flops > 0 ? t->flops_per_token * tps / t->peak_flops : -1);
    t->step++;
    return 1;
}

static int sum_tally(dt_trainer *t, tally *s) {
    if (t->ci.size == 1) return DT_OK;
    double v[3] = {s->loss_sum, s->correct, s->count};
    int rc = dt_allreduce(v, v, 3, DT_F64, DT_SUM, t->comm);
    s->loss_sum = v[0], s->correct = v[1], s->count = v[2];
    return rc;
}

/* Every --eval-every K steps: the training loss since the last report, the
 * evaluation, throughput (collective). */
static int periodic_eval(dt_trainer *t, tally *win, double *t_win, dt_train_result *r) {
    int rc = sum_tally(t, win);
    if (rc) return rc;
    double secs = (dt_trace_now_us() - *t_win) * 1e-6, acc = 0, loss = 0;
    if (t->o.eval && (rc = dt_trainer_evaluate(t, &acc, &loss))) return rc;
    double train_loss = win->count > 0 ? win->loss_sum / win->count : NAN;
    double per_s = secs > 0 ? win->count / secs : 0;
    if (t->o.eval) {
        r->test_acc = acc;
        r->test_loss = loss;
    }
    if (t->ci.rank == 0 && !t->o.quiet) {
        const int seq = t->io.max_seq > 0;
        printf("step %ld/%ld  loss %.4f%s", t->step, t->planned_steps, train_loss, seq ? "/token" : "");
        if (t->o.eval && seq)
            printf("  val_loss %.4f (%.3f bits/%s)  val_acc %.2f%%", loss, loss / log(2.0), unit(t), 100 * acc);
        else if (t->o.eval)
            printf("  test_loss %.4f  test_acc %.2f%%", loss, 100 * acc);
        printf("  %.0f %s/s\n", per_s, seq ? "tokens" : "samples");
        fflush(stdout);
    }
    dt_metrics_eval(&t->metrics, t->step, t->epoch, train_loss, per_s, t->o.eval, loss, acc);
    *win = (tally){0, 0, 0};
    *t_win = dt_trace_now_us();
    return DT_OK;
}

/* --max-steps 0: no step, the evaluation of the model as loaded (an
 * "eval" record without a training loss). Collective. */
static int eval_only(dt_trainer *t, dt_train_result *r) {
    double acc = 0, loss = 0;
    int rc = dt_trainer_evaluate(t, &acc, &loss);
    if (rc) return rc;
    r->test_acc = acc;
    r->test_loss = loss;
    if (t->ci.rank == 0 && !t->o.quiet) {
        printf("evaluation at step %ld (--max-steps 0: no training step): ", t->step);
        if (t->io.max_seq > 0)
            printf("val_loss %.4f (%.3f bits/%s)  val_acc %.2f%%\n", loss, loss / log(2.0), unit(t), 100 * acc);
        else
            printf("test_loss %.4f  test_acc %.2f%%\n", loss, 100 * acc);
        fflush(stdout);
    }
    dt_metrics_eval(&t->metrics, t->step, t->epoch, NAN, 0, 1, loss, acc);
    return DT_OK;
}

/* The end of a run: the JSON lines file and this rank's timeline are closed
 * and every failed write of their lives reported (after the model and the
 * checkpoint were saved: nothing of the training is lost to a full disk). */
static int close_outputs(dt_trainer *t) {
    int rc = dt_metrics_close(&t->metrics);
    if (t->tracing) {
        t->tracing = 0;
        int trc = dt_trace_close();
        if (!rc) rc = trc;
    }
    return rc;
}

int dt_trainer_fit(dt_trainer *t, dt_train_result *res) {
    if (!t) return DT_ERR(DT_ERR_INVALID, "trainer is NULL");
    const dt_train_options *o = &t->o;
    const dt_source_ops *so = t->src->ops;
    const int seq = t->io.max_seq > 0;
    int rank0 = t->ci.rank == 0, bar = rank0 && !o->quiet && isatty(STDOUT_FILENO);
    /* NaN until an epoch of this run trains a step (a resumed run may have nothing left) */
    dt_train_result r = {.last_loss = NAN, .train_acc = NAN, .test_acc = -1, .comm_hidden = -1,
                         .comm_hidden_compute = -1, .test_loss = NAN, .mfu = -1};
    int rc = DT_OK;
    tally win = {0, 0, 0};
    double t_win = dt_trace_now_us();
    for (int e = t->epoch; e < o->epochs && (o->max_steps < 0 || t->step < o->max_steps); e++) {
        t->epoch = e;
        t->epoch_over = 0;
        /* resumed mid-epoch: at that sample, in this run's layout */
        rc = so->begin_epoch(t->src, (uint64_t)e, t->resume_pos);
        t->resume_pos = 0;
        if (rc) return rc;
        long steps_per_epoch = (long)(so->batches_left(t->src) / o->accum_steps);
        tally ep = {0, 0, 0};
        double t0 = dt_trace_now_us(), sl = 0;
        int epoch_complete = 0;
        long done = 0;
        for (;;) {
            if (o->max_steps >= 0 && t->step >= o->max_steps) break;
            if (stop_agreed(t, &rc)) {
                if (rc) return rc;
                if (bar) printf("\n");
                r.steps = t->step;
                if (res) *res = r;
                return DT_ERR(DT_ERR_STATE, "stopped by request (signal) after step %ld; nothing was left half-written", t->step);
            }
            int got = train_step(t, &ep, &win, &sl);
            if (got < 0) return got;
            if (!got) { epoch_complete = 1; break; }
            done++;
            if (bar && !o->eval_every && (done % 10 == 0 || done == steps_per_epoch))
                progress(t, e, done, steps_per_epoch, sl);
            if (o->eval_every > 0 && t->step % o->eval_every == 0 && (rc = periodic_eval(t, &win, &t_win, &r)))
                return rc;
            if (*o->checkpoint_dir && o->checkpoint_every > 0 && t->step % o->checkpoint_every == 0 &&
                ((rc = check_finite(t)) || (rc = dt_trainer_save_checkpoint(t, o->checkpoint_dir))))
                return rc;
        }
        if (epoch_complete) { /* a checkpoint from here on starts at the next epoch */
            t->epoch = e + 1;
            t->epoch_over = 1;
        }
        /* nothing of this epoch was left (resumed at its end, or --max-steps
         * reached): no line of zeros, no evaluation (the same on every rank) */
        if (done == 0) continue;
        double secs = (dt_trace_now_us() - t0) * 1e-6;
        if ((rc = sum_tally(t, &ep))) return rc;
        r.epochs = e + 1;
        r.last_loss = ep.count > 0 ? ep.loss_sum / ep.count : 0;
        r.train_acc = ep.count > 0 ? ep.correct / ep.count : 0;
        r.tokens_per_s = secs > 0 ? ep.count / secs : 0;
        r.samples_per_s = r.tokens_per_s / (double)t->positions;
        double tl = NAN;
        if (o->eval && (rc = dt_trainer_evaluate(t, &r.test_acc, &tl))) return rc;
        if (o->eval) r.test_loss = tl;
        if (bar) printf("\n");
        if (rank0 && !o->quiet) {
            if (seq) {
                printf("epoch %d/%d  loss %.4f/token%s  %.0f tokens/s", e + 1, o->epochs, r.last_loss,
                       t->io.num_classes == 256 ? " (= per byte)" : "",
                       r.tokens_per_s);
                if (o->eval)
                    printf("  val_loss %.4f (%.3f bits/%s)  val_acc %.2f%%", tl, tl / log(2.0), unit(t), 100 * r.test_acc);
            } else {
                printf("epoch %d/%d  loss %.4f  train_acc %.2f%%  %.0f samples/s", e + 1, o->epochs, r.last_loss,
                       100 * r.train_acc, r.samples_per_s);
                if (o->eval) printf("  test_loss %.4f  test_acc %.2f%%", tl, 100 * r.test_acc);
            }
            printf("  (%.1f s)\n", secs);
            fflush(stdout);
        }
        dt_metrics_epoch(&t->metrics, e + 1, t->step, r.last_loss, r.train_acc, r.samples_per_s, secs, o->eval, tl,
                         r.test_acc, r.tokens_per_s);
    }
    r.steps = t->step;
    if ((*o->checkpoint_dir || *o->save_model) && (rc = check_finite(t))) return rc;
    if (o->max_steps == 0 && o->eval && (rc = eval_only(t, &r))) return rc;
    if (*o->checkpoint_dir && (o->checkpoint_every <= 0 || t->step % o->checkpoint_every != 0)) {
        /* the final state */
        if ((rc = dt_trainer_save_checkpoint(t, o->checkpoint_dir))) return rc;
    }
    if (*o->save_model && (rc = dt_trainer_save_model(t, o->save_model))) return rc;
    if ((rc = dt_trainer_sample(t))) return rc;
    if (t->nstep_s) {
        double *s = malloc(sizeof(double) * (size_t)t->nstep_s);
        if (s) {
            memcpy(s, t->step_s, sizeof(double) * (size_t)t->nstep_s);
            qsort(s, (size_t)t->nstep_s, sizeof(double), cmp_double);
            r.median_step_s = s[t->nstep_s / 2];
            free(s);
        }
    }
    r.mfu = t->peak_flops > 0 && r.median_step_s > 0
                ? t->flops_per_token * (double)t->step_tokens / r.median_step_s / t->peak_flops
                : -1;
    dt_strategy_overlap(t->st, &r.comm_hidden, &r.comm_hidden_compute);
    r.grad_norm = t->grad_norm;
    if (res) *res = r;
    dt_metrics_memory(&t->metrics, t->step, "end", dt_model_num_params(t->model), t->ci.size, o->dist.zero_opt_level,
                      dt_comm_device_path(dt_comm_world()), t->act_bytes[0], t->act_bytes[1]);
    dt_metrics_summary(&t->metrics, r.steps, t->ci.size, o->dist.zero_opt_level, r.median_step_s, r.comm_hidden,
                r.comm_hidden_compute, r.grad_norm, r.test_acc, r.test_loss, r.tokens_per_s, r.mfu);
    return close_outputs(t);
}
