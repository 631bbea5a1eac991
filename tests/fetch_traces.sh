#!/bin/sh
# tests/fetch_traces.sh SCRIPT WORKDIR: tools/fetch-traces.sh without a
# network.  Its arguments, its manifest, and its digest check through
# --from-dir: the Azure 2023 files copied from ../shared (skipped when
# absent) must arrive intact, a tampered copy must be refused and leave
# nothing behind, an unpinned file is taken with its digest printed.
set -eu
script=$1
work=$2
shared=$(cd "$(dirname "$script")/.." && pwd)/../shared/data/traces
rm -rf "$work"
mkdir -p "$work"
fail() { echo "fetch_traces: FAIL: $*" >&2; exit 1; }

# arguments
sh "$script" --help | grep -q 'fetch-traces.sh \[--dest DIR\]' || fail "--help"
set +e
sh "$script" --bogus >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown option: exit 2"
sh "$script" --dest "$work/x" nosuchset >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown set: exit 2"
sh "$script" --dest "$work/x" --from-dir "$work/none" azure-2023 >/dev/null 2>&1
[ $? -eq 2 ] || fail "missing --from-dir: exit 2"
sh "$script" --dest >/dev/null 2>&1; [ $? -eq 2 ] || fail "--dest without a value: exit 2"
set -e
[ ! -e "$work/x" ] || fail "a usage error created the destination"

# the manifest: every set, a URL naming a fixed commit or release, and a
# 64-digit digest or the word unpinned
sh "$script" --list > "$work/list"
for s in azure-2023 azure-2024 burstgpt mooncake servegen; do
  grep -q "^$s " "$work/list" || fail "--list lacks $s"
done
[ "$(grep -c '^servegen ' "$work/list")" -eq 43 ] || fail "servegen: 43 client files"
awk '$3 !~ /^https:\/\// ||
     ($4 != "unpinned" && (length($4) != 64 || $4 !~ /^[0-9a-f]+$/)) { bad = 1 }
     END { exit bad }' "$work/list" || fail "a manifest line is malformed"

# an unpinned file (Azure 2024) from a local mirror: taken, digest printed
mkdir -p "$work/mirror/azure-llm-2024"
printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n' > "$work/mirror/azure-llm-2024/AzureLLMInferenceTrace_code_1week.csv"
printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n' > "$work/mirror/azure-llm-2024/AzureLLMInferenceTrace_conv_1week.csv"
sum=$(sha256sum < "$work/mirror/azure-llm-2024/AzureLLMInferenceTrace_code_1week.csv" | cut -c1-64)
sh "$script" --dest "$work/d" --from-dir "$work/mirror" azure-2024 > "$work/out" ||
  fail "unpinned copy failed"
grep -q "unpinned (not verified here): sha256 $sum" "$work/out" || fail "unpinned digest not printed"
cmp -s "$work/mirror/azure-llm-2024/AzureLLMInferenceTrace_code_1week.csv" \
  "$work/d/azure-llm-2024/AzureLLMInferenceTrace_code_1week.csv" || fail "unpinned copy differs"

if [ ! -f "$shared/azure-llm-2023/AzureLLMInferenceTrace_conv.csv" ]; then
  echo "fetch_traces: no ../shared Azure trace, digest checks skipped"
  exit 0
fi
# pinned: the real files arrive intact and verified, read-only
sh "$script" --dest "$work/d" --from-dir "$shared" azure-2023 > "$work/out" || fail "pinned copy failed"
[ "$(grep -c 'sha256 verified' "$work/out")" -eq 2 ] || fail "two verified files expected"
for f in code conv; do
  cmp -s "$shared/azure-llm-2023/AzureLLMInferenceTrace_$f.csv" \
    "$work/d/azure-llm-2023/AzureLLMInferenceTrace_$f.csv" || fail "$f differs"
done
# a second run leaves verified files alone
sh "$script" --dest "$work/d" --from-dir "$shared" azure-2023 | grep -q 'already there' ||
  fail "a verified file was fetched again"

# tampered: one byte more in a mirror; refused, nothing kept, no temporary
mkdir -p "$work/bad/azure-llm-2023"
cp "$shared/azure-llm-2023/AzureLLMInferenceTrace_code.csv" "$work/bad/azure-llm-2023/"
cp "$shared/azure-llm-2023/AzureLLMInferenceTrace_conv.csv" "$work/bad/azure-llm-2023/"
chmod u+w "$work/bad/azure-llm-2023/"*.csv
printf '\n' >> "$work/bad/azure-llm-2023/AzureLLMInferenceTrace_conv.csv"
set +e
sh "$script" --dest "$work/e" --from-dir "$work/bad" azure-2023 > "$work/out" 2> "$work/err"
rc=$?
set -e
[ $rc -eq 1 ] || fail "a digest mismatch must exit 1 (got $rc)"
grep -q 'AzureLLMInferenceTrace_conv.csv: sha256 .*expected 2f1e5b66' "$work/err" || fail "mismatch message"
[ ! -e "$work/e/azure-llm-2023/AzureLLMInferenceTrace_conv.csv" ] || fail "a refused file was kept"
[ -f "$work/e/azure-llm-2023/AzureLLMInferenceTrace_code.csv" ] || fail "the good file was not fetched"
[ -z "$(ls -A "$work/e/azure-llm-2023" | grep '^\.fetch')" ] || fail "a temporary file was left"
# a tampered file already in place is replaced by a verified one
cp "$work/bad/azure-llm-2023/AzureLLMInferenceTrace_conv.csv" "$work/e/azure-llm-2023/"
sh "$script" --dest "$work/e" --from-dir "$shared" azure-2023 > /dev/null || fail "repair failed"
cmp -s "$shared/azure-llm-2023/AzureLLMInferenceTrace_conv.csv" \
  "$work/e/azure-llm-2023/AzureLLMInferenceTrace_conv.csv" || fail "not repaired"
echo "fetch_traces: ok"
