#!/usr/bin/env bash
# bench/llmc_interop.sh - dtrain's --save-format llmc read by llm.c itself: its
# CPU reference trainer, train_gpt2.c, built here from a carried source tree
# (LLMC, default .gpu-llmc: tools/gpu/fetch_llmc.sh; never committed).
#  1. dtrain trains a GPT (2 layers x 64, 4 heads, 64 positions, vocabulary 50257)
#     20 AdamW steps on llm.c token shards of a small Markov "text" written here,
#     and writes it with --save-format llmc (llm.c's float32 model file);
#  2. dtrain evaluates that file (--init-from FILE --max-steps 0) on the 4 windows
#     of a 257-token validation shard;
#  3. llm.c's train_gpt2 (which loads ./gpt2_124M.bin and
#     dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin, B = 4, T = 64)
#     loads the same file and prints its validation loss at step 0 over the same
#     4 windows (its val loader reads the shard's first B x T + 1 tokens, and
#     wraps to them for each of its 5 batches);
# the two losses agree within 1e-5 (relative). Exit 0 when they do, 77 when the
# source is missing. Env: BUILD (build), LLMC (.gpu-llmc), CC (cc).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build}; LLMC=${LLMC:-$ROOT/.gpu-llmc}; CC=${CC:-cc}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
TRAIN="$BUILD/bin/dtrain-train"
[ -x "$TRAIN" ] || { echo "llmc_interop.sh: $TRAIN is missing: make build first" >&2; exit 1; }
if [ ! -f "$LLMC/train_gpt2.c" ]; then
    echo "SKIPPED: no llm.c source with train_gpt2.c in $LLMC (tools/gpu/fetch_llmc.sh LLMC_GIT_DIR)"
    exit 77
fi
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
cp -r "$LLMC/train_gpt2.c" "$LLMC/llmc" "$W/"
"$CC" -O2 -fopenmp -w -o "$W/train_gpt2" "$W/train_gpt2.c" -lm
/usr/bin/python3 - "$W" <<'PYEOF'
import os, struct, sys, random
w = sys.argv[1]
random.seed(3)
vocab = random.sample(range(50257), 300)
nxt = [[random.randrange(300) for _ in range(3)] for _ in range(300)]
s, toks = 0, []
for _ in range(30000):
    s = nxt[s][random.randrange(3)]
    toks.append(vocab[s])
def shard(path, t):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(t), *([0] * 253)) + struct.pack("<%dH" % len(t), *t))
for d, val, train in (("dev/data/tinyshakespeare", "tiny_shakespeare_val.bin", "tiny_shakespeare_train.bin"),
                      ("dt", "x_val_000000.bin", "x_train_000001.bin")):
    shard(os.path.join(w, d, val), toks[:257])
    shard(os.path.join(w, d, train), toks[257:])
PYEOF
cd "$W"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
"$TRAIN" --model gpt --quiet --n-layer 2 --n-head 4 --n-embd 64 --block-size 64 --data dt --max-steps 20 \
    --batch-size 4 --optimizer adamw --lr 3e-3 --eval 0 --sample-length 0 --save-format llmc --save-model gpt2_124M.bin
"$TRAIN" --model gpt --quiet --init-from gpt2_124M.bin --data dt --max-steps 0 --test-limit 4 --batch-size 4 \
    --sample-length 0 --json eval.json
dt=$(sed -n 's/.*"type":"summary".*"test_loss":\([0-9.eE+-]*\).*/\1/p' eval.json | head -1)
[ -n "$dt" ] || dt=$(/usr/bin/python3 -c "import json; print([json.loads(l)['test_loss'] for l in open('eval.json') if '\"summary\"' in l][0])")
lc=$(timeout 300 ./train_gpt2 2>&1 | tee llmc.log | awk '/^val loss/ {print $3; exit}') || true
echo "llm.c $(grep -m1 '^num_parameters' llmc.log || echo '(no num_parameters line)'), header read as:" \
     "$(grep -E '^(max_seq_len|vocab_size|padded_vocab_size|num_layers|num_heads|channels):' llmc.log | tr '\n' ' ')"
if [ -z "$lc" ]; then
    echo "FAIL: llm.c printed no validation loss:"; tail -5 llmc.log; exit 1
fi
awk -v a="$dt" -v b="$lc" 'BEGIN {e = (a > b ? a - b : b - a) / b;
    printf "%s dtrain --save-format llmc, read by llm.c train_gpt2.c: validation loss %s (llm.c) vs %s (dtrain), rel err %.2e (tol 1e-5)\n",
        e <= 1e-5 ? "ok  " : "FAIL", b, a, e; exit e <= 1e-5 ? 0 : 1}'
