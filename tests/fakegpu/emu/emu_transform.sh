#!/bin/sh
# tests/fakegpu/emu/emu_transform.sh IN OUT [TABLE] - the host C++ copy of a
# kernel file of src/nn/cuda, src/optim/cuda or src/transport/nccl
# (cuemu.h): the launches' <<<...>>> removed (its launchers are compiled,
# never called); the names prefixed (emu_dtk_*, emu_gpt_cuda_*,
# emu_dt_optim_kernels_cuda, emu_dt_nccl_wire_*) and the file-scope
# __device__ functions made static, so that nothing clashes with the
# library's own objects; cuda_common.cuh's device helpers compiled for the
# host. With TABLE, the file's kernels are appended as the fake's twins
# (cuemu_twin.h) in the table TABLE. Source lines are kept (#line), so that
# messages and AddressSanitizer name the original lines.
set -eu
in=$1 out=$2 table=${3:-}
{
    printf '#line 1 "%s"\n' "$in"
    sed -e 's/<<<.*>>>//' \
        -e 's/\<dtk_/emu_dtk_/g' \
        -e 's/\<gpt_cuda_/emu_gpt_cuda_/g' \
        -e 's/\<dt_optim_kernels_cuda\>/emu_dt_optim_kernels_cuda/g' \
        -e 's/\<dt_nccl_wire_/emu_dt_nccl_wire_/g' \
        -e 's#"nn/cuda/cuda_common.cuh"#"emu_cuda_common.cuh"#' \
        -e 's/^#ifdef __CUDACC__$/#if 1/' \
        -e 's/^__device__ /static __device__ /' "$in"
    if [ -n "$table" ]; then
        echo '#include "cuemu_twin.h"'
        echo "extern \"C\" const fk_twin $table[] = {"
        grep -o '\<dtk_[A-Za-z0-9_]*(' "$in" | tr -d '(' | sort -u | while read -r k; do echo "    CUEMU_ENTRY($k)"; done
        echo '    {NULL, NULL},'
        echo '};'
    fi
} > "$out.tmp"
mv "$out.tmp" "$out"
