/* src/core/cuda/device_cuda.c - the CUDA runtime behind core/device.h (CUDA
 * builds only; the one file of core/ that includes a CUDA header). Every
 * failing call becomes DT_ERR_BACKEND naming the call and CUDA's message. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>
#include "core/device.h"
#include "core/error.h"

static int fail(cudaError_t e, const char *call) {
    return dt_error(DT_ERR_BACKEND, call, "CUDA error %s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
}
#define CU(call, name) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return fail(e_, name); } while (0)

static int c_count(int *n, char *why, size_t cap) {
    int k = 0;
    cudaError_t e = cudaGetDeviceCount(&k);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* not sticky: clear it */
        snprintf(why, cap, "cudaGetDeviceCount: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        *n = 0;
        return DT_OK;
    }
    if (k == 0) snprintf(why, cap, "cudaGetDeviceCount: no CUDA device is visible (CUDA_VISIBLE_DEVICES?)");
    *n = k;
    return DT_OK;
}

static int c_classify(const void *p, int *is_dev, int *dev) {
    struct cudaPointerAttributes a;
    *is_dev = 0;
    *dev = -1;
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) {
        /* CUDA < 11 reported plain host memory as an invalid value */
        cudaGetLastError();
        if (e == cudaErrorInvalidValue) return DT_OK;
        return fail(e, "cudaPointerGetAttributes");
    }
    if (a.type == cudaMemoryTypeDevice) {
        *is_dev = 1;
        *dev = a.device;
    } else if (a.type == cudaMemoryTypeManaged) { /* any device can use it */
        *is_dev = 1;
    }
    return DT_OK;
}

static int c_get_device(int *dev) {
    CU(cudaGetDevice(dev), "cudaGetDevice");
    return DT_OK;
}

static int c_set_device(int dev) {
    CU(cudaSetDevice(dev), "cudaSetDevice");
    return DT_OK;
}

static int c_identity(int dev, unsigned char id[16]) {
    struct cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
    memcpy(id, prop.uuid.bytes, 16);
    return DT_OK;
}

static int c_memcpy(void *dst, const void *src, size_t bytes, void *stream) {
    CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream), "cudaMemcpyAsync");
    return DT_OK;
}

static int c_stream_sync(void *stream) {
    CU(cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize");
    return DT_OK;
}

static int c_stream_create(void **stream) {
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    *stream = s;
    return DT_OK;
}

static void c_stream_destroy(void *stream) {
    if (stream) cudaStreamDestroy((cudaStream_t)stream);
}

static int c_dev_alloc(size_t bytes, void **p) {
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *p = NULL;
        return dt_error(e == cudaErrorMemoryAllocation ? DT_ERR_NOMEM : DT_ERR_BACKEND, "cudaMalloc",
                        "%zu bytes of device memory: %s", bytes, cudaGetErrorString(e));
    }
    return DT_OK;
}

static void c_dev_free(void *p) {
    if (p) cudaFree(p);
}

static int c_memset(void *p, int value, size_t bytes, void *stream) {
    CU(cudaMemsetAsync(p, value, bytes, (cudaStream_t)stream), "cudaMemsetAsync");
    return DT_OK;
}

static int c_host_alloc(size_t bytes, void **p) {
    cudaError_t e = cudaHostAlloc(p, bytes, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return dt_error(e == cudaErrorMemoryAllocation ? DT_ERR_NOMEM : DT_ERR_BACKEND, "cudaHostAlloc",
                        "%zu bytes of pinned host memory: %s", bytes, cudaGetErrorString(e));
    }
    return DT_OK;
}

static void c_host_free(void *p) {
    if (p) cudaFreeHost(p);
}

static int c_event_create(void **ev) {
    cudaEvent_t e;
    CU(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    *ev = e;
    return DT_OK;
}

static void c_event_destroy(void *ev) {
    if (ev) cudaEventDestroy((cudaEvent_t)ev);
}

static int c_event_record(void *ev, void *stream) {
    CU(cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)stream), "cudaEventRecord");
    return DT_OK;
}

static int c_event_query(void *ev) {
    cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
    if (e == cudaSuccess) return DT_OK;
    if (e == cudaErrorNotReady) {
        cudaGetLastError();
        return DT_DEV_PENDING;
    }
    return fail(e, "cudaEventQuery");
}

static int c_stream_wait(void *stream, void *ev) {
    CU(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)ev, 0), "cudaStreamWaitEvent");
    return DT_OK;
}

static int c_props(int dev, char *name, size_t cap, int *major, int *minor, int *sms, size_t *total,
                   size_t *free_bytes) {
    struct cudaDeviceProp prop;
    int cur = -1;
    CU(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
    snprintf(name, cap, "%s", prop.name);
    *major = prop.major;
    *minor = prop.minor;
    *sms = prop.multiProcessorCount;
    *total = prop.totalGlobalMem;
    *free_bytes = 0;
    /* the free memory of the current device: of dev, made current for the call */
    CU(cudaGetDevice(&cur), "cudaGetDevice");
    if (cur != dev) CU(cudaSetDevice(dev), "cudaSetDevice");
    size_t t = 0;
    cudaError_t e = cudaMemGetInfo(free_bytes, &t);
    if (cur != dev) cudaSetDevice(cur);
    if (e != cudaSuccess) return fail(e, "cudaMemGetInfo");
    return DT_OK;
}

const dt_dev_ops dt_dev_cuda = {
    .name = "cuda",
    .is_cuda = 1,
    .count = c_count,
    .classify = c_classify,
    .get_device = c_get_device,
    .set_device = c_set_device,
    .identity = c_identity,
    .memcpy_async = c_memcpy,
    .stream_sync = c_stream_sync,
    .stream_create = c_stream_create,
    .stream_destroy = c_stream_destroy,
    .dev_alloc = c_dev_alloc,
    .dev_free = c_dev_free,
    .memset_async = c_memset,
    .host_alloc = c_host_alloc,
    .host_free = c_host_free,
    .event_create = c_event_create,
    .event_destroy = c_event_destroy,
    .event_record = c_event_record,
    .event_query = c_event_query,
    .stream_wait_event = c_stream_wait,
    .props = c_props,
};
