#!/bin/sh
# tools/valgrind_cli.sh: the main CLI commands under valgrind memcheck.
#
#   sh tools/valgrind_cli.sh [LORASIM] [WORKDIR]
#
# LORASIM defaults to build/lorasim (any non-sanitizer build; build with
# -DCMAKE_BUILD_TYPE=RelWithDebInfo for file:line in reports).  Every
# command runs under
#   valgrind --leak-check=full --errors-for-leak-kinds=definite,indirect,possible
#            --error-exitcode=9
# and must exit with its own expected status (never 9): no invalid read or
# write, no use of uninitialised values, no definite, indirect or possible
# leak.  Prints one line per command and a total; exits 1 if any failed.
# Logs: WORKDIR/NN.log (default build/valgrind).
set -u
cd "$(dirname "$0")/.."
bin=${1:-build/lorasim}
w=${2:-build/valgrind}
command -v valgrind >/dev/null || { echo "valgrind: not installed"; exit 1; }
rm -rf "$w" && mkdir -p "$w"
n=0 bad=0
vg() { # expected-status description -- command...
  want=$1 what=$2
  shift 3
  n=$((n + 1))
  log=$(printf '%s/%02d.log' "$w" $n)
  valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect,possible \
    --error-exitcode=9 --log-file="$log" "$bin" "$@" >"$log.out" 2>&1
  st=$?
  errs=$(grep -c '^==[0-9]*== ' "$log")
  if [ $st -eq "$want" ] && [ "$errs" -eq 0 ]; then
    printf 'ok    %-58s exit %d\n' "$what" $st
  else
    bad=$((bad + 1))
    printf 'FAIL  %-58s exit %d (want %d), %s valgrind lines: %s\n' \
      "$what" $st "$want" "$errs" "$log"
  fi
}
S=scenarios T=tests/fixtures
vg 0 "replay quickstart (plots, prom)" -- replay $S/quickstart.json --db "$w/q.db" --quiet
vg 0 "replay tiny, fairness scheduler" -- replay $T/replay/tiny.json --db "$w/t.db" \
  --scheduler deficit_aging --no-plots --quiet
vg 0 "replay hotswap fixture" -- replay $T/replay/hotswap.json --db "$w/h.db" --no-plots --quiet
vg 0 "replay faults fixture" -- replay $T/replay/faults.json --db "$w/f.db" --no-plots --quiet
vg 0 "replay incremental KV, preemption" -- replay $T/replay/preempt-incremental.json \
  --db "$w/p.db" --no-plots --quiet
sqlite3 "$w/t.db" "UPDATE runs SET status='running'"
vg 0 "replay --resume (a run left 'running')" -- replay --resume "$w/t.db" --no-plots --quiet
vg 0 "replay --resume (already ok)" -- replay --resume "$w/t.db" --quiet
vg 2 "replay bad scenario (exit 2)" -- replay $T/scenarios/bad_json.json --db "$w/b.db" --quiet
vg 2 "replay bad trace row (exit 2)" -- replay $T/replay/bad_trace.json --db "$w/bt.db" --quiet
vg 0 "compare tiny fcfs,deficit_aging,vtc" -- compare $T/replay/tiny.json \
  --schedulers fcfs,deficit_aging,vtc --out "$w/cmp"
vg 0 "exec spec example, every cpu_ref path" -- exec --in $T/exec/spec_example.json --out "$w/x.json"
vg 0 "exec mixed five" -- exec --in $T/exec/mixed_five.json --out "$w/x5.json"
printf '{"d_in": 2, "d_out": 2, "W": [[1,2],[3,4]], "adapters": [], "requests": [{"id": "a", "phase": "decode", "x": [[1,"1/0"]]}]}' >"$w/bad_exec.json"
vg 2 "exec bad rational (exit 2)" -- exec --in "$w/bad_exec.json"
vg 0 "trace stats azure" -- trace stats --format azure fuzz/corpus/azure/conv-head.csv
vg 0 "trace stats mooncake" -- trace stats --format mooncake fuzz/corpus/mooncake/conversation-head.jsonl
vg 0 "trace convert burstgpt -> jsonl" -- trace convert --format burstgpt \
  $T/traces/burstgpt.csv -o "$w/b.jsonl"
vg 0 "trace convert native csv, assigned" -- trace convert $T/traces/native.csv \
  --tenants 2 --adapters 8 --seed 3 -o "$w/n.csv"
vg 0 "trace stats --scenario quickstart (generator)" -- trace stats --scenario $S/quickstart.json
vg 0 "help" -- help
vg 0 "version" -- version
echo "valgrind: $n commands, $bad failed"
[ $bad -eq 0 ]
