/* src/nn/model_cnn.c - "cnn": two conv blocks and two fully connected layers.
 * PyTorch equivalent (tests/reference/torch_models.py), c1/c2/h =
 * conv_channels1/conv_channels2/hidden3:
 *   conv1 = Conv2d(1, c1, 3, padding=1, bias=False); bn1 = BatchNorm2d(c1)
 *   conv2 = Conv2d(c1, c2, 3, padding=1, bias=False); bn2 = BatchNorm2d(c2)
 *   fc1 = Linear(c2*7*7, h); fc2 = Linear(h, 10); drop = Dropout(p)
 *   forward: x = max_pool2d(relu(bn1(conv1(x))), 2)
 *            x = max_pool2d(relu(bn2(conv2(x))), 2)
 *            fc2(drop(relu(fc1(flatten(x))))) */
#include "core/error.h"
#include "nn/seq_internal.h"

int dt_model_build_cnn(dt_model *m, const dt_model_config *cfg) {
    if (cfg->conv_channels1 <= 0 || cfg->conv_channels2 <= 0 || cfg->hidden3 <= 0)
        return dt_error(DT_ERR_INVALID, "dt_model_create",
                        "cnn sizes conv_channels1=%d conv_channels2=%d hidden3=%d must be > 0",
                        cfg->conv_channels1, cfg->conv_channels2, cfg->hidden3);
    int rc;
    if ((rc = dtm_add_conv2d(m, "conv1", cfg->conv_channels1, 3, 1, 1, 0))) return rc;
    if ((rc = dtm_add_batchnorm(m, "bn1"))) return rc;
    if ((rc = dtm_add_simple(m, DTL_RELU, "relu1"))) return rc;
    if ((rc = dtm_add_pool(m, DTL_MAXPOOL, "pool1", 2, 2))) return rc;
    if ((rc = dtm_add_conv2d(m, "conv2", cfg->conv_channels2, 3, 1, 1, 0))) return rc;
    if ((rc = dtm_add_batchnorm(m, "bn2"))) return rc;
    if ((rc = dtm_add_simple(m, DTL_RELU, "relu2"))) return rc;
    if ((rc = dtm_add_pool(m, DTL_MAXPOOL, "pool2", 2, 2))) return rc;
    if ((rc = dtm_add_simple(m, DTL_FLATTEN, "flatten"))) return rc;
    if ((rc = dtm_add_linear(m, "fc1", cfg->hidden3, 1))) return rc;
    if ((rc = dtm_add_simple(m, DTL_RELU, "relu3"))) return rc;
    if ((rc = dtm_add_dropout(m, "drop", cfg->dropout))) return rc;
    return dtm_add_linear(m, "fc2", DT_SEQ_CLASSES, 1);
}
