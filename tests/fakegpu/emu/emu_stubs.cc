/* tests/fakegpu/emu/emu_stubs.cc - the host copies' launchers are compiled,
 * never called (the library's own launchers run, and reach the emulated
 * kernels through the fake's launches): what the attention's launchers
 * would call in cuda_matmul.cu, which has no kernel and so no host copy. */
#include <stdlib.h>
#include "emu_cuda_common.cuh"

int emu_gpt_cuda_lt(gpt_be *be, const char *what, const gpt_lt_mm *mm) { abort(); }
void emu_gpt_cuda_lt_release(gpt_be *be) { abort(); }
