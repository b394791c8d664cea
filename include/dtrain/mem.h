/* dtrain/mem.h - memory accounting: the bytes the training state holds on this
 * rank, per category, current and peak. Components report what they allocate
 * (the trainer reports the model's and optimizer's buffers; ZeRO, DDP and the
 * fused collectives report theirs). Thread-safe, process-wide. */
#ifndef DTRAIN_MEM_H
#define DTRAIN_MEM_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_mem_category {
    DT_MEM_PARAMS = 0,   /* parameters (full copy or this rank's shard) */
    DT_MEM_GRADS = 1,    /* gradients (full or shard) */
    DT_MEM_OPTIM = 2,    /* optimizer state (momentum, Adam m and v) */
    DT_MEM_COMM = 3,     /* communication buffers (buckets, fusion staging) */
    DT_MEM_GATHERED = 4, /* temporarily gathered parameters (ZeRO-3) */
    DT_MEM_ACTIVATIONS = 5, /* a model's activations and workspaces (the trainer reports
                          * dt_model_activation_bytes of its largest batch) */
    DT_MEM_NUM = 6
} dt_mem_category;

/* Add (bytes > 0) or release (bytes < 0). Unknown categories are ignored. */
void dt_mem_add(dt_mem_category c, long long bytes);
long long dt_mem_current(dt_mem_category c);
long long dt_mem_peak(dt_mem_category c);
/* "params", "grads", "optimizer", "comm", "gathered", "activations"; "?"
 * otherwise. */
const char *dt_mem_category_name(dt_mem_category c);
/* Zero all counters (current and peak). */
void dt_mem_reset(void);
/* Restart peaks at the current values. */
void dt_mem_reset_peaks(void);

#ifdef __cplusplus
}
#endif
#endif
