/* fault_mismatch: ranks that make mismatched calls get DT_ERR_MISMATCH on
 * EVERY rank of the group, never a hang, with a message naming the sequence
 * number, this rank's call and the ranks that differ; the communicator is
 * usable afterwards (a correct allreduce follows every case).
 *
 * In every case the LAST rank of the group deviates, so the differing rank the
 * message must name is size-1 (with 2 ranks the views tie and the reference is
 * rank 0's). Cases cover both check paths: small allreduces (fingerprint
 * travels with the data) and the separate check (large allreduces, every other
 * collective), list collectives, async work, sub-communicators (including the
 * same members reached through two communicators), point to point.
 * Prints "mismatch cases: tried N, caught N" (rank 0). Run with
 * DTRAIN_CHECK_COLLECTIVES unset. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include "testutil.h"

static int W, ME;
static int tried, caught;

#define BIG (1 << 20) /* elements: 4 MiB of f32, above the inline limit */
static float *A, *B;

/* 1 if every rank of c got `rc` (checked with a world-agreeing allreduce). */
static int all_got(dt_comm *c, int ok) {
    int32_t v = ok, r = 0;
    int rc = dt_allreduce(&v, &r, 1, DT_I32, DT_MIN, c);
    return rc == DT_OK && r == 1;
}

/* the group is still in step: a correct allreduce gives the right sum */
static void in_step(dt_comm *c, const char *what) {
    dt_comm_info ci;
    dt_comm_info_get(c, &ci);
    int64_t x = ci.world_rank + 1, y = 0, want = 0;
    for (int r = 0; r < ci.size; r++) want += dt_comm_world_rank_of(c, r) + 1;
    CHECK_OK(dt_allreduce(&x, &y, 1, DT_I64, DT_SUM, c));
    CHECK(y == want, "%s: allreduce after the mismatch gave %lld, want %lld", what, (long long)y, (long long)want);
}

/* Verify one mismatch outcome: status, message contents, same on all ranks. */
static void expect(dt_comm *c, int rc, const char *what, const char *fn, long long seq) {
    dt_comm_info ci;
    dt_comm_info_get(c, &ci);
    char buf[1100];
    snprintf(buf, sizeof buf, "%s", dt_last_error());
    char want_seq[64], want_diff[96];
    snprintf(want_seq, sizeof want_seq, "sequence number %lld", seq);
    snprintf(want_diff, sizeof want_diff, "differ from the most common call: %d;",
             dt_comm_world_rank_of(c, ci.size - 1));
    int ok = rc == DT_ERR_MISMATCH && strstr(buf, fn) && strstr(buf, want_diff) && strstr(buf, "this rank (world rank") &&
             (seq < 0 || strstr(buf, want_seq));
    CHECK(ok, "%s: got %s, message '%s' (want DT_ERR_MISMATCH, '%s', '%s', '%s')", what, dt_status_str(rc), buf, fn,
          want_diff, want_seq);
    tried++;
    int every = all_got(c, ok);
    CHECK(every, "%s: not every rank of the group saw the mismatch", what);
    caught += every;
    if (ME == 0 && getenv("FAULT_VERBOSE")) printf("[%s] %s\n", what, buf);
    in_step(c, what);
}

/* Collective-pair cases on communicator c (each rank of c calls; the last
 * rank of c deviates). seq0 = c's sequence number before the case. */
static void cases_on(dt_comm *c, const char *cname, long long *seq) {
    dt_comm_info ci;
    dt_comm_info_get(c, &ci);
    int odd = ci.rank == ci.size - 1;
    int root0 = dt_comm_world_rank_of(c, 0), root1 = dt_comm_world_rank_of(c, 1);
    char what[128];
    int rc;
    /* each case: 1 failing call (which does not count) + the all_got
     * allreduce + the in_step allreduce */
#define CASE(name, call_ok, call_odd, fn) do { \
        snprintf(what, sizeof what, "%s: %s", cname, name); \
        dt_clear_error(); \
        rc = odd ? (call_odd) : (call_ok); \
        expect(c, rc, what, fn, *seq + 1); \
        *seq += 2; } while (0)
    size_t n = 1024;
    CASE("op (small allreduce, sum vs max)", dt_allreduce(A, B, n, DT_F32, DT_SUM, c),
         dt_allreduce(A, B, n, DT_F32, DT_MAX, c), "dt_allreduce");
    CASE("op (large allreduce, sum vs avg)", dt_allreduce(A, B, BIG, DT_F32, DT_SUM, c),
         dt_allreduce(A, B, BIG, DT_F32, DT_AVG, c), "dt_allreduce");
    CASE("dtype (f32 vs i32)", dt_allreduce(A, B, n, DT_F32, DT_SUM, c),
         dt_allreduce(A, B, n, DT_I32, DT_SUM, c), "dt_allreduce");
    CASE("dtype (f32 vs f16: inline vs checked path)", dt_allreduce(A, B, n, DT_F32, DT_SUM, c),
         dt_allreduce(A, B, n, DT_F16, DT_SUM, c), "dt_allreduce");
    CASE("count (small: 1024 vs 1000)", dt_allreduce(A, B, n, DT_F32, DT_SUM, c),
         dt_allreduce(A, B, 1000, DT_F32, DT_SUM, c), "dt_allreduce");
    CASE("count (small vs large)", dt_allreduce(A, B, n, DT_F32, DT_SUM, c),
         dt_allreduce(A, B, BIG, DT_F32, DT_SUM, c), "dt_allreduce");
    CASE("count (large vs large+1)", dt_allreduce(A, B, BIG - 1, DT_F32, DT_SUM, c),
         dt_allreduce(A, B, BIG, DT_F32, DT_SUM, c), "dt_allreduce");
    CASE("count (0 vs 1)", dt_allreduce(A, B, 0, DT_F32, DT_SUM, c),
         dt_allreduce(A, B, 1, DT_F32, DT_SUM, c), "dt_allreduce");
    CASE("root (broadcast)", dt_broadcast(A, A, n, DT_F32, root0, c),
         dt_broadcast(A, A, n, DT_F32, root1, c), "dt_broadcast");
    CASE("root (reduce)", dt_reduce(A, B, n, DT_F32, DT_SUM, root0, c),
         dt_reduce(A, B, n, DT_F32, DT_SUM, root1, c), "dt_reduce");
    CASE("kind (allreduce vs broadcast)", dt_allreduce(A, B, n, DT_F32, DT_SUM, c),
         dt_broadcast(A, A, n, DT_F32, root0, c), "dt_");
    CASE("kind (barrier vs allreduce)", dt_barrier(c), dt_allreduce(A, B, n, DT_F32, DT_SUM, c), "dt_");
    CASE("kind (allgather vs all_to_all)", dt_allgather(A, B, 16, DT_F32, c),
         dt_all_to_all(A, B, 16, DT_F32, c), "dt_");
    CASE("reduce_scatter op", dt_reduce_scatter(A, B, 64 * (size_t)ci.size, DT_F32, DT_SUM, c),
         dt_reduce_scatter(A, B, 64 * (size_t)ci.size, DT_F32, DT_MIN, c), "dt_reduce_scatter");
    {
        dt_tensor in1[2] = {{A, 100, DT_F32}, {A + 128, 10, DT_I32}};
        dt_tensor in2[2] = {{A + 128, 10, DT_I32}, {A, 100, DT_F32}}; /* same tensors, other order */
        CASE("list order", dt_allreduce_list(in1, in1, 2, DT_SUM, c), dt_allreduce_list(in2, in2, 2, DT_SUM, c),
             "dt_allreduce_list");
    }
    {   /* async: the mismatch comes back from dt_work_wait */
        dt_work *w = NULL;
        snprintf(what, sizeof what, "%s: async allreduce (count)", cname);
        dt_clear_error();
        rc = dt_allreduce_async(A, B, odd ? 512 : 256, DT_F32, DT_SUM, c, &w);
        if (rc == DT_OK) rc = dt_work_wait(w);
        dt_work_free(w);
        expect(c, rc, what, "allreduce", *seq + 1);
        *seq += 2;
    }
    {   /* order: the deviating rank swaps two collectives; both calls fail */
        snprintf(what, sizeof what, "%s: order (allreduce, broadcast swapped)", cname);
        dt_clear_error();
        rc = odd ? dt_broadcast(A, A, n, DT_F32, root0, c) : dt_allreduce(A, B, n, DT_F32, DT_SUM, c);
        char first[1100];
        snprintf(first, sizeof first, "%s", dt_last_error());
        int rc2 = odd ? dt_allreduce(A, B, n, DT_F32, DT_SUM, c) : dt_broadcast(A, A, n, DT_F32, root0, c);
        char want_seq[64];
        snprintf(want_seq, sizeof want_seq, "sequence number %lld", *seq + 1);
        CHECK(rc == DT_ERR_MISMATCH && strstr(first, want_seq), "%s: first call %s '%s'", what, dt_status_str(rc), first);
        expect(c, rc2, what, "dt_", *seq + 1);
        *seq += 2;
    }
#undef CASE
}

int main(void) {
    CHECK_OK(dt_init());
    dt_comm *world = dt_comm_world();
    W = dt_comm_size(world);
    ME = dt_comm_rank(world);
    dt_test_rank = ME;
    A = calloc(BIG + 256, sizeof(float));
    B = calloc((size_t)(BIG + 256) * (size_t)(W > 1 ? W : 1), sizeof(float));
    if (!A || !B) return 1;
    if (W < 2) {
        printf("fault_mismatch: needs at least 2 ranks: skipped (exit 77)\n");
        dt_finalize();
        free(A);
        free(B);
        return 77;
    }
    CHECK(dt_check_collectives_enabled() == 1, "the check should be on by default");
    long long seq = 0;
    cases_on(world, "world", &seq);

    /* sub-communicator pairs [[0,1],[2,3]] (4 ranks) */
    if (W >= 4) {
        dt_comm *pairs;
        CHECK_OK(dt_comm_from_rank_list_str("[[0,1],[2,3]]", &pairs));
        long long s2 = 0;
        cases_on(pairs, "pairs", &s2);
        /* different communicator with the same members: [[0,1]] vs [[0,1],[2,3]];
         * ranks 2,3 use the pair communicator correctly meanwhile */
        dt_comm *p01;
        CHECK_OK(dt_comm_from_rank_list_str("[[0,1]]", &p01));
        float x[4] = {1, 2, 3, 4}, y[4];
        int rc;
        dt_clear_error();
        if (ME == 0) rc = dt_allreduce(x, y, 4, DT_F32, DT_SUM, pairs);
        else if (ME == 1) rc = dt_allreduce(x, y, 4, DT_F32, DT_SUM, p01);
        else rc = dt_allreduce(x, y, 4, DT_F32, DT_SUM, pairs);
        if (ME < 2) {
            const char *m = dt_last_error();
            int ok = rc == DT_ERR_MISMATCH && strstr(m, "[[0,1]] group 0") && strstr(m, "[[0,1],[2,3]] group 0") &&
                     strstr(m, "differ from the most common call: 1;");
            CHECK(ok, "different comm (same members): %s '%s'", dt_status_str(rc), m);
            tried++;
            caught += ok;
            if (ME == 0 && getenv("FAULT_VERBOSE")) printf("[different comm] %s\n", m);
        } else {
            CHECK_OK(rc);
        }
        /* the mismatched call did not count: pairs is in step again */
        in_step(pairs, "pairs after the different-comm case");
        (void)p01;
    }

    /* point to point on the world: count mismatch, both sending */
    {
        int peer = ME == 0 ? 1 : 0;
        int rc;
        if (ME < 2) {
            dt_clear_error();
            rc = ME == 0 ? dt_send(A, 8, DT_F32, peer, world) : dt_recv(B, 16, DT_F32, peer, world);
            int ok = rc == DT_ERR_MISMATCH && strstr(dt_last_error(), "point-to-point mismatch") &&
                     strstr(dt_last_error(), ME == 0 ? "but rank 1 called recv(f32, count 16" : "but rank 0 called send(f32, count 8");
            CHECK(ok, "p2p count: %s '%s'", dt_status_str(rc), dt_last_error());
            tried++;
            caught += ok;
            if (ME == 0 && getenv("FAULT_VERBOSE")) printf("[p2p count] %s\n", dt_last_error());
            dt_clear_error();
            rc = dt_send(A, 8, DT_F32, peer, world); /* both send: would deadlock with large messages */
            ok = rc == DT_ERR_MISMATCH && strstr(dt_last_error(), "point-to-point mismatch");
            CHECK(ok, "p2p both send: %s '%s'", dt_status_str(rc), dt_last_error());
            tried++;
            caught += ok;
            if (ME == 0 && getenv("FAULT_VERBOSE")) printf("[p2p both send] %s\n", dt_last_error());
            /* and a correct exchange still works */
            float v[3] = {1.5f, 2.5f, (float)ME}, r[3] = {0};
            if (ME == 0) CHECK_OK(dt_send(v, 3, DT_F32, 1, world));
            else { CHECK_OK(dt_recv(r, 3, DT_F32, 0, world)); CHECK(r[1] == 2.5f && r[2] == 0.0f, "p2p data"); }
        }
    }
    CHECK_OK(dt_barrier(world));
    int64_t t[2] = {tried, caught};
    if (ME == 0) printf("fault_mismatch: mismatch cases: tried %lld, caught %lld (rank 0's count)\n",
                        (long long)t[0], (long long)t[1]);
    CHECK(tried == caught, "every mismatch must be caught");
    CHECK_OK(dt_finalize());
    free(A);
    free(B);
    return dt_test_finish("fault_mismatch");
}
