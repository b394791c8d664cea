/* core_status: status names, per-thread last error, dt_clear_error. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include "testutil.h"

static const struct { int st; const char *name; } k_status[] = {
    {DT_OK, "DT_OK"},
    {DT_ERR_INVALID, "DT_ERR_INVALID"},
    {DT_ERR_NOMEM, "DT_ERR_NOMEM"},
    {DT_ERR_STATE, "DT_ERR_STATE"},
    {DT_ERR_BACKEND, "DT_ERR_BACKEND"},
    {DT_ERR_IO, "DT_ERR_IO"},
    {DT_ERR_UNSUPPORTED, "DT_ERR_UNSUPPORTED"},
    {DT_ERR_MISMATCH, "DT_ERR_MISMATCH"},
    {DT_ERR_TIMEOUT, "DT_ERR_TIMEOUT"},
    {DT_ERR_INTERNAL, "DT_ERR_INTERNAL"},
};
#define NSTATUS ((int)(sizeof k_status / sizeof k_status[0]))

/* Thread body: its own last error starts empty, and its failure must not leak
 * into the main thread's message. */
static void *thread_body(void *arg) {
    int *res = arg;
    res[0] = strcmp(dt_last_error(), "") == 0;
    dt_dtype d;
    res[1] = dt_dtype_parse("thread_bad_name", &d) == DT_ERR_INVALID;
    res[2] = strstr(dt_last_error(), "thread_bad_name") != NULL;
    return NULL;
}

int main(void) {
    /* Exact names and the numeric values of the contract. */
    CHECK(DT_OK == 0 && DT_ERR_INVALID == -1 && DT_ERR_NOMEM == -2 && DT_ERR_STATE == -3 &&
              DT_ERR_BACKEND == -4 && DT_ERR_IO == -5 && DT_ERR_UNSUPPORTED == -6 &&
              DT_ERR_MISMATCH == -7 && DT_ERR_TIMEOUT == -8 && DT_ERR_INTERNAL == -9,
          "status values differ from status.h");
    for (int i = 0; i < NSTATUS; i++) {
        const char *s = dt_status_str(k_status[i].st);
        CHECK(s != NULL && strcmp(s, k_status[i].name) == 0, "dt_status_str(%d) = '%s', want '%s'",
              k_status[i].st, s ? s : "(null)", k_status[i].name);
    }
    /* Unknown codes: never NULL, non-empty, and not the name of a real status. */
    const int unknown[] = {1, 5, -10, -100, 12345, -2147483647 - 1};
    for (size_t u = 0; u < sizeof unknown / sizeof unknown[0]; u++) {
        const char *s = dt_status_str(unknown[u]);
        int clash = 0;
        for (int i = 0; s && i < NSTATUS; i++) clash |= strcmp(s, k_status[i].name) == 0;
        CHECK(s != NULL && s[0] != '\0' && !clash, "dt_status_str(%d) = '%s'", unknown[u],
              s ? s : "(null)");
    }

    /* Last error: empty at start, set by a failing call (naming the function and the
     * bad input), kept by later successful calls? (unspecified: not checked),
     * replaced by the next failure, and cleared by dt_clear_error. */
    CHECK(dt_last_error() != NULL && strcmp(dt_last_error(), "") == 0,
          "last error at start is '%s'", dt_last_error());
    dt_dtype d = DT_F32;
    CHECK(dt_dtype_parse("no_such_type", &d) == DT_ERR_INVALID, "bad dtype accepted");
    CHECK(strstr(dt_last_error(), "no_such_type") != NULL, "message '%s' does not name the input",
          dt_last_error());
    CHECK(strstr(dt_last_error(), "dt_dtype_parse") != NULL,
          "message '%s' does not name the function", dt_last_error());
    dt_op op = DT_SUM;
    CHECK(dt_op_parse("no_such_op", &op) == DT_ERR_INVALID, "bad op accepted");
    CHECK(strstr(dt_last_error(), "no_such_op") != NULL &&
              strstr(dt_last_error(), "no_such_type") == NULL,
          "second failure did not replace the message: '%s'", dt_last_error());
    dt_clear_error();
    CHECK(strcmp(dt_last_error(), "") == 0, "after dt_clear_error: '%s'", dt_last_error());
    dt_clear_error(); /* idempotent */
    CHECK(strcmp(dt_last_error(), "") == 0, "second dt_clear_error: '%s'", dt_last_error());

    /* A very long bad name: the message stays a bounded, NUL-terminated string that
     * still starts with the function. */
    size_t biglen = 5000;
    char *big = malloc(biglen + 1);
    memset(big, 'x', biglen);
    big[biglen] = '\0';
    CHECK(dt_dtype_parse(big, &d) == DT_ERR_INVALID, "long bad name accepted");
    size_t ml = strlen(dt_last_error());
    CHECK(ml > 0 && ml < biglen && strncmp(dt_last_error(), "dt_dtype_parse", 14) == 0,
          "long-name message has length %zu", ml);
    free(big);

    /* Per-thread: the main thread's message survives another thread's failure. */
    CHECK(dt_op_parse("main_thread_bad", &op) == DT_ERR_INVALID, "bad op accepted");
    int res[3] = {0, 0, 0};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, thread_body, res) == 0, "pthread_create failed");
    pthread_join(th, NULL);
    CHECK(res[0], "a new thread's last error was not empty");
    CHECK(res[1] && res[2], "the thread's own failure was not recorded for it");
    CHECK(strstr(dt_last_error(), "main_thread_bad") != NULL &&
              strstr(dt_last_error(), "thread_bad_name") == NULL,
          "main thread message changed by another thread: '%s'", dt_last_error());
    return dt_test_finish("core_status");
}
