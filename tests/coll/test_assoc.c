/* coll_assoc: the association of the reductions dtrain computes itself
 * (coll.h): with random floats (sums round), on the world and every
 * sub-communicator, f32 sum / avg / max and f64 sum, in place and not, sizes
 * below and above the thresholds:
 *   - allreduce, reduce_scatter and reduce results equal, bit for bit, the
 *     association documented for the path the call took (path_model.h
 *     simulates it: the window's tree over the members on one host; across
 *     hosts, the tree over the hosts of the trees over each host's members)
 *     whenever the path is one of dtrain's own; the path is the model's;
 *   - hence a reduce_scatter's block is the same block of the allreduce, and
 *     an allreduce of a slice equals that slice of the whole (checked
 *     directly too), whatever the size of the call;
 *   - results identical on every rank of the group, and within
 *     p * 2^-23 * sum|x| of a float64 reference (any path). */
#define _POSIX_C_SOURCE 200809L
#include "coll_common.h"
#include "path_model.h"

static double val(int wr, size_t i, uint64_t salt) {
    uint64_t h = hash4(salt, (uint64_t)wr, i, 0xa5);
    double u = (double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0;
    return ldexp(u, (int)((h >> 3) % 8) - 4);
}

static int identical_on_group(const tcomm *t, const void *buf, size_t bytes) {
    return dt_test_same_bits(buf, bytes, t->comm) == 1;
}

static int own_path(int path) { return path >= 0 && path != DT_PATH_WIRE_FLAT; }

/* kind PM_AR / PM_RS / PM_RED of `count` (reduce_scatter: per rank) f32 or
 * f64 elements; the result (this rank's) into res (count elements) */
static void one(const tcomm *t, int kind, dt_dtype dt, dt_op op, size_t count, int ip, uint64_t salt, void *res) {
    size_t p = (size_t)t->n, es = dt_dtype_size(dt), total = kind == PM_RS ? count * p : count;
    size_t first = kind == PM_RS ? (size_t)t->grank * count : 0;
    char *in = malloc(total * es + 1), *outb = malloc(count * es + 1);
    for (size_t i = 0; i < total; i++) {
        if (dt == DT_F32) ((float *)(void *)in)[i] = (float)val(ME, i, salt);
        else ((double *)(void *)in)[i] = val(ME, i, salt);
    }
    char *out = !ip ? outb : kind == PM_RS ? in + (size_t)t->grank * count * es : in;
    int root = t->mem[t->n - 1], me_root = ME == root;
    char what[300];
    static const char *const kn[] = {"allreduce", "reduce_scatter", "", "", "reduce"};
    snprintf(what, sizeof what, "%s comm=%.60s %s op=%s count=%zu %s", kn[kind], t->name, dt_dtype_name(dt),
             dt_op_name(op), count, ip ? "in-place" : "out-of-place");
    int path = pm_expect(t, kind, dt, op, total * es, 0);
    pm_snap before = pm_now();
    int rc = kind == PM_AR ? dt_allreduce(in, out, total, dt, op, t->comm)
           : kind == PM_RS ? dt_reduce_scatter(in, out, total, dt, op, t->comm)
                           : dt_reduce(in, out, total, dt, op, root, t->comm);
    CHECK(rc == DT_OK, "%s -> %s: %s", what, dt_status_str(rc), dt_last_error());
    int has = kind != PM_RED || me_root;
    if (rc == DT_OK) {
        pm_took(&before, path, what);
        size_t bad = 0, over = 0;
        for (size_t i = 0; has && i < count; i++) {
            double ref = 0, mag = 0, got = dt == DT_F32 ? ((float *)(void *)out)[i] : ((double *)(void *)out)[i];
            float v[64];
            for (int m = 0; m < t->n; m++) {
                double x = val(t->mem[m], first + i, salt);
                v[m] = (float)x;
                ref = op == DT_MAX ? (m == 0 || x > ref ? x : ref) : ref + x;
                mag += fabs(x);
            }
            if (op == DT_AVG) { ref /= t->n; mag /= t->n; }
            if (fabs(got - ref) > (double)t->n * ldexp(1, dt == DT_F32 ? -23 : -52) * mag) over++;
            if (dt == DT_F32 && own_path(path)) {
                float want = pm_assoc(t, path, v, op, 0, kind == PM_AR), g = (float)got;
                bad += memcmp(&want, &g, 4) != 0;
            }
        }
        CHECK(bad == 0, "%s: %zu of %zu elements differ from the documented association (path %d)", what, bad, count, path);
        CHECK(over == 0, "%s: %zu elements beyond p * eps * sum|x| of the float64 reference", what, over);
        if (kind == PM_AR) CHECK(identical_on_group(t, out, count * es), "%s: the ranks hold different results", what);
        if (bad == 0 && over == 0) dt_test_passed++;
        if (res && has) memcpy(res, out, count * es);
    }
    free(in);
    free(outb);
}

static void comm_checks(const tcomm *t) {
    static const dt_op ops[] = {DT_SUM, DT_AVG, DT_MAX};
    static const size_t sizes[] = {999, 20011, 300007};
    for (size_t s = 0; s < 3; s++)
        for (int k = 0; k < 3; k++)
            for (int kind = PM_AR; kind <= PM_RED; kind++) {
                if (kind == PM_AG || kind == PM_BC) continue;
                one(t, kind, DT_F32, ops[k], sizes[s] / (kind == PM_RS ? (size_t)t->n : 1), (int)(s + k) % 2, 7 + k, NULL);
            }
    one(t, PM_AR, DT_F64, DT_SUM, 70001, 0, 8, NULL);
    one(t, PM_RS, DT_F64, DT_SUM, 30011, 1, 8, NULL);
    /* a reduce_scatter's block is that block of the allreduce; an
     * allreduce of a slice is that slice of the whole (when both calls take
     * one of dtrain's paths: the same association at any size) */
    size_t n = 50021, p = (size_t)t->n, g = (size_t)t->grank;
    float *whole = malloc(n * p * 4), *blk = malloc(n * 4), *slice = malloc(n * 4);
    one(t, PM_AR, DT_F32, DT_SUM, n * p, 0, 21, whole);
    one(t, PM_RS, DT_F32, DT_SUM, n, 0, 21, blk);
    int pa = pm_expect(t, PM_AR, DT_F32, DT_SUM, n * p * 4, 0), pr = pm_expect(t, PM_RS, DT_F32, DT_SUM, n * p * 4, 0);
    if (own_path(pa) && own_path(pr))
        CHECK(memcmp(blk, whole + g * n, n * 4) == 0, "comm %s: the reduce_scatter block differs from the allreduce's", t->name);
    float *x = malloc(n * 4);
    for (size_t i = 0; i < n; i++) x[i] = (float)val(ME, i, 21);
    CHECK_OK(dt_allreduce(x, slice, n, DT_F32, DT_SUM, t->comm));
    if (own_path(pa) && own_path(pm_expect(t, PM_AR, DT_F32, DT_SUM, n * 4, 0)))
        CHECK(memcmp(slice, whole, n * 4) == 0, "comm %s: an allreduce of a prefix differs from the whole's", t->name);
    free(x);
    free(whole);
    free(blk);
    free(slice);
}

int main(void) {
    coll_init();
    tcomm tc[8];
    int nc = setup_comms(tc);
    pm_init();
    for (int c = 0; c < nc; c++) comm_checks(&tc[c]);
    pm_free();
    CHECK_OK(dt_finalize());
    return dt_test_finish("coll_assoc");
}
