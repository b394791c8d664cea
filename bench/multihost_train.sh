#!/usr/bin/env bash
# bench/multihost_train.sh - data-parallel training across hosts: the step time
# of dtrain-train on HOSTS test hosts x PPN ranks (tools/multihost/dtrain-hosts:
# network namespaces on this machine, each host's link shaped both ways by tc
# tbf to RATE), for each model of MODELS, in these variants:
#   flat       DTRAIN_TWO_LEVEL=0: the buckets' allreduce is MPI's, flat
#   two-level  DTRAIN_TWO_LEVEL=1: within each host, then between hosts
#   bf16       two-level, --grad-comm-dtype bf16 (the leg between hosts in bf16)
#   one-host   the same HOSTS*PPN ranks all on the first host (no network)
# and the loss curves of the two-level run with and without bf16 over
# CURVE_STEPS steps (mlp), written side by side to OUT/loss_curves.tsv.
# Step time: the trainer's median step time (its summary record), best of
# ROUNDS runs. Prints one table per model and the ratios to flat.
#
# Must run as root (network namespaces). Runs in the set named by
# DTRAIN_HOSTS if there is one, else makes its own set and removes it.
#
# Environment:
#   BUILD       build directory holding bin/dtrain-train (default <repo>/build)
#   HOSTS, PPN  hosts and ranks per host (default 2 and 2)
#   RATE        link rate, tc syntax, or "off" (default 10gbit)
#   MODELS      models (default "mlp", plus "gpt-test" when the trainer has the gpt family)
#   STEPS       steps per timed run (default 60); ROUNDS (default 2)
#   CURVE_STEPS steps of the loss curves (default 200; 0: none)
#   ARGS_mlp, ARGS_gpt  extra trainer flags per model family
#   OUT         directory for the JSON records and loss_curves.tsv (default: new under /tmp)
# Exit status: non-zero if a run fails.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
TRAIN=${TRAIN:-$BUILD/bin/dtrain-train}
HT=$ROOT/tools/multihost/dtrain-hosts
HOSTS=${HOSTS:-2}
PPN=${PPN:-2}
RATE=${RATE:-10gbit}
STEPS=${STEPS:-60}
ROUNDS=${ROUNDS:-2}
CURVE_STEPS=${CURVE_STEPS:-200}
ARGS_mlp=${ARGS_mlp:---hidden1 1024 --hidden2 1024 --batch-size 64 --optimizer sgd --momentum 0.9 --lr 0.05}
ARGS_gpt=${ARGS_gpt:---batch-size 8 --optimizer adamw --lr 1e-3}

if [[ ! -x $TRAIN ]]; then
    echo "multihost_train.sh: $TRAIN not found; build it first (cmake --build build --target dtrain-train)" >&2
    exit 2
fi
if [[ -z ${MODELS:-} ]]; then
    MODELS=mlp
    if "$TRAIN" --help 2>&1 | grep gpt >/dev/null; then # not -q: under pipefail an early exit of grep fails the pipe (SIGPIPE)
        MODELS="mlp gpt-test"; fi
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Outside a set: make one and run this script in it.
if [[ -z ${DTRAIN_HOSTS:-} ]]; then
    exec "$HT" with "$HOSTS" --slots "$PPN" -- "$0" "$@"
fi

NP=$((HOSTS * PPN))
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/multihost_train.XXXXXX")}
mkdir -p "$OUT"
H1=$("$HT" status | awk '$1 == "host" && $2 == "1:" {print $3; exit}')
"$HT" status
echo "# $HOSTS hosts x $PPN ranks, links $RATE; $STEPS steps per run, best of $ROUNDS; records in $OUT"

model_args() { # the trainer flags of model $1
    case $1 in
    gpt) echo "--model gpt --sample-length 0 $ARGS_gpt" ;;
    gpt-*) echo "--model gpt --preset $1 --sample-length 0 $ARGS_gpt" ;; # a preset: gpt-test, gpt-demo, ...
    *) echo "--model $1 $ARGS_mlp" ;;
    esac
}

# run LABEL JSON ENVS HOSTFLAGS ARGS...: one dtrain-train run
run() {
    local label=$1 json=$2 envs=$3 hostflags=$4 names="" kv
    shift 4
    for kv in $envs; do names="$names ${kv%%=*}"; done
    rm -f "$json"
    echo "+ [$label] ${envs:+$envs }dtrain-train $* --json $json"
    # shellcheck disable=SC2086
    env $envs DTRAIN_HOSTS_EXPORT="${DTRAIN_HOSTS_EXPORT:-}$names" \
        "$HT" run -- -np "$NP" $hostflags "$TRAIN" "$@" --json "$json" --quiet > "$json.log" 2>&1 ||
        { cat "$json.log"; echo "multihost_train.sh: run [$label] failed" >&2; exit 1; }
}

median_step() { # the summary record's median step time of JSON $1
    python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("type") == "summary": print(r["median_step_s"])' "$1"
}

"$HT" shape "$RATE"
VARIANTS=("flat|DTRAIN_TWO_LEVEL=0||" "two-level|DTRAIN_TWO_LEVEL=1||"
          "bf16|DTRAIN_TWO_LEVEL=1||--grad-comm-dtype bf16" "one-host||-H $H1:$NP|")
for model in $MODELS; do
    declare -A best=()
    for v in "${VARIANTS[@]}"; do
        IFS='|' read -r label envs hostflags extra <<< "$v"
        for r in $(seq 1 "$ROUNDS"); do
            json="$OUT/${model}_${label}_$r.json"
            # shellcheck disable=SC2046
            run "$model/$label" "$json" "$envs" "$hostflags" $(model_args "$model") --epochs 1 \
                --max-steps "$STEPS" $extra
            t=$(median_step "$json")
            if [[ -z ${best[$label]:-} ]] || awk -v a="$t" -v b="${best[$label]}" 'BEGIN {exit !(a < b)}'; then
                best[$label]=$t
            fi
        done
    done
    echo "## $model: median step time (s), best of $ROUNDS, $HOSTS hosts x $PPN ranks, $RATE"
    printf '%-10s %12s %10s\n' variant step_s vs_flat
    for v in "${VARIANTS[@]}"; do
        label=${v%%|*}
        printf '%-10s %12s %10s\n' "$label" "${best[$label]}" \
            "$(awk -v a="${best[flat]}" -v b="${best[$label]}" 'BEGIN {printf "%.2fx", a / b}')"
    done
    unset best
done

if [[ $CURVE_STEPS -gt 0 ]]; then
    for w in f32 bf16; do
        # shellcheck disable=SC2046
        run "curve/$w" "$OUT/curve_$w.json" "DTRAIN_TWO_LEVEL=1" "" $(model_args mlp) --epochs 100 \
            --max-steps "$CURVE_STEPS" --seed 3 --grad-comm-dtype "$w"
    done
    python3 - "$OUT/curve_f32.json" "$OUT/curve_bf16.json" > "$OUT/loss_curves.tsv" << 'EOF'
import json, sys
def steps(p):
    return {r["step"]: r["loss"] for r in map(json.loads, open(p)) if r.get("type") == "step"}
a, b = steps(sys.argv[1]), steps(sys.argv[2])
print("step\tloss_f32\tloss_bf16\trel_diff")
for s in sorted(a):
    if s in b:
        print("%d\t%.6g\t%.6g\t%.3g" % (s, a[s], b[s], abs(b[s] - a[s]) / abs(a[s]) if a[s] else 0.0))
EOF
    echo "## loss curves (mlp, two-level, $CURVE_STEPS steps): $OUT/loss_curves.tsv"
    awk 'NR == 1 || (NR - 2) % 20 == 0' "$OUT/loss_curves.tsv"
fi
"$HT" shape off
