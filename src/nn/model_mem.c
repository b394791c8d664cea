/* src/nn/model_mem.c - where a model's memory lives (dtrain/model.h,
 * DEVICES): host memory, or the family's device memory through m->mem;
 * copies between the host and the model. */
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "nn/model_internal.h"

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
size_t dt_model_compute_copy_bytes(const dt_model *m, int *per_layer) {
    if (per_layer) *per_layer = 0;
    return m && m->fam->compute_copy_bytes ? m->fam->compute_copy_bytes(m, per_layer) : 0;
}
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
