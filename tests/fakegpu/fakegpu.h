/* tests/fakegpu/fakegpu.h - a CPU stand-in for the parts of CUDA's runtime
 * (libcudart) and of NCCL (libnccl) that dtrain calls, for tests on machines
 * without a GPU. Test programs link it in place of the real libraries, so that
 * dtrain's own CUDA and NCCL code (src/core/cuda, src/transport/nccl) runs
 * unchanged against it: the real headers' declarations, implemented here.
 *
 * It is strict where the real libraries are, and stricter where a mistake on
 * a GPU would be undefined behaviour:
 *  - device memory (cudaMalloc) is host memory that the host cannot touch:
 *    the pointer handed out is a PROT_NONE reservation, so host code that
 *    reads or writes through a device pointer faults as it would on a GPU;
 *    the fake's copies and collectives reach the memory through a shadow
 *    mapping. New device memory holds a junk pattern (0xA5), not zeros.
 *  - copies check their direction against the memory kinds, every buffer is
 *    checked to lie inside one allocation, streams and events are checked
 *    to be live handles;
 *  - NCCL calls take device memory of the communicator's device only, and
 *    refuse two ranks on one device (NCCL's "Duplicate GPU") unless
 *    NCCL_MULTI_RANK_GPU_ENABLE=1.
 * Streams run at once: every call completes before it returns; an event
 * reports "not ready" to the first query after each record, so that waiting
 * code really polls.
 *
 * Collectives between processes (each process one rank, as with NCCL) go
 * through a shared-memory segment per communicator (fake_shm.c): ranks copy
 * chunks into slots and reduce in rank order, so every rank gets the same
 * bits. Reductions follow NCCL's definitions: f16/bf16 in float, rounded
 * after each step; avg of floats multiplies by 1/n before summing, avg of
 * integers divides the sum.
 *
 * Settings (environment):
 *   DTRAIN_FAKEGPU_DEVICES   devices per process (default 1; 0: none, as
 *                            without a GPU)
 *   DTRAIN_FAKEGPU_FAIL      "RANK:N": the world communicator of rank RANK
 *                            reports an asynchronous error (ncclSystemError)
 *                            after its N-th collective call
 */
#ifndef DT_FAKEGPU_H
#define DT_FAKEGPU_H

#include <cuda_runtime_api.h>
#include <stddef.h>

/* The memory kinds of the fake: cudaMemoryType's values. */
enum { FK_UNREG = 0, FK_HOST = 1, FK_DEVICE = 2, FK_MANAGED = 3 };

/* What p..p+bytes is: its kind and device, and an address the host may use
 * (the shadow of device memory). 0 if the range lies inside one allocation of
 * the fake (or is unregistered host memory: kind FK_UNREG, host = p); -1 if it
 * starts inside an allocation and runs past its end. */
int fk_mem(const void *p, size_t bytes, int *kind, int *dev, void **host);
/* 1 if s is the default stream or a live stream of the fake. */
int fk_stream_ok(cudaStream_t s);
/* The calling thread's current device; the number of devices. */
int fk_current_device(void);
int fk_device_count(void);

#endif
