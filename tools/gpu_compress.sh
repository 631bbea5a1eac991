#!/bin/sh
# tools/gpu_compress.sh DIR [all|test|bench|times|report]: the shared-basis
# operator on a GPU (docs/COMPRESSION.md, "Running it").
#
# DIR holds the binaries: a CUDA build folder (cmake -S . -B DIR
# -DCMAKE_BUILD_TYPE=Release with nvcc found, then cmake --build DIR
# --target test_cuda_compress bench_compress lorasim), or a carry folder
# such as .carry/bin with test_cuda_compress and bench_compress copied in
# (their shared libraries in DIR/../lib, added to LD_LIBRARY_PATH).
#
#   test    tests/test_cuda_compress: the three-stage operator against
#           cpu_ref, bit for bit in integer mode (fails if it skipped), and
#           bench_compress --check (both benchmark operators, integer mode)
#   bench   bench_compress --sweep: JD-Full/JD-Diag vs ordinary LoRA, 1000
#           adapters, d 4096, r0 16, R 16/32/64, k 1/8, 16/256/2048 tokens,
#           median of 50 runs after 10 warm-up runs
#   times   bench_compress at the report's shape (256 adapters, 256 x 256,
#           r0 8, 256 tokens) for every (method, R, k) of the report:
#           kernel_times.txt, the input of `lorasim compress --kernel-times`
#   report  (CPU only; run it where lorasim and LAPACK are, with
#           KT=path/to/kernel_times.txt) lorasim compress --report on the
#           synthetic collection with planted shared structure (noise 0.05)
#           and with near-independent adapters (noise 50), measured kernel
#           times beside bytes and error
#   all     test, bench, times (the device parts; default)
#
# Outputs go to $OUT (default ./gpu-compress-out); env.txt records the
# device, driver and commit.  bench_compress needs only libc and the CUDA
# driver; test_cuda_compress needs GMP's, Criterion's and OpenSSL's shared
# libraries (the same as test_cuda).
set -eu
B="${1:?usage: tools/gpu_compress.sh DIR [all|test|bench|times|report]}"
PART="${2:-all}"
OUT="${OUT:-./gpu-compress-out}"
case "$PART" in all|test|bench|times|report) ;;
*) echo "gpu_compress: unknown part $PART" >&2; exit 2;; esac
want() { [ "$PART" = "$1" ] || { [ "$PART" = all ] && [ "$1" != report ]; }; }
bin() { # the binary named $1 in DIR or DIR/tests
  if [ -x "$B/$1" ]; then echo "$B/$1"; elif [ -x "$B/tests/$1" ]; then
    echo "$B/tests/$1"; else echo "gpu_compress: no $1 in $B" >&2; exit 2; fi
}
[ -d "$B/../lib" ] && export LD_LIBRARY_PATH="$B/../lib:${LD_LIBRARY_PATH:-}"
mkdir -p "$OUT"
{
  date -u
  git rev-parse HEAD 2>/dev/null || true
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null || true
} > "$OUT/env.txt"
if want test; then
  T=$(bin test_cuda_compress)
  "$T" --jobs 1 --verbose > "$OUT/test_cuda_compress.txt" 2>&1 || {
    tail -20 "$OUT/test_cuda_compress.txt"; exit 1; }
  if grep -q "SKIP" "$OUT/test_cuda_compress.txt"; then
    echo "gpu_compress: the GPU test skipped (no device?)" >&2
    exit 1
  fi
  tail -1 "$OUT/test_cuda_compress.txt"
  "$(bin bench_compress)" --check --reps 20 > "$OUT/bench_check.txt" 2>&1 || {
    cat "$OUT/bench_check.txt"; exit 1; }
  grep "^check" "$OUT/bench_check.txt"
fi
if want bench; then
  "$(bin bench_compress)" --sweep --reps 50 --warmup 10 \
    > "$OUT/bench_sweep.txt" 2>&1
  cat "$OUT/bench_sweep.txt" | grep -v "min/max"
fi
if want times; then
  BC=$(bin bench_compress)
  : > "$OUT/kernel_times.txt"
  for m in full diag; do
    for R in 8 16 32; do
      for k in 1 4; do
        "$BC" --n 256 --d 256 --r0 8 --R $R --k $k --tokens 256 \
          --method $m --reps 50 --warmup 10 |
          awk -v m="jd-$m" '$1 == "full" || $1 == "diag" {
            print m, $5, $6, $11, $10, $7 }' >> "$OUT/kernel_times.txt"
      done
    done
  done
  cat "$OUT/kernel_times.txt"
fi
if want report; then
  KT="${KT:-$OUT/kernel_times.txt}"
  for noise in 0.05 50; do
    "$B/lorasim" compress --synthetic 256 --d-in 256 --d-out 256 \
      --src-rank 8 --planted 16 --groups 4 --noise $noise --report \
      --ranks 8,16,32 --clusters-list 1,4 --kernel-times "$KT" \
      > "$OUT/report_noise$noise.txt" 2>&1
    cat "$OUT/report_noise$noise.txt"
  done
fi
echo "gpu_compress: $PART ok; outputs in $OUT"
