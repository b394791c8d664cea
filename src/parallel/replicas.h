/* src/parallel/replicas.h - internal: the strategies' in-process dimension,
 * model replicas run by the threads of one process (dtrain-train
 * --dp-threads N; seed 004's DataParallel without its limits: the model is
 * not replicated per forward, there is no GIL). Made and driven by
 * strategy.c (strategy.h, REPLICAS); the model is seen only through the
 * layer table's calls.
 *
 * N model replicas: replica 0 is the table's model (the one the parallel
 * strategy manages); replicas 1..N-1 are made with the table's
 * replica_create, their own flat parameter buffers released and every layer
 * pointed at replica 0's parameters in the table's flat buffer (shared,
 * read-only while the threads run), each with its own activations and its
 * own flat gradient buffer. The calling thread is thread 0 and runs replica
 * 0; N-1 worker threads (created once, parked between passes) run the
 * others.
 *
 * One pass (dt_replicas_pass) over a micro-batch of B samples: thread i
 * takes the contiguous slice of B_i = B/N (+1 for i < B mod N) samples,
 * forward and backward (the table's replica_pass) with its loss scaled by
 * scale * B_i / B, so that the sum over the threads is the gradient of the
 * micro-batch's MEAN loss (an uneven split is weighted correctly; a thread
 * with no sample sits the pass out). Batch norm (sync_stats) sums its
 * statistics over the threads (and then over the ranks, through hooks0's
 * sync_stats when given): the threads of a process are invisible, they
 * train as one thread would on the whole micro-batch. Then the gradients
 * are reduced: the flat vector is cut into N slices (of a multiple of 16
 * floats) and thread i adds, for its slice, replicas 1..N-1's gradients
 * into replica 0's in that fixed order (g0 + g1 + ... + g_{N-1}, whichever
 * thread does the slice) and zeroes theirs: the result does not depend on
 * the scheduling, runs are reproducible.
 *
 * Replica 0's hooks during a pass are the given hooks0 (dt_replicas_set_hooks:
 * the trainer's tracing, the strategy's pre/post hooks) EXCEPT grad_ready,
 * which is never called: the caller replays grad_ready for every layer after
 * the pass, once the threads' gradients are summed (the cross-rank
 * reduction, DDP's buckets, runs once per process after the thread
 * reduction); and sync_stats, which is the threads' sum above.
 *
 * BLAS runs single-threaded inside each thread (the trainer refuses
 * --threads > 1 with --dp-threads). Not for strategies that move parameters
 * or gradients per layer (ZeRO 1-3: their refuse_replicas). */
#ifndef DT_PARALLEL_REPLICAS_H
#define DT_PARALLEL_REPLICAS_H

#include <stddef.h>
#include <stdint.h>
#include "parallel/strategy.h"

typedef struct dt_replicas dt_replicas;

/* Make replicas 1..n-1 of the table's model and start the workers; the
 * table (its calls, its flat parameter buffer) must outlive them. Replicas
 * 1..n-1 get the threads' sync_stats hook; replica 0's hooks are set by
 * dt_replicas_set_hooks. DT_ERR_INVALID for n < 2, a table without the
 * replica calls or a model without parameters; DT_ERR_NOMEM; a failed
 * pthread_create is DT_ERR_INTERNAL. */
int dt_replicas_create(const dt_layer_table *t, int n, dt_replicas **out);
/* Stop and join the workers, free the replicas (NULL: no-op). Replica 0's
 * hooks are left as they are. */
void dt_replicas_free(dt_replicas *g);
int dt_replicas_count(const dt_replicas *g);

/* Install replica 0's pass hooks around hooks0 (see above; they stay: an
 * evaluation forward on replica 0 alone calls hooks0's pre/post hooks as
 * before). */
int dt_replicas_set_hooks(dt_replicas *g, const dt_layer_hooks *hooks0);

/* Seed the dropout streams of replicas 1..N-1 from `seed` (replica i:
 * seed ^ i * 0x9e3779b97f4a7c15; replica 0 is the caller's). */
int dt_replicas_seed_dropout(dt_replicas *g, uint64_t seed);

/* One micro-batch of B >= 1 samples (x: B * x_bytes, y: B * y_elems int32),
 * train forward and backward on the threads, gradients summed into replica 0's
 * gradient buffer (+= scale * d(mean loss over the B samples)/d params).
 * *loss: the mean loss over the B samples; *correct: correct predictions
 * summed. A thread's failure is returned with its message ("data-parallel
 * thread I: ..."); replica 0's gradients are then undefined. */
int dt_replicas_pass(dt_replicas *g, const void *x, const int32_t *y, int B, float scale, float *loss, int *correct);

#endif
