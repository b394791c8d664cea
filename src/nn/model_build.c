/* src/nn/model_build.c - family-independent model construction:
 * configuration, the unit/slice tables (the layout contract), the flat
 * buffers, and freeing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "nn/model_internal.h"
#include "nn/nn_internal.h"

#define CREATE_FN "dt_model_create"

int dt_model_config_default(dt_model_config *cfg, const char *name) {
    if (!cfg || !name) return DT_ERR(DT_ERR_INVALID, "NULL cfg or name");
    const dtm_family *fam = dtm_family_of(name);
    if (!fam) {
        char known[256];
        dtm_known_models(known, sizeof known);
        return DT_ERR(DT_ERR_INVALID, "unknown model name '%s' (expected one of: %s)", name,
                      known);
    }
    memset(cfg, 0, sizeof *cfg);
    for (const char *const *n = fam->models; *n; n++)
        if (strcmp(*n, name) == 0) cfg->name = *n; /* the static string */
    return fam->config_default(cfg);
}

/* ---- unit and slice tables ------------------------------------------------- */

int dtm_add_unit(dt_model *m, const char *name, const char *kind) {
    if (strlen(name) >= DT_UNIT_NAME_MAX)
        return dt_error(DT_ERR_INTERNAL, CREATE_FN, "layer name '%s' too long", name);
    if (m->nlayers == m->cap_layers) {
        int nc = m->cap_layers ? 2 * m->cap_layers : 16;
        dt_unit *u = realloc(m->units, (size_t)nc * sizeof *u);
        if (!u) return dt_error(DT_ERR_NOMEM, CREATE_FN, "out of memory for the layer table");
        m->units = u;
        m->cap_layers = nc;
    }
    dt_unit *U = &m->units[m->nlayers];
    memset(U, 0, sizeof *U);
    snprintf(U->name, sizeof U->name, "%s", name);
    U->kind = kind;
    U->param_off = m->nparams;
    U->buf_off = m->nbuffers;
    U->owner = m->nlayers;
    m->nlayers++;
    return DT_OK;
}

/* Append a slice to *tab; *total grows by its element count. */
static int add_slice(dt_model *m, dt_param_slice **tab, int *n, int *cap, size_t *total,
                     size_t *unit_count, const char *name, int ndim, const int64_t *shape) {
    if (m->nlayers == 0)
        return dt_error(DT_ERR_INTERNAL, CREATE_FN, "tensor %s before any layer", name);
    if (ndim < 1 || ndim > 4 || strlen(name) >= DT_SLICE_NAME_MAX)
        return dt_error(DT_ERR_INTERNAL, CREATE_FN, "bad tensor %s (ndim %d)", name, ndim);
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] <= 0 || (uint64_t)shape[i] > ((uint64_t)1 << 40) / count)
            return dt_error(DT_ERR_INVALID, CREATE_FN, "tensor %s: dimension %d (%lld) too large",
                            name, i, (long long)shape[i]);
        count *= (size_t)shape[i];
    }
    if (*total > ((size_t)1 << 40) - count)
        return dt_error(DT_ERR_INVALID, CREATE_FN, "model too large at tensor %s", name);
    if (*n == *cap) {
        int nc = *cap ? 2 * *cap : 16;
        dt_param_slice *t = realloc(*tab, (size_t)nc * sizeof *t);
        if (!t) return dt_error(DT_ERR_NOMEM, CREATE_FN, "out of memory for slice table");
        *tab = t;
        *cap = nc;
    }
    dt_param_slice *s = &(*tab)[*n];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->ndim = ndim;
    for (int i = 0; i < ndim; i++) s->shape[i] = shape[i];
    s->count = count;
    s->offset = *total;
    s->layer = m->nlayers - 1;
    (*n)++;
    *total += count;
    *unit_count += count;
    return DT_OK;
}

int dtm_add_param(dt_model *m, const char *name, int ndim, const int64_t *shape) {
    dt_unit *U = m->nlayers ? &m->units[m->nlayers - 1] : NULL;
    size_t dummy = 0;
    return add_slice(m, &m->slices, &m->nslices, &m->cap_slices, &m->nparams,
                     U ? &U->param_count : &dummy, name, ndim, shape);
}

int dtm_add_buffer(dt_model *m, const char *name, int ndim, const int64_t *shape) {
    dt_unit *U = m->nlayers ? &m->units[m->nlayers - 1] : NULL;
    size_t dummy = 0;
    return add_slice(m, &m->bslices, &m->nbslices, &m->cap_bslices, &m->nbuffers,
                     U ? &U->buf_count : &dummy, name, ndim, shape);
}

/* ---- creation ------------------------------------------------------------ */

/* The flat buffers, initialised by the family (on the host: a device model's
 * are initialised in host memory and uploaded). */
static int make_buffers(dt_model *m) {
    int rc = dtm_buf_alloc(m, m->nparams, "the parameters", &m->params);
    if (!rc) rc = dtm_buf_alloc(m, m->nparams, "the gradients", &m->grads);
    if (!rc) rc = dtm_buf_alloc(m, m->nbuffers, "the buffers", &m->buffers);
    if (rc || !m->mem) {
        if (!rc) m->fam->init(m);
        return rc;
    }
    dt_model host = *m; /* the family's init writes host memory */
    host.mem = NULL;
    host.params = host.buffers = NULL;
    rc = dtm_buf_alloc(&host, m->nparams, "the initial parameters", &host.params);
    if (!rc) rc = dtm_buf_alloc(&host, m->nbuffers, "the initial buffers", &host.buffers);
    if (!rc) {
        m->fam->init(&host);
        rc = m->mem->upload(m, m->params, host.params, m->nparams * sizeof(float));
        if (!rc) rc = m->mem->upload(m, m->buffers, host.buffers, m->nbuffers * sizeof(float));
    }
    free(host.params);
    free(host.buffers);
    return rc;
}

int dt_model_create(const dt_model_config *cfg, dt_model **out) {
    if (!out) return DT_ERR(DT_ERR_INVALID, "NULL out");
    *out = NULL;
    if (!cfg) return DT_ERR(DT_ERR_INVALID, "NULL config");
    if (!cfg->name) return DT_ERR(DT_ERR_INVALID, "NULL model name");
    const dtm_family *fam = dtm_family_of(cfg->name);
    if (!fam) {
        char known[256];
        dtm_known_models(known, sizeof known);
        return DT_ERR(DT_ERR_INVALID, "unknown model name '%s' (expected one of: %s)",
                      cfg->name, known);
    }
    if (!(cfg->dropout >= 0.0f && cfg->dropout < 1.0f))
        return DT_ERR(DT_ERR_INVALID, "dropout %g must be in [0,1)", (double)cfg->dropout);
    if (cfg->recompute != 0 && cfg->recompute != 1)
        return DT_ERR(DT_ERR_INVALID, "recompute=%d must be 0 or 1", cfg->recompute);
    if (cfg->device != DT_DEVICE_CPU && cfg->device != DT_DEVICE_CUDA)
        return DT_ERR(DT_ERR_INVALID, "device %d is not DT_DEVICE_CPU (0) or DT_DEVICE_CUDA (1)", cfg->device);
    if (cfg->precision != DT_PRECISION_FP32 && cfg->precision != DT_PRECISION_BF16)
        return DT_ERR(DT_ERR_INVALID, "precision %d is not DT_PRECISION_FP32 (0) or DT_PRECISION_BF16 (1)",
                      cfg->precision);
    dt_nn_blas_init();
    dt_model *m = calloc(1, sizeof *m);
    if (!m) return DT_ERR(DT_ERR_NOMEM, "out of memory");
    m->fam = fam;
    snprintf(m->name, sizeof m->name, "%s", cfg->name);
    m->cfg = *cfg;
    m->cfg.name = m->name;
    int rc = fam->build(m, &m->cfg);
    if (!rc) rc = make_buffers(m);
    if (rc) {
        dt_model_free(m);
        return rc;
    }
    *out = m;
    return DT_OK;
}

void dt_model_free(dt_model *m) {
    if (!m) return;
    /* the flat buffers first: a device model's go back through its family */
    dtm_buf_free(m, m->params);
    if (!m->grads_external) dtm_buf_free(m, m->grads);
    dtm_buf_free(m, m->buffers);
    if (m->impl && m->fam) m->fam->free_impl(m->impl);
    free(m->slices);
    free(m->bslices);
    free(m->units);
    free(m);
}
