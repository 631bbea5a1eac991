#!/bin/sh
# tools/count_malformed.sh: count the malformed-input cases of the test
# suites by mechanism family (docs/RELIABILITY.md).
#
#   sh tools/count_malformed.sh [--markdown]
#
# Unit counted: one source line of tests/test_*.c that names an expected
# stable error code -- `LSIM_E_X` or the string "E_X" -- outside a
# `return`, `case` or `#define` (a case-table row, or an assertion that a
# mutated input fails with that code).  A line counts once, under its
# first code.  A case generated in a loop counts once, so the figures are
# a lower bound on the cases run.  The code names the family:
#
#   identity                  E_ID_* (not shard/layout/cache)
#   segmented tensors         E_PLAN_* row/segment/pointer/ledger codes,
#                             E_SHAPE, E_SCATTER, E_BASE_DELTA, E_RATIONAL,
#                             E_ZERO_DENOM, E_OVERFLOW, E_REF_*, ...
#   mixed phase and rank      E_PLAN_{EMPTY_PREFILL,DECODE_ROWS,PHASE_ORDER,
#                             PACKED_ORDER,RANK,RANK_SLOT,BUCKET,FIXED_RANK},
#                             E_SLOT_RANK
#   residency and admission   E_RES_ pool/ownership/txn/eligibility codes,
#                             E_NOSPACE
#   TP and compression        E_ID_SHARD_*, E_ID_LAYOUT_*, E_TP_*, E_CMP_*
#   lifecycle and hotswap     E_RES_ publish/digest/generation/shadow/
#                             retiring/merge codes
#   adapter/KV/prefix         E_RES_GROWTH, E_ID_*CACHE*, E_KV_*
#   scheduler and recovery    E_POLICY, E_STATE, E_SCN_POLICY, E_INTERRUPTED,
#                             E_LOG_* of the event-log audit (order, requests,
#                             iterations, service, loads, rollback, records)
#   (lifecycle, also)         E_LOG_{LEASE,HOTSWAP_ORDER,CATALOG,RECLAIM,
#                             PUBLISH_ORDER}
#   (residency, also)         E_LOG_KV_ORPHAN
#   backend representations   E_REPR_*, E_PATH_MISMATCH, E_BACKEND,
#                             E_ID_KERNEL_ABI, E_RES_KERNEL_ABI, E_DEV_*,
#                             E_CLAIM_* (the loop-10 claim ceiling)
#   (input formats)           E_SCN_*, E_TRACE_*, E_EXEC_*, E_USAGE, E_IO, ...
set -eu
cd "$(dirname "$0")/.."
md=0
[ "${1:-}" = --markdown ] && md=1
awk -v md=$md '
function family(c) {
  if (c ~ /^E_ID_(SHARD|LAYOUT)/ || c ~ /^E_(TP|CMP)_/) return 5
  if (c ~ /^E_KV_/) return 7
  if (c ~ /^E_DEV_/) return 9
  if (c ~ /^E_ID_.*CACHE/) return 7
  if (c ~ /^E_(ID_KERNEL_ABI|RES_KERNEL_ABI)$/) return 9
  if (c ~ /^E_ID_/) return 1
  if (c ~ /^E_(PLAN_(EMPTY_PREFILL|DECODE_ROWS|PHASE_ORDER|PACKED_ORDER|RANK|RANK_SLOT|BUCKET|FIXED_RANK)|SLOT_RANK)$/) return 3
  if (c ~ /^E_PLAN_/) return 2
  if (c ~ /^E_(SHAPE|ORIENTATION|SCALE_PLACEMENT|PAD_NONZERO|SCATTER|BASE_DELTA|OVERFLOW|RATIONAL|ZERO_DENOM|REF_.*)$/) return 2
  if (c ~ /^E_RES_GROWTH$/) return 7
  if (c ~ /^E_RES_(ILLEGAL|NOSPACE|NOT_ELIGIBLE|OWNERSHIP|DOUBLE_OWNER|CONSERVATION|REFCOUNT|LEAK|DUP_VICTIM|LIVE_LAUNCH|INFLIGHT|PINNED|QUEUED|TXN|BACKWARD)$/ || c == "E_NOSPACE") return 4
  if (c ~ /^E_RES_/) return 6
  if (c ~ /^E_LOG_(LEASE|HOTSWAP_ORDER|CATALOG|RECLAIM|PUBLISH_ORDER)$/) return 6
  if (c == "E_LOG_KV_ORPHAN") return 4
  if (c ~ /^E_LOG_/) return 8
  if (c ~ /^E_CLAIM_/) return 9
  if (c ~ /^E_(POLICY|STATE|SCN_POLICY|INTERRUPTED)$/) return 8
  if (c ~ /^E_(REPR_.*|PATH_MISMATCH|BACKEND|SCN_BACKEND)$/) return 9
  return 10
}
BEGIN {
  split("identity|segmented tensors|mixed phase and rank|residency and admission|TP and compression|lifecycle and hotswap|adapter/KV/prefix|scheduler and recovery|backend representations|(input formats: scenario, trace, exec)", name, "|")
}
/return[ \t]+LSIM_E_|case[ \t]+LSIM_E_|#define/ { next }
{
  if (match($0, /LSIM_E_[A-Z0-9_]+/)) c = substr($0, RSTART + 5, RLENGTH - 5)
  else if (match($0, /"E_[A-Z0-9_]+"/)) c = substr($0, RSTART + 1, RLENGTH - 2)
  else next
  if (c == "E_BUG" || c == "E_NOMEM") next
  f = family(c)
  n[f]++
  file = FILENAME; sub(/^tests\//, "", file)
  per[f, file]++
  if (!((f, file) in seen)) { seen[f, file] = 1; files[f] = files[f] (files[f] ? ", " : "") file }
}
END {
  total = 0
  if (md) print "| family | cases | test files (cases) |\n| --- | ---: | --- |"
  for (f = 1; f <= 10; f++) {
    s = ""
    k = split(files[f], fl, ", ")
    for (i = 1; i <= k; i++) s = s (i > 1 ? ", " : "") fl[i] " (" per[f, fl[i]] ")"
    if (md) printf "| %s | %d | %s |\n", name[f], n[f], s ? s : "none yet"
    else printf "%-40s %5d  %s\n", name[f], n[f], s
    if (f <= 9) total += n[f]
  }
  if (md) printf "| **nine families** | **%d** | target 553 |\n", total
  else printf "%-40s %5d  (target 553)\n", "nine families", total
}' tests/test_*.c
