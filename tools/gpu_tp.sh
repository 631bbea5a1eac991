#!/bin/sh
# gpu_tp.sh: run the two-GPU tensor-parallel test and benchmark (docs/TP.md).
#
#   sh tools/gpu_tp.sh DIR        DIR holds the tp_nccl binary (a build
#                                 folder, or .carry/bin on the device machine)
#
# Writes into $OUT (default ./gpu-tp-out): env.txt (GPUs, topology, NCCL),
# test.txt (exact int64 test, exit status on its last line), bench.txt and
# bench.csv (collective medians), memcheck.txt (compute-sanitizer memcheck
# of the test, when compute-sanitizer exists), and summary.txt.
# NVLink SHARP / multicast stays off: NCCL_NVLS_ENABLE=0 (tp_nccl forces it
# too).  libnccl.so.2 is looked up in PyTorch's pip package nvidia-nccl-*
# unless LD_LIBRARY_PATH already finds it.
set -u
DIR=${1:?usage: sh tools/gpu_tp.sh DIR_WITH_tp_nccl}
BIN=$DIR/tp_nccl
OUT=${OUT:-$PWD/gpu-tp-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}

nccl_dir=$(python3 - 2>/dev/null <<'PY'
import os
try:
    import nvidia.nccl as m
    d = os.path.dirname(m.__file__) if getattr(m, "__file__", None) else list(m.__path__)[0]
    for sub in ("lib", "lib64", "."):
        if os.path.exists(os.path.join(d, sub, "libnccl.so.2")):
            print(os.path.join(d, sub)); break
except Exception:
    pass
PY
)
if [ -z "$nccl_dir" ]; then
  # fallback: any libnccl.so.2 under the Python installs or /usr
  hit=$(find /usr /opt /root/.local -name libnccl.so.2 2>/dev/null | head -n 1)
  [ -n "$hit" ] && nccl_dir=$(dirname "$hit")
fi
if [ -n "$nccl_dir" ]; then
  LD_LIBRARY_PATH="$nccl_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LD_LIBRARY_PATH
fi

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
  echo "nccl lib dir: ${nccl_dir:-<not found via nvidia.nccl; relying on LD_LIBRARY_PATH>}"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv 2>&1
  nvidia-smi topo -m 2>&1
} > "$OUT/env.txt"

"$BIN" test > "$OUT/test.txt" 2>&1
test_rc=$?
echo "exit status: $test_rc" >> "$OUT/test.txt"

bench_rc=skipped
if [ "$test_rc" -eq 0 ]; then
  timeout 420 "$BIN" bench --runs 200 --warmup 20 --csv "$OUT/bench.csv" \
    > "$OUT/bench.txt" 2>&1
  bench_rc=$?
  echo "exit status: $bench_rc" >> "$OUT/bench.txt"
fi

mc_rc=skipped
if command -v compute-sanitizer > /dev/null 2>&1 && [ "$test_rc" -eq 0 ]; then
  timeout 300 compute-sanitizer --tool memcheck --target-processes all \
    --error-exitcode 9 "$BIN" test > "$OUT/memcheck.txt" 2>&1
  mc_rc=$?
  echo "exit status: $mc_rc" >> "$OUT/memcheck.txt"
fi

{
  echo "test: $test_rc (0 pass, 1 fail, 77 skipped)"
  echo "bench: $bench_rc"
  echo "memcheck: $mc_rc (9: errors found, 124: timed out)"
  tail -n 8 "$OUT/test.txt"
  [ -f "$OUT/bench.txt" ] && cat "$OUT/bench.txt"
  [ -f "$OUT/memcheck.txt" ] && tail -n 5 "$OUT/memcheck.txt"
} > "$OUT/summary.txt"
cat "$OUT/summary.txt"
[ "$test_rc" -eq 0 ]
