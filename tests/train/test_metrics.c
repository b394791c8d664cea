/* The trainer's JSON-lines metrics (src/train/metrics.c): every record's keys
 * in their order, compact lines, NaN/inf as null, and every number the value
 * the record's printf conversion ("%.9g", "%.6f", ...) gave it before jansson
 * wrote the file: read back, each equals strtod of that conversion's text. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>
#include "dtrain/mem.h"
#include "testutil.h"
#include "train/metrics.h"

static char g_path[] = "/tmp/dtrain_metrics_XXXXXX";

static char *slurp(void) {
    FILE *f = fopen(g_path, "r");
    static char buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    return buf;
}

/* strtod(printf(fmt, v)): the value the hand-written writer put in the file */
static double as_printed(const char *fmt, double v) {
    char b[64];
    snprintf(b, sizeof b, fmt, v);
    return strtod(b, NULL);
}

/* Every number of the step/epoch/summary records, for many magnitudes. */
static void check_values(void) {
    dt_metrics m;
    CHECK_OK(dt_metrics_open(&m, g_path, NULL));
    unsigned long long s = 12345;
    double vals[600];
    for (int i = 0; i < 600; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double mant = (double)(s >> 11) / (double)(1ull << 53);
        vals[i] = mant * pow(10.0, (double)(i % 19) - 9); /* 1e-9 .. 1e9 */
        if (i % 7 == 0) vals[i] = floor(vals[i]);         /* integral values too */
        if (i % 11 == 0) vals[i] = (float)vals[i];         /* losses are floats */
    }
    for (int i = 0; i < 600; i += 6) {
        dt_metrics_step(&m, i, 0, i, vals[i], vals[i + 1], vals[i + 2], -1, vals[i + 3], -1);
        dt_metrics_epoch(&m, i, i, vals[i], vals[i + 1], vals[i + 2], vals[i + 3], 1, vals[i + 4], vals[i + 5], vals[i + 5]);
        dt_metrics_summary(&m, i, 2, 1, vals[i], vals[i + 1], vals[i + 2], vals[i + 3], vals[i + 4], vals[i + 5], vals[i + 2], -1);
    }
    CHECK_OK(dt_metrics_close(&m));
    static const struct { const char *type, *key, *fmt; int arg; } k[] = {
        {"step", "loss", "%.9g", 0}, {"step", "lr", "%.9g", 1}, {"step", "time_s", "%.6f", 2},
        {"epoch", "loss", "%.9g", 0}, {"epoch", "train_acc", "%.6f", 1}, {"epoch", "samples_per_s", "%.1f", 2},
        {"epoch", "time_s", "%.3f", 3}, {"epoch", "test_loss", "%.9g", 4}, {"epoch", "test_acc", "%.6f", 5},
        {"summary", "median_step_s", "%.6f", 0}, {"summary", "comm_hidden", "%.4f", 1},
        {"summary", "comm_hidden_compute", "%.4f", 2}, {"summary", "grad_norm", "%.6g", 3},
        {"summary", "test_acc", "%.6f", 4}, {"epoch", "tokens_per_s", "%.1f", 5},
        {"summary", "test_loss", "%.9g", 5}, {"summary", "tokens_per_s", "%.1f", 2}};
    char *text = slurp(), *save = NULL;
    int line = 0, wrong = 0, seen = 0;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save), line++) {
        json_error_t e;
        json_t *r = json_loads(l, JSON_REJECT_DUPLICATES, &e);
        CHECK(r != NULL, "line %d is JSON: %s", line, e.text);
        int i = (line / 3) * 6;
        for (size_t j = 0; r && j < sizeof k / sizeof *k; j++) {
            if (strcmp(json_string_value(json_object_get(r, "type")), k[j].type)) continue;
            double want = as_printed(k[j].fmt, vals[i + k[j].arg]), got = json_number_value(json_object_get(r, k[j].key));
            seen++;
            if (memcmp(&want, &got, sizeof want) != 0 && wrong++ < 5)
                CHECK(0, "%s %s: %s of %.17g is %.17g, file has %.17g", k[j].type, k[j].key, k[j].fmt, vals[i + k[j].arg],
                      want, got);
        }
        json_decref(r);
    }
    CHECK(line == 300 && seen == 100 * 17, "%d lines, %d values", line, seen);
    CHECK(wrong == 0, "%d values differ from their printf text", wrong);
}

int main(void) {
    int fd = mkstemp(g_path);
    close(fd);
    dt_metrics m;
    /* exact lines: the format tools read ('"type":"step"' is grepped for) */
    CHECK_OK(dt_metrics_open(&m, g_path, NULL));
    dt_metrics_step(&m, 1, 0, 64, (double)2.3012135f, (double)0.001f, 0.000781, -1, 327680.0, -1);
    dt_metrics_step(&m, 2, 0, 128, NAN, INFINITY, 12.5, 0.5, 5.12, 0.4512);
    dt_metrics_epoch(&m, 0, 16, 1.25, 0.5, 1234.56, 2.0, 1, 0.75, 1.0, 1234.56);
    dt_metrics_epoch(&m, 1, 16, 1.0, 0.25, 10.04, 2.5, 0, 0, 0, 10.04);
    dt_metrics_summary(&m, 32, 2, 3, 0.0123456, 0.5, 0.25, 3.5e-5, NAN, 2.5, 99.96, 0.25);
    CHECK(dt_metrics_is_open(&m), "open");
    CHECK_OK(dt_metrics_close(&m));
    const char *want =
        "{\"type\":\"step\",\"step\":1,\"epoch\":0,\"epoch_pos\":64,\"loss\":2.3012135,\"lr\":0.00100000005,\"time_s\":0.000781,"
        "\"tokens_per_s\":327680.0}\n"
        "{\"type\":\"step\",\"step\":2,\"epoch\":0,\"epoch_pos\":128,\"loss\":null,\"lr\":null,\"time_s\":12.5,\"grad_norm\":0.5,\"tokens_per_s\":5.1,\"mfu\":0.4512}\n"
        "{\"type\":\"epoch\",\"epoch\":0,\"steps\":16,\"loss\":1.25,\"train_acc\":0.5,\"samples_per_s\":1234.6,"
        "\"tokens_per_s\":1234.6,\"time_s\":2.0,\"test_loss\":0.75,\"test_acc\":1.0}\n"
        "{\"type\":\"epoch\",\"epoch\":1,\"steps\":16,\"loss\":1.0,\"train_acc\":0.25,\"samples_per_s\":10.0,\"tokens_per_s\":10.0,"
        "\"time_s\":2.5}\n"
        "{\"type\":\"summary\",\"steps\":32,\"ranks\":2,\"zero_opt_level\":3,\"median_step_s\":0.012346,"
        "\"comm_hidden\":0.5,\"comm_hidden_compute\":0.25,\"grad_norm\":3.5e-5,\"test_acc\":null,"
        "\"test_loss\":2.5,\"tokens_per_s\":100.0,\"mfu\":0.25}\n";
    const char *got = slurp();
    CHECK(strcmp(got, want) == 0, "records:\n%s\nwant:\n%s", got, want);
    /* the memory record: every category, current, peak, and their device parts */
    CHECK_OK(dt_metrics_open(&m, g_path, NULL));
    dt_metrics_memory(&m, 0, "start", 1000, 4, 2, NULL, 0, 0);
    CHECK_OK(dt_metrics_close(&m));
    char wantm[1024];
    int n = snprintf(wantm, sizeof wantm, "{\"type\":\"memory\",\"when\":\"start\",\"num_params\":1000,\"ranks\":4,\"zero_opt_level\":2");
    for (int c = 0; c < DT_MEM_NUM; c++)
        n += snprintf(wantm + n, sizeof wantm - (size_t)n, ",\"%s\":%lld,\"%s_peak\":%lld,\"%s_device\":%lld,\"%s_device_peak\":%lld",
                      dt_mem_category_name((dt_mem_category)c), (long long)dt_mem_current((dt_mem_category)c),
                      dt_mem_category_name((dt_mem_category)c), (long long)dt_mem_peak((dt_mem_category)c),
                      dt_mem_category_name((dt_mem_category)c), (long long)dt_mem_device_current((dt_mem_category)c),
                      dt_mem_category_name((dt_mem_category)c), (long long)dt_mem_device_peak((dt_mem_category)c));
    snprintf(wantm + n, sizeof wantm - (size_t)n, "}\n");
    got = slurp();
    CHECK(strcmp(got, wantm) == 0, "memory record:\n%s\nwant:\n%s", got, wantm);
    /* the sample record: any bytes, each read as the code point of its value */
    CHECK_OK(dt_metrics_open(&m, g_path, NULL));
    const int32_t prompt[] = {'Q', ':', ' ', '"', 'x', '"'}, text[] = {'c', 'a', 'f', 0xe9, '\n', 1, '\\', 0};
    dt_metrics_sample(&m, 7, 0.8, prompt, 6, text, 8, 1);
    const int32_t ids[] = {50256, 464, 0};
    dt_metrics_sample(&m, 9, 0, ids, 1, ids + 1, 2, 0); /* a vocabulary that is not bytes: ids only */
    dt_metrics_memory(&m, 3, "end", 10, 1, 0, "nccl", 4096, 1024);
    CHECK_OK(dt_metrics_close(&m));
    got = slurp();
    CHECK(strstr(got, "{\"type\":\"sample\",\"step\":7,\"temperature\":0.8,\"prompt\":\"Q: \\\"x\\\"\","
                      "\"text\":\"caf\xc3\xa9\\n\\u0001\\\\\\u0000\",\"prompt_tokens\":[81,58,32,34,120,34],"
                      "\"tokens\":[99,97,102,233,10,1,92,0],\"num_tokens\":8}\n"
                      "{\"type\":\"sample\",\"step\":9,\"temperature\":0.0,\"prompt_tokens\":[50256],"
                      "\"tokens\":[464,0],\"num_tokens\":2}\n") == got, "sample records:\n%s", got);
    CHECK(strstr(got, "\"zero_opt_level\":0,\"device_path\":\"nccl\",\"params\":") != NULL, "the device path:\n%s", got);
    CHECK(strstr(got, ",\"activations_recompute_off\":4096,\"activations_recompute_on\":1024}\n") != NULL,
          "memory record with activations:\n%s", got);
    /* a record longer than the stack buffer: the first 2048 tokens, the count */
    int32_t *many = malloc(3000 * sizeof *many);
    for (int i = 0; many && i < 3000; i++) many[i] = 50000 + i % 7;
    CHECK_OK(dt_metrics_open(&m, g_path, NULL));
    if (many) dt_metrics_sample(&m, 3, 1.0, ids, 1, many, 3000, 0);
    CHECK_OK(dt_metrics_close(&m));
    free(many);
    got = slurp();
    const char *tail = strstr(got, ",50003],\"num_tokens\":3000}\n");
    int commas = 0;
    for (const char *p = got; *p; p++) commas += *p == ',';
    CHECK(tail && strchr(tail + 1, '\n') == tail + strlen(tail) - 1 && commas == 2047 + 5,
          "a long sample record: one line, 2048 tokens (%d commas):\n%.200s...", commas, got);
    check_values();
    /* the TensorBoard records' checksum: CRC32C's check value, and TFRecord's mask */
    CHECK(dtio_crc32c(0, "123456789", 9) == 0xE3069283u, "crc32c check value");
    CHECK(dtio_crc32c(dtio_crc32c(0, "1234", 4), "56789", 5) == 0xE3069283u, "crc32c continued");
    CHECK(dtio_crc32c_mask(0) == 0xa282ead8u, "masked crc");
    /* not open: every call a no-op */
    dt_metrics none = {0};
    dt_metrics_step(&none, 1, 0, 0, 1, 1, 1, 1, 1, 1);
    CHECK(!dt_metrics_is_open(&none) && dt_metrics_close(&none) == DT_OK, "closed metrics");
    unlink(g_path);
    return dt_test_finish("train_metrics");
}
