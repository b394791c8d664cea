/* ZeRO stages 2 and 3 with compressed gradients (dt_zero_config.wire bf16 /
 * f16, the trainer's grad_comm_dtype): one step over three segments of odd
 * sizes (pieces below the shared-memory window's threshold, so every reduce
 * to an owner travels compressed, coll.h's flat path), per-rank gradients
 * with mixed signs and scales:
 *   - each rank's gradient shard (the sum over the ranks) within coll.h's
 *     reduce bound ((1+u)^(L+1) - 1 + P 2^-23) * sum_r |x_r| of a float64
 *     reference, every element a value of the wire type (the root's result
 *     is rounded), and at 2+ ranks some element off by more than f32's own
 *     rounding (the wire is used);
 *   - after an SGD step (lr 1, no momentum, from zero parameters) each
 *     rank's slice is exactly -shard / P; stage 2: the full parameter vector
 *     the same bits on every rank; stage 3: the gathered vector equals the
 *     owners' slices;
 *   - an unknown wire: DT_ERR_INVALID from dt_zero_create.
 * With the argument "host": hybrid sharding (dt_zero_hybrid_comms: sharded
 * over each host's ranks, the shard allreduced across the hosts with the
 * wire too). The shard after the backward is then the host's sum (the bound
 * over the host's ranks); after the step each parameter is -(sum over every
 * rank) / (ranks) within the composed bound (1+e_host)(1+e_across) - 1, and
 * (more than one host) a value of the wire type times that scale: the
 * allreduce across hosts rounds. On one host there is one replica (the
 * world's code path); tests/multihost runs it on 2 hosts x 2 ranks. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "dtrain/dtrain.h"
#include "dtrain/zero.h"
#include "testutil.h"

#define NSEG 3
static const size_t g_cnt[NSEG] = {1001, 3, 3999}; /* every owner piece < 16 KiB */

static float grad_val(int rank, int s, size_t i) { /* mixed signs and scales */
    uint32_t h = (uint32_t)(rank * 7919 + s * 104729) ^ (uint32_t)(i * 2654435761u);
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    float m = ((float)(h % 20001) - 10000.0f) / 997.0f;
    return ldexpf(m, (int)(h >> 28) % 8 - 4);
}

static float rnd(float x, int wire) {
    return wire == DT_WIRE_BF16 ? dt_bf16_to_f32(dt_f32_to_bf16(x)) : dt_f16_to_f32(dt_f32_to_f16(x));
}

/* ((1+u)^(L+1) - 1 + n 2^-23): coll.h's reduce / allreduce bound over n ranks */
static double bound(int n, double u) {
    int L = 0;
    while ((1 << L) < n) L++;
    return pow(1 + u, L + 1) - 1 + n * 0x1p-23;
}

/* w: the shard communicator (the world, or this host's ranks); rep: the
 * replicas (NULL: none); N: world size, rank: world rank. */
static void one(dt_comm *w, dt_comm *rep, int stage, int wire, int rank, int N) {
    const char *wn = wire == DT_WIRE_BF16 ? "bf16" : "f16";
    int n = dt_comm_size(w), R = rep ? dt_comm_size(rep) : 1;
    size_t off[NSEG], P = 0;
    for (int s = 0; s < NSEG; s++) { off[s] = P; P += g_cnt[s]; }
    float *params = calloc(P, sizeof(float));
    dt_zero_config zc;
    dt_zero_config_default(&zc);
    zc.stage = stage;
    zc.wire = wire;
    zc.replicas = rep;
    dt_optim_config oc;
    CHECK_OK(dt_optim_config_default(&oc, DT_OPTIM_SGD));
    dt_zero *z = NULL;
    CHECK_OK(dt_zero_create(w, &zc, P, off, g_cnt, NSEG, params, NULL, &oc, &z));
    if (!z) { free(params); return; }
    CHECK_OK(dt_zero_begin_step(z, 1));
    for (int s = 0; s < NSEG; s++) {
        float *p;
        CHECK_OK(dt_zero_pre_forward(z, s, &p));
        CHECK_OK(dt_zero_post_forward(z, s));
    }
    for (int s = NSEG - 1; s >= 0; s--) {
        float *p, *g;
        CHECK_OK(dt_zero_pre_backward(z, s, &p, &g));
        for (size_t i = 0; g && i < g_cnt[s]; i++) g[i] = grad_val(rank, s, i);
        CHECK_OK(dt_zero_grad_ready(z, s));
        CHECK_OK(dt_zero_post_backward(z, s));
    }
    CHECK_OK(dt_zero_finish(z));

    /* the gradient shard: the sum over the ranks, compressed */
    size_t lo, hi;
    CHECK_OK(dt_zero_shard(z, &lo, &hi));
    const float *gs = dt_zero_grad_shard(z);
    float *gsave = malloc(sizeof(float) * (hi - lo + 1));
    memcpy(gsave, gs, sizeof(float) * (hi - lo));
    double u = wire == DT_WIRE_BF16 ? 0x1p-8 : 0x1p-11;
    double rel = bound(n, u), worst = 0;
    int hr[64], nh = 0; /* the world ranks of this shard group (their sum is the shard) */
    for (int r = 0; r < n && r < 64; r++) hr[nh++] = dt_comm_world_rank_of(w, r);
    size_t over = 0, unrounded = 0;
    for (size_t k = lo; k < hi; k++) {
        int s = 0;
        while (k >= off[s] + g_cnt[s]) s++;
        double exact = 0, mag = 0;
        for (int r = 0; r < nh; r++) { exact += grad_val(hr[r], s, k - off[s]); mag += fabs(grad_val(hr[r], s, k - off[s])); }
        double err = fabs(gsave[k - lo] - exact);
        if (!(err <= rel * mag)) over++;
        if (mag > 0 && err / mag > worst) worst = err / mag;
        if (n > 1 && rnd(gsave[k - lo], wire) != gsave[k - lo]) unrounded++;
    }
    CHECK(over == 0, "stage %d wire %s: %zu gradient sums beyond the bound %.3g * sum|x| (worst %.3g)", stage, wn, over,
          rel, worst);
    CHECK(unrounded == 0, "stage %d wire %s: %zu gradient sums are not %s values (the owner's sum is rounded)", stage,
          wn, unrounded, wn);
    double wmax = worst;
    CHECK_OK(dt_allreduce(&wmax, &wmax, 1, DT_F64, DT_MAX, w));
    if (n > 1)
        CHECK(wmax > 8 * n * 0x1p-23, "stage %d wire %s: every sum within f32 rounding (worst %.3g): not compressed?",
              stage, wn, wmax);
    if (rank == 0)
        printf("zero stage %d wire %s at %d ranks%s: worst gradient-sum error %.3g of sum|x| (bound %.3g)\n", stage, wn,
               n, rep ? " (per host)" : "", wmax, rel);

    /* SGD, lr 1, from zero: each slice is -sum / N (average on) */
    CHECK_OK(dt_zero_step(z, 1.0f, 0, NULL));
    const float *ps = dt_zero_param_shard(z);
    size_t wrong = 0;
    if (R == 1) { /* exactly the shard's sum, scaled */
        for (size_t k = 0; k < hi - lo; k++) {
            float want = 0.0f - gsave[k] * (1.0f / (float)n); /* +0 for a zero sum, as SGD's p - lr * g */
            wrong += memcmp(&want, &ps[k], 4) != 0;
        }
        CHECK(wrong == 0, "stage %d wire %s: %zu parameters of the slice are not -sum/%d", stage, wn, wrong, n);
    } else { /* the hosts' sums allreduced with the wire: the composed bound, rounded */
        double relw = (1 + rel) * (1 + bound(R, u)) - 1;
        size_t unr = 0;
        for (size_t k = lo; k < hi; k++) {
            int s = 0;
            while (k >= off[s] + g_cnt[s]) s++;
            double exact = 0, mag = 0;
            for (int r = 0; r < N; r++) { exact += grad_val(r, s, k - off[s]); mag += fabs(grad_val(r, s, k - off[s])); }
            double got = -(double)ps[k - lo] * N;
            wrong += !(fabs(got - exact) <= relw * mag);
            float g = ps[k - lo] * (float)N;
            unr += rnd(g, wire) != g;
        }
        CHECK(wrong == 0, "stage %d wire %s, %d hosts: %zu parameters beyond the bound %.3g of -sum/%d", stage, wn, R,
              wrong, relw, N);
        CHECK(unr == 0, "stage %d wire %s, %d hosts: %zu parameters are not %s sums / %d (the allreduce across hosts "
              "rounds)", stage, wn, R, unr, wn, N);
    }
    float *all = malloc(sizeof(float) * P);
    int root0 = dt_comm_world_rank_of(w, 0);
    if (stage == 2) { /* every rank's full vector: the same bits (over the world) */
        CHECK_OK(dt_zero_gather_range(z, 0, P, all, rank));
        CHECK(dt_test_same_bits(all, P * sizeof *all, dt_comm_world()) == 1,
              "stage 2 wire %s: the parameters differ across ranks (or %s)", wn, dt_last_error());
    } else { /* the gathered vector holds each owner's slice */
        CHECK_OK(dt_zero_gather_range(z, 0, P, dt_comm_rank(w) == 0 ? all : NULL, root0));
        CHECK_OK(dt_broadcast(all, all, P, DT_F32, root0, w));
    }
    CHECK(memcmp(all + lo, ps, sizeof(float) * (hi - lo)) == 0, "stage %d wire %s: the full vector differs from the "
          "owner's slice", stage, wn);
    if (over == 0 && unrounded == 0 && wrong == 0) dt_test_passed++;
    free(all);
    free(gsave);
    dt_zero_free(z);
    free(params);
}

int main(int argc, char **argv) {
    CHECK_OK(dt_init());
    dt_comm *w = dt_comm_world();
    int n = dt_comm_size(w), rank = dt_comm_rank(w);
    dt_test_rank = rank;
    dt_comm *shard = w, *rep = NULL;
    if (argc > 1 && !strcmp(argv[1], "host")) CHECK_OK(dt_zero_hybrid_comms(w, &shard, &rep));
    for (int stage = 2; stage <= 3; stage++)
        for (int wire = DT_WIRE_BF16; wire <= DT_WIRE_F16; wire++) one(shard ? shard : w, rep, stage, wire, rank, n);
    /* an unknown wire type */
    size_t off[1] = {0}, cnt[1] = {8};
    float p[8] = {0};
    dt_zero_config zc;
    dt_zero_config_default(&zc);
    zc.stage = 2;
    zc.wire = 7;
    dt_optim_config oc;
    CHECK_OK(dt_optim_config_default(&oc, DT_OPTIM_SGD));
    dt_zero *z = (dt_zero *)&zc;
    CHECK_ERR(dt_zero_create(w, &zc, 8, off, cnt, 1, p, NULL, &oc, &z), DT_ERR_INVALID, "unknown gradient wire type 7");
    CHECK(z == NULL, "a refused dt_zero_create leaves *out NULL");
    CHECK_OK(dt_finalize());
    return dt_test_finish("parallel_zero_wire");
}
