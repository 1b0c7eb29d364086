#!/usr/bin/env bash
# `make run`: a development workspace (plan pro) and key on first run, reused
# afterwards; prints the key and a ready curl line, then serves.
set -euo pipefail
BIN=${BIN:-bin/voicesvc}
ADDR=${ADDR:-127.0.0.1:8080}
DB=${DB:-sqlite://./data/voicesvc.db}
CRED=data/dev-credentials
mkdir -p data

dbfile=""
case "$DB" in sqlite://*) dbfile=${DB#sqlite://} ;; esac
# Credentials are only good for the store they were made in.
if [ -f "$CRED" ] && [ -n "$dbfile" ] && [ ! -f "$dbfile" ]; then rm -f "$CRED"; fi

if [ ! -f "$CRED" ]; then
  ws=$("$BIN" admin workspace create --db "$DB" --name development --plan pro)
  ws_id=$(sed -E 's/.*"id":"([0-9a-f]{24})".*/\1/' <<<"$ws")
  key=$("$BIN" admin key create --db "$DB" --workspace "$ws_id")
  secret=$(sed -E 's/.*"key":"(vsk_[0-9A-Za-z]+)".*/\1/' <<<"$key")
  printf 'WORKSPACE=%s\nAPI_KEY=%s\n' "$ws_id" "$secret" >"$CRED"
  chmod 600 "$CRED"
fi
# shellcheck disable=SC1090
. "$CRED"

api="http://$ADDR/voice-svc/api/v1/public"
"$BIN" serve --addr "$ADDR" --db "$DB" --base-url "http://$ADDR" &
server=$!
# Ctrl-C or a TERM stops the server gracefully, and this script with it.
trap 'kill -TERM "$server" 2>/dev/null; wait "$server"; exit 0' INT TERM

for _ in $(seq 1 150); do
  curl -sf "http://$ADDR/healthz" >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || { wait "$server"; exit 1; }
  sleep 0.2
done
# An English catalog voice, so that the speak line below is ready to paste.
voice=$(curl -s -H "X-API-Key: $API_KEY" "$api/voices?language=en&page_size=1" |
  sed -nE 's/.*"voices":\[\{"id":"([0-9a-f]{24})".*/\1/p')

cat <<MSG

  voicesvc development workspace: $WORKSPACE (plan pro)
  API key: $API_KEY   (kept in $CRED)

  List voices:
    curl -s -H 'X-API-Key: $API_KEY' '$api/voices?page_size=5'
  Speak (WAV):
    curl -s -H 'X-API-Key: $API_KEY' -H 'Content-Type: application/json' \\
      -d '{"text":"Hello from voicesvc."}' '$api/voices/${voice:-<voice id>}/speak' -o hello.wav

MSG
wait "$server"
