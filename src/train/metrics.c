/* src/train/metrics.c - the trainer's JSON-lines metrics file (see metrics.h). */
#include "train/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "core/error.h"
#include "dtrain/mem.h"

/* ---- one record: a flat JSON object built in a buffer ------------------------- */
typedef struct rec {
    char buf[16384];
    size_t n;
    int overflow;
} rec;

static void put(rec *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(rec *r, const char *fmt, ...) {
    if (r->overflow) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(r->buf + r->n, sizeof r->buf - r->n, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof r->buf - r->n) r->overflow = 1;
    else r->n += (size_t)k;
}

/* Keys and string values are the trainer's own ASCII names: no escaping is
 * needed; anything else is replaced so the line stays valid JSON. */
static void put_str(rec *r, const char *s) {
    put(r, "\"");
    for (; *s; s++) put(r, "%c", (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) ? '_' : *s);
    put(r, "\"");
}

/* Any bytes as a JSON string: control characters, quotes and backslashes
 * escaped, bytes >= 0x80 written as the code points U+0080..U+00FF. */
static void put_bytes(rec *r, const char *s, size_t n) {
    put(r, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') put(r, "\\%c", c);
        else if (c == '\n') put(r, "\\n");
        else if (c < 0x20 || c >= 0x7f) put(r, "\\u%04x", c);
        else put(r, "%c", c);
    }
    put(r, "\"");
}

static void begin(rec *r, const char *type) {
    r->n = 0;
    r->overflow = 0;
    put(r, "{\"type\":");
    put_str(r, type);
}

static void key(rec *r, const char *k) {
    put(r, ",");
    put_str(r, k);
    put(r, ":");
}

static void field_int(rec *r, const char *k, long long v) {
    key(r, k);
    put(r, "%lld", v);
}

/* fmt: a printf conversion for a double ("%.9g"); NaN and infinities, which
 * JSON lacks, are written as null. */
static void field_num(rec *r, const char *k, const char *fmt, double v) {
    key(r, k);
    if (isfinite(v)) put(r, fmt, v);
    else put(r, "null");
}

static void field_str(rec *r, const char *k, const char *v) {
    key(r, k);
    put_str(r, v);
}

static void fail(dt_metrics *m, int e) {
    if (m->err) return;
    m->err = e ? e : EIO;
    fprintf(stderr, "dtrain: writing the JSON metrics file '%s' failed: %s; training goes on without it and the "
                    "run will end with an error\n", m->path, strerror(m->err));
    fflush(stderr);
}

/* One line, flushed at once: a full disk is noticed at the record that hit it. */
static void end(dt_metrics *m, rec *r) {
    put(r, "}\n");
    if (r->overflow) { fail(m, EOVERFLOW); return; }
    errno = 0;
    if (fwrite(r->buf, 1, r->n, m->f) != r->n || fflush(m->f) != 0) fail(m, errno);
}

/* ---- the file --------------------------------------------------------------- */
int dtm_open(dt_metrics *m, const char *path) {
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", path);
    m->f = fopen(path, "w");
    if (!m->f) return DT_ERR(DT_ERR_IO, "cannot open JSON output '%s': %s", path, strerror(errno));
    return DT_OK;
}

int dtm_is_open(const dt_metrics *m) { return m->f != NULL; }

int dtm_status(const dt_metrics *m) {
    if (!m->err) return DT_OK;
    return DT_ERR(DT_ERR_IO, "writing the JSON metrics file '%s' failed: %s (records after the failure are missing)",
                  m->path, strerror(m->err));
}

int dtm_close(dt_metrics *m) {
    if (!m->f) return dtm_status(m);
    errno = 0;
    if (fflush(m->f) != 0 || ferror(m->f)) fail(m, errno);
    errno = 0;
    if (fclose(m->f) != 0) fail(m, errno);
    m->f = NULL;
    return dtm_status(m);
}

/* ---- the records ------------------------------------------------------------ */
#define WRITABLE(m) ((m)->f && !(m)->err)

void dtm_step(dt_metrics *m, long step, int epoch, long long epoch_pos, double loss, double lr, double time_s) {
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

void dtm_epoch(dt_metrics *m, int epoch, long steps, double loss, double train_acc, double samples_per_s,
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

void dtm_eval(dt_metrics *m, long step, int epoch, double train_loss, double tokens_per_s, int eval,
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

void dtm_sample(dt_metrics *m, long step, const char *prompt, const char *text, size_t n, double temperature) {
    if (!WRITABLE(m)) return;
    rec r;
    begin(&r, "sample");
    field_int(&r, "step", step);
    field_num(&r, "temperature", "%.6g", temperature);
    key(&r, "prompt");
    put_bytes(&r, prompt, strlen(prompt));
    /* a record is at most 16 KiB: the first 2048 bytes of a longer sample */
    key(&r, "text");
    put_bytes(&r, text, n < 2048 ? n : 2048);
    if (n > 2048) field_int(&r, "text_bytes", (long long)n);
    end(m, &r);
}

void dtm_memory(dt_metrics *m, const char *when, size_t num_params, int ranks, int zero_opt_level,
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

void dtm_summary(dt_metrics *m, long steps, int ranks, int zero_opt_level, double median_step_s,
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
