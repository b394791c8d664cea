/* examples/dist_example.c - the smallest complete data-parallel training
 * program, in the spirit of RAF's scripts/distributed/dist_example.py, using
 * only the public API. Copy it and change what you need.
 *
 *   mpirun -np 4 build/bin/dist_example            (or without mpirun: 1 process)
 *
 * It sets the dist config the way the seed's raf_dist_config does, builds
 * LeNet, and trains it on Fashion-MNIST with gradients averaged across ranks.
 */
#include <stdio.h>
#include <dtrain/dtrain.h>
#include <dtrain/train.h>

int main(void) {
    if (dt_init() != DT_OK) {
        fprintf(stderr, "dt_init: %s\n", dt_last_error());
        return 1;
    }
    dt_comm_info me;
    dt_comm_info_get(dt_comm_world(), &me);

    dt_train_options o;
    dt_train_options_default(&o);
    /* raf_dist_config = {"enable_data_parallel": True, "zero_opt_level": 0} */
    dt_config_parse_json(&o.dist, "{\"enable_data_parallel\": true, \"zero_opt_level\": 0}");
    dt_config_from_env(&o.dist); /* DTRAIN_* variables override */
    snprintf(o.model, sizeof o.model, "lenet");
    o.epochs = 1;
    o.batch_size = 64;   /* per rank */
    o.lr = 0.1;

    dt_trainer *t = NULL;
    dt_train_result r;
    int rc = dt_trainer_create(&o, &t);
    if (rc == DT_OK) rc = dt_trainer_fit(t, &r);
    if (rc != DT_OK)
        fprintf(stderr, "rank %d: %s\n", me.rank, dt_last_error());
    else if (me.rank == 0)
        printf("rank %d of %d: test accuracy %.2f%% after %ld steps\n", me.rank, me.size,
               100 * r.test_acc, r.steps);
    dt_trainer_free(t);
    dt_finalize();
    return rc == DT_OK ? 0 : 1;
}
