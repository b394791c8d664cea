/* tests/fakegpu/twin_tables.c - the twins' tables a kernel launch on the fake
 * searches (fakegpu.h), in order, NULL-terminated: one line per
 * tests/fakegpu/twin_*.c file. */
#include "fakegpu.h"

const fk_twin *const fk_twin_tables[] = {
    fk_twins_gpt,   /* twin_gpt.c: src/nn/cuda's kernels */
    fk_twins_optim, /* twin_optim.c: src/optim/cuda's kernels */
    fk_twins_wire,  /* twin_wire.c: src/transport/nccl's compressed wire kernels */
    NULL,
};

const char fk_device_name_suffix[] = "";
