#!/bin/sh
# check_layers.sh SRC_DIR [ROOT] - the layering of src/ (docs/internals.md):
#  1. each folder includes only from its own layer or the layers it stands
#     on (below):
#       core
#       io, bootstrap                  on core
#       nn, optim, data                on io, core
#       comm                           on bootstrap, core
#       transport                      on comm and below
#       watchdog                       on transport and below
#       coll                           on watchdog and below
#       runtime                        on coll and below
#       parallel                       on runtime and below, optim
#       train                          on every layer
#     (io: storage; nn, optim, data: layers, models, optimizers and data sets;
#     comm: the communicator object, below the transports that keep their
#     state in it). Its public headers (include/dtrain/*.h) count at the
#     layer that states their contract (header_layer below; a new header needs
#     a line there): a folder includes dtrain/X.h only if X's layer is its own
#     or one it stands on, and a public header includes only headers of its
#     layer or of the layers that one stands on;
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
incdir=${root:-$src/..}/include/dtrain
# the layers that layer $1 stands on (may include from); "?" for a folder that
# is not a layer
stands_on() {
    case $1 in
    core) echo "" ;;
    io|bootstrap) echo "core" ;;
    nn|optim|data) echo "io core" ;;
    comm) echo "bootstrap core" ;;
    transport) echo "comm bootstrap core" ;;
    watchdog) echo "transport comm bootstrap core" ;;
    coll) echo "watchdog transport comm bootstrap core" ;;
    runtime) echo "coll watchdog transport comm bootstrap core" ;;
    parallel) echo "runtime coll watchdog transport comm bootstrap optim io core" ;;
    train) echo "parallel runtime coll watchdog transport comm bootstrap nn optim data io core" ;;
    *) echo "?" ;;
    esac
}
# the layer of public header dtrain/$1.h: the folder that states its contract
# (comm.h: the communicator and its attributes, comm/; its dt_init and pool
# functions are the runtime's, declared with the object they make;
# reliability.h: the watchdog's and the check's behaviour, whose settings
# dt_init reads)
header_layer() {
    case $1 in
    status|dtype|rng|config|trace|mem|device) echo core ;;
    ckpt|safetensors) echo io ;;
    nn|model|weights) echo nn ;;
    optim) echo optim ;;
    data|text) echo data ;;
    comm) echo comm ;;
    reliability) echo watchdog ;;
    coll) echo coll ;;
    ddp|zero) echo parallel ;;
    train|dtrain) echo train ;;
    *) echo "" ;;
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
# includes FILE LAYER: FILE's includes of a layer that LAYER does not stand on
# (src/ folders, and public headers by header_layer)
includes() {
    local under inc what
    under=" $(stands_on "$2") "
    for inc in $(sed -n 's|^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*/[^"]*\)".*|\1|p' "$1" | sort -u); do
        what=${inc%%/*}
        if [ "$what" = dtrain ]; then
            what=$(header_layer "$(basename "$inc" .h)")
            if [ -z "$what" ]; then
                echo "check_layers: ${1#"$base"/} includes $inc, which has no layer in check_layers.sh (header_layer)"
                bad=1
                continue
            fi
        elif [ "$(stands_on "$what")" = "?" ]; then
            continue # not a layer of src/ (a test's or a tool's own folder)
        fi
        [ "$what" = "$2" ] && continue
        case $under in
        *" $what "*) ;;
        *) echo "check_layers: ${1#"$base"/} ($2) includes $inc, of $what, a layer $2 does not stand on (it stands on:${under% })"
           bad=1 ;;
        esac
    done
}
base=$src
for f in $files; do
    layer=${f%%/*}
    if [ "$(stands_on "$layer")" = "?" ]; then
        echo "check_layers: $f: src/$layer is not a layer (give it a line in check_layers.sh, stands_on, and README)"
        bad=1
    else
        includes "$src/$f" "$layer"
    fi
    # code only: drop /* ... */ comments (also across lines) and string literals
    code=$(sed -e ':a' -e '/\/\*/{/\*\//!{N;ba' -e '}}' -e 's|/\*[^*]*\*\+\([^/*][^*]*\*\+\)*/||g' -e 's|"[^"]*"|""|g' "$src/$f")
    confined "$f" "$code" "bootstrap/mpi/ transport/mpi/" MPI \
        '#[[:space:]]*include[[:space:]]*<mpi\.h>|\bMPI_[A-Za-z_]+|\bdt_mpi_[a-z_]+|\bdt_backend_mpi\b'
    confined "$f" "$code" "core/cuda/ transport/nccl/ nn/cuda/ optim/cuda/" "CUDA or NCCL" \
        '#[[:space:]]*include[[:space:]]*<(cuda[a-z_]*|nccl)\.h>|\b(cuda|nccl)[A-Z][A-Za-z_]*[[:space:]]*\('
done
base=${incdir%/dtrain}
nheaders=0
for h in "$incdir"/*.h; do
    [ -f "$h" ] || continue
    nheaders=$((nheaders + 1))
    name=$(basename "$h" .h)
    layer=$(header_layer "$name")
    if [ -z "$layer" ]; then
        echo "check_layers: include/dtrain/$name.h has no layer in check_layers.sh (header_layer)"
        bad=1
        continue
    fi
    includes "$h" "$layer"
done
[ "$nheaders" -gt 0 ] || { echo "check_layers: no public headers under $incdir"; bad=1; }
nusers=0
if [ -n "$root" ]; then
    users=$(cd "$root" && find tools bench examples -name '*.[ch]' 2>/dev/null | sort)
    for f in $users; do
        nusers=$((nusers + 1))
        [ "$f" = bench/programs/bench_check.c ] && continue
        for inc in $(sed -n 's|^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*\)/.*|\1|p' "$root/$f" | sort -u); do
            [ "$inc" = dtrain ] && continue
            if [ "$(stands_on "$inc")" != "?" ]; then
                echo "check_layers: $f includes from src/$inc: a user of the library includes only dtrain/*.h"
                bad=1
            fi
        done
    done
fi
[ $bad -eq 0 ] && echo "check_layers: $(echo "$files" | wc -l) files and $nheaders public headers, layers, MPI and CUDA/NCCL confinement OK; $nusers files of tools/, bench/, examples/ on the public headers only"
exit $bad
