/* tests/fakegpu/fake_cudart.c - the CUDA runtime calls dtrain makes, on the
 * CPU (fakegpu.h): memory with its kinds, streams and events as checked
 * handles (events with timestamps), copies that check their direction,
 * devices from DTRAIN_FAKEGPU_DEVICES with an H100's limits (fake_rt.h).
 * Kernel launches are fake_launch.c's. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "fake_rt.h"
#include "fakegpu.h"

/* ---- errors and devices ---------------------------------------------------------- */

static _Thread_local cudaError_t t_last = cudaSuccess;
static _Thread_local int t_dev = 0;

static cudaError_t err(cudaError_t e) {
    if (e != cudaSuccess) t_last = e;
    return e;
}

cudaError_t fk_error(cudaError_t e) { return err(e); }

int fk_device_count(void) {
    const char *v = getenv("DTRAIN_FAKEGPU_DEVICES");
    int n = v ? atoi(v) : 1;
    return n < 0 ? 0 : n;
}

int fk_current_device(void) { return t_dev; }

cudaError_t cudaGetDeviceCount(int *count) {
    FK_COUNTED(FK_LIB_CUDA);
    if (!count) return err(cudaErrorInvalidValue);
    *count = fk_device_count();
    if (*count == 0) return err(cudaErrorNoDevice);
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
    FK_COUNTED(FK_LIB_CUDA);
    if (!device) return err(cudaErrorInvalidValue);
    *device = t_dev;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    FK_COUNTED(FK_LIB_CUDA);
    if (device < 0 || device >= fk_device_count()) return err(cudaErrorInvalidDevice);
    t_dev = device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
    FK_COUNTED(FK_LIB_CUDA);
    if (!prop) return err(cudaErrorInvalidValue);
    if (device < 0 || device >= fk_device_count()) return err(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "dtrain fakegpu %d%s", device, fk_device_name_suffix);
    /* the same device on every process of the machine: the same uuid */
    memcpy(prop->uuid.bytes, "dtfakegpu-dev", 13);
    prop->uuid.bytes[15] = (char)device;
    prop->totalGlobalMem = FK_TOTAL_MEM;
    prop->major = FK_CC_MAJOR;
    prop->minor = FK_CC_MINOR;
    prop->multiProcessorCount = FK_SM_COUNT;
    prop->warpSize = FK_WARP;
    prop->maxThreadsPerBlock = FK_MAX_THREADS_PER_BLOCK;
    prop->maxThreadsDim[0] = FK_MAX_BLOCK_X;
    prop->maxThreadsDim[1] = FK_MAX_BLOCK_Y;
    prop->maxThreadsDim[2] = FK_MAX_BLOCK_Z;
    prop->maxGridSize[0] = FK_MAX_GRID_X;
    prop->maxGridSize[1] = FK_MAX_GRID_Y;
    prop->maxGridSize[2] = FK_MAX_GRID_Z;
    prop->sharedMemPerBlock = FK_SMEM_PER_BLOCK;
    prop->sharedMemPerBlockOptin = FK_SMEM_PER_BLOCK_OPTIN;
    prop->sharedMemPerMultiprocessor = FK_SMEM_PER_SM;
    prop->reservedSharedMemPerBlock = FK_SMEM_RESERVED_PER_BLOCK;
    prop->maxThreadsPerMultiProcessor = FK_THREADS_PER_SM;
    prop->maxBlocksPerMultiProcessor = FK_BLOCKS_PER_SM;
    prop->regsPerBlock = FK_REGS_PER_BLOCK;
    prop->regsPerMultiprocessor = FK_REGS_PER_SM;
    prop->totalConstMem = FK_CONST_MEM;
    prop->l2CacheSize = FK_L2_BYTES;
    prop->unifiedAddressing = 1;
    prop->concurrentKernels = 1;
    prop->managedMemory = 1;
    prop->memoryPoolsSupported = 1;
    return cudaSuccess;
}

/* The attributes of the device that kernels and their launchers ask for
 * (those of cudaGetDeviceProperties); any other is refused with
 * cudaErrorInvalidValue and a line on stderr, so that a kernel relying on
 * one the fake does not know is noticed. */
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
    FK_COUNTED(FK_LIB_CUDA);
    if (!value) return err(cudaErrorInvalidValue);
    if (device < 0 || device >= fk_device_count()) return err(cudaErrorInvalidDevice);
    int v;
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: v = FK_MAX_THREADS_PER_BLOCK; break;
    case cudaDevAttrMaxBlockDimX: v = FK_MAX_BLOCK_X; break;
    case cudaDevAttrMaxBlockDimY: v = FK_MAX_BLOCK_Y; break;
    case cudaDevAttrMaxBlockDimZ: v = FK_MAX_BLOCK_Z; break;
    case cudaDevAttrMaxGridDimX: v = FK_MAX_GRID_X; break;
    case cudaDevAttrMaxGridDimY: v = FK_MAX_GRID_Y; break;
    case cudaDevAttrMaxGridDimZ: v = FK_MAX_GRID_Z; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: v = FK_SMEM_PER_BLOCK; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: v = FK_SMEM_PER_BLOCK_OPTIN; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: v = FK_SMEM_PER_SM; break;
    case cudaDevAttrReservedSharedMemoryPerBlock: v = FK_SMEM_RESERVED_PER_BLOCK; break;
    case cudaDevAttrTotalConstantMemory: v = FK_CONST_MEM; break;
    case cudaDevAttrWarpSize: v = FK_WARP; break;
    case cudaDevAttrMaxRegistersPerBlock: v = FK_REGS_PER_BLOCK; break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: v = FK_REGS_PER_SM; break;
    case cudaDevAttrMultiProcessorCount: v = FK_SM_COUNT; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: v = FK_THREADS_PER_SM; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: v = FK_BLOCKS_PER_SM; break;
    case cudaDevAttrComputeCapabilityMajor: v = FK_CC_MAJOR; break;
    case cudaDevAttrComputeCapabilityMinor: v = FK_CC_MINOR; break;
    case cudaDevAttrL2CacheSize: v = FK_L2_BYTES; break;
    case cudaDevAttrConcurrentKernels:
    case cudaDevAttrUnifiedAddressing:
    case cudaDevAttrManagedMemory:
    case cudaDevAttrMemoryPoolsSupported: v = 1; break;
    default:
        fprintf(stderr, "fakegpu: cudaDeviceGetAttribute: attribute %d is not one the fake knows\n", (int)attr);
        return err(cudaErrorInvalidValue);
    }
    *value = v;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
    FK_COUNTED(FK_LIB_CUDA);
    cudaError_t e = t_last;
    t_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { FK_COUNTED(FK_LIB_CUDA); return t_last; }

const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInvalidPitchValue: return "cudaErrorInvalidPitchValue";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorInvalidSymbol: return "cudaErrorInvalidSymbol";
    case cudaErrorMissingConfiguration: return "cudaErrorMissingConfiguration";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    default: return "cudaErrorUnknown";
    }
}

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (fakegpu: DTRAIN_FAKEGPU_DEVICES=0)";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy (fakegpu: the kinds do not match)";
    case cudaErrorInvalidPitchValue: return "invalid pitch argument";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDeviceFunction: return "invalid device function (fakegpu: or a kernel without a CPU twin)";
    case cudaErrorInvalidSymbol: return "invalid device symbol";
    case cudaErrorMissingConfiguration: return "__global__ function call is not configured";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotSupported: return "operation not supported";
    default: return "unknown error";
    }
}

/* ---- memory ------------------------------------------------------------------------ */

typedef struct region {
    char *base;       /* what the caller holds */
    char *shadow;     /* where the bytes are (device: another mapping; else base) */
    size_t len;       /* bytes asked for */
    size_t maplen;    /* device: the mappings' length */
    int kind, dev;
    int in_arena;     /* device: base is a slice of the arena (never unmapped) */
} region;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static region *g_reg;
static size_t g_nreg, g_capreg;

static int reg_add(region r) {
    pthread_mutex_lock(&g_mu);
    if (g_nreg == g_capreg) {
        size_t cap = g_capreg ? 2 * g_capreg : 64;
        region *n = realloc(g_reg, cap * sizeof *n);
        if (!n) { pthread_mutex_unlock(&g_mu); return -1; }
        g_reg = n;
        g_capreg = cap;
    }
    g_reg[g_nreg++] = r;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

/* remove the region starting at p of one of the kinds in mask; 0 if found */
static int reg_take(const void *p, unsigned mask, region *out) {
    int found = -1;
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_nreg; i++)
        if (g_reg[i].base == p && (mask >> g_reg[i].kind & 1u)) {
            *out = g_reg[i];
            g_reg[i] = g_reg[--g_nreg];
            found = 0;
            break;
        }
    pthread_mutex_unlock(&g_mu);
    return found;
}

int fk_mem(const void *p, size_t bytes, int *kind, int *dev, void **host) {
    const char *q = p;
    int rc = 0;
    *kind = FK_UNREG;
    *dev = -1;
    *host = (void *)(uintptr_t)p;
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_nreg; i++) {
        const region *r = &g_reg[i];
        size_t span = r->len ? r->len : 1;
        if (q >= r->base && q < r->base + span) {
            *kind = r->kind;
            *dev = r->dev;
            *host = r->shadow + (q - r->base);
            if (bytes > r->len - (size_t)(q - r->base)) rc = -1;
            break;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

int fk_region(const void *p, void **base, size_t *len, void **shadow, int *kind, int *dev) {
    const char *q = p;
    int rc = -1;
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_nreg && rc; i++) {
        const region *r = &g_reg[i];
        if (q >= r->base && q < r->base + (r->len ? r->len : 1)) {
            *base = r->base, *len = r->len, *shadow = r->shadow, *kind = r->kind, *dev = r->dev;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

static size_t page_round(size_t n) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (n + pg - 1) / pg * pg;
}

/* The callers' device addresses are handed out back to back, in 256-byte
 * granules, from one reserved, inaccessible arena, as cudaMalloc hands out
 * small allocations from one chunk: two allocations can touch, and a copy
 * that runs from one into the next is refused (cudaErrorInvalidValue), as
 * CUDA refuses it. Slices are not reused (but for fk_malloc_reuse); when the
 * arena is spent (or could not be reserved), each allocation gets a mapping
 * of its own. */
#define FK_ARENA_BYTES ((size_t)8 << 30)
static char *g_arena;
static size_t g_arena_used;
static int g_arena_tried;
static char *g_freed;      /* the slice the last cudaFree of the arena released */
static size_t g_freed_len;
static int g_reuse;        /* fk_malloc_reuse: the next cudaMalloc takes it */
static int g_fail_next;    /* fk_malloc_fail_next: the next cudaMalloc is refused */

void fk_malloc_reuse(void) {
    pthread_mutex_lock(&g_mu);
    g_reuse = 1;
    pthread_mutex_unlock(&g_mu);
}

void fk_malloc_fail_next(void) {
    pthread_mutex_lock(&g_mu);
    g_fail_next = 1;
    pthread_mutex_unlock(&g_mu);
}

static char *arena_take(size_t len) {
    char *p = NULL;
    pthread_mutex_lock(&g_mu);
    if (g_reuse && g_freed && len <= g_freed_len) {
        p = g_freed;
        g_freed = NULL;
        g_reuse = 0;
        pthread_mutex_unlock(&g_mu);
        return p;
    }
    g_reuse = 0;
    if (!g_arena_tried) {
        g_arena_tried = 1;
        void *a = mmap(NULL, FK_ARENA_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        g_arena = a == MAP_FAILED ? NULL : a;
    }
    if (g_arena && len <= FK_ARENA_BYTES - g_arena_used) {
        p = g_arena + g_arena_used;
        g_arena_used += len;
    }
    pthread_mutex_unlock(&g_mu);
    return p;
}

cudaError_t cudaMalloc(void **p, size_t bytes) {
    FK_COUNTED(FK_LIB_CUDA);
    if (!p) return err(cudaErrorInvalidValue);
    *p = NULL;
    if (fk_device_count() == 0) return err(cudaErrorNoDevice);
    pthread_mutex_lock(&g_mu);
    const int refuse = g_fail_next;
    g_fail_next = 0;
    pthread_mutex_unlock(&g_mu);
    if (refuse) return err(cudaErrorMemoryAllocation);
    size_t len = page_round(bytes ? bytes : 1);
    /* the caller's address: reserved, not accessible (CUDA's 256-byte
     * alignment, so that allocations touch); the bytes: a shadow */
    char *base = arena_take(((bytes ? bytes : 1) + 255) & ~(size_t)255);
    int in_arena = base != NULL;
    if (!base) {
        base = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (base == MAP_FAILED) return err(cudaErrorMemoryAllocation);
    }
    char *shadow = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (shadow == MAP_FAILED) {
        if (!in_arena) munmap(base, len);
        return err(cudaErrorMemoryAllocation);
    }
    memset(shadow, 0xA5, len);
    region r = {base, shadow, bytes, len, FK_DEVICE, t_dev, in_arena};
    if (reg_add(r)) {
        if (!in_arena) munmap(base, len);
        munmap(shadow, len);
        return err(cudaErrorMemoryAllocation);
    }
    *p = base;
    return cudaSuccess;
}

static cudaError_t host_kind_alloc(void **p, size_t bytes, int kind) {
    if (!p) return err(cudaErrorInvalidValue);
    *p = malloc(bytes ? bytes : 1);
    if (!*p) return err(cudaErrorMemoryAllocation);
    region r = {*p, *p, bytes, 0, kind, t_dev, 0};
    if (reg_add(r)) { free(*p); *p = NULL; return err(cudaErrorMemoryAllocation); }
    return cudaSuccess;
}

cudaError_t cudaMallocManaged(void **p, size_t bytes, unsigned int flags) {
    FK_COUNTED(FK_LIB_CUDA);
    if (fk_device_count() == 0) return err(cudaErrorNoDevice);
    return host_kind_alloc(p, bytes, FK_MANAGED);
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags) {
    FK_COUNTED(FK_LIB_CUDA);
    return host_kind_alloc(p, bytes, FK_HOST);
}

cudaError_t cudaFree(void *p) {
    FK_COUNTED(FK_LIB_CUDA);
    if (!p) return cudaSuccess;
    region r;
    if (reg_take(p, 1u << FK_DEVICE | 1u << FK_MANAGED, &r)) return err(cudaErrorInvalidValue);
    if (r.kind == FK_DEVICE) {
        if (!r.in_arena) munmap(r.base, r.maplen);
        munmap(r.shadow, r.maplen);
        if (r.in_arena) {
            pthread_mutex_lock(&g_mu);
            g_freed = r.base;
            g_freed_len = ((r.len ? r.len : 1) + 255) & ~(size_t)255;
            pthread_mutex_unlock(&g_mu);
        }
    } else {
        free(r.base);
    }
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p) {
    FK_COUNTED(FK_LIB_CUDA);
    if (!p) return cudaSuccess;
    region r;
    if (reg_take(p, 1u << FK_HOST, &r)) return err(cudaErrorInvalidValue);
    free(r.base);
    return cudaSuccess;
}

/* Stream-ordered allocation: streams run at once, so it is cudaMalloc and
 * cudaFree on a live stream. */
cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t s) {
    if (!fk_stream_ok(s)) return err(cudaErrorInvalidResourceHandle);
    return cudaMalloc(p, bytes);
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
    if (!fk_stream_ok(s)) return err(cudaErrorInvalidResourceHandle);
    return cudaFree(p);
}

/* total: every fake device's FK_TOTAL_MEM; free: that less the bytes of the
 * current device's live allocations (not less than 0: the fake hands out
 * more than its total if asked) */
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
    FK_COUNTED(FK_LIB_CUDA);
    if (!free_bytes || !total) return err(cudaErrorInvalidValue);
    if (fk_device_count() == 0) return err(cudaErrorNoDevice);
    size_t used = 0;
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_nreg; i++)
        if (g_reg[i].kind == FK_DEVICE && g_reg[i].dev == t_dev) used += g_reg[i].len;
    pthread_mutex_unlock(&g_mu);
    *total = FK_TOTAL_MEM;
    *free_bytes = used < FK_TOTAL_MEM ? FK_TOTAL_MEM - used : 0;
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p) {
    FK_COUNTED(FK_LIB_CUDA);
    if (!a) return err(cudaErrorInvalidValue);
    int kind, dev;
    void *host;
    fk_mem(p, 0, &kind, &dev, &host);
    memset(a, 0, sizeof *a);
    a->type = (enum cudaMemoryType)kind;
    a->device = kind == FK_UNREG ? -2 : dev;
    a->devicePointer = kind == FK_UNREG ? NULL : (void *)(uintptr_t)p;
    a->hostPointer = kind == FK_HOST || kind == FK_MANAGED ? (void *)(uintptr_t)p : NULL;
    return cudaSuccess;
}

/* ---- streams and events ---------------------------------------------------------------- */

enum { STREAM_LIVE = 0x5717ea, EVENT_LIVE = 0xe7e27, DEAD = 0xdead };

/* Streams and events are handles of one registry. They are never freed
 * (destroyed ones are marked dead and stay on the list, so that a use after
 * destroy is reported, not undefined). */
typedef struct handle {
    int magic;               /* STREAM_LIVE, EVENT_LIVE or DEAD */
    _Atomic int pending;     /* events: recorded and not yet queried */
    unsigned flags;          /* events: cudaEventCreateWithFlags' */
    int recorded;            /* events: recorded at least once */
    double ms;               /* events: when last recorded (CLOCK_MONOTONIC, ms) */
    _Atomic long uses, syncs; /* streams: fk_stream_count's counts */
    struct handle *next;
} handle;
struct CUstream_st { handle h; };
struct CUevent_st { handle h; };
static handle *g_handles;

static handle *handle_new(int magic) {
    handle *q = calloc(1, sizeof *q); /* a CUstream_st or CUevent_st: a handle and nothing else */
    if (!q) return NULL;
    q->magic = magic;
    pthread_mutex_lock(&g_mu);
    q->next = g_handles;
    g_handles = q;
    pthread_mutex_unlock(&g_mu);
    return q;
}

/* the handle p if it is one of the registry with this magic (live of its
 * kind), else NULL; with kill, it is marked dead */
static handle *handle_get(const void *p, int magic, int kill) {
    pthread_mutex_lock(&g_mu);
    handle *found = NULL;
    for (handle *q = g_handles; q; q = q->next)
        if ((const void *)q == p) {
            if (q->magic == magic) found = q;
            if (found && kill) q->magic = DEAD;
            break;
        }
    pthread_mutex_unlock(&g_mu);
    return found;
}

static int handle_live(const void *p, int magic, int kill) { return handle_get(p, magic, kill) != NULL; }

/* the counts of the legacy default stream (NULL, cudaStreamLegacy) and of the
 * per-thread one */
static _Atomic long g_legacy_uses, g_legacy_syncs, g_ptds_uses, g_ptds_syncs;

/* 1 if s is the default stream (the legacy one or the per-thread one) or a
 * live stream of the fake; counts a use of it (sync: a synchronize) */
static int stream_note(cudaStream_t s, int sync) {
    if (s == NULL || s == cudaStreamLegacy) {
        atomic_fetch_add(sync ? &g_legacy_syncs : &g_legacy_uses, 1);
        return 1;
    }
    if (s == cudaStreamPerThread) {
        atomic_fetch_add(sync ? &g_ptds_syncs : &g_ptds_uses, 1);
        return 1;
    }
    handle *h = handle_get(s, STREAM_LIVE, 0);
    if (h) atomic_fetch_add(sync ? &h->syncs : &h->uses, 1);
    return h != NULL;
}

int fk_stream_ok(cudaStream_t s) { return stream_note(s, 0); }

long fk_stream_count(cudaStream_t s, int what) {
    int sync = what == FK_STREAM_SYNCS;
    if (s == NULL || s == cudaStreamLegacy) return atomic_load(sync ? &g_legacy_syncs : &g_legacy_uses);
    if (s == cudaStreamPerThread) return atomic_load(sync ? &g_ptds_syncs : &g_ptds_uses);
    pthread_mutex_lock(&g_mu);
    handle *found = NULL;
    for (handle *q = g_handles; q; q = q->next)
        if (q == (handle *)s) found = q;
    pthread_mutex_unlock(&g_mu);
    if (!found || found->magic == EVENT_LIVE) return -1;
    return atomic_load(sync ? &found->syncs : &found->uses);
}

static int event_ok(cudaEvent_t e) { return handle_live(e, EVENT_LIVE, 0); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
    FK_COUNTED(FK_LIB_CUDA);
    if (!s) return err(cudaErrorInvalidValue);
    handle *q = handle_new(STREAM_LIVE);
    if (!q) return err(cudaErrorMemoryAllocation);
    *s = (struct CUstream_st *)q;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t s) {
    FK_COUNTED(FK_LIB_CUDA);
    return handle_live(s, STREAM_LIVE, 1) ? cudaSuccess : err(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    FK_COUNTED(FK_LIB_CUDA);
    return stream_note(s, 1) ? cudaSuccess : err(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaDeviceSynchronize(void) { FK_COUNTED(FK_LIB_CUDA); return cudaSuccess; }

/* a live stream is always idle: its work ran when it was enqueued */
cudaError_t cudaStreamQuery(cudaStream_t s) {
    FK_COUNTED(FK_LIB_CUDA);
    int live = s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread || handle_live(s, STREAM_LIVE, 0);
    return live ? cudaSuccess : err(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
    FK_COUNTED(FK_LIB_CUDA);
    if (!e) return err(cudaErrorInvalidValue);
    if (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess))
        return err(cudaErrorInvalidValue);
    handle *q = handle_new(EVENT_LIVE);
    if (!q) return err(cudaErrorMemoryAllocation);
    q->flags = flags;
    *e = (struct CUevent_st *)q;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t e) {
    FK_COUNTED(FK_LIB_CUDA);
    return handle_live(e, EVENT_LIVE, 1) ? cudaSuccess : err(cudaErrorInvalidResourceHandle);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    FK_COUNTED(FK_LIB_CUDA);
    if (!event_ok(e) || !fk_stream_ok(s)) return err(cudaErrorInvalidResourceHandle);
    e->h.ms = now_ms();
    e->h.recorded = 1;
    e->h.pending = 1;
    return cudaSuccess;
}

/* waits for the event: afterwards it is complete (no "not ready" to come) */
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    FK_COUNTED(FK_LIB_CUDA);
    if (!event_ok(e)) return err(cudaErrorInvalidResourceHandle);
    e->h.pending = 0;
    return cudaSuccess;
}

/* As CUDA: both events recorded (else cudaErrorInvalidResourceHandle), with
 * timing (not cudaEventDisableTiming: cudaErrorInvalidResourceHandle), and
 * complete: an event not yet seen complete by a query or a synchronize since
 * its record gives cudaErrorNotReady, as a GPU may still be running the work
 * before it. */
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    FK_COUNTED(FK_LIB_CUDA);
    if (!ms) return err(cudaErrorInvalidValue);
    if (!event_ok(start) || !event_ok(end)) return err(cudaErrorInvalidResourceHandle);
    if (!start->h.recorded || !end->h.recorded) return err(cudaErrorInvalidResourceHandle);
    if ((start->h.flags | end->h.flags) & cudaEventDisableTiming) return err(cudaErrorInvalidResourceHandle);
    if (start->h.pending || end->h.pending) return err(cudaErrorNotReady);
    *ms = (float)(end->h.ms - start->h.ms);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
    FK_COUNTED(FK_LIB_CUDA);
    if (!event_ok(e)) return err(cudaErrorInvalidResourceHandle);
    if (atomic_exchange(&e->h.pending, 0)) return err(cudaErrorNotReady);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
    FK_COUNTED(FK_LIB_CUDA);
    if (!event_ok(e) || !fk_stream_ok(s)) return err(cudaErrorInvalidResourceHandle);
    return cudaSuccess;
}

/* ---- copies and memset ------------------------------------------------------------------- */

static int on_device(int kind) { return kind == FK_DEVICE || kind == FK_MANAGED; }
static int on_host(int kind) { return kind != FK_DEVICE; }

/* The host addresses of a copy's ends, dst..dst+dbytes and src..src+sbytes,
 * each inside one allocation (or unregistered host memory), in the
 * direction `kind` says */
static cudaError_t copy_ends(void *dst, size_t dbytes, const void *src, size_t sbytes, enum cudaMemcpyKind kind,
                             void **dh, void **sh) {
    if (!dst || !src) return err(cudaErrorInvalidValue);
    int dk, sk, dd, sd;
    if (fk_mem(dst, dbytes, &dk, &dd, dh) || fk_mem(src, sbytes, &sk, &sd, sh)) return err(cudaErrorInvalidValue);
    int ok;
    switch (kind) {
    case cudaMemcpyHostToDevice: ok = on_host(sk) && on_device(dk); break;
    case cudaMemcpyDeviceToHost: ok = on_device(sk) && on_host(dk); break;
    case cudaMemcpyDeviceToDevice: ok = on_device(sk) && on_device(dk); break;
    case cudaMemcpyHostToHost: ok = on_host(sk) && on_host(dk); break;
    case cudaMemcpyDefault: ok = 1; break;
    default: ok = 0; break;
    }
    return ok ? cudaSuccess : err(cudaErrorInvalidMemcpyDirection);
}

static cudaError_t copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s) {
    if (!fk_stream_ok(s)) return err(cudaErrorInvalidResourceHandle);
    if (n == 0) return cudaSuccess;
    void *dh, *sh;
    cudaError_t e = copy_ends(dst, n, src, n, kind, &dh, &sh);
    if (e == cudaSuccess) memmove(dh, sh, n);
    return e;
}

/* height rows of width bytes, dpitch and spitch bytes apart (CUDA's checks:
 * a pitch below the width is cudaErrorInvalidPitchValue) */
static cudaError_t copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                          enum cudaMemcpyKind kind, cudaStream_t s) {
    if (!fk_stream_ok(s)) return err(cudaErrorInvalidResourceHandle);
    if (width == 0 || height == 0) return cudaSuccess;
    if (width > dpitch || width > spitch) return err(cudaErrorInvalidPitchValue);
    void *dh, *sh;
    cudaError_t e = copy_ends(dst, dpitch * (height - 1) + width, src, spitch * (height - 1) + width, kind, &dh, &sh);
    for (size_t i = 0; e == cudaSuccess && i < height; i++)
        memmove((char *)dh + i * dpitch, (const char *)sh + i * spitch, width);
    return e;
}

cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                         enum cudaMemcpyKind kind) {
    FK_COUNTED(FK_LIB_CUDA);
    return copy2d(dst, dpitch, src, spitch, width, height, kind, NULL);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind, cudaStream_t s) {
    FK_COUNTED(FK_LIB_CUDA);
    return copy2d(dst, dpitch, src, spitch, width, height, kind, s);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
    FK_COUNTED(FK_LIB_CUDA);
    return copy(dst, src, n, kind, NULL);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s) {
    FK_COUNTED(FK_LIB_CUDA);
    return copy(dst, src, n, kind, s);
}

static cudaError_t set(void *p, int value, size_t n, cudaStream_t s) {
    if (!fk_stream_ok(s)) return err(cudaErrorInvalidResourceHandle);
    if (n == 0) return cudaSuccess;
    int k, d;
    void *h;
    if (fk_mem(p, n, &k, &d, &h) || !on_device(k)) return err(cudaErrorInvalidValue);
    memset(h, value, n);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t n) { FK_COUNTED(FK_LIB_CUDA); return set(p, value, n, NULL); }

cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s) {
    FK_COUNTED(FK_LIB_CUDA);
    return set(p, value, n, s);
}
