#!/bin/sh
# gpu_profile.sh: the cost profiles of issue 20 in one device call
# (docs/PROFILE.md, "Making the committed profiles").  It builds nothing.
#
# Here, after building lorasim with CUDA (cmake -S . -B build-cuda
# -DCMAKE_BUILD_TYPE=Release && cmake --build build-cuda -t lorasim):
#
#   sh tools/gpu_profile.sh stage build-cuda/lorasim /work/main/.carry/prof
#
# copies the binary, the shared libraries ldd names (not glibc's), the
# traces the held-out scenarios read and the commit into CARRY.  On the
# device (run: carry [".carry/prof"], timeout 600):
#
#   sh tools/gpu_profile.sh run .carry/prof
#
# profiles llama-3-8b and llama-3.2-1b (lorasim profile, --quick unless
# FULL=1), files each profile as profiles/CLASS/PRESET.json (the layout of
# profiles/ that $.gpu reads), runs tools/fidelity_gate.sh on the three
# held-out scenarios with the 8B profile (GATE=0 skips it), and leaves
# under $OUT: log (everything printed), profile-llama-3-8b.json,
# profile-llama-3.2-1b.json, gate.md, and results.tar.gz with the
# measurements (CSV), the profiles, the gate's CSV, logs and fidelity
# reports (the databases too with GATE_DBS=1).  Budgets: PROFILE_S seconds
# of measuring for the 8B shape (default 100; the small shape gets half),
# GATE_S seconds per gate replay (default 100), POOL_GIB the profiling
# pool (default lorasim profile's 24 GiB); the call as a whole stays
# under ten minutes with them.  To split it over two calls: GATE=0 first,
# then copy the returned profile-llama-3-8b.json to
# CARRY/profiles/CLASS/llama-3-8b.json and run
#
#   sh tools/gpu_profile.sh gate .carry/prof
#
# which runs only the gate, with the profiles under CARRY/profiles.
set -u
cmd=${1:-}
carry=${2:-}
case $cmd in
stage)
  bin=$2
  carry=${3:-}
  [ -x "$bin" ] && [ -n "$carry" ] || {
    echo "usage: gpu_profile.sh stage LORASIM CARRY_DIR" >&2
    exit 2
  }
  here=$(cd "$(dirname "$0")/.." && pwd)
  mkdir -p "$carry/bin" "$carry/lib" "$carry/shared/data/traces" || exit 1
  cp "$bin" "$carry/bin/lorasim" || exit 1
  command -v sqlite3 >/dev/null && cp "$(command -v sqlite3)" "$carry/bin/"
  for f in "$carry/bin/"*; do
    ldd "$f" 2>/dev/null | awk '/=> \// { print $3 }'
  done | sort -u | grep -v -e '/libc\.so' -e '/libm\.so' -e '/libpthread' \
    -e '/libdl\.so' -e '/librt\.so' -e '/ld-linux' -e '/libcuda\.so' |
    while read -r l; do cp -L "$l" "$carry/lib/"; done
  for t in azure-llm-2023/AzureLLMInferenceTrace_conv.csv \
    mooncake-fast25/conversation_trace.jsonl; do
    mkdir -p "$carry/shared/data/traces/$(dirname "$t")"
    cp "$here/../shared/data/traces/$t" "$carry/shared/data/traces/$t" 2>/dev/null ||
      echo "gpu_profile: no $t here: its gate scenario will be skipped" >&2
  done
  (cd "$here" && git rev-parse HEAD) >"$carry/COMMIT" 2>/dev/null || echo unknown >"$carry/COMMIT"
  du -sh "$carry"
  exit 0
  ;;
run | gate) ;;
*)
  echo "usage: gpu_profile.sh stage LORASIM CARRY_DIR | run CARRY_DIR | gate CARRY_DIR" >&2
  exit 2
  ;;
esac

[ -n "$carry" ] && [ -x "$carry/bin/lorasim" ] || {
  echo "gpu_profile: $carry/bin/lorasim missing (stage it first)" >&2
  exit 2
}
: "${OUT:?gpu_profile: OUT must name the folder to fill}"
carry=$(cd "$carry" && pwd)
export LD_LIBRARY_PATH="$carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="$carry/bin:$PATH"
bin=$carry/bin/lorasim
commit=$(cat "$carry/COMMIT" 2>/dev/null || echo unknown)
quick=--quick
[ "${FULL:-0}" = 1 ] && quick=
pbudget=${PROFILE_S:-100}
gbudget=${GATE_S:-100}
pool=
[ -n "${POOL_GIB:-}" ] && pool="--pool-gib $POOL_GIB"
work=$OUT/work
mkdir -p "$work/profiles" || exit 1
# the scenarios read ../../shared/data/traces from scenarios/
if [ -d "$carry/shared/data" ] && [ ! -e ../shared/data ]; then
  mkdir -p ../shared && ln -s "$carry/shared/data" ../shared/data
fi

{
  echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $commit"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  "$bin" version
  status=0
  cls=
  models="llama-3-8b llama-3.2-1b"
  if [ "$cmd" = gate ]; then
    models=
    cp -R "$carry/profiles/." "$work/profiles/" 2>/dev/null
    cls=$(ls "$work/profiles" 2>/dev/null | head -1)
    echo "== gate only, profiles of class '${cls:-none}' from $carry/profiles"
  fi
  for m in $models; do
    b=$pbudget
    [ "$m" = llama-3-8b ] || b=$((pbudget / 2))
    echo "== lorasim profile --model $m $quick --budget-s $b $pool"
    if "$bin" profile --model "$m" $quick --budget-s "$b" --commit "$commit" $pool \
      --out "$work/profile-$m.json" --csv "$work/profile-$m.csv"; then
      c=$(sed -n 's/^[[:space:]]*"class":[[:space:]]*"\([a-z0-9._-]*\)".*/\1/p' "$work/profile-$m.json" | head -1)
      [ -n "$c" ] || c=gpu
      cls=${cls:-$c}
      mkdir -p "$work/profiles/$c"
      cp "$work/profile-$m.json" "$work/profiles/$c/$m.json"
      cp "$work/profile-$m.json" "$OUT/profile-$m.json"
    else
      echo "gpu_profile: profile of $m failed"
      status=1
    fi
  done
  if [ "${GATE:-1}" = 1 ] && [ -n "$cls" ] && [ -f "$work/profiles/$cls/llama-3-8b.json" ]; then
    echo "== fidelity gate (class $cls)"
    sh tools/fidelity_gate.sh -b "$bin" -o "$work/gate" -p "$work/profiles" \
      -g "$cls" -t "$gbudget" || status=1
    cp "$work/gate/gate.md" "$OUT/gate.md" 2>/dev/null
  fi
  [ "${GATE_DBS:-0}" = 1 ] || find "$work/gate" -name '*.db' -delete 2>/dev/null
  tar -C "$work" -czf "$OUT/results.tar.gz" . && rm -rf "$work"
  echo "== done, status $status"
  echo "$status" >"$OUT/.status"
} 2>&1 | tee "$OUT/log"
st=$(cat "$OUT/.status" 2>/dev/null || echo 1)
rm -f "$OUT/.status"
exit "$st"
