/* coll_per_rank: dt_reduce_scatter_per_rank (one tensor per rank of the group,
 * RAF's and PyTorch's list reduce_scatter) for every dtype and op, on the world
 * and every sub-communicator, checked bitwise against a reference computed in
 * float64 / int64 from every member's inputs (coll_common.h): tensors in
 * separate allocations (staged), back to back in one buffer (no copy), in
 * reverse order and with gaps (staged), in place and not, blocking and
 * asynchronous (reading inputs that earlier asynchronous work writes). Also:
 * a rank calling it against ranks calling dt_reduce_scatter; the error paths
 * (list length, mixed counts and dtypes, NULLs, overlaps, overflow, bad op,
 * mismatches across ranks). */
#define _POSIX_C_SOURCE 200809L
#include "coll_common.h"

enum { L_SEP, L_SEP_IP, L_ARENA, L_ARENA_IP, L_REV, L_GAP, L_NLAYOUTS };
static const char *const lay_names[L_NLAYOUTS] = {"separate", "separate-in-place", "back-to-back",
                                                  "back-to-back-in-place", "reversed", "gaps"};

/* One call: rank wr's in[k] holds elements [k*c, (k+1)*c) of its generated
 * sequence, so the caller (group rank g) must receive the reduction over the
 * members of elements [g*c, (g+1)*c). */
static void per_rank_case(const tcomm *t, dt_dtype dt, dt_op op, size_t c, int layout, int async,
                          uint64_t salt) {
    size_t n = (size_t)t->n, g = (size_t)t->grank, es = dt_dtype_size(dt);
    gen_kind gk = gen_for(op);
    dt_tensor in[64], out;
    char *bufs[64] = {0}, *arena = NULL, *obuf = NULL, *icopy = malloc(n * c * es + 1);
    size_t slot = layout == L_GAP ? c + 3 : c;
    if (layout == L_ARENA || layout == L_ARENA_IP || layout == L_REV || layout == L_GAP)
        arena = alloc_guarded(n * slot * es, es);
    for (size_t k = 0; k < n; k++) {
        char *p;
        if (arena) p = arena + (layout == L_REV ? n - 1 - k : k) * slot * es;
        else p = bufs[k] = alloc_guarded(c * es, es);
        gen_buf(dt, gk, ME, k * c, c, salt, p);
        memcpy(icopy + k * c * es, p, c * es);
        in[k] = (dt_tensor){p, c, dt};
    }
    if (layout == L_SEP_IP || layout == L_ARENA_IP) out = in[g];
    else out = (dt_tensor){obuf = alloc_guarded(c * es, es), c, dt};
    int rc;
    if (async) {
        dt_work *w = NULL;
        rc = dt_reduce_scatter_per_rank_async(in, (int)n, &out, op, t->comm, &w);
        memset(in, 0xff, sizeof(dt_tensor) * n); /* the library keeps its own copy of the list */
        if (rc == DT_OK) rc = dt_work_wait(w);
        dt_work_free(w);
    } else {
        rc = dt_reduce_scatter_per_rank(in, (int)n, &out, op, t->comm);
    }
    char what[300];
    snprintf(what, sizeof what, "reduce_scatter_per_rank comm=%.60s dtype=%s op=%s count=%zu %s%s", t->name,
             dt_dtype_name(dt), dt_op_name(op), c, lay_names[layout], async ? " async" : "");
    CHECK(rc == DT_OK, "%s -> %s: %s", what, dt_status_str(rc), dt_last_error());
    int ok = rc == DT_OK;
    char *want = malloc(c * es + 1);
    expect_reduce(dt, op, t, g * c, c, salt, want);
    if (ok) ok &= same_elems(what, dt, out.data, want, c);
    /* inputs untouched (in place: all but this rank's own), guards intact */
    for (size_t k = 0; k < n; k++) {
        char *p = arena ? arena + (layout == L_REV ? n - 1 - k : k) * slot * es : bufs[k];
        int inplace_k = (layout == L_SEP_IP || layout == L_ARENA_IP) && k == g;
        if (!inplace_k && memcmp(p, icopy + k * c * es, c * es) != 0) {
            CHECK(0, "%s: in[%zu] was modified", what, k);
            ok = 0;
        }
    }
    char *gbase = arena ? arena : obuf ? obuf : bufs[g];
    size_t gbytes = arena ? n * slot * es : c * es;
    int gok = 1;
    for (size_t k = 0; k < GUARD * es; k++) gok &= (unsigned char)gbase[gbytes + k] == GUARD_BYTE;
    if (obuf)
        for (size_t k = 0; k < GUARD * es; k++) gok &= (unsigned char)obuf[c * es + k] == GUARD_BYTE;
    CHECK(gok, "%s: write past the end of a buffer", what);
    if (ok && gok) dt_test_passed++;
    free(want);
    free(icopy);
    free(obuf);
    free(arena);
    for (size_t k = 0; k < n; k++) free(bufs[k]);
}

/* Asynchronous work queued before the call writes its inputs: the staged copy
 * must be taken when the call runs. The writes are allreduces over a
 * communicator of this rank alone (copies, in engine order). */
static void async_order_case(const tcomm *t, dt_comm *solo, dt_dtype dt, size_t c, uint64_t salt) {
    size_t n = (size_t)t->n, g = (size_t)t->grank, es = dt_dtype_size(dt);
    dt_tensor in[64];
    char *src = malloc(n * c * es + 1), *bufs[64];
    dt_work *ws[65] = {0};
    gen_buf(dt, GEN_SUM, ME, 0, n * c, salt, src);
    int rc = DT_OK;
    for (size_t k = 0; k < n; k++) {
        bufs[k] = alloc_guarded(c * es, es); /* garbage until the queued copy runs */
        in[k] = (dt_tensor){bufs[k], c, dt};
        if (rc == DT_OK) rc = dt_allreduce_async(src + k * c * es, bufs[k], c, dt, DT_SUM, solo, &ws[k]);
    }
    char *obuf = alloc_guarded(c * es, es);
    dt_tensor out = {obuf, c, dt};
    if (rc == DT_OK) rc = dt_reduce_scatter_per_rank_async(in, (int)n, &out, DT_SUM, t->comm, &ws[n]);
    for (size_t k = 0; k <= n; k++) {
        if (ws[k] && dt_work_wait(ws[k]) != DT_OK && rc == DT_OK) rc = DT_ERR_INTERNAL;
        dt_work_free(ws[k]);
    }
    char what[200];
    snprintf(what, sizeof what, "reduce_scatter_per_rank async after queued writes comm=%.60s dtype=%s", t->name,
             dt_dtype_name(dt));
    CHECK(rc == DT_OK, "%s -> %s: %s", what, dt_status_str(rc), dt_last_error());
    char *want = malloc(c * es + 1);
    expect_reduce(dt, DT_SUM, t, g * c, c, salt, want);
    if (rc == DT_OK && same_elems(what, dt, obuf, want, c)) dt_test_passed++;
    free(want);
    free(obuf);
    free(src);
    for (size_t k = 0; k < n; k++) free(bufs[k]);
}

/* Even group ranks pass one tensor per rank, odd ones the same data as one
 * buffer to dt_reduce_scatter: the same call, the same result. */
static void mixed_with_plain(const tcomm *t, uint64_t salt) {
    size_t n = (size_t)t->n, g = (size_t)t->grank, c = 11, es = 4;
    char *buf = alloc_guarded(n * c * es, es), *o = alloc_guarded(c * es, es);
    gen_buf(DT_F32, GEN_SUM, ME, 0, n * c, salt, buf);
    int rc;
    if (g % 2 == 0) {
        dt_tensor in[64], out = {o, c, DT_F32};
        char *sep[64];
        for (size_t k = 0; k < n; k++) { /* separate copies: the staged path */
            sep[k] = malloc(c * es);
            memcpy(sep[k], buf + k * c * es, c * es);
            in[k] = (dt_tensor){sep[k], c, DT_F32};
        }
        rc = dt_reduce_scatter_per_rank(in, (int)n, &out, DT_SUM, t->comm);
        for (size_t k = 0; k < n; k++) free(sep[k]);
    } else {
        rc = dt_reduce_scatter(buf, o, n * c, DT_F32, DT_SUM, t->comm);
    }
    CHECK(rc == DT_OK, "per_rank against dt_reduce_scatter comm=%s -> %s: %s", t->name, dt_status_str(rc),
          dt_last_error());
    char want[64];
    expect_reduce(DT_F32, DT_SUM, t, g * c, c, salt, want);
    if (rc == DT_OK && same_elems("per_rank against dt_reduce_scatter", DT_F32, o, want, c)) dt_test_passed++;
    free(buf);
    free(o);
}

static void errors(const tcomm *t) {
    dt_comm *c = t->comm;
    int n = t->n, g = t->grank;
    const int INV = DT_ERR_INVALID;
    float a[64 * 4 + 8];
    dt_tensor in[66], out = {a + 64 * 4, 4, DT_F32};
    for (int k = 0; k < n + 1; k++) in[k] = (dt_tensor){a + 4 * k, 4, DT_F32};
    const char *fn = "dt_reduce_scatter_per_rank";
    /* list length: one tensor per rank of the group, no more, no fewer */
    CHECK_ERRF(dt_reduce_scatter_per_rank(in, n + 1, &out, DT_SUM, c), INV, fn, "group size");
    CHECK_ERRF(dt_reduce_scatter_per_rank(in, n - 1, &out, DT_SUM, c), INV, fn, "group size");
    CHECK_ERRF(dt_reduce_scatter_per_rank(in, -1, &out, DT_SUM, c), INV, fn, "group size");
    /* NULLs */
    CHECK_ERRF(dt_reduce_scatter_per_rank(NULL, n, &out, DT_SUM, c), INV, fn, "NULL");
    CHECK_ERRF(dt_reduce_scatter_per_rank(in, n, NULL, DT_SUM, c), INV, fn, "out is NULL");
    CHECK_ERRF(dt_reduce_scatter_per_rank(in, n, &out, DT_SUM, NULL), INV, fn, "comm|NULL");
    CHECK_ERRF(dt_reduce_scatter_per_rank_async(in, n, &out, DT_SUM, c, NULL), INV,
               "dt_reduce_scatter_per_rank_async", "work is NULL");
    {
        dt_tensor o2 = out, i2[64];
        memcpy(i2, in, sizeof(dt_tensor) * (size_t)n);
        o2.data = NULL;
        CHECK_ERRF(dt_reduce_scatter_per_rank(in, n, &o2, DT_SUM, c), INV, fn, "out data is NULL");
        i2[n - 1].data = NULL;
        CHECK_ERRF(dt_reduce_scatter_per_rank(i2, n, &out, DT_SUM, c), INV, fn, "data is NULL");
        /* NULL with count 0 is fine */
        dt_tensor z[64], oz = {NULL, 0, DT_I8};
        for (int k = 0; k < n; k++) z[k] = (dt_tensor){NULL, 0, DT_I8};
        CHECK_OK(dt_reduce_scatter_per_rank(z, n, &oz, DT_MAX, c));
        /* mixed counts (shapes) and dtypes */
        memcpy(i2, in, sizeof(dt_tensor) * (size_t)n);
        i2[n - 1].count = 3;
        CHECK_ERRF(dt_reduce_scatter_per_rank(i2, n, &out, DT_SUM, c), INV, fn, "count 3 differs");
        memcpy(i2, in, sizeof(dt_tensor) * (size_t)n);
        i2[0].dtype = DT_I32;
        CHECK_ERRF(dt_reduce_scatter_per_rank(i2, n, &out, DT_SUM, c), INV, fn, "dtype i32 differs");
        memcpy(i2, in, sizeof(dt_tensor) * (size_t)n);
        i2[0].dtype = (dt_dtype)77;
        CHECK_ERRF(dt_reduce_scatter_per_rank(i2, n, &out, DT_SUM, c), INV, fn, "dtype");
        o2 = out;
        o2.dtype = (dt_dtype)-3;
        CHECK_ERRF(dt_reduce_scatter_per_rank(in, n, &o2, DT_SUM, c), INV, fn, "unknown dtype");
        CHECK_ERRF(dt_reduce_scatter_per_rank(in, n, &out, (dt_op)DT_NUM_OPS, c), INV, fn, "reduction op");
        /* overlaps: out partly over its own input, or over another rank's input */
        o2 = (dt_tensor){a + 4 * g + 1, 4, DT_F32};
        CHECK_ERRF(dt_reduce_scatter_per_rank(in, n, &o2, DT_SUM, c), INV, fn, "overlaps in[");
        if (n > 1) {
            o2 = (dt_tensor){a + 4 * ((g + 1) % n), 4, DT_F32};
            CHECK_ERRF(dt_reduce_scatter_per_rank(in, n, &o2, DT_SUM, c), INV, fn, "overlaps in[");
            /* in place, but in[rank]'s memory is also another rank's input */
            memcpy(i2, in, sizeof(dt_tensor) * (size_t)n);
            i2[(g + 1) % n] = i2[g];
            o2 = i2[g];
            CHECK_ERRF(dt_reduce_scatter_per_rank(i2, n, &o2, DT_SUM, c), INV, fn, "overlaps in[");
        }
        /* a count whose n-fold byte size overflows */
        size_t huge = (size_t)PTRDIFF_MAX / 4 / (size_t)n + 1;
        for (int k = 0; k < n; k++) i2[k] = (dt_tensor){a, huge, DT_F32};
        o2 = (dt_tensor){a + 1, huge, DT_F32};
        CHECK_ERRF(dt_reduce_scatter_per_rank(i2, n, &o2, DT_SUM, c), INV, fn, "overflows");
    }
    /* the arguments were rejected before anything moved: still in step */
    for (int k = 0; k < 64 * 4; k++) a[k] = (float)(k + ME);
    CHECK_OK(dt_reduce_scatter_per_rank(in, n, &out, DT_SUM, c));
}

/* Ranks that disagree (count, op) fail together with DT_ERR_MISMATCH. */
static void mismatches(const tcomm *t) {
    const char *chk = getenv("DTRAIN_CHECK_COLLECTIVES");
    if (t->n < 2 || (chk && (!strcmp(chk, "0") || !strcmp(chk, "off")))) return;
    float a[64 * 5 + 8];
    dt_tensor in[64];
    for (int k = 0; k < t->n; k++) in[k] = (dt_tensor){a + 5 * k, t->grank == 0 ? 4 : 5, DT_F32};
    dt_tensor out = {a + 64 * 5, in[0].count, DT_F32};
    CHECK_ERRF(dt_reduce_scatter_per_rank(in, t->n, &out, DT_SUM, t->comm), DT_ERR_MISMATCH, "reduce_scatter",
               "mismatch");
    for (int k = 0; k < t->n; k++) in[k].count = 4;
    out.count = 4;
    CHECK_ERRF(dt_reduce_scatter_per_rank(in, t->n, &out, t->grank == 0 ? DT_MAX : DT_SUM, t->comm),
               DT_ERR_MISMATCH, "reduce_scatter", "mismatch");
    CHECK_OK(dt_reduce_scatter_per_rank(in, t->n, &out, DT_SUM, t->comm));
}

int main(void) {
    coll_init();
    tcomm tc[8];
    int nc = setup_comms(tc);
    dt_comm *solo = dt_test_solo_comm();
    static const size_t counts[] = {0, 1, 37, 1000};
    for (int ci = 0; ci < nc; ci++) {
        const tcomm *t = &tc[ci];
        for (int dt = 0; dt < DT_NUM_DTYPES; dt++)
            for (int op = 0; op < DT_NUM_OPS; op++)
                for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
                    for (int l = 0; l < L_NLAYOUTS; l++) {
                        uint64_t s = hash4((uint64_t)ci, (uint64_t)dt * 8 + (uint64_t)op, k, (uint64_t)l);
                        int async = (l + (int)k + op) % 3 == 0;
                        per_rank_case(t, (dt_dtype)dt, (dt_op)op, counts[k], l, async, s);
                    }
        /* large: above the shared-memory sizes, staged and not */
        per_rank_case(t, DT_F32, DT_SUM, (1u << 18) + 3, L_SEP, 0, 77 + (uint64_t)ci);
        per_rank_case(t, DT_BF16, DT_AVG, (1u << 17) + 1, L_ARENA_IP, 1, 78 + (uint64_t)ci);
        if (solo)
            for (int dt = 0; dt < DT_NUM_DTYPES; dt++)
                async_order_case(t, solo, (dt_dtype)dt, 4099, 500 + (uint64_t)(ci * 8 + dt));
        mixed_with_plain(t, 900 + (uint64_t)ci);
        errors(t);
        mismatches(t);
    }
    CHECK_OK(dt_finalize());
    return dt_test_finish("coll_per_rank");
}
