/* dtrain/status.h - status codes and the per-thread last-error message.
 *
 * Every dtrain function that can fail returns an int: DT_OK (0) on success or a
 * negative dt_status. On failure the library records a human-readable message
 * naming the function and what was wrong; dt_last_error() returns it. The
 * library never calls exit() or abort() on bad input. */
#ifndef DTRAIN_STATUS_H
#define DTRAIN_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_status {
    DT_OK = 0,
    DT_ERR_INVALID = -1,    /* bad argument: NULL, out of range, inconsistent sizes */
    DT_ERR_NOMEM = -2,      /* allocation failed */
    DT_ERR_STATE = -3,      /* called in the wrong state (before dt_init, after finalize, ...) */
    DT_ERR_BACKEND = -4,    /* the transport (MPI, NCCL) reported an error */
    DT_ERR_IO = -5,         /* file missing, unreadable, truncated or malformed */
    DT_ERR_UNSUPPORTED = -6,/* valid request this build or backend cannot serve */
    DT_ERR_MISMATCH = -7,   /* ranks disagree (rank_list, collective arguments) */
    DT_ERR_TIMEOUT = -8,    /* a wait exceeded its timeout */
    DT_ERR_INTERNAL = -9    /* a dtrain bug: please report */
} dt_status;

/* Short constant name of a status ("DT_ERR_INVALID"); never NULL. */
const char *dt_status_str(int status);

/* The message recorded by the last failing dtrain call on this thread, or ""
 * if none. Valid until the next failing call on the same thread. */
const char *dt_last_error(void);

/* Forget the recorded message (dt_last_error() returns "" afterwards). */
void dt_clear_error(void);

#ifdef __cplusplus
}
#endif
#endif
