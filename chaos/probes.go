package chaos

// Probes is every probe in the order the suite runs them: the ones on the
// main server first (its leak checks close the run), then those that start
// servers of their own. Fast ones take a few seconds each and need no root.
func Probes() []Probe {
	return []Probe{
		{Name: "ws-key-too-long", Fast: true, Run: probeWSKeyTooLong,
			Expected: "Sec-WebSocket-Key > 24 chars: 400, server alive"},
		{Name: "body-over-21MiB", Fast: true, Run: probeBodyTooLarge,
			Expected: "22 MiB upload: client reads 413 (no reset)"},
		{Name: "secrets-in-logs", Fast: true, Run: probeSecretsInLogs,
			Expected: "bad requests with vsk_/vst_: no secret in the log"},
		{Name: "preauth-oom", Fast: true, Run: probePreAuthOOM,
			Expected: "150 x Content-Length 20 MB + 1 byte: RSS +<=100 MiB, serves"},
		{Name: "ws-no-reader", Fast: true, Run: probeWSNoReader,
			Expected: "pings+invalid, never read: RSS +<=64 MiB, close 1008"},
		{Name: "ws-billing", Fast: true, Run: probeWSBilling,
			Expected: "out of credits: billed == chars synthesized; 1008"},
		{Name: "revoke-sqlite", Fast: true, Run: probeRevocationSQLite,
			Expected: "key revoked: fatal unauthorized, close 4401 <= 2 s"},
		{Name: "deleted-voice-preview", Fast: true, Run: probeDeletedPreview,
			Expected: "clone, preview 200, delete voice, preview 404"},
		{Name: "upstream-endless-body", Fast: true, Run: probeUpstream("endless-body"),
			Expected: "pcm for ever: 502 or cut <= 5 s, RSS < 200 MiB, espeak ok"},
		{Name: "upstream-endless-headers", Fast: true, Run: probeUpstream("endless-headers"),
			Expected: "header lines for ever: 502 upstream_error, RSS < 200 MiB"},
		{Name: "upstream-endless-line", Fast: true, Run: probeUpstream("endless-line"),
			Expected: "one endless header line: 502 upstream_error, RSS < 200 MiB"},
		{Name: "upstream-drip", Fast: true, Run: probeUpstream("drip"),
			Expected: "1 byte/s: 502, cut or SSE error <= 3 s + 2, slots free"},
		{Name: "upstream-garbage", Fast: true, Run: probeUpstream("garbage"),
			Expected: "200 random bytes: audio or 502, server alive"},
		{Name: "upstream-huge-length", Fast: true, Run: probeUpstream("huge-length"),
			Expected: "Content-Length 1e9, stall: 502 upstream_error, slots free"},
		{Name: "abandoned-ws-1000", Run: probeAbandonedSessions,
			Expected: "1000 vanished sessions: goroutines, fds back to base"},
		{Name: "slowloris-4000", Run: probeSlowloris,
			Expected: "4000 trickling conns: alive, RSS +<=100 MiB, serves"},
		{Name: "fd-exhaustion", Run: probeFDExhaustion,
			Expected: "nofile 256, 400 idle conns: alive, serves after"},
		{Name: "revoke-postgres-2", Run: probeRevocationPostgres,
			Expected: "2 servers on Postgres: 4401 on both <= 2 s"},
		{Name: "store-down", Run: probeStoreDown,
			Expected: "Postgres restarted: 503 store_unavailable RA 1, recovers"},
		{Name: "store-hang-postgres", Run: probeStoreHangPostgres,
			Expected: "Postgres SIGSTOP 5 s: 2xx or 503 store_unavailable RA 1, no 500, recovers"},
		{Name: "store-lock-sqlite", Run: probeStoreLockSQLite,
			Expected: "SQLite BEGIN EXCLUSIVE 7 s elsewhere: 2xx or 503 RA 1, no 500, recovers"},
		{Name: "sigterm-mid-stream", Run: probeSIGTERM,
			Expected: "SSE/WS shutting_down, WS 1001, new 503, exit 0"},
		{Name: "worker-kill-9", Run: probeWorkerKill,
			Expected: "workers killed: SSE ends with done or error, later 200, alive"},
		{Name: "server-kill-mid-clone", Run: probeServerKillMidClone,
			Expected: "restart on same store: clone job succeeds"},
		{Name: "full-disk", Run: probeFullDisk,
			Expected: "tmpfs full: 503 store_unavailable not 500, no *.tmp, alive"},
	}
}

// FastProbes are the probes of `make chaos-fast`.
func FastProbes() []Probe {
	var out []Probe
	for _, p := range Probes() {
		if p.Fast {
			out = append(out, p)
		}
	}
	return out
}
