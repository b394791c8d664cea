/* tests/device/fake_device.h - a device runtime for tests without a GPU
 * (core/device.h's dt_dev_ops): "device memory" is host memory allocated by
 * fake_dev_malloc and remembered as device memory of a device, streams are
 * tokens, copies happen at once, and events report themselves pending for a
 * few queries after being recorded, so that waiting code really polls.
 * Install it with fake_dev_install() before dt_init. */
#ifndef DT_FAKE_DEVICE_H
#define DT_FAKE_DEVICE_H

#include <stddef.h>
#include "core/device.h"

extern const dt_dev_ops fake_dev_ops;

/* Use the fake runtime from the next dt_init on, with `ndev` devices (0: a
 * process without devices). */
void fake_dev_install(int ndev);
/* Device memory of device dev (bytes may be 0); NULL on failure. */
void *fake_dev_malloc(size_t bytes, int dev);
void fake_dev_free(void *p);
/* Counters since the last reset: classify calls, stream syncs, copies,
 * event records, stream waits. */
typedef struct fake_dev_stats {
    long classify, stream_sync, copies, records, stream_waits, queries;
} fake_dev_stats;
void fake_dev_stats_get(fake_dev_stats *s);
void fake_dev_stats_reset(void);
/* Queries an event answers "pending" after each record (default 3). */
void fake_dev_set_event_delay(int queries);
/* A stream token (non-NULL, distinct per index). */
void *fake_dev_stream(int i);
/* 1 if ev is a fake event that has been recorded and then queried to
 * completion. */
int fake_dev_event_done(void *ev);

#endif
