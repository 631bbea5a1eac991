#!/bin/bash
# gpu_execute.sh: issue 19's device run in one call (docs/FIDELITY.md,
# docs/CUDA.md "Running on the device machine").  Run from the repository
# root on the GPU machine, with the binaries of a CUDA build staged as
# BUILD (default build-gpu: lorasim and tests/test_*) and their shared
# libraries in LIB:
#   tools/gpu_execute.sh [BUILD] [LIB] [OUTDIR]
# 1. the GPU suites (attention, forward, pool, replay, stage, fidelity);
# 2. compute-sanitizer memcheck and racecheck on the attention check mode
#    and memcheck on the forward kernels;
# 3. the small fixture replayed with --execute full under both clocks
#    (the model clock's event rows must equal the model backend's);
# 4. quickstart-8b (Llama-3-8B shape) under --execute full --clock
#    measured, the same scenario under the model clock on the model
#    backend, and `lorasim fidelity` of the pair.
# Every database and report lands in OUTDIR; exits non-zero on any failure.
# The device machine has no sqlite3 shell: the row hashes print "absent"
# there and the suites' SQL-shell checks fail; hash the returned databases
# (tools/hash_rows.sh) and run test_fidelity where sqlite3 is.
set -u -o pipefail
B=${1:-build-gpu}
L=${2:-}
O=${3:-${OUT:-/tmp/gpu_execute}}
mkdir -p "$O"
[ -n "$L" ] && export LD_LIBRARY_PATH=$L:/usr/local/cuda/lib64
rc=0
step() { echo "== $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
for t in test_cuda_attn test_cuda_forward test_cuda_pool test_cuda_replay \
         test_stage test_fidelity; do
  step "$t"
  if [ -x "$B/tests/$t" ]; then
    timeout 300 "$B/tests/$t" --jobs 1 >"$O/$t.log" 2>&1 || { rc=1; tail -30 "$O/$t.log"; }
    grep -E "Synthesis|SKIP" "$O/$t.log" | tail -3
  else
    echo "missing $B/tests/$t"; rc=1
  fi
done
S="compute-sanitizer --error-exitcode 9"
step "memcheck bench_attention --check"
$S --tool memcheck "$B/bench_attention" --check --cases 4 2>&1 | tail -2 || rc=1
step "racecheck bench_attention --check"
$S --tool racecheck "$B/bench_attention" --check --cases 3 2>&1 | tail -2 || rc=1
step "memcheck test_cuda_forward (kernels, one layer)"
$S --tool memcheck "$B/tests/test_cuda_forward" --jobs 1 \
  --filter 'kernels/*' 2>&1 | tail -3 || rc=1
$S --tool memcheck "$B/tests/test_cuda_forward" --jobs 1 \
  --filter 'forward/one_layer*' 2>&1 | tail -3 || rc=1

L8() { "$B/lorasim" "$@"; }
step "full_tiny: --execute full under both clocks, and the model backend"
F=tests/fixtures/replay/full_tiny.json
L8 replay $F --db "$O/tiny-model.db" --no-plots --quiet || rc=1
L8 replay $F --db "$O/tiny-full-model.db" --no-plots --quiet --backend cuda \
  --execute full --clock model || rc=1
L8 replay $F --db "$O/tiny-full-measured.db" --no-plots --quiet \
  --backend cuda --execute full --clock measured || rc=1
for d in tiny-model tiny-full-model; do
  sh tools/hash_rows.sh "$O/$d.db" | grep events
done
L8 fidelity "$O/tiny-full-model.db" --against "$O/tiny-full-measured.db" || rc=1

step "quickstart-8b: measured clock on the GPU, model clock on the model backend"
Q=scenarios/quickstart-8b.json
L8 replay $Q --db "$O/q8b-model.db" --no-plots --quiet || rc=1
/usr/bin/time -f "wall %e s, max RSS %M KiB" \
  "$B/lorasim" replay $Q --db "$O/q8b-measured.db" --no-plots \
  --backend cuda --execute full --clock measured || rc=1
L8 fidelity "$O/q8b-model.db" --against "$O/q8b-measured.db" \
  --out "$O/fid" --json "$O/q8b-fidelity.json" || rc=1
echo "gpu_execute: rc=$rc"
exit $rc
