/* src/nn/model_lenet.c - "lenet", the model of RAF's dist_example (with a
 * 1-channel input). PyTorch equivalent (tests/reference/torch_models.py):
 *   conv1 = Conv2d(1, 6, 5, padding=2, bias=False); bn1 = BatchNorm2d(6)
 *   linear1 = Linear(14*14*6, 10)
 *   forward: linear1(flatten(avg_pool2d(sigmoid(bn1(conv1(x))), 2, 2))) */
#include "core/error.h"
#include "nn/seq_internal.h"

int dt_model_build_lenet(dt_model *m, const dt_model_config *cfg) {
    (void)cfg;
    int rc;
    if ((rc = dtm_add_conv2d(m, "conv1", 6, 5, 1, 2, 0))) return rc;
    if ((rc = dtm_add_batchnorm(m, "bn1"))) return rc;
    if ((rc = dtm_add_simple(m, DTL_SIGMOID, "sigmoid"))) return rc;
    if ((rc = dtm_add_pool(m, DTL_AVGPOOL, "pool", 2, 2))) return rc;
    if ((rc = dtm_add_simple(m, DTL_FLATTEN, "flatten"))) return rc;
    return dtm_add_linear(m, "linear1", DT_SEQ_CLASSES, 1);
}
