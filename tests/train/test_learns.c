/* Single-process training: mlp on a 2,000-image subset learns within seconds
 * (loss of the 4th epoch below 60% of the 1st, test accuracy above 70%), and
 * the same seed gives bit-identical results twice; a model no family trains
 * is refused. */
#include <math.h>
#include <stdlib.h>
#include "dtrain/model.h"
#include "dtrain/train.h"
#include "testutil.h"

static int run(int epochs, long max_steps, dt_train_result *r, float **params, size_t *n) {
    dt_train_options o;
    dt_train_options_default(&o);
    snprintf(o.model, sizeof o.model, "mlp");
    o.hidden1 = 256;
    o.hidden2 = 128;
    o.epochs = epochs;
    o.max_steps = max_steps;
    o.train_limit = 2000;
    o.test_limit = 2000;
    o.batch_size = 32;
    o.quiet = 1;
    o.seed = 7;
    dt_trainer *t;
    int rc = dt_trainer_create(&o, &t);
    if (rc) return rc;
    rc = dt_trainer_fit(t, r);
    if (!rc && params) {
        dt_model *m = dt_trainer_model(t);
        *n = dt_model_num_params(m);
        *params = malloc(*n * sizeof(float));
        memcpy(*params, dt_model_params(m), *n * sizeof(float));
    }
    dt_trainer_free(t);
    return rc;
}

int main(void) {
    CHECK_OK(dt_init());
    dt_train_result r1, r4, a, b;
    CHECK_OK(run(1, -1, &r1, NULL, NULL)); /* -1: no step limit */
    CHECK_OK(run(4, -1, &r4, NULL, NULL));
    printf("epoch-1 loss %.4f, epoch-4 loss %.4f, test acc %.3f\n", r1.last_loss, r4.last_loss, r4.test_acc);
    CHECK(r4.last_loss < 0.6 * r1.last_loss, "loss fell from %.4f to %.4f only", r1.last_loss, r4.last_loss);
    CHECK(r4.test_acc > 0.70, "test accuracy %.3f after 4 epochs on 2000 images", r4.test_acc);
    CHECK(r4.steps == 4 * (2000 / 32 + 1), "steps %ld", r4.steps);

    float *pa = NULL, *pb = NULL;
    size_t na = 0, nb = 0;
    CHECK_OK(run(1, 20, &a, &pa, &na));
    CHECK_OK(run(1, 20, &b, &pb, &nb));
    CHECK(a.steps == 20 && na == nb && pa && pb && memcmp(pa, pb, na * sizeof(float)) == 0,
          "same seed and flags must give bit-identical parameters");
    CHECK(a.last_loss == b.last_loss, "bit-identical losses %.9g vs %.9g", a.last_loss, b.last_loss);
    free(pa);
    free(pb);

    /* a model no family trains: refused, naming the ones there are */
    dt_train_options o;
    dt_train_options_default(&o);
    snprintf(o.model, sizeof o.model, "resnet");
    dt_trainer *t = NULL;
    CHECK_ERR(dt_trainer_create(&o, &t), DT_ERR_INVALID,
              "model 'resnet' is not one the trainer knows (mlp, lenet, cnn, gpt)");
    CHECK(t == NULL, "no trainer on failure");
    CHECK_OK(dt_finalize());
    return dt_test_finish("train_learns");
}
