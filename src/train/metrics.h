/* src/train/metrics.h - internal: the trainer's JSON-lines metrics file
 * (--json): one object per line, of type "step", "epoch", "memory" or
 * "summary" (README, "The trainer"). Every record of the trainer is written
 * here and nowhere else, so that the JSON encoding lives in one place.
 *
 * Writes never stop training: the first failed write (full disk, I/O error)
 * is remembered with its errno, reported once on stderr, and later records
 * are dropped; dtm_close returns it (DT_ERR_IO naming the file and the
 * reason), so the run ends with an error instead of silently losing metrics. */
#ifndef DT_TRAIN_METRICS_H
#define DT_TRAIN_METRICS_H

#include <stddef.h>
#include <stdio.h>

typedef struct dt_metrics {
    FILE *f;         /* NULL: no --json (every call is a no-op) */
    char path[256];
    int err;         /* errno of the first failed write; 0 if none */
} dt_metrics;

/* Opens (truncates) path for writing; DT_ERR_IO naming it and the reason. */
int dtm_open(dt_metrics *m, const char *path);
int dtm_is_open(const dt_metrics *m);

/* epoch_pos: samples of the epoch's global order consumed after this step */
void dtm_step(dt_metrics *m, long step, int epoch, long long epoch_pos, double loss, double lr, double time_s);
/* eval: whether test_loss / test_acc are present. */
void dtm_epoch(dt_metrics *m, int epoch, long steps, double loss, double train_acc, double samples_per_s,
               double time_s, int eval, double test_loss, double test_acc);
/* The memory accounting (dtrain/mem.h) now, every category current and peak. */
void dtm_memory(dt_metrics *m, const char *when, size_t num_params, int ranks, int zero_opt_level);
void dtm_summary(dt_metrics *m, long steps, int ranks, int zero_opt_level, double median_step_s,
                 double comm_hidden, double comm_hidden_compute, double grad_norm, double test_acc);

/* DT_OK, or DT_ERR_IO for the first failed write so far. */
int dtm_status(const dt_metrics *m);
/* Flushes and closes the file (no-op if not open); returns the first write or
 * close failure of the file's life (DT_ERR_IO naming it), else DT_OK. */
int dtm_close(dt_metrics *m);

#endif
