#!/bin/sh
# tools/gpu/fetch_llmc.sh SRC [DIR] - llm.c's trainers' sources (train_gpt2.cu,
# the CPU train_gpt2.c, llmc/, its Makefile) from SRC, a clone or bare mirror
# of github.com/karpathy/llm.c, into DIR (default .gpu-llmc at the repository
# root, which git ignores; about 430 KB), for the GPU suite's GPT benchmark
# (bench/gpt_gpu.sh builds train_gpt2cu on the GPU machine) and
# bench/llmc_interop.sh (train_gpt2.c reads dtrain's --save-format llmc).
# Never committed: the benchmarks only run it beside dtrain.
set -eu
src=${1:?usage: fetch_llmc.sh LLMC_GIT_DIR [DIR]}
cd "$(dirname "$0")/../.."
dir=${2:-.gpu-llmc}
rm -rf "$dir" && mkdir -p "$dir"
git -C "$src" archive HEAD train_gpt2.cu train_gpt2.c llmc Makefile dev/unistd.h | tar -x -C "$dir"
echo "fetch_llmc: $(git -C "$src" log -1 --format='%h %cs %s' HEAD | cut -c1-80) -> $dir ($(du -sh "$dir" | cut -f1))"
