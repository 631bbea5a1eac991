#!/bin/sh
# crash_consistency.sh: kill -9 a replay at seeded random points, check
# what it left, resume it, and compare with an uninterrupted run.
#
#   sh tests/crash_consistency.sh LORASIM SCENARIO WORKDIR [KILLS] [SEED]
#
# For each kill: start `lorasim replay`, wait until its run row exists,
# sleep a seeded random fraction of the uninterrupted run's time from its
# run row to its end, kill -9. A kill that comes after the run has ended
# is retried at half the delay (the machine may have sped up since the
# reference run), up to three times, before it counts as missed.
# Then assert: the database opens and PRAGMA integrity_check is ok; the
# run is 'running' or 'interrupted', never 'ok'; the events it kept are a
# prefix of the uninterrupted run's events, byte for byte; and after
# `lorasim replay --resume DB` the run is 'ok' and its events, requests
# and iterations rows have the same digest as the uninterrupted run's.
# A kill that came after the run had already finished is counted as
# missed; at least half of the kills must land.
set -eu
bin=$1 scn=$2 dir=$3 kills=${4:-8} seed=${5:-20261129}
command -v sqlite3 >/dev/null || { echo "crash: sqlite3 CLI missing"; exit 1; }
rm -rf "$dir" && mkdir -p "$dir"

q() { sqlite3 -batch "$1" "$2"; }
rows() { # digest of the rows a run wrote, in a fixed order
  q "$1" "SELECT * FROM events ORDER BY seq;
          SELECT * FROM requests ORDER BY request;
          SELECT * FROM iterations ORDER BY iter, worker;" | sha256sum | cut -c1-64
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
fail() { echo "crash: FAIL: $*"; exit 1; }

wait_row() { # $1 database, $2 pid: until the run row exists
  n=0
  until [ -f "$1" ] && [ -n "$(q "$1" 'SELECT status FROM runs' 2>/dev/null)" ]; do
    n=$((n + 1))
    [ $n -gt 3000 ] && { kill -9 "$2"; fail "$1: no run row after 30 s"; }
    sleep 0.01
  done
}

# the reference run, timed from its run row (after the trace is loaded) to
# its end: that is the window a kill can land in
"$bin" replay "$scn" --db "$dir/ref.db" --no-plots --quiet &
pid=$!
wait_row "$dir/ref.db" $pid
t0=$(now_ms)
wait $pid || fail "reference run failed"
t_ref=$(( $(now_ms) - t0 ))
[ "$(q "$dir/ref.db" 'SELECT status FROM runs')" = ok ] || fail "reference run not ok"
ref=$(rows "$dir/ref.db")
nref=$(q "$dir/ref.db" 'SELECT count(*) FROM events')
echo "crash: reference run: $nref events, ${t_ref} ms, rows digest $ref"

x=$seed landed=0 missed=0 k=1
while [ $k -le "$kills" ]; do
  x=$(( (x * 1103515245 + 12345) % 2147483648 ))
  delay=$(( x % (t_ref * 8 / 10 + 1) )) # ms after the run row exists
  db="$dir/kill$k.db"
  try=1
  while :; do
    rm -f "$db" "$db-wal" "$db-shm" "$db-journal"
    "$bin" replay "$scn" --db "$db" --no-plots --quiet &
    pid=$!
    wait_row "$db" $pid
    sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
    kill -9 $pid 2>/dev/null || true
    wait $pid 2>/dev/null || true
    [ "$(q "$db" 'PRAGMA integrity_check')" = ok ] || fail "kill $k: integrity_check"
    st=$(q "$db" 'SELECT status FROM runs')
    [ "$st" = ok ] || break
    echo "crash: kill $k after ${delay} ms: the run had already ended ok"
    [ $try -lt 3 ] || break
    try=$((try + 1)) delay=$((delay / 2))
  done
  if [ "$st" = ok ]; then
    missed=$((missed + 1))
    echo "crash: kill $k missed after $try tries"
    k=$((k + 1))
    continue
  fi
  [ "$st" = running ] || [ "$st" = interrupted ] || fail "kill $k: status '$st'"
  n=$(q "$db" 'SELECT count(*) FROM events')
  a=$(q "$db" "SELECT * FROM events ORDER BY seq" | sha256sum)
  b=$(q "$dir/ref.db" "SELECT * FROM events WHERE seq IN (SELECT seq FROM events ORDER BY seq LIMIT $n) ORDER BY seq" | sha256sum)
  [ "$a" = "$b" ] || fail "kill $k: the $n kept events are not a prefix of the reference"
  "$bin" replay --resume "$db" --no-plots --quiet || fail "kill $k: resume failed"
  [ "$(q "$db" 'SELECT status FROM runs')" = ok ] || fail "kill $k: resumed run not ok"
  [ "$(q "$db" 'PRAGMA integrity_check')" = ok ] || fail "kill $k: resumed integrity"
  got=$(rows "$db")
  [ "$got" = "$ref" ] || fail "kill $k: resumed rows differ from the reference"
  "$bin" audit "$db" >/dev/null || fail "kill $k: lorasim audit of the resumed run found something"
  [ ! -e "$db.resume" ] || fail "kill $k: $db.resume left behind"
  echo "crash: kill $k after ${delay} ms: '$st' with $n/$nref events, integrity ok; resumed: rows identical"
  landed=$((landed + 1))
  k=$((k + 1))
done
# and one SIGINT at a third of the run (halved on a miss, three tries): the
# run must end 'interrupted' (exit 130), then resume to the same rows
db="$dir/sigint.db"
delay=$((t_ref / 3)) try=1
while :; do
  rm -f "$db" "$db-wal" "$db-shm" "$db-journal"
  "$bin" replay "$scn" --db "$db" --no-plots --quiet 2>"$dir/sigint.err" &
  pid=$!
  wait_row "$db" $pid
  sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
  kill -INT $pid 2>/dev/null || true # the run may already have ended
  set +e
  wait $pid
  rc=$?
  set -e
  st=$(q "$db" 'SELECT status FROM runs')
  [ "$st" = ok ] && [ $try -lt 3 ] || break
  try=$((try + 1)) delay=$((delay / 2))
done
if [ "$st" = ok ]; then
  echo "crash: SIGINT came after the run ended, $try tries (missed)"
else
  [ $rc -eq 130 ] && [ "$st" = interrupted ] || fail "SIGINT: exit $rc, status '$st'"
  grep -q E_INTERRUPTED "$dir/sigint.err" || fail "SIGINT: no E_INTERRUPTED on stderr"
  "$bin" replay --resume "$db" --no-plots --quiet || fail "SIGINT: resume failed"
  [ "$(rows "$db")" = "$ref" ] || fail "SIGINT: resumed rows differ"
  echo "crash: SIGINT after ${delay} ms: 'interrupted', exit 130; resumed: rows identical"
fi
echo "crash: $landed kills landed, $missed missed"
[ $((landed * 2)) -ge "$kills" ] || fail "fewer than half of the kills landed (scenario too short for this machine?)"
echo "crash: ok"
