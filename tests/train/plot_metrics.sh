#!/bin/sh
# tools/plot/plot_metrics.py on two short runs' --json files: a PNG of the
# curves; a file without step records and a missing file are errors (exit 1)
# naming them. Skipped (77) where matplotlib is missing (python3-matplotlib).
# usage: plot_metrics.sh DTRAIN_TRAIN PYTHON3
set -u
BIN=$1 PY=$2
TOOL=$(dirname "$0")/../../tools/plot/plot_metrics.py
"$PY" -c 'import matplotlib' 2>/dev/null || { echo "skipped: no matplotlib for $PY (apt-get install python3-matplotlib)"; exit 77; }
base=$(mktemp -d); trap 'rm -rf "$base"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
ARGS="--model gpt --preset gpt-test --batch-size 4 --max-steps 6 --eval-every 3 --test-limit 16 --sample-length 0 --quiet"
"$BIN" $ARGS --json "$base/a.json" && "$BIN" $ARGS --lr 3e-3 --optimizer adamw --json "$base/b.json" && ok || bad "training runs"
"$PY" "$TOOL" "$base/a.json" "$base/b.json" --labels sgd,adamw -o "$base/c.png" && ok || bad "plot: exit $?"
[ "$(head -c 8 "$base/c.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] && ok || bad "not a PNG"
[ "$(wc -c < "$base/c.png")" -gt 20000 ] && ok || bad "PNG too small to hold four panels"
echo '{"type":"summary","steps":0}' > "$base/none.json"
"$PY" "$TOOL" "$base/none.json" -o "$base/d.png" 2> "$base/err"; rc=$?
[ $rc -eq 1 ] && grep -q "none.json: no step records" "$base/err" && ok || { cat "$base/err"; bad "no step records: exit $rc"; }
"$PY" "$TOOL" "$base/missing.json" -o "$base/d.png" 2> "$base/err"; rc=$?
[ $rc -eq 1 ] && grep -q "missing.json" "$base/err" && ok || { cat "$base/err"; bad "missing file: exit $rc"; }
echo "plot_metrics: $pass passed, $fail failed"
[ $fail -eq 0 ]
