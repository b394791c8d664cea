/* coll_shared_mem: dt_comm_alloc_shared / dt_comm_free_shared, and
 * allreduces on that memory, on the world and every sub-communicator:
 *   - the memory is zeroed, 4096-aligned and usable; bad arguments and bad
 *     frees give DT_ERR_INVALID with a message naming the problem;
 *   - in-place allreduces of spans in it (every natively reduced dtype x op,
 *     blocking and async, at an offset, just above the 512 KiB from which
 *     calls may take that path) against references from every member's
 *     known inputs;
 *   - the same spans at DIFFERENT offsets on different ranks, out of place,
 *     or in shared memory on some ranks only (the path not agreed: the
 *     buffered path runs), with the same results;
 *   - random floats (sums not exact): the bits equal those of the same
 *     allreduce on plain memory (same association on every path). */
#define _POSIX_C_SOURCE 200809L
#include "coll_common.h"

static const dt_dtype native[] = {DT_F32, DT_F64, DT_I8, DT_U8, DT_I32, DT_I64};
enum { NNATIVE = sizeof native / sizeof native[0] };

/* Allreduce count elements at element offset `at` of buf (in place unless
 * out != NULL), inputs generated for this rank, then check against the
 * reference. */
static void reduce_at(const tcomm *t, dt_dtype dt, dt_op op, char *buf, size_t at, size_t count, char *out,
                      int async, uint64_t salt, const char *label) {
    size_t es = dt_dtype_size(dt);
    char *in = buf + at * es, *dst = out ? out : in;
    gen_buf(dt, gen_for(op), ME, 0, count, salt, in);
    int rc;
    if (async) {
        dt_work *w = NULL;
        rc = dt_allreduce_async(in, dst, count, dt, op, t->comm, &w);
        if (rc == DT_OK) rc = dt_work_wait(w);
        dt_work_free(w);
    } else {
        rc = dt_allreduce(in, dst, count, dt, op, t->comm);
    }
    char what[200];
    snprintf(what, sizeof what, "%s comm=%.60s dtype=%s op=%s count=%zu offset=%zu%s", label, t->name,
             dt_dtype_name(dt), dt_op_name(op), count, at, async ? " async" : "");
    CHECK(rc == DT_OK, "%s -> %s: %s", what, dt_status_str(rc), dt_last_error());
    if (rc != DT_OK) return;
    char *want = malloc(count * es + 1);
    expect_reduce(dt, op, t, 0, count, salt, want);
    if (same_elems(what, dt, dst, want, count)) dt_test_passed++;
    free(want);
}

/* Random floats: the shared-memory result has the bits of the plain one. */
static void same_bits(const tcomm *t, char *shared, size_t count, uint64_t salt) {
    float *a = (float *)(void *)shared, *b = malloc(count * sizeof(float) + 1);
    for (size_t i = 0; i < count; i++) {
        uint64_t h = hash4(salt, (uint64_t)ME, i, 7);
        a[i] = b[i] = (float)((double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0) * 1e3f;
    }
    int rc1 = dt_allreduce(a, a, count, DT_F32, DT_SUM, t->comm);
    int rc2 = dt_allreduce(b, b, count, DT_F32, DT_SUM, t->comm);
    CHECK(rc1 == DT_OK && rc2 == DT_OK, "random-float allreduce comm=%s -> %s / %s: %s", t->name,
          dt_status_str(rc1), dt_status_str(rc2), dt_last_error());
    char what[120];
    snprintf(what, sizeof what, "shared vs plain memory, random floats, comm=%.60s", t->name);
    if (rc1 == DT_OK && rc2 == DT_OK && same_elems(what, DT_F32, a, b, count)) dt_test_passed++;
    free(b);
}

static void comm_cases(const tcomm *t, int ci) {
    /* calls of at least 512 KiB take the region path (shm_mpi.c) */
    const size_t count = 140001, at = 123; /* 1.1 MB of f64, 560 KB of f32 / i32 */
    size_t bytes = (at + count) * 8 + 64 * 8;
    void *mem = NULL;
    CHECK_OK(dt_comm_alloc_shared(t->comm, bytes, &mem));
    if (!mem) return;
    int zero = ((uintptr_t)mem % 4096) == 0;
    for (size_t k = 0; k < bytes; k++) zero &= ((unsigned char *)mem)[k] == 0;
    CHECK(zero, "comm=%s: dt_comm_alloc_shared memory is not zeroed and 4096-aligned", t->name);
    if (zero) dt_test_passed++;
    char *buf = mem;
    for (size_t d = 0; d < NNATIVE; d++)
        for (int op = 0; op < DT_NUM_OPS; op++) {
            if (op == DT_AVG && native[d] != DT_F32 && native[d] != DT_F64 && native[d] != DT_I64) continue;
            uint64_t s = (uint64_t)(ci * 1000 + (int)d * 10 + op);
            size_t n = ((size_t)512 << 10) / dt_dtype_size(native[d]) + 4001; /* just above the threshold */
            reduce_at(t, native[d], (dt_op)op, buf, at, n, NULL, 0, s, "in place");
            reduce_at(t, native[d], (dt_op)op, buf, 0, n, NULL, 1, s + 1, "in place");
        }
    /* not agreed / not eligible: the buffered path, same results */
    reduce_at(t, DT_F32, DT_SUM, buf, (size_t)t->grank * 16, count, NULL, 0, 77, "rank-dependent offset");
    char *plain = malloc(count * 8 + 1);
    reduce_at(t, DT_F64, DT_MAX, buf, 0, count, plain, 0, 78, "out of place into plain memory");
    reduce_at(t, DT_I32, DT_SUM, t->grank % 2 ? plain : buf, 0, count, NULL, 0, 79, "shared on some ranks only");
    free(plain);
    same_bits(t, buf, count, 80 + (uint64_t)ci);
    CHECK_OK(dt_comm_free_shared(t->comm, mem));
    CHECK_ERRF(dt_comm_free_shared(t->comm, mem), DT_ERR_INVALID, "dt_comm_free_shared", "not allocated");
}

int main(void) {
    coll_init();
    tcomm tc[8];
    int nc = setup_comms(tc);
    for (int c = 0; c < nc; c++) comm_cases(&tc[c], c);
    /* a second region, with the first given back: both usable in turn */
    void *a = NULL, *b = NULL;
    CHECK_OK(dt_comm_alloc_shared(tc[0].comm, 1 << 20, &a));
    CHECK_OK(dt_comm_alloc_shared(tc[0].comm, 3 << 20, &b));
    if (a && b) {
        reduce_at(&tc[0], DT_F32, DT_SUM, a, 0, (1 << 20) / 4, NULL, 0, 90, "first of two regions");
        reduce_at(&tc[0], DT_F32, DT_SUM, b, 5, (3 << 20) / 4 - 5, NULL, 1, 91, "second of two regions");
    }
    CHECK_OK(dt_comm_free_shared(tc[0].comm, a));
    if (b) reduce_at(&tc[0], DT_F64, DT_MIN, b, 0, (3 << 20) / 8, NULL, 0, 92, "after the other was freed");
    CHECK_OK(dt_comm_free_shared(tc[0].comm, b));
    CHECK_OK(dt_comm_free_shared(tc[0].comm, NULL));
    /* bad arguments */
    void *p = (void *)1;
    CHECK_ERRF(dt_comm_alloc_shared(tc[0].comm, 0, &p), DT_ERR_INVALID, "dt_comm_alloc_shared", "bytes 0");
    CHECK(p == NULL, "a failed dt_comm_alloc_shared left *ptr = %p", p);
    CHECK_ERRF(dt_comm_alloc_shared(tc[0].comm, 64, NULL), DT_ERR_INVALID, "dt_comm_alloc_shared", "ptr is NULL");
    CHECK_ERRF(dt_comm_alloc_shared(NULL, 64, &p), DT_ERR_INVALID, "dt_comm_alloc_shared", "NULL|comm");
    int x = 0;
    CHECK_ERRF(dt_comm_free_shared(tc[0].comm, &x), DT_ERR_INVALID, "dt_comm_free_shared", "not allocated");
    CHECK_OK(dt_finalize());
    return dt_test_finish("coll_shared_mem");
}
