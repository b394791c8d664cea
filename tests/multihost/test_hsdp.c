/* mh_hsdp: hybrid sharding's communicators and memory across hosts, run by
 * tests/multihost under tools/multihost/dtrain-hosts at 2 hosts x 2 ranks
 * (world rank r on host r / 2: the harness places ranks by slot; the test's
 * model of the placement comes from OMPI_COMM_WORLD_LOCAL_SIZE, not from
 * the library).
 *  - dt_zero_hybrid_comms, which the ZeRO strategies use for shard_group
 *    host: the shard communicator (the one stage 3 gathers parameters on,
 *    reduces gradients and re-shares parameters on) holds exactly the ranks
 *    of this rank's host; the replica communicator (the only one gradients
 *    cross hosts on) one rank per host, each with this rank's local rank;
 *    cached (a second call returns the same); refused on a sub-communicator;
 *  - dt_zero_create refuses replicas whose members hold different shards
 *    (on every rank, no hang);
 *  - dt_zero over those communicators, stages 1-3, average 1, plain SGD
 *    (lr 1): one step moves every parameter by minus the mean over ALL
 *    ranks of their gradients (float64 reference, 1e-6), on both hosts
 *    (each gathers from its own host's ranks);
 *  - per-rank model state through the trainer (fp32 Adam, mlp) with
 *    shard_group host equals the ZeRO formulas with N = local_size (2), not
 *    the world size: stage 1 8P + 8P/L, stage 2 4P + 12P/L, stage 3 16P/L
 *    (within 5%; the accounting of dtrain/mem.h); at shard_group world the
 *    same with N = 4, so the two differ. */
#include <math.h>
#include <stdlib.h>
#include "core/mem.h"
#include "dtrain/mem.h"
#include "dtrain/model.h"
#include "dtrain/train.h"
#include "dtrain/zero.h"
#include "testutil.h"

#define ZP 1003 /* parameters: two segments, [0, 600) and [600, ZP) */

static float grad_of(int world_rank, size_t i) { return (float)((world_rank + 1) * 0.25 + (double)(i % 7) * 0.125); }

static void zero_step_mean(dt_comm *shard, dt_comm *rep, int stage, int me, int world) {
    float *params = malloc(sizeof(float) * ZP), *grads = calloc(ZP, sizeof(float)), *got = malloc(sizeof(float) * ZP);
    for (size_t i = 0; i < ZP; i++) params[i] = (float)(me * 1000 + (int)i); /* world rank 0's win */
    size_t off[2] = {0, 600}, cnt[2] = {600, ZP - 600};
    dt_zero_config zc;
    dt_zero_config_default(&zc);
    zc.stage = stage;
    zc.replicas = rep;
    zc.bucket_cap_bytes = 1024;
    dt_optim_config oc;
    dt_optim_config_default(&oc, DT_OPTIM_SGD);
    oc.momentum = 0;
    oc.lr = 1;
    dt_zero *z = NULL;
    CHECK_OK(dt_zero_create(shard, &zc, ZP, off, cnt, 2, params, stage == 1 ? grads : NULL, &oc, &z));
    if (!z) goto out;
    CHECK_OK(dt_zero_begin_step(z, 1));
    for (int s = 1; s >= 0; s--) {
        float *p, *g;
        CHECK_OK(dt_zero_pre_backward(z, s, &p, &g));
        for (size_t i = 0; g && i < cnt[s]; i++) g[i] = grad_of(me, off[s] + i);
        CHECK_OK(dt_zero_grad_ready(z, s));
        CHECK_OK(dt_zero_post_backward(z, s));
    }
    CHECK_OK(dt_zero_finish(z));
    CHECK_OK(dt_zero_step(z, 1.0f, 0, NULL));
    int root = dt_comm_world_rank_of(shard, 0); /* this host's first rank */
    CHECK_OK(dt_zero_gather_range(z, 0, ZP, me == root ? got : NULL, root));
    if (me == root) {
        double worst = 0;
        for (size_t i = 0; i < ZP; i++) {
            double mean = 0;
            for (int r = 0; r < world; r++) mean += grad_of(r, i);
            mean /= world;
            double want = (double)i - mean, d = fabs((double)got[i] - want) / fmax(1, fabs(want));
            if (d > worst) worst = d;
        }
        printf("mh_hsdp: dt_zero stage %d with replicas, gathered on world rank %d: largest relative error %.3g\n",
               stage, root, worst);
        CHECK(worst <= 1e-6, "stage %d: one SGD step is not minus the mean gradient over all ranks (%.3g)", stage, worst);
    }
    dt_zero_free(z);
out:
    free(params);
    free(grads);
    free(got);
}

static double model_state(dt_comm *w, int zero, int group, double *P) {
    dt_mem_reset();
    dt_train_options o;
    dt_train_options_default(&o);
    snprintf(o.model, sizeof o.model, "mlp");
    snprintf(o.optimizer, sizeof o.optimizer, "adam");
    o.epochs = 1;
    o.max_steps = 2;
    o.train_limit = 512;
    o.eval = 0;
    o.quiet = 1;
    o.comm = w;
    o.dist.zero_opt_level = zero;
    o.dist.shard_group = group;
    dt_trainer *t;
    int rc = dt_trainer_create(&o, &t);
    if (!rc) rc = dt_trainer_fit(t, NULL);
    CHECK_OK(rc);
    if (rc) return -1;
    *P = (double)dt_model_num_params(dt_trainer_model(t));
    double have = (double)(dt_mem_current(DT_MEM_PARAMS) + dt_mem_current(DT_MEM_GRADS) + dt_mem_current(DT_MEM_OPTIM));
    dt_trainer_free(t);
    return have;
}

int main(void) {
    CHECK_OK(dt_init());
    dt_comm *w = dt_comm_world();
    dt_comm_info ci;
    CHECK_OK(dt_comm_info_get(w, &ci));
    dt_test_rank = ci.world_rank;
    const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int S = ls ? atoi(ls) : 0;
    if (S < 1 || ci.size % S != 0 || ci.size / S < 2) {
        printf("mh_hsdp: needs several hosts with the same number of ranks (OMPI_COMM_WORLD_LOCAL_SIZE %s, %d ranks)\n",
               ls ? ls : "unset", ci.size);
        dt_finalize();
        return 77;
    }
    const int H = ci.size / S, me = ci.world_rank, my_host = me / S, my_local = me % S;

    dt_comm *shard = NULL, *rep = NULL, *s2 = NULL, *r2 = NULL;
    CHECK_OK(dt_zero_hybrid_comms(w, &shard, &rep));
    if (shard && rep) {
        dt_comm_info si, ri;
        CHECK_OK(dt_comm_info_get(shard, &si));
        CHECK_OK(dt_comm_info_get(rep, &ri));
        CHECK(si.size == S && si.local_size == S && si.rank == my_local, "shard comm: rank %d of %d (local size %d), "
              "want %d of %d", si.rank, si.size, si.local_size, my_local, S);
        for (int i = 0; i < si.size; i++) {
            int wr = dt_comm_world_rank_of(shard, i);
            CHECK(wr / S == my_host && dt_comm_host_of(shard, i) == my_host,
                  "shard comm member %d is world rank %d on host %d (library: %d), not this rank's host %d", i, wr,
                  wr / S, dt_comm_host_of(shard, i), my_host);
        }
        CHECK(ri.size == H && ri.local_size == 1 && ri.rank == my_host, "replica comm: rank %d of %d (local size %d), "
              "want %d of %d, 1 per host", ri.rank, ri.size, ri.local_size, my_host, H);
        for (int i = 0; i < ri.size; i++) {
            int wr = dt_comm_world_rank_of(rep, i);
            CHECK(wr / S == i && wr % S == my_local && dt_comm_host_of(rep, i) == i,
                  "replica comm member %d is world rank %d (host %d, local rank %d), want host %d local rank %d", i, wr,
                  wr / S, wr % S, i, my_local);
        }
        CHECK_OK(dt_zero_hybrid_comms(w, &s2, &r2));
        CHECK(s2 == shard && r2 == rep, "a second call returns the pool's communicators");
    }
    /* on a sub-communicator: refused before any collective */
    dt_comm *half = NULL;
    CHECK_OK(dt_comm_from_rank_list_str("[[0,1],[2,3]]", &half));
    CHECK_ERR(dt_zero_hybrid_comms(half, &s2, &r2), DT_ERR_INVALID, "needs the world communicator");
    CHECK(s2 == NULL && r2 == NULL, "outputs cleared on error");

    /* replicas that do not hold the same shard: comm [[0,1,2],[3]], replicas
     * [[0,3],[1],[2]] (world 0 is rank 0 of 3, world 3 rank 0 of 1) */
    if (ci.size == 4) {
        dt_comm *c = NULL, *r = NULL;
        CHECK_OK(dt_comm_from_rank_list_str("[[0,1,2],[3]]", &c));
        CHECK_OK(dt_comm_from_rank_list_str("[[0,3],[1],[2]]", &r));
        float params[8] = {0};
        size_t off = 0, cnt = 8;
        dt_zero_config zc;
        dt_zero_config_default(&zc);
        zc.stage = 2;
        zc.replicas = r;
        dt_optim_config oc;
        dt_optim_config_default(&oc, DT_OPTIM_SGD);
        dt_zero *z = NULL;
        CHECK_ERR(dt_zero_create(c, &zc, 8, &off, &cnt, 1, params, NULL, &oc, &z), DT_ERR_INVALID, "replicas");
        CHECK(z == NULL, "no zero on error");
    }

    for (int stage = 1; stage <= 3 && shard && rep; stage++) zero_step_mean(shard, rep, stage, me, ci.size);

    /* per-rank model state: N = the ranks of a host */
    for (int zero = 1; zero <= 3; zero++) {
        double P = 0, L = S, N = ci.size;
        double host = model_state(w, zero, DT_SHARD_HOST, &P), world = model_state(w, zero, DT_SHARD_WORLD, &P);
        double want = zero == 1 ? 8 * P + 8 * P / L : zero == 2 ? 4 * P + 12 * P / L : 16 * P / L;
        double want_w = zero == 1 ? 8 * P + 8 * P / N : zero == 2 ? 4 * P + 12 * P / N : 16 * P / N;
        if (me == 0)
            printf("mh_hsdp: stage %d, %d hosts x %d ranks: model state per rank %.0f B = %.3f P with shard_group host "
                   "(formula %.3f P), %.3f P with world (formula %.3f P)\n", zero, H, S, host, host / P, want / P,
                   world / P, want_w / P);
        CHECK(fabs(host - want) <= 0.05 * want, "stage %d host: %.0f B vs formula %.0f B", zero, host, want);
        CHECK(fabs(world - want_w) <= 0.05 * want_w, "stage %d world: %.0f B vs formula %.0f B", zero, world, want_w);
    }
    CHECK_OK(dt_finalize());
    return dt_test_finish("mh_hsdp");
}
