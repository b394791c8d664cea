/* tests/nn/fixture.h - reader for the ".dtfx" tensor fixtures written by
 * tests/reference/torch_models.py (format documented in that script's
 * header). Test-only helper; other test folders may compile fixture.c too. */
#ifndef DT_TEST_FIXTURE_H
#define DT_TEST_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include "dtrain/model.h"

typedef struct dt_fx_tensor {
    char name[128];
    int dtype;         /* dt_dtype code: 0 float32, 6 int32, 5 uint8 */
    int ndim;
    int64_t shape[8];
    size_t count;      /* number of elements */
    void *data;        /* count elements of dtype */
} dt_fx_tensor;

typedef struct dt_fixture {
    int n;
    dt_fx_tensor *t;
} dt_fixture;

/* Load a whole fixture file; DT_ERR_IO (message set) on a missing or
 * malformed file. Free with dt_fixture_free. */
int dt_fixture_load(const char *path, dt_fixture *fx);
void dt_fixture_free(dt_fixture *fx);
/* The tensor called name, or NULL. */
const dt_fx_tensor *dt_fixture_get(const dt_fixture *fx, const char *name);
/* Float32 data of tensor name if it exists, is float32 and has `count`
 * elements (count 0 = any); else NULL. */
const float *dt_fixture_f32(const dt_fixture *fx, const char *name, size_t count);

/* Copy "<prefix>param.<key>" into the model's parameters and
 * "<prefix>buffer.<key>" into its buffers, for every slice of the model;
 * the shapes must match. Returns DT_OK or DT_ERR_MISMATCH (message set). */
int dt_fixture_load_model(const dt_fixture *fx, dt_model *m, const char *prefix);

/* Write n tensors (name, dtype code 0/5/6, ndim, shape, data) as a DTFX
 * file (for tests that hand data to a Python script). DT_ERR_IO on failure. */
int dt_fixture_write(const char *path, const dt_fx_tensor *t, int n);

/* max|a-b| / max(max|b|, 1e-12) */
double dt_fx_rel_err(const float *a, const float *b, size_t n);

#endif
