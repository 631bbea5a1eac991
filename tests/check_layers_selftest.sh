#!/bin/sh
# check_layers_selftest.sh: tools/check_layers.sh against small trees that
# break one rule each, so the layer check is known to fail when it should.
#
#   sh tests/check_layers_selftest.sh CHECK_LAYERS WORKDIR
#
# Each case writes a tree under WORKDIR (not a git checkout of its own, so
# the check lists it with find), runs the check and asserts its exit
# status and the line that names the violation.
set -eu
check=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir"
n=0
fail() { echo "layers-selftest: FAIL: $*"; exit 1; }

# put FILE LINE...: write FILE under the current case's tree
put() {
  f=$t/$1; shift
  mkdir -p "$(dirname "$f")"
  : >"$f"
  for l in "$@"; do printf '%s\n' "$l" >>"$f"; done
}
# a clean tree every case starts from: one module per room, arrows down,
# a private traces/internal.h that includes the public header it serves
base_tree() {
  n=$((n + 1)); t=$dir/case$n
  put base/rng.h '#include <stdint.h>'
  put base/rng.c '#include "rng.h"'
  put engine/lsim.h '#include <stddef.h>'
  put engine/policy/policy.h '#include "../lsim.h"'
  put engine/engine.c '#include "policy/policy.h"' '#include "../base/rng.h"'
  put backends/backend.h '#include "../engine/lsim.h"'
  put backends/cpu_ref/cpu_ref.c '#include "../backend.h"'
  put backends/cuda/common.cuh '#include "../cpu_ref/cpu_ref.h"'
  put backends/cpu_ref/cpu_ref.h '#include "../../engine/lsim.h"'
  put backends/cuda/lora.cu '#include "common.cuh"' '#include "nccl.h"'
  put compress/jd.c '#include "../base/rng.h"' '#include "engine/lsim.h"'
  put traces/trace.h '#include "../engine/lsim.h"'
  put traces/internal.h '#include "trace.h"'
  put traces/trace.c '#include "internal.h"'
  put traces/azure.c '#include "internal.h"'
  put sim/replay.c '#include "../traces/trace.h"' '#include "queue.h"'
  put sim/queue.h '#include "../engine/lsim.h"'
  put tests/test_x.c '#include "../sim/queue.h"' '#include "../tests/h.h"'
}
# expect STATUS PATTERN [KNOWN]: run the check on the case tree with the
# known-arrow list KNOWN (empty by default)
expect() {
  want=$1 pat=$2 known=${3:-}
  set +e
  out=$(LSIM_LAYERS_KNOWN=$known sh "$check" "$t" 2>&1)
  got=$?
  set -e
  [ "$got" = "$want" ] || fail "case $n: exit $got, want $want: $out"
  printf '%s\n' "$out" | grep -q -- "$pat" ||
    fail "case $n: no line matching '$pat' in: $out"
  echo "layers-selftest: case $n ok: $pat"
}

# 1. the clean tree passes (internal.h joins traces/trace: no cycle;
#    tests/ is not checked; nccl.h names no file of the tree)
base_tree
expect 0 'layers: ok'

# 2. an arrow up: engine includes sim (resolved beside the file)
base_tree
put engine/kv.c '#include "lsim.h"' '#include "../sim/queue.h"'
expect 1 'engine/kv.c:2 includes sim/queue.h: room engine may not see room sim'

# 3. an arrow up resolved from the root, from a .cuh
base_tree
put backends/cuda/common.cuh '#include "sim/queue.h"'
expect 1 'backends/cuda/common.cuh:1 includes sim/queue.h: room backends/cuda may not see room sim'

# 4. a sideways arrow between rooms of one level
base_tree
put traces/gen.c '#include "../compress/jd.h"'
put compress/jd.h '#include <stddef.h>'
expect 1 'room traces may not see room compress'

# 5. inside backends: cpu_ref may not see cuda (cuda may see cpu_ref)
base_tree
put backends/cpu_ref/tp.c '#include "../cuda/common.cuh"'
expect 1 'room backends/cpu_ref may not see room backends/cuda'

# 6. the base sees nothing above it
base_tree
put base/rng.c '#include "rng.h"' '#include "../engine/lsim.h"'
expect 1 'base/rng.c:2 includes engine/lsim.h: room base may not see room engine'

# 7. a cycle of modules: a.c includes b.h, b.c includes a.h (no file
#    includes itself back, the modules do)
base_tree
put sim/a.c '#include "b.h"'
put sim/b.c '#include "a.h"'
put sim/a.h ''
put sim/b.h ''
expect 1 'layers: cycle: sim/.* -> sim/.* -> sim/'

# 8. a private header that is not called internal.h is a module of its own
base_tree
put traces/priv.h '#include "trace.h"'
put traces/trace.c '#include "priv.h"'
expect 1 'layers: cycle: traces/'

# 8b. NAME_impl.h is a private header too: it joins the module of the
#     header it includes (engine/core_impl.h serves engine/core)
base_tree
put engine/core.h '#include "lsim.h"'
put engine/core_impl.h '#include "core.h"'
put engine/core.h '#include "lsim.h"' '#include "core_impl.h"'
put engine/core.c '#include "core_impl.h"'
put engine/ext_a.c '#include "core_impl.h"'
expect 0 'layers: ok'

# 8c. but a header merely ending in impl (no underscore) is its own module
base_tree
put engine/core.h '#include "lsim.h"' '#include "coreimpl.h"'
put engine/coreimpl.h '#include "core.h"'
expect 1 'layers: cycle: engine/core'

# 9. a file in no room
base_tree
put misc/util.h ''
put sim/replay.c '#include "../misc/util.h"'
expect 1 'no room: misc/util'

# 10. a product file that includes a test header
base_tree
put tests/h.h ''
put sim/queue.c '#include "../tests/h.h"'
expect 1 'no room: tests/h'

# 11. a known arrow is reported and not counted
base_tree
put sim/a.c '#include "b.h"'
put sim/b.c '#include "a.h"'
put sim/a.h ''
put sim/b.h ''
expect 0 'known (not counted): sim/a -> sim/b' 'sim/a sim/b being moved'

# 12. a known arrow the tree no longer has fails, so the list is emptied
base_tree
expect 1 'known arrow sim/a -> sim/b is gone' 'sim/a sim/b being moved'

echo "layers-selftest: $n cases ok"
