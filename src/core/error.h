/* src/core/error.h - internal: recording errors for dt_last_error(). */
#ifndef DT_CORE_ERROR_H
#define DT_CORE_ERROR_H

#include "dtrain/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records "func: message" as this thread's last error and returns status, so
 * callers write: return dt_error(DT_ERR_INVALID, __func__, "count %zu ...", n); */
int dt_error(int status, const char *func, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Shorthand inside a function. */
#define DT_ERR(status, ...) dt_error((status), __func__, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
