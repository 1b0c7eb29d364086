// Package sessions runs one realtime WebSocket session (docs/realtime.md):
// up to four synthesis contexts multiplexed on one socket, text
// buffered and cut into sentences as soon as their end is certain, audio
// sent as audio_chunk + binary pairs by a single writer, cancel, limits,
// metering and the idle timeout.
//
// The gateway does the handshake (credentials, limits, billing headers),
// upgrades, and calls Run on a connection it closes after Run returns;
// what it must do around Run, which assumes all of it has happened:
//
//   - Check credentials (in the documented order), plan, billing, rate and
//     the session and stream slots before upgrading, answering the documented
//     statuses with their bodies; consume the token only once the upgrade
//     is certain; set X-Billing-Remaining and RateLimit headers on the 101.
//   - Upgrader: ReadBufferSize and WriteBufferSize 1024, one shared
//     WriteBufferPool (&sync.Pool{}) so an idle connection holds no write
//     buffer, EnableCompression false, Subprotocols ["service.v1"] (the
//     token rides in the offered list and must not be echoed), and a
//     CheckOrigin that admits browsers (auth is by key or token).
//   - Call Run while the connection is usable and close it afterwards. A
//     FastHTTPUpgrader connection reads through fasthttp's reader, which
//     is pooled again when the upgrade handler returns: call Run inside
//     that handler, or (as the gateway does, to let fasthttp free the
//     request's memory) build the connection over the socket itself and
//     run the session on a goroutine of its own. Run owns every write to
//     the socket (its writer encodes frames itself and batches them into
//     one write): do not write to the connection, ping it, or set its
//     ping, close or read-limit handling while Run runs. Release the
//     session and stream slots after Run returns. Pass a ctx cancelled when
//     the server's shutdown grace is over (fatal shutting_down, 1001).
//   - To end sessions from outside, build them with New and keep the
//     *Session: Revoke when their key is revoked or expires (fatal
//     unauthorized, 4401), Drain when shutdown begins (idle sessions end at
//     once, the others when their last context ends). Neither needs a
//     goroutine or timer per session: one registry can drive them all.
//   - Deps.Voice checks the workspace, readiness and the token's voice_ids
//     and returns *control.Error ENotFound / EVoiceNotReady (voice_not_found)
//     or EVoiceNotAllowed (voice_not_allowed); Deps.Meter and
//     Deps.Workspace bill every task_start and task_continue frame, and
//     the session refunds the text that never reached the engine.
//
// Measured with 1 KiB buffers: an idle session costs about 14 KiB
// (BenchmarkIdleSessionMemory), a bare fasthttp/websocket connection 13.
package sessions
