/* src/train/metrics.c - the trainer's JSON-lines metrics file (see metrics.h). */
#include "train/metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "dtrain/mem.h"
#include "io/json.h"

/* ---- one record: a flat JSON object, encoded by jansson ------------------------ */
typedef struct rec {
    json_t *o;
    int bad; /* out of memory */
} rec;

static void field(rec *r, const char *k, json_t *v) { r->bad |= json_object_set_new(r->o, k, v) != 0; }

/* Any bytes as a JSON string: each byte is the code point of the same value
 * (bytes >= 0x80 become U+0080..U+00FF, encoded as UTF-8, which jansson
 * requires), so no byte of a generated sample is lost or makes the line
 * invalid; jansson escapes quotes, backslashes and control characters. */
static void field_bytes(rec *r, const char *k, const char *s, size_t n) {
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

static void begin(rec *r, const char *type) {
    r->o = json_object();
    r->bad = 0;
    field(r, "type", json_string(type));
}

static void field_int(rec *r, const char *k, long long v) { field(r, k, json_integer(v)); }

/* fmt: the printf conversion ("%.9g", "%.6f") that gives the value its
 * resolution, as the records always had; NaN and infinities, which JSON lacks,
 * are written as null. */
static void field_num(rec *r, const char *k, const char *fmt, double v) { field(r, k, dtj_real_as(v, fmt)); }

static void field_str(rec *r, const char *k, const char *v) { field(r, k, json_string(v)); }

static void fail(dt_metrics *m, int e) {
    if (m->err) return;
    m->err = e ? e : EIO;
    fprintf(stderr, "dtrain: writing the JSON metrics file '%s' failed: %s; training goes on without it and the "
                    "run will end with an error\n", m->path, strerror(m->err));
    fflush(stderr);
}

/* One line, compact, written and flushed at once: a full disk is noticed at
 * the record that hit it. */
static void end(dt_metrics *m, rec *r) {
    char buf[2048];
    size_t n = r->bad ? 0 : json_dumpb(r->o, buf, sizeof buf - 1, JSON_COMPACT | DTJ_REAL_DIGITS);
    json_decref(r->o);
    if (n == 0) { fail(m, ENOMEM); return; }
    if (n > sizeof buf - 1) { fail(m, EOVERFLOW); return; }
    buf[n++] = '\n';
    errno = 0;
    if (fwrite(buf, 1, n, m->f) != n || fflush(m->f) != 0) fail(m, errno);
}

/* ---- the file --------------------------------------------------------------- */
int dt_metrics_open(dt_metrics *m, const char *path) {
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", path);
    m->f = fopen(path, "w");
    if (!m->f) return DT_ERR(DT_ERR_IO, "cannot open JSON output '%s': %s", path, strerror(errno));
    return DT_OK;
}

int dt_metrics_is_open(const dt_metrics *m) { return m->f != NULL; }

int dt_metrics_status(const dt_metrics *m) {
    if (!m->err) return DT_OK;
    return DT_ERR(DT_ERR_IO, "writing the JSON metrics file '%s' failed: %s (records after the failure are missing)",
                  m->path, strerror(m->err));
}

int dt_metrics_close(dt_metrics *m) {
    if (!m->f) return dt_metrics_status(m);
    errno = 0;
    if (fflush(m->f) != 0 || ferror(m->f)) fail(m, errno);
    errno = 0;
    if (fclose(m->f) != 0) fail(m, errno);
    m->f = NULL;
    return dt_metrics_status(m);
}

/* ---- the records ------------------------------------------------------------ */
#define WRITABLE(m) ((m)->f && !(m)->err)

void dt_metrics_step(dt_metrics *m, long step, int epoch, long long epoch_pos, double loss, double lr, double time_s) {
    if (!WRITABLE(m)) return;
    rec r;
    begin(&r, "step");
    field_int(&r, "step", step);
    field_int(&r, "epoch", epoch);
    field_int(&r, "epoch_pos", epoch_pos);
    field_num(&r, "loss", "%.9g", loss);
    field_num(&r, "lr", "%.9g", lr);
    field_num(&r, "time_s", "%.6f", time_s);
    end(m, &r);
}

void dt_metrics_epoch(dt_metrics *m, int epoch, long steps, double loss, double train_acc, double samples_per_s,
                      double time_s, int eval, double test_loss, double test_acc, double tokens_per_s) {
    if (!WRITABLE(m)) return;
    rec r;
    begin(&r, "epoch");
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
    end(m, &r);
}

void dt_metrics_eval(dt_metrics *m, long step, int epoch, double train_loss, double tokens_per_s, int eval,
                     double test_loss, double test_acc) {
    if (!WRITABLE(m)) return;
    rec r;
    begin(&r, "eval");
    field_int(&r, "step", step);
    field_int(&r, "epoch", epoch);
    field_num(&r, "loss", "%.9g", train_loss);
    field_num(&r, "tokens_per_s", "%.1f", tokens_per_s);
    if (eval) {
        field_num(&r, "test_loss", "%.9g", test_loss);
        field_num(&r, "test_acc", "%.6f", test_acc);
    }
    end(m, &r);
}

void dt_metrics_sample(dt_metrics *m, long step, const char *prompt, const char *text, size_t n, double temperature) {
    if (!WRITABLE(m)) return;
    rec r;
    begin(&r, "sample");
    field_int(&r, "step", step);
    field_num(&r, "temperature", "%.6g", temperature);
    field_bytes(&r, "prompt", prompt, strlen(prompt));
    /* the first 2048 bytes of a longer sample */
    field_bytes(&r, "text", text, n < 2048 ? n : 2048);
    if (n > 2048) field_int(&r, "text_bytes", (long long)n);
    end(m, &r);
}

void dt_metrics_memory(dt_metrics *m, const char *when, size_t num_params, int ranks, int zero_opt_level,
                       size_t act_off, size_t act_on) {
    if (!WRITABLE(m)) return;
    rec r;
    begin(&r, "memory");
    field_str(&r, "when", when);
    field_int(&r, "num_params", (long long)num_params);
    field_int(&r, "ranks", ranks);
    field_int(&r, "zero_opt_level", zero_opt_level);
    for (int c = 0; c < DT_MEM_NUM; c++) {
        char peak[64];
        const char *name = dt_mem_category_name((dt_mem_category)c);
        snprintf(peak, sizeof peak, "%s_peak", name);
        field_int(&r, name, dt_mem_current((dt_mem_category)c));
        field_int(&r, peak, dt_mem_peak((dt_mem_category)c));
    }
    if (act_off || act_on) {
        field_int(&r, "activations_recompute_off", (long long)act_off);
        field_int(&r, "activations_recompute_on", (long long)act_on);
    }
    end(m, &r);
}

void dt_metrics_summary(dt_metrics *m, long steps, int ranks, int zero_opt_level, double median_step_s,
                        double comm_hidden, double comm_hidden_compute, double grad_norm, double test_acc,
                        double test_loss, double tokens_per_s) {
    if (!WRITABLE(m)) return;
    rec r;
    begin(&r, "summary");
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
    end(m, &r);
}
