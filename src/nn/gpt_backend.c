/* src/nn/gpt_backend.c - the table of the gpt family's kernel backends
 * (gpt_backend.h). A new backend is its own folder defining a gpt_backend
 * plus one entry here. */
#include <string.h>
#include "core/error.h"
#include "nn/gpt_backend.h"

static const gpt_backend *const k_backends[] = {
    &gpt_backend_cpu,
#ifdef DTRAIN_HAVE_CUDA
    &gpt_backend_cuda,
#endif
};

const gpt_backend *gpt_backend_find(const char *name) {
    for (size_t i = 0; i < sizeof k_backends / sizeof k_backends[0]; i++)
        if (strcmp(k_backends[i]->name, name) == 0) return k_backends[i];
#ifdef DTRAIN_HAVE_CUDA
    DT_ERR(DT_ERR_UNSUPPORTED, "the gpt family has no '%s' backend (this build has: cpu, cuda)", name);
#else
    DT_ERR(DT_ERR_UNSUPPORTED, "the gpt family has no '%s' backend: this build has cpu only (configured with "
           "DTRAIN_WITH_CUDA=OFF, or without the CUDA toolkit and NCCL found)", name);
#endif
    return NULL;
}
