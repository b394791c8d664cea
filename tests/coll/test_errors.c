/* coll_errors: argument errors of every collective. Every rank makes the same bad
 * call, gets the same status, and the message names the function and the problem;
 * nothing hangs and the communicator still works afterwards. Also valid edge
 * cases: count 0 with NULL buffers. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdint.h>
#include "coll_common.h"

#define INV DT_ERR_INVALID
static const char *const K_NULL = "NULL|null";
static const char *const K_COUNT = "count|overflow|large|address";
static const char *const K_DTYPE = "dtype|99";
static const char *const K_OP = "op|99";
static const char *const K_ROOT = "root|range|not in|group";
static const char *const K_COMM = "comm|NULL";

static void errors_on(const tcomm *t) {
    dt_comm *c = t->comm;
    size_t n = (size_t)t->n;
    float a[64], b[64 * 8];
    memset(a, 0, sizeof a);
    memset(b, 0x5a, sizeof b); /* receive side: must stay untouched by rejected calls */
    const size_t huge = SIZE_MAX / 2;
    dt_dtype bad_dt = (dt_dtype)99;
    dt_op bad_op = (dt_op)99;
    int outside = -1; /* a world rank outside my group (same error on every rank) */
    for (int r = 0; r < W && outside < 0; r++) {
        int in = 0;
        for (int m = 0; m < t->n; m++) in |= t->mem[m] == r;
        if (!in) outside = r;
    }
    int root = t->mem[0];
    dt_work *w = NULL;

    /* allreduce */
    CHECK_ERRF(dt_allreduce(NULL, b, 4, DT_F32, DT_SUM, c), INV, "dt_allreduce", K_NULL);
    CHECK_ERRF(dt_allreduce(a, NULL, 4, DT_F32, DT_SUM, c), INV, "dt_allreduce", K_NULL);
    CHECK_ERRF(dt_allreduce(a, b, huge, DT_F32, DT_SUM, c), INV, "dt_allreduce", K_COUNT);
    CHECK_ERRF(dt_allreduce(a, b, SIZE_MAX, DT_I8, DT_SUM, c), INV, "dt_allreduce", K_COUNT);
    CHECK_ERRF(dt_allreduce(a, b, 4, bad_dt, DT_SUM, c), INV, "dt_allreduce", K_DTYPE);
    CHECK_ERRF(dt_allreduce(a, b, 4, (dt_dtype)-1, DT_SUM, c), INV, "dt_allreduce", "dtype|-1");
    CHECK_ERRF(dt_allreduce(a, b, 4, DT_F32, bad_op, c), INV, "dt_allreduce", K_OP);
    CHECK_ERRF(dt_allreduce(a, b, 4, DT_F32, (dt_op)-1, c), INV, "dt_allreduce", "op|-1");
    /* allgather: recv size = size * count must not overflow either */
    CHECK_ERRF(dt_allgather(NULL, b, 4, DT_F32, c), INV, "dt_allgather", K_NULL);
    CHECK_ERRF(dt_allgather(a, NULL, 4, DT_F32, c), INV, "dt_allgather", K_NULL);
    CHECK_ERRF(dt_allgather(a, b, huge, DT_F32, c), INV, "dt_allgather", K_COUNT);
    if (n > 1)
        CHECK_ERRF(dt_allgather(a, b, (size_t)PTRDIFF_MAX / 4 / n + 1, DT_F32, c), INV,
                   "dt_allgather", K_COUNT);
    CHECK_ERRF(dt_allgather(a, b, 4, bad_dt, c), INV, "dt_allgather", K_DTYPE);
    /* reduce_scatter */
    if (n > 1)
        CHECK_ERRF(dt_reduce_scatter(a, b, n + 1, DT_F32, DT_SUM, c), INV, "dt_reduce_scatter",
                   "divisible|multiple");
    CHECK_ERRF(dt_reduce_scatter(NULL, b, n * 2, DT_F32, DT_SUM, c), INV, "dt_reduce_scatter", K_NULL);
    CHECK_ERRF(dt_reduce_scatter(a, NULL, n * 2, DT_F32, DT_SUM, c), INV, "dt_reduce_scatter", K_NULL);
    CHECK_ERRF(dt_reduce_scatter(a, b, huge / n * n, DT_F32, DT_SUM, c), INV, "dt_reduce_scatter", K_COUNT);
    CHECK_ERRF(dt_reduce_scatter(a, b, n, bad_dt, DT_SUM, c), INV, "dt_reduce_scatter", K_DTYPE);
    CHECK_ERRF(dt_reduce_scatter(a, b, n, DT_F32, bad_op, c), INV, "dt_reduce_scatter", K_OP);
    /* reduce (errors every rank sees: roots, sendbuf, dtype, op, count) */
    CHECK_ERRF(dt_reduce(a, b, 4, DT_F32, DT_SUM, W, c), INV, "dt_reduce", K_ROOT);
    CHECK_ERRF(dt_reduce(a, b, 4, DT_F32, DT_SUM, -1, c), INV, "dt_reduce", K_ROOT);
    CHECK_ERRF(dt_reduce(a, b, 4, DT_F32, DT_SUM, 1 << 30, c), INV, "dt_reduce", K_ROOT);
    if (outside >= 0)
        CHECK_ERRF(dt_reduce(a, b, 4, DT_F32, DT_SUM, outside, c), INV, "dt_reduce", K_ROOT);
    CHECK_ERRF(dt_reduce(NULL, b, 4, DT_F32, DT_SUM, root, c), INV, "dt_reduce", K_NULL);
    CHECK_ERRF(dt_reduce(a, b, 4, bad_dt, DT_SUM, root, c), INV, "dt_reduce", K_DTYPE);
    CHECK_ERRF(dt_reduce(a, b, 4, DT_F32, bad_op, root, c), INV, "dt_reduce", K_OP);
    CHECK_ERRF(dt_reduce(a, b, huge, DT_F32, DT_SUM, root, c), INV, "dt_reduce", K_COUNT);
    /* broadcast */
    CHECK_ERRF(dt_broadcast(a, b, 4, DT_F32, W, c), INV, "dt_broadcast", K_ROOT);
    CHECK_ERRF(dt_broadcast(a, b, 4, DT_F32, -1, c), INV, "dt_broadcast", K_ROOT);
    if (outside >= 0)
        CHECK_ERRF(dt_broadcast(a, b, 4, DT_F32, outside, c), INV, "dt_broadcast", K_ROOT);
    CHECK_ERRF(dt_broadcast(a, NULL, 4, DT_F32, root, c), INV, "dt_broadcast", K_NULL);
    CHECK_ERRF(dt_broadcast(a, b, 4, bad_dt, root, c), INV, "dt_broadcast", K_DTYPE);
    CHECK_ERRF(dt_broadcast(a, b, huge, DT_F32, root, c), INV, "dt_broadcast", K_COUNT);
    /* gather */
    CHECK_ERRF(dt_gather(a, b, 4, DT_F32, W, c), INV, "dt_gather", K_ROOT);
    if (outside >= 0)
        CHECK_ERRF(dt_gather(a, b, 4, DT_F32, outside, c), INV, "dt_gather", K_ROOT);
    CHECK_ERRF(dt_gather(NULL, b, 4, DT_F32, root, c), INV, "dt_gather", K_NULL);
    CHECK_ERRF(dt_gather(a, b, 4, bad_dt, root, c), INV, "dt_gather", K_DTYPE);
    CHECK_ERRF(dt_gather(a, b, huge, DT_F32, root, c), INV, "dt_gather", K_COUNT);
    /* scatter */
    CHECK_ERRF(dt_scatter(a, b, 4, DT_F32, -1, c), INV, "dt_scatter", K_ROOT);
    if (outside >= 0)
        CHECK_ERRF(dt_scatter(a, b, 4, DT_F32, outside, c), INV, "dt_scatter", K_ROOT);
    CHECK_ERRF(dt_scatter(a, NULL, 4, DT_F32, root, c), INV, "dt_scatter", K_NULL);
    CHECK_ERRF(dt_scatter(a, b, 4, bad_dt, root, c), INV, "dt_scatter", K_DTYPE);
    CHECK_ERRF(dt_scatter(a, b, huge, DT_F32, root, c), INV, "dt_scatter", K_COUNT);
    /* all_to_all */
    CHECK_ERRF(dt_all_to_all(NULL, b, 4, DT_F32, c), INV, "dt_all_to_all", K_NULL);
    CHECK_ERRF(dt_all_to_all(a, NULL, 4, DT_F32, c), INV, "dt_all_to_all", K_NULL);
    CHECK_ERRF(dt_all_to_all(a, b, 4, bad_dt, c), INV, "dt_all_to_all", K_DTYPE);
    CHECK_ERRF(dt_all_to_all(a, b, huge, DT_F32, c), INV, "dt_all_to_all", K_COUNT);
    if (n > 1)
        CHECK_ERRF(dt_all_to_all(a, b, (size_t)PTRDIFF_MAX / 4 / n + 1, DT_F32, c), INV,
                   "dt_all_to_all", K_COUNT);
    /* send / recv: self, outside, out of range, NULL, dtype, count */
    CHECK_ERRF(dt_send(a, 4, DT_F32, ME, c), INV, "dt_send", "self|itself|own|caller");
    CHECK_ERRF(dt_recv(b, 4, DT_F32, ME, c), INV, "dt_recv", "self|itself|own|caller");
    CHECK_ERRF(dt_send(a, 4, DT_F32, W, c), INV, "dt_send", "peer|range");
    CHECK_ERRF(dt_recv(b, 4, DT_F32, -1, c), INV, "dt_recv", "peer|range");
    if (outside >= 0) {
        CHECK_ERRF(dt_send(a, 4, DT_F32, outside, c), INV, "dt_send", "peer|not in|group");
        CHECK_ERRF(dt_recv(b, 4, DT_F32, outside, c), INV, "dt_recv", "peer|not in|group");
    }
    if (n > 1) {
        int other = t->mem[(t->grank + 1) % t->n];
        CHECK_ERRF(dt_send(NULL, 4, DT_F32, other, c), INV, "dt_send", K_NULL);
        CHECK_ERRF(dt_recv(NULL, 4, DT_F32, other, c), INV, "dt_recv", K_NULL);
        CHECK_ERRF(dt_send(a, 4, bad_dt, other, c), INV, "dt_send", K_DTYPE);
        CHECK_ERRF(dt_recv(b, huge, DT_F32, other, c), INV, "dt_recv", K_COUNT);
    }
    /* Counts beyond what the MPI backend addresses in one call (int counts) for the
     * operations it does not split: rejected before anything moves. */
    if (n > 1 && strcmp(dt_comm_backend(c), "mpi") == 0) {
        const size_t over = (size_t)INT_MAX + 1;
        const char *K_LIM = "limit|exceed|backend|int|large|max";
        CHECK_ERRF(dt_allgather(a, b, over, DT_F32, c), INV, "dt_allgather", K_LIM);
        CHECK_ERRF(dt_all_to_all(a, b, over, DT_F32, c), INV, "dt_all_to_all", K_LIM);
        CHECK_ERRF(dt_gather(a, b, over, DT_F32, root, c), INV, "dt_gather", K_LIM);
        CHECK_ERRF(dt_scatter(a, b, over, DT_F32, root, c), INV, "dt_scatter", K_LIM);
        CHECK_ERRF(dt_reduce_scatter(a, b, over * n, DT_F32, DT_SUM, c), INV, "dt_reduce_scatter", K_LIM);
        int other = t->mem[(t->grank + 1) % t->n];
        CHECK_ERRF(dt_send(a, over, DT_F32, other, c), INV, "dt_send", K_LIM);
        CHECK_ERRF(dt_recv(b, over, DT_F32, other, c), INV, "dt_recv", K_LIM);
    }
    /* Point to point with disagreeing counts (reliability.h: DT_ERR_MISMATCH on
     * both sides, nothing truncated, no deadlock; async: at wait). */
    if (n > 1) {
        int s0 = t->mem[0], r0 = t->mem[1];
        const char *K_MM = "mismatch|count";
        float src[8] = {1, 2, 3, 4, 5, 6, 7, 8}, dst[8];
        for (int k = 0; k < 8; k++) dst[k] = -1;
        if (ME == s0) CHECK_ERRF(dt_send(src, 5, DT_F32, r0, c), DT_ERR_MISMATCH, "dt_send", K_MM);
        if (ME == r0) CHECK_ERRF(dt_recv(dst, 7, DT_F32, s0, c), DT_ERR_MISMATCH, "dt_recv", K_MM);
        if (ME == s0) CHECK_ERRF(dt_send(src, 8, DT_F32, r0, c), DT_ERR_MISMATCH, "dt_send", K_MM);
        if (ME == r0) CHECK_ERRF(dt_recv(dst, 6, DT_F32, s0, c), DT_ERR_MISMATCH, "dt_recv", K_MM);
        if (ME == r0) {
            int untouched = 1;
            for (int k = 0; k < 8; k++) untouched &= dst[k] == -1;
            CHECK(untouched, "%s: a mismatched recv wrote into the buffer", t->name);
        }
        dt_work *ws = NULL;
        if (ME == s0 || ME == r0) {
            if (ME == s0) CHECK_OK(dt_send_async(src, 3, DT_F32, r0, c, &ws));
            else CHECK_OK(dt_recv_async(dst, 4, DT_F32, s0, c, &ws)); /* accepted at submission */
            CHECK_ERRF(dt_work_wait(ws), DT_ERR_MISMATCH, "", K_MM);
            int d = 0, rc = dt_work_test(ws, &d);
            CHECK(d == 1 && rc == DT_ERR_MISMATCH, "%s: test after a failed wait: done %d %s",
                  t->name, d, dt_status_str(rc));
            dt_work_free(ws);
        }
        /* the pair still works */
        if (ME == s0) CHECK_OK(dt_send(src, 8, DT_F32, r0, c));
        if (ME == r0) {
            CHECK_OK(dt_recv(dst, 8, DT_F32, s0, c));
            CHECK(dst[0] == 1 && dst[7] == 8, "%s: send/recv after mismatches: %g %g", t->name,
                  (double)dst[0], (double)dst[7]);
        }
    }
    /* async forms: argument errors at submission */
    CHECK_ERRF(dt_allreduce_async(NULL, b, 4, DT_F32, DT_SUM, c, &w), INV, "dt_allreduce", K_NULL);
    CHECK_ERRF(dt_allreduce_async(a, b, 4, DT_F32, DT_SUM, c, NULL), INV, "dt_allreduce", "work|NULL");
    CHECK_ERRF(dt_allgather_async(a, b, 4, DT_F32, c, NULL), INV, "dt_allgather", "work|NULL");
    CHECK_ERRF(dt_reduce_scatter_async(a, b, n, DT_F32, DT_SUM, c, NULL), INV, "dt_reduce_scatter", "work|NULL");
    CHECK_ERRF(dt_reduce_async(a, b, 4, DT_F32, DT_SUM, root, c, NULL), INV, "dt_reduce", "work|NULL");
    CHECK_ERRF(dt_broadcast_async(a, b, 4, DT_F32, root, c, NULL), INV, "dt_broadcast", "work|NULL");
    CHECK_ERRF(dt_gather_async(a, b, 4, DT_F32, root, c, NULL), INV, "dt_gather", "work|NULL");
    CHECK_ERRF(dt_scatter_async(a, b, 4, DT_F32, root, c, NULL), INV, "dt_scatter", "work|NULL");
    CHECK_ERRF(dt_all_to_all_async(a, b, 4, DT_F32, c, NULL), INV, "dt_all_to_all", "work|NULL");
    CHECK_ERRF(dt_barrier_async(c, NULL), INV, "dt_barrier", "work|NULL");
    CHECK_ERRF(dt_reduce_async(a, b, 4, DT_F32, DT_SUM, W + 5, c, &w), INV, "dt_reduce", K_ROOT);
    CHECK_ERRF(dt_broadcast_async(a, b, 4, bad_dt, root, c, &w), INV, "dt_broadcast", K_DTYPE);
    CHECK_ERRF(dt_send_async(a, 4, DT_F32, ME, c, &w), INV, "dt_send", "self|itself|own|caller");
    CHECK_ERRF(dt_recv_async(b, 4, DT_F32, ME, c, &w), INV, "dt_recv", "self|itself|own|caller");
    if (n > 1) {
        int other = t->mem[(t->grank + 1) % t->n];
        CHECK_ERRF(dt_send_async(a, 4, DT_F32, other, c, NULL), INV, "dt_send", "work|NULL");
        CHECK_ERRF(dt_recv_async(b, 4, DT_F32, other, c, NULL), INV, "dt_recv", "work|NULL");
        CHECK_ERRF(dt_reduce_scatter_async(a, b, n + 1, DT_F32, DT_SUM, c, &w), INV,
                   "dt_reduce_scatter", "divisible|multiple");
    }

    /* lists */
    dt_tensor in[3] = {{a, 4, DT_F32}, {a + 4, 2, DT_I32}, {a + 8, 0, DT_F64}};
    dt_tensor out[3] = {{b, 4, DT_F32}, {b + 4, 2, DT_I32}, {b + 8, 0, DT_F64}};
    const char *K_N = "n |n=|negative|number|length|count";
    CHECK_ERRF(dt_allreduce_list(in, out, -1, DT_SUM, c), INV, "dt_allreduce_list", K_N);
    CHECK_ERRF(dt_allgather_list(in, out, -1, c), INV, "dt_allgather_list", K_N);
    CHECK_ERRF(dt_reduce_scatter_fused(in, out, -1, DT_SUM, c), INV, "dt_reduce_scatter_fused", K_N);
    CHECK_ERRF(dt_allreduce_list(NULL, out, 3, DT_SUM, c), INV, "dt_allreduce_list", K_NULL);
    CHECK_ERRF(dt_allreduce_list(in, NULL, 3, DT_SUM, c), INV, "dt_allreduce_list", K_NULL);
    CHECK_ERRF(dt_allgather_list(NULL, out, 3, c), INV, "dt_allgather_list", K_NULL);
    CHECK_ERRF(dt_reduce_scatter_fused(in, NULL, 3, DT_SUM, c), INV, "dt_reduce_scatter_fused", K_NULL);
    CHECK_ERRF(dt_allreduce_list(in, out, 3, bad_op, c), INV, "dt_allreduce_list", K_OP);
    CHECK_ERRF(dt_reduce_scatter_fused(in, out, 3, bad_op, c), INV, "dt_reduce_scatter_fused", K_OP);
    {
        dt_tensor o2[3];
        memcpy(o2, out, sizeof o2);
        o2[1].dtype = DT_F32; /* in[1] is i32 */
        CHECK_ERRF(dt_allreduce_list(in, o2, 3, DT_SUM, c), INV, "dt_allreduce_list", "dtype");
        {
            dt_tensor agd[3]; /* allgather-shaped outputs, dtype differs at tensor 1 */
            for (int i = 0; i < 3; i++) agd[i] = (dt_tensor){b + 64 * i, n * in[i].count, in[i].dtype};
            agd[1].dtype = DT_F32;
            CHECK_ERRF(dt_allgather_list(in, agd, 3, c), INV, "dt_allgather_list", "dtype");
            dt_tensor rsd[3]; /* reduce_scatter-shaped inputs, dtype differs at tensor 0 */
            for (int i = 0; i < 3; i++) rsd[i] = (dt_tensor){b + 64 * i, n * out[i].count, out[i].dtype};
            rsd[0].dtype = DT_I32;
            CHECK_ERRF(dt_reduce_scatter_fused(rsd, out, 3, DT_SUM, c), INV, "dt_reduce_scatter_fused", "dtype");
        }
        memcpy(o2, out, sizeof o2);
        o2[0].count = 5; /* allreduce: counts must be equal */
        CHECK_ERRF(dt_allreduce_list(in, o2, 3, DT_SUM, c), INV, "dt_allreduce_list", "count");
        /* allgather: out.count must be size * in.count */
        dt_tensor ag[3];
        for (int i = 0; i < 3; i++) ag[i] = (dt_tensor){b + 64 * i, n * in[i].count, in[i].dtype};
        ag[1].count = n * in[1].count + 1;
        CHECK_ERRF(dt_allgather_list(in, ag, 3, c), INV, "dt_allgather_list", "count");
        /* reduce_scatter: in.count must be size * out.count */
        dt_tensor rs_in[3];
        for (int i = 0; i < 3; i++) rs_in[i] = (dt_tensor){b + 64 * i, n * out[i].count, out[i].dtype};
        rs_in[2].count = n * out[2].count + 1;
        CHECK_ERRF(dt_reduce_scatter_fused(rs_in, out, 3, DT_SUM, c), INV, "dt_reduce_scatter_fused", "count");
        memcpy(o2, out, sizeof o2);
        o2[0].data = NULL; /* NULL data with count > 0 */
        CHECK_ERRF(dt_allreduce_list(in, o2, 3, DT_SUM, c), INV, "dt_allreduce_list", K_NULL);
        dt_tensor i2[3];
        memcpy(i2, in, sizeof i2);
        i2[1].dtype = bad_dt;
        memcpy(o2, out, sizeof o2);
        o2[1].dtype = bad_dt;
        CHECK_ERRF(dt_allreduce_list(i2, o2, 3, DT_SUM, c), INV, "dt_allreduce_list", K_DTYPE);
        memcpy(i2, in, sizeof i2);
        memcpy(o2, out, sizeof o2);
        i2[0].count = huge;
        o2[0].count = n * huge; /* overflows too */
        if (n > 1) CHECK_ERRF(dt_allgather_list(i2, o2, 3, c), INV, "dt_allgather_list", K_COUNT);
    }
    {
        /* lists of one dtype take a one-pass check: each fault at the last
         * tensor, after good ones, still names that tensor and the fault */
#define AT2(expr, fn, what) do { CHECK_ERRF(expr, INV, fn, "tensor 2"); \
        CHECK(strstr(dt_last_error(), what) != NULL, "%s: message '%s' lacks '%s'", #expr, dt_last_error(), what); } while (0)
        dt_tensor u[3], v[3];
        for (int i = 0; i < 3; i++) {
            u[i] = (dt_tensor){a + 2 * i, 2, DT_F32};
            v[i] = (dt_tensor){b + 2 * i, 2, DT_F32};
        }
        v[2].count = 3;
        AT2(dt_allreduce_list(u, v, 3, DT_SUM, c), "dt_allreduce_list", "count");
        v[2].count = 2;
        u[2].data = NULL;
        AT2(dt_allreduce_list(u, v, 3, DT_SUM, c), "dt_allreduce_list", "NULL");
        u[2].data = a + 4;
        v[2].dtype = DT_F64;
        AT2(dt_allreduce_list(u, v, 3, DT_SUM, c), "dt_allreduce_list", "dtype");
        u[2].dtype = v[2].dtype = bad_dt;
        AT2(dt_allreduce_list(u, v, 3, DT_SUM, c), "dt_allreduce_list", "dtype");
        u[2].dtype = v[2].dtype = DT_F32;
        for (int i = 0; i < 3; i++) v[i] = (dt_tensor){b + 2 * n * i, 2 * n, DT_F32};
        v[2].count = 2 * n + 1;
        AT2(dt_allgather_list(u, v, 3, c), "dt_allgather_list", "count");
        if (n > 1) {
            for (int i = 0; i < 3; i++) v[i] = (dt_tensor){b + 2 * i, 2 / n ? 2 / n : 1, DT_F32};
            for (int i = 0; i < 3; i++) u[i] = (dt_tensor){a + 2 * n * i, v[i].count * n, DT_F32};
            u[2].count += 1;
            AT2(dt_reduce_scatter_fused(u, v, 3, DT_SUM, c), "dt_reduce_scatter_fused", "divisible");
        }
#undef AT2
    }
    CHECK_ERRF(dt_allreduce_list_async(in, out, -1, DT_SUM, c, &w), INV, "dt_allreduce_list", K_N);
    CHECK_ERRF(dt_allreduce_list_async(in, out, 3, DT_SUM, c, NULL), INV, "dt_allreduce_list", "work|NULL");
    CHECK_ERRF(dt_allgather_list_async(in, out, 3, c, NULL), INV, "dt_allgather_list", "work|NULL");
    CHECK_ERRF(dt_reduce_scatter_fused_async(in, out, 3, DT_SUM, c, NULL), INV,
               "dt_reduce_scatter_fused", "work|NULL");

    {
        int untouched = 1;
        for (size_t k = 0; k < sizeof b; k++) untouched &= ((unsigned char *)b)[k] == 0x5a;
        CHECK(untouched, "%s: a rejected call wrote into a receive buffer", t->name);
    }
    /* valid edges: count 0 with NULL buffers moves nothing */
    CHECK_OK(dt_allreduce(NULL, NULL, 0, DT_F32, DT_SUM, c));
    CHECK_OK(dt_allgather(NULL, NULL, 0, DT_F64, c));
    CHECK_OK(dt_reduce_scatter(NULL, NULL, 0, DT_I8, DT_MAX, c));
    CHECK_OK(dt_reduce(NULL, NULL, 0, DT_F16, DT_SUM, root, c));
    CHECK_OK(dt_broadcast(NULL, NULL, 0, DT_BF16, root, c));
    CHECK_OK(dt_gather(NULL, NULL, 0, DT_U8, root, c));
    CHECK_OK(dt_scatter(NULL, NULL, 0, DT_I32, root, c));
    CHECK_OK(dt_all_to_all(NULL, NULL, 0, DT_I64, c));

    /* still in step: a real allreduce and a barrier */
    int32_t x = ME + 1, y = 0, want = 0;
    for (int m = 0; m < t->n; m++) want += t->mem[m] + 1;
    CHECK_OK(dt_allreduce(&x, &y, 1, DT_I32, DT_SUM, c));
    CHECK(y == want, "%s: allreduce after the errors gave %d, want %d", t->name, y, want);
    CHECK_OK(dt_barrier(c));
}

/* Tensor counts whose byte size overflows, in the list forms. Last, because a
 * missing check can crash the process. */
static void list_overflow(const tcomm *t) {
    dt_comm *c = t->comm;
    size_t n = (size_t)t->n;
    float a[64], b[64];
    const size_t huge = SIZE_MAX / 2 / n * n; /* divisible by n */
    dt_tensor in[2] = {{a, huge, DT_F32}, {a + 4, 2, DT_I32}};
    dt_tensor out[2] = {{b, huge, DT_F32}, {b + 4, 2, DT_I32}};
    CHECK_ERRF(dt_allreduce_list(in, out, 2, DT_SUM, c), INV, "dt_allreduce_list", K_COUNT);
    dt_work *w = NULL;
    CHECK_ERRF(dt_allreduce_list_async(in, out, 2, DT_SUM, c, &w), INV, "dt_allreduce_list", K_COUNT);
    out[0].count = huge / n;
    CHECK_ERRF(dt_reduce_scatter_fused(in, out, 2, DT_SUM, c), INV, "dt_reduce_scatter_fused", K_COUNT);
    /* two tensors that are fine alone but whose fused total overflows */
    dt_tensor in2[2] = {{a, (size_t)PTRDIFF_MAX / 8 + 1, DT_F32}, {a, (size_t)PTRDIFF_MAX / 8 + 1, DT_F32}};
    CHECK_ERRF(dt_allreduce_list(in2, in2, 2, DT_SUM, c), INV, "dt_allreduce_list", K_COUNT);
}

int main(void) {
    coll_init();
    tcomm tc[8];
    int nc = setup_comms(tc);
    /* NULL communicator: every function */
    float a[4] = {0}, b[4] = {0};
    dt_work *w = NULL;
    dt_tensor t1 = {a, 1, DT_F32}, t2 = {b, 1, DT_F32};
    CHECK_ERRF(dt_allreduce(a, b, 1, DT_F32, DT_SUM, NULL), INV, "dt_allreduce", K_COMM);
    CHECK_ERRF(dt_allgather(a, b, 1, DT_F32, NULL), INV, "dt_allgather", K_COMM);
    CHECK_ERRF(dt_reduce_scatter(a, b, 1, DT_F32, DT_SUM, NULL), INV, "dt_reduce_scatter", K_COMM);
    CHECK_ERRF(dt_reduce(a, b, 1, DT_F32, DT_SUM, 0, NULL), INV, "dt_reduce", K_COMM);
    CHECK_ERRF(dt_broadcast(a, b, 1, DT_F32, 0, NULL), INV, "dt_broadcast", K_COMM);
    CHECK_ERRF(dt_gather(a, b, 1, DT_F32, 0, NULL), INV, "dt_gather", K_COMM);
    CHECK_ERRF(dt_scatter(a, b, 1, DT_F32, 0, NULL), INV, "dt_scatter", K_COMM);
    CHECK_ERRF(dt_all_to_all(a, b, 1, DT_F32, NULL), INV, "dt_all_to_all", K_COMM);
    CHECK_ERRF(dt_send(a, 1, DT_F32, 0, NULL), INV, "dt_send", K_COMM);
    CHECK_ERRF(dt_recv(b, 1, DT_F32, 0, NULL), INV, "dt_recv", K_COMM);
    CHECK_ERRF(dt_barrier(NULL), INV, "dt_barrier", K_COMM);
    CHECK_ERRF(dt_allreduce_list(&t1, &t2, 1, DT_SUM, NULL), INV, "dt_allreduce_list", K_COMM);
    CHECK_ERRF(dt_allgather_list(&t1, &t2, 1, NULL), INV, "dt_allgather_list", K_COMM);
    CHECK_ERRF(dt_reduce_scatter_fused(&t1, &t2, 1, DT_SUM, NULL), INV, "dt_reduce_scatter_fused", K_COMM);
    CHECK_ERRF(dt_allreduce_async(a, b, 1, DT_F32, DT_SUM, NULL, &w), INV, "dt_allreduce", K_COMM);
    CHECK_ERRF(dt_barrier_async(NULL, &w), INV, "dt_barrier", K_COMM);
    CHECK_ERRF(dt_send_async(a, 1, DT_F32, 0, NULL, &w), INV, "dt_send", K_COMM);
    for (int c = 0; c < nc; c++) errors_on(&tc[c]);
    for (int c = 0; c < nc; c++) list_overflow(&tc[c]);
    CHECK_OK(dt_coll_sync());
    CHECK_OK(dt_finalize());
    /* after dt_finalize: DT_ERR_STATE */
    CHECK_ERRF(dt_coll_sync(), DT_ERR_STATE, "dt_coll_sync", "init|final");
    return dt_test_finish("coll_errors");
}
