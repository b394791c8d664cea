/* src/optim/optim_device.c - the optimizer's device kernels of this build
 * (optim_kernels.h): CUDA's where the build has CUDA, none otherwise. */
#include "core/error.h"
#include "optim/optim_kernels.h"

const dt_optim_kernels *dt_optim_kernels_device(void) {
#ifdef DTRAIN_HAVE_CUDA
    return &dt_optim_kernels_cuda;
#else
    dt_error(DT_ERR_UNSUPPORTED, __func__, "this build has no device kernels for the optimizer (built without CUDA)");
    return NULL;
#endif
}
