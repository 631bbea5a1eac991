#!/bin/sh
# schema_examples.sh LORASIM SRCDIR WORKDIR: the example queries of
# docs/SCHEMA.md run as written.  The quickstart is replayed in WORKDIR with
# its default database path; the page's `sqlite3 ... results/X.db` command
# must name that very file, and every ```sql block of its "Example queries"
# must run on it without an error (the ATTACH example gets a copy as results/run-b.db).
set -eu
bin=$1 src=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
cd "$work"
"$bin" replay "$src/scenarios/quickstart.json" --no-plots --quiet
db=$(sed -n 's/^sqlite3 .* \(results\/[^ ]*\.db\) .*/\1/p' "$src/docs/SCHEMA.md" |
     head -1)
if [ -z "$db" ] || [ ! -f "$db" ]; then
  echo "schema_examples: docs/SCHEMA.md names '$db', which the quickstart" \
       "does not write (it wrote: $(ls results/*.db))" >&2
  exit 1
fi
cp "$db" results/run-b.db
# the blocks of the "## Example queries" section only (the page also shows
# the DDL of its views)
awk -v dir="$work" '
  /^## / { ex = ($0 == "## Example queries") }
  !ex { next }
  /^```sql/ { n++; f = dir "/q" n ".sql"; on = 1; next }
  /^```/ { if (on) close(f); on = 0; next }
  on { print > f }
' "$src/docs/SCHEMA.md"
n=0
for q in q*.sql; do
  [ -f "$q" ] || break
  if ! out=$(sqlite3 -bail -readonly "$db" <"$q" 2>&1) ||
     printf '%s\n' "$out" | grep -q '^\(Parse \)\{0,1\}[Ee]rror'; then
    echo "schema_examples: $q failed:" >&2
    cat "$q" >&2
    echo "$out" >&2
    exit 1
  fi
  n=$((n + 1))
done
if [ "$n" -lt 5 ]; then
  echo "schema_examples: only $n sql blocks found in docs/SCHEMA.md" >&2
  exit 1
fi
echo "schema_examples: $db and $n example queries ok"
