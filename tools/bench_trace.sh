#!/bin/sh
# tools/bench_trace.sh: trace import and replay at production scale.
#
#   sh tools/bench_trace.sh [REQUESTS] [RUNS]    (default 10000000 requests, 1 run)
#
# 1. generate:  `lorasim trace convert --scenario gen.json` writes REQUESTS
#               synthetic requests (gamma arrivals, CV 2, 200 req/s; prompts
#               exponential mean 256, outputs exponential mean 12; two tenants
#               3:1; adapters Zipf alpha 1.0 over a catalog of 10,000) to a
#               native CSV;
# 2. import:    `lorasim trace stats` reads that CSV back (parse, order and
#               catalog checks, statistics);
# 3. replay:    `lorasim replay` of a scenario naming that CSV: 8 workers,
#               10,000 adapters (ranks 8/16/64), FCFS + LRU, `model` backend,
#               every event logged to SQLite.
# Prints, per step, the median wall time and the median CPU time (user +
# system, GNU time) over RUNS runs and the largest peak RSS; for the replay,
# the events logged and events per second of wall time and per CPU-second.
# lorasim is single-threaded, so events per CPU-second is events per second
# per core; the CPU figure is the one to compare across runs on a shared
# machine (wall time also counts waiting for a core).  The load average is
# printed before and after.  The files go to a fresh directory under
# $BENCH_DIR (default: the system temporary directory); about 1.4 GB per
# million requests while it runs.  Needs /usr/bin/time and sqlite3.
# Build first: sh tools/setup.sh build
set -eu
cd "$(dirname "$0")/.."
n="${1:-10000000}"
runs="${2:-1}"
bin="${LORASIM:-./build/lorasim}" # LORASIM=path: another build
tmp=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/lsim-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/gen.json" <<EOF
{
  "name": "bench-trace-gen",
  "seed": 42,
  "workers": { "count": 8, "pool_pages": 2048, "page_bytes": 2097152, "h2d_gbps": 25.0,
               "load_fixed_us": 200, "max_batch_tokens": 4096, "max_batch_requests": 64 },
  "model": { "layers": 32, "kv_heads": 8, "head_dim": 128, "dtype_bytes": 2,
             "targets": [ { "name": "q_proj", "d_in": 4096, "d_out": 4096 },
                          { "name": "v_proj", "d_in": 4096, "d_out": 1024 } ] },
  "cost": { "iter_fixed_ns": 4000000, "prefill_token_ns": 60000, "decode_token_ns": 120000,
            "segment_ns": 15000, "rank_row_ps": 2000 },
  "adapters": { "count": 10000,
                "ranks": [ { "rank": 8, "weight": 4 }, { "rank": 16, "weight": 3 },
                           { "rank": 64, "weight": 1 } ] },
  "tenants": [ { "name": "interactive", "traffic_weight": 3 },
               { "name": "batch", "traffic_weight": 1 } ],
  "trace": {
    "generator": { "requests": $n, "rate_per_s": 200, "process": "gamma", "cv": 2.0,
      "prompt_tokens": { "dist": "exponential", "mean": 256, "min": 8, "max": 2048 },
      "output_tokens": { "dist": "exponential", "mean": 12, "min": 1, "max": 128 } },
    "assign": { "adapters": "zipf", "alpha": 1.0, "scope": "catalog" }
  }
}
EOF
sed -e 's/"bench-trace-gen"/"bench-trace"/' \
    -e '/"generator"/,/"output_tokens"/d' \
    -e 's/"trace": {/"trace": { "file": "trace.csv",/' \
    "$tmp/gen.json" >"$tmp/replay.json"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
maxrss() { sort -n | tail -1 | awk '{printf "%.1f", $1/1024}'; }
fmt="%e %U %S %M"  # wall, user, system, peak RSS KiB

echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo none)$(git diff --quiet 2>/dev/null || echo '+dirty'), $(date -u +%Y-%m-%d), $(uname -m), $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ //'), $(nproc) cpus"
echo "requests $n, runs $runs, files in $tmp, load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
: >"$tmp/gen.t"; : >"$tmp/stats.t"; : >"$tmp/replay.t"
for i in $(seq "$runs"); do
  /usr/bin/time -f "$fmt" -a -o "$tmp/gen.t" \
    "$bin" trace convert --scenario "$tmp/gen.json" -o "$tmp/trace.csv" 2>"$tmp/gen.log"
  /usr/bin/time -f "$fmt" -a -o "$tmp/stats.t" \
    "$bin" trace stats "$tmp/trace.csv" --no-plot >"$tmp/stats.log"
  /usr/bin/time -f "$fmt" -a -o "$tmp/replay.t" \
    "$bin" replay "$tmp/replay.json" --db "$tmp/r.db" --no-plots --quiet
done
ev=$(sqlite3 "$tmp/r.db" "SELECT events FROM runs")
bytes=$(wc -c <"$tmp/trace.csv")
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
echo "| step | median wall s | median CPU s | peak RSS MiB | throughput (wall) | throughput (per CPU-second) |"
echo "|---|---:|---:|---:|---:|---:|"
for s in gen stats replay; do
  w=$(cut -d' ' -f1 "$tmp/$s.t" | median)
  c=$(awk '{printf "%.2f\n", $2 + $3}' "$tmp/$s.t" | median)
  m=$(cut -d' ' -f4 "$tmp/$s.t" | maxrss)
  case $s in
    gen) u="req/s written"; k=$n ;;
    stats) u="req/s read"; k=$n ;;
    replay) u="events/s"; k=$ev ;;
  esac
  tw=$(awk -v k="$k" -v w="$w" 'BEGIN {printf "%.0f", k/w}')
  tc=$(awk -v k="$k" -v c="$c" 'BEGIN {printf "%.0f", k/c}')
  echo "| $s | $w | $c | $m | $tw $u | $tc $u |"
done
echo "replay: $ev events; per run (wall s, CPU s):" \
  "$(awk '{printf "%s/%.2f ", $1, $2 + $3}' "$tmp/replay.t")"
echo "trace file: $bytes bytes"
sed -n '1,12p' "$tmp/stats.log"
