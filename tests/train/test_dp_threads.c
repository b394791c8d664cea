/* Data-parallel threads (issue 17 part 2, seed 004's DataParallel; train.h
 * "DP THREADS"). After 50 steps, N threads of one process give the same
 * parameters as 1 thread with the same batch (rel err <= 1e-5, max|a - b| /
 * max|b| over the whole vector), for mlp (SGD-momentum), lenet (batch norm:
 * statistics summed over the threads) and gpt-test (AdamW, warm-up + cosine,
 * clipping), N = 2 and 3 (3 splits 64 and 8 unevenly: the loss weighting);
 * with 2 accumulation micro-steps; two runs with 3 threads are bit-identical
 * (the fixed reduction order). On N ranks (mpirun): every rank with batch
 * B/N and 2 threads (threads within, DDP across; lenet with sync_bn) against
 * 1 rank, 1 thread, batch B. Refused: dp_threads 0, more threads than the
 * batch, --threads > 1, ZeRO > 0 (DT_ERR_INVALID, marked as input errors).
 * The 1-thread reference runs on every rank over a standalone communicator. */
#include <math.h>
#include <stdlib.h>
#include "dtrain/coll.h"
#include "dtrain/model.h"
#include "dtrain/train.h"
#include "testutil.h"

#define STEPS 50

typedef struct spec {
    const char *model;
    int batch, accum, threads, sync_bn, zero, blas;
} spec;

static void options(dt_train_options *o, dt_comm *comm, spec s) {
    dt_train_options_default(o);
    snprintf(o->model, sizeof o->model, "%s", s.model);
    if (!strcmp(s.model, "gpt")) {
        snprintf(o->preset, sizeof o->preset, "gpt-test");
        snprintf(o->optimizer, sizeof o->optimizer, "adamw");
        snprintf(o->schedule, sizeof o->schedule, "cosine");
        o->lr = 1e-3;
        o->weight_decay = 0.1;
        o->warmup_steps = 3;
        o->clip_grad_norm = 1.0;
        o->sample_length = 0;
        o->dist.bucket_size_mb = 0.1;
        o->dist.first_bucket_mb = 0.02;
    } else {
        if (!strcmp(s.model, "mlp")) { o->hidden1 = 128; o->hidden2 = 64; }
        o->lr = 0.05;
        o->train_limit = 64L * STEPS;
    }
    o->batch_size = s.batch / s.accum;
    o->accum_steps = s.accum;
    o->dp_threads = s.threads;
    o->threads = s.blas ? s.blas : 1;
    o->epochs = 1;
    o->max_steps = STEPS;
    o->eval = 0;
    o->quiet = 1;
    o->seed = 3;
    o->comm = comm;
    o->dist.sync_bn = s.sync_bn;
    o->dist.zero_opt_level = s.zero;
}

/* The parameters after training, on every rank of comm (NULL on failure). */
static float *train(dt_comm *comm, spec s, size_t *n) {
    dt_train_options o;
    options(&o, comm, s);
    dt_trainer *t;
    int rc = dt_trainer_create(&o, &t);
    dt_train_result res;
    if (!rc) rc = dt_trainer_fit(t, &res);
    float *p = NULL;
    if (!rc) {
        CHECK(res.steps == STEPS, "%s: %ld steps", s.model, res.steps);
        CHECK(isfinite(res.last_loss), "%s: loss %g", s.model, res.last_loss);
        *n = dt_model_num_params(dt_trainer_model(t));
        p = malloc(*n * sizeof(float));
        int root = dt_comm_world_rank_of(comm, 0);
        rc = dt_trainer_gather_params(t, p, root);
        if (!rc) rc = dt_broadcast(p, p, *n, DT_F32, root, comm);
    }
    if (rc) {
        CHECK_OK(rc);
        free(p);
        p = NULL;
    }
    dt_trainer_free(t);
    return p;
}

static void compare(const char *what, const float *a, const float *ref, size_t na, size_t nr, int rank) {
    if (!a || !ref) return;
    double e = na == nr ? dt_test_rel_err(a, ref, nr) : INFINITY;
    if (rank == 0) printf("%s: rel err %.3g\n", what, e);
    CHECK(na == nr && e <= 1e-5, "%s: rel err %.3g > 1e-5", what, e);
}

/* a refused combination: DT_ERR_INVALID, marked as an input error, naming `needle` */
static void refused(spec s, const char *needle) {
    dt_train_options o;
    options(&o, dt_test_solo_comm(), s);
    dt_trainer *t = NULL;
    int rc = dt_trainer_create(&o, &t);
    CHECK(rc == DT_ERR_INVALID, "%s dp_threads %d batch %d threads %d zero %d: rc %d", s.model, s.threads, s.batch,
          s.blas, s.zero, rc);
    CHECK(dt_trainer_usage_error() == 1, "not marked as an input error");
    CHECK(dt_test_msg_has(needle), "message '%s' lacks '%s'", dt_last_error(), needle);
    if (!rc) dt_trainer_free(t);
}

int main(void) {
    CHECK_OK(dt_init());
    dt_comm *w = dt_comm_world(), *solo = dt_test_solo_comm();
    const int N = dt_comm_size(w), rank = dt_comm_rank(w);
    dt_test_rank = rank;
    char what[160];

    const spec models[] = {{"mlp", 64, 1, 1, 0, 0, 0}, {"lenet", 64, 1, 1, 0, 0, 0}, {"gpt", 8, 1, 1, 0, 0, 0}};
    for (int c = 0; c < 3; c++) {
        spec s = models[c];
        size_t n1 = 0, nt = 0;
        float *ref = train(solo, s, &n1);
        if (N == 1) {
            /* threads of one process against one thread */
            for (int th = 2; th <= 3; th++) {
                spec st = s;
                st.threads = th;
                float *p = train(solo, st, &nt);
                snprintf(what, sizeof what, "%s: %d threads vs 1, batch %d, %d steps", s.model, th, s.batch, STEPS);
                compare(what, p, ref, nt, n1, rank);
                free(p);
            }
        } else {
            /* N ranks x 2 threads, batch B/N per rank (DDP across the ranks) */
            spec sd = s;
            sd.batch = s.batch / N;
            sd.threads = 2;
            sd.sync_bn = !strcmp(s.model, "lenet");
            float *p = train(w, sd, &nt);
            snprintf(what, sizeof what, "%s: %d ranks x 2 threads x batch %d vs 1 x 1 x %d, %d steps", s.model, N,
                     sd.batch, s.batch, STEPS);
            compare(what, p, ref, nt, n1, rank);
            free(p);
        }
        free(ref);
    }

    if (N == 1) {
        /* accumulation: 2 micro-steps of 32 on 3 threads (11, 11, 10) */
        size_t n1 = 0, nt = 0;
        float *ref = train(solo, (spec){"mlp", 64, 2, 1, 0, 0, 0}, &n1);
        float *p = train(solo, (spec){"mlp", 64, 2, 3, 0, 0, 0}, &nt);
        compare("mlp: 2 micro-steps of 32 on 3 threads vs 1 thread", p, ref, nt, n1, rank);
        free(p);
        /* reproducible: the reduction order does not depend on the scheduling */
        float *q = train(solo, (spec){"mlp", 64, 2, 3, 0, 0, 0}, &nt);
        float *q2 = train(solo, (spec){"mlp", 64, 2, 3, 0, 0, 0}, &n1);
        CHECK(q && q2 && nt == n1 && memcmp(q, q2, nt * sizeof(float)) == 0, "two runs with 3 threads differ");
        free(q);
        free(q2);
        free(ref);

        refused((spec){"mlp", 64, 1, 0, 0, 0, 0}, "must be >= 1");
        refused((spec){"mlp", 4, 1, 5, 0, 0, 0}, "more than --batch-size 4");
        refused((spec){"mlp", 64, 1, 2, 0, 0, 2}, "--threads 2");
        refused((spec){"mlp", 64, 1, 2, 0, 1, 0}, "zero_opt_level 1");
    }
    CHECK_OK(dt_finalize());
    return dt_test_finish("train_dp_threads");
}
