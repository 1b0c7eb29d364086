# scripts/lib.sh: what the benchmark scripts (bench.sh, ab-baseline.sh)
# share, sourced by them: a server on a free loopback port, stopped by its
# PID, and a workspace that no limit stops.

# serve LOG BIN ARGS...: runs `BIN serve --addr 127.0.0.1:0 ARGS...` in the
# background (at nice SERVER_NICE when that is set), its output in LOG;
# sets server_pid, and base (http://ADDR) from the "voicesvc listening on"
# line once it is there. Fails, showing LOG and stopping the server, when
# it exits first or does not listen within a minute.
serve() {
  local log=$1 bin=$2
  shift 2
  ${SERVER_NICE:+nice -n "$SERVER_NICE"} "$bin" serve --addr 127.0.0.1:0 "$@" >"$log" 2>&1 &
  server_pid=$!
  base=""
  local addr
  for _ in $(seq 1 600); do
    if addr=$(grep -oE 'voicesvc listening on http://[^ "]+' "$log" | head -1) && [ -n "$addr" ]; then
      base="http://${addr#voicesvc listening on http://}"
      return 0
    fi
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "${0##*/}: $bin serve $* did not start:" >&2
  cat "$log" >&2
  stop_server
  return 1
}

# stop_server: SIGTERM to server_pid, SIGKILL if it still runs 20 s later;
# nothing without a server.
stop_server() {
  [ -n "${server_pid:-}" ] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.2
  done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

# workspace BIN DB: an enterprise workspace in the store DB with room for
# any load (10,000 streams and sessions, no rps limit, billing off);
# prints its key.
workspace() {
  local bin=$1 db=$2 ws id key
  ws=$("$bin" admin workspace create --db "$db" --name bench --plan enterprise)
  id=$(sed -E 's/.*"id":"([0-9a-f]{24})".*/\1/' <<<"$ws")
  "$bin" admin workspace update --db "$db" --id "$id" \
    --concurrency 10000 --rps 0 --sessions 10000 --billing off >/dev/null
  key=$("$bin" admin key create --db "$db" --workspace "$id")
  sed -E 's/.*"key":"(vsk_[0-9A-Za-z]+)".*/\1/' <<<"$key"
}
