#!/usr/bin/env bash
# bench/hf_transformers.sh - dtrain against Hugging Face transformers itself: its
# GPT-2 files read by --init-from (the same loss and greedy continuation), and
# dtrain's --save-format hf export loaded by GPT2LMHeadModel.from_pretrained (the
# same loss, continuation and logits). bench/hf_check.py says what is compared.
#
# Needs a virtual environment with torch and transformers from PyPI: created once
# as $BUILD/hf-venv (the CPU wheel index is tried first for torch; PyPI's plain
# wheel brings CUDA libraries, ~3-5 GB). `make test` never needs it
# (tests/train/gpt_hf_interop.py checks the same layouts with Debian's torch).
# Env: BUILD (build), VENV ($BUILD/hf-venv), PY (/usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}; VENV=${VENV:-$BUILD/hf-venv}; PY=${PY:-/usr/bin/python3}
TRAIN="$BUILD/bin/dtrain-train"
[ -x "$TRAIN" ] || { echo "hf_transformers.sh: $TRAIN is missing: make build first" >&2; exit 1; }
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
if ! "$VENV/bin/python" -c "import torch, transformers, safetensors, numpy" 2>/dev/null; then
  echo "# installing torch and transformers into $VENV (once)" >&2
  [ -x "$VENV/bin/python" ] || $PY -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet torch --index-url https://download.pytorch.org/whl/cpu 2>/dev/null ||
    "$VENV/bin/python" -m pip install --quiet torch
  "$VENV/bin/python" -m pip install --quiet transformers safetensors numpy
fi
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
"$VENV/bin/python" bench/hf_check.py "$TRAIN" "$TMP"
