/* fakegpu_self: the stand-in itself (fakegpu.h) keeps the promises the other
 * fakegpu tests rely on: device memory is a PROT_NONE mapping (host code
 * touching it would fault) that starts as junk, copies refuse a direction that
 * does not match the memory (2D copies too, with CUDA's pitch check), the
 * uses and synchronizations of each stream are counted, destroyed streams and
 * host buffers are refused,
 * an event is "not ready" to the first query after a record, and a one-rank
 * communicator reduces, sends to itself in a group and splits as NCCL does. */
#define _POSIX_C_SOURCE 200809L
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fakegpu.h"
#include "testutil.h"

/* the protection of the mapping holding p, from /proc/self/maps ("---p"...) */
static int mapping_perms(const void *p, char perms[5]) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    char line[512];
    int found = -1;
    uintptr_t a = (uintptr_t)p;
    while (found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char pr[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, pr) == 3 && a >= lo && a < hi) {
            memcpy(perms, pr, 5);
            found = 0;
        }
    }
    fclose(f);
    return found;
}

int main(void) {
    enum { N = 1000 };
    float host[N], back[N];
    for (int i = 0; i < N; i++) host[i] = (float)i - 500.0f;
    float *d = NULL, *d2 = NULL;
    CHECK(cudaMalloc((void **)&d, sizeof host) == cudaSuccess && d, "cudaMalloc");
    CHECK(cudaMalloc((void **)&d2, sizeof host) == cudaSuccess && d2, "cudaMalloc");
    char perms[5] = "";
    CHECK(mapping_perms(d, perms) == 0 && strcmp(perms, "---p") == 0, "device memory is mapped '%s', want ---p", perms);
    unsigned char junk[4] = {0};
    CHECK(cudaMemcpy(junk, d, 4, cudaMemcpyDeviceToHost) == cudaSuccess && junk[0] == 0xA5 && junk[3] == 0xA5,
          "new device memory holds 0xA5, not %#x", junk[0]);
    struct cudaPointerAttributes a;
    CHECK(cudaPointerGetAttributes(&a, d + 10) == cudaSuccess && a.type == cudaMemoryTypeDevice && a.device == 0,
          "an interior pointer is device memory of device 0 (type %d)", (int)a.type);
    CHECK(cudaPointerGetAttributes(&a, host) == cudaSuccess && a.type == cudaMemoryTypeUnregistered,
          "a stack buffer is unregistered (type %d)", (int)a.type);

    /* copies check their direction and their bounds */
    CHECK(cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice) == cudaSuccess, "H2D");
    CHECK(cudaMemcpy(back, d, sizeof host, cudaMemcpyHostToDevice) == cudaErrorInvalidMemcpyDirection,
          "a device-to-host copy called host-to-device is refused");
    cudaGetLastError();
    CHECK(cudaMemcpy(back, d, sizeof host + 1, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue,
          "a copy past the end of an allocation is refused");
    CHECK(cudaGetLastError() == cudaErrorInvalidValue && cudaGetLastError() == cudaSuccess, "the last error, once");
    CHECK(cudaMemcpy(back, d, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess && memcmp(back, host, sizeof host) == 0,
          "the round trip");

    /* 2D copies: rows at their pitches, CUDA's pitch check, the bounds of every row */
    CHECK(cudaMemcpy2D(d2, 8, d, 16, 8, 10, cudaMemcpyDeviceToDevice) == cudaSuccess, "2D copy");
    CHECK(cudaMemcpy(back, d2, 80, cudaMemcpyDeviceToHost) == cudaSuccess && back[0] == host[0] && back[1] == host[1] &&
              back[2] == host[4] && back[19] == host[37],
          "2D copy: row 1 from byte 16 (%g, want %g)", (double)back[2], (double)host[4]);
    CHECK(cudaMemcpy2DAsync(d2, 4, d, 16, 8, 2, cudaMemcpyDeviceToDevice, NULL) == cudaErrorInvalidPitchValue,
          "a pitch below the width is refused");
    CHECK(cudaMemcpy2D(d2, 8, d, sizeof host, 8, 2, cudaMemcpyDeviceToDevice) == cudaErrorInvalidValue,
          "a 2D copy whose last row runs past the allocation is refused");
    CHECK(cudaMemcpy2D(back, 8, d, 8, 8, 2, cudaMemcpyHostToDevice) == cudaErrorInvalidMemcpyDirection,
          "a 2D copy checks its direction");
    CHECK(cudaMemcpy2D(d2, 8, d, 8, 0, 5, cudaMemcpyDeviceToDevice) == cudaSuccess, "an empty 2D copy");
    cudaGetLastError();

    /* streams and events */
    cudaStream_t s;
    cudaEvent_t e;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    /* which stream a call used: fk_stream_count */
    long u0 = fk_stream_count(s, FK_STREAM_USES), l0 = fk_stream_count(NULL, FK_STREAM_USES),
         p0 = fk_stream_count(cudaStreamPerThread, FK_STREAM_USES), y0 = fk_stream_count(s, FK_STREAM_SYNCS);
    CHECK(u0 == 0 && y0 == 0, "a new stream has no uses (%ld) or syncs (%ld)", u0, y0);
    CHECK(cudaMemcpyAsync(d2, d, 4, cudaMemcpyDeviceToDevice, s) == cudaSuccess &&
              cudaMemcpy2DAsync(d2, 4, d, 4, 4, 1, cudaMemcpyDeviceToDevice, s) == cudaSuccess &&
              cudaStreamSynchronize(s) == cudaSuccess && cudaStreamQuery(s) == cudaSuccess,
          "work on the stream");
    CHECK(fk_stream_count(s, FK_STREAM_USES) == 2 && fk_stream_count(s, FK_STREAM_SYNCS) == 1,
          "two uses and one sync counted (%ld, %ld)", fk_stream_count(s, FK_STREAM_USES),
          fk_stream_count(s, FK_STREAM_SYNCS));
    CHECK(cudaMemsetAsync(d2, 0, 4, cudaStreamLegacy) == cudaSuccess && cudaMemset(d2, 0, 4) == cudaSuccess &&
              cudaMemsetAsync(d2, 0, 4, cudaStreamPerThread) == cudaSuccess,
          "work on the default streams");
    CHECK(fk_stream_count(NULL, FK_STREAM_USES) == l0 + 2 && fk_stream_count(cudaStreamLegacy, FK_STREAM_USES) == l0 + 2 &&
              fk_stream_count(cudaStreamPerThread, FK_STREAM_USES) == p0 + 1,
          "NULL and cudaStreamLegacy count as one stream, the per-thread one on its own");
    CHECK(fk_stream_count((cudaStream_t)(uintptr_t)0x1234, FK_STREAM_USES) == -1, "no stream: -1");
    CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess, "event");
    CHECK(cudaEventRecord(e, s) == cudaSuccess, "record");
    CHECK(cudaEventQuery(e) == cudaErrorNotReady && cudaEventQuery(e) == cudaSuccess, "not ready once after a record");
    CHECK(cudaStreamDestroy(s) == cudaSuccess, "destroy");
    CHECK(cudaEventRecord(e, s) == cudaErrorInvalidResourceHandle, "a destroyed stream is refused");
    CHECK(cudaMemcpyAsync(d2, d, sizeof host, cudaMemcpyDeviceToDevice, s) == cudaErrorInvalidResourceHandle,
          "a copy on a destroyed stream is refused");
    cudaEventDestroy(e);
    cudaGetLastError();

    /* one rank of NCCL */
    ncclUniqueId id;
    ncclComm_t c = NULL, sub = NULL;
    CHECK(ncclGetUniqueId(&id) == ncclSuccess && ncclCommInitRank(&c, 1, id, 0) == ncclSuccess && c, "init");
    CHECK(ncclAllReduce(host, back, N, ncclFloat32, ncclSum, c, NULL) == ncclInvalidArgument &&
              strstr(ncclGetLastError(c), "is not device memory"),
          "host memory is refused: %s", ncclGetLastError(c));
    CHECK(ncclAllReduce(d, d2, N, ncclFloat32, ncclAvg, c, NULL) == ncclSuccess, "avg");
    CHECK(cudaMemcpy(back, d2, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess && memcmp(back, host, sizeof host) == 0,
          "avg of one rank is the input");
    CHECK(cudaMemset(d2, 0, sizeof host) == cudaSuccess, "memset");
    CHECK(ncclGroupStart() == ncclSuccess && ncclSend(d, N, ncclFloat32, 0, c, NULL) == ncclSuccess &&
              ncclRecv(d2, N, ncclFloat32, 0, c, NULL) == ncclSuccess && ncclGroupEnd() == ncclSuccess,
          "send to itself in a group: %s", ncclGetLastError(c));
    CHECK(cudaMemcpy(back, d2, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess && memcmp(back, host, sizeof host) == 0,
          "what was sent arrived");
    CHECK(ncclGroupStart() == ncclSuccess && ncclSend(d, N, ncclFloat32, 0, c, NULL) == ncclSuccess &&
              ncclRecv(d2, N - 1, ncclFloat32, 0, c, NULL) == ncclSuccess && ncclGroupEnd() == ncclInvalidUsage,
          "a receive of another size than the send is refused");
    int n = 0, r = -1;
    CHECK(ncclCommSplit(c, 7, 0, &sub, NULL) == ncclSuccess && sub && ncclCommCount(sub, &n) == ncclSuccess &&
              ncclCommUserRank(sub, &r) == ncclSuccess && n == 1 && r == 0,
          "split: rank %d of %d", r, n);
    ncclResult_t ae = ncclInternalError;
    CHECK(ncclCommGetAsyncError(c, &ae) == ncclSuccess && ae == ncclSuccess, "no asynchronous error");
    CHECK(ncclCommDestroy(sub) == ncclSuccess && ncclCommDestroy(c) == ncclSuccess, "destroy");
    CHECK(cudaFree(d) == cudaSuccess && cudaFree(d2) == cudaSuccess && cudaFree(host) == cudaErrorInvalidValue,
          "cudaFree of device memory, and not of a host buffer");
    return dt_test_finish("fakegpu_self");
}
