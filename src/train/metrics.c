/* src/train/metrics.c - the trainer's metrics: the JSON-lines file and the
 * TensorBoard event file (see metrics.h). */
#include "train/metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "dtrain/mem.h"
#include "io/json.h"

#define JSON_OK(m) ((m)->f && !(m)->err)
#define TB_OK(m) ((m)->tb.f && !(m)->tb.err)
#define WRITABLE(m) (JSON_OK(m) || TB_OK(m))

/* ---- one record: a flat JSON object, encoded by jansson, and the same
 * numbers as one TensorBoard event of scalars tagged "<type>/<key>" -------- */
typedef struct rec {
    dt_metrics *m;
    json_t *o;        /* NULL: no JSON sink */
    int bad;          /* out of memory */
    int curves;       /* its numbers go to TensorBoard too */
    const char *type;
} rec;

static void field(rec *r, const char *k, json_t *v) { r->bad |= json_object_set_new(r->o, k, v) != 0; }

/* A number of a curve: to TensorBoard as a scalar (the value as computed;
 * TensorBoard keeps float32) */
static void scalar(rec *r, const char *k, double v) {
    if (!r->curves) return;
    char tag[96];
    snprintf(tag, sizeof tag, "%s/%s", r->type, k);
    dtio_tfe_scalar(&r->m->tb, tag, v);
}

/* Any bytes as a JSON string: each byte is the code point of the same value
 * (bytes >= 0x80 become U+0080..U+00FF, encoded as UTF-8, which jansson
 * requires), so no byte of a generated sample is lost or makes the line
 * invalid; jansson escapes quotes, backslashes and control characters. */
static void field_bytes(rec *r, const char *k, const char *s, size_t n) {
    if (!r->o) return;
    char *u = malloc(2 * n + 1);
    if (!u) {
        r->bad = 1;
        return;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) u[m++] = (char)c;
        else {
            u[m++] = (char)(0xc0 | (c >> 6));
            u[m++] = (char)(0x80 | (c & 0x3f));
        }
    }
    field(r, k, json_stringn(u, m));
    free(u);
}

/* step: the event's step (TensorBoard's x axis); curves: whether its numbers
 * are curves (not the summary's one-off figures, some of which are -1 for
 * "not measured") */
static void begin(rec *r, dt_metrics *m, const char *type, long step, int curves) {
    r->m = m;
    r->type = type;
    r->bad = 0;
    r->curves = curves && TB_OK(m);
    r->o = JSON_OK(m) ? json_object() : NULL;
    if (r->o) field(r, "type", json_string(type));
    else if (JSON_OK(m)) r->bad = 1;
    if (r->curves) dtio_tfe_begin(&m->tb, step);
}

/* an integer of the record (a counter: JSON only) */
static void field_int(rec *r, const char *k, long long v) {
    if (r->o) field(r, k, json_integer(v));
}

/* an integer that is also a curve (bytes of memory) */
static void field_int_scalar(rec *r, const char *k, long long v) {
    field_int(r, k, v);
    scalar(r, k, (double)v);
}

/* fmt: the printf conversion ("%.9g", "%.6f") that gives the value its
 * resolution in the JSON, as the records always had; NaN and infinities,
 * which JSON lacks, are written as null there (TensorBoard takes them). */
static void field_num(rec *r, const char *k, const char *fmt, double v) {
    if (r->o) field(r, k, dtj_real_as(v, fmt));
    scalar(r, k, v);
}

static void field_str(rec *r, const char *k, const char *v) {
    if (r->o) field(r, k, json_string(v));
}

static void fail(dt_metrics *m, int e) {
    if (m->err) return;
    m->err = e ? e : EIO;
    fprintf(stderr, "dtrain: writing the JSON metrics file '%s' failed: %s; training goes on without it and the "
                    "run will end with an error\n", m->path, strerror(m->err));
    fflush(stderr);
}

static void tb_failed(const dt_metrics *m) {
    fprintf(stderr, "dtrain: writing the TensorBoard event file '%s' failed: %s; training goes on without it and "
                    "the run will end with an error\n", m->tb.path, strerror(m->tb.err));
    fflush(stderr);
}

/* One line, compact, written and flushed at once: a full disk is noticed at
 * the record that hit it; the event likewise. A record longer than the stack
 * buffer (a sample's tokens) is encoded into the heap. */
static void end(rec *r) {
    dt_metrics *m = r->m;
    if (r->curves && TB_OK(m) && dtio_tfe_end(&m->tb)) tb_failed(m);
    if (!JSON_OK(m)) {
        if (r->o) json_decref(r->o);
        return;
    }
    char stack[2048], *buf = stack;
    const size_t flags = JSON_COMPACT | DTJ_REAL_DIGITS;
    size_t n = r->bad ? 0 : json_dumpb(r->o, buf, sizeof stack - 1, flags);
    if (n > sizeof stack - 1) {
        buf = malloc(n + 1);
        n = buf ? json_dumpb(r->o, buf, n, flags) : 0;
    }
    json_decref(r->o);
    if (n == 0) {
        if (buf != stack) free(buf);
        fail(m, ENOMEM);
        return;
    }
    buf[n++] = '\n';
    errno = 0;
    if (fwrite(buf, 1, n, m->f) != n || fflush(m->f) != 0) fail(m, errno);
    if (buf != stack) free(buf);
}

/* ---- the file --------------------------------------------------------------- */
int dt_metrics_open(dt_metrics *m, const char *json_path, const char *tb_dir) {
    memset(m, 0, sizeof *m);
    if (json_path && *json_path) {
        snprintf(m->path, sizeof m->path, "%s", json_path);
        m->f = fopen(json_path, "w");
        if (!m->f) return DT_ERR(DT_ERR_IO, "cannot open JSON output '%s': %s", json_path, strerror(errno));
    }
    if (tb_dir && *tb_dir) {
        int rc = dtio_tfe_open(&m->tb, tb_dir);
        if (rc) {
            if (m->f) fclose(m->f);
            m->f = NULL;
            return rc;
        }
    }
    return DT_OK;
}

int dt_metrics_is_open(const dt_metrics *m) { return m->f != NULL || m->tb.f != NULL; }

int dt_metrics_status(const dt_metrics *m) {
    if (m->err)
        return DT_ERR(DT_ERR_IO, "writing the JSON metrics file '%s' failed: %s (records after the failure are "
                                 "missing)", m->path, strerror(m->err));
    if (m->tb.err)
        return DT_ERR(DT_ERR_IO, "writing the TensorBoard event file '%s' failed: %s (events after the failure are "
                                 "missing)", m->tb.path, strerror(m->tb.err));
    return DT_OK;
}

int dt_metrics_close(dt_metrics *m) {
    if (m->tb.f) {
        int had = m->tb.err;
        if (dtio_tfe_close(&m->tb) && !had) tb_failed(m);
    }
    if (!m->f) return dt_metrics_status(m);
    errno = 0;
    if (fflush(m->f) != 0 || ferror(m->f)) fail(m, errno);
    errno = 0;
    if (fclose(m->f) != 0) fail(m, errno);
    m->f = NULL;
    return dt_metrics_status(m);
}

/* ---- the records ------------------------------------------------------------ */
void dt_metrics_step(dt_metrics *m, long step, int epoch, long long epoch_pos, double loss, double lr, double time_s,
              double grad_norm, double tokens_per_s, double mfu) {
    if (!WRITABLE(m)) return;
    rec r;
    begin(&r, m, "step", step, 1);
    field_int(&r, "step", step);
    field_int(&r, "epoch", epoch);
    field_int(&r, "epoch_pos", epoch_pos);
    field_num(&r, "loss", "%.9g", loss);
    field_num(&r, "lr", "%.9g", lr);
    field_num(&r, "time_s", "%.6f", time_s);
    if (grad_norm >= 0) field_num(&r, "grad_norm", "%.6g", grad_norm);
    field_num(&r, "tokens_per_s", "%.1f", tokens_per_s);
    if (mfu >= 0) field_num(&r, "mfu", "%.4f", mfu);
    end(&r);
}

void dt_metrics_epoch(dt_metrics *m, int epoch, long steps, double loss, double train_acc, double samples_per_s,
                      double time_s, int eval, double test_loss, double test_acc, double tokens_per_s) {
    if (!WRITABLE(m)) return;
    rec r;
    begin(&r, m, "epoch", steps, 1);
    field_int(&r, "epoch", epoch);
    field_int(&r, "steps", steps);
    field_num(&r, "loss", "%.9g", loss);
    field_num(&r, "train_acc", "%.6f", train_acc);
    field_num(&r, "samples_per_s", "%.1f", samples_per_s);
    field_num(&r, "tokens_per_s", "%.1f", tokens_per_s);
    field_num(&r, "time_s", "%.3f", time_s);
    if (eval) {
        field_num(&r, "test_loss", "%.9g", test_loss);
        field_num(&r, "test_acc", "%.6f", test_acc);
    }
    end(&r);
}

void dt_metrics_eval(dt_metrics *m, long step, int epoch, double train_loss, double tokens_per_s, int eval,
                     double test_loss, double test_acc) {
    if (!WRITABLE(m)) return;
    rec r;
    begin(&r, m, "eval", step, 1);
    field_int(&r, "step", step);
    field_int(&r, "epoch", epoch);
    field_num(&r, "loss", "%.9g", train_loss);
    field_num(&r, "tokens_per_s", "%.1f", tokens_per_s);
    if (eval) {
        field_num(&r, "test_loss", "%.9g", test_loss);
        field_num(&r, "test_acc", "%.6f", test_acc);
    }
    end(&r);
}

/* tokens as a JSON array of integers */
static void field_ids(rec *r, const char *k, const int32_t *t, size_t n) {
    if (!r->o) return; /* JSON only */
    json_t *a = json_array();
    r->bad |= a == NULL;
    for (size_t i = 0; a && i < n; i++) r->bad |= json_array_append_new(a, json_integer(t[i])) != 0;
    field(r, k, a);
}

/* tokens of a byte vocabulary as text (each token is one byte) */
static void field_text(rec *r, const char *k, const int32_t *t, size_t n) {
    if (!r->o) return; /* JSON only */
    char *b = malloc(n ? n : 1);
    if (!b) {
        r->bad = 1;
        return;
    }
    for (size_t i = 0; i < n; i++) b[i] = (char)t[i];
    field_bytes(r, k, b, n);
    free(b);
}

void dt_metrics_sample(dt_metrics *m, long step, double temperature, const int32_t *prompt, size_t np,
                const int32_t *tokens, size_t n, int bytes) {
    if (!WRITABLE(m)) return;
    rec r;
    begin(&r, m, "sample", step, 1);
    field_int(&r, "step", step);
    field_num(&r, "temperature", "%.6g", temperature);
    /* the first 2048 tokens of a longer sample */
    const size_t shown = n < 2048 ? n : 2048;
    if (bytes) {
        field_text(&r, "prompt", prompt, np);
        field_text(&r, "text", tokens, shown);
        if (n > 2048) field_int(&r, "text_bytes", (long long)n);
    }
    field_ids(&r, "prompt_tokens", prompt, np);
    field_ids(&r, "tokens", tokens, shown);
    field_int(&r, "num_tokens", (long long)n);
    end(&r);
}

void dt_metrics_memory(dt_metrics *m, long step, const char *when, size_t num_params, int ranks, int zero_opt_level,
                       const char *device_path, size_t act_off, size_t act_on) {
    if (!WRITABLE(m)) return;
    rec r;
    begin(&r, m, "memory", step, 1);
    field_str(&r, "when", when);
    field_int(&r, "num_params", (long long)num_params);
    field_int(&r, "ranks", ranks);
    field_int(&r, "zero_opt_level", zero_opt_level);
    if (device_path) field_str(&r, "device_path", device_path); /* how device memory moves */
    for (int c = 0; c < DT_MEM_NUM; c++) {
        char peak[64], dev[64], dpeak[64];
        const char *name = dt_mem_category_name((dt_mem_category)c);
        snprintf(peak, sizeof peak, "%s_peak", name);
        snprintf(dev, sizeof dev, "%s_device", name);
        snprintf(dpeak, sizeof dpeak, "%s_device_peak", name);
        field_int_scalar(&r, name, dt_mem_current((dt_mem_category)c));
        field_int_scalar(&r, peak, dt_mem_peak((dt_mem_category)c));
        field_int_scalar(&r, dev, dt_mem_device_current((dt_mem_category)c)); /* the part in device memory */
        field_int_scalar(&r, dpeak, dt_mem_device_peak((dt_mem_category)c));
    }
    if (act_off || act_on) {
        field_int(&r, "activations_recompute_off", (long long)act_off);
        field_int(&r, "activations_recompute_on", (long long)act_on);
    }
    end(&r);
}

void dt_metrics_summary(dt_metrics *m, long steps, int ranks, int zero_opt_level, double median_step_s,
                 double comm_hidden, double comm_hidden_compute, double grad_norm, double test_acc,
                 double test_loss, double tokens_per_s, double mfu) {
    if (!WRITABLE(m)) return;
    rec r;
    begin(&r, m, "summary", steps, 0);
    field_int(&r, "steps", steps);
    field_int(&r, "ranks", ranks);
    field_int(&r, "zero_opt_level", zero_opt_level);
    field_num(&r, "median_step_s", "%.6f", median_step_s);
    field_num(&r, "comm_hidden", "%.4f", comm_hidden);
    field_num(&r, "comm_hidden_compute", "%.4f", comm_hidden_compute);
    field_num(&r, "grad_norm", "%.6g", grad_norm);
    field_num(&r, "test_acc", "%.6f", test_acc);
    field_num(&r, "test_loss", "%.9g", test_loss);
    field_num(&r, "tokens_per_s", "%.1f", tokens_per_s);
    if (mfu >= 0) field_num(&r, "mfu", "%.4f", mfu);
    end(&r);
}
