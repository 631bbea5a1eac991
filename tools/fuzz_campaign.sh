#!/bin/sh
# tools/fuzz_campaign.sh: a libFuzzer campaign over every harness in fuzz/.
#
#   sh tools/fuzz_campaign.sh [-j JOBS] [-o SUMMARY] [SECONDS] [HARNESS...]
#
# Builds build-fuzz (CC=clang, -DLSIM_FUZZ=ON: libFuzzer + ASan + UBSan
# with float-cast-overflow, every finding fatal), then runs each harness for
# SECONDS (default 60, libFuzzer's -max_total_time), JOBS harnesses at a
# time (default 1; one process each), on a working corpus
# build-fuzz/corpus/NAME seeded from the repo's files.  It prints, and
# writes to SUMMARY (default build-fuzz/summary.txt), one line per harness:
# executions, coverage (libFuzzer's cov = edges, ft = features), corpus
# size, crashes and the exit status; the last line says whether every
# harness ran clean, and the script exits 1 when one did not.
# Crash inputs land in build-fuzz/artifacts/NAME/ and logs in
# build-fuzz/NAME.log; each crash found becomes a file in
# fuzz/regressions/NAME/ (replayed by CTest) and a fix.
#
# The recorded campaign (docs/RELIABILITY.md): 600 s per harness, all 8 at
# once on a machine with 8 free cores:
#   sh tools/fuzz_campaign.sh -j 8 -o fuzz-600s.txt 600
set -eu
cd "$(dirname "$0")/.."
jobs=1
summary=build-fuzz/summary.txt
while [ $# -gt 0 ]; do
  case $1 in
  -j) jobs=$2; shift 2 ;;
  -o) summary=$2; shift 2 ;;
  *) break ;;
  esac
done
secs=${1:-60}
[ $# -gt 0 ] && shift
all="fuzz_scenario fuzz_exec fuzz_trace_csv fuzz_trace_jsonl fuzz_trace_azure
fuzz_trace_mooncake fuzz_trace_burstgpt fuzz_trace_servegen"
list=${*:-$all}
B=build-fuzz
# configure every time (cheap when nothing changed), so a build from before
# a change of the sanitizer flags is brought up to date.  LSIM_FUZZ_PREBUILT=1
# skips the build: the harnesses were built elsewhere (a machine with more
# cores and no compiler, say) and travelled in build-fuzz/fuzz/.
if [ "${LSIM_FUZZ_PREBUILT:-0}" != 1 ]; then
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
# one harness: its corpus, then libFuzzer in the background
run_one() {
  h=$1 c=$B/corpus/$1 a=$B/artifacts/$1
  mkdir -p "$c" "$a"
  for s in $(seeds $h); do
    if [ -d "$s" ]; then cp "$s"/* "$c"/ 2>/dev/null || true; else cp "$s" "$c"/; fi
  done
  [ -n "$(ls fuzz/regressions/$h 2>/dev/null)" ] && cp fuzz/regressions/$h/* "$c"/
  # no -jobs: the output stays in this harness's own log
  $B/fuzz/$h -max_total_time="$secs" -print_final_stats=1 \
    -timeout=10 -rss_limit_mb=2048 -max_len=16384 -close_fd_mask=3 \
    -artifact_prefix="$a/" "$c" >"$B/$h.log" 2>&1
  echo $? >"$B/$h.status"
}

line() {
  h=$1 log=$B/$1.log
  st=$(cat "$B/$h.status" 2>/dev/null || echo '?')
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ncorp=$(ls "$B/corpus/$h" | wc -l)
  ncrash=$(ls "$B/artifacts/$h" | wc -l)
  printf '%-22s %10s %7s %7s %6s %7s %4s\n' "$h" "${execs:-?}" "${cov:-?}" \
    "${ft:-?}" "$ncorp" "$ncrash" "$st"
}

running=0
for h in $list; do
  rm -f "$B/$h.status"
  run_one "$h" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait
    running=0
  fi
done
wait
mkdir -p "$(dirname "$summary")"
{
  echo "# fuzz campaign: ${secs} s per harness, $jobs at a time, $(cat $B/compiler.txt 2>/dev/null || clang --version | head -1)"
  echo "# flags: -fsanitize=fuzzer,address,undefined,float-cast-overflow -fno-sanitize-recover=all"
  printf '%-22s %10s %7s %7s %6s %7s %4s\n' harness execs cov ft corpus crashes exit
  bad=0
  for h in $list; do
    line "$h"
    [ "$(cat "$B/$h.status" 2>/dev/null)" = 0 ] && [ -z "$(ls "$B/artifacts/$h")" ] || bad=1
  done
  if [ $bad = 0 ]; then echo "# clean: every harness ran ${secs} s without a finding"
  else echo "# FINDINGS: see build-fuzz/artifacts/ and build-fuzz/*.log"; fi
} >"$summary"
cat "$summary"
grep -q '^# clean' "$summary"
