/* dtrain/mem.h - memory accounting: the bytes the training state holds on this
 * rank, per category, current and peak, and the part of them that is device
 * memory (a model on a GPU: its parameters, gradients, activations, and the
 * strategy's optimizer state and buffers where they live there). Components
 * report what they allocate and where (the trainer reports the model's and
 * optimizer's buffers; ZeRO, DDP and the fused collectives report theirs,
 * through the library's internal src/core/mem.h). Thread-safe, process-wide. */
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

long long dt_mem_current(dt_mem_category c);
long long dt_mem_peak(dt_mem_category c);
/* The part of dt_mem_current / the peak of the part of a category that is
 * device memory (<= the totals; 0 on a process without a device). The host
 * part is dt_mem_current - dt_mem_device_current. */
long long dt_mem_device_current(dt_mem_category c);
long long dt_mem_device_peak(dt_mem_category c);
/* "params", "grads", "optimizer", "comm", "gathered", "activations"; "?"
 * otherwise. */
const char *dt_mem_category_name(dt_mem_category c);
/* Restart peaks (the device part's too) at the current values. */
void dt_mem_reset_peaks(void);

#ifdef __cplusplus
}
#endif
#endif
