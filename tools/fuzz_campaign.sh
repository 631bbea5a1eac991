#!/bin/sh
# tools/fuzz_campaign.sh: a libFuzzer campaign over every harness in fuzz/.
#
#   sh tools/fuzz_campaign.sh [SECONDS_PER_HARNESS] [HARNESS...]
#
# Builds build-fuzz (CC=clang, -DLSIM_FUZZ=ON: libFuzzer + ASan + UBSan)
# unless it is there, then runs each harness for SECONDS (default 60,
# -jobs 1) on a working corpus build-fuzz/corpus/NAME seeded from the
# repo's files, and prints one line per harness: executions, coverage
# (libFuzzer's cov = edges, ft = features), corpus size and crashes.
# Crash inputs land in build-fuzz/artifacts/NAME/; each one found becomes a
# file in fuzz/regressions/NAME/ (replayed by CTest) and a fix.
set -eu
cd "$(dirname "$0")/.."
secs=${1:-60}
[ $# -gt 0 ] && shift
all="fuzz_scenario fuzz_exec fuzz_trace_csv fuzz_trace_jsonl fuzz_trace_azure
fuzz_trace_mooncake fuzz_trace_burstgpt fuzz_trace_servegen"
list=${*:-$all}
B=build-fuzz
if [ ! -x $B/fuzz/fuzz_scenario ]; then
  CC=clang cmake -S . -B $B -DLSIM_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build $B -j2 >/dev/null
fi
seeds() {
  case $1 in
  fuzz_scenario) echo scenarios tests/fixtures/replay tests/fixtures/scenarios \
    tests/fixtures/traces/azure_conv.json tests/fixtures/traces/native.json ;;
  fuzz_exec) echo tests/fixtures/exec ;;
  fuzz_trace_csv) echo tests/fixtures/traces/native.csv traces/samples/tiny.csv \
    tests/fixtures/replay/*.csv ;;
  fuzz_trace_jsonl) echo tests/fixtures/traces/native.jsonl ;;
  fuzz_trace_azure) echo fuzz/corpus/azure/* ;;
  fuzz_trace_mooncake) echo fuzz/corpus/mooncake/* ;;
  fuzz_trace_burstgpt) echo tests/fixtures/traces/burstgpt.csv ;;
  fuzz_trace_servegen) echo fuzz/corpus/servegen/* ;;
  esac
}
printf '%-22s %10s %7s %7s %6s %s\n' harness execs cov ft corpus crashes
for h in $list; do
  c=$B/corpus/$h a=$B/artifacts/$h
  mkdir -p "$c" "$a"
  for s in $(seeds $h); do
    if [ -d "$s" ]; then cp "$s"/* "$c"/ 2>/dev/null || true; else cp "$s" "$c"/; fi
  done
  [ -n "$(ls fuzz/regressions/$h 2>/dev/null)" ] && cp fuzz/regressions/$h/* "$c"/
  log=$B/$h.log
  set +e
  $B/fuzz/$h -max_total_time="$secs" -jobs=1 -workers=1 -print_final_stats=1 \
    -timeout=10 -rss_limit_mb=2048 -max_len=16384 -close_fd_mask=3 \
    -artifact_prefix="$a/" "$c" >"$log" 2>&1
  st=$?
  set -e
  # a crash stops libFuzzer: the log tells which; jobs=1 keeps it in fuzz-0.log
  [ -f fuzz-0.log ] && cat fuzz-0.log >>"$log" && rm -f fuzz-0.log
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ncorp=$(ls "$c" | wc -l)
  ncrash=$(ls "$a" | wc -l)
  printf '%-22s %10s %7s %7s %6s %s%s\n' "$h" "${execs:-?}" "${cov:-?}" \
    "${ft:-?}" "$ncorp" "$ncrash" "$([ $st -ne 0 ] && echo " (exit $st, see $log)")"
done
