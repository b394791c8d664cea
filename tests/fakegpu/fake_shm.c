/* tests/fakegpu/fake_shm.c - the fake NCCL's communicators and collectives
 * over shared memory (fake_shm.h). Each collective moves FK_CHUNK bytes per
 * rank at a time: every rank copies its chunk into its slot, a barrier, every
 * rank reads the slots it needs (reducing in rank order, so that all ranks
 * compute the same bits), a barrier before the slots are reused. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "fake_shm.h"

/* ---- the segment ---------------------------------------------------------------------- */

static size_t slots_off(void) { return (sizeof(fk_shared) + 4095) / 4096 * 4096; }
static size_t box_size(void) { return 64 + FK_CHUNK; }
static size_t boxes_off(int n) { return slots_off() + (size_t)n * FK_CHUNK; }
static size_t seg_size(int n) { return boxes_off(n) + (size_t)n * (size_t)n * box_size(); }

static char *slot(struct ncclComm *c, int r) { return (char *)c->sh + slots_off() + (size_t)r * FK_CHUNK; }
fk_box *fk_box_of(struct ncclComm *c, int src, int dst) {
    return (fk_box *)((char *)c->sh + boxes_off(c->n) + ((size_t)src * (size_t)c->n + (size_t)dst) * box_size());
}
char *fk_box_data(fk_box *b) { return (char *)b + 64; }

static uint64_t host_hash(void) {
    char h[256] = "";
    gethostname(h, sizeof h - 1);
    uint64_t x = 1469598103934665603ull;
    for (const char *p = h; *p; p++) x = (x ^ (unsigned char)*p) * 1099511628211ull;
    return x;
}

void fk_backoff(unsigned *spins) {
    ++*spins;
    if (*spins < 100) return;
    if (*spins < 3000) { sched_yield(); return; }
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
}

ncclResult_t fk_alive(struct ncclComm *c) {
    int who = atomic_load(&c->sh->aborted);
    if (atomic_load(&c->aborted) || who) {
        snprintf(c->last, sizeof c->last, "fakegpu: communicator %s was aborted (ncclCommAbort on rank %d)", c->name,
                 atomic_load(&c->aborted) ? c->rank : who - 1);
        return ncclRemoteError;
    }
    return ncclSuccess;
}

ncclResult_t fk_barrier(struct ncclComm *c) {
    fk_shared *h = c->sh;
    uint32_t g = atomic_load(&h->gen);
    if (atomic_fetch_add(&h->arrived, 1) == (uint32_t)c->n - 1) {
        atomic_store(&h->arrived, 0);
        atomic_fetch_add(&h->gen, 1);
        return ncclSuccess;
    }
    unsigned spins = 0;
    while (atomic_load(&h->gen) == g) {
        ncclResult_t r = fk_alive(c);
        if (r != ncclSuccess) return r;
        fk_backoff(&spins);
    }
    return ncclSuccess;
}

ncclResult_t fk_open(const char *name, int n, int rank, int dev, struct ncclComm **out, char *last, size_t cap) {
    *out = NULL;
    size_t len = seg_size(n);
    int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
    if (fd < 0) {
        snprintf(last, cap, "fakegpu: shm_open %s failed", name);
        return ncclSystemError;
    }
    /* every rank sets the same size: the first one's zeros stay */
    void *m = ftruncate(fd, (off_t)len) == 0 ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (m == MAP_FAILED) {
        snprintf(last, cap, "fakegpu: %zu bytes of shared memory for %s failed", len, name);
        return ncclSystemError;
    }
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c) { munmap(m, len); return ncclSystemError; }
    c->magic = FK_COMM_LIVE;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->n = n;
    c->rank = rank;
    c->dev = dev;
    c->sh = m;
    c->maplen = len;
    c->sh->where[rank] = host_hash() << 8 | (uint64_t)(dev & 0xff);
    ncclResult_t r = fk_barrier(c); /* every rank has mapped it: the name can go */
    if (rank == 0) shm_unlink(name);
    const char *multi = getenv("NCCL_MULTI_RANK_GPU_ENABLE");
    for (int q = 0; r == ncclSuccess && q < n && !(multi && strcmp(multi, "1") == 0); q++)
        if (q != rank && c->sh->where[q] == c->sh->where[rank]) {
            snprintf(last, cap, "Duplicate GPU detected : rank %d and rank %d both on CUDA device %d (fakegpu)",
                     q < rank ? q : rank, q < rank ? rank : q, dev);
            r = ncclInvalidUsage;
        }
    if (r != ncclSuccess) { fk_close(c); return r; }
    *out = c;
    return ncclSuccess;
}

void fk_close(struct ncclComm *c) {
    if (!c) return;
    munmap(c->sh, c->maplen);
    c->magic = 0;
    free(c);
}

/* ---- element types and reductions -------------------------------------------------------- */

size_t fk_type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

static float h2f(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0) {
        float f = ldexpf((float)m, -24);
        return s ? -f : f;
    }
    u = e == 31 ? s | 0x7f800000u | m << 13 : s | (e + 112) << 23 | m << 13;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t f2h(float f) { /* round to nearest even */
    uint32_t u, a;
    memcpy(&u, &f, 4);
    uint16_t s = (uint16_t)(u >> 16 & 0x8000u);
    a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return s | 0x7e00u;
    if (a >= 0x477ff000u) return s | 0x7c00u; /* 65520 and up: infinity */
    if (a < 0x38800000u) {                    /* below 2^-14: subnormal */
        float v;
        memcpy(&v, &a, 4);
        return s | (uint16_t)nearbyintf(v * 16777216.0f);
    }
    a -= 0x38000000u;
    return s | (uint16_t)((a + 0xfffu + (a >> 13 & 1u)) >> 13);
}

static float b2f(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t f2b(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x40u);
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}

#define FOLD_INT(T, UT)                                                                         \
    do {                                                                                        \
        T *a = (T *)acc;                                                                        \
        const T *b = (const T *)x;                                                              \
        for (size_t i = 0; i < k; i++) switch (op) {                                           \
            case ncclProd: a[i] = (T)((UT)a[i] * (UT)b[i]); break;                              \
            case ncclMin: a[i] = b[i] < a[i] ? b[i] : a[i]; break;                              \
            case ncclMax: a[i] = b[i] > a[i] ? b[i] : a[i]; break;                              \
            default: a[i] = (T)((UT)a[i] + (UT)b[i]); break; /* sum, avg (divided at the end) */ \
            }                                                                                   \
    } while (0)

#define FOLD_FLOAT(T)                                                        \
    do {                                                                     \
        T *a = (T *)acc;                                                     \
        const T *b = (const T *)x;                                           \
        for (size_t i = 0; i < k; i++) switch (op) {                        \
            case ncclProd: a[i] = a[i] * b[i]; break;                        \
            case ncclMin: a[i] = b[i] < a[i] ? b[i] : a[i]; break;           \
            case ncclMax: a[i] = b[i] > a[i] ? b[i] : a[i]; break;           \
            case ncclAvg: a[i] = a[i] + b[i] * (T)inv; break;                \
            default: a[i] = a[i] + b[i]; break;                              \
            }                                                                \
    } while (0)

#define FOLD_HALF(TO, FROM)                                                        \
    do {                                                                           \
        uint16_t *a = (uint16_t *)acc;                                             \
        const uint16_t *b = (const uint16_t *)x;                                   \
        for (size_t i = 0; i < k; i++) {                                           \
            float p = TO(a[i]), q = TO(b[i]), v;                                   \
            switch (op) {                                                          \
            case ncclProd: v = p * q; break;                                       \
            case ncclMin: v = q < p ? q : p; break;                                \
            case ncclMax: v = q > p ? q : p; break;                                \
            case ncclAvg: v = p + TO(FROM(q * TO(FROM((float)inv)))); break;       \
            default: v = p + q; break;                                             \
            }                                                                      \
            a[i] = FROM(v);                                                        \
        }                                                                          \
    } while (0)

/* acc (k elements) op= x; avg of floats adds x * (1/n) (NCCL's pre-multiplied sum) */
static void fold(char *acc, const char *x, size_t k, ncclDataType_t t, ncclRedOp_t op, double inv) {
    switch (t) {
    case ncclInt8: FOLD_INT(int8_t, uint8_t); break;
    case ncclUint8: FOLD_INT(uint8_t, uint8_t); break;
    case ncclInt32: FOLD_INT(int32_t, uint32_t); break;
    case ncclUint32: FOLD_INT(uint32_t, uint32_t); break;
    case ncclInt64: FOLD_INT(int64_t, uint64_t); break;
    case ncclUint64: FOLD_INT(uint64_t, uint64_t); break;
    case ncclFloat32: FOLD_FLOAT(float); break;
    case ncclFloat64: FOLD_FLOAT(double); break;
    case ncclFloat16: FOLD_HALF(h2f, f2h); break;
    case ncclBfloat16: FOLD_HALF(b2f, f2b); break;
    default: break;
    }
}

/* the first term of an avg of floats: x * (1/n) */
static void premul(char *acc, size_t k, ncclDataType_t t, double inv) {
    for (size_t i = 0; i < k; i++) switch (t) {
        case ncclFloat32: ((float *)acc)[i] *= (float)inv; break;
        case ncclFloat64: ((double *)acc)[i] *= inv; break;
        case ncclFloat16: ((uint16_t *)acc)[i] = f2h(h2f(((uint16_t *)acc)[i]) * h2f(f2h((float)inv))); break;
        case ncclBfloat16: ((uint16_t *)acc)[i] = f2b(b2f(((uint16_t *)acc)[i]) * b2f(f2b((float)inv))); break;
        default: return;
        }
}

#define DIV_INT(T)                                                      \
    do {                                                                \
        T *a = (T *)acc;                                                \
        for (size_t i = 0; i < k; i++) a[i] = (T)(a[i] / (T)n);         \
    } while (0)

/* the end of an avg of integers: the sum divided by n */
static void postdiv(char *acc, size_t k, ncclDataType_t t, int n) {
    switch (t) {
    case ncclInt8: DIV_INT(int8_t); break;
    case ncclUint8: DIV_INT(uint8_t); break;
    case ncclInt32: DIV_INT(int32_t); break;
    case ncclUint32: DIV_INT(uint32_t); break;
    case ncclInt64: DIV_INT(int64_t); break;
    case ncclUint64: DIV_INT(uint64_t); break;
    default: break;
    }
}

static int is_float(ncclDataType_t t) {
    return t == ncclFloat16 || t == ncclBfloat16 || t == ncclFloat32 || t == ncclFloat64;
}

/* dst = the reduction of every rank's slot (k elements), in rank order */
static void reduce_slots(struct ncclComm *c, char *dst, size_t k, ncclDataType_t t, ncclRedOp_t op) {
    size_t es = fk_type_size(t);
    double inv = 1.0 / c->n;
    memcpy(dst, slot(c, 0), k * es);
    if (op == ncclAvg && is_float(t)) premul(dst, k, t, inv);
    for (int q = 1; q < c->n; q++) fold(dst, slot(c, q), k, t, op, inv);
    if (op == ncclAvg && !is_float(t)) postdiv(dst, k, t, c->n);
}

/* ---- collectives ------------------------------------------------------------------------------ */

#define STEP(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) return r_; } while (0)

/* reduce every rank's s into r on the ranks `to` says (-1: all) */
static ncclResult_t reduce_to(struct ncclComm *c, const char *s, char *r, size_t count, ncclDataType_t t,
                              ncclRedOp_t op, int to) {
    size_t es = fk_type_size(t), per = FK_CHUNK / es;
    for (size_t off = 0; off < count; off += per) {
        size_t k = count - off < per ? count - off : per;
        memcpy(slot(c, c->rank), s + off * es, k * es);
        STEP(fk_barrier(c));
        if (to < 0 || to == c->rank) reduce_slots(c, r + off * es, k, t, op);
        STEP(fk_barrier(c));
    }
    return ncclSuccess;
}

ncclResult_t fk_allreduce(struct ncclComm *c, const char *s, char *r, size_t count, ncclDataType_t t, ncclRedOp_t op) {
    return reduce_to(c, s, r, count, t, op, -1);
}

ncclResult_t fk_reduce(struct ncclComm *c, const char *s, char *r, size_t count, ncclDataType_t t, ncclRedOp_t op,
                       int root) {
    return reduce_to(c, s, r, count, t, op, root);
}

ncclResult_t fk_reduce_scatter(struct ncclComm *c, const char *s, char *r, size_t count, ncclDataType_t t,
                               ncclRedOp_t op) {
    size_t es = fk_type_size(t);
    for (int d = 0; d < c->n; d++)
        STEP(reduce_to(c, s + (size_t)d * count * es, r, count, t, op, d));
    return ncclSuccess;
}

ncclResult_t fk_broadcast(struct ncclComm *c, const char *s, char *r, size_t count, ncclDataType_t t, int root) {
    size_t es = fk_type_size(t), per = FK_CHUNK / es;
    for (size_t off = 0; off < count; off += per) {
        size_t k = count - off < per ? count - off : per;
        if (c->rank == root) memcpy(slot(c, root), s + off * es, k * es);
        STEP(fk_barrier(c));
        memmove(r + off * es, slot(c, root), k * es);
        STEP(fk_barrier(c));
    }
    return ncclSuccess;
}

ncclResult_t fk_allgather(struct ncclComm *c, const char *s, char *r, size_t count, ncclDataType_t t) {
    size_t es = fk_type_size(t), per = FK_CHUNK / es;
    for (size_t off = 0; off < count; off += per) {
        size_t k = count - off < per ? count - off : per;
        memcpy(slot(c, c->rank), s + off * es, k * es);
        STEP(fk_barrier(c));
        for (int q = 0; q < c->n; q++) memcpy(r + ((size_t)q * count + off) * es, slot(c, q), k * es);
        STEP(fk_barrier(c));
    }
    return ncclSuccess;
}
