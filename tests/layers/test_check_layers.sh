#!/bin/sh
# test_check_layers.sh CHECK - check_layers.sh itself: a small tree with one
# violation of each kind must fail, naming each, and the same tree without them
# must pass.
check=${1:?usage: test_check_layers.sh CHECK_LAYERS_SH}
t=$(mktemp -d) || exit 1
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/src/core" "$t/src/nn" "$t/src/optim" "$t/src/transport" "$t/src/coll" "$t/src/parallel" \
         "$t/include/dtrain" "$t/tools"
printf '#include "core/error.h"\n' > "$t/src/core/error.h"
printf '#include "core/error.h"\n#include "dtrain/nn.h"\n' > "$t/src/nn/layer.c"
printf '#include "dtrain/optim.h"\n' > "$t/src/optim/optim.c"
printf '#include "dtrain/dtype.h"\n' > "$t/src/transport/transport.c"
printf '#include "dtrain/coll.h"\n#include "dtrain/comm.h"\n' > "$t/src/coll/coll.c"
printf '#include "dtrain/optim.h"\n#include "dtrain/coll.h"\n' > "$t/src/parallel/zero.c"
printf '#include "dtrain/dtype.h"\n' > "$t/include/dtrain/coll.h"
for h in dtype comm nn optim; do : > "$t/include/dtrain/$h.h"; done
printf '#include "dtrain/coll.h"\n' > "$t/tools/tool.c"
fail=0
out=$(sh "$check" "$t/src" "$t" 2>&1) || { echo "$out"; echo "FAIL: the clean tree was refused"; fail=1; }
# one violation of each kind
printf '#include "dtrain/coll.h"\n' >> "$t/src/transport/transport.c"      # a public header of a layer above
printf '#include "parallel/strategy.h"\n' >> "$t/src/nn/layer.c"          # a folder above
printf '#include "optim/optim_kernels.h"\n' >> "$t/src/nn/layer.c"        # a folder beside
printf '#include "dtrain/optim.h"\n' >> "$t/src/nn/layer.c"               # a public header beside
printf '#include "dtrain/zero.h"\n' >> "$t/include/dtrain/coll.h"         # a public header including one above
printf '#include "dtrain/made_up.h"\n' >> "$t/src/coll/coll.c"            # a header without a layer
: > "$t/include/dtrain/new.h"                                             # a public header without a layer
printf '#include "coll/engine.h"\n' >> "$t/tools/tool.c"                  # a user on src/
mkdir "$t/src/extra" && : > "$t/src/extra/x.c"                             # a folder that is no layer
if out=$(sh "$check" "$t/src" "$t" 2>&1); then echo "$out"; echo "FAIL: violations passed"; fail=1; fi
echo "$out"
for want in "transport/transport.c (transport) includes dtrain/coll.h, of coll, a layer transport does not stand on" \
            "nn/layer.c (nn) includes parallel/strategy.h, of parallel, a layer nn does not stand on" \
            "nn/layer.c (nn) includes optim/optim_kernels.h, of optim, a layer nn does not stand on" \
            "nn/layer.c (nn) includes dtrain/optim.h, of optim, a layer nn does not stand on" \
            "dtrain/coll.h (coll) includes dtrain/zero.h, of parallel, a layer coll does not stand on" \
            "coll/coll.c includes dtrain/made_up.h, which has no layer" \
            "include/dtrain/new.h has no layer" \
            "extra/x.c: src/extra is not a layer" \
            "tools/tool.c includes from src/coll"; do
    case $out in
    *"$want"*) ;;
    *) echo "FAIL: no line says '$want'"; fail=1 ;;
    esac
done
[ $fail -eq 0 ] && echo "test_check_layers: OK"
exit $fail
