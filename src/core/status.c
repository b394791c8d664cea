/* src/core/status.c - status names and the per-thread last-error buffer. */
#include <stdarg.h>
#include <stdio.h>
#include "core/error.h"

static _Thread_local char dt_errbuf[1024];

const char *dt_status_str(int status) {
    switch (status) {
    case DT_OK: return "DT_OK";
    case DT_ERR_INVALID: return "DT_ERR_INVALID";
    case DT_ERR_NOMEM: return "DT_ERR_NOMEM";
    case DT_ERR_STATE: return "DT_ERR_STATE";
    case DT_ERR_BACKEND: return "DT_ERR_BACKEND";
    case DT_ERR_IO: return "DT_ERR_IO";
    case DT_ERR_UNSUPPORTED: return "DT_ERR_UNSUPPORTED";
    case DT_ERR_MISMATCH: return "DT_ERR_MISMATCH";
    case DT_ERR_TIMEOUT: return "DT_ERR_TIMEOUT";
    case DT_ERR_INTERNAL: return "DT_ERR_INTERNAL";
    default: return "DT_ERR_UNKNOWN";
    }
}

const char *dt_last_error(void) { return dt_errbuf; }

void dt_clear_error(void) { dt_errbuf[0] = '\0'; }

int dt_error(int status, const char *func, const char *fmt, ...) {
    int n = snprintf(dt_errbuf, sizeof dt_errbuf, "%s: ", func ? func : "dtrain");
    if (n < 0 || (size_t)n >= sizeof dt_errbuf) n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dt_errbuf + n, sizeof dt_errbuf - (size_t)n, fmt, ap);
    va_end(ap);
    return status;
}
