/* tests/coll/coll_common.h - shared by the collective tests (header-only, static).
 *
 *  - the communicators under test for the current world size (world plus
 *    rank_list sub-communicators), with the test's OWN model of each group
 *    (members sorted by world rank), independent of the library's attributes;
 *  - deterministic inputs from (dtype, op class, world rank, element, salt),
 *    chosen so every reduction is exact (small integers; prod in {1,2,-1});
 *  - reference results computed locally from every member's known inputs, the
 *    way coll.h defines them (16-bit floats: widen, reduce in f32, round once;
 *    avg on integers truncates toward zero);
 *  - a "job": one collective call with its buffers, in-place variant, guard
 *    elements after every buffer, submission (blocking or async) and bitwise
 *    verification.
 * Define _POSIX_C_SOURCE before including (nanosleep). */
#ifndef DT_COLL_COMMON_H
#define DT_COLL_COMMON_H

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include "testutil.h"

static int W = 1, ME = 0; /* world size and rank */

/* ---- messages --------------------------------------------------------------- */
/* status st, message names the function fn and one of the alternatives */
#define CHECK_ERRF(expr, st, fn, alts) do { dt_clear_error(); int rc_ = (expr); \
    CHECK(rc_ == (st) && strstr(dt_last_error(), fn) != NULL && dt_test_msg_has(alts), \
          "%s -> %s (want %s), message '%s' (want '%s' and one of '%s')", #expr, \
          dt_status_str(rc_), dt_status_str(st), dt_last_error(), fn, alts); } while (0)

/* ---- communicators under test ------------------------------------------------ */
typedef struct {
    char name[64];
    dt_comm *comm;
    int n, grank, gid, ngroups;
    int mem[64]; /* member world ranks, ascending (group rank order) */
} tcomm;

/* The test's own reading of a rank_list text (digits, brackets, commas). */
static inline void model_comm(tcomm *t, const char *text) {
    int g = -1, cur[64], nc = 0, found = 0;
    t->ngroups = 0;
    for (const char *p = text; *p; p++) {
        if (*p == '[' && p != text && g >= -1) { g++; nc = 0; }
        else if (isdigit((unsigned char)*p)) {
            cur[nc++] = (int)strtol(p, (char **)&p, 10);
            p--;
        } else if (*p == ']' && nc > 0) {
            t->ngroups++;
            int in = 0;
            for (int i = 0; i < nc; i++) in |= cur[i] == ME;
            if (in && !found) {
                found = 1;
                t->gid = g;
                t->n = nc;
                memcpy(t->mem, cur, sizeof(int) * (size_t)nc);
            }
            nc = 0;
        }
    }
    if (!found) { t->gid = -1; t->n = 1; t->mem[0] = ME; }
    for (int i = 1; i < t->n; i++)
        for (int j = i; j > 0 && t->mem[j - 1] > t->mem[j]; j--) {
            int x = t->mem[j]; t->mem[j] = t->mem[j - 1]; t->mem[j - 1] = x;
        }
    for (int i = 0; i < t->n; i++) if (t->mem[i] == ME) t->grank = i;
}

/* rank_lists used at each world size ("where size allows"). */
static inline int comm_lists(const char **out) {
    int k = 0;
    switch (W) {
    case 1: out[k++] = "[[0]]"; break;
    case 2: out[k++] = "[[1,0]]"; out[k++] = "[[1],[0]]"; out[k++] = "[[1]]"; break;
    case 3: out[k++] = "[[0,2],[1]]"; out[k++] = "[[2,1]]"; break;
    case 4:
        out[k++] = "[[0,1],[2,3]]"; out[k++] = "[[1,2,3],[0]]"; out[k++] = "[[0,2],[1,3]]";
        out[k++] = "[[0,1,2]]"; /* rank 3 standalone */
        break;
    default: break;
    }
    return k;
}

/* World first, then the rank_lists; checks the library's view against the model.
 * Collective over the world. Returns the number of communicators. */
static inline int setup_comms(tcomm *tc) {
    static char gen_list[512];
    const char *lists[8];
    int nl = comm_lists(lists), k = 0;
    if (W > 4) { /* generic: two halves */
        size_t len = 0;
        for (int r = 0; r < W; r++)
            len += (size_t)snprintf(gen_list + len, sizeof gen_list - len, "%s%d",
                                    r == 0 ? "[[" : r == W / 2 ? "],[" : ",", r);
        snprintf(gen_list + len, sizeof gen_list - len, "]]");
        lists[nl++] = gen_list;
    }
    memset(&tc[0], 0, sizeof tc[0]);
    snprintf(tc[0].name, sizeof tc[0].name, "world");
    tc[0].comm = dt_comm_world();
    tc[0].n = W; tc[0].grank = ME; tc[0].gid = 0; tc[0].ngroups = 1;
    for (int i = 0; i < W; i++) tc[0].mem[i] = i;
    k = 1;
    for (int l = 0; l < nl; l++, k++) {
        memset(&tc[k], 0, sizeof tc[k]);
        snprintf(tc[k].name, sizeof tc[k].name, "%s", lists[l]);
        model_comm(&tc[k], lists[l]);
        CHECK_OK(dt_comm_from_rank_list_str(lists[l], &tc[k].comm));
    }
    for (int i = 0; i < k; i++) {
        int ok = tc[i].comm && dt_comm_size(tc[i].comm) == tc[i].n &&
                 dt_comm_rank(tc[i].comm) == tc[i].grank;
        CHECK(ok, "%s: library says rank %d of %d, model %d of %d", tc[i].name,
              tc[i].comm ? dt_comm_rank(tc[i].comm) : -1, tc[i].comm ? dt_comm_size(tc[i].comm) : -1,
              tc[i].grank, tc[i].n);
        if (!ok) { fprintf(stderr, "communicator setup failed\n"); exit(1); }
    }
    return k;
}

/* dt_init + world size/rank + dt_test_rank; exits on failure (nothing to test). */
static inline void coll_init(void) {
    int rc = dt_init();
    if (rc != DT_OK) {
        fprintf(stderr, "dt_init: %s %s\n", dt_status_str(rc), dt_last_error());
        exit(1);
    }
    W = dt_comm_size(dt_comm_world());
    ME = dt_comm_rank(dt_comm_world());
    dt_test_rank = ME;
}

/* ---- deterministic inputs -------------------------------------------------------- */
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline uint64_t hash4(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
    return mix64((a * 0x9e3779b97f4a7c15ull) ^
                 mix64((b + 0x632be59bd9b4e019ull) ^
                       mix64((c * 0xd1342543de82ef95ull) ^ mix64(d + 1))));
}

typedef enum { GEN_SUM, GEN_PROD, GEN_MINMAX, GEN_RAW } gen_kind;
static inline gen_kind gen_for(dt_op op) {
    return op == DT_PROD ? GEN_PROD : (op == DT_MIN || op == DT_MAX) ? GEN_MINMAX : GEN_SUM;
}

static inline int is_int_dt(dt_dtype dt) { return dt == DT_I8 || dt == DT_U8 || dt == DT_I32 || dt == DT_I64; }

static inline void st_int(dt_dtype dt, void *p, int64_t v) {
    switch (dt) {
    case DT_I8: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
    case DT_U8: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case DT_I32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}
static inline int64_t ld_int(dt_dtype dt, const void *p) {
    switch (dt) {
    case DT_I8: { int8_t x; memcpy(&x, p, 1); return x; }
    case DT_U8: { uint8_t x; memcpy(&x, p, 1); return x; }
    case DT_I32: { int32_t x; memcpy(&x, p, 4); return x; }
    default: { int64_t x; memcpy(&x, p, 8); return x; }
    }
}
/* float types; the value must be exactly representable */
static inline void st_flt(dt_dtype dt, void *p, double v) {
    switch (dt) {
    case DT_F32: { float x = (float)v; memcpy(p, &x, 4); break; }
    case DT_F64: memcpy(p, &v, 8); break;
    case DT_F16: { uint16_t h = dt_f32_to_f16((float)v); memcpy(p, &h, 2); break; }
    default: { uint16_t h = dt_f32_to_bf16((float)v); memcpy(p, &h, 2); break; }
    }
}
static inline double ld_flt(dt_dtype dt, const void *p) {
    switch (dt) {
    case DT_F32: { float x; memcpy(&x, p, 4); return x; }
    case DT_F64: { double x; memcpy(&x, p, 8); return x; }
    case DT_F16: { uint16_t h; memcpy(&h, p, 2); return dt_f16_to_f32(h); }
    default: { uint16_t h; memcpy(&h, p, 2); return dt_bf16_to_f32(h); }
    }
}

/* One input element of world rank wr at global index i. */
static inline void gen_elem(dt_dtype dt, gen_kind k, int wr, size_t i, uint64_t salt, void *dst) {
    uint64_t h = hash4(salt, (uint64_t)wr, (uint64_t)i, (uint64_t)dt * 8 + (uint64_t)k);
    size_t es = dt_dtype_size(dt);
    if (k == GEN_RAW) { memcpy(dst, &h, es); return; }
    if (k == GEN_PROD) {
        int64_t p = dt == DT_U8 ? (int64_t)(1 + (h >> 7) % 2) : (int64_t[]){1, 2, -1}[(h >> 7) % 3];
        if (is_int_dt(dt)) st_int(dt, dst, p);
        else st_flt(dt, dst, (double)p);
        return;
    }
    if (k == GEN_MINMAX) {
        if ((h & 7) == 0) { /* repeated small values: ties between ranks */
            int64_t b = (int64_t)((h >> 8) % 5) - 2;
            if (dt == DT_U8) b += 2;
            if (b == 0) b = 3;
            if (is_int_dt(dt)) st_int(dt, dst, b);
            else st_flt(dt, dst, (double)b);
            return;
        }
        uint64_t r = mix64(h);
        switch (dt) { /* any finite non-zero value; ints: full range */
        case DT_F32: {
            uint32_t u = (uint32_t)r;
            if (((u >> 23) & 255) == 255) u ^= 1u << 30;
            if ((u & 0x7fffffffu) == 0) u |= 1;
            memcpy(dst, &u, 4);
            break;
        }
        case DT_F64: {
            uint64_t u = r;
            if (((u >> 52) & 2047) == 2047) u ^= 1ull << 62;
            if ((u & 0x7fffffffffffffffull) == 0) u |= 1;
            memcpy(dst, &u, 8);
            break;
        }
        case DT_F16: {
            uint16_t u = (uint16_t)r;
            if (((u >> 10) & 31) == 31) u ^= 1u << 14;
            if ((u & 0x7fffu) == 0) u |= 1;
            memcpy(dst, &u, 2);
            break;
        }
        case DT_BF16: {
            uint16_t u = (uint16_t)r;
            if (((u >> 7) & 255) == 255) u ^= 1u << 14;
            if ((u & 0x7fffu) == 0) u |= 1;
            memcpy(dst, &u, 2);
            break;
        }
        default: memcpy(dst, &r, es); break;
        }
        return;
    }
    /* GEN_SUM (sum and avg): small integers b in [-15, 15], scaled per dtype so the
     * exact sum over <= 4 ranks fits; 16-bit floats get occasional large values so
     * that rounding the f32 sum once to 16 bits matters. */
    int64_t b = (int64_t)((h >> 8) % 31) - 15;
    int big = ((h >> 40) % 3) == 0;
    switch (dt) {
    case DT_F32: st_flt(dt, dst, (double)b * 4096.25); break;
    case DT_F64: st_flt(dt, dst, (double)b * 0x1p30 + (double)b * 0x1p-10); break;
    case DT_F16: st_flt(dt, dst, big ? 2048.0 + 2.0 * (double)b : (double)b); break;
    case DT_BF16: st_flt(dt, dst, big ? 256.0 + 2.0 * (double)b : (double)b); break;
    case DT_I8: st_int(dt, dst, b); break;
    case DT_U8: st_int(dt, dst, b + 15); break;
    case DT_I32: st_int(dt, dst, b * 1000004); break;
    default: st_int(dt, dst, b * ((int64_t)1 << 40) + b); break;
    }
}

static inline void gen_buf(dt_dtype dt, gen_kind k, int wr, size_t first, size_t count, uint64_t salt,
                    void *dst) {
    size_t es = dt_dtype_size(dt);
    for (size_t i = 0; i < count; i++) gen_elem(dt, k, wr, first + i, salt, (char *)dst + i * es);
}

/* Reference reduction of elements [first, first+count) over the members of t. */
static inline void expect_reduce(dt_dtype dt, dt_op op, const tcomm *t, size_t first, size_t count,
                          uint64_t salt, void *out) {
    size_t es = dt_dtype_size(dt);
    gen_kind k = gen_for(op);
    unsigned char e[8];
    for (size_t i = 0; i < count; i++) {
        char *o = (char *)out + i * es;
        if (is_int_dt(dt)) {
            int64_t acc = 0;
            for (int m = 0; m < t->n; m++) {
                gen_elem(dt, k, t->mem[m], first + i, salt, e);
                int64_t v = ld_int(dt, e);
                if (m == 0) acc = v;
                else if (op == DT_SUM || op == DT_AVG) acc += v;
                else if (op == DT_PROD) acc *= v;
                else if (op == DT_MIN) acc = v < acc ? v : acc;
                else acc = v > acc ? v : acc;
            }
            if (op == DT_AVG) acc /= t->n; /* C division truncates toward zero */
            st_int(dt, o, acc);
        } else if (op == DT_MIN || op == DT_MAX) {
            double best = 0;
            for (int m = 0; m < t->n; m++) {
                gen_elem(dt, k, t->mem[m], first + i, salt, e);
                double v = ld_flt(dt, e);
                if (m == 0 || (op == DT_MIN ? v < best : v > best)) { best = v; memcpy(o, e, es); }
            }
        } else {
            double acc = 0; /* exact: small integers / few bits */
            for (int m = 0; m < t->n; m++) {
                gen_elem(dt, k, t->mem[m], first + i, salt, e);
                double v = ld_flt(dt, e);
                acc = m == 0 ? v : op == DT_PROD ? acc * v : acc + v;
            }
            if (dt == DT_F64) {
                double r = op == DT_AVG ? acc / (double)t->n : acc;
                memcpy(o, &r, 8);
            } else {
                float f = (float)acc; /* exact */
                if (op == DT_AVG) f = f / (float)t->n; /* in f32, rounded once */
                if (dt == DT_F32) memcpy(o, &f, 4);
                else {
                    uint16_t h = dt == DT_F16 ? dt_f32_to_f16(f) : dt_f32_to_bf16(f);
                    memcpy(o, &h, 2);
                }
            }
        }
    }
}

/* ---- comparison -------------------------------------------------------------- */
static inline void fmt_elem(dt_dtype dt, const void *p, char *s, size_t cap) {
    size_t es = dt_dtype_size(dt);
    unsigned long long bits = 0;
    memcpy(&bits, p, es);
    if (is_int_dt(dt)) snprintf(s, cap, "%lld (0x%llx)", (long long)ld_int(dt, p), bits);
    else snprintf(s, cap, "%.9g (0x%llx)", ld_flt(dt, p), bits);
}

/* 0 (the default): results must match bitwise. 1: floating-point elements may
 * differ from the reference by a few units in the last place of the largest
 * input gen_elem makes for a sum (coll.h "Device memory": NCCL sums between
 * several ranks in its own order, and its avg of floats multiplies each input
 * by 1/n before summing, so a result that cancels to 0 here may be a few
 * units of the inputs' last place there); the GPU tests set it where NCCL
 * reduces between more than two ranks. */
static int coll_tolerant = 0;

static inline int close_enough(dt_dtype dt, const void *got, const void *want) {
    if (!coll_tolerant || is_int_dt(dt)) return 0;
    double g = ld_flt(dt, got), w = ld_flt(dt, want);
    double tol = dt == DT_F64 ? 1e-14 : dt == DT_F32 ? 1e-6 : dt == DT_F16 ? 2e-3 : 1.6e-2;
    /* the largest |input| of a sum (gen_elem, GEN_SUM) */
    double in = dt == DT_F64 ? 15 * 0x1p30 : dt == DT_F32 ? 15 * 4096.25 : dt == DT_F16 ? 2078 : 286;
    double scale = fabs(w) > in ? fabs(w) : in;
    return fabs(g - w) <= tol * scale;
}

/* Equality of count elements (bitwise, see coll_tolerant); reports the first
 * difference under `what`. */
static inline int same_elems(const char *what, dt_dtype dt, const void *got, const void *want,
                      size_t count) {
    size_t es = dt_dtype_size(dt);
    if (memcmp(got, want, count * es) == 0) return 1;
    size_t i = 0, bad = 0;
    for (size_t j = 0; j < count; j++)
        if (memcmp((const char *)got + j * es, (const char *)want + j * es, es) != 0 &&
            !close_enough(dt, (const char *)got + j * es, (const char *)want + j * es)) {
            if (!bad) i = j;
            bad++;
        }
    if (!bad) return 1;
    char g[64], w[64];
    fmt_elem(dt, (const char *)got + i * es, g, sizeof g);
    fmt_elem(dt, (const char *)want + i * es, w, sizeof w);
    CHECK(0, "%s: %zu of %zu elements differ; first at %zu: got %s, want %s", what, bad, count, i,
          g, w);
    return 0;
}

/* ---- jobs --------------------------------------------------------------------- */
enum { J_AR, J_AG, J_RS, J_RED, J_BC, J_GA, J_SC, J_A2A, J_BAR, J_P2P, J_NKINDS };
static const char *const job_names[J_NKINDS] = {"allreduce", "allgather", "reduce_scatter",
                                                "reduce", "broadcast", "gather", "scatter",
                                                "all_to_all", "barrier", "send/recv"};
#define GUARD 4
#define GUARD_BYTE 0xA5

typedef struct {
    int kind;
    const tcomm *t;
    dt_dtype dt;
    dt_op op;
    size_t count; /* per-rank count (reduce_scatter: the received count) */
    int inplace, root, peer; /* root: world rank; p2p: root = source, peer = destination */
    int role;                /* p2p: 1 sender, 2 receiver, 0 not involved */
    int null_off_root;       /* rooted ops: pass NULL for the unused buffer off root */
    uint64_t salt;
    char *sbuf, *rbuf, *scopy; /* owned allocations */
    size_t sbytes, rbytes;     /* without guard */
    const void *sarg;
    void *rarg;
    char *result; /* where the checked result lands */
    size_t result_count, result_first;
    dt_work *work;
    char what[320];
} job_t;

static inline char *alloc_guarded(size_t bytes, size_t es) {
    char *p = malloc(bytes + GUARD * es + 1);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    memset(p, GUARD_BYTE, bytes + GUARD * es + 1);
    return p;
}

static inline uint64_t job_salt(const job_t *j, uint64_t extra) {
    return hash4((uint64_t)j->kind * 131 + (uint64_t)j->dt * 7 + (uint64_t)j->op,
                 j->count * 2 + (uint64_t)j->inplace, (uint64_t)(j->root + 1) * 1000 + (uint64_t)(j->peer + 1),
                 extra);
}

/* Builds the buffers for one call. kind-specific argument meaning:
 * count is per rank (allgather/gather: what each rank sends; reduce_scatter: what
 * each rank receives; all_to_all/scatter: one block). */
static inline void job_init(job_t *j, int kind, const tcomm *t, dt_dtype dt, dt_op op, size_t count,
                     int inplace, int root, int peer, uint64_t extra_salt) {
    memset(j, 0, sizeof *j);
    j->kind = kind; j->t = t; j->dt = dt; j->op = op; j->count = count; j->inplace = inplace;
    j->root = root; j->peer = peer;
    j->salt = job_salt(j, extra_salt);
    size_t es = dt_dtype_size(dt), n = (size_t)t->n, g = (size_t)t->grank, c = count;
    int is_root = (kind == J_RED || kind == J_BC || kind == J_GA || kind == J_SC) && root == ME;
    int rooted = kind == J_RED || kind == J_BC || kind == J_GA || kind == J_SC;
    int root_idx = 0;
    for (int m = 0; m < t->n; m++) if (t->mem[m] == root) root_idx = m;
    j->null_off_root = rooted && !is_root && (root_idx % 2 == 0);
    snprintf(j->what, sizeof j->what, "%s comm=%.60s dtype=%s%s%s count=%zu %s", job_names[kind],
             t->name, dt_dtype_name(dt),
             (kind == J_AR || kind == J_RS || kind == J_RED) ? " op=" : "",
             (kind == J_AR || kind == J_RS || kind == J_RED) ? dt_op_name(op) : "", count,
             inplace ? "in-place" : "out-of-place");
    if (rooted) {
        size_t l = strlen(j->what);
        snprintf(j->what + l, sizeof j->what - l, " root=%d%s", root,
                 j->null_off_root ? " (NULL off root)" : "");
    }
    if (kind == J_P2P) {
        size_t l = strlen(j->what);
        snprintf(j->what + l, sizeof j->what - l, " %d->%d", root, peer);
    }
    gen_kind gk = (kind == J_AR || kind == J_RS || kind == J_RED) ? gen_for(op) : GEN_RAW;
    switch (kind) {
    case J_AR:
    case J_RED:
        j->sbytes = c * es;
        j->sbuf = alloc_guarded(j->sbytes, es);
        gen_buf(dt, gk, ME, 0, c, j->salt, j->sbuf);
        j->sarg = j->sbuf;
        if (kind == J_RED && !is_root) {
            if (inplace) j->rarg = j->sbuf; /* same pointer off root: must stay unchanged */
            else if (!j->null_off_root) {
                j->rbytes = c * es;
                j->rbuf = alloc_guarded(j->rbytes, es);
                j->rarg = j->rbuf;
            }
            break;
        }
        if (inplace) j->rarg = j->sbuf;
        else {
            j->rbytes = c * es;
            j->rbuf = alloc_guarded(j->rbytes, es);
            j->rarg = j->rbuf;
        }
        j->result = (char *)j->rarg;
        j->result_count = c;
        break;
    case J_RS:
        j->sbytes = n * c * es;
        j->sbuf = alloc_guarded(j->sbytes, es);
        gen_buf(dt, gk, ME, 0, n * c, j->salt, j->sbuf);
        j->sarg = j->sbuf;
        if (inplace) j->rarg = j->sbuf + g * c * es;
        else {
            j->rbytes = c * es;
            j->rbuf = alloc_guarded(j->rbytes, es);
            j->rarg = j->rbuf;
        }
        j->result = (char *)j->rarg;
        j->result_count = c;
        j->result_first = g * c;
        break;
    case J_AG:
        j->rbytes = n * c * es;
        j->rbuf = alloc_guarded(j->rbytes, es);
        j->rarg = j->rbuf;
        if (inplace) {
            gen_buf(dt, gk, ME, 0, c, j->salt, j->rbuf + g * c * es);
            j->sarg = j->rbuf + g * c * es;
        } else {
            j->sbytes = c * es;
            j->sbuf = alloc_guarded(j->sbytes, es);
            gen_buf(dt, gk, ME, 0, c, j->salt, j->sbuf);
            j->sarg = j->sbuf;
        }
        j->result = j->rbuf;
        j->result_count = n * c;
        break;
    case J_BC:
        j->rbytes = c * es;
        if (is_root) {
            j->sbytes = c * es;
            j->sbuf = alloc_guarded(j->sbytes, es);
            gen_buf(dt, gk, ME, 0, c, j->salt, j->sbuf);
            j->sarg = j->sbuf;
            if (inplace) j->rarg = j->sbuf;
            else { j->rbuf = alloc_guarded(j->rbytes, es); j->rarg = j->rbuf; }
        } else {
            j->rbuf = alloc_guarded(j->rbytes, es);
            j->rarg = j->rbuf;
            j->sarg = inplace ? j->rbuf : NULL; /* sendbuf is never read off root */
            if (!inplace && !j->null_off_root) {
                j->sbytes = c * es; /* junk that must not be broadcast */
                j->sbuf = alloc_guarded(j->sbytes, es);
                gen_buf(dt, gk, ME + 1000, 0, c, j->salt, j->sbuf);
                j->sarg = j->sbuf;
            }
        }
        j->result = (char *)j->rarg;
        j->result_count = c;
        break;
    case J_GA:
        if (is_root) {
            j->rbytes = n * c * es;
            j->rbuf = alloc_guarded(j->rbytes, es);
            j->rarg = j->rbuf;
            j->result = j->rbuf;
            j->result_count = n * c;
        } else if (!j->null_off_root) {
            j->rbytes = n * c * es;
            j->rbuf = alloc_guarded(j->rbytes, es);
            j->rarg = j->rbuf;
        }
        if (is_root && inplace) {
            gen_buf(dt, gk, ME, 0, c, j->salt, j->rbuf + g * c * es);
            j->sarg = j->rbuf + g * c * es;
        } else {
            j->sbytes = c * es;
            j->sbuf = alloc_guarded(j->sbytes, es);
            gen_buf(dt, gk, ME, 0, c, j->salt, j->sbuf);
            j->sarg = j->sbuf;
        }
        break;
    case J_SC:
        if (is_root) {
            j->sbytes = n * c * es;
            j->sbuf = alloc_guarded(j->sbytes, es);
            gen_buf(dt, gk, ME, 0, n * c, j->salt, j->sbuf);
            j->sarg = j->sbuf;
        } else if (!j->null_off_root) {
            j->sbytes = n * c * es;
            j->sbuf = alloc_guarded(j->sbytes, es);
            gen_buf(dt, gk, ME + 1000, 0, n * c, j->salt, j->sbuf);
            j->sarg = j->sbuf;
        }
        if (is_root && inplace) j->rarg = j->sbuf + g * c * es;
        else {
            j->rbytes = c * es;
            j->rbuf = alloc_guarded(j->rbytes, es);
            j->rarg = j->rbuf;
        }
        j->result = (char *)j->rarg;
        j->result_count = c;
        j->result_first = g * c;
        break;
    case J_A2A:
        j->sbytes = n * c * es;
        j->sbuf = alloc_guarded(j->sbytes, es);
        gen_buf(dt, gk, ME, 0, n * c, j->salt, j->sbuf);
        j->sarg = j->sbuf;
        if (inplace) j->rarg = j->sbuf;
        else {
            j->rbytes = n * c * es;
            j->rbuf = alloc_guarded(j->rbytes, es);
            j->rarg = j->rbuf;
        }
        j->result = (char *)j->rarg;
        j->result_count = n * c;
        break;
    case J_BAR:
        break;
    case J_P2P:
        j->role = ME == root ? 1 : ME == peer ? 2 : 0;
        if (j->role == 1) {
            j->sbytes = c * es;
            j->sbuf = alloc_guarded(j->sbytes, es);
            gen_buf(dt, gk, ME, 0, c, j->salt, j->sbuf);
            j->sarg = j->sbuf;
        } else if (j->role == 2) {
            j->rbytes = c * es;
            j->rbuf = alloc_guarded(j->rbytes, es);
            j->rarg = j->rbuf;
            j->result = j->rbuf;
            j->result_count = c;
        }
        break;
    default: break;
    }
    if (j->sbuf && j->sbytes) { /* out-of-place send buffers must stay unchanged */
        j->scopy = malloc(j->sbytes);
        memcpy(j->scopy, j->sbuf, j->sbytes);
    }
}

/* Submits the call: blocking when w == NULL, else asynchronous into *w. */
static inline int job_submit(job_t *j, dt_work **w) {
    dt_comm *c = j->t->comm;
    size_t cnt = j->count;
    switch (j->kind) {
    case J_AR: return w ? dt_allreduce_async(j->sarg, j->rarg, cnt, j->dt, j->op, c, w)
                        : dt_allreduce(j->sarg, j->rarg, cnt, j->dt, j->op, c);
    case J_AG: return w ? dt_allgather_async(j->sarg, j->rarg, cnt, j->dt, c, w)
                        : dt_allgather(j->sarg, j->rarg, cnt, j->dt, c);
    case J_RS: cnt *= (size_t)j->t->n;
        return w ? dt_reduce_scatter_async(j->sarg, j->rarg, cnt, j->dt, j->op, c, w)
                 : dt_reduce_scatter(j->sarg, j->rarg, cnt, j->dt, j->op, c);
    case J_RED: return w ? dt_reduce_async(j->sarg, j->rarg, cnt, j->dt, j->op, j->root, c, w)
                         : dt_reduce(j->sarg, j->rarg, cnt, j->dt, j->op, j->root, c);
    case J_BC: return w ? dt_broadcast_async(j->sarg, j->rarg, cnt, j->dt, j->root, c, w)
                        : dt_broadcast(j->sarg, j->rarg, cnt, j->dt, j->root, c);
    case J_GA: return w ? dt_gather_async(j->sarg, j->rarg, cnt, j->dt, j->root, c, w)
                        : dt_gather(j->sarg, j->rarg, cnt, j->dt, j->root, c);
    case J_SC: return w ? dt_scatter_async(j->sarg, j->rarg, cnt, j->dt, j->root, c, w)
                        : dt_scatter(j->sarg, j->rarg, cnt, j->dt, j->root, c);
    case J_A2A: return w ? dt_all_to_all_async(j->sarg, j->rarg, cnt, j->dt, c, w)
                         : dt_all_to_all(j->sarg, j->rarg, cnt, j->dt, c);
    case J_BAR: return w ? dt_barrier_async(c, w) : dt_barrier(c);
    case J_P2P:
        if (j->role == 1) return w ? dt_send_async(j->sarg, cnt, j->dt, j->peer, c, w)
                                   : dt_send(j->sarg, cnt, j->dt, j->peer, c);
        if (j->role == 2) return w ? dt_recv_async(j->rarg, cnt, j->dt, j->root, c, w)
                                   : dt_recv(j->rarg, cnt, j->dt, j->root, c);
        if (w) *w = NULL;
        return DT_OK;
    default: return DT_ERR_INTERNAL;
    }
}

/* Was this job's call made by this rank? (p2p: only the two ends) */
static inline int job_active(const job_t *j) { return j->kind != J_P2P || j->role != 0; }

/* Checks results, guards and unchanged inputs. Returns 1 if all good. */
static inline int job_verify(job_t *j) {
    size_t es = dt_dtype_size(j->dt), c = j->count, n = (size_t)j->t->n;
    int ok = 1;
    if (j->result) {
        char *want = malloc(j->result_count * es + 1);
        switch (j->kind) {
        case J_AR: case J_RED: case J_RS:
            expect_reduce(j->dt, j->op, j->t, j->result_first, j->result_count, j->salt, want);
            break;
        case J_AG: case J_GA:
            for (size_t k = 0; k < n; k++)
                gen_buf(j->dt, GEN_RAW, j->t->mem[k], 0, c, j->salt, want + k * c * es);
            break;
        case J_BC: gen_buf(j->dt, GEN_RAW, j->root, 0, c, j->salt, want); break;
        case J_SC: gen_buf(j->dt, GEN_RAW, j->root, j->result_first, c, j->salt, want); break;
        case J_A2A:
            for (size_t k = 0; k < n; k++)
                gen_buf(j->dt, GEN_RAW, j->t->mem[k], (size_t)j->t->grank * c, c, j->salt,
                        want + k * c * es);
            break;
        case J_P2P: gen_buf(j->dt, GEN_RAW, j->root, 0, c, j->salt, want); break;
        default: break;
        }
        ok &= same_elems(j->what, j->dt, j->result, want, j->result_count);
        free(want);
    }
    /* guards after every buffer */
    char *bufs[2] = {j->sbuf, j->rbuf};
    size_t sizes[2] = {j->sbytes, j->rbytes};
    for (int b = 0; b < 2; b++) {
        if (!bufs[b]) continue;
        size_t bytes = sizes[b];
        int gok = 1;
        for (size_t k = 0; k < GUARD * es; k++) gok &= (unsigned char)bufs[b][bytes + k] == GUARD_BYTE;
        if (!gok) CHECK(0, "%s: write past the end of the %s buffer", j->what, b ? "recv" : "send");
        ok &= gok;
    }
    /* inputs that are not also outputs must be untouched */
    if (j->scopy) {
        int writes_sbuf = (j->inplace && (j->kind == J_AR || j->kind == J_RS || j->kind == J_A2A ||
                                          (j->kind == J_RED && j->root == ME) ||
                                          (j->kind == J_BC) || (j->kind == J_SC && j->root == ME)));
        if (!writes_sbuf && memcmp(j->scopy, j->sbuf, j->sbytes) != 0) {
            CHECK(0, "%s: the send buffer was modified", j->what);
            ok = 0;
        }
    }
    return ok;
}

static inline void job_free(job_t *j) {
    free(j->sbuf); free(j->rbuf); free(j->scopy);
    j->sbuf = j->rbuf = j->scopy = NULL;
}

/* Blocking run + verify; returns 1 on success. The status is one check, the data
 * another (only when the call succeeded). */
static inline int run_job(job_t *j) {
    int rc = job_submit(j, NULL);
    int ok = rc == DT_OK;
    CHECK(ok, "%s -> %s: %s", j->what, dt_status_str(rc), dt_last_error());
    if (ok) {
        ok = job_verify(j);
        if (ok) dt_test_passed++;
    }
    job_free(j);
    return ok;
}

static inline void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

#endif
