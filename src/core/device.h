/* src/core/device.h - internal: the device runtime dtrain uses for device
 * memory (CUDA): how many devices the process sees, which kind of memory a
 * pointer is, copies, streams, events and pinned host memory.
 *
 * Everything goes through a table of operations (dt_dev_ops) so that:
 *  - a build without CUDA has none: no device, no CUDA call anywhere (the
 *    "none" runtime below);
 *  - a CUDA build uses cudart (cuda/device_cuda.c, the only file of core/
 *    that includes a CUDA header);
 *  - tests install a fake runtime (host memory that pretends to be a device)
 *    with dt_dev_use_for_testing before dt_init, which exercises the
 *    classification, validation and host-staging paths without a GPU.
 * Streams and events are opaque pointers (cudaStream_t, cudaEvent_t in the
 * CUDA runtime); NULL is the default (legacy) stream.
 *
 * dt_dev_probe runs once per dt_init: it asks the runtime for its devices and
 * caches the answer, so that the host path's test "could this pointer be
 * device memory?" is one load when the process has no device. */
#ifndef DT_CORE_DEVICE_H
#define DT_CORE_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dt_dev_ops.event_query: still pending (a positive value, never an error). */
#define DT_DEV_PENDING 1

typedef struct dt_dev_ops {
    const char *name;   /* "none", "cuda", or a test's */
    int is_cuda;        /* pointers and streams are CUDA's (what NCCL needs) */
    /* Devices this process can use: *n >= 0. When there are none, why (e.g.
     * "cudaGetDeviceCount: CUDA driver version is insufficient ...") in
     * why[cap]. Never fails otherwise. */
    int (*count)(int *n, char *why, size_t cap);
    /* *is_dev = 1 and *dev = its device if p is device memory (managed
     * memory: *dev -1, it belongs to no one device); 0 and -1 for host
     * memory, pinned host memory included. */
    int (*classify)(const void *p, int *is_dev, int *dev);
    int (*get_device)(int *dev);
    int (*set_device)(int dev);
    /* A 16-byte identity of device dev that is the same in every process
     * using that GPU (CUDA: its UUID). */
    int (*identity)(int dev, unsigned char id[16]);
    /* Asynchronous copy of any direction on stream (cudaMemcpyDefault). */
    int (*memcpy_async)(void *dst, const void *src, size_t bytes, void *stream);
    int (*stream_sync)(void *stream);
    int (*stream_create)(void **stream);
    void (*stream_destroy)(void *stream);
    /* Device memory on the current device (cudaMalloc/cudaFree), for
     * buffers a strategy keeps on the device (ZeRO's layer buffers). */
    int (*dev_alloc)(size_t bytes, void **p);
    void (*dev_free)(void *p);
    /* bytes of device memory at p set to value, on stream. */
    int (*memset_async)(void *p, int value, size_t bytes, void *stream);
    /* Pinned (page-locked) host memory, for staging copies. */
    int (*host_alloc)(size_t bytes, void **p);
    void (*host_free)(void *p);
    /* Events without timing, created on the current device. */
    int (*event_create)(void **ev);
    void (*event_destroy)(void *ev);
    int (*event_record)(void *ev, void *stream);
    /* DT_OK once complete, DT_DEV_PENDING while pending, or an error. */
    int (*event_query)(void *ev);
    /* Work queued on stream after this waits for ev (no host wait). */
    int (*stream_wait_event)(void *stream, void *ev);
    /* Device dev's name, compute capability, multiprocessors and memory
     * (total and free now). Optional (NULL: unknown). */
    int (*props)(int dev, char *name, size_t cap, int *cc_major, int *cc_minor, int *sms, size_t *total,
                 size_t *free_bytes);
} dt_dev_ops;

/* The runtime in use: a test's, else this build's (cuda or none). */
const dt_dev_ops *dt_dev(void);
/* Tests: use ops (NULL: back to the build's) from the next dt_dev_probe on.
 * Call before dt_init. */
void dt_dev_use_for_testing(const dt_dev_ops *ops);

/* dt_init: ask the runtime for its devices (cached until the next probe).
 * Never fails: a runtime without devices is a process without devices. */
void dt_dev_probe(void);
/* Devices seen by the last probe (0: none; then every buffer is host memory
 * and no device call is made). */
int dt_dev_count(void);
/* Why the last probe found none ("" when it found some). */
const char *dt_dev_absent_reason(void);

/* Classify p: 1 device (its device in *dev), 0 host, or a negative status.
 * Host without a runtime call when the process has no device. */
int dt_dev_is_device(const void *p, int *dev);

/* ---- known device buffers (device_known.c) ------------------------------
 * Addresses classified as device memory before, with their device (-1:
 * managed), so that a call on buffers seen before asks the runtime nothing.
 * The collective layer remembers the buffers of DT_MEM_DEVICE calls over a
 * device transport that lie on its device (coll.h, "Device memory": for those
 * a buffer seen before is trusted). Host answers are never remembered. All
 * are forgotten when dtrain frees device memory through dt_dev()->dev_free,
 * at dt_dev_probe and at dt_dev_release. Lookups take no lock; any thread. */
/* 1 with *dev if p is remembered as device memory, else 0 (*dev untouched). */
int dt_dev_known(const void *p, int *dev);
/* Remember p as device memory of dev (-1: managed); nothing when off. */
void dt_dev_known_add(const void *p, int dev);
void dt_dev_known_forget_all(void);
/* Moves on (never 0) each time everything is forgotten: what was derived
 * from the known buffers of one generation holds while it lasts. */
uint64_t dt_dev_known_gen(void);
/* On (the default) or off (DTRAIN_DEVICE_BUFFER_CACHE=0: every buffer of
 * every call is classified); forgets everything. */
void dt_dev_known_enable(int on);
int dt_dev_known_on(void);

/* Block the host until ev completes, polling: first spinning briefly, then
 * sleeping up to 50 us between queries. `poll`, when given, is called
 * between queries; a non-zero return (an error status, message set) ends the
 * wait with it (e.g. NCCL's asynchronous error of the communicator). */
int dt_dev_event_wait(void *ev, int (*poll)(void *arg), void *arg);
/* A reusable event of device dev for blocking calls (created on first use,
 * on dev; freed by dt_dev_release). */
int dt_dev_blocking_event(int dev, void **ev);
/* An event of device dev: one a finished work handle gave back
 * (dt_dev_event_put), else a new one created on dev (the current device is
 * restored). */
int dt_dev_event_on(int dev, void **ev);
/* Gives ev, an event of device dev from dt_dev_event_on, back for reuse (it
 * may still be pending: a later record replaces what it marks); destroyed
 * instead when the pool is full or no runtime is up. Any thread. */
void dt_dev_event_put(int dev, void *ev);
/* Pinned staging memory of at least `bytes` (grow-only; one user at a time:
 * the collective engine's exclusive section). NULL with a message on failure. */
void *dt_dev_staging(size_t bytes);
/* dt_finalize: free the cached events and staging memory. */
void dt_dev_release(void);

/* The runtime's error message helper: "call: what" into dt_last_error. */
int dt_dev_fail(const char *call, const char *what);

#ifdef __cplusplus
}
#endif
#endif
