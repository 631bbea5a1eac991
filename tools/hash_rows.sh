#!/bin/sh
# hash_rows.sh DB...: one SHA-256 per table of a lorasim run database, over
# rows read in a fixed order, so that two runs can be compared row for row
# (docs/BENCHMARKS.md, "Engine core and extensions").  A table the database
# lacks prints "absent".  iterations.backend_ns is left out: under the
# cpu_ref and cuda backends it is measured wall time, not a simulated fact.
# The iterations columns are named, so schema 6's model_ns, measured_ns and
# ctx_tokens (and its loads table) are left out too: a version-6 database
# hashes like the version-5 one of the same run (docs/FIDELITY.md).  Under
# --clock measured the ticks themselves are measured and differ per run.
# The tables are hashed through their views: schema 7 keeps most events in
# iteration_log (docs/SCHEMA.md, "Events kept in iteration_log"), and a
# version-7 database hashes like the version-6 one of the same run.
set -eu
if [ $# -lt 1 ]; then
  echo "usage: tools/hash_rows.sh DB..." >&2
  exit 2
fi
for db in "$@"; do
  if [ ! -f "$db" ]; then
    echo "hash_rows: $db: no such file" >&2
    exit 1
  fi
  for q in \
    "events|select * from events order by run_id, seq" \
    "iterations|select run_id, iter, worker, start_tick, end_tick, prefill_rows, decode_rows, prefill_reqs, decode_reqs, distinct_adapters, segments, true_rank_rows, padded_rank_rows, result from iterations order by run_id, iter" \
    "requests|select * from requests order by run_id, request" \
    "runs_summary|select * from runs_summary order by run_id, key" \
    "starvation|select * from starvation order by run_id, worker, entity, start_tick, kind"; do
    t=${q%%|*}
    sql=${q#*|}
    if [ -z "$(sqlite3 "$db" "select name from sqlite_master where name = '$t'")" ]; then
      h=absent
    else
      h=$(sqlite3 -batch "$db" "$sql" | sha256sum | cut -c1-16)
    fi
    printf '%s %-12s %s\n' "$(basename "$db")" "$t" "$h"
  done
done
