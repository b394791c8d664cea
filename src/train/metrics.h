/* src/train/metrics.h - internal: the trainer's metrics, to a JSON-lines file
 * (--json: one object per line, of type "step", "epoch", "eval", "memory",
 * "sample" or "summary"; docs/trainer.md) and to TensorBoard event files
 * (--tensorboard DIR: the same numbers as scalars tagged "<type>/<key>",
 * src/io/tfevents.h). Every record of the trainer is written here and
 * nowhere else, so that both sinks get the same values from one call.
 *
 * Writes never stop training: the first failed write of a sink (full disk,
 * I/O error) is remembered with its errno, reported once on stderr, and that
 * sink's later records are dropped; dt_metrics_close returns it (DT_ERR_IO naming
 * the file and the reason), so the run ends with an error instead of
 * silently losing metrics. */
#ifndef DT_TRAIN_METRICS_H
#define DT_TRAIN_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "io/tfevents.h"

typedef struct dt_metrics {
    FILE *f;         /* NULL: no --json (every call is a no-op) */
    char path[256];
    int err;         /* errno of the first failed write; 0 if none */
    dt_tfevents tb;  /* --tensorboard (tb.f NULL: off) */
} dt_metrics;

/* Opens (truncates) json_path for writing and/or creates an event file in
 * tb_dir (NULL or "": that sink off); DT_ERR_IO naming the path and the
 * reason, with nothing left open. */
int dt_metrics_open(dt_metrics *m, const char *json_path, const char *tb_dir);
/* 1 if either sink is open */
int dt_metrics_is_open(const dt_metrics *m);

/* epoch_pos: samples of the epoch's global order consumed after this step;
 * grad_norm: the global gradient norm before clipping, < 0 when the step did
 * not compute it (only when clipping, and on the last planned step);
 * tokens_per_s: the step's global predictions per second (gpt: tokens);
 * mfu: its model FLOP utilisation in [0, 1], < 0 when unknown (not written). */
void dt_metrics_step(dt_metrics *m, long step, int epoch, long long epoch_pos, double loss, double lr, double time_s,
              double grad_norm, double tokens_per_s, double mfu);
/* eval: whether test_loss / test_acc are present; tokens_per_s: predictions
 * per second (gpt: tokens; classifiers: = samples_per_s). */
void dt_metrics_epoch(dt_metrics *m, int epoch, long steps, double loss, double train_acc, double samples_per_s,
                      double time_s, int eval, double test_loss, double test_acc, double tokens_per_s);
/* --eval-every: {"type":"eval"} after step `step`: the training loss per
 * prediction since the last one, throughput, and (eval) the evaluation. */
void dt_metrics_eval(dt_metrics *m, long step, int epoch, double train_loss, double tokens_per_s, int eval,
                     double test_loss, double test_acc);
/* The memory accounting (dtrain/mem.h) now, every category current and peak;
 * act_off / act_on: activation bytes of a training batch without and with
 * recomputation (gpt; both 0: not written); step: the optimizer steps taken
 * (TensorBoard's x axis; not in the JSON record); device_path: how device
 * memory moves between ranks (dt_comm_device_path; NULL: not written). */
void dt_metrics_memory(dt_metrics *m, long step, const char *when, size_t num_params, int ranks, int zero_opt_level,
                       const char *device_path, size_t act_off, size_t act_on);
void dt_metrics_summary(dt_metrics *m, long steps, int ranks, int zero_opt_level, double median_step_s,
                 double comm_hidden, double comm_hidden_compute, double grad_norm, double test_acc,
                 double test_loss, double tokens_per_s, double mfu);
/* The end-of-run sample: the np prompt tokens and the n generated ones as
 * ids ("prompt_tokens", "tokens": the first 2048; "num_tokens": n), and for a
 * byte vocabulary (bytes != 0) as text too ("prompt", "text": escaped as
 * JSON, bytes >= 0x80 as \u0080..\u00ff, i.e. read as Latin-1; "text_bytes"
 * n when more than 2048). */
void dt_metrics_sample(dt_metrics *m, long step, double temperature, const int32_t *prompt, size_t np,
                const int32_t *tokens, size_t n, int bytes);

/* DT_OK, or DT_ERR_IO for the first failed write so far (the JSON file's
 * first, then the event file's). */
int dt_metrics_status(const dt_metrics *m);
/* Flushes and closes both files (no-op if not open); returns the first write
 * or close failure of their lives (DT_ERR_IO naming the file), else DT_OK. */
int dt_metrics_close(dt_metrics *m);

#endif
