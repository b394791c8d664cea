#!/usr/bin/env bash
# tests/fakegpu/zero_memory.sh TRAIN MPIEXEC [MPIEXEC_ARGS...] - the device
# memory of model state per rank for the GPT on a GPU (TRAIN: on the fake
# device runtime, dtrain-train-fakegpu), DDP and ZeRO stages 1-3 at N = 1, 2
# and 4 ranks (a GPU per rank), fp32 AdamW: rank 0's registered DEVICE bytes
# (dtrain/mem.h; the JSON memory record's params_device + grads_device +
# optimizer_device at the end of a 2-step run) against the formulas of fp32
# training (4 B per parameter each for parameters, gradients and the two Adam
# moments: ZeRO's 16P and its shards)
#   stage 0  16P            (DDP; one rank: no strategy)
#   stage 1  8P + 8P/N      (optimizer state sharded)
#   stage 2  4P + 12P/N     (+ gradients: a shard, and two layer buffers, "comm")
#   stage 3  16P/N          (+ parameters: gathered layer by layer, "gathered")
# within 1% (rank 0 holds ceil(P/N)); the model state all device memory; at N
# > 1 each stage below the one before; and with --zero-offload 1 (stage 3, N
# = 2) the optimizer's state and the shard on the host, the device holding
# none of the model state. The same in bf16 (--precision bf16: the formulas
# below; at stage 3 the layers gathered in bf16, half fp32's gathered
# buffers). Prints the tables (docs/benchmarks.md: the same on
# a GPU is bench/zero.sh's DEVICE=cuda part). MPIEXEC empty (no MPI): only N
# = 1 runs.
set -u
train=$1
shift
mpi=("$@")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dt_zero_memory.XXXXXX")
[ -n "${KEEP_TMP:-}" ] || trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
check() { if eval "$1"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $2"; fi; }

base=(--model gpt --preset gpt-test --device cuda --optimizer adamw --batch-size 1 --train-limit 64 --test-limit 4
      --max-steps 2 --eval 0 --sample-length 0 --quiet)
run() { # name np [flags...]
    local name=$1 np=$2
    shift 2
    if [ "$np" = 1 ]; then
        DTRAIN_FAKEGPU_DEVICES=4 "$train" "${base[@]}" --json "$tmp/$name.json" "$@" > "$tmp/$name.out" 2>&1
    else
        DTRAIN_FAKEGPU_DEVICES=4 "${mpi[@]}" -np "$np" "$train" "${base[@]}" --json "$tmp/$name.json" "$@" \
            > "$tmp/$name.out" 2>&1
    fi
}
# field NAME KEY: the end memory record's KEY (rank 0's)
field() { grep '"type":"memory"' "$tmp/$1.json" 2>/dev/null | tail -1 | sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p"; }

nps="1"
declare -A gathered_f32
[ ${#mpi[@]} -gt 0 ] && nps="1 2 4"
printf "%3s %5s %12s %8s %8s %12s %12s %12s\n" N stage "device B" "x P" formula "host B" "comm pk B" "gathered pk B"
for n in $nps; do
    prev=
    for z in 0 1 2 3; do
        name="n${n}_z$z"
        run "$name" "$n" --zero "$z"
        P=$(field "$name" num_params)
        dev=$(($(field "$name" params_device) + $(field "$name" grads_device) + $(field "$name" optimizer_device))) 2>/dev/null
        all=$(($(field "$name" params) + $(field "$name" grads) + $(field "$name" optimizer))) 2>/dev/null
        if [ -z "$P" ] || [ -z "$dev" ] || [ -z "$all" ]; then
            check false "N=$n stage $z: no memory record ($(tail -2 "$tmp/$name.out" | tr '\n' ' '))"
            continue
        fi
        want=$(awk -v z="$z" -v n="$n" -v p="$P" 'BEGIN {f[0] = 16; f[1] = 8 + 8 / n; f[2] = 4 + 12 / n; f[3] = 16 / n;
                                                     printf "%.0f", f[z] * p}')
        printf "%3d %5d %12d %8.3f %8.3f %12d %12d %12d\n" "$n" "$z" "$dev" "$(awk -v a="$dev" -v p="$P" 'BEGIN {print a / p}')" \
            "$(awk -v a="$want" -v p="$P" 'BEGIN {print a / p}')" "$((all - dev))" "$(field "$name" comm_device_peak)" \
            "$(field "$name" gathered_device_peak)"
        check 'awk -v a="$dev" -v w="$want" "BEGIN {d = a - w; if (d < 0) d = -d; exit !(d <= 0.01 * w)}"' \
              "N=$n stage $z: $dev device bytes of model state, the formula says $want"
        check '[ "$dev" = "$all" ]' "N=$n stage $z: $((all - dev)) bytes of model state are not device memory"
        if [ "$n" -gt 1 ] && [ -n "$prev" ]; then
            check '[ "$dev" -lt "$prev" ]' "N=$n: stage $z holds $dev device bytes, not below stage $((z - 1))'s $prev"
        fi
        prev=$dev
        gathered_f32[$n$z]=$(field "$name" gathered_device_peak)
    done
done

# bf16 (--precision bf16): f32 parameters (the master copy the optimizer
# steps), a bf16 copy the kernels compute with (2 B per parameter), f32
# gradients and moments. From stage 1 the f32 masters are ZeRO's shards
# (4P/N) and the model keeps only the bf16 copy, which ZeRO writes and
# re-shares:
#   stage 0  18P            stage 2  2P + 16P/N
#   stage 1  6P + 12P/N     stage 3  16P/N
# at stage 3 the layers are gathered in bf16 (each owner's piece its f32
# master's rounding) and computed from as they are: the gathered buffers are
# half of fp32's, and there is no bf16 copy. (ZeRO's mixed-precision formulas
# with 2 B gradients: 16P, 4P + 12P/N, 2P + 14P/N, 16P/N; dtrain's gradients
# are f32.)
printf "%3s %5s %12s %8s %8s %12s   bf16\n" N stage "device B" "x P" formula "gathered pk B"
for n in $nps; do
    prev=
    for z in 0 1 2 3; do
        name="bf16_n${n}_z$z"
        run "$name" "$n" --zero "$z" --precision bf16
        P=$(field "$name" num_params)
        dev=$(($(field "$name" params_device) + $(field "$name" grads_device) + $(field "$name" optimizer_device))) 2>/dev/null
        if [ -z "$P" ] || [ -z "$dev" ]; then
            check false "bf16 N=$n stage $z: no memory record ($(tail -2 "$tmp/$name.out" | tr '\n' ' '))"
            continue
        fi
        want=$(awk -v z="$z" -v n="$n" -v p="$P" 'BEGIN {f[0] = 18; f[1] = 6 + 12 / n; f[2] = 2 + 16 / n; f[3] = 16 / n;
                                                      printf "%.0f", f[z] * p}')
        gpk=$(field "$name" gathered_device_peak)
        printf "%3d %5d %12d %8.3f %8.3f %12d\n" "$n" "$z" "$dev" "$(awk -v a="$dev" -v p="$P" 'BEGIN {print a / p}')" \
            "$(awk -v a="$want" -v p="$P" 'BEGIN {print a / p}')" "$gpk"
        check 'awk -v a="$dev" -v w="$want" "BEGIN {d = a - w; if (d < 0) d = -d; exit !(d <= 0.01 * w)}"' \
              "bf16 N=$n stage $z: $dev device bytes of model state, the formula says $want"
        if [ "$n" -gt 1 ] && [ -n "$prev" ]; then
            check '[ "$dev" -lt "$prev" ]' "bf16 N=$n: stage $z holds $dev device bytes, not below stage $((z - 1))'s $prev"
        fi
        if [ "$z" = 3 ]; then
            f32g=${gathered_f32[$n$z]:-0}
            check '[ "$f32g" -gt 0 ] && [ $((2 * gpk - f32g)) -ge 0 ] && [ $((2 * gpk - f32g)) -le 16 ]' \
                  "bf16 N=$n stage 3: gathered buffers of $gpk B, not half of fp32's $f32g B (the layers gathered in bf16)"
        fi
        prev=$dev
    done
done

# ZeRO-Offload: the shard and optimizer on the host
if [ ${#mpi[@]} -gt 0 ]; then
    run offload 2 --zero 3 --zero-offload 1
    od=$(field offload optimizer_device)
    o=$(field offload optimizer)
    dev=$(($(field offload params_device) + $(field offload grads_device) + ${od:-0})) 2>/dev/null
    printf "offload (N=2, stage 3): optimizer %s B (device %s B), model state on the device %s B\n" "$o" "$od" "$dev"
    check '[ -n "$o" ] && [ "$o" -gt 0 ] && [ "$od" = 0 ]' "offload: optimizer $o B of which $od B on the device, want none"
    check '[ "$dev" = "$(field offload params_device)" ] && [ "$(field offload grads_device)" = 0 ]' \
          "offload: gradients on the device ($(field offload grads_device) B)"
fi

echo "zero_memory: $pass passed, $fail failed"
[ $fail = 0 ]
