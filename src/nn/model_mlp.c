/* src/nn/model_mlp.c - "mlp": 784 -> hidden1 -> hidden2 -> 10 with ReLU.
 * PyTorch equivalent (tests/reference/torch_models.py):
 *   fc1 = Linear(784, h1); fc2 = Linear(h1, h2); fc3 = Linear(h2, 10)
 *   forward: fc3(relu(fc2(relu(fc1(flatten(x)))))) */
#include "core/error.h"
#include "nn/seq_internal.h"

int dt_model_build_mlp(dt_model *m, const dt_model_config *cfg) {
    if (cfg->hidden1 <= 0 || cfg->hidden2 <= 0)
        return dt_error(DT_ERR_INVALID, "dt_model_create",
                        "mlp hidden sizes hidden1=%d hidden2=%d must be > 0", cfg->hidden1,
                        cfg->hidden2);
    int rc;
    if ((rc = dtm_add_simple(m, DTL_FLATTEN, "flatten"))) return rc;
    if ((rc = dtm_add_linear(m, "fc1", cfg->hidden1, 1))) return rc;
    if ((rc = dtm_add_simple(m, DTL_RELU, "relu1"))) return rc;
    if ((rc = dtm_add_linear(m, "fc2", cfg->hidden2, 1))) return rc;
    if ((rc = dtm_add_simple(m, DTL_RELU, "relu2"))) return rc;
    return dtm_add_linear(m, "fc3", DT_SEQ_CLASSES, 1);
}
