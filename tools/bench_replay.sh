#!/bin/sh
# tools/bench_replay.sh: the replay throughput and memory benchmark.
#
#   sh tools/bench_replay.sh [RUNS]      (default 5 runs per size)
#
# Replays scenarios/bench-100k.json (1,000 adapters, 4 workers, full event
# logging to SQLite) at several trace lengths and prints, per length, the
# median wall time and median CPU time (user + system) of the whole command
# (setup, replay, summary queries), the events logged, events per second of
# wall time and per CPU-second (= per core: lorasim is single-threaded), and
# the peak resident set size.  Peak memory must stay flat as the trace
# grows: the trace is streamed.  Files go under $BENCH_DIR (default: the
# system temporary directory).  Needs GNU time (/usr/bin/time).
# Build first: sh tools/setup.sh build
set -eu
cd "$(dirname "$0")/.."
runs="${1:-5}"
bin="${LORASIM:-./build/lorasim}" # LORASIM=path: another build
tmp=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/lsim-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo none)$(git diff --quiet 2>/dev/null || echo '+dirty'), $(date -u +%Y-%m-%d), $(uname -m), $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ //')"
echo "load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
echo "| requests | events | median wall s | median CPU s | events/s wall | events/s per CPU-second | peak RSS MiB |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
for n in 25000 50000 100000 200000; do
  sed "s/\"requests\": 100000/\"requests\": $n/" scenarios/bench-100k.json \
    >"$tmp/bench.json"
  : >"$tmp/times"
  for i in $(seq "$runs"); do
    /usr/bin/time -f "%e %U %S %M" -o "$tmp/t" "$bin" replay "$tmp/bench.json" \
      --db "$tmp/b.db" --no-plots --quiet
    cat "$tmp/t" >>"$tmp/times"
  done
  ev=$(sqlite3 "$tmp/b.db" "SELECT events FROM runs")
  med=$(sort -n "$tmp/times" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  cpu=$(awk '{printf "%.2f\n", $2 + $3}' "$tmp/times" | sort -n |
        awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  rss=$(sort -k4 -n "$tmp/times" | tail -1 | awk '{printf "%.1f", $4/1024}')
  rate=$(awk -v e="$ev" -v t="$med" 'BEGIN {printf "%.0f", e/t}')
  crate=$(awk -v e="$ev" -v t="$cpu" 'BEGIN {printf "%.0f", e/t}')
  echo "| $n | $ev | $med | $cpu | $rate | $crate | $rss |"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
