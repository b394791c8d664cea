/* Chrome trace writer: events recorded only while open, valid structure,
 * names sanitised, unwritable path refused up front. */
#include <stdlib.h>
#include <unistd.h>
#include "dtrain/trace.h"
#include "testutil.h"

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
    dt_trace_event("bad\"name", "comm", DT_TRACE_COMM, 30, 20); /* negative span clamps to 0 */
    CHECK_OK(dt_trace_close());
    FILE *f = fopen(path, "r");
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    CHECK(strstr(buf, "\"traceEvents\"") != NULL, "has traceEvents");
    CHECK(strstr(buf, "\"name\":\"forward fc1\",\"cat\":\"compute\",\"ph\":\"X\",\"pid\":3,\"tid\":0,\"ts\":10.000,\"dur\":15.000") != NULL, "event: %s", buf);
    CHECK(strstr(buf, "bad_name") != NULL && strstr(buf, "\"dur\":0.000") != NULL, "sanitised");
    CHECK(strstr(buf, "dropped") == NULL, "events while off are not recorded");
    unlink(path);
    CHECK_ERR(dt_trace_open("/nonexistent/dir/t.json", 0), DT_ERR_IO, "/nonexistent/dir/t.json");
    CHECK_ERR(dt_trace_open(NULL, 0), DT_ERR_INVALID, "NULL");
    return dt_test_finish("core_trace");
}
