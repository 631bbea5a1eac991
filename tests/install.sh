#!/bin/sh
# install.sh CMAKE BUILDDIR WORKDIR: `cmake --install BUILDDIR --prefix P`
# into an empty prefix under WORKDIR puts lorasim in P/bin and nothing
# surprising anywhere (with CUDA, also P/libexec/lorasim/bench_kernels),
# and the installed binary runs: --help and version.
set -eu
cmake=$1 build=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log"
found=$(cd "$prefix" && find . -type f -o -type l | sed 's|^\./||' | sort)
want="bin/lorasim"
if [ -f "$build/bench_kernels" ]; then
  want="bin/lorasim
libexec/lorasim/bench_kernels"
fi
if [ "$found" != "$want" ]; then
  echo "install: expected exactly:" $want >&2
  echo "install: found:" $found >&2
  exit 1
fi
[ -x "$prefix/bin/lorasim" ] || { echo "install: bin/lorasim is not executable" >&2; exit 1; }
out=$("$prefix/bin/lorasim" --help)
printf '%s\n' "$out" | grep -q '^usage: lorasim COMMAND' || {
  echo "install: PREFIX/bin/lorasim --help printed: $out" >&2
  exit 1
}
"$prefix/bin/lorasim" version | grep -q '^lorasim [0-9]' || {
  echo "install: PREFIX/bin/lorasim version failed" >&2
  exit 1
}
echo "install: $want"
