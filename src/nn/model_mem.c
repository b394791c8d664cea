/* src/nn/model_mem.c - where a model's memory lives (dtrain/model.h,
 * DEVICES): host memory, or the family's device memory through m->mem;
 * the device and precision names; copies between the host and the model. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "core/error.h"
#include "nn/model_internal.h"

/* ---- names ---------------------------------------------------------------------------- */

static const char *const k_devices[] = {"cpu", "cuda"};
static const char *const k_precisions[] = {"fp32", "bf16"};

const char *dt_device_kind_name(int device) {
    return device >= 0 && device < 2 ? k_devices[device] : "?";
}

const char *dt_precision_name(int precision) {
    return precision >= 0 && precision < 2 ? k_precisions[precision] : "?";
}

int dt_device_kind_parse(const char *name, int *out) {
    for (int i = 0; name && out && i < 2; i++)
        if (strcasecmp(name, k_devices[i]) == 0) return *out = i, DT_OK;
    return DT_ERR(DT_ERR_INVALID, "device '%s' (expected cpu or cuda)", name ? name : "(null)");
}

int dt_precision_parse(const char *name, int *out) {
    for (int i = 0; name && out && i < 2; i++)
        if (strcasecmp(name, k_precisions[i]) == 0) return *out = i, DT_OK;
    return DT_ERR(DT_ERR_INVALID, "precision '%s' (expected fp32 or bf16)", name ? name : "(null)");
}

/* ---- the model's memory ------------------------------------------------------------------- */

int dtm_buf_alloc(dt_model *m, size_t n, const char *what, float **p) {
    if (m->mem) return m->mem->alloc(m, (n ? n : 1) * sizeof(float), what, (void **)p);
    /* 64-byte aligned, zeroed, at least one element */
    size_t bytes = ((n ? n : 1) * sizeof(float) + 63) & ~(size_t)63;
    *p = aligned_alloc(64, bytes);
    if (!*p) return DT_ERR(DT_ERR_NOMEM, "out of memory for %s (%zu floats)", what, n);
    memset(*p, 0, bytes);
    return DT_OK;
}

void dtm_buf_free(dt_model *m, float *p) {
    if (!p) return;
    if (m->mem) m->mem->free(m, p);
    else free(p);
}

int dtm_buf_zero(dt_model *m, float *p, size_t n) {
    if (!n) return DT_OK;
    if (m->mem) return m->mem->zero(m, p, n * sizeof(float));
    memset(p, 0, n * sizeof(float));
    return DT_OK;
}

int dtm_buf_copy(dt_model *m, float *dst, const float *src, size_t n) {
    if (!n || dst == src) return DT_OK;
    if (m->mem) return m->mem->copy(m, dst, src, n * sizeof(float));
    memmove(dst, src, n * sizeof(float));
    return DT_OK;
}

int dt_model_device(const dt_model *m) { return m ? m->cfg.device : DT_DEVICE_CPU; }
int dt_model_precision(const dt_model *m) { return m ? m->cfg.precision : DT_PRECISION_FP32; }
void *dt_model_stream(const dt_model *m) { return m && m->mem ? m->mem->stream((dt_model *)m) : NULL; }

int dt_model_copy_to_host(const dt_model *m, float *host_dst, const float *src, size_t n) {
    if (!m || (n && (!host_dst || !src))) return DT_ERR(DT_ERR_INVALID, "NULL model, dst or src");
    if (!n) return DT_OK;
    if (m->mem) return m->mem->download((dt_model *)m, host_dst, src, n * sizeof(float));
    memmove(host_dst, src, n * sizeof(float));
    return DT_OK;
}

int dt_model_copy_from_host(const dt_model *m, float *dst, const float *host_src, size_t n) {
    if (!m || (n && (!dst || !host_src))) return DT_ERR(DT_ERR_INVALID, "NULL model, dst or src");
    if (!n) return DT_OK;
    if (m->mem) return m->mem->upload((dt_model *)m, dst, host_src, n * sizeof(float));
    memmove(dst, host_src, n * sizeof(float));
    return DT_OK;
}
