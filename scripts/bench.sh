#!/usr/bin/env bash
# `make bench`: the fixed benchmark suite, once per engine, against servers
# this script starts on loopback with a throw-away SQLite store.
#
# For each engine (espeak, then reference paced at real time) it starts
# `voicesvc serve --addr 127.0.0.1:0`, makes an enterprise workspace with room
# for the load and a key, runs `voicesvc bench suite` (speak, sse, ws, compat
# at concurrency 1, 16, 64, 256, plus the capacity probes below) with the
# server's pid so that CPU and RSS are measured, and stops the server with
# SIGTERM. Then `voicesvc bench compare` puts the two runs side by side.
#
# Output, one directory per run: bench/results/<UTC timestamp>/
#   espeak/    results.json, report.md, plots       (real engine)
#   reference/ results.json, report.md, plots       (gateway alone)
#   compare.txt                                      (reference / espeak ratios)
#   summary.md                                       (the figures and targets)
# and bench/results/latest points at it.
#
# Environment: BIN (bin/voicesvc), OUT (the output directory),
# BENCH_DURATION (measured per level, 4s), BENCH_WARMUP (per level, 1s),
# BENCH_ENGINES ("espeak reference"), BENCH_LEVELS (1,16,64,256),
# CAPACITY_ESPEAK (ws=64/rt,ws=256/rt,ws=384/rt,ws=500/rt: realtime listeners, see
# `voicesvc bench --pace`), CAPACITY_REFERENCE (ws=1000,sse=500: the reference
# engine is itself paced at real time), VOICE_ESPEAK (en-us-linda),
# VOICE_REFERENCE (ref-en-high).
set -euo pipefail

BIN=${BIN:-bin/voicesvc}
stamp=$(date -u +%Y%m%d-%H%M%S)
OUT=${OUT:-bench/results/$stamp}
DURATION=${BENCH_DURATION:-4s}
WARMUP=${BENCH_WARMUP:-1s}
ENGINES=${BENCH_ENGINES:-espeak reference}
LEVELS=${BENCH_LEVELS:-1,16,64,256}
CAPACITY_ESPEAK=${CAPACITY_ESPEAK:-ws=64/rt,ws=256/rt,ws=384/rt,ws=500/rt}
CAPACITY_REFERENCE=${CAPACITY_REFERENCE:-ws=1000,sse=500}
VOICE_ESPEAK=${VOICE_ESPEAK:-en-us-linda}
VOICE_REFERENCE=${VOICE_REFERENCE:-ref-en-high}

[ -x "$BIN" ] || { echo "bench: $BIN missing; run make build" >&2; exit 1; }
# Thousands of sockets on both ends of loopback.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

tmp=$(mktemp -d "${TMPDIR:-/tmp}/voicesvc-bench.XXXXXX")
server_pid=""

stop_server() {
  [ -n "$server_pid" ] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.2
  done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
cleanup() {
  stop_server
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_server ENGINE DB: starts the server in the background, sets
# server_pid and base (http://ADDR from the "voicesvc listening on" line).
start_server() {
  local engine=$1 db=$2 log=$tmp/$1.log
  local extra=()
  [ "$engine" = reference ] && extra=(--reference-rtf 1)
  "$BIN" serve --addr 127.0.0.1:0 --db "$db" --engine "$engine" "${extra[@]}" \
    --billing off --media-dir '' --log-level warn >"$log" 2>&1 &
  server_pid=$!
  base=""
  for _ in $(seq 1 300); do
    if addr=$(grep -oE 'voicesvc listening on http://[^ "]+' "$log" | head -1) && [ -n "$addr" ]; then
      base="http://${addr#voicesvc listening on http://}"
      return 0
    fi
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.2
  done
  echo "bench: $engine server did not start:" >&2
  cat "$log" >&2
  return 1
}

# workspace DB: an enterprise workspace with room for the suite; prints the key.
workspace() {
  local db=$1 ws id key
  ws=$("$BIN" admin workspace create --db "$db" --name bench --plan enterprise)
  id=$(sed -E 's/.*"id":"([0-9a-f]{24})".*/\1/' <<<"$ws")
  "$BIN" admin workspace update --db "$db" --id "$id" \
    --concurrency 2000 --rps 0 --sessions 2000 --billing off >/dev/null
  key=$("$BIN" admin key create --db "$db" --workspace "$id")
  sed -E 's/.*"key":"(vsk_[0-9A-Za-z]+)".*/\1/' <<<"$key"
}

mkdir -p "$OUT"
t0=$(date +%s)
for engine in $ENGINES; do
  mkdir -p "$tmp/$engine"
  db="sqlite://$tmp/$engine/bench.db"
  capacity=$CAPACITY_ESPEAK voice=$VOICE_ESPEAK
  if [ "$engine" = reference ]; then capacity=$CAPACITY_REFERENCE voice=$VOICE_REFERENCE; fi
  start_server "$engine" "$db"
  key=$(workspace "$db")
  mkdir -p "$OUT/$engine"
  echo "== $engine: $base (pid $server_pid), levels $LEVELS, $WARMUP + $DURATION per level, capacity $capacity"
  "$BIN" bench suite --base "$base" --key "$key" --server-pid "$server_pid" --voice "$voice" \
    --out "$OUT/$engine" --sweep "$LEVELS" --duration "$DURATION" --warmup "$WARMUP" \
    ${capacity:+--capacity "$capacity"} | tee "$OUT/$engine/table.txt"
  stop_server
  echo "   $engine done at +$(($(date +%s) - t0))s"
done

set -- $ENGINES
if [ $# -ge 2 ]; then
  "$BIN" bench compare "$OUT/$1" "$OUT/$2" >"$OUT/compare.txt"
fi
"$BIN" bench summary "$OUT" >"$OUT/summary.md" && cat "$OUT/summary.md"
ln -sfn "$(basename "$OUT")" "$(dirname "$OUT")/latest" 2>/dev/null || true
echo "bench: wrote $OUT in $(($(date +%s) - t0))s"
