#!/usr/bin/env bash
# `make bench`: the fixed benchmark suite, once per engine, against servers
# this script starts on loopback with a throw-away SQLite store.
#
# For each engine (espeak, then reference paced at real time) it starts
# `voicesvc serve --addr 127.0.0.1:0`, makes an enterprise workspace with room
# for the load and a key, runs `voicesvc bench suite` (speak, sse, ws, compat
# at concurrency 1, 16, 64, 256, plus the capacity probes below and, for
# espeak, the overload probe) with the server's pid so that CPU and RSS are
# measured, and stops the server with SIGTERM. Then `voicesvc bench compare` puts the two runs side by side.
#
# Output, one directory per run: bench/results/<UTC timestamp>/
#   espeak/    results.json, report.md, plots       (real engine)
#   reference/ results.json, report.md, plots       (gateway alone)
#   compare.txt                                      (reference / espeak ratios)
#   summary.md                                       (the figures and targets)
# and bench/results/latest points at it.
#
# Then the upstream scenario (BENCH_UPSTREAM=0 skips it): the same client
# against an espeak voicesvc directly and through a second voicesvc that
# has it as its upstream engine, in turn, UPSTREAM_ROUNDS (5) rounds of 64
# realtime streams: what A adds is a fraction of a millisecond, and one
# round's p50 moves by about as much with the host, so the median of five
# is what is compared with the target (upstream/: results.json, report.md
# and the gateway-added table).
#
# Then the Deepgram dialect (BENCH_DEEPGRAM=0 skips it): a reference server
# unpaced (at nice 10), its Deepgram speak socket and its native WebSocket
# in turn, DEEPGRAM_ROUNDS (5) rounds at DEEPGRAM_LEVELS (1,64) paced
# listeners: what the dialect adds to the time to first audio byte
# (deepgram/: results.json, report.md and the socket-added table).
#
# Then the baseline (BENCH_BASELINE=0 skips it): a reference server unpaced
# (--reference-rtf 0, its first chunk ready at once; at nice 10) and, inside the bench,
# a bare fasthttp server (a process of its own) replaying that server's
# answers, measured in turn transport by transport at BASELINE_LEVELS (1,64;
# over 1: realtime listeners), 3 rounds of 0.2 s warm-up + 0.5 s each
# (paced: one utterance's ramp + 2.5 s) (baseline/: results.json, report.md
# and the table of what the gateway adds; about 100 s).
#
# Then the Cartesia dialect (BENCH_DIALECT=0 skips it): its socket and the
# native WebSocket of one server, in turn, at 1 and 64 paced listeners
# (cartesia/: what the dialect adds to the first audio byte).
#
# Environment: BIN (bin/voicesvc), OUT (the output directory),
# BENCH_DURATION (measured per level, 3s), BENCH_WARMUP (per level, 1s),
# BENCH_ENGINES ("espeak reference"), BENCH_LEVELS (1,16,64,256),
# CAPACITY_ESPEAK (ws=500/rt,ws=1300/rt: realtime listeners, see
# `voicesvc bench --pace`), CAPACITY_REFERENCE (ws=1000,sse=500: the reference
# engine is itself paced at real time), OVERLOAD_ESPEAK (1800: about the
# realtime ws streams espeak really holds on 2 cores with the bench beside it;
# the overload probe runs 1x, 1.5x and 3x that, 6 s measured each, about 35 s
# in all; 0 skips it), VOICE_ESPEAK
# (en-us-linda), VOICE_REFERENCE (ref-en-high).
set -euo pipefail

BIN=${BIN:-bin/voicesvc}
stamp=$(date -u +%Y%m%d-%H%M%S)
OUT=${OUT:-bench/results/$stamp}
DURATION=${BENCH_DURATION:-3s}
WARMUP=${BENCH_WARMUP:-1s}
ENGINES=${BENCH_ENGINES:-espeak reference}
LEVELS=${BENCH_LEVELS:-1,16,64,256}
CAPACITY_ESPEAK=${CAPACITY_ESPEAK:-ws=500/rt,ws=1300/rt}
OVERLOAD_ESPEAK=${OVERLOAD_ESPEAK:-1800}
CAPACITY_REFERENCE=${CAPACITY_REFERENCE:-ws=1000,sse=500}
VOICE_ESPEAK=${VOICE_ESPEAK:-en-us-linda}
VOICE_REFERENCE=${VOICE_REFERENCE:-ref-en-high}

[ -x "$BIN" ] || { echo "bench: $BIN missing; run make build" >&2; exit 1; }
# Thousands of sockets on both ends of loopback.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

tmp=$(mktemp -d "${TMPDIR:-/tmp}/voicesvc-bench.XXXXXX")
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
server_pid=""
a_pid=""
cleanup() {
  if [ -n "$a_pid" ]; then
    kill -TERM "$a_pid" 2>/dev/null || true
    wait "$a_pid" 2>/dev/null || true
  fi
  stop_server
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_server ENGINE DB [RTF]: serves ENGINE (the reference engine at
# --reference-rtf RTF, default 1) on the store DB, billing off; sets
# server_pid and base (lib.sh's serve).
start_server() {
  local engine=$1 db=$2
  local extra=()
  [ "$engine" = reference ] && extra=(--reference-rtf "${3:-1}")
  serve "$tmp/$engine.log" "$BIN" --db "$db" --engine "$engine" "${extra[@]}" \
    --billing off --media-dir '' --log-level warn
}

mkdir -p "$OUT"
t0=$(date +%s)
for engine in $ENGINES; do
  mkdir -p "$tmp/$engine"
  db="sqlite://$tmp/$engine/bench.db"
  capacity=$CAPACITY_ESPEAK voice=$VOICE_ESPEAK overload=$OVERLOAD_ESPEAK
  if [ "$engine" = reference ]; then capacity=$CAPACITY_REFERENCE voice=$VOICE_REFERENCE overload=0; fi
  start_server "$engine" "$db"
  key=$(workspace "$BIN" "$db")
  mkdir -p "$OUT/$engine"
  echo "== $engine: $base (pid $server_pid), levels $LEVELS, $WARMUP + $DURATION per level, capacity $capacity"
  "$BIN" bench suite --base "$base" --key "$key" --server-pid "$server_pid" --voice "$voice" \
    --out "$OUT/$engine" --sweep "$LEVELS" --duration "$DURATION" --warmup "$WARMUP" \
    ${capacity:+--capacity "$capacity"} --overload "${overload:-0}" | tee "$OUT/$engine/table.txt"
  stop_server
  echo "   $engine done at +$(($(date +%s) - t0))s"
done

# The upstream scenario: server B (espeak) and gateway A (the reference
# engine built in, B's compat endpoint as its upstream engine "b"). One
# client, `voicesvc bench --target openai`, asks B directly (--base) and
# through A (--via) in turn, round after round, at UPSTREAM_LEVELS streams:
# the difference is what the gateway adds to the time to first audio byte,
# and A's CPU per audio second is measured from its pid. The streams are
# paced like listeners (--pace), with a short text (UPSTREAM_TEXT, under a
# second of speech) so that each level has hundreds of first bytes.
if [ "${BENCH_UPSTREAM:-1}" = 1 ]; then
  mkdir -p "$tmp/up-b" "$tmp/up-a" "$OUT/upstream"
  start_server espeak "sqlite://$tmp/up-b/bench.db"
  b_pid=$server_pid b_base=$base
  b_key=$(workspace "$BIN" "sqlite://$tmp/up-b/bench.db")
  cat >"$tmp/up-a/voicesvc.yaml" <<YAML
engines:
  - name: b
    type: openai
    urls: [$b_base/voice-svc/api/v1/public/compat]
    api_key: $b_key
    model: service-v1
    max_concurrency: 128
    voices:
      - {alias: b-linda, voice: $VOICE_ESPEAK, language: en-US}
YAML
  # A by lib.sh's serve, never niced; then B is server_pid again (A is
  # stopped below, B by stop_server).
  if ! SERVER_NICE='' serve "$tmp/up-a/serve.log" "$BIN" --db "sqlite://$tmp/up-a/bench.db" --engine reference \
    --engine-workers 0 --billing off --media-dir '' --log-level warn --config "$tmp/up-a/voicesvc.yaml"; then
    server_pid=$b_pid
    exit 1
  fi
  a_pid=$server_pid a_base=$base server_pid=$b_pid
  a_key=$(workspace "$BIN" "sqlite://$tmp/up-a/bench.db")
  echo "== upstream: B $b_base (pid $b_pid) directly and through A $a_base (pid $a_pid), levels ${UPSTREAM_LEVELS:-64}"
  "$BIN" bench --target openai --base "$b_base/voice-svc/api/v1/public/compat" --key "$b_key" \
    --voice "$VOICE_ESPEAK" --model service-v1 --server-pid "$b_pid" --text "${UPSTREAM_TEXT:-Thanks for calling.}" \
    --via "$a_base/voice-svc/api/v1/public/compat" --via-key "$a_key" --via-voice b-linda --via-pid "$a_pid" \
    --pace --sweep "${UPSTREAM_LEVELS:-64}" --rounds "${UPSTREAM_ROUNDS:-5}" --duration "$DURATION" --warmup "$WARMUP" \
    --quiet --out "$OUT/upstream" | tee "$OUT/upstream/table.txt"
  kill -TERM "$a_pid" 2>/dev/null || true
  wait "$a_pid" 2>/dev/null || true
  a_pid=""
  stop_server
  echo "   upstream done at +$(($(date +%s) - t0))s"
fi

# The Deepgram dialect: its speak socket ({api_root}/compat/deepgram) and
# the native WebSocket of the same server, in turn round after round, at 1
# stream and 64 paced listeners (`voicesvc bench --target deepgram --native`):
# what the dialect adds to the time to first audio byte. The reference
# engine, unpaced, so that the difference is the protocols'.
if [ "${BENCH_DEEPGRAM:-1}" = 1 ]; then
  mkdir -p "$tmp/deepgram" "$OUT/deepgram"
  SERVER_NICE=10 start_server reference "sqlite://$tmp/deepgram/bench.db" 0
  key=$(workspace "$BIN" "sqlite://$tmp/deepgram/bench.db")
  echo "== deepgram: $base (pid $server_pid), its Deepgram socket and native WebSocket, levels ${DEEPGRAM_LEVELS:-1,64}"
  "$BIN" bench --target deepgram --base "$base/voice-svc/api/v1/public/compat/deepgram" --key "$key" \
    --voice "$VOICE_REFERENCE" --native "$base" --server-pid "$server_pid" --text "${DEEPGRAM_TEXT:-Thanks for calling.}" \
    --pace --sweep "${DEEPGRAM_LEVELS:-1,64}" --rounds "${DEEPGRAM_ROUNDS:-5}" --duration "$DURATION" --warmup "$WARMUP" \
    --quiet --out "$OUT/deepgram" | tee "$OUT/deepgram/table.txt"
  stop_server
  echo "   deepgram done at +$(($(date +%s) - t0))s"
fi

# The baseline: what the gateway adds over a bare fasthttp server sending
# the same bytes (`voicesvc bench baseline`, bench/README.md).
if [ "${BENCH_BASELINE:-1}" = 1 ]; then
  mkdir -p "$tmp/baseline" "$OUT/baseline"
  # At nice 10, as BenchmarkSynthTTFB runs its server: right after the
  # first byte the unpaced engine renders the rest of the utterance, and on
  # two cores the client then waits for a CPU, which is the machine, not
  # the gateway (compat at one stream: TTFB p50 0.153 -> 0.104 ms, p99 1.41
  # -> 0.75 ms when the server yields; the bare server's rest is a copy).
  SERVER_NICE=10 start_server reference "sqlite://$tmp/baseline/bench.db" 0
  key=$(workspace "$BIN" "sqlite://$tmp/baseline/bench.db")
  echo "== baseline: $base (pid $server_pid, reference unpaced) and a bare fasthttp server, levels ${BASELINE_LEVELS:-1,64}"
  "$BIN" bench baseline --base "$base" --key "$key" --server-pid "$server_pid" --voice "$VOICE_REFERENCE" \
    --sweep "${BASELINE_LEVELS:-1,64}" --duration 500ms --paced-duration 2500ms --warmup 200ms --quiet --out "$OUT/baseline" | tee "$OUT/baseline/table.txt"
  stop_server
  echo "   baseline done at +$(($(date +%s) - t0))s"
fi

# The control plane (issue 32; BENCH_CONTROLPLANE=0 skips it): what limits
# and billing cost per request, store by store. `voicesvc bench
# controlplane` starts its own reference servers (unpaced), each with an
# enterprise workspace that no limit or balance stops, and runs speak "Hi."
# closed loop at c=16 and c=64 for SQLite billing off, SQLite enforce,
# Postgres enforce and Postgres off, and both enforced with an rps limit of
# 100,000 (the rps window's leases; the Postgres cases need
# VOICESVC_BENCH_PG, else VOICESVC_TEST_PG), alternated, 3 rounds, medians;
# with the store round trips per admitted request from
# voicesvc_store_duration_seconds (controlplane/: controlplane.json, table.txt; bench summary adds its table).
if [ "${BENCH_CONTROLPLANE:-1}" = 1 ]; then
  mkdir -p "$OUT/controlplane"
  echo "== control plane: speak \"Hi.\", reference unpaced, c=16,64, 3 rounds"
  VOICESVC_BENCH_PG="${VOICESVC_BENCH_PG:-${VOICESVC_TEST_PG:-}}" "$BIN" bench controlplane --bin "$BIN" \
    --levels 16,64 --rounds 3 --duration "$DURATION" --warmup "$WARMUP" --out "$OUT/controlplane" | tee "$OUT/controlplane/table.txt"
  echo "   control plane done at +$(($(date +%s) - t0))s"
fi

# The Cartesia dialect (BENCH_DIALECT=0 skips it and ElevenLabs, BENCH_CARTESIA=0 it alone): one reference server,
# unpaced at nice 10 as the baseline's, its native WebSocket and its
# Cartesia socket (`voicesvc bench --target cartesia --native`) measured by
# the same client in turn, DIALECT_ROUNDS (5) rounds at DIALECT_LEVELS
# (1,64) paced listeners, a context per operation (4 a socket) with the
# short DIALECT_TEXT: what the dialect adds to the time to first audio byte
# (cartesia/: results.json, report.md and the table).
if [ "${BENCH_CARTESIA:-${BENCH_DIALECT:-1}}" = 1 ]; then
  mkdir -p "$tmp/dialect" "$OUT/cartesia"
  SERVER_NICE=10 start_server reference "sqlite://$tmp/dialect/bench.db" 0
  key=$(workspace "$BIN" "sqlite://$tmp/dialect/bench.db")
  echo "== cartesia: $base (pid $server_pid, reference unpaced), native WebSocket and Cartesia socket, levels ${DIALECT_LEVELS:-1,64}"
  "$BIN" bench --target cartesia --base "$base/voice-svc/api/v1/public/compat/cartesia" --native "$base" --key "$key" \
    --voice "$VOICE_REFERENCE" --server-pid "$server_pid" --text "${DIALECT_TEXT:-Thanks for calling.}" --pace \
    --sweep "${DIALECT_LEVELS:-1,64}" --rounds "${DIALECT_ROUNDS:-5}" --duration "$DURATION" --warmup "$WARMUP" \
    --quiet --out "$OUT/cartesia" | tee "$OUT/cartesia/table.txt"
  stop_server
  echo "   cartesia done at +$(($(date +%s) - t0))s"
fi

# The ElevenLabs dialect (BENCH_DIALECT=0 skips it too, BENCH_ELEVENLABS=0 it alone): its stream-input
# socket, one utterance a socket, against the native WebSocket of the same
# server (reference unpaced, at nice 10, as the baseline), round by round
# in turn, at 1 stream and DIALECT_LEVELS paced listeners
# (elevenlabs/: results.json, report.md and the added TTFB table).
if [ "${BENCH_ELEVENLABS:-${BENCH_DIALECT:-1}}" = 1 ]; then
  mkdir -p "$tmp/elevenlabs" "$OUT/elevenlabs"
  SERVER_NICE=10 start_server reference "sqlite://$tmp/elevenlabs/bench.db" 0
  key=$(workspace "$BIN" "sqlite://$tmp/elevenlabs/bench.db")
  echo "== elevenlabs: stream-input vs the native WebSocket at $base (pid $server_pid), levels ${DIALECT_LEVELS:-1,64}"
  "$BIN" bench --target elevenlabs --base "$base/voice-svc/api/v1/public/compat/elevenlabs" --native "$base" --key "$key" \
    --voice "$VOICE_REFERENCE" --server-pid "$server_pid" \
    --sweep "${DIALECT_LEVELS:-1,64}" --rounds "${DIALECT_ROUNDS:-5}" --duration 2s --warmup 500ms --quiet --out "$OUT/elevenlabs" \
    | tee "$OUT/elevenlabs/table.txt"
  stop_server
  echo "   elevenlabs done at +$(($(date +%s) - t0))s"
fi

set -- $ENGINES
if [ $# -ge 2 ]; then
  "$BIN" bench compare "$OUT/$1" "$OUT/$2" >"$OUT/compare.txt"
fi
"$BIN" bench summary "$OUT" >"$OUT/summary.md" && cat "$OUT/summary.md"
ln -sfn "$(basename "$OUT")" "$(dirname "$OUT")/latest" 2>/dev/null || true
echo "bench: wrote $OUT in $(($(date +%s) - t0))s"
