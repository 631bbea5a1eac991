#!/bin/sh
# tools/pgo/train.sh LORASIM SRC WORK: the training run of the profile-guided
# build (CMakeLists.txt, LSIM_PGO).  LORASIM is the instrumented binary; its
# counters land in the profile directory it was built with.  The workload is
# in the repository only (no ../shared trace), and it is not a benchmark: a
# synthetic Azure-like trace of 1,000 adapters through the five schedulers,
# the quickstart through the five, and the compressed quickstart, so that
# the replay, logging, metrics and report paths all run.  Outputs go to
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
"$bin" compare "$src/tools/pgo/train.json" --schedulers "$all" --no-plots \
  --out "$work/train" >/dev/null 2>&1
"$bin" compare "$src/scenarios/quickstart.json" --schedulers "$all" --no-plots \
  --out "$work/quickstart" >/dev/null 2>&1
"$bin" replay "$src/scenarios/quickstart-compressed.json" --no-plots --quiet \
  --db "$work/compressed.db" >/dev/null 2>&1
echo "pgo: trained $bin"
