package cartesia

import (
	"encoding/base64"
	"net/http"
	"strconv"

	"voicesvc/control"
	"voicesvc/jsonw"
	"voicesvc/sessions"
	"voicesvc/synth"
	"voicesvc/web"
)

// Cartesia's server events, the same objects on the SSE stream (as data
// lines) and on the socket (as text messages), as its API reference
// describes them and its clients parse them (cartesia-js's
// WebsocketResponse, LiveKit's zod schemas, which require done,
// status_code and context_id on every socket message and step_time on
// chunks):
//
//	{"type":"chunk","data":"<base64>","done":false,"status_code":200,"step_time":<ms>,"context_id":"..."}
//	{"type":"timestamps","done":false,"status_code":200,"context_id":"...",
//	 "word_timestamps":{"words":[...],"start":[<s>...],"end":[<s>...]}}
//	{"type":"flush_done","done":false,"flush_done":true,"flush_id":N,"status_code":200,"context_id":"..."}
//	{"type":"done","done":true,"status_code":200,"context_id":"..."}
//	{"type":"error","done":true,"status_code":N,"error_code":"...","title":"...","message":"...",
//	 "error":"...","request_id":"...","context_id":"..."}
//
// context_id is left out when the request had none (SSE without one).
// flush_id (socket, on flush_done) counts the context's flushes from 1; 0
// leaves it out.

// appendChunk appends a chunk event of audio.
func appendChunk(b []byte, contextID string, audio []byte, stepMS float64) []byte {
	b = append(b, `{"type":"chunk","data":"`...)
	b = base64.StdEncoding.AppendEncode(b, audio)
	b = append(b, `","done":false,"status_code":200,"step_time":`...)
	b = strconv.AppendFloat(b, float64(int64(stepMS*1000+0.5))/1000, 'f', -1, 64)
	return appendContext(b, contextID)
}

// appendTimestamps appends a timestamps event of words, in seconds on the
// audio's clock; each word is a slice of the transcript.
func appendTimestamps(b []byte, contextID string, words []synth.Word) []byte {
	b = append(b, `{"type":"timestamps","done":false,"status_code":200,"word_timestamps":{"words":[`...)
	for i, w := range words {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonw.AppendString(b, w.Word)
	}
	b = append(b, `],"start":[`...)
	for i, w := range words {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendSeconds(b, w.StartS)
	}
	b = append(b, `],"end":[`...)
	for i, w := range words {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendSeconds(b, w.EndS)
	}
	b = append(b, "]}"...)
	return appendContext(b, contextID)
}

// appendFlushDone acknowledges the flush numbered flushID.
func appendFlushDone(b []byte, contextID string, flushID int) []byte {
	b = append(b, `{"type":"flush_done","done":false,"flush_done":true,"status_code":200`...)
	b = appendFlushID(b, flushID)
	return appendContext(b, contextID)
}

// appendDone ends a context (or an SSE stream).
func appendDone(b []byte, contextID string) []byte {
	b = append(b, `{"type":"done","done":true,"status_code":200`...)
	return appendContext(b, contextID)
}

// appendErrorEvent appends the error event of e: Cartesia's error object
// with type, done and status_code, and "error" (the message again: LiveKit's
// plugin reads an error message by that key).
func appendErrorEvent(b []byte, contextID string, e *control.Error, requestID string) []byte {
	status := statusOf(e.Code)
	msg := message(e)
	b = append(b, `{"type":"error","done":true,"status_code":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	// The code as it is, unauthorized included: an event has no status
	// line of its own to say it (a revoked key's session ends so).
	b = append(b, `,"error_code":`...)
	b = jsonw.AppendString(b, e.Code)
	b = append(b, `,"title":`...)
	b = jsonw.AppendString(b, http.StatusText(status))
	b = append(b, `,"message":`...)
	b = jsonw.AppendString(b, msg)
	b = append(b, `,"error":`...)
	b = jsonw.AppendString(b, msg)
	b = append(b, `,"request_id":`...)
	b = jsonw.AppendString(b, requestID)
	return appendContext(b, contextID)
}

func appendFlushID(b []byte, flushID int) []byte {
	if flushID <= 0 {
		return b
	}
	b = append(b, `,"flush_id":`...)
	return strconv.AppendInt(b, int64(flushID), 10)
}

// appendContext closes the event with its context_id, when it has one.
func appendContext(b []byte, contextID string) []byte {
	if contextID != "" {
		b = append(b, `,"context_id":`...)
		b = jsonw.AppendString(b, contextID)
	}
	return append(b, '}')
}

// appendSeconds keeps microseconds: enough for any rate, short on the wire.
func appendSeconds(b []byte, s float64) []byte {
	return strconv.AppendFloat(b, float64(int64(s*1e6+0.5))/1e6, 'f', -1, 64)
}

// statusOf is the status_code of an error event: web's table, and for the
// session's own codes the status of their HTTP kin (LiveKit's plugin
// retries a 5xx and goes on past a 4xx).
func statusOf(code string) int {
	switch code {
	case sessions.CodeInvalidMessage:
		return 400
	case sessions.CodeVoiceNotFound:
		return 404
	case sessions.CodeContextExists:
		return 409
	case sessions.CodeTooManyContexts:
		return 429
	}
	return web.StatusOf(code)
}
