#!/usr/bin/env bash
# `make run`: a development workspace (plan pro) and key on first run, reused
# afterwards; prints the key and ready curl lines, then serves.
#
# When ADDR is taken it says so and how to pick another address, and prints
# nothing else. The server's own output goes to data/voicesvc.log while it
# starts, and is shown from there once it listens.
set -euo pipefail
BIN=${BIN:-bin/voicesvc}
ADDR=${ADDR:-127.0.0.1:8080}
DB=${DB:-sqlite://./data/voicesvc.db}
CRED=data/dev-credentials
LOG=data/voicesvc.log
mkdir -p data

port_taken() {
  cat >&2 <<MSG
make run: $ADDR is already in use (another process listens on port ${ADDR##*:}).
  Stop it, or pick another address: make run ADDR=${ADDR%:*}:8081
MSG
  exit 1
}

# Something already answers on ADDR: say so before making anything, so that
# a health check cannot reach the other server and pass for ours.
host=${ADDR%:*}
port=${ADDR##*:}
case "$host" in "" | 0.0.0.0) host=127.0.0.1 ;; "[::]") host=::1 ;; esac
host=${host#[}
host=${host%]}
if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then port_taken; fi

dbfile=""
case "$DB" in sqlite://*) dbfile=${DB#sqlite://} ;; esac
# Credentials are only good for the store they were made in.
if [ -f "$CRED" ] && [ -n "$dbfile" ] && [ ! -f "$dbfile" ]; then rm -f "$CRED"; fi

# admin ARGS: voicesvc admin, whose stderr (the store it opened) is shown
# only when it fails.
admin() {
  local out
  if ! out=$("$BIN" admin "$@" 2>data/admin.err); then
    cat data/admin.err >&2
    exit 1
  fi
  rm -f data/admin.err
  printf '%s\n' "$out"
}

if [ ! -f "$CRED" ]; then
  ws=$(admin workspace create --db "$DB" --name development --plan pro)
  ws_id=$(sed -E 's/.*"id":"([0-9a-f]{24})".*/\1/' <<<"$ws")
  key=$(admin key create --db "$DB" --workspace "$ws_id")
  secret=$(sed -E 's/.*"key":"(vsk_[0-9A-Za-z]+)".*/\1/' <<<"$key")
  printf 'WORKSPACE=%s\nAPI_KEY=%s\n' "$ws_id" "$secret" >"$CRED"
  chmod 600 "$CRED"
fi
# shellcheck disable=SC1090
. "$CRED"

api="http://$ADDR/voice-svc/api/v1/public"
: >"$LOG"
"$BIN" serve --addr "$ADDR" --db "$DB" --base-url "http://$ADDR" >>"$LOG" 2>&1 &
server=$!
tailer=""
stop() {
  kill -TERM "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  if [ -n "$tailer" ]; then kill "$tailer" 2>/dev/null || true; fi
}
# Ctrl-C or a TERM stops the server gracefully, and this script with it.
trap 'stop; exit 0' INT TERM

# Ours is up when it logs the address it bound (serve's "voicesvc listening
# on" line), not when something answers on ADDR.
up=""
for _ in $(seq 1 300); do
  if grep -q '^voicesvc listening on ' "$LOG"; then up=1; break; fi
  if ! kill -0 "$server" 2>/dev/null; then
    wait "$server" || true
    if grep -q 'address already in use' "$LOG"; then port_taken; fi
    cat "$LOG" >&2
    exit 1
  fi
  sleep 0.2
done
if [ -z "$up" ]; then
  echo "make run: the server did not listen on $ADDR within 60 s; its output is in $LOG" >&2
  stop
  exit 1
fi

# A ready public catalog voice in English, so that the speak line below
# works as pasted (the workspace's own voices may be drafts).
voice=$(curl -s -H "X-API-Key: $API_KEY" \
  "$api/voices?visibility=public&status=ready&language=en&page_size=1" |
  sed -nE 's/.*"voices":\[\{"id":"([0-9a-f]{24})".*/\1/p')

cat <<MSG

  voicesvc development workspace: $WORKSPACE (plan pro)
  API key: $API_KEY   (kept in $CRED)

  List voices:
    curl -sS --fail-with-body -H 'X-API-Key: $API_KEY' '$api/voices?page_size=5'
  Speak (WAV):
    curl -sS --fail-with-body -H 'X-API-Key: $API_KEY' -H 'Content-Type: application/json' \\
      -d '{"text":"Hello from voicesvc."}' '$api/voices/${voice:-<voice id>}/speak' -o hello.wav

MSG
# The server's output from here on (it is also kept in $LOG).
tail -n +1 -f "$LOG" &
tailer=$!
wait "$server" || status=$?
kill "$tailer" 2>/dev/null || true
exit "${status:-0}"
