/* tests/fakegpu/fake_launch.c - kernel launches on the CPU (fakegpu.h): the
 * entry points nvcc's host code calls at load (__cudaRegisterFatBinary,
 * __cudaRegisterFunction, __cudaRegisterVar, ...) and at a launch (the
 * <<<...>>> configuration stack, __cudaGetKernel, __cudaLaunchKernel), and
 * cudaLaunchKernel: a launch checks its stream and geometry, finds the
 * kernel's CPU twin by its registered name and runs it at once. Also the
 * per-kernel calls (cudaFuncSetAttribute, cudaFuncGetAttributes, occupancy),
 * __device__/__constant__ variables (host copies: cudaMemcpyToSymbol,
 * cudaMemcpyFromSymbol, fk_var) and the helpers twins read their arguments
 * with. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fake_rt.h"
#include "fakegpu.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- modules, kernels and variables: what nvcc's host code registers at load ---- */

#define FATBINC_WRAPPER_MAGIC 0x466243B1 /* fatbinary_section.h's FATBINC_MAGIC */

/* One registered fat binary (one .cu file's device code); its address is
 * the handle (void **) nvcc's host code keeps. */
typedef struct module {
    void *fatbin;
    int live;
    struct module *next;
} module;

enum { KERN_LIVE = 0x6b65726e, KERN_GONE = 0x60e };

/* A registered kernel; also the cudaKernel_t __cudaGetKernel hands out. */
struct CUkern_st {
    int magic;            /* KERN_LIVE; KERN_GONE once its module was unregistered */
    const void *host_fun; /* the host stub: what <<<>>> and cudaLaunchKernel name */
    const char *name;     /* the registered (device) name: plain for extern "C" */
    const fk_twin *twin;  /* found at the first launch that had one */
    int max_dyn_smem;     /* cudaFuncAttributeMaxDynamicSharedMemorySize */
    int carveout;         /* cudaFuncAttributePreferredSharedMemoryCarveout */
    void **module;
    struct CUkern_st *next;
};

/* A __device__ or __constant__ variable: a host copy, zeroed at load (its
 * initialiser lives in the device image, which the fake does not read). */
typedef struct var {
    const char *host_var; /* the host shadow: what cudaMemcpyToSymbol names */
    const char *name;
    size_t size;
    unsigned char *bytes;
    struct var *next;
} var;

static module *g_modules;
static struct CUkern_st *g_kernels;
static var *g_vars;

void **__cudaRegisterFatBinary(void *fatCubin) {
    int magic = 0;
    if (fatCubin) memcpy(&magic, fatCubin, sizeof magic);
    if (magic != FATBINC_WRAPPER_MAGIC)
        fprintf(stderr, "fakegpu: __cudaRegisterFatBinary: %p is not nvcc's fat binary wrapper (magic %#x)\n",
                fatCubin, (unsigned)magic);
    module *m = calloc(1, sizeof *m);
    if (!m) {
        fprintf(stderr, "fakegpu: __cudaRegisterFatBinary: out of memory; its kernels are registered without it\n");
        return NULL;
    }
    m->fatbin = fatCubin;
    m->live = 1;
    pthread_mutex_lock(&g_mu);
    m->next = g_modules;
    g_modules = m;
    pthread_mutex_unlock(&g_mu);
    return &m->fatbin;
}

void __cudaRegisterFatBinaryEnd(void **fatCubinHandle) { (void)fatCubinHandle; }

/* at exit (nvcc's atexit handler): the module's kernels cannot be launched
 * any more; the records stay (a late launch is refused, not undefined) */
void __cudaUnregisterFatBinary(void **fatCubinHandle) {
    pthread_mutex_lock(&g_mu);
    for (module *m = g_modules; m; m = m->next)
        if (&m->fatbin == fatCubinHandle) m->live = 0;
    for (struct CUkern_st *k = g_kernels; k; k = k->next)
        if (k->module == fatCubinHandle) k->magic = KERN_GONE;
    pthread_mutex_unlock(&g_mu);
}

char __cudaInitModule(void **fatCubinHandle) {
    int live = 0;
    pthread_mutex_lock(&g_mu);
    for (module *m = g_modules; m; m = m->next)
        if (&m->fatbin == fatCubinHandle) live = m->live;
    pthread_mutex_unlock(&g_mu);
    return (char)live;
}

void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun, const char *deviceName,
                            int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize) {
    struct CUkern_st *k = calloc(1, sizeof *k);
    if (!k) {
        fprintf(stderr, "fakegpu: __cudaRegisterFunction: out of memory registering kernel %s\n", deviceName);
        return;
    }
    k->magic = KERN_LIVE;
    k->host_fun = hostFun;
    k->name = deviceName;
    k->max_dyn_smem = FK_SMEM_PER_BLOCK;
    k->carveout = -1;
    k->module = fatCubinHandle;
    pthread_mutex_lock(&g_mu);
    k->next = g_kernels;
    g_kernels = k;
    pthread_mutex_unlock(&g_mu);
}

void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
                       size_t size, int constant, int global) {
    var *v = calloc(1, sizeof *v);
    unsigned char *bytes = calloc(size ? size : 1, 1);
    if (!v || !bytes) {
        fprintf(stderr, "fakegpu: __cudaRegisterVar: out of memory registering variable %s\n", deviceName);
        free(v);
        free(bytes);
        return;
    }
    v->host_var = hostVar;
    v->name = deviceName;
    v->size = size;
    v->bytes = bytes;
    pthread_mutex_lock(&g_mu);
    v->next = g_vars;
    g_vars = v;
    pthread_mutex_unlock(&g_mu);
}

/* the kernel whose host stub is f, or f itself if it is a kernel's handle */
static struct CUkern_st *kernel_of(const void *f) {
    struct CUkern_st *found = NULL;
    pthread_mutex_lock(&g_mu);
    for (struct CUkern_st *k = g_kernels; k && !found; k = k->next)
        if (k->host_fun == f || (const void *)k == f) found = k;
    pthread_mutex_unlock(&g_mu);
    return found;
}

cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun) {
    if (!kernel) return fk_error(cudaErrorInvalidValue);
    *kernel = kernel_of(hostFun);
    return *kernel ? cudaSuccess : cudaErrorInvalidDeviceFunction;
}

/* ---- the launch configuration: <<<grid, block, shmem, stream>>> ------------------------ */

typedef struct launch_cfg {
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
} launch_cfg;

/* nested: a launch in the arguments of another pushes while the outer one's
 * configuration waits */
enum { CFG_DEPTH = 16 };
static _Thread_local launch_cfg t_cfg[CFG_DEPTH];
static _Thread_local int t_ncfg;

unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st *stream) {
    if (t_ncfg == CFG_DEPTH) {
        fprintf(stderr, "fakegpu: __cudaPushCallConfiguration: launches nested more than %d deep\n", CFG_DEPTH);
        fk_error(cudaErrorInvalidConfiguration);
        return 1; /* nvcc's code skips the launch */
    }
    t_cfg[t_ncfg++] = (launch_cfg){gridDim, blockDim, sharedMem, stream};
    return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream) {
    if (t_ncfg == 0) return fk_error(cudaErrorMissingConfiguration);
    const launch_cfg *c = &t_cfg[--t_ncfg];
    *gridDim = c->grid;
    *blockDim = c->block;
    *sharedMem = c->shmem;
    memcpy(stream, &c->stream, sizeof c->stream); /* a cudaStream_t * */
    return cudaSuccess;
}

/* ---- twins ------------------------------------------------------------------------------ */

enum { MAX_ADDED_TABLES = 16 };
static const fk_twin *g_added[MAX_ADDED_TABLES];
static int g_nadded;

static void count_named(const fk_twin *tab, const char *name, const fk_twin **first, int *n) {
    for (const fk_twin *w = tab; w->name; w++)
        if (strcmp(w->name, name) == 0) {
            if (!*first) *first = w;
            (*n)++;
        }
}

/* how many twins named `name` the built-in tables (fk_twin_tables) and the
 * added ones hold; *first: the first (NULL if none) */
static int twins_named(const char *name, const fk_twin **first) {
    int n = 0;
    *first = NULL;
    for (int t = 0; fk_twin_tables[t]; t++) count_named(fk_twin_tables[t], name, first, &n);
    for (int t = 0; t < g_nadded; t++) count_named(g_added[t], name, first, &n);
    return n;
}

int fk_twins_add(const fk_twin *table) {
    if (!table) {
        fprintf(stderr, "fakegpu: fk_twins_add: the table is NULL\n");
        return -1;
    }
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    for (const fk_twin *w = table; w->name && rc == 0; w++) {
        const fk_twin *first;
        if (!w->fn) {
            fprintf(stderr, "fakegpu: fk_twins_add: the twin of kernel %s is NULL\n", w->name);
            rc = -1;
        } else if (twins_named(w->name, &first) > 0) {
            fprintf(stderr, "fakegpu: fk_twins_add: kernel %s has a twin already\n", w->name);
            rc = -1;
        }
    }
    if (rc == 0 && g_nadded == MAX_ADDED_TABLES) {
        fprintf(stderr, "fakegpu: fk_twins_add: more than %d tables added\n", MAX_ADDED_TABLES);
        rc = -1;
    }
    if (rc == 0) g_added[g_nadded++] = table;
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* k's twin (cached once found), or NULL with the reason on stderr */
static const fk_twin *twin_of(struct CUkern_st *k) {
    pthread_mutex_lock(&g_mu);
    const fk_twin *w = k->twin;
    if (!w) {
        int n = twins_named(k->name, &w);
        if (n == 0)
            fprintf(stderr, "fakegpu: kernel %s has no CPU twin (fk_twin_tables in twin_tables.c, fk_twins_add)\n",
                    k->name);
        else if (n > 1)
            fprintf(stderr, "fakegpu: kernel %s has %d twins (one per name)\n", k->name, n);
        if (n != 1) w = NULL;
        k->twin = w;
    }
    pthread_mutex_unlock(&g_mu);
    return w;
}

/* ---- launches ----------------------------------------------------------------------------- */

static int kernel_live(const struct CUkern_st *k) {
    int live = 0;
    pthread_mutex_lock(&g_mu);
    for (const struct CUkern_st *q = g_kernels; q; q = q->next)
        if (q == k) live = q->magic == KERN_LIVE;
    pthread_mutex_unlock(&g_mu);
    return live;
}

/* f: what the caller named (a host stub or a cudaKernel_t), for the message */
static cudaError_t launch(const void *f, dim3 g, dim3 b, void **args, size_t shmem, cudaStream_t s) {
    struct CUkern_st *k = kernel_of(f);
    if (!k || !kernel_live(k)) {
        if (k)
            fprintf(stderr, "fakegpu: launch of kernel %s after its module was unregistered\n", k->name);
        else
            fprintf(stderr, "fakegpu: launch of %p, which is not a registered kernel\n", f);
        return fk_error(cudaErrorInvalidDeviceFunction);
    }
    if (fk_device_count() == 0) return fk_error(cudaErrorNoDevice);
    if (!fk_stream_ok(s)) {
        fprintf(stderr, "fakegpu: kernel %s: launched on a stream that is not live\n", k->name);
        return fk_error(cudaErrorInvalidResourceHandle);
    }
    unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    const char *bad = NULL;
    if (!g.x || !g.y || !g.z || !b.x || !b.y || !b.z)
        bad = "a dimension is 0";
    else if (b.x > FK_MAX_BLOCK_X || b.y > FK_MAX_BLOCK_Y || b.z > FK_MAX_BLOCK_Z || threads > FK_MAX_THREADS_PER_BLOCK)
        bad = "the block exceeds CUDA's limits (1024 threads; x, y <= 1024, z <= 64)";
    else if (g.x > (unsigned)FK_MAX_GRID_X || g.y > FK_MAX_GRID_Y || g.z > FK_MAX_GRID_Z)
        bad = "the grid is larger than CUDA's limits (x < 2^31, y, z <= 65535)";
    if (bad) {
        fprintf(stderr, "fakegpu: kernel %s: grid (%u,%u,%u) block (%u,%u,%u): %s\n", k->name, g.x, g.y, g.z, b.x,
                b.y, b.z, bad);
        return fk_error(cudaErrorInvalidConfiguration);
    }
    if (shmem > (size_t)k->max_dyn_smem) {
        fprintf(stderr,
                "fakegpu: kernel %s: %zu bytes of dynamic shared memory, more than its %d "
                "(cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize) raises it up to %d)\n",
                k->name, shmem, k->max_dyn_smem, FK_SMEM_PER_BLOCK_OPTIN);
        return fk_error(cudaErrorInvalidValue);
    }
    const fk_twin *w = twin_of(k);
    if (!w) return fk_error(cudaErrorInvalidDeviceFunction);
    fk_launch l = {k->name, g, b, shmem, s, args};
    return fk_error(w->fn(&l));
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                               cudaStream_t stream) {
    return launch(kernel, gridDim, blockDim, args, sharedMem, stream);
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                                    cudaStream_t stream) {
    return launch(kernel, gridDim, blockDim, args, sharedMem, stream);
}

/* func: a kernel's host stub (or its cudaKernel_t) */
cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                             cudaStream_t stream) {
    return launch(func, gridDim, blockDim, args, sharedMem, stream);
}

cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                                  cudaStream_t stream) {
    return launch(func, gridDim, blockDim, args, sharedMem, stream);
}

/* ---- per-kernel attributes ----------------------------------------------------------------- */

static struct CUkern_st *kernel_or_say(const void *func, const char *call) {
    struct CUkern_st *k = kernel_of(func);
    if (!k) fprintf(stderr, "fakegpu: %s: %p is not a registered kernel\n", call, func);
    return k;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value) {
    struct CUkern_st *k = kernel_or_say(func, "cudaFuncSetAttribute");
    if (!k) return fk_error(cudaErrorInvalidDeviceFunction);
    switch (attr) {
    case cudaFuncAttributeMaxDynamicSharedMemorySize:
        if (value < 0 || value > FK_SMEM_PER_BLOCK_OPTIN) {
            fprintf(stderr, "fakegpu: cudaFuncSetAttribute: kernel %s: %d bytes of dynamic shared memory, "
                    "outside 0..%d\n", k->name, value, FK_SMEM_PER_BLOCK_OPTIN);
            return fk_error(cudaErrorInvalidValue);
        }
        k->max_dyn_smem = value;
        return cudaSuccess;
    case cudaFuncAttributePreferredSharedMemoryCarveout:
        if (value < -1 || value > 100) return fk_error(cudaErrorInvalidValue);
        k->carveout = value;
        return cudaSuccess;
    default:
        fprintf(stderr, "fakegpu: cudaFuncSetAttribute: kernel %s: attribute %d is not one the fake knows\n",
                k->name, (int)attr);
        return fk_error(cudaErrorInvalidValue);
    }
}

/* The fake knows no kernel's registers, static shared or local memory: 0. */
cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func) {
    if (!attr) return fk_error(cudaErrorInvalidValue);
    struct CUkern_st *k = kernel_or_say(func, "cudaFuncGetAttributes");
    if (!k) return fk_error(cudaErrorInvalidDeviceFunction);
    memset(attr, 0, sizeof *attr);
    attr->maxThreadsPerBlock = FK_MAX_THREADS_PER_BLOCK;
    attr->maxDynamicSharedSizeBytes = k->max_dyn_smem;
    attr->preferredShmemCarveout = k->carveout;
    attr->ptxVersion = FK_CC_MAJOR * 10 + FK_CC_MINOR;
    attr->binaryVersion = FK_CC_MAJOR * 10 + FK_CC_MINOR;
    return cudaSuccess;
}

/* blocks of blockSize threads and dynamicSMemSize bytes that fit on one
 * multiprocessor by threads, blocks and shared memory (registers unknown) */
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, const void *func, int blockSize,
                                                          size_t dynamicSMemSize) {
    if (!numBlocks || blockSize <= 0) return fk_error(cudaErrorInvalidValue);
    struct CUkern_st *k = kernel_or_say(func, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    if (!k) return fk_error(cudaErrorInvalidDeviceFunction);
    if (blockSize > FK_MAX_THREADS_PER_BLOCK || dynamicSMemSize > (size_t)k->max_dyn_smem) {
        *numBlocks = 0;
        return cudaSuccess;
    }
    int warps = (blockSize + FK_WARP - 1) / FK_WARP;
    int n = FK_THREADS_PER_SM / (warps * FK_WARP);
    if (n > FK_BLOCKS_PER_SM) n = FK_BLOCKS_PER_SM;
    size_t by_smem = (size_t)FK_SMEM_PER_SM / (dynamicSMemSize + FK_SMEM_RESERVED_PER_BLOCK);
    if (by_smem < (size_t)n) n = (int)by_smem;
    *numBlocks = n;
    return cudaSuccess;
}

/* ---- __device__ and __constant__ variables: host copies --------------------------------------- */

static var *var_of(const void *symbol) {
    var *found = NULL;
    pthread_mutex_lock(&g_mu);
    for (var *v = g_vars; v && !found; v = v->next)
        if ((const void *)v->host_var == symbol) found = v;
    pthread_mutex_unlock(&g_mu);
    return found;
}

/* the host address of the other side of a symbol copy of n bytes (to_symbol:
 * p is the source, else the destination), checked against the copy's kind;
 * NULL and *e set if it does not match */
static void *symbol_peer(const void *p, size_t n, enum cudaMemcpyKind kind, int to_symbol, cudaError_t *e) {
    int k, d;
    void *h;
    if (!p || fk_mem(p, n, &k, &d, &h)) {
        *e = cudaErrorInvalidValue;
        return NULL;
    }
    int on_dev = k == FK_DEVICE || k == FK_MANAGED, on_host = k != FK_DEVICE, ok;
    switch (kind) {
    case cudaMemcpyDefault: ok = 1; break;
    case cudaMemcpyDeviceToDevice: ok = on_dev; break;
    case cudaMemcpyHostToDevice: ok = to_symbol && on_host; break;
    case cudaMemcpyDeviceToHost: ok = !to_symbol && on_host; break;
    default: ok = 0; break;
    }
    if (!ok) {
        *e = cudaErrorInvalidMemcpyDirection;
        return NULL;
    }
    return h;
}

static cudaError_t symbol_copy(void *dst, const void *src, const void *symbol, size_t count, size_t offset,
                               enum cudaMemcpyKind kind, cudaStream_t s, int to_symbol) {
    if (!fk_stream_ok(s)) return fk_error(cudaErrorInvalidResourceHandle);
    var *v = var_of(symbol);
    if (!v) return fk_error(cudaErrorInvalidSymbol);
    if (offset > v->size || count > v->size - offset) return fk_error(cudaErrorInvalidValue);
    if (count == 0) return cudaSuccess;
    cudaError_t e = cudaSuccess;
    void *peer = symbol_peer(to_symbol ? src : dst, count, kind, to_symbol, &e);
    if (!peer) return fk_error(e);
    if (to_symbol)
        memmove(v->bytes + offset, peer, count);
    else
        memmove(peer, v->bytes + offset, count);
    return cudaSuccess;
}

cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
                               enum cudaMemcpyKind kind) {
    return symbol_copy(NULL, src, symbol, count, offset, kind, NULL, 1);
}

cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, size_t offset,
                                 enum cudaMemcpyKind kind) {
    return symbol_copy(dst, NULL, symbol, count, offset, kind, NULL, 0);
}

cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count, size_t offset,
                                    enum cudaMemcpyKind kind, cudaStream_t stream) {
    return symbol_copy(NULL, src, symbol, count, offset, kind, stream, 1);
}

cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind, cudaStream_t stream) {
    return symbol_copy(dst, NULL, symbol, count, offset, kind, stream, 0);
}

cudaError_t cudaGetSymbolSize(size_t *size, const void *symbol) {
    if (!size) return fk_error(cudaErrorInvalidValue);
    var *v = var_of(symbol);
    if (!v) return fk_error(cudaErrorInvalidSymbol);
    *size = v->size;
    return cudaSuccess;
}

/* a variable's copy is host memory, not device memory a kernel could be
 * handed: refused, with the way twins reach it */
cudaError_t cudaGetSymbolAddress(void **devPtr, const void *symbol) {
    if (devPtr) *devPtr = NULL;
    var *v = var_of(symbol);
    fprintf(stderr, "fakegpu: cudaGetSymbolAddress(%s): not supported; the fake keeps device variables as host "
            "copies, which twins read with fk_var\n", v ? v->name : "an unregistered symbol");
    return fk_error(v ? cudaErrorNotSupported : cudaErrorInvalidSymbol);
}

void *fk_var(const char *name, size_t bytes) {
    var *found = NULL;
    pthread_mutex_lock(&g_mu);
    for (var *v = g_vars; v && !found; v = v->next)
        if (strcmp(v->name, name) == 0) found = v;
    pthread_mutex_unlock(&g_mu);
    if (!found) {
        fprintf(stderr, "fakegpu: fk_var: no device variable %s is registered\n", name);
        return NULL;
    }
    if (bytes > found->size) {
        fprintf(stderr, "fakegpu: fk_var: device variable %s has %zu bytes, not %zu\n", name, found->size, bytes);
        return NULL;
    }
    return found->bytes;
}

/* ---- a twin's arguments -------------------------------------------------------------------------- */

/* the bytes of argument i, or NULL (said on stderr) if the launch passed none */
static const void *arg(const fk_launch *l, int i) {
    if (!l->args || i < 0 || !l->args[i]) {
        fprintf(stderr, "fakegpu: kernel %s: argument %d was not passed\n", l->name, i);
        return NULL;
    }
    return l->args[i];
}

#define ARG_AS(type, l, i)                             \
    do {                                               \
        type v_ = 0;                                   \
        const void *a_ = arg(l, i);                    \
        if (a_) memcpy(&v_, a_, sizeof v_);            \
        return v_;                                     \
    } while (0)

int fk_int_arg(const fk_launch *l, int i) { ARG_AS(int, l, i); }
long long fk_i64_arg(const fk_launch *l, int i) { ARG_AS(long long, l, i); }
size_t fk_size_arg(const fk_launch *l, int i) { ARG_AS(size_t, l, i); }
float fk_float_arg(const fk_launch *l, int i) { ARG_AS(float, l, i); }

static const void *ptr_arg(const fk_launch *l, int i) {
    const void *a = arg(l, i);
    const void *p = NULL;
    if (a) memcpy(&p, a, sizeof p);
    return p;
}

int fk_ptr_arg_is_null(const fk_launch *l, int i) { return ptr_arg(l, i) == NULL; }

void *fk_dev_arg(const fk_launch *l, int i, size_t bytes) {
    const void *p = ptr_arg(l, i);
    if (!p) return NULL;
    int kind, dev;
    void *host;
    int rc = fk_mem(p, bytes, &kind, &dev, &host);
    const char *why = NULL;
    char buf[96];
    if (kind == FK_UNREG)
        why = "is host memory, not device memory";
    else if (kind == FK_HOST)
        why = "is pinned host memory, not device memory";
    else if (kind == FK_DEVICE && dev != fk_current_device()) {
        snprintf(buf, sizeof buf, "is device memory of device %d, not of the current device %d", dev,
                 fk_current_device());
        why = buf;
    } else if (rc)
        why = "runs past the end of its allocation";
    if (why) {
        fprintf(stderr, "fakegpu: kernel %s: argument %d (%p, %zu bytes) %s\n", l->name, i, p, bytes, why);
        return NULL;
    }
    return host;
}

size_t fk_threads(const fk_launch *l) {
    return (size_t)l->grid.x * l->grid.y * l->grid.z * l->block.x * l->block.y * l->block.z;
}
