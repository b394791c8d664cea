/* coll_wire: compressed allreduce, reduce_scatter and reduce (coll.h, dt_coll_opts.wire)
 * on the world and every sub-communicator, with random floats (sums round):
 *   - bf16 and f16 on the wire, f32 data (also f16/bf16 data), sum, avg,
 *     min, max, prod; in place and not; blocking and asynchronous; sizes
 *     below and above the thresholds of the window and the two-level path;
 *     lists (dt_allreduce_list_ex, dt_reduce_scatter_fused_ex);
 *   - every result bit for bit the value of the association coll.h documents
 *     for the path the call took (path_model.h simulates it in f32: exact
 *     through the window, rounded at the inputs of each reduction between
 *     hosts on the two-level path, at every one on the flat path), and the
 *     path the model predicts; identical on every rank of the group;
 *   - sums within coll.h's stated bound of a float64 reference;
 *   - reduce (dt_reduce_ex): every root, counts not divisible by the group
 *     size and 0, the root's result the allreduce's bits for the path it
 *     takes (rounded on the flat path, exact through the window), within the
 *     allreduce's bound, the same bits from a second call, nothing written
 *     on the other ranks;
 *   - integer and f64 data, an unknown wire type: DT_ERR_INVALID naming the
 *     problem, nothing written; a wire on one rank only: DT_ERR_MISMATCH on
 *     every rank, naming the wire.
 * tests/multihost runs it on two hosts, with the two-level path on, off and
 * auto. */
#define _POSIX_C_SOURCE 200809L
#include "coll_common.h"
#include "path_model.h"

static float val(int wr, size_t i, uint64_t salt) { /* mixed signs and scales, non-zero */
    uint64_t h = hash4(salt, (uint64_t)wr, i, 0x77);
    double u = (double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0;
    int e = (int)((h >> 3) % 8) - 4;
    return (float)ldexp(u == 0 ? 0.5 : u, e);
}

/* prod: factors near 1, so that products of up to 4 stay in range */
static float val_op(int wr, size_t i, uint64_t salt, dt_op op) {
    float v = val(wr, i, salt);
    return op == DT_PROD ? 1.0f + v / 32.0f : v;
}

static void put(dt_dtype dt, void *buf, size_t i, float v) {
    if (dt == DT_F32) ((float *)buf)[i] = v;
    else if (dt == DT_BF16) ((uint16_t *)buf)[i] = dt_f32_to_bf16(v);
    else ((uint16_t *)buf)[i] = dt_f32_to_f16(v);
}
static float get(dt_dtype dt, const void *buf, size_t i) {
    if (dt == DT_F32) return ((const float *)buf)[i];
    if (dt == DT_BF16) return dt_bf16_to_f32(((const uint16_t *)buf)[i]);
    return dt_f16_to_f32(((const uint16_t *)buf)[i]);
}
/* the data as it is stored (16-bit data: rounded on entry) */
static float stored(dt_dtype dt, float v) {
    if (dt == DT_BF16) return dt_bf16_to_f32(dt_f32_to_bf16(v));
    if (dt == DT_F16) return dt_f16_to_f32(dt_f32_to_f16(v));
    return v;
}

static int identical_on_group(const tcomm *t, const void *buf, size_t bytes) {
    return dt_test_same_bits(buf, bytes, t->comm) == 1;
}

/* One call: rs == 0 allreduce of `count`, else reduce_scatter of `count` per
 * rank. Checks path, bits, bound and identity. */
static void one(const tcomm *t, int rs, dt_dtype dt, dt_op op, int wire, size_t count, int ip, int async,
                uint64_t salt) {
    size_t p = (size_t)t->n, es = dt_dtype_size(dt), total = rs ? count * p : count;
    size_t g = (size_t)t->grank, first = rs ? g * count : 0;
    char *in = malloc(total * es + 1), *outb = malloc(count * es + 1);
    for (size_t i = 0; i < total; i++) put(dt, in, i, val_op(ME, i, salt, op));
    char *out = ip ? (rs ? in + g * count * es : in) : outb;
    char what[300];
    snprintf(what, sizeof what, "%s comm=%.60s %s op=%s wire=%s count=%zu %s%s", rs ? "reduce_scatter" : "allreduce",
             t->name, dt_dtype_name(dt), dt_op_name(op), wire == DT_WIRE_BF16 ? "bf16" : "f16", count,
             ip ? "in-place" : "out-of-place", async ? " async" : "");
    int path = pm_expect(t, rs ? PM_RS : PM_AR, dt, op, total * es, wire);
    dt_coll_opts o = {.wire = (dt_wire)wire};
    dt_work *w = NULL;
    pm_snap before = pm_now();
    int rc = rs ? dt_reduce_scatter_ex(in, out, total, dt, op, t->comm, &o, async ? &w : NULL)
                : dt_allreduce_ex(in, out, total, dt, op, t->comm, &o, async ? &w : NULL);
    if (rc == DT_OK && async) rc = dt_work_wait(w);
    dt_work_free(w);
    CHECK(rc == DT_OK, "%s -> %s: %s", what, dt_status_str(rc), dt_last_error());
    if (rc == DT_OK) {
        pm_took(&before, path, what);
        size_t bad = 0, over = 0, first_bad = 0;
        double worst = 0;
        int L = 0, P = path == DT_PATH_TWO_LEVEL_ALLREDUCE || path == DT_PATH_TWO_LEVEL_REDUCE_SCATTER
                      ? pm_shape_of(t).H : t->n;
        while ((1 << L) < P) L++;
        double u = wire == DT_WIRE_BF16 ? ldexp(1, -8) : ldexp(1, -11);
        if (path == DT_PATH_SHM_ALLREDUCE || path == DT_PATH_SHM_REDUCE_SCATTER) u = 0; /* not compressed */
        double bound_f = pow(1 + u, L + (rs ? 0 : 1)) - 1 + (double)t->n * ldexp(1, -23);
        if (dt != DT_F32) bound_f += dt == DT_BF16 ? ldexp(1, -8) : ldexp(1, -11); /* the data type's own rounding */
        for (size_t i = 0; i < count; i++) {
            float v[64];
            double ref = 0, mag = 0;
            for (int m = 0; m < t->n; m++) {
                v[m] = stored(dt, val_op(t->mem[m], first + i, salt, op));
                ref += v[m];
                mag += fabs(v[m]);
            }
            float want = stored(dt, pm_assoc(t, path, v, op, wire, !rs)), got = get(dt, out, i);
            if (memcmp(&want, &got, 4) != 0 && !(want != want && got != got)) {
                if (!bad) first_bad = i;
                bad++;
            }
            if (op == DT_SUM || op == DT_AVG) {
                if (op == DT_AVG) { ref /= t->n; mag /= t->n; }
                double err = fabs((double)got - ref);
                if (err > bound_f * mag) over++;
                if (mag > 0 && err / mag > worst) worst = err / mag;
            }
        }
        CHECK(bad == 0, "%s: %zu of %zu elements differ from the documented association (path %d); first %zu", what,
              bad, count, path, first_bad);
        CHECK(over == 0, "%s: %zu elements beyond the stated bound %.3g * sum|x| (worst %.3g)", what, over, bound_f, worst);
        if (!rs) CHECK(identical_on_group(t, out, count * es), "%s: the ranks hold different results", what);
        if (!ip) { /* the input is untouched */
            size_t moved = 0;
            for (size_t i = 0; i < total; i++) {
                float a = get(dt, in, i), b = stored(dt, val_op(ME, i, salt, op));
                moved += memcmp(&a, &b, 4) != 0;
            }
            CHECK(moved == 0, "%s: the input was modified (%zu elements)", what, moved);
        }
        if (bad == 0 && over == 0) dt_test_passed++;
    }
    free(in);
    free(outb);
}

/* dt_reduce_ex of `count` elements to group rank rg: path, bits, bound,
 * repeatability, and nothing written off the root. */
static void reduce_one(const tcomm *t, dt_dtype dt, dt_op op, int wire, size_t count, int rg, int ip, int async,
                       uint64_t salt) {
    size_t es = dt_dtype_size(dt);
    int root = t->mem[rg], me_root = t->grank == rg;
    char *in = malloc(count * es + 1), *outb = malloc(count * es + 1), *again = malloc(count * es + 1);
    for (size_t i = 0; i < count; i++) put(dt, in, i, val_op(ME, i, salt, op));
    memset(outb, 0x5a, count * es + 1);
    char *out = ip && me_root ? in : outb;
    char what[300];
    snprintf(what, sizeof what, "reduce comm=%.60s root=%d %s op=%s wire=%s count=%zu %s%s", t->name, rg,
             dt_dtype_name(dt), dt_op_name(op), wire == DT_WIRE_BF16 ? "bf16" : "f16", count,
             ip && me_root ? "in-place" : "out-of-place", async ? " async" : "");
    int path = pm_expect(t, PM_RED, dt, op, count * es, wire);
    dt_coll_opts o = {.wire = (dt_wire)wire};
    dt_work *w = NULL;
    pm_snap before = pm_now();
    int rc = dt_reduce_ex(in, out, count, dt, op, root, t->comm, &o, async ? &w : NULL);
    if (rc == DT_OK && async) rc = dt_work_wait(w);
    dt_work_free(w);
    CHECK(rc == DT_OK, "%s -> %s: %s", what, dt_status_str(rc), dt_last_error());
    if (rc == DT_OK) {
        pm_took(&before, path, what);
        size_t bad = 0, over = 0, first_bad = 0, touched = 0;
        double worst = 0;
        int L = 0;
        while ((1 << L) < t->n) L++;
        double u = wire == DT_WIRE_BF16 ? ldexp(1, -8) : ldexp(1, -11);
        if (path == DT_PATH_SHM_REDUCE || t->n == 1) u = 0; /* not compressed */
        double bound_f = pow(1 + u, L + 1) - 1 + (double)t->n * ldexp(1, -23);
        if (dt != DT_F32) bound_f += dt == DT_BF16 ? ldexp(1, -8) : ldexp(1, -11);
        for (size_t i = 0; me_root && i < count; i++) {
            float v[64];
            double ref = 0, mag = 0;
            for (int m = 0; m < t->n; m++) {
                v[m] = stored(dt, val_op(t->mem[m], i, salt, op));
                ref += v[m];
                mag += fabs(v[m]);
            }
            float want = stored(dt, pm_assoc(t, path, v, op, wire, 1)), got = get(dt, out, i);
            if (memcmp(&want, &got, 4) != 0 && !(want != want && got != got)) {
                if (!bad) first_bad = i;
                bad++;
            }
            if (op == DT_SUM || op == DT_AVG) {
                if (op == DT_AVG) { ref /= t->n; mag /= t->n; }
                double err = fabs((double)got - ref);
                if (err > bound_f * mag) over++;
                if (mag > 0 && err / mag > worst) worst = err / mag;
            }
        }
        for (size_t i = 0; !me_root && i < count * es + 1; i++) touched += (unsigned char)outb[i] != 0x5a;
        CHECK(bad == 0, "%s: %zu of %zu elements differ from the documented association (path %d); first %zu", what,
              bad, count, path, first_bad);
        CHECK(over == 0, "%s: %zu elements beyond the stated bound %.3g * sum|x| (worst %.3g)", what, over, bound_f, worst);
        CHECK(touched == 0, "%s: %zu bytes of recvbuf written on a rank that is not the root", what, touched);
        /* the same call again (out of place, from the stored input): the same bits */
        char *src = ip && me_root ? again : in;
        if (ip && me_root)
            for (size_t i = 0; i < count; i++) put(dt, again, i, val_op(ME, i, salt, op));
        char *o2 = malloc(count * es + 1);
        CHECK_OK(dt_reduce_ex(src, o2, count, dt, op, root, t->comm, &o, NULL));
        CHECK(!me_root || !count || memcmp(o2, out, count * es) == 0, "%s: a second call gave other bits", what);
        free(o2);
        if (!(ip && me_root)) { /* the input is untouched */
            size_t moved = 0;
            for (size_t i = 0; i < count; i++) {
                float a = get(dt, in, i), b = stored(dt, val_op(ME, i, salt, op));
                moved += memcmp(&a, &b, 4) != 0;
            }
            CHECK(moved == 0, "%s: the input was modified (%zu elements)", what, moved);
        }
        if (bad == 0 && over == 0 && touched == 0) dt_test_passed++;
    }
    free(in);
    free(outb);
    free(again);
}

/* Lists: three f32 tensors of odd sizes in one call, against the single
 * call's bits (one dtype: one fused transfer of the same elements). */
static void lists(const tcomm *t, int wire) {
    size_t p = (size_t)t->n, c[3] = {1001, 7, 30011};
    size_t tot = c[0] + c[1] + c[2];
    float *a[3], *o[3], *whole = malloc(tot * 4), *rs_whole = malloc(tot * p * 4), *rsa[3], *rso[3];
    dt_tensor in[3], out[3], rin[3], rout[3];
    size_t off = 0;
    for (int k = 0; k < 3; k++) {
        a[k] = malloc(c[k] * 4);
        o[k] = malloc(c[k] * 4);
        rsa[k] = malloc(c[k] * p * 4);
        rso[k] = malloc(c[k] * 4);
        for (size_t i = 0; i < c[k]; i++) a[k][i] = whole[off + i] = val(ME, off + i, 5);
        for (size_t i = 0; i < c[k] * p; i++) rsa[k][i] = val(ME, 7 * off + i, 6);
        in[k] = (dt_tensor){a[k], c[k], DT_F32};
        out[k] = (dt_tensor){o[k], c[k], DT_F32};
        rin[k] = (dt_tensor){rsa[k], c[k] * p, DT_F32};
        rout[k] = (dt_tensor){rso[k], c[k], DT_F32};
        off += c[k];
    }
    dt_coll_opts opt = {.wire = (dt_wire)wire};
    CHECK_OK(dt_allreduce_list_ex(in, out, 3, DT_SUM, t->comm, &opt, NULL));
    CHECK_OK(dt_allreduce_ex(whole, whole, tot, DT_F32, DT_SUM, t->comm, &opt, NULL));
    size_t bad = 0;
    off = 0;
    for (int k = 0; k < 3; k++) {
        bad += memcmp(o[k], whole + off, c[k] * 4) != 0;
        off += c[k];
    }
    CHECK(bad == 0, "comm %s wire %d: the list's allreduce differs from the single call over the same data", t->name, wire);
    /* reduce_scatter_fused: packed rank blocks, so the single-call reference is built the same way */
    off = 0;
    for (size_t r = 0; r < p; r++)
        for (int k = 0; k < 3; k++) {
            memcpy(rs_whole + off, rsa[k] + r * c[k], c[k] * 4);
            off += c[k];
        }
    float *mine = malloc(tot * 4);
    CHECK_OK(dt_reduce_scatter_fused_ex(rin, rout, 3, DT_SUM, t->comm, &opt, NULL));
    CHECK_OK(dt_reduce_scatter_ex(rs_whole, mine, tot * p, DT_F32, DT_SUM, t->comm, &opt, NULL));
    bad = 0;
    off = 0;
    for (int k = 0; k < 3; k++) {
        bad += memcmp(rso[k], mine + off, c[k] * 4) != 0;
        off += c[k];
    }
    CHECK(bad == 0, "comm %s wire %d: the fused reduce_scatter differs from the single call", t->name, wire);
    dt_test_passed++;
    for (int k = 0; k < 3; k++) { free(a[k]); free(o[k]); free(rsa[k]); free(rso[k]); }
    free(whole);
    free(rs_whole);
    free(mine);
}

static void bad_input(const tcomm *t) {
    int32_t ib[64] = {0}, ob[64] = {0};
    double db[64] = {0};
    dt_coll_opts bf = {.wire = DT_WIRE_BF16}, bogus = {.wire = (dt_wire)7};
    size_t n = 4 * (size_t)t->n;
    CHECK_ERRF(dt_allreduce_ex(ib, ob, n, DT_I32, DT_SUM, t->comm, &bf, NULL), DT_ERR_INVALID, "dt_allreduce_ex", "not i32");
    CHECK_ERRF(dt_reduce_scatter_ex(ib, ob, n, DT_I8, DT_SUM, t->comm, &bf, NULL), DT_ERR_INVALID, "dt_reduce_scatter_ex",
               "not i8");
    CHECK_ERRF(dt_allreduce_ex(db, db, n, DT_F64, DT_SUM, t->comm, &bf, NULL), DT_ERR_INVALID, "dt_allreduce_ex", "not f64");
    CHECK_ERRF(dt_allreduce_ex(db, db, n, DT_F32, DT_SUM, t->comm, &bogus, NULL), DT_ERR_INVALID, "dt_allreduce_ex",
               "unknown wire type 7");
    int root = t->mem[t->n - 1];
    CHECK_ERRF(dt_reduce_ex(ib, ob, n, DT_I32, DT_SUM, root, t->comm, &bf, NULL), DT_ERR_INVALID, "dt_reduce_ex",
               "a bf16 wire carries f32, f16 or bf16 data, not i32");
    CHECK_ERRF(dt_reduce_ex(db, db, n, DT_F64, DT_SUM, root, t->comm, &bf, NULL), DT_ERR_INVALID, "dt_reduce_ex",
               "not f64");
    CHECK_ERRF(dt_reduce_ex(db, db, n, DT_F32, DT_SUM, root, t->comm, &bogus, NULL), DT_ERR_INVALID, "dt_reduce_ex",
               "unknown wire type 7");
    dt_work *wk = (dt_work *)&wk;
    CHECK_ERRF(dt_reduce_ex(db, db, n, DT_F32, DT_SUM, root, t->comm, &bogus, &wk), DT_ERR_INVALID, "dt_reduce_ex",
               "unknown wire type 7");
    CHECK(wk == NULL, "a refused asynchronous reduce leaves *work NULL");
    dt_tensor l[2] = {{db, 3, DT_F32}, {ib, 3, DT_I64}};
    CHECK_ERRF(dt_allreduce_list_ex(l, l, 2, DT_SUM, t->comm, &bf, NULL), DT_ERR_INVALID, "dt_allreduce_list_ex",
               "tensor 1: a bf16 wire carries f32, f16 or bf16 data, not i64");
    /* a wire on a call that has no compressed form */
    CHECK_ERRF(dt_allgather_ex(db, db, 4, DT_F32, t->comm, &bf, NULL), DT_ERR_INVALID, "dt_allgather_ex",
               "only allreduce and reduce_scatter");
    CHECK_ERRF(dt_reduce_scatter_per_rank_ex(l, 1, l, DT_SUM, t->comm, &bf, NULL), DT_ERR_INVALID,
               "dt_reduce_scatter_per_rank_ex", "only allreduce and reduce_scatter");
    CHECK(ob[0] == 0 && ib[0] == 0, "nothing written by refused calls");
    /* the default options are the plain call */
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
    CHECK_OK(dt_allreduce_ex(x, y, 8, DT_F32, DT_SUM, t->comm, NULL, NULL));
    CHECK(y[7] == 8.0f * (float)t->n, "options NULL: a plain sum (%g)", (double)y[7]);
    dt_test_passed++;
}

/* A wire on group rank 0 only: the collective check fails on every rank,
 * and names the wire. */
static void mismatch(const tcomm *t) {
    if (t->n < 2 || !dt_check_collectives_enabled()) return;
    float x[4096], y[4096];
    for (int i = 0; i < 4096; i++) x[i] = (float)i;
    dt_coll_opts o = {.wire = t->grank == 0 ? DT_WIRE_BF16 : DT_WIRE_NATIVE};
    dt_clear_error();
    int rc = dt_allreduce_ex(x, y, 4096, DT_F32, DT_SUM, t->comm, &o, NULL);
    CHECK(rc == DT_ERR_MISMATCH && strstr(dt_last_error(), "[wire bf16]"),
          "comm %s: a wire on one rank -> %s, '%s' (want DT_ERR_MISMATCH naming [wire bf16])", t->name,
          dt_status_str(rc), dt_last_error());
    if (rc == DT_ERR_MISMATCH) dt_test_passed++;
    dt_clear_error();
    rc = dt_reduce_ex(x, y, 4096, DT_F32, DT_SUM, t->mem[0], t->comm, &o, NULL);
    CHECK(rc == DT_ERR_MISMATCH && strstr(dt_last_error(), "[wire bf16]"),
          "comm %s: a reduce with a wire on one rank -> %s, '%s' (want DT_ERR_MISMATCH naming [wire bf16])", t->name,
          dt_status_str(rc), dt_last_error());
}

int main(void) {
    coll_init();
    tcomm tc[8];
    int nc = setup_comms(tc);
    pm_init();
    static const dt_op ops[] = {DT_SUM, DT_AVG, DT_MIN, DT_MAX, DT_PROD};
    for (int c = 0; c < nc; c++) {
        const tcomm *t = &tc[c];
        bad_input(t);
        mismatch(t);
        for (int wire = DT_WIRE_BF16; wire <= DT_WIRE_F16; wire++) {
            lists(t, wire);
            for (int rs = 0; rs < 2; rs++)
                for (size_t k = 0; k < 5; k++) {
                    /* below every threshold, then above the two-level and window ones */
                    one(t, rs, DT_F32, ops[k], wire, 1001, k % 2, 0, 1 + k);
                    one(t, rs, DT_F32, ops[k], wire, 70001, (k + 1) % 2, k == 0, 2 + k);
                }
            for (size_t k = 0; k < 5; k++) { /* reduce: every root, odd counts, 0 */
                int rg = (int)(k % (size_t)t->n);
                reduce_one(t, DT_F32, ops[k], wire, 1001, rg, k % 2, k == 1, 11 + k);
                reduce_one(t, DT_F32, ops[k], wire, 70001, t->n - 1 - rg, (k + 1) % 2, k == 0, 16 + k);
                reduce_one(t, DT_F32, ops[k], wire, 0, rg, 0, k == 2, 21 + k);
            }
            reduce_one(t, DT_BF16, DT_SUM, wire, 40001, t->n - 1, 0, 0, 26);
            reduce_one(t, DT_F16, DT_AVG, wire, 4099, t->n / 2, 1, 1, 27);
            for (int rs = 0; rs < 2; rs++) { /* 16-bit data, widened for the reduction */
                one(t, rs, DT_BF16, DT_SUM, wire, 40001, rs, 0, 9);
                one(t, rs, DT_F16, DT_AVG, wire, 40001, !rs, 0, 10);
            }
        }
    }
    pm_free();
    CHECK_OK(dt_finalize());
    return dt_test_finish("coll_wire");
}
