#!/bin/sh
# tools/setup.sh: set up a fresh Debian/Ubuntu machine and build lorasim.
#
#   sh tools/setup.sh quickstart   install what is missing, build (Release),
#                                  replay scenarios/quickstart.json
#   sh tools/setup.sh test         install what is missing, build (Release),
#                                  run every test; then build with
#                                  ASan+UBSan (gcc) and run every test
#                                  again; then with clang's ASan+UBSan
#                                  +float-cast-overflow, and again
#   sh tools/setup.sh build        install and build only
#
# Build folders: build/ (Release), build-asan/ (gcc sanitizers) and
# build-ubsan/ (clang sanitizers: float-cast-overflow, which gcc lacks).
set -eu

cd "$(dirname "$0")/.."

# clang's sanitizer runtimes come in a package named after clang's major
# version (Debian 12: 14, Ubuntu 24.04: 18): read it off the clang that is
# installed, else the one apt would install.
clang_major() {
  if command -v clang >/dev/null 2>&1; then
    clang -dumpversion | cut -d. -f1
  else
    apt-cache policy clang 2>/dev/null |
      sed -n 's/.*Candidate: *\([0-9]*:\)\{0,1\}\([0-9][0-9]*\).*/\2/p'
  fi
}
CLANG_RT="libclang-rt-$(clang_major | grep . || echo 14)-dev"

PACKAGES="cmake gcc clang $CLANG_RT make pkg-config libsqlite3-dev sqlite3 libcjson-dev \
libssl-dev libcriterion-dev libgmp-dev liblapacke-dev gnuplot-nox \
openmpi-bin libopenmpi-dev"
# Installed without their recommended packages: prometheus is here for
# promtool alone (the prom_promtool test checks every .prom file with it;
# Debian has no smaller package that carries it), not for its node exporter.
PACKAGES_LEAN="prometheus"

install_missing() {
  missing=""
  for p in $PACKAGES; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
  done
  lean=""
  for p in $PACKAGES_LEAN; do
    dpkg -s "$p" >/dev/null 2>&1 || lean="$lean $p"
  done
  [ -z "$missing$lean" ] && return 0
  echo "setup: installing:$missing$lean"
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || {
      echo "setup: need root or sudo to install:$missing" >&2
      exit 1
    }
    sudo="sudo"
  fi
  $sudo apt-get update -qq
  if [ -n "$missing" ]; then
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing
  fi
  if [ -n "$lean" ]; then
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
      --no-install-recommends $lean
  fi
}

jobs() { nproc 2>/dev/null || echo 2; }

build_release() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
  cmake --build build -j "$(jobs)"
}

build_asan() {
  # CUDA stays out of the sanitizer build: ASan and the CUDA runtime do not
  # share an address space peacefully; the Release build compiles it.
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DLSIM_SANITIZE=ON \
    -DLSIM_CUDA=OFF
  cmake --build build-asan -j "$(jobs)"
}

build_ubsan() {
  # clang: -fsanitize=address,undefined,float-cast-overflow (CMakeLists.txt,
  # LSIM_SANITIZE); a double converted to an integer it does not fit fails
  # the test.  engine/merge.c (_Float16) is compiled by gcc there.
  CC=clang cmake -S . -B build-ubsan -DCMAKE_BUILD_TYPE=Debug \
    -DLSIM_SANITIZE=ON -DLSIM_CUDA=OFF
  cmake --build build-ubsan -j "$(jobs)"
}

cmd="${1:-quickstart}"
install_missing
case "$cmd" in
build)
  build_release
  ;;
quickstart)
  build_release
  ./build/lorasim replay scenarios/quickstart.json
  ;;
test)
  build_release
  ctest --test-dir build --output-on-failure -j "$(jobs)"
  build_asan
  ctest --test-dir build-asan --output-on-failure -j "$(jobs)"
  build_ubsan
  ctest --test-dir build-ubsan --output-on-failure -j "$(jobs)"
  ;;
*)
  echo "usage: sh tools/setup.sh [quickstart|test|build]" >&2
  exit 2
  ;;
esac
