#!/bin/sh
# tools/gpu_compress.sh BUILD_DIR [all|test|bench|report]: the shared-basis
# operator on a GPU (default all; each part alone stays well under 10 min).
#
# Runs, from a CUDA build folder (cmake -S . -B BUILD_DIR
# -DCMAKE_BUILD_TYPE=Release, nvcc found, then cmake --build BUILD_DIR
# --target test_cuda_compress bench_compress lorasim):
#   1. tests/test_cuda_compress: the three-stage operator against cpu_ref,
#      bit for bit in integer mode (fails if it skipped: no device)
#   2. bench_compress --check: integer-mode exactness of both benchmark
#      operators against a host reference
#   3. bench_compress --sweep: JD-Full/JD-Diag vs ordinary LoRA, 1000
#      adapters, d 4096, r0 16, R 16/32/64, k 1/8, 16/256/2048 tokens,
#      median of 50 runs after 10 warm-up runs
#   4. bench_compress at the report's shape for every (method, R, k), then
#      lorasim compress --report --kernel-times on the synthetic collection
#      with planted shared structure (noise 0.05) and with near-independent
#      adapters (noise 50): bytes, error and the measured times side by side
# Outputs go to $OUT (default ./gpu-compress-out): one .txt per step and
# env.txt (device, driver, commit).
set -eu
B="${1:?usage: tools/gpu_compress.sh BUILD_DIR [all|test|bench|report]}"
PART="${2:-all}"
OUT="${OUT:-./gpu-compress-out}"
case "$PART" in all|test|bench|report) ;; *) echo "gpu_compress: unknown part $PART" >&2; exit 2;; esac
want() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }
mkdir -p "$OUT"
{
  date -u
  git rev-parse HEAD 2>/dev/null || true
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null || true
} > "$OUT/env.txt"
if want test; then
  "$B/tests/test_cuda_compress" --jobs 1 --verbose > "$OUT/test_cuda_compress.txt" 2>&1
  if grep -q "SKIP" "$OUT/test_cuda_compress.txt"; then
    echo "gpu_compress: the GPU test skipped (no device?)" >&2
    exit 1
  fi
  "$B/bench_compress" --check --reps 20 > "$OUT/bench_check.txt" 2>&1
fi
if want bench; then
  "$B/bench_compress" --sweep --reps 50 --warmup 10 > "$OUT/bench_sweep.txt" 2>&1
fi
want report || { echo "gpu_compress: ok; outputs in $OUT"; exit 0; }
# kernel times at the report's shape (256 adapters, 256 x 256, r0 8,
# 256 tokens), one bench run per (method, R, k) of the report
: > "$OUT/kernel_times.txt"
for m in full diag; do
  for R in 8 16 32; do
    for k in 1 4; do
      "$B/bench_compress" --n 256 --d 256 --r0 8 --R $R --k $k --tokens 256 \
        --method $m --reps 50 --warmup 10 |
        awk -v m="jd-$m" '$1 == "full" || $1 == "diag" {
          print m, $5, $6, $11, $10, $7 }' >> "$OUT/kernel_times.txt"
    done
  done
done
for noise in 0.05 50; do
  "$B/lorasim" compress --synthetic 256 --d-in 256 --d-out 256 --src-rank 8 \
    --planted 16 --groups 4 --noise $noise --report --ranks 8,16,32 \
    --clusters-list 1,4 --kernel-times "$OUT/kernel_times.txt" \
    > "$OUT/report_noise$noise.txt" 2>&1
done
echo "gpu_compress: ok; outputs in $OUT"
