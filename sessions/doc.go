// Package sessions runs one realtime WebSocket session (docs/realtime.md):
// up to four synthesis contexts multiplexed on one socket, text
// buffered and cut into sentences as soon as their end is certain, audio
// sent as audio_chunk + binary pairs by a single writer, cancel, limits,
// metering and the idle timeout. The protocol's messages are a Wire
// (wire.go): the native one by default, or a dialect's (Cartesia contexts,
// ElevenLabs stream-input, Deepgram Speak/Flush/Clear), which only reads
// messages into commands and writes events, so every protocol's socket
// keeps the same rules.
//
// The gateway does the handshake (credentials, limits, billing headers),
// upgrades, and serves the session (Serve, or Run) on a connection it
// closes once the session has ended; what it must do around them, which
// assume all of it has happened:
//
//   - Check credentials (in the documented order), plan, billing, rate and
//     the session and stream slots before upgrading, answering the documented
//     statuses with their bodies; consume the token only once the upgrade
//     is certain; set X-Billing-Remaining and RateLimit headers on the 101.
//   - Or, on a socket whose credential comes in its first message
//     (FirstMessage), upgrade first and Accept: it reads that message,
//     authenticates, admits or refuses, and hands back every byte read
//     for Serve.
//   - Upgrader: a small ReadBufferSize (the session decodes frames from
//     the socket itself, so the Conn's reader is never read; 125 is the
//     least the library takes), WriteBufferSize 1024 with one shared
//     WriteBufferPool (&sync.Pool{}) so an idle connection holds no write
//     buffer, EnableCompression false, Subprotocols ["service.v1"] (the
//     token rides in the offered list and must not be echoed), and a
//     CheckOrigin that admits browsers (auth is by key or token).
//   - Serve the session with Serve and one netpoll.Poller for the whole
//     server: it returns at once, and the session holds no goroutine while
//     it waits for its client. The Conn must be over the socket itself
//     (its NetConn a syscall.Conn, holding no bytes read ahead); bytes the
//     client sent behind its handshake that were already read are handed
//     to Serve. Close the connection in Serve's done, not before. Run does
//     the same on the calling goroutine, blocking in reads (with
//     FastHTTPUpgrader, whose Conn reads through fasthttp's reader: call
//     it inside the upgrade handler). Run and Serve own every read and
//     every write on the socket (the writer encodes frames itself and
//     batches them into one write): do not read, write, ping or set
//     handlers on the connection meanwhile. Release the session and stream
//     slots once the session has ended. Pass a ctx cancelled when the
//     server's shutdown grace is over (fatal shutting_down, 1001).
//   - To end sessions from outside, build them with New and keep the
//     *Session: Revoke when their key is revoked or expires (fatal
//     unauthorized, 4401), Drain when shutdown begins (idle sessions end at
//     once, the others when their last context ends). Neither needs a
//     goroutine or timer per session: one registry can drive them all.
//     (A parked session gets a reader goroutine to end it.)
//   - Deps.Voice checks the workspace, readiness and the token's voice_ids
//     and returns *control.Error ENotFound / EVoiceNotReady (voice_not_found)
//     or EVoiceNotAllowed (voice_not_allowed); Deps.Meter and
//     Deps.Workspace bill every task_start and task_continue frame, and
//     the session refunds the text that never reached the engine.
//
// An idle session served by Serve is its structs, the Conn, a timer and an
// entry in the poller: no goroutine and no buffer. BenchmarkIdleSessionMemory
// (1,000 sessions, heap + stacks after GC): about 3 KiB with Serve (4 with
// a context open), 15 with Run (its goroutine), 14 for a bare
// fasthttp/websocket connection that only reads.
package sessions
