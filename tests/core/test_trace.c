/* Chrome trace writer: events recorded only while open; the file is valid
 * JSON (read back with jansson) with every event's fields, names escaped,
 * times to the nanosecond; unwritable path refused up front. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>
#include "dtrain/trace.h"
#include "testutil.h"

static const json_t *event(const json_t *root, size_t i) {
    return json_array_get(json_object_get(root, "traceEvents"), i);
}

static double num(const json_t *ev, const char *key) { return json_number_value(json_object_get(ev, key)); }

int main(void) {
    double t0 = dt_trace_now_us();
    CHECK(dt_trace_now_us() >= t0, "monotonic");
    dt_trace_event("dropped", "x", 0, 1, 2); /* off: ignored */
    CHECK(!dt_trace_enabled(), "off by default");
    char path[] = "/tmp/dtrain_trace_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECK_OK(dt_trace_open(path, 3));
    CHECK(dt_trace_enabled(), "on");
    dt_trace_event("forward fc1", "compute", DT_TRACE_COMPUTE, 10, 25);
    dt_trace_event("bad\"name\\\n", "comm", DT_TRACE_COMM, 30, 20); /* negative span clamps to 0 */
    dt_trace_event("t", "compute", 0, 1234567.1234567, 1234567.1234567 + 0.7770004);
    dt_trace_event("late", "compute", 0, 98765432109876.5, 98765432109877.25); /* months of uptime */
    char cut[64];
    memset(cut, 'a', 46);
    strcpy(cut + 46, "\xc3\xa9z"); /* 'é' crosses the 47 bytes an event keeps */
    dt_trace_event(cut, "compute", 0, 1, 2);
    CHECK_OK(dt_trace_close());

    json_error_t e;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
    CHECK(root != NULL, "trace is JSON: line %d: %s", e.line, e.text);
    CHECK(json_is_string(json_object_get(root, "displayTimeUnit")), "displayTimeUnit");
    CHECK(json_array_size(json_object_get(root, "traceEvents")) == 3 + 5, "3 metadata + 5 events, 'dropped' not recorded");
    const json_t *m = event(root, 0);
    CHECK(!strcmp(json_string_value(json_object_get(m, "name")), "process_name") && num(m, "pid") == 3 &&
              !strcmp(json_string_value(json_object_get(json_object_get(m, "args"), "name")), "rank 3"),
          "process name");
    const json_t *a = event(root, 3), *b = event(root, 4), *c = event(root, 5), *d = event(root, 6), *x = event(root, 7);
    CHECK(!strcmp(json_string_value(json_object_get(a, "name")), "forward fc1") &&
              !strcmp(json_string_value(json_object_get(a, "cat")), "compute") &&
              !strcmp(json_string_value(json_object_get(a, "ph")), "X") && num(a, "pid") == 3 && num(a, "tid") == 0 &&
              num(a, "ts") == 10 && num(a, "dur") == 15,
          "event a");
    CHECK(!strcmp(json_string_value(json_object_get(b, "name")), "bad\"name\\\n") && num(b, "tid") == 1 &&
              num(b, "dur") == 0,
          "event b: name escaped, not altered; span clamped");
    CHECK(num(c, "ts") == 1234567.123 && num(c, "dur") == 0.777, "nanoseconds: ts %.9f dur %.9f", num(c, "ts"),
          num(c, "dur"));
    CHECK(num(d, "ts") == 98765432109876.5 && num(d, "dur") == 0.75, "large ts %.3f", num(d, "ts"));
    const char *xn = json_string_value(json_object_get(x, "name"));
    CHECK(xn && strlen(xn) == 47 && xn[46] == '_', "cut UTF-8 name replaced: %s", xn ? xn : "(null)");
    json_decref(root);
    /* one event per line, keys in the format's order */
    FILE *f = fopen(path, "r");
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    CHECK(strstr(buf, "\n{\"name\":\"forward fc1\",\"cat\":\"compute\",\"ph\":\"X\",\"pid\":3,\"tid\":0,\"ts\":10.0,"
                      "\"dur\":15.0},\n") != NULL,
          "event line: %s", buf);
    unlink(path);
    CHECK_ERR(dt_trace_open("/nonexistent/dir/t.json", 0), DT_ERR_IO, "/nonexistent/dir/t.json");
    CHECK_ERR(dt_trace_open(NULL, 0), DT_ERR_INVALID, "NULL");
    return dt_test_finish("core_trace");
}
