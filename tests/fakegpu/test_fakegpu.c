/* fakegpu_self: the stand-in itself (fakegpu.h) keeps the promises the other
 * fakegpu tests rely on: device memory is a PROT_NONE mapping (host code
 * touching it would fault) that starts as junk, copies refuse a direction that
 * does not match the memory, destroyed streams and host buffers are refused,
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

    /* streams and events */
    cudaStream_t s;
    cudaEvent_t e;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
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
