#!/bin/sh
# check_layers.sh SRC_DIR [ROOT] - the layering of src/ (README, Layout):
#  1. each folder includes only from its own layer or the layers below it:
#     core < io, bootstrap < comm < transport < watchdog < coll < runtime
#     < parallel < nn, optim, data < train (io: storage, on core only;
#     comm: the communicator object, below the transports that keep their
#     state in it);
#  2. MPI is named only in the MPI bootstrap and transport (src/bootstrap/mpi/,
#     src/transport/mpi/): no <mpi.h>, MPI_* call, dt_mpi_* call or
#     dt_backend_mpi elsewhere (comments aside);
#  3. CUDA and NCCL are named only in the CUDA runtime, the NCCL transport and
#     the kernel backends (src/core/cuda/, src/transport/nccl/, src/nn/cuda/,
#     src/optim/cuda/): no <cuda*.h>, <nccl.h>, cuda*
#     or nccl* call elsewhere (comments aside): everything else reaches the
#     device through core/device.h and the transport tables.
#  4. with ROOT (the source tree): the library's users in tools/, bench/ and
#     examples/ include only the public headers (dtrain/...) and their own,
#     never a layer of src/ (the one exception: bench/programs/bench_check.c,
#     which switches the collective check through transport/settings.h as the
#     tests do).
# Prints every violation; exit 1 if there is one.
src=${1:?usage: check_layers.sh SRC_DIR [ROOT]}
root=$2
rank() {
    case $1 in
    core) echo 0 ;; io|bootstrap) echo 1 ;; comm) echo 2 ;; transport) echo 3 ;; watchdog) echo 4 ;;
    coll) echo 5 ;; runtime) echo 6 ;; parallel) echo 7 ;; nn|optim|data) echo 8 ;; train) echo 9 ;;
    *) echo 99 ;;
    esac
}
bad=0
# confined FILE CODE "DIR/ DIR/" WHAT REGEX: outside the folders DIR/ (under
# src/), the code of FILE must not match REGEX (it names WHAT)
confined() {
    local d hits
    for d in $3; do case $1 in "$d"*) return 0 ;; esac; done
    hits=$(echo "$2" | grep -n -E "$5")
    if [ -n "$hits" ]; then
        echo "check_layers: $1 names $4 outside $(for d in $3; do printf 'src/%s and ' "$d"; done | sed 's/ and $//'):"
        echo "$hits" | sed 's/^/    /'
        bad=1
    fi
}
files=$(cd "$src" && find . -name '*.[ch]' | sed 's|^\./||' | sort)
[ -n "$files" ] || { echo "check_layers: no sources under $src"; exit 1; }
for f in $files; do
    layer=${f%%/*}
    me=$(rank "$layer")
    for inc in $(sed -n 's|^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*\)/.*|\1|p' "$src/$f" | sort -u); do
        [ "$inc" = dtrain ] && continue
        them=$(rank "$inc")
        if [ "$them" -gt "$me" ]; then
            echo "check_layers: $f ($layer) includes from $inc, a layer above it"
            bad=1
        fi
    done
    # code only: drop /* ... */ comments (also across lines) and string literals
    code=$(sed -e ':a' -e '/\/\*/{/\*\//!{N;ba' -e '}}' -e 's|/\*[^*]*\*\+\([^/*][^*]*\*\+\)*/||g' -e 's|"[^"]*"|""|g' "$src/$f")
    confined "$f" "$code" "bootstrap/mpi/ transport/mpi/" MPI \
        '#[[:space:]]*include[[:space:]]*<mpi\.h>|\bMPI_[A-Za-z_]+|\bdt_mpi_[a-z_]+|\bdt_backend_mpi\b'
    confined "$f" "$code" "core/cuda/ transport/nccl/ nn/cuda/ optim/cuda/" "CUDA or NCCL" \
        '#[[:space:]]*include[[:space:]]*<(cuda[a-z_]*|nccl)\.h>|\b(cuda|nccl)[A-Z][A-Za-z_]*[[:space:]]*\('
done
nusers=0
if [ -n "$root" ]; then
    users=$(cd "$root" && find tools bench examples -name '*.[ch]' 2>/dev/null | sort)
    for f in $users; do
        nusers=$((nusers + 1))
        [ "$f" = bench/programs/bench_check.c ] && continue
        for inc in $(sed -n 's|^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*\)/.*|\1|p' "$root/$f" | sort -u); do
            [ "$inc" = dtrain ] && continue
            if [ "$(rank "$inc")" -ne 99 ]; then
                echo "check_layers: $f includes from src/$inc: a user of the library includes only dtrain/*.h"
                bad=1
            fi
        done
    done
fi
[ $bad -eq 0 ] && echo "check_layers: $(echo "$files" | wc -l) files, layers, MPI and CUDA/NCCL confinement OK; $nusers files of tools/, bench/, examples/ on the public headers only"
exit $bad
