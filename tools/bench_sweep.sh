#!/bin/sh
# bench_sweep.sh LORASIM GRID WORKDIR [REPS] [MODES]: cells per second of
# `lorasim sweep` run whole (cells + merge) in each mode, REPS times each
# (default 3), into WORKDIR/MODE (removed after each run: a cell of the
# Azure benchmark grid writes a 300 MiB database).  MODES (default
# "j1 j2 np2 np3"): j1, j2 = -j 1, -j 2; npK = mpirun -np K --mpi (rank 0
# dispatches, K-1 workers).  One line per run: mode, wall seconds, user
# and system CPU seconds of the whole process tree, cells per wall second,
# and the load average before the run (docs/BENCHMARKS.md).
set -eu
BIN=$1
GRID=$2
W=$3
REPS=${4:-3}
MODES=${5:-j1 j2 np2 np3}
n=$("$BIN" sweep "$GRID" --list --out "$W/list" | wc -l)
mkdir -p "$W"
echo "# $n cells; $(nproc) cores; $("$BIN" version | head -1)"
echo "# mode rep wall_s user_s sys_s cells_per_s load1"
for r in $(seq 1 "$REPS"); do
  for m in $MODES; do
    out="$W/$m"
    rm -rf "$out"
    load=$(cut -d' ' -f1 /proc/loadavg)
    case $m in
    j*) set -- "$BIN" sweep "$GRID" -j "${m#j}" --out "$out" --quiet ;;
    np*) set -- mpirun --oversubscribe --allow-run-as-root -np "${m#np}" \
           "$BIN" sweep "$GRID" --mpi --out "$out" --quiet ;;
    *) echo "bench_sweep: unknown mode $m" >&2; exit 2 ;;
    esac
    /usr/bin/time -f '%e %U %S' -o "$W/time" "$@" >/dev/null
    read -r wall user sys <"$W/time"
    echo "$m $r $wall $user $sys $(echo "$n $wall" | awk '{printf "%.4f", $1 / $2}') $load"
    rm -rf "$out"
  done
done
