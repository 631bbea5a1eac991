#!/bin/sh
# tools/check_layers.sh: check the house's layers (docs/ARCHITECTURE.md,
# "Layers") from the #include lines of the product sources.
#
#   sh tools/check_layers.sh [--graph] [ROOT]
#
# ROOT is the tree to check (default: the checkout holding this script).
# The files are every tracked .c/.h/.cu/.cuh (`git ls-files`; `find` when
# ROOT is not a git checkout) outside tests/, fuzz/ and tools/.
#
# The graph.  A node is a module: a file path without its extension, so
# foo.c and foo.h are one node (a call from foo.c is an arrow of module
# foo).  A private header, DIR/internal.h or DIR/NAME_impl.h, is no module
# of its own: it is the private half of the module of DIR whose header it
# includes first (traces/internal.h, shared by the trace sources, belongs
# to traces/trace; engine/engine_impl.h, shared by the engine core and its
# extensions, belongs to engine/engine).
# `#include "x"` is resolved as the compiler does: beside the including
# file first, then from ROOT (the one -I of the build); an include that
# names no file of the tree (a system or toolkit header) is no arrow.
#
# The checks.
#   (a) Every arrow between two rooms must go down: a module's room may
#       see only the rooms that ROOMS below lists for it.  A module in no
#       room is reported too.
#   (b) No cycle between modules: the arrows go through tsort(1), which
#       reports the loops it finds.
# Each violation is printed on its own line; the exit status is 1 when
# there is any, 2 when the check cannot run, 0 otherwise.  --graph prints
# the module arrows ("from to", one a line) and exits.
#
# KNOWN lists arrows that close a cycle today and are being removed on
# another branch.  A known arrow is reported ("known:") and left out of
# both checks; a known arrow the tree no longer has fails the check, so the
# list is emptied as soon as its issue is fixed.  LSIM_LAYERS_KNOWN in the
# environment, when set, replaces the list (the self-test uses it).

set -u

# room: the rooms it may see, besides itself (longest folder prefix wins;
# engine/policy is part of engine).  Keep docs/ARCHITECTURE.md in step.
ROOMS='
base
engine            base
backends          engine base
backends/cpu_ref  backends engine base
backends/cuda     backends/cpu_ref backends engine base
compress          engine base
traces            engine base
testsupport       sim traces compress backends/cuda backends/cpu_ref backends engine base
sim               traces compress backends/cuda backends/cpu_ref backends engine base
'

# from-module to-module reason
KNOWN_DEFAULT='
'

graph_only=0
if [ "${1:-}" = "--graph" ]; then
  graph_only=1
  shift
fi
if [ $# -gt 1 ]; then
  echo "usage: sh tools/check_layers.sh [--graph] [ROOT]" >&2
  exit 2
fi
if [ $# -eq 1 ]; then
  root=$1
else
  root=$(dirname "$0")/..
fi
cd "$root" 2>/dev/null || { echo "check_layers: cannot enter $root" >&2; exit 2; }
command -v tsort >/dev/null 2>&1 || { echo "check_layers: tsort not found" >&2; exit 2; }

if [ "${LSIM_LAYERS_KNOWN+set}" = set ]; then
  KNOWN=$LSIM_LAYERS_KNOWN
else
  KNOWN=$KNOWN_DEFAULT
fi

if git rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
   [ "$(git rev-parse --show-prefix)" = "" ]; then
  files=$(git ls-files '*.c' '*.h' '*.cu' '*.cuh')
else
  files=$(find . -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \
            -o -name '*.cuh' \) | sed 's|^\./||' | LC_ALL=C sort)
fi
all=$files
files=$(printf '%s\n' "$files" | grep -v '^tests/\|^fuzz/\|^tools/' | grep -v '^$')
if [ -z "$files" ]; then
  echo "check_layers: no sources under $root" >&2
  exit 2
fi

# One awk pass: the first input is the list of every source (so that an
# arrow into tests/ or tools/ is seen too), then each file checked.
# Output lines: "EDGE from to", "VIOL text", "KNOWN text", "STALE text".
out=$(printf '%s\n' "$all" | ROOMS_TABLE=$ROOMS KNOWN_TABLE=$KNOWN \
  awk '
function norm(p,   n, a, i, k, o, s) {
  n = split(p, a, "/"); k = 0
  for (i = 1; i <= n; i++) {
    if (a[i] == "" || a[i] == ".") continue
    if (a[i] == "..") { if (k > 0) k--; else return "" ; continue }
    o[++k] = a[i]
  }
  s = ""
  for (i = 1; i <= k; i++) s = s (i > 1 ? "/" : "") o[i]
  return s
}
function dirof(p) { return p ~ /\// ? substr(p, 1, match(p, /\/[^\/]*$/) - 1) : "" }
function modof(p) { sub(/\.[^.\/]*$/, "", p); return p }
function room(m,   best, r) {
  best = ""
  for (r in SEES)
    if ((index(m, r "/") == 1) && length(r) > length(best)) best = r
  return best
}
BEGIN {
  n = split(ENVIRON["ROOMS_TABLE"], L, "\n")
  for (i = 1; i <= n; i++) {
    k = split(L[i], w, /[ \t]+/)
    j = 1; while (j <= k && w[j] == "") j++
    if (j > k) continue
    r = w[j]; SEES[r] = " "
    for (j++; j <= k; j++) if (w[j] != "") SEES[r] = SEES[r] w[j] " "
  }
  n = split(ENVIRON["KNOWN_TABLE"], L, "\n")
  for (i = 1; i <= n; i++) {
    if (L[i] ~ /^[ \t]*$/) continue
    k = split(L[i], w, /[ \t]+/)
    j = 1; while (w[j] == "") j++
    key = w[j] " " w[j + 1]; why = ""
    for (j += 2; j <= k; j++) why = why (why == "" ? "" : " ") w[j]
    KNOWN[key] = why; nknown++
  }
}
NR == FNR { TRACKED[$0] = 1; order[++nfiles] = $0; next }
FNR == 1 { cur = FILENAME; d = dirof(cur) }
/^[ \t]*#[ \t]*include[ \t]*"/ {
  inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*$/, "", inc)
  t = norm((d == "" ? "" : d "/") inc)
  if (!(t in TRACKED)) { t = norm(inc); if (!(t in TRACKED)) next }
  ne++; EF[ne] = cur; ET[ne] = t; EL[ne] = FNR
}
END {
  # a private DIR/internal.h or DIR/NAME_impl.h joins the module of the
  # first DIR header it includes
  for (i = 1; i <= nfiles; i++) MOD[order[i]] = modof(order[i])
  for (e = 1; e <= ne; e++) {
    f = EF[e]
    if (f ~ /(^|\/)(internal|[^\/]*_impl)\.h$/ && !(f in JOINED) && dirof(ET[e]) == dirof(f) &&
        ET[e] ~ /\.(h|cuh)$/ && modof(ET[e]) != modof(f)) {
      JOINED[f] = 1; MOD[f] = modof(ET[e])
    }
  }
  for (e = 1; e <= ne; e++) {
    a = MOD[EF[e]]; b = MOD[ET[e]]
    if (a == b) continue
    key = a " " b
    if (key in SEEN) continue
    SEEN[key] = EF[e] ":" EL[e] " includes " ET[e]
    if (key in KNOWN) {
      print "KNOWN " a " -> " b " (" SEEN[key] "): " KNOWN[key]
      USED[key] = 1
      continue
    }
    print "EDGE " key
    ra = room(a); rb = room(b)
    if (ra == "" && !(a in NOROOM)) {
      NOROOM[a] = 1
      print "VIOL no room: " a " (" EF[e] ") is in no room of the layer table"
    }
    if (rb == "" && !(b in NOROOM)) {
      NOROOM[b] = 1
      print "VIOL no room: " b " (" ET[e] ") is in no room of the layer table"
    }
    if (ra != "" && rb != "" && ra != rb && index(SEES[ra], " " rb " ") == 0)
      print "VIOL upward or sideways arrow: " SEEN[key] ": room " ra " may not see room " rb
  }
  for (key in KNOWN)
    if (!(key in USED)) {
      split(key, w, " ")
      print "STALE known arrow " w[1] " -> " w[2] " is gone: remove it from KNOWN in tools/check_layers.sh"
    }
}' - $files) || { echo "check_layers: awk failed" >&2; exit 2; }

edges=$(printf '%s\n' "$out" | sed -n 's/^EDGE //p')
if [ "$graph_only" = 1 ]; then
  printf '%s\n' "$edges" | LC_ALL=C sort
  exit 0
fi

bad=0
viol=$(printf '%s\n' "$out" | sed -n 's/^VIOL //p')
if [ -n "$viol" ]; then
  printf '%s\n' "$viol" | LC_ALL=C sort | sed 's/^/layers: /'
  bad=1
fi

# (b) cycles.  GNU tsort prints "tsort: -: input contains a loop:" and then
# the loop's modules, each on a "tsort: NAME" line; other tsorts differ in
# the wording, so every stderr line is passed on, reworded where known.
loops=$(printf '%s\n' "$edges" | tsort 2>&1 >/dev/null)
if [ -n "$loops" ]; then
  printf '%s\n' "$loops" | awk '
    function flush() { if (c != "") print "layers: cycle: " c " -> " first; c = "" }
    /loop|cycle/ { flush(); next }
    { sub(/^tsort: /, ""); if (c == "") first = $0; c = c (c == "" ? "" : " -> ") $0 }
    END { flush() }'
  bad=1
fi

stale=$(printf '%s\n' "$out" | sed -n 's/^STALE //p')
if [ -n "$stale" ]; then
  printf '%s\n' "$stale" | sed 's/^/layers: /'
  bad=1
fi
printf '%s\n' "$out" | sed -n 's/^KNOWN /layers: known (not counted): /p'

nmod=$(printf '%s\n' "$edges" | tr ' ' '\n' | grep -v '^$' | LC_ALL=C sort -u | wc -l)
narr=$(printf '%s\n' "$edges" | grep -c .)
if [ "$bad" = 0 ]; then
  echo "layers: ok ($narr arrows between $nmod modules, no upward arrow, no cycle)"
fi
exit "$bad"
