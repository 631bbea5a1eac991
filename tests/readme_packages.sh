#!/bin/sh
# readme_packages.sh SRCDIR: the package list README.md's quick start gives
# ("It installs what is missing (a, b, c; ...") is exactly PACKAGES and
# PACKAGES_LEAN of tools/setup.sh, in either direction ($CLANG_RT is named
# libclang-rt-N-dev in the README).
set -eu
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# setup.sh: the words of PACKAGES="..." and PACKAGES_LEAN="..." (an
# assignment may continue over lines ending in a backslash)
awk '
  /^PACKAGES(_LEAN)?="/ { on = 1; sub(/^[A-Z_]*="/, "") }
  on { line = $0; sub(/\\$/, "", line); if (sub(/".*/, "", line)) on = 0
       n = split(line, w, /[ \t]+/)
       for (i = 1; i <= n; i++) if (w[i] != "") print w[i] }
' "$src/tools/setup.sh" | sed 's/^\$CLANG_RT$/libclang-rt-N-dev/' |
  sort -u >"$tmp/setup"
# README: the first word of each comma-separated item from "missing (" to ";"
tr '\n' ' ' <"$src/README.md" |
  sed -n 's/.*It installs what is missing (\([^;]*\);.*/\1/p' |
  tr ',' '\n' | awk '{ print $1 }' | grep . | sort -u >"$tmp/readme" || true
if [ ! -s "$tmp/setup" ] || [ ! -s "$tmp/readme" ]; then
  echo "readme_packages: could not read the lists" >&2
  exit 1
fi
if ! cmp -s "$tmp/setup" "$tmp/readme"; then
  echo "readme_packages: README.md and tools/setup.sh disagree" >&2
  echo "  only in tools/setup.sh:" $(comm -23 "$tmp/setup" "$tmp/readme") >&2
  echo "  only in README.md:" $(comm -13 "$tmp/setup" "$tmp/readme") >&2
  exit 1
fi
echo "readme_packages: $(wc -l <"$tmp/setup") packages, the same in both"
