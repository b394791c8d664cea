/* tests/coll/path_model.h - the tests' own model of which data path a
 * collective takes (coll.h), to check the transport's path counters
 * (dt_path_count, src/transport/transport.h) against: which members of a
 * group share a host (host names gathered once over the world) and the
 * settings, read from the environment with coll.h's defaults. Include after
 * coll_common.h; call pm_init() after setup_comms(). */
#ifndef DT_PATH_MODEL_H
#define DT_PATH_MODEL_H

#include <strings.h>
#include <unistd.h>
#include "transport/transport.h"

static char *pm_hosts; /* [W][64] */

static inline void pm_init(void) {
    char me[64] = {0};
    gethostname(me, sizeof me - 1);
    pm_hosts = calloc((size_t)W, 64);
    CHECK_OK(dt_allgather(me, pm_hosts, 64, DT_U8, dt_comm_world()));
}

static inline void pm_free(void) { free(pm_hosts); pm_hosts = NULL; }

typedef struct {
    int H, Lmax; /* hosts of the group, most members on one host */
} pm_shape;

static inline pm_shape pm_shape_of(const tcomm *t) {
    pm_shape s = {0, 0};
    int cnt[64] = {0}, first[64];
    for (int i = 0; i < t->n; i++) {
        int h = -1;
        for (int k = 0; k < s.H; k++)
            if (strcmp(pm_hosts + (size_t)first[k] * 64, pm_hosts + (size_t)t->mem[i] * 64) == 0) h = k;
        if (h < 0) { h = s.H++; first[h] = t->mem[i]; }
        cnt[h]++;
    }
    for (int k = 0; k < s.H; k++) s.Lmax = cnt[k] > s.Lmax ? cnt[k] : s.Lmax;
    return s;
}

static inline int pm_env_bool(const char *var, int dflt) {
    const char *v = getenv(var);
    if (!v || !*v) return dflt;
    return !(strcmp(v, "0") == 0 || strcasecmp(v, "false") == 0 || strcasecmp(v, "no") == 0 || strcasecmp(v, "off") == 0);
}
static inline size_t pm_env_size(const char *var, size_t dflt) {
    const char *v = getenv(var);
    return v && *v ? (size_t)strtod(v, NULL) : dflt;
}
/* DTRAIN_TWO_LEVEL: 0 off, 1 auto, 2 on */
static inline int pm_two_level(void) {
    const char *v = getenv("DTRAIN_TWO_LEVEL");
    if (!v || !*v || strcasecmp(v, "auto") == 0) return 1;
    return pm_env_bool("DTRAIN_TWO_LEVEL", 0) ? 2 : 0;
}

/* (dt, op) reduced natively by the transports' kernels */
static inline int pm_native(dt_dtype dt, dt_op op) {
    switch (dt) {
    case DT_F32: case DT_F64: case DT_I64: return 1;
    case DT_I8: case DT_U8: case DT_I32: return op != DT_AVG;
    default: return 0;
    }
}

enum { PM_AR, PM_RS, PM_AG, PM_BC, PM_RED };

/* 1 if the group spanning hosts has the two-level structure */
static inline int pm_hier(const pm_shape *s) {
    int tl = pm_two_level();
    return s->H >= 2 && tl != 0 && (tl == 2 || s->Lmax >= 2) && (pm_env_bool("DTRAIN_SHM_ALLREDUCE", 1) || s->Lmax == 1);
}
/* 1 if a call of `bytes` on it takes the two-level path */
static inline int pm_hier_takes(const pm_shape *s, size_t bytes) {
    return pm_hier(s) && bytes && (pm_two_level() == 2 || bytes >= pm_env_size("DTRAIN_TWO_LEVEL_MIN_BYTES", 65536));
}

/* The DT_PATH_* counter a call should advance, or -1 (the library's own
 * algorithms, or the check's inline exchange). `bytes`: the allreduce's,
 * broadcast's, reduce's buffer, the reduce_scatter's input, the allgather's
 * output. `region`: the call's input (the root's, for a broadcast) lies in
 * dt_comm_alloc_shared memory on every member, as the single-copy paths need
 * (an allgather or broadcast at two ranks takes the window only then). */
static inline int pm_expect_at(const tcomm *t, int kind, dt_dtype dt, dt_op op, size_t bytes, int wire, int region) {
    if (t->n == 1 || bytes == 0) return -1;
    pm_shape s = pm_shape_of(t);
    int window = s.H == 1 && pm_env_bool("DTRAIN_SHM_ALLREDUCE", 1) && bytes >= pm_env_size("DTRAIN_SHM_MIN_BYTES", 16384);
    int reduces = kind == PM_AR || kind == PM_RS || kind == PM_RED;
    if (wire) { /* compressed: f32 exact through the window, else the leg between hosts or all of it
                 * (a reduce has no two-level form) */
        if (dt == DT_F32 && window)
            return kind == PM_AR ? DT_PATH_SHM_ALLREDUCE : kind == PM_RED ? DT_PATH_SHM_REDUCE : DT_PATH_SHM_REDUCE_SCATTER;
        if (dt == DT_F32 && kind != PM_RED && pm_hier_takes(&s, bytes))
            return kind == PM_AR ? DT_PATH_TWO_LEVEL_ALLREDUCE : DT_PATH_TWO_LEVEL_REDUCE_SCATTER;
        return DT_PATH_WIRE_FLAT;
    }
    if (reduces && !pm_native(dt, op)) return -1;
    if (kind == PM_AR && pm_env_bool("DTRAIN_CHECK_COLLECTIVES", 1) &&
        bytes <= pm_env_size("DTRAIN_CHECK_INLINE_MAX", 65536))
        return -1; /* travels with its check */
    if (window) {
        static const int k[] = {DT_PATH_SHM_ALLREDUCE, DT_PATH_SHM_REDUCE_SCATTER, DT_PATH_SHM_ALLGATHER,
                                DT_PATH_SHM_BROADCAST, DT_PATH_SHM_REDUCE};
        if ((kind == PM_AG || kind == PM_BC) && t->n == 2 && !(region && bytes >= ((size_t)512 << 10)))
            return -1; /* staged copies lose to MPI's single copy at two ranks */
        return k[kind];
    }
    if (pm_hier_takes(&s, bytes) && kind <= PM_AG) {
        static const int k[] = {DT_PATH_TWO_LEVEL_ALLREDUCE, DT_PATH_TWO_LEVEL_REDUCE_SCATTER, DT_PATH_TWO_LEVEL_ALLGATHER};
        return k[kind];
    }
    return -1;
}

static inline int pm_expect(const tcomm *t, int kind, dt_dtype dt, dt_op op, size_t bytes, int wire) {
    return pm_expect_at(t, kind, dt, op, bytes, wire, 0);
}

/* Snapshot of the counters; pm_took checks that exactly `want` advanced by
 * one since (want -1: none). */
typedef struct { uint64_t c[DT_PATH_N]; } pm_snap;
static inline pm_snap pm_now(void) {
    pm_snap s;
    memcpy(s.c, dt_path_count, sizeof s.c);
    return s;
}
static inline int pm_took(const pm_snap *before, int want, const char *what) {
    int ok = 1, got = -1;
    for (int k = 0; k < DT_PATH_N; k++) {
        uint64_t d = dt_path_count[k] - before->c[k];
        if (d) got = k;
        if (d != (uint64_t)(k == want)) ok = 0;
    }
    CHECK(ok, "%s: took data path %d, the model says %d (-1: the library's / inline)", what, got, want);
    return ok;
}

/* ---- the documented associations (coll.h), simulated in f32 ------------------
 * A balanced tree over v[0..n) whose first 2*rem values are folded pairwise
 * (rem = n - the largest power of two <= n); with a wire type, both inputs
 * of every node are rounded to it first. avg reduces as a sum. */
static inline float pm_rnd(float x, int wire) {
    if (wire == DT_WIRE_BF16) return dt_bf16_to_f32(dt_f32_to_bf16(x));
    if (wire == DT_WIRE_F16) return dt_f16_to_f32(dt_f32_to_f16(x));
    return x;
}
static inline float pm_node(float a, float b, dt_op op, int wire) {
    a = pm_rnd(a, wire);
    b = pm_rnd(b, wire);
    switch (op) {
    case DT_PROD: return a * b;
    case DT_MIN: return a < b ? a : b;
    case DT_MAX: return a > b ? a : b;
    default: return a + b;
    }
}
static inline float pm_range(const float *leaf, int lo, int hi, dt_op op, int wire) {
    if (hi - lo == 1) return leaf[lo];
    int mid = (lo + hi) / 2;
    return pm_node(pm_range(leaf, lo, mid, op, wire), pm_range(leaf, mid, hi, op, wire), op, wire);
}
static inline float pm_tree(const float *v, int n, dt_op op, int wire) {
    if (n == 1) return v[0];
    int pof2 = 1;
    while (pof2 <= n / 2) pof2 <<= 1;
    int rem = n - pof2;
    float leaf[64];
    for (int i = 0; i < pof2; i++) leaf[i] = i < rem ? pm_node(v[2 * i], v[2 * i + 1], op, wire) : v[i + rem];
    return pm_range(leaf, 0, pof2, op, wire);
}

/* The value a path gives for one element whose members' values are
 * vals[0..t->n) (group-rank order): the window's tree over the members;
 * two-level: the tree (wire-rounded) over the hosts, in order of their lowest
 * group rank, of the exact trees over each host's members; the flat
 * compressed path: the wire-rounded tree over all members. An allreduce's
 * compressed result is rounded once more; avg divides by the group size. */
static inline float pm_assoc(const tcomm *t, int path, const float *vals, dt_op op, int wire, int allreduce) {
    dt_op o = op == DT_AVG ? DT_SUM : op;
    float r;
    if (path == DT_PATH_TWO_LEVEL_ALLREDUCE || path == DT_PATH_TWO_LEVEL_REDUCE_SCATTER) {
        float part[64], mine[64];
        int nh = 0, first[64];
        for (int i = 0; i < t->n; i++) {
            int seen = 0;
            for (int k = 0; k < nh; k++)
                if (strcmp(pm_hosts + (size_t)first[k] * 64, pm_hosts + (size_t)t->mem[i] * 64) == 0) seen = 1;
            if (seen) continue;
            int m = 0;
            for (int q = i; q < t->n; q++)
                if (strcmp(pm_hosts + (size_t)t->mem[q] * 64, pm_hosts + (size_t)t->mem[i] * 64) == 0) mine[m++] = vals[q];
            first[nh] = t->mem[i];
            part[nh++] = pm_tree(mine, m, o, 0);
        }
        r = pm_tree(part, nh, o, wire);
    } else if (path == DT_PATH_WIRE_FLAT) {
        r = pm_tree(vals, t->n, o, wire);
    } else {
        r = pm_tree(vals, t->n, o, 0);
        wire = 0; /* the window reads f32: nothing travels compressed */
    }
    if (allreduce) r = pm_rnd(r, wire);
    if (op == DT_AVG) r /= (float)t->n;
    return r;
}

#endif
