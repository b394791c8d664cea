/* dtrain/trace.h - timeline in Chrome trace event format (JSON), one file per
 * rank, viewable in Perfetto (ui.perfetto.dev) or chrome://tracing.
 * Events are "complete" events (ph "X") with microsecond timestamps of a
 * monotonic clock (to the nanosecond); pid = world rank, tid = a lane (0
 * compute, 1 communication). One event per line; names are written as given
 * (JSON-escaped; a name is kept to 47 bytes).
 * Tracing is off until dt_trace_open; every call is cheap when off. */
#ifndef DTRAIN_TRACE_H
#define DTRAIN_TRACE_H

#ifdef __cplusplus
extern "C" {
#endif

enum { DT_TRACE_COMPUTE = 0, DT_TRACE_COMM = 1 };

/* Monotonic clock in microseconds. */
double dt_trace_now_us(void);
/* Start recording to `path` (written at dt_trace_close); pid is the rank. */
int dt_trace_open(const char *path, int pid);
int dt_trace_enabled(void);
/* Record one complete event [start_us, end_us) named `name` (copied) in
 * category `cat` (a static string) on lane `tid`. */
void dt_trace_event(const char *name, const char *cat, int tid, double start_us, double end_us);
/* Write the JSON file and stop recording. Every write is checked: DT_ERR_IO
 * naming the file and the reason (e.g. "No space left on device") if any
 * failed. */
int dt_trace_close(void);

#ifdef __cplusplus
}
#endif
#endif
