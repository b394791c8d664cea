#!/bin/sh
# bench/tensorboard_check.sh - reads what `dtrain-train --tensorboard DIR`
# writes with TensorBoard's own reader (EventAccumulator), from PyPI's
# tensorboard in a venv of its own (build/tb-venv; never needed by make test,
# whose train_tensorboard test reads the file with tests/train/tfevents_reader.py).
# Checks: the run is found, every --json number of the step/eval/epoch records
# is a scalar at its step (float32), the memory curves are there.
#   bench/tensorboard_check.sh           (BUILD=build, VENV=BUILD/tb-venv, NP=2)
#   INSTALL=0: do not pip-install; exit 77 if the venv has no tensorboard
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build} NP=${NP:-2} INSTALL=${INSTALL:-1}
VENV=${VENV:-$BUILD/tb-venv}
if ! "$VENV/bin/python" -c 'import tensorboard' 2>/dev/null; then
    if [ "$INSTALL" = 0 ]; then echo "skipped: no tensorboard in $VENV (run bench/tensorboard_check.sh once)"; exit 77; fi
    /usr/bin/python3 -m venv "$VENV" && "$VENV/bin/pip" install -q tensorboard || { echo "cannot install tensorboard into $VENV"; exit 1; }
fi
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
LAUNCH=""; command -v mpirun >/dev/null && LAUNCH="mpirun --oversubscribe -np $NP"
$LAUNCH "$BUILD/bin/dtrain-train" --model gpt --preset gpt-test --batch-size 4 --max-steps 6 --eval-every 3 \
    --test-limit 16 --optimizer adamw --clip-grad-norm 1 --sample-length 0 --quiet \
    --json "$out/m.json" --tensorboard "$out/tb/run" || exit 1
"$VENV/bin/python" - "$out/tb/run" "$out/m.json" <<'PY'
import json, struct, sys
import tensorboard
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
acc.Reload()
tags = acc.Tags()["scalars"]
f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
ok = bad = 0
for r in map(json.loads, open(sys.argv[2])):
    t = r["type"]
    if t not in ("step", "eval", "epoch"):
        continue
    step = r["steps" if t == "epoch" else "step"]
    for k, v in r.items():
        if k in ("type", "step", "steps", "epoch", "epoch_pos") or v is None:
            continue
        tag = "%s/%s" % (t, k)
        pts = {e.step: e.value for e in acc.Scalars(tag)} if tag in tags else {}
        tol = 0.05 + 2e-3 * abs(v) if k.endswith(("time_s", "per_s")) else 1e-5 * max(1, abs(v))
        if step in pts and abs(pts[step] - f32(v)) <= tol:
            ok += 1
        else:
            bad += 1
            print("FAIL: %s at step %s: %s, JSON %r" % (tag, step, pts.get(step), v))
mem = [t for t in tags if t.startswith("memory/")]
ok, bad = (ok + 1, bad) if mem else (ok, bad + 1)
print("tensorboard %s EventAccumulator: %d scalar tags (%d memory/*), %s" % (tensorboard.__version__, len(tags), len(mem), ", ".join(sorted(t for t in tags if not t.startswith("memory/")))))
print("%d passed, %d failed" % (ok, bad))
sys.exit(1 if bad else 0)
PY
