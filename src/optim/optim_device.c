/* src/optim/optim_device.c - the optimizer kernels for device memory in
 * this build (optim_kernels.h): CUDA's where dtrain's kernels were built. */
#include "core/error.h"
#include "optim/optim_kernels.h"

const dt_optim_kernels *dt_optim_kernels_device(void) {
#ifdef DTRAIN_HAVE_CUDA_KERNELS
    return &dt_optim_kernels_cuda;
#else
    DT_ERR(DT_ERR_UNSUPPORTED, "this build has no device kernels for the optimizer (configured with "
           "DTRAIN_WITH_CUDA=OFF, or without the CUDA toolkit found)");
    return NULL;
#endif
}
