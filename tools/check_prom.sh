#!/bin/sh
# check_prom.sh FILE...: the naming and shape rules lorasim's .prom files
# keep (docs/SCHEMA.md, "The metrics file"), checked without promtool, so a
# machine without the prometheus package still catches the mistakes promtool
# would report (and a few it does not):
#
#   - every metric name starts with lorasim_ (once) and is [a-z0-9_]
#   - every family has one non-empty HELP and one TYPE line, before its
#     first sample; its samples are contiguous
#   - a counter ends in _total; nothing else does
#   - a summary has NAME_sum and NAME_count; its other samples carry a
#     quantile label; a histogram has NAME_bucket (with le="+Inf"), NAME_sum
#     and NAME_count; no other type uses those suffixes, quantile or le
#   - base units only: no _ms, _milliseconds, _us, _ns, _minutes, _hours,
#     _kb, _mb, _kilobytes, _megabytes, _gigabytes, _percent in a name
#   - every value is a number (or +Inf, -Inf, NaN)
#
# Prints FILE:LINE: message for each finding; exit 0 clean, 1 findings,
# 2 usage or an unreadable file.
set -eu
if [ $# -lt 1 ]; then
  echo "usage: tools/check_prom.sh FILE..." >&2
  exit 2
fi
for f in "$@"; do
  if [ ! -f "$f" ] || [ ! -r "$f" ]; then
    echo "check_prom: $f: cannot read" >&2
    exit 2
  fi
done
awk '
function bad(msg) { printf "%s:%d: %s\n", FILENAME, FNR, msg; nbad++ }
function badname(n,   u, i) {
  if (n !~ /^lorasim_[a-z0-9_]+$/) return "not lorasim_[a-z0-9_]+"
  if (n ~ /^lorasim_lorasim_/) return "lorasim_ prefix twice"
  u = "_ms _milliseconds _us _microseconds _ns _nanoseconds _minutes _hours _days _kb _mb _gb _kilobytes _megabytes _gigabytes _percent"
  split(u, units, " ")
  for (i in units)
    if (index(n "_", units[i] "_")) return "not in base units (" units[i] ")"
  return ""
}
# the family a sample belongs to, by its name and the declared types
function family(n) {
  if (n in type) return n
  if (n ~ /_sum$/ && (substr(n, 1, length(n) - 4) in type)) return substr(n, 1, length(n) - 4)
  if (n ~ /_count$/ && (substr(n, 1, length(n) - 6) in type)) return substr(n, 1, length(n) - 6)
  if (n ~ /_bucket$/ && (substr(n, 1, length(n) - 7) in type)) return substr(n, 1, length(n) - 7)
  return ""
}
function finish_file(   n) {
  for (n in type) {
    if (!(n in help)) { printf "%s: %s: no HELP line\n", fname, n; nbad++ }
    if (type[n] == "summary" || type[n] == "histogram") {
      if (!((n "_sum") in seen)) { printf "%s: %s: %s without %s_sum\n", fname, n, type[n], n; nbad++ }
      if (!((n "_count") in seen)) { printf "%s: %s: %s without %s_count\n", fname, n, type[n], n; nbad++ }
    }
    if (type[n] == "histogram" && !(n in inf)) { printf "%s: %s: histogram without le=\"+Inf\"\n", fname, n; nbad++ }
  }
  for (n in type) delete type[n]
  for (n in help) delete help[n]
  for (n in seen) delete seen[n]
  for (n in done) delete done[n]
  for (n in inf) delete inf[n]
  cur = ""
}
FNR == 1 { if (fname != "") finish_file(); fname = FILENAME }
/^[ \t]*$/ { next }
/^# HELP / {
  n = $3; text = $0; sub(/^# HELP [^ ]+ ?/, "", text)
  if ((m = badname(n)) != "") bad(n ": " m)
  if (n in help) bad(n ": two HELP lines")
  if (text == "") bad(n ": empty HELP text")
  if (n in seen) bad(n ": HELP after its samples")
  help[n] = 1
  next
}
/^# TYPE / {
  n = $3; t = $4
  if ((m = badname(n)) != "") bad(n ": " m)
  if (n in type) bad(n ": two TYPE lines")
  if (t !~ /^(counter|gauge|summary|histogram|untyped)$/) bad(n ": unknown type \"" t "\"")
  if (n in seen) bad(n ": TYPE after its samples")
  if (t == "counter" && n !~ /_total$/) bad(n ": a counter name must end in _total")
  if (t != "counter" && n ~ /_total$/) bad(n ": a " t " name must not end in _total")
  if (t != "summary" && t != "histogram" && n ~ /_(sum|count|bucket)$/) bad(n ": a " t " name must not end in _sum, _count or _bucket")
  type[n] = t
  next
}
/^#/ { next }
{
  line = $0
  n = line; sub(/[{ ].*/, "", n)
  labels = ""
  if (substr(line, length(n) + 1, 1) == "{") {
    labels = substr(line, length(n) + 2); sub(/}.*/, "", labels)
  }
  v = line; sub(/^.*[} ] */, "", v); sub(/ .*/, "", v)
  if (v !~ /^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/ && v !~ /^([-+]Inf|NaN)$/)
    bad(n ": value \"" v "\" is not a number")
  fam = family(n)
  if (fam == "") { bad(n ": sample without a TYPE line before it"); next }
  if (fam != cur) {
    if (fam in done) bad(fam ": samples not contiguous")
    if (cur != "") done[cur] = 1
    cur = fam
  }
  seen[n] = 1
  t = type[fam]
  if (n != fam && t != "summary" && t != "histogram") bad(n ": a " t " has no " substr(n, length(fam) + 1) " samples")
  if (n == fam "_bucket" && t == "summary") bad(n ": a summary has no _bucket samples")
  hasq = index("," labels, ",quantile=") > 0
  hasle = index("," labels, ",le=") > 0
  if (t == "summary" && n == fam && !hasq) bad(n ": summary sample without a quantile label")
  if (t != "summary" && hasq) bad(n ": quantile label outside a summary")
  if (t == "histogram" && n == fam) bad(n ": histogram sample must be " fam "_bucket, _sum or _count")
  if (t == "histogram" && n == fam "_bucket") {
    if (!hasle) bad(n ": bucket without an le label")
    if (index(labels, "le=\"+Inf\"")) inf[fam] = 1
  }
  if (t != "histogram" && hasle) bad(n ": le label outside a histogram")
}
END {
  if (fname != "") finish_file()
  exit nbad > 0
}
' "$@"
