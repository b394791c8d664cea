/* tests/fakegpu/emu/emu_tables.c - the twins' tables of the emulated
 * builds (fakegpu_*_emu): in place of twin_tables.c, every kernel of
 * src/nn/cuda, src/optim/cuda and src/transport/nccl runs as its own body
 * compiled for the host (emu_transform.sh, cuemu_twin.h), not as a twin. */
#include "fakegpu.h"

extern const fk_twin cuemu_table_elementwise[], cuemu_table_encoder[], cuemu_table_layernorm[], cuemu_table_reduce[],
    cuemu_table_attention[], cuemu_table_classifier[], cuemu_table_optim[], cuemu_table_wire[];

const fk_twin *const fk_twin_tables[] = {
    cuemu_table_elementwise, cuemu_table_encoder,    cuemu_table_layernorm, cuemu_table_reduce, cuemu_table_attention,
    cuemu_table_classifier,  cuemu_table_optim,      cuemu_table_wire,      NULL,
};

const char fk_device_name_suffix[] = " (emulated kernels)";
