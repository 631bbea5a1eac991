#!/bin/sh
# tools/pgo/train.sh LORASIM SRC WORK: the training run of the profile-guided
# build (CMakeLists.txt, LSIM_PGO).  LORASIM is the instrumented binary; its
# counters land in the profile directory it was built with.  The workload is
# in the repository only (no ../shared trace), and it is not a benchmark,
# though it has the benchmarks' two shapes: a synthetic Azure-like trace of
# 1,000 adapters under the measured profile through the five schedulers;
# a 40,000-request trace over 10,000 adapters and 8 workers under the linear
# cost model, written to CSV, read back by `trace stats` and replayed from
# the file; the quickstart through the five schedulers; and the compressed
# quickstart; so that generation, import, replay, logging, metrics and the
# report all run.  Outputs go to
# WORK, which is emptied first; the plots are off (gnuplot is not ours).
set -eu
if [ $# -ne 3 ]; then
  echo "usage: tools/pgo/train.sh LORASIM SRC WORK" >&2
  exit 2
fi
bin=$1 src=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
all=fcfs,resident_greedy,deficit_aging,vtc,slora_cluster
# a failed step stops the build with its command and output
step() {
  "$@" >"$work/step.log" 2>&1 || {
    echo "pgo: training step failed: $*" >&2
    cat "$work/step.log" >&2
    exit 1
  }
}
step "$bin" compare "$src/tools/pgo/train.json" --schedulers "$all" --no-plots \
  --out "$work/train"
step "$bin" compare "$src/scenarios/quickstart.json" --schedulers "$all" --no-plots \
  --out "$work/quickstart"
step "$bin" replay "$src/scenarios/quickstart-compressed.json" --no-plots --quiet \
  --db "$work/compressed.db"
step "$bin" trace convert --scenario "$src/tools/pgo/trace-gen.json" \
  -o "$work/trace.csv"
step "$bin" trace stats "$work/trace.csv" --no-plot
cp "$src/tools/pgo/trace-replay.json" "$work/trace-replay.json"
step "$bin" replay "$work/trace-replay.json" --no-plots --quiet \
  --db "$work/trace.db"
echo "pgo: trained $bin"
