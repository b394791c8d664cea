#!/bin/sh
# tools/gpu/fetch_llmc.sh SRC [DIR] - llm.c's CUDA trainer source (train_gpt2.cu,
# llmc/, its Makefile) from SRC, a clone or bare mirror of
# github.com/karpathy/llm.c, into DIR (default .gpu-llmc at the repository
# root, which git ignores; about 400 KB), for the GPU suite's GPT benchmark
# (bench/gpt_gpu.sh builds it on the GPU machine). Never committed: the
# benchmark only measures it beside dtrain.
set -eu
src=${1:?usage: fetch_llmc.sh LLMC_GIT_DIR [DIR]}
cd "$(dirname "$0")/../.."
dir=${2:-.gpu-llmc}
rm -rf "$dir" && mkdir -p "$dir"
git -C "$src" archive HEAD train_gpt2.cu llmc Makefile dev/unistd.h | tar -x -C "$dir"
echo "fetch_llmc: $(git -C "$src" log -1 --format='%h %cs %s' HEAD | cut -c1-80) -> $dir ($(du -sh "$dir" | cut -f1))"
