/* tests/nn/fixture.c - ".dtfx" fixture reader (see fixture.h). */
#include "fixture.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dtrain/status.h"
#include "core/error.h"

static int rd(FILE *f, void *p, size_t n) { return fread(p, 1, n, f) == n; }

static uint32_t le32(const unsigned char *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

int dt_fixture_load(const char *path, dt_fixture *fx) {
    memset(fx, 0, sizeof *fx);
    FILE *f = fopen(path, "rb");
    if (!f) return DT_ERR(DT_ERR_IO, "cannot open fixture %s", path);
    unsigned char h[12];
    int rc = DT_OK;
    if (!rd(f, h, 12) || memcmp(h, "DTFX", 4) != 0 || le32(h + 4) != 1) {
        fclose(f);
        return DT_ERR(DT_ERR_IO, "%s: not a version-1 DTFX fixture", path);
    }
    uint32_t count = le32(h + 8);
    if (count > 100000) {
        fclose(f);
        return DT_ERR(DT_ERR_IO, "%s: implausible tensor count %u", path, count);
    }
    fx->t = calloc(count ? count : 1, sizeof *fx->t);
    if (!fx->t) {
        fclose(f);
        return DT_ERR(DT_ERR_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < count && rc == DT_OK; i++) {
        dt_fx_tensor *t = &fx->t[i];
        unsigned char b[8];
        if (!rd(f, b, 4)) { rc = DT_ERR(DT_ERR_IO, "%s: truncated", path); break; }
        uint32_t nl = le32(b);
        if (nl >= sizeof t->name || !rd(f, t->name, nl)) {
            rc = DT_ERR(DT_ERR_IO, "%s: bad tensor name", path);
            break;
        }
        t->name[nl] = '\0';
        if (!rd(f, b, 8)) { rc = DT_ERR(DT_ERR_IO, "%s: truncated", path); break; }
        t->dtype = (int)le32(b);
        t->ndim = (int)le32(b + 4);
        size_t esize = t->dtype == 0 || t->dtype == 6 ? 4 : t->dtype == 5 ? 1 : 0;
        if (!esize || t->ndim < 0 || t->ndim > 8) {
            rc = DT_ERR(DT_ERR_IO, "%s: tensor %s has dtype %d ndim %d", path, t->name,
                        t->dtype, t->ndim);
            break;
        }
        t->count = 1;
        for (int d = 0; d < t->ndim; d++) {
            unsigned char s[8];
            if (!rd(f, s, 8)) { rc = DT_ERR(DT_ERR_IO, "%s: truncated", path); break; }
            uint64_t v = (uint64_t)le32(s) | (uint64_t)le32(s + 4) << 32;
            if (v > ((uint64_t)1 << 32)) {
                rc = DT_ERR(DT_ERR_IO, "%s: tensor %s dim too large", path, t->name);
                break;
            }
            t->shape[d] = (int64_t)v;
            t->count *= (size_t)v;
        }
        if (rc) break;
        t->data = malloc(t->count * esize + 1);
        if (!t->data) { rc = DT_ERR(DT_ERR_NOMEM, "out of memory"); break; }
        if (!rd(f, t->data, t->count * esize)) {
            rc = DT_ERR(DT_ERR_IO, "%s: tensor %s truncated", path, t->name);
            break;
        }
        fx->n = (int)i + 1;
    }
    fclose(f);
    if (rc) dt_fixture_free(fx);
    return rc;
}

void dt_fixture_free(dt_fixture *fx) {
    if (!fx) return;
    if (fx->t)
        for (int i = 0; i < fx->n; i++) free(fx->t[i].data);
    free(fx->t);
    fx->t = NULL;
    fx->n = 0;
}

const dt_fx_tensor *dt_fixture_get(const dt_fixture *fx, const char *name) {
    for (int i = 0; i < fx->n; i++)
        if (strcmp(fx->t[i].name, name) == 0) return &fx->t[i];
    return NULL;
}

const float *dt_fixture_f32(const dt_fixture *fx, const char *name, size_t count) {
    const dt_fx_tensor *t = dt_fixture_get(fx, name);
    if (!t || t->dtype != 0 || (count && t->count != count)) return NULL;
    return t->data;
}

static int load_table(const dt_fixture *fx, const char *prefix, const char *kind,
                      const dt_param_slice *s, float *dst) {
    char key[256];
    snprintf(key, sizeof key, "%s%s.%s", prefix, kind, s->name);
    const dt_fx_tensor *t = dt_fixture_get(fx, key);
    if (!t || t->dtype != 0) return DT_ERR(DT_ERR_MISMATCH, "fixture lacks float32 %s", key);
    int same = t->ndim == s->ndim;
    for (int d = 0; same && d < s->ndim; d++) same = t->shape[d] == s->shape[d];
    if (!same) return DT_ERR(DT_ERR_MISMATCH, "fixture %s has another shape", key);
    memcpy(dst + s->offset, t->data, s->count * sizeof(float));
    return DT_OK;
}

int dt_fixture_load_model(const dt_fixture *fx, dt_model *m, const char *prefix) {
    for (int i = 0; i < dt_model_num_slices(m); i++) {
        int rc = load_table(fx, prefix, "param", dt_model_slice(m, i), dt_model_params(m));
        if (rc) return rc;
    }
    for (int i = 0; i < dt_model_num_buffer_slices(m); i++) {
        int rc = load_table(fx, prefix, "buffer", dt_model_buffer_slice(m, i),
                            dt_model_buffers(m));
        if (rc) return rc;
    }
    return DT_OK;
}

static void le32w(unsigned char *b, uint32_t v) {
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
}

int dt_fixture_write(const char *path, const dt_fx_tensor *t, int n) {
    FILE *f = fopen(path, "wb");
    if (!f) return DT_ERR(DT_ERR_IO, "cannot create %s", path);
    unsigned char h[12];
    memcpy(h, "DTFX", 4);
    le32w(h + 4, 1);
    le32w(h + 8, (uint32_t)n);
    int ok = fwrite(h, 1, 12, f) == 12;
    for (int i = 0; ok && i < n; i++) {
        unsigned char b[8];
        size_t nl = strlen(t[i].name), esize = t[i].dtype == 5 ? 1 : 4;
        le32w(b, (uint32_t)nl);
        ok = fwrite(b, 1, 4, f) == 4 && fwrite(t[i].name, 1, nl, f) == nl;
        le32w(b, (uint32_t)t[i].dtype);
        le32w(b + 4, (uint32_t)t[i].ndim);
        ok = ok && fwrite(b, 1, 8, f) == 8;
        for (int d = 0; ok && d < t[i].ndim; d++) {
            le32w(b, (uint32_t)((uint64_t)t[i].shape[d] & 0xffffffffu));
            le32w(b + 4, (uint32_t)((uint64_t)t[i].shape[d] >> 32));
            ok = fwrite(b, 1, 8, f) == 8;
        }
        ok = ok && fwrite(t[i].data, esize, t[i].count, f) == t[i].count;
    }
    if (fclose(f) != 0) ok = 0;
    return ok ? DT_OK : DT_ERR(DT_ERR_IO, "cannot write %s", path);
}

double dt_fx_rel_err(const float *a, const float *b, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > num || d != d) num = d;
        if (fabs((double)b[i]) > den) den = fabs((double)b[i]);
    }
    return num / (den > 1e-12 ? den : 1e-12);
}
