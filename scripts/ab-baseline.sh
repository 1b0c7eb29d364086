#!/usr/bin/env bash
# ab-baseline.sh OLD_BIN NEW_BIN [ROUNDS]: what the gateway adds to the first
# byte, two builds compared in alternation (issue 25's "no regression").
#
# Each round starts OLD_BIN, then NEW_BIN, as `voicesvc serve` on loopback
# with the reference engine unpaced (--reference-rtf 0, at nice 10 as in
# scripts/bench.sh), billing off, a throw-away SQLite store, and runs
#
#   voicesvc bench baseline --sweep 1 --rounds 1 --duration 500ms
#     --paced-duration 2500ms --warmup 200ms --quiet
#
# against it (the bench binary is the build under test), then stops the
# server by its PID. One round's p50 moves with the host by about as much
# as the differences looked for, so the builds alternate and the medians
# over ROUNDS (default 5) rounds are compared.
#
# Output: one line per build and round ("old 1 speak +0.041 ...") while it
# runs, then per transport the median added p50 of each build, its spread
# (min..max over the rounds) and new - old. The raw tables are kept in
# OUT (default a temporary directory, printed at the end).
#
# Environment: OUT, VOICE (ref-en-high), SERVER_NICE (10; empty: not niced).
set -euo pipefail

[ $# -ge 2 ] || { echo "usage: $0 OLD_BIN NEW_BIN [ROUNDS]" >&2; exit 2; }
OLD=$1 NEW=$2 ROUNDS=${3:-5}
VOICE=${VOICE:-ref-en-high}
SERVER_NICE=${SERVER_NICE-10}
for bin in "$OLD" "$NEW"; do
  [ -x "$bin" ] || { echo "ab-baseline: $bin is not an executable" >&2; exit 2; }
done
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/ab-baseline.XXXXXX")}
mkdir -p "$OUT"
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
server_pid=""
trap stop_server EXIT
trap 'exit 130' INT TERM

# start_server BIN DIR: the reference engine unpaced on the store in DIR,
# billing off; sets server_pid and base (lib.sh's serve).
start_server() {
  serve "$2/serve.log" "$1" --db "sqlite://$2/bench.db" \
    --engine reference --reference-rtf 0 --billing off --media-dir '' --log-level warn
}

# The "| sse | 1 | bare | voicesvc | added | ..." rows: transport and added p50.
added_rows() { awk -F'|' '$3 ~ /^ *1 *$/ && $5 ~ /[0-9]/ { gsub(/ /, "", $2); gsub(/ |ms/, "", $6); print $2, $6 }' "$1"; }

results=$OUT/added.txt
: >"$results"
for round in $(seq 1 "$ROUNDS"); do
  for build in old new; do
    bin=$OLD
    [ "$build" = new ] && bin=$NEW
    dir=$OUT/$build-$round
    mkdir -p "$dir"
    start_server "$bin" "$dir"
    key=$(workspace "$bin" "sqlite://$dir/bench.db" 2>>"$dir/admin.log")
    "$bin" bench baseline --base "$base" --key "$key" --server-pid "$server_pid" --voice "$VOICE" \
      --sweep 1 --rounds 1 --duration 500ms --paced-duration 2500ms --warmup 200ms --quiet \
      --out "$dir/results" >"$dir/table.txt"
    stop_server
    added_rows "$dir/table.txt" | while read -r transport added; do
      echo "$build $round $transport $added" | tee -a "$results"
    done
  done
done

# Per transport: the median of each build, its spread, new - old.
echo
echo "added first byte p50 (ms), level 1, $ROUNDS alternated rounds: median [min..max]"
awk '
  { v[$1 "," $3] = v[$1 "," $3] " " $4; seen[$3] = 1 }
  function stats(list,   a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    med = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    lo = a[1]; hi = a[n]
  }
  END {
    for (tr in seen) {
      stats(v["old," tr]); mo = med; lo_o = lo; hi_o = hi
      stats(v["new," tr]); mn = med
      printf "%-7s old %+.3f [%+.3f..%+.3f]  new %+.3f [%+.3f..%+.3f]  new-old %+.3f\n", tr, mo, lo_o, hi_o, mn, lo, hi, mn - mo
    }
  }' "$results" | sort
echo "raw tables: $OUT"
