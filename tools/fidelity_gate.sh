#!/bin/sh
# fidelity_gate.sh: the fidelity gate of a cost profile (docs/PROFILE.md,
# "The fidelity gate"; issue 20 part 3).
#
#   tools/fidelity_gate.sh [-b LORASIM] [-o DIR] [-p PROFILE_DIR] [-g CLASS]
#                          [-t SECONDS] [-m OPTIONS] [-r DIR] [SCENARIO...]
#
# For each held-out scenario (default: scenarios/fidelity/quickstart.json,
# azure-2k.json and mooncake-long.json) it replays
#
#   model.db     the model clock, backend model: the profile's times drive
#                everything (cheap: no GPU)
#   measured.db  --backend cuda --execute full --clock measured: every
#                iteration and load runs on the GPU and its measured time
#                drives the clock; iterations.model_ns and loads.model_ns
#                keep the profile's prediction of the same spans
#
# and compares, in SQL over the two databases (sqlite3):
#
#   iterations  |model_ns - measured_ns| / measured_ns over measured.db's ok
#               iterations: MAPE (target <= 5%) and nearest-rank p90 (<= 10%)
#   e2e         TTFT and TBT p50/p99 of model.db against measured.db
#               (runs_summary): each within 5%
#   loads       the same relative error over measured.db's loads (kind load
#               or restore, measured): MAPE <= 5%
#
# and runs `lorasim fidelity measured.db --out DIR/NAME/fidelity` for the
# full report and plots when the binary has the command.  The profile is
# found by $.gpu and $.model.preset: -p names a directory laid out like
# profiles/ (CLASS/PRESET.json; LORASIM_PROFILE_DIR), -g sets $.gpu (the
# class lorasim profile recorded, e.g. h100 on an H100).  Scenarios read
# traces from ../shared (docs/TRACES.md); one whose trace is missing is
# skipped with a message.  -t caps each replay (timeout(1)).  -m replaces
# the measured replay's "--backend cuda --execute full" (tests use
# "--backend cpu_ref": the same gate over CPU times, no GPU).  -r DIR
# takes each measured run from DIR/NAME/measured.db (a gate's earlier
# output) and replays it with `--backend model --clock-from` instead of
# running it again: the same spans, priced by the profile given now, no GPU
# (docs/FIDELITY.md, "Replaying a recorded clock").
#
# Output: DIR/gate.csv (scenario,metric,value_pct,target_pct,pass), a
# markdown table on stdout and in DIR/gate.md, one folder per scenario
# with both databases.  Exit status: 0 every target met, 1 some target
# missed or a replay failed, 2 bad usage.
set -u
bin=build/lorasim
out=results/gate
pdir=
gpu=
tmax=0
mopts="--backend cuda --execute full"
recdir=
while getopts b:o:p:g:t:m:r:h opt; do
  case $opt in
  b) bin=$OPTARG ;;
  o) out=$OPTARG ;;
  p) pdir=$OPTARG ;;
  g) gpu=$OPTARG ;;
  t) tmax=$OPTARG ;;
  m) mopts=$OPTARG ;;
  r) recdir=$OPTARG ;;
  h)
    sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
here=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -eq 0 ]; then
  set -- "$here/scenarios/fidelity/quickstart.json" \
    "$here/scenarios/fidelity/azure-2k.json" \
    "$here/scenarios/fidelity/mooncake-long.json"
fi
if [ ! -x "$bin" ]; then
  echo "fidelity_gate: $bin: not an executable (-b LORASIM)" >&2
  exit 2
fi
case $tmax in *[!0-9]*) echo "fidelity_gate: -t: seconds" >&2; exit 2 ;; esac
case $gpu in *[!a-z0-9._-]*) echo "fidelity_gate: -g: a class of [a-z0-9._-]" >&2; exit 2 ;; esac
command -v sqlite3 >/dev/null 2>&1 || { echo "fidelity_gate: needs sqlite3" >&2; exit 2; }
mkdir -p "$out" || exit 2
[ -n "$pdir" ] && { LORASIM_PROFILE_DIR=$pdir; export LORASIM_PROFILE_DIR; }
setgpu=
[ -n "$gpu" ] && setgpu="--set \$.gpu=\"$gpu\""
run() { # run LOG CMD...: the command, with the -t cap, its output in LOG
  log=$1
  shift
  if [ "$tmax" -gt 0 ] && command -v timeout >/dev/null 2>&1; then
    timeout "$tmax" "$@" >"$log" 2>&1
  else
    "$@" >"$log" 2>&1
  fi
}

csv=$out/gate.csv
md=$out/gate.md
echo "scenario,metric,value_pct,target_pct,pass" >"$csv"
{
  echo "| scenario | metric | value | target | met |"
  echo "| --- | --- | ---: | ---: | --- |"
} >"$md"
status=0
row() { # row SCENARIO METRIC VALUE TARGET
  pass=$(awk -v v="$3" -v t="$4" 'BEGIN { print (v != "" && v + 0 <= t + 0) ? "yes" : "no" }')
  [ "$pass" = yes ] || status=1
  echo "$1,$2,$3,$4,$pass" >>"$csv"
  printf '| %s | %s | %s%% | %s%% | %s |\n' "$1" "$2" "${3:-n/a}" "$4" "$pass" >>"$md"
}
# nearest-rank quantile and mean of a relative error over a query's rows
relq() { # relq DB SQL (selecting rel): "mape p90 n"
  sqlite3 -batch "$1" "WITH e AS ($2), o AS (SELECT rel, row_number() OVER (ORDER BY rel) AS k, count(*) OVER () AS n FROM e) SELECT printf('%.2f', 100.0 * (SELECT avg(rel) FROM e)), printf('%.2f', 100.0 * (SELECT rel FROM o WHERE k = (9 * n + 9) / 10)), (SELECT count(*) FROM e)"
}

for scn in "$@"; do
  name=$(basename "$scn" .json)
  d=$out/$name
  mkdir -p "$d" || exit 2
  if [ -n "$recdir" ]; then
    # the recorded run is an input: copied aside first, so -r may be -o
    rec=$recdir/$name/measured.db
    if [ ! -f "$rec" ]; then
      echo "fidelity_gate: $name: no recorded run $rec"
      status=1
      continue
    fi
    if [ "$rec" != "$d/recorded.db" ]; then
      rm -f "$d/recorded.db-wal" "$d/recorded.db-shm"
      cp "$rec" "$d/recorded.db.tmp" || exit 2
      for x in wal shm; do
        [ -f "$rec-$x" ] && { cp "$rec-$x" "$d/recorded.db.tmp-$x" || exit 2; }
      done
      for x in "" -wal -shm; do
        [ -f "$d/recorded.db.tmp$x" ] && mv "$d/recorded.db.tmp$x" "$d/recorded.db$x"
      done
    fi
  fi
  rm -f "$d/model.db" "$d/measured.db" "$d/measured.db-wal" "$d/measured.db-shm"
  echo "fidelity_gate: $name: model clock (backend model)"
  # shellcheck disable=SC2086 # $setgpu is empty or one --set
  if ! run "$d/model.log" "$bin" replay "$scn" $setgpu --db "$d/model.db" --quiet --no-plots; then
    if grep -q 'E_SCN_TRACE_FILE' "$d/model.log"; then
      echo "fidelity_gate: $name: skipped, its trace is missing ($(tail -1 "$d/model.log"))"
      continue
    fi
    echo "fidelity_gate: $name: model-clock replay failed: $(tail -1 "$d/model.log")"
    status=1
    continue
  fi
  if [ -n "$recdir" ]; then
    echo "fidelity_gate: $name: measured clock (recorded, --clock-from $rec)"
    set -- --backend model --clock-from "$d/recorded.db"
  else
    echo "fidelity_gate: $name: measured clock ($mopts)"
    # shellcheck disable=SC2086 # $mopts: options, split on purpose
    set -- $mopts
  fi
  if ! run "$d/measured.log" "$bin" replay "$scn" $setgpu "$@" \
    --clock measured --db "$d/measured.db" --quiet --no-plots; then
    echo "fidelity_gate: $name: measured-clock replay failed: $(tail -1 "$d/measured.log")"
    status=1
    continue
  fi
  # per iteration: the profile's prediction of each span it measured
  read -r imape ip90 ni <<EOF
$(relq "$d/measured.db" "SELECT abs(model_ns - measured_ns) * 1.0 / measured_ns AS rel FROM iterations WHERE result = 'ok' AND measured_ns > 0" | tr '|' ' ')
EOF
  row "$name" "iteration MAPE ($ni)" "$imape" 5
  row "$name" "iteration p90" "$ip90" 10
  for k in ttft_p50_ms ttft_p99_ms tbt_p50_ms tbt_p99_ms; do
    m=$(sqlite3 -batch "$d/model.db" "SELECT value FROM runs_summary WHERE key = '$k'")
    x=$(sqlite3 -batch "$d/measured.db" "SELECT value FROM runs_summary WHERE key = '$k'")
    v=$(awk -v m="$m" -v x="$x" 'BEGIN { if (x + 0 > 0 && m != "") printf "%.2f", 100 * (m > x ? m - x : x - m) / x }')
    row "$name" "$k" "$v" 5
  done
  read -r lmape _ nl <<EOF
$(relq "$d/measured.db" "SELECT abs(model_ns - measured_ns) * 1.0 / measured_ns AS rel FROM loads WHERE kind IN ('load', 'restore') AND measured_ns > 0" | tr '|' ' ')
EOF
  if [ "${nl:-0}" -gt 0 ]; then
    row "$name" "load MAPE ($nl)" "$lmape" 5
  fi
  if "$bin" fidelity --help >/dev/null 2>&1; then
    "$bin" fidelity "$d/measured.db" --out "$d/fidelity" >"$d/fidelity.txt" 2>&1 ||
      echo "fidelity_gate: $name: lorasim fidelity failed: $(tail -1 "$d/fidelity.txt")"
  fi
done
cat "$md"
[ $status -eq 0 ] && echo "fidelity_gate: every target met" ||
  echo "fidelity_gate: some target missed (or a replay failed): see $csv"
exit $status
