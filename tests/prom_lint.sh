#!/bin/sh
# prom_lint.sh MODE LORASIM SRCDIR WORKDIR: the .prom files lorasim writes,
# checked by tools/check_prom.sh and by promtool (docs/SCHEMA.md, "The
# metrics file").  CTest runs it three times, sharing WORKDIR:
#
#   make      replay the quickstart, compare three schedulers on it (one
#             .prom per arm) and replay tests/fixtures/prom/multi.json (two
#             workers, three tenants, the prefix cache, a compressed
#             collection, SLO targets, early abort, preemption)
#   check     tools/check_prom.sh on every one of them
#   promtool  `promtool check metrics` on every one of them: no finding at
#             all; exit 77 (skipped) when promtool is not installed
set -eu
mode=$1 bin=$2 src=$3 work=$4

files() {
  set -- "$work"/*.prom "$work"/cmp/*.prom
  # 2 replays + 3 compare arms: fewer means a run did not write its file
  if [ $# -ne 5 ] || [ ! -f "$1" ]; then
    echo "prom_lint: expected 5 .prom files under $work, found: $*" >&2
    exit 1
  fi
  echo "$@"
}

case "$mode" in
make)
  rm -rf "$work"
  mkdir -p "$work"
  "$bin" replay "$src/scenarios/quickstart.json" --db "$work/quickstart.db" \
    --no-plots --quiet
  "$bin" compare "$src/scenarios/quickstart.json" \
    --schedulers fcfs,vtc,deficit_aging --out "$work/cmp" --no-plots >/dev/null
  "$bin" replay "$src/tests/fixtures/prom/multi.json" --db "$work/multi.db" \
    --no-plots --quiet
  # the multi fixture must reach the optional families it is there for
  for m in lorasim_prefix_lookups_total lorasim_adapter_basis_loads_total \
           lorasim_slo_ttft_attainment_ratio lorasim_requests_preempted_total; do
    grep -q "^$m " "$work/multi.prom" || {
      echo "prom_lint: $work/multi.prom has no $m" >&2
      exit 1
    }
  done
  files >/dev/null
  ;;
check)
  # shellcheck disable=SC2046 # the paths are ours, without blanks
  sh "$src/tools/check_prom.sh" $(files)
  echo "check_prom: $(files | wc -w) files clean"
  ;;
promtool)
  if ! command -v promtool >/dev/null 2>&1; then
    echo "prom_lint: promtool not found (Debian package prometheus, in" \
         "tools/setup.sh); skipped" >&2
    exit 77
  fi
  bad=0
  for f in $(files); do
    # promtool exits 0 with no output for a clean file, 3 with one line per
    # lint finding, 1 when it cannot parse the file
    if ! out=$(promtool check metrics <"$f" 2>&1) || [ -n "$out" ]; then
      echo "promtool: $f:" >&2
      echo "$out" >&2
      bad=1
    fi
  done
  [ "$bad" = 0 ] && echo "promtool: $(files | wc -w) files clean"
  exit "$bad"
  ;;
*)
  echo "usage: prom_lint.sh make|check|promtool LORASIM SRCDIR WORKDIR" >&2
  exit 2
  ;;
esac
