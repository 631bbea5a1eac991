#!/bin/sh
# tools/bench_replay.sh: the replay throughput and memory benchmark.
#
#   sh tools/bench_replay.sh [RUNS]      (default 5 runs per size)
#
# Replays scenarios/bench-100k.json (1,000 adapters, 4 workers, full event
# logging to SQLite) at several trace lengths and prints, per length, the
# median wall time, events logged, events per second (wall, whole command:
# setup, replay, summary queries) and the peak resident set size.  Peak
# memory must stay flat as the trace grows: the trace is streamed.
# Needs GNU time (/usr/bin/time).  Build first: sh tools/setup.sh build
set -eu
cd "$(dirname "$0")/.."
runs="${1:-5}"
bin=./build/lorasim
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo none)$(git diff --quiet 2>/dev/null || echo '+dirty'), $(date -u +%Y-%m-%d), $(uname -m), $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ //')"
echo "| requests | events | median wall s | events/s | peak RSS MiB |"
echo "|---:|---:|---:|---:|---:|"
for n in 25000 50000 100000 200000; do
  sed "s/\"requests\": 100000/\"requests\": $n/" scenarios/bench-100k.json \
    >"$tmp/bench.json"
  : >"$tmp/times"
  for i in $(seq "$runs"); do
    /usr/bin/time -f "%e %M" -o "$tmp/t" "$bin" replay "$tmp/bench.json" \
      --db "$tmp/b.db" --no-plots --quiet
    cat "$tmp/t" >>"$tmp/times"
  done
  ev=$(sqlite3 "$tmp/b.db" "SELECT events FROM runs")
  med=$(sort -n "$tmp/times" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  rss=$(sort -k2 -n "$tmp/times" | tail -1 | awk '{printf "%.1f", $2/1024}')
  rate=$(awk -v e="$ev" -v t="$med" 'BEGIN {printf "%.0f", e/t}')
  echo "| $n | $ev | $med | $rate | $rss |"
done
