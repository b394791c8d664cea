/* src/train/dp_threads.h - internal: data parallelism between the threads of
 * one process (dtrain-train --dp-threads N; seed 004's DataParallel without
 * its limits: the model is not replicated per forward, there is no GIL).
 *
 * N model replicas: replica 0 is the trainer's model (the one the parallel
 * strategy manages); replicas 1..N-1 are built with the same config, their own
 * flat parameter buffers released and every layer pointed at replica 0's
 * parameters (shared, read-only while the threads run), each with its own
 * activations and its own flat gradient buffer. The calling thread is thread
 * 0 and runs replica 0; N-1 worker threads (created once, parked between
 * passes) run the others.
 *
 * One pass (dt_dp_threads_pass) over a micro-batch of B samples: thread i
 * takes the contiguous slice of B_i = B/N (+1 for i < B mod N) samples,
 * forward and backward with its loss scaled by scale * B_i / B, so that the
 * sum over the threads is the gradient of the micro-batch's MEAN loss (an
 * uneven split is weighted correctly; a thread with no sample sits the pass
 * out). Batch norm (sync_stats) sums its statistics over the threads (and then
 * over the ranks, through sync_across when given): the threads of a process
 * are invisible, they train as one thread would on the whole micro-batch.
 * Then the gradients are reduced: the flat vector is cut into N slices (of a
 * multiple of 16 floats) and thread i adds, for its slice, replicas 1..N-1's
 * gradients into replica 0's in that fixed order (g0 + g1 + ... + g_{N-1},
 * whichever thread does the slice) and zeroes theirs: the result does not
 * depend on the scheduling, runs are reproducible.
 *
 * Replica 0's hooks during a pass are the given hooks0 (the trainer's:
 * tracing, the strategy's pre/post hooks) EXCEPT grad_ready, which is never
 * called: the caller replays grad_ready for every layer after the pass, once
 * the threads' gradients are summed (the cross-rank reduction, DDP's buckets,
 * runs once per process after the thread reduction); and sync_stats, which
 * is the threads' sum above.
 *
 * BLAS runs single-threaded inside each thread (the caller sets OpenBLAS to 1
 * thread: --threads must be 1). Not for strategies that move parameters or
 * gradients per layer (ZeRO 1-3): the trainer refuses those. */
#ifndef DT_TRAIN_DP_THREADS_H
#define DT_TRAIN_DP_THREADS_H

#include <stddef.h>
#include <stdint.h>
#include "dtrain/model.h"

typedef struct dt_dp_threads dt_dp_threads;

typedef struct dt_dp_threads_args {
    dt_model *model;        /* replica 0, with its parameters where they stay */
    int n;                  /* threads, >= 2 */
    dt_model_hooks hooks0;  /* replica 0's hooks (see above); ctx as given */
    size_t x_bytes;         /* bytes of x per sample */
    size_t y_elems;         /* labels (int32) per sample */
} dt_dp_threads_args;

/* Build the replicas and start the workers; installs the pass hooks on
 * replica 0 (they stay: an evaluation forward on replica 0 alone calls hooks0's
 * pre/post hooks as before). DT_ERR_INVALID for n < 2 or a model without
 * parameters; DT_ERR_NOMEM; a failed pthread_create is DT_ERR_INTERNAL. */
int dt_dp_threads_create(const dt_dp_threads_args *a, dt_dp_threads **out);
/* Stop and join the workers, free the replicas (NULL: no-op). Replica 0's hooks
 * are left as they are. */
void dt_dp_threads_free(dt_dp_threads *g);
int dt_dp_threads_count(const dt_dp_threads *g);

/* Seed the dropout streams of replicas 1..N-1 from `seed` (replica i:
 * seed ^ i * 0x9e3779b97f4a7c15; replica 0 is the caller's). */
int dt_dp_threads_seed_dropout(dt_dp_threads *g, uint64_t seed);

/* One micro-batch of B >= 1 samples (x: B * x_bytes, y: B * y_elems int32),
 * train forward and backward on the threads, gradients summed into replica 0's
 * gradient buffer (+= scale * d(mean loss over the B samples)/d params).
 * *loss: the mean loss over the B samples; *correct: correct predictions
 * (dt_model_correct summed). A thread's failure is returned with its message
 * ("data-parallel thread I: ..."); replica 0's gradients are then undefined. */
int dt_dp_threads_pass(dt_dp_threads *g, const void *x, const int32_t *y, int B, float scale, float *loss,
                       int *correct);

#endif
