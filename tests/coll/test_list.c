/* coll_list: allreduce_list (every op), allgather_list and reduce_scatter_fused with
 * many tensors of varying counts (zero included, NULL data at count 0), mixed and
 * interleaved dtypes, and in-place tensors (in == out for allreduce; the single-op
 * in-place layouts for allgather / reduce_scatter), on the world and every
 * sub-communicator. Every tensor is checked bitwise, plus guards after every
 * buffer and untouched inputs. */
#define _POSIX_C_SOURCE 200809L
#include "coll_common.h"

enum { L_AR, L_AG, L_RS };
/* field by field: struct padding is indeterminate, so no memcmp */
static int same_tensors(const dt_tensor *a, const dt_tensor *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i].data != b[i].data || a[i].count != b[i].count || a[i].dtype != b[i].dtype) return 0;
    return 1;
}

static const char *const lnames[] = {"allreduce_list", "allgather_list", "reduce_scatter_fused"};

#define LIST_MAX 512 /* tensors per list_case */

static void list_case(const tcomm *t, int which, dt_op op, int nt, const size_t *counts,
                      const dt_dtype *dts, const int *inplace, uint64_t salt, const char *label) {
    dt_tensor in[LIST_MAX], out[LIST_MAX];
    char *ib[LIST_MAX], *ob[LIST_MAX], *icopy[LIST_MAX];
    size_t n = (size_t)t->n, g = (size_t)t->grank;
    gen_kind gk = which == L_AG ? GEN_RAW : gen_for(op);
    for (int i = 0; i < nt; i++) {
        size_t es = dt_dtype_size(dts[i]), c = counts[i];
        size_t ic = which == L_RS ? n * c : c, oc = which == L_AG ? n * c : c;
        uint64_t s = hash4(salt, (uint64_t)i, 0, 0);
        ib[i] = ob[i] = icopy[i] = NULL;
        if (inplace[i]) {
            size_t big = ic > oc ? ic : oc;
            char *buf = alloc_guarded(big * es, es);
            if (which == L_AR) { ib[i] = buf; in[i] = (dt_tensor){buf, c, dts[i]}; out[i] = in[i]; }
            else if (which == L_AG) {
                ob[i] = buf;
                gen_buf(dts[i], gk, ME, 0, c, s, buf + g * c * es);
                in[i] = (dt_tensor){buf + g * c * es, c, dts[i]};
                out[i] = (dt_tensor){buf, n * c, dts[i]};
                continue;
            } else {
                ib[i] = buf;
                in[i] = (dt_tensor){buf, n * c, dts[i]};
                out[i] = (dt_tensor){buf + g * c * es, c, dts[i]};
            }
            gen_buf(dts[i], gk, ME, 0, ic, s, ib[i]);
            continue;
        }
        int null_data = c == 0 && (i % 2); /* count 0: NULL is fine */
        ib[i] = null_data ? NULL : alloc_guarded(ic * es, es);
        ob[i] = null_data ? NULL : alloc_guarded(oc * es, es);
        if (ib[i]) {
            gen_buf(dts[i], gk, ME, 0, ic, s, ib[i]);
            icopy[i] = malloc(ic * es + 1);
            memcpy(icopy[i], ib[i], ic * es);
        }
        in[i] = (dt_tensor){ib[i], ic, dts[i]};
        out[i] = (dt_tensor){ob[i], oc, dts[i]};
    }
    dt_tensor in_copy[LIST_MAX], out_copy[LIST_MAX];
    memcpy(in_copy, in, sizeof(dt_tensor) * (size_t)nt);
    memcpy(out_copy, out, sizeof(dt_tensor) * (size_t)nt);
    int rc = which == L_AR ? dt_allreduce_list(in, out, nt, op, t->comm)
           : which == L_AG ? dt_allgather_list(in, out, nt, t->comm)
                           : dt_reduce_scatter_fused(in, out, nt, op, t->comm);
    CHECK(rc == DT_OK, "%s %s comm=%s op=%s -> %s: %s", lnames[which], label, t->name,
          dt_op_name(op), dt_status_str(rc), dt_last_error());
    CHECK(same_tensors(in_copy, in, nt) && same_tensors(out_copy, out, nt),
          "%s: the const tensor arrays were modified", lnames[which]);
    int all_ok = rc == DT_OK;
    for (int i = 0; rc == DT_OK && i < nt; i++) {
        size_t es = dt_dtype_size(dts[i]), c = counts[i];
        size_t oc = which == L_AG ? n * c : c;
        uint64_t s = hash4(salt, (uint64_t)i, 0, 0);
        char what[200];
        snprintf(what, sizeof what, "%s %s comm=%s op=%s tensor %d dtype=%s count=%zu %s",
                 lnames[which], label, t->name, dt_op_name(op), i, dt_dtype_name(dts[i]), c,
                 inplace[i] ? "in-place" : "out-of-place");
        char *want = malloc(oc * es + 1);
        if (which == L_AR) expect_reduce(dts[i], op, t, 0, c, s, want);
        else if (which == L_RS) expect_reduce(dts[i], op, t, g * c, c, s, want);
        else
            for (size_t k = 0; k < n; k++) gen_buf(dts[i], GEN_RAW, t->mem[k], 0, c, s, want + k * c * es);
        if (out[i].data) all_ok &= same_elems(what, dts[i], out[i].data, want, oc);
        free(want);
        /* guard after the allocation holding the output */
        char *base = inplace[i] ? (which == L_AG ? ob[i] : ib[i]) : ob[i];
        size_t bytes = inplace[i] ? (which == L_AR ? c : n * c) * es : oc * es;
        if (base) {
            int gok = 1;
            for (size_t k = 0; k < GUARD * es; k++) gok &= (unsigned char)base[bytes + k] == GUARD_BYTE;
            CHECK(gok, "%s: write past the end of the buffer", what);
            all_ok &= gok;
        }
        if (icopy[i] && memcmp(icopy[i], ib[i], (which == L_RS ? n * c : c) * es) != 0) {
            CHECK(0, "%s: the input tensor was modified", what);
            all_ok = 0;
        }
    }
    if (all_ok) dt_test_passed++;
    for (int i = 0; i < nt; i++) { free(ib[i]); free(ob[i]); free(icopy[i]); }
}

/* Tensors that are consecutive slices of one allocation (in and out each
 * contiguous; out == in for in-place allreduce), the layout a fused gradient
 * buffer has. */
static void list_arena(const tcomm *t, int which, dt_op op, int nt, const size_t *counts,
                       dt_dtype dt, int inplace, uint64_t salt) {
    dt_tensor in[16], out[16];
    size_t n = (size_t)t->n, g = (size_t)t->grank, es = dt_dtype_size(dt), tot = 0;
    for (int i = 0; i < nt; i++) tot += counts[i];
    size_t itot = which == L_RS ? n * tot : tot, otot = which == L_AG ? n * tot : tot;
    char *ia = alloc_guarded(itot * es, es);
    char *oa = (inplace && which == L_AR) ? ia : alloc_guarded(otot * es, es);
    gen_kind gk = which == L_AG ? GEN_RAW : gen_for(op);
    gen_buf(dt, gk, ME, 0, itot, salt, ia); /* element k of the arena: global index k */
    char *icopy = malloc(itot * es + 1);
    memcpy(icopy, ia, itot * es);
    size_t io = 0, oo = 0;
    for (int i = 0; i < nt; i++) {
        size_t c = counts[i], ic = which == L_RS ? n * c : c, oc = which == L_AG ? n * c : c;
        in[i] = (dt_tensor){ia + io * es, ic, dt};
        out[i] = (dt_tensor){oa + oo * es, oc, dt};
        io += ic;
        oo += oc;
    }
    int rc = which == L_AR ? dt_allreduce_list(in, out, nt, op, t->comm)
           : which == L_AG ? dt_allgather_list(in, out, nt, t->comm)
                           : dt_reduce_scatter_fused(in, out, nt, op, t->comm);
    char what[200];
    snprintf(what, sizeof what, "%s contiguous-arena comm=%.60s op=%s dtype=%s %s", lnames[which],
             t->name, dt_op_name(op), dt_dtype_name(dt), inplace ? "in-place" : "out-of-place");
    CHECK(rc == DT_OK, "%s -> %s: %s", what, dt_status_str(rc), dt_last_error());
    int ok = rc == DT_OK;
    io = oo = 0;
    for (int i = 0; rc == DT_OK && i < nt; i++) {
        size_t c = counts[i], ic = which == L_RS ? n * c : c, oc = which == L_AG ? n * c : c;
        char *want = malloc(oc * es + 1);
        char w2[400];
        snprintf(w2, sizeof w2, "%s tensor %d count %zu", what, i, c);
        if (which == L_AR) expect_reduce(dt, op, t, io, c, salt, want);
        else if (which == L_RS) expect_reduce(dt, op, t, io + g * c, c, salt, want);
        else
            for (size_t k = 0; k < n; k++) gen_buf(dt, GEN_RAW, t->mem[k], io, c, salt, want + k * c * es);
        ok &= same_elems(w2, dt, out[i].data, want, oc);
        free(want);
        io += ic;
        oo += oc;
    }
    int gok = 1;
    for (size_t k = 0; k < GUARD * es; k++) gok &= (unsigned char)oa[otot * es + k] == GUARD_BYTE;
    CHECK(gok, "%s: write past the end of the output arena", what);
    if (oa != ia) {
        CHECK(memcmp(icopy, ia, itot * es) == 0, "%s: the input arena was modified", what);
        free(oa);
    }
    if (ok && gok) dt_test_passed++;
    free(ia);
    free(icopy);
}

/* Allreduce lists laid out in one arena so that inputs and outputs
 * interleave or overlap: every output must hold the reduction of its
 * tensor's ORIGINAL input, whichever input it overwrites. nt tensors of c
 * elements; in tensor i's slot of `stride` elements, the input starts at
 * in_at and the output at out_at (out_at == stride: the NEXT tensor's input).
 * With the 64 KiB shared-memory chunks of the coll_list_shm_* runs the list
 * takes several chunks, where only layouts whose outputs miss every other
 * input may be reduced straight into the tensors. */
static void list_overlap(const tcomm *t, dt_op op, dt_dtype dt, int nt, size_t c, size_t stride,
                         size_t in_at, const size_t *out_at, uint64_t salt, const char *label) {
    dt_tensor in[16], out[16];
    size_t es = dt_dtype_size(dt), tot = (size_t)nt * stride + c + 1; /* room for a last output one slot on */
    char *arena = alloc_guarded(tot * es, es);
    gen_buf(dt, gen_for(op), ME, 0, tot, salt, arena); /* element k of the arena: global index k */
    for (int i = 0; i < nt; i++) {
        in[i] = (dt_tensor){arena + ((size_t)i * stride + in_at) * es, c, dt};
        out[i] = (dt_tensor){arena + ((size_t)i * stride + out_at[i]) * es, c, dt};
    }
    int rc = dt_allreduce_list(in, out, nt, op, t->comm);
    char what[200];
    snprintf(what, sizeof what, "allreduce_list overlap layout %s comm=%.60s op=%s dtype=%s", label, t->name,
             dt_op_name(op), dt_dtype_name(dt));
    CHECK(rc == DT_OK, "%s -> %s: %s", what, dt_status_str(rc), dt_last_error());
    int ok = rc == DT_OK;
    char *want = malloc(c * es + 1);
    for (int i = 0; ok && i < nt; i++) {
        char w2[300];
        snprintf(w2, sizeof w2, "%s tensor %d", what, i);
        expect_reduce(dt, op, t, (size_t)i * stride + in_at, c, salt, want);
        ok &= same_elems(w2, dt, out[i].data, want, c);
    }
    int gok = 1;
    for (size_t k = 0; k < GUARD * es; k++) gok &= (unsigned char)arena[tot * es + k] == GUARD_BYTE;
    CHECK(gok, "%s: write past the end of the arena", what);
    if (ok && gok) dt_test_passed++;
    free(want);
    free(arena);
}

static void overlap_cases(const tcomm *t, uint64_t salt) {
    enum { NO = 8 };
    const size_t c = 3001; /* 8 x 3001 f32 = 96 KB: two 64 KiB chunks */
    size_t after[NO], every_other[NO], next[NO], shifted[NO], inplace[NO];
    for (int i = 0; i < NO; i++) {
        after[i] = c;                   /* in_i, out_i, in_i+1, ...: outputs miss every input */
        every_other[i] = i % 2 ? c : 0; /* even tensors in place, odd ones as `after` */
        next[i] = c;                    /* with stride c: out_i IS in_i+1 */
        shifted[i] = 1;                 /* out_i overlaps its own input, one element on */
        inplace[i] = 0;
    }
    for (int op = 0; op < DT_NUM_OPS; op += 2) { /* sum, min, avg */
        uint64_t s = salt + (uint64_t)op * 8;
        list_overlap(t, (dt_op)op, DT_F32, NO, c, 2 * c, 0, after, s, "interleaved");
        list_overlap(t, (dt_op)op, DT_F32, NO, c, 2 * c, 0, every_other, s + 1, "every-other-in-place");
        list_overlap(t, (dt_op)op, DT_F32, NO, c, c, 0, next, s + 2, "output-is-next-input");
        list_overlap(t, (dt_op)op, DT_F64, NO, c, c + 2, 0, shifted, s + 3, "output-one-element-on");
        list_overlap(t, (dt_op)op, DT_F32, NO, c, c + 5, 0, inplace, s + 4, "in-place-with-gaps");
    }
}

int main(void) {
    coll_init();
    tcomm tc[8];
    int nc = setup_comms(tc);
    enum { NT = 13 };
    static const size_t mixed_counts[NT] = {5, 0, 1, 1000, 7, 0, 33, 2, 64, 1, 0, 300, 9};
    dt_dtype mixed_dts[NT];
    int inplace[NT], none[NT], all[NT];
    for (int i = 0; i < NT; i++) {
        mixed_dts[i] = (dt_dtype)((i * 3 + 1) % DT_NUM_DTYPES); /* interleaved dtypes */
        inplace[i] = i % 3 == 0;
        none[i] = 0;
        all[i] = 1;
    }
    static const size_t one_counts[6] = {3, 0, 100, 1, 7, 50};
    static const dt_dtype f32s[6] = {DT_F32, DT_F32, DT_F32, DT_F32, DT_F32, DT_F32};
    static const dt_dtype alt[6] = {DT_F32, DT_I8, DT_F32, DT_I8, DT_BF16, DT_F32};
    static const size_t single_count[1] = {1000};
    static const dt_dtype single_dt[1] = {DT_F16};
    for (int c = 0; c < nc; c++) {
        const tcomm *t = &tc[c];
        for (int which = 0; which < 3; which++) {
            int nops = which == L_AG ? 1 : DT_NUM_OPS;
            for (int op = 0; op < nops; op++) {
                uint64_t s = (uint64_t)(c * 100 + which * 10 + op);
                list_case(t, which, (dt_op)op, NT, mixed_counts, mixed_dts, inplace, s, "mixed");
                list_case(t, which, (dt_op)op, NT, mixed_counts, mixed_dts, none, s + 1, "mixed-oop");
                list_case(t, which, (dt_op)op, 6, one_counts, f32s, none, s + 2, "f32-only");
                list_case(t, which, (dt_op)op, 6, one_counts, f32s, all, s + 3, "f32-only-inplace");
                list_case(t, which, (dt_op)op, 6, one_counts, alt, inplace, s + 4, "alternating");
                list_case(t, which, (dt_op)op, 1, single_count, single_dt, none, s + 5, "single");
                list_case(t, which, (dt_op)op, 1, single_count, single_dt, all, s + 6, "single-inplace");
            }
        }
        for (int which = 0; which < 3; which++)
            for (int op = 0; op < (which == L_AG ? 1 : DT_NUM_OPS); op++)
                for (int ip = 0; ip < (which == L_AR ? 2 : 1); ip++) {
                    uint64_t s = (uint64_t)(5000 + c * 100 + which * 10 + op * 2 + ip);
                    list_arena(t, which, (dt_op)op, 6, one_counts, DT_F32, ip, s);
                    list_arena(t, which, (dt_op)op, 6, one_counts, DT_BF16, ip, s + 1);
                    list_arena(t, which, (dt_op)op, 6, one_counts, DT_I32, ip, s + 2);
                }
        /* n == 0: nothing to do */
        dt_tensor dummy = {NULL, 0, DT_F32};
        CHECK_OK(dt_allreduce_list(&dummy, &dummy, 0, DT_SUM, t->comm));
        CHECK_OK(dt_allgather_list(&dummy, &dummy, 0, t->comm));
        CHECK_OK(dt_reduce_scatter_fused(&dummy, &dummy, 0, DT_SUM, t->comm));
    }
    /* Many small tensors whose total passes the shared-memory allreduce's
     * threshold: reduced straight from and into the tensors (one chunk, so
     * any layout), every op, in place / not / mixed, one and two dtypes; then
     * a list of 6 MiB (several chunks with a small DTRAIN_SHM_CHUNK_BYTES), in
     * place and not. */
    {
        enum { NM = 300 };
        static size_t mc[NM];
        static dt_dtype mf32[NM], mtwo[NM];
        static int mix[NM], none_m[NM], all_m[NM];
        for (int i = 0; i < NM; i++) {
            mc[i] = 1 + (size_t)(i * 37) % 200; /* 30,000 elements in all */
            mf32[i] = DT_F32;
            mtwo[i] = i % 2 ? DT_F64 : DT_I32;
            mix[i] = i % 3 == 0;
            none_m[i] = 0;
            all_m[i] = 1;
        }
        for (int c = 0; c < nc; c++)
            for (int op = 0; op < DT_NUM_OPS; op++) {
                uint64_t s = (uint64_t)(7000 + c * 10 + op);
                list_case(&tc[c], L_AR, (dt_op)op, NM, mc, mf32, mix, s, "many-mixed");
                list_case(&tc[c], L_AR, (dt_op)op, NM, mc, mf32, none_m, s + 1, "many-oop");
                list_case(&tc[c], L_AR, (dt_op)op, NM, mc, mtwo, all_m, s + 2, "many-two-dtypes-inplace");
            }
        static const size_t chunky[4] = {(1u << 19) + 3, 1000, (1u << 20) + 1, 77};
        static const dt_dtype chunky_dt[4] = {DT_F32, DT_F32, DT_F32, DT_F32};
        static const int chunky_all[4] = {1, 1, 1, 1}, chunky_none[4] = {0, 0, 0, 0};
        list_case(&tc[0], L_AR, DT_SUM, 4, chunky, chunky_dt, chunky_all, 8001, "chunks-inplace");
        list_case(&tc[0], L_AR, DT_MAX, 4, chunky, chunky_dt, chunky_none, 8002, "chunks-oop");
    }
    for (int c = 0; c < nc; c++) overlap_cases(&tc[c], (uint64_t)(9000 + c * 100));
    /* large tensors in one list */
    {
        static const size_t big_counts[3] = {(1u << 19) + 1, 3, (1u << 18) + 5};
        static const dt_dtype big_dts[3] = {DT_F32, DT_F32, DT_F16};
        int ip3[3] = {0, 1, 1};
        list_case(&tc[0], L_AR, DT_SUM, 3, big_counts, big_dts, ip3, 999, "large");
        list_case(&tc[0], L_AG, DT_SUM, 3, big_counts, big_dts, ip3, 998, "large");
        list_case(&tc[0], L_RS, DT_SUM, 3, big_counts, big_dts, ip3, 997, "large");
    }
    CHECK_OK(dt_finalize());
    return dt_test_finish("coll_list");
}
