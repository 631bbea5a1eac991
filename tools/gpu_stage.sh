#!/bin/sh
# gpu_stage.sh BUILD_DIR: the GPU tests of the stage/retire protocol (issue
# 17 part 2) and the cuda suites it touches, on a machine with a CUDA
# device.  Run from the repository root after building BUILD_DIR with CUDA:
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j
#   tools/gpu_stage.sh build
# Prints each suite's synthesis and the device pool's stage/retire counts
# next to the engine's loads/evictions; exits non-zero when any fails.
set -u
B=${1:?usage: tools/gpu_stage.sh BUILD_DIR}
rc=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
for t in test_stage test_cuda_pool test_cuda test_cuda_replay test_calibrate; do
  echo "== $t"
  "$B/tests/$t" --jobs 1 --verbose >"/tmp/gpu_stage_$t.log" 2>&1 || rc=1
  grep -E "stage_gpu |SKIP|FAIL|Assertion|Synthesis" "/tmp/gpu_stage_$t.log" | head -40
done
echo "== quickstart --backend cuda --verify cpu_ref"
d=$(mktemp -d)
"$B/lorasim" replay scenarios/quickstart.json --db "$d/q.db" --no-plots \
  --quiet --backend cuda --verify cpu_ref || rc=1
sqlite3 "$d/q.db" "select 'iterations', count(*), 'exact', sum(exact) from \
  validations" 2>/dev/null
rm -rf "$d"
echo "gpu_stage: rc=$rc"
exit $rc
