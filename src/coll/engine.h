/* src/coll/engine.h - internal: the per-process communication engine.
 *
 * One FIFO of collective descriptors, executed in submission order by one
 * background thread (created on first asynchronous submission). Blocking
 * calls keep the order without a thread hand-off: when nothing is queued or
 * running they execute on the caller's thread; otherwise they queue behind
 * the pending work and wait. Exactly one thread is inside the transport at a
 * time (for MPI, MPI_THREAD_SERIALIZED is enough).
 *
 * The runtime layer (the communicator pool, dt_comm_alloc_shared, dt_finalize)
 * calls the exclusive section and the shutdown; nothing below the collective
 * layer includes this header.
 *
 * Device work (coll.h, "Device memory") never goes to the thread: it runs on
 * the caller's thread in an exclusive section (after all queued work), its
 * stream and device being the caller's. Over a device transport an
 * asynchronous call is enqueued at submission and its handle completes on a
 * CUDA event (waited on in an exclusive section too, published to the
 * watchdog as the call); staged, it completes before the submission returns. */
#ifndef DT_COLL_ENGINE_H
#define DT_COLL_ENGINE_H

#include "coll/coll_internal.h"

/* Execute desc in order, on this thread when possible; returns its status. */
int dt_engine_run(const dt_coll_desc *desc);
/* Queue desc (copied) for the background thread; *work receives the handle. */
int dt_engine_submit(const dt_coll_desc *desc, dt_work **work);
/* Enter/leave a section where the caller owns the transport exclusively
 * (after all queued work): used for communicator creation. */
void dt_engine_exclusive_begin(void);
void dt_engine_exclusive_end(void);
/* Wait for everything queued so far. */
int dt_engine_sync(void);
/* Drain the queue and stop the thread (dt_finalize). */
int dt_engine_shutdown(void);

#endif
