/* dtrain/device.h - where training computes: the CPU or a CUDA device, and
 * in which precision (dtrain/model.h's DEVICES and PRECISION say what a
 * model on a device is), and which CUDA device this process uses.
 *
 * Every int function returns DT_OK (or a count) or a negative dt_status
 * with a message for dt_last_error(). */
#ifndef DTRAIN_DEVICE_H
#define DTRAIN_DEVICE_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_device_kind { DT_DEVICE_CPU = 0, DT_DEVICE_CUDA = 1 } dt_device_kind;
typedef enum dt_precision { DT_PRECISION_FP32 = 0, DT_PRECISION_BF16 = 1 } dt_precision;

/* "cpu", "cuda"; "fp32", "bf16"; "?" if unknown. */
const char *dt_device_kind_name(int device);
const char *dt_precision_name(int precision);
/* Parse those names (case-insensitive) into *out; DT_ERR_INVALID listing
 * the valid ones. */
int dt_device_kind_parse(const char *name, int *out);
int dt_precision_parse(const char *name, int *out);

/* CUDA devices this process can use (asks the CUDA runtime: works before
 * dt_init too); 0 in a build without CUDA or on a machine without a GPU,
 * with the reason in *why[cap] when why is not NULL. */
int dt_cuda_device_count(char *why, unsigned long cap);
/* Make CUDA device `index` current for the calling thread (what a model or
 * optimizer created on DT_DEVICE_CUDA afterwards uses). DT_ERR_INVALID for
 * an index outside [0, count); DT_ERR_UNSUPPORTED without CUDA. */
int dt_cuda_use_device(int index);
/* The calling thread's current CUDA device, or a negative status. */
int dt_cuda_current_device(void);

/* What a CUDA device is: its name, compute capability, multiprocessors and
 * memory (total, and free at the call). */
typedef struct dt_cuda_info {
    char name[96];
    int cc_major, cc_minor;
    int sms;
    unsigned long long total_bytes, free_bytes;
} dt_cuda_info;
/* Fill *info for device `index` (-1: the current one). DT_ERR_UNSUPPORTED
 * without CUDA; DT_ERR_INVALID for a bad index. */
int dt_cuda_device_info(int index, dt_cuda_info *info);
/* The device's dense peak rate in TFLOP/s for `precision`'s matrix products
 * (DT_PRECISION_BF16: the tensor cores' bf16 rate; DT_PRECISION_FP32: the
 * plain float32 rate, what dtrain's fp32 uses), from a table of known GPUs
 * by compute capability and multiprocessor count (H100 SXM and H200 with 132
 * SMs: 989.4 and 66.9; H100 PCIe with 114: 756 and 51.2; A100 with 108: 312
 * and 19.5); 0 for a GPU not in the table. */
double dt_cuda_peak_tflops(const dt_cuda_info *info, int precision);

#ifdef __cplusplus
}
#endif
#endif
