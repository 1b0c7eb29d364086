package elevenlabs

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/sessions"
	"voicesvc/synth"
	"voicesvc/web"
)

// The realtime sockets (docs/dialects.md#elevenlabs):
//
//	GET /v1/text-to-speech/{voice_id}/stream-input        one context
//	GET /v1/text-to-speech/{voice_id}/multi-stream-input  up to 5, by context_id
//
// The URL names the voice, output_format, language_code and auto_mode;
// model_id, sync_alignment, inactivity_timeout, enable_logging and
// enable_ssml_parsing are accepted and ignored (alignment comes whenever
// the engine times words). The session is package sessions over this
// dialect's Wire (wire): contexts, buffering, billing as text arrives,
// limits and the single writer are the session's.

// maxContexts is the vendor's limit of contexts a socket.
const maxContexts = 5

var (
	argLanguageCode   = []byte("language_code")
	argAutoMode       = []byte("auto_mode")
	argXIAPIKey       = []byte("xi-api-key")
	argXIAPIKeyUnder  = []byte("xi_api_key")
	argAuthorization  = []byte("authorization")
	argSingleUseToken = []byte("single_use_token")
)

func (e *Protocol) registerSockets(h web.Host) {
	for _, s := range []struct {
		tail  string
		multi bool
	}{{"/stream-input", false}, {"/multi-stream-input", true}} {
		h.Handle(web.Route{Method: "GET", Path: Base + ttsPath + s.tail, Scope: control.ScopeTTS,
			Auth: e.socketAuthenticate, Streams: true,
			FirstMessage: &sessions.FirstMessage{Auth: e.firstMessageAuthenticate, Wire: &wire{multi: s.multi}}}, e.socket(s.multi))
	}
}

// socket answers a handshake: the URL's options are validated before the
// upgrade (a refusal is an HTTP answer in the vendor's shape), then the
// host admits the session and serves it. p is nil when the handshake had
// no credentials: the host then admits by the first message's.
func (e *Protocol) socket(multi bool) web.Handler {
	return func(ctx *fasthttp.RequestCtx, p *control.Principal) {
		q := ctx.QueryArgs()
		o, err := synth.ParseElevenLabsSocket(peekArg(q, argOutputFormat), peekArg(q, argLanguageCode))
		if err != nil {
			e.h.WriteError(ctx, err)
			return
		}
		o.Timestamps = true // alignment whenever the engine has word times
		w := &wire{voice: strings.Clone(voiceID(ctx)), options: o, multi: multi,
			auto: string(q.PeekBytes(argAutoMode)) == "true", seen: map[string]bool{}}
		e.h.Upgrade(ctx, p, nil, func(conn *websocket.Conn, env web.SessionEnv) web.Session {
			cfg := e.cfg.Session
			cfg.MaxContexts = maxContexts
			return sessions.New(conn, cfg, web.SessionDeps(e.h, env, w))
		})
	}
}

// peekArg is the query argument's value, nil when absent.
func peekArg(q *fasthttp.Args, name []byte) []byte {
	if !q.HasBytes(name) {
		return nil
	}
	return q.PeekBytes(name)
}

// socketAuthenticate finds the credentials of a handshake: the HTTP
// routes' headers, else the query's xi-api-key (or xi_api_key), its
// authorization ("Bearer ..." or the bare credential) or its
// single_use_token (a voicesvc access token, for browsers). The first
// form present decides. With none, the socket's first message may carry
// them (firstMessageAuthenticate; the host reads it).
func (e *Protocol) socketAuthenticate(ctx *fasthttp.RequestCtx) (*control.Principal, error) {
	if len(ctx.Request.Header.PeekBytes(hdrXIAPIKey)) > 0 || len(ctx.Request.Header.PeekBytes(hdrAuthorization)) > 0 {
		return e.authenticate(ctx)
	}
	q := ctx.QueryArgs()
	for _, name := range [][]byte{argXIAPIKey, argXIAPIKeyUnder, argAuthorization} {
		if v := q.PeekBytes(name); len(v) > 0 {
			return e.credential(trimBearer(v))
		}
	}
	if v := q.PeekBytes(argSingleUseToken); len(v) > 0 {
		return e.h.AuthToken(v)
	}
	return nil, errNoCredentials
}

// errNoCredentials: a handshake without any credential form; on a
// WebSocket handshake the first message may bring them (sessions.FirstMessage).
var errNoCredentials = &control.Error{Code: control.EUnauthorized, Message: errUnauthorized.Message,
	Cause: sessions.ErrNoCredentials}

// firstCredentials are the credential forms of a socket's first message,
// as the vendor documents them: "xi_api_key", or "authorization":
// "Bearer <token>" (the bare credential is taken too).
type firstCredentials struct {
	XIAPIKey      *string `json:"xi_api_key"`
	Authorization *string `json:"authorization"`
}

// firstMessageAuthenticate finds the principal of a socket's first message
// (sessions.FirstMessage): xi_api_key, else authorization, an API key or a
// voicesvc access token either way. A message that is not a JSON object,
// or has neither (or a field of another type), is unauthorized.
func (e *Protocol) firstMessageAuthenticate(msg []byte) (*control.Principal, error) {
	var m firstCredentials
	if err := json.Unmarshal(msg, &m); err != nil {
		return nil, errFirstMessage
	}
	switch {
	case m.XIAPIKey != nil && *m.XIAPIKey != "":
		return e.credential([]byte(*m.XIAPIKey))
	case m.Authorization != nil && *m.Authorization != "":
		return e.credential(trimBearer([]byte(*m.Authorization)))
	}
	return nil, errFirstMessage
}

// trimBearer is an authorization value past its "Bearer " (any case), or
// the bare credential as it is: the socket's forms take either.
func trimBearer(v []byte) []byte {
	if len(v) > len(prefixBearer) && bytes.EqualFold(v[:len(prefixBearer)], prefixBearer) {
		return bytes.TrimSpace(v[len(prefixBearer):])
	}
	return v
}

var errFirstMessage = control.Errorf(control.EUnauthorized,
	`no credentials: send xi-api-key with the handshake, or "xi_api_key" or "authorization" in the first message`)

// defaultSchedule is the vendor's default chunk_length_schedule: text is
// held until this many characters wait (or a flush, or the end).
var defaultSchedule = []int{120, 160, 250, 290}

// Schedule entries outside the vendor's range are refused.
const minSchedule, maxSchedule = 50, 500

// singleContext is the id of a stream-input socket's one context (its
// messages carry none).
const singleContext = "0"

// maxSeen bounds the context ids a socket remembers having opened.
const maxSeen = 64

// wire is one socket's sessions.Wire: its URL's voice and options, and the
// contexts it has opened (the vendor opens a context with a lone " ",
// which is not text to speak or to bill).
type wire struct {
	voice   string
	options synth.Options
	multi   bool
	auto    bool
	seen    map[string]bool
	// ended: a stream-input socket's text has ended (its empty text);
	// what follows while it finishes is ignored.
	ended bool
}

var _ sessions.Wire = (*wire)(nil)

// message is a client message of either socket. Types are strict: a
// field of the wrong type refuses the message.
type message struct {
	Text             *string         `json:"text"`
	ContextID        *string         `json:"context_id"`
	Flush            bool            `json:"flush"`
	TryTrigger       bool            `json:"try_trigger_generation"`
	CloseContext     bool            `json:"close_context"`
	CloseSocket      bool            `json:"close_socket"`
	VoiceSettings    json.RawMessage `json:"voice_settings"`
	GenerationConfig *struct {
		ChunkLengthSchedule []float64 `json:"chunk_length_schedule"`
	} `json:"generation_config"`
	// Credentials: the host reads them before the session (sessions.FirstMessage).
	XIAPIKey      *string `json:"xi_api_key"`
	Authorization *string `json:"authorization"`
}

func (w *wire) Hello(b []byte) []byte { return b }

// Parse reads one message into commands:
//
//	{"text":" ", voice_settings?, generation_config?}  opens the context (the space is not spoken)
//	{"text":"Hello ", "flush"?: true}                   adds text (opening the context if need be); flush renders it now
//	{"text":""}                                         stream-input: the end; multi: keeps the context alive
//	{"flush":true}                                      renders the waiting text now
//	{"close_context":true}                              multi: no more text; the context ends once spoken
//	{"close_socket":true}                               ends the socket once its contexts are spoken
//
// On multi-stream-input every message names its context_id (absent: the
// default context "0").
func (w *wire) Parse(b []byte, cmds []sessions.Command) ([]sessions.Command, error) {
	var m message
	if err := json.Unmarshal(b, &m); err != nil {
		return cmds, sessions.Invalid("", "not a stream-input message: %v", err)
	}
	if w.ended {
		return cmds, nil
	}
	ctx := singleContext
	if w.multi && m.ContextID != nil && *m.ContextID != "" {
		ctx = *m.ContextID
	}
	if m.CloseSocket {
		return append(cmds, sessions.Command{Kind: sessions.EndSession, Graceful: true}), nil
	}
	if m.Text != nil {
		text := *m.Text
		switch {
		case !w.seen[ctx]:
			open, err := w.open(ctx, &m)
			if err != nil {
				return cmds, err
			}
			if text == " " {
				text = "" // the opening space: no speech, not billed
			}
			w.remember(ctx)
			cmds = append(cmds, sessions.Command{Kind: sessions.Speak, Context: ctx, Text: text, Open: open})
		case text == "" && !w.multi:
			// The end of the input: what waits is spoken, then the
			// context ends and so does the socket.
			w.ended = true
			return append(cmds, sessions.Command{Kind: sessions.Append, Context: ctx, Finalize: true},
				sessions.Command{Kind: sessions.EndSession, Graceful: true}), nil
		case text != "":
			open, err := w.open(ctx, &m)
			if err != nil {
				return cmds, err
			}
			cmds = append(cmds, sessions.Command{Kind: sessions.Speak, Context: ctx, Text: text, Open: open})
		}
	}
	if m.Flush {
		cmds = append(cmds, sessions.Command{Kind: sessions.Flush, Context: ctx})
	}
	if m.CloseContext {
		delete(w.seen, ctx)
		cmds = append(cmds, sessions.Command{Kind: sessions.Append, Context: ctx, Finalize: true})
	}
	return cmds, nil
}

// remember notes that ctx was opened; the set is bounded (a forgotten id
// that sends a lone space again opens or appends nothing but that space).
func (w *wire) remember(ctx string) {
	if len(w.seen) >= maxSeen {
		clear(w.seen)
	}
	w.seen[ctx] = true
}

// open is how a message opens its context, should it be the first: the
// URL's voice and options, the message's voice_settings, and the buffer of
// its generation_config (else auto_mode's: none; else the vendor's default
// schedule).
func (w *wire) open(ctx string, m *message) (*sessions.OpenParams, error) {
	o := w.options
	if err := synth.ElevenLabsVoiceSettings(&o, m.VoiceSettings); err != nil {
		return nil, refusal(ctx, err)
	}
	p := &sessions.OpenParams{Voice: w.voice, Options: o}
	switch {
	case m.GenerationConfig != nil && m.GenerationConfig.ChunkLengthSchedule != nil:
		s := m.GenerationConfig.ChunkLengthSchedule
		if len(s) == 0 || len(s) > 16 {
			return nil, sessions.Invalid(ctx, "generation_config.chunk_length_schedule must hold 1 to 16 numbers")
		}
		p.Buffer.Schedule = make([]int, len(s))
		for i, v := range s {
			if v < minSchedule || v > maxSchedule {
				return nil, sessions.Invalid(ctx, "generation_config.chunk_length_schedule entries must be from %d to %d", minSchedule, maxSchedule)
			}
			p.Buffer.Schedule[i] = int(v)
		}
	case w.auto:
		p.Buffer.Immediate = true
	default:
		p.Buffer.Schedule = defaultSchedule
	}
	return p, nil
}

// refusal is a field's error as the socket's refusal of ctx's message.
func refusal(ctx string, err error) error {
	e := control.AsError(err)
	return &sessions.Refusal{Context: ctx, Code: e.Code, Message: e.Message}
}

func (w *wire) Encoder(c *sessions.ContextInfo) sessions.Encoder {
	return newEncoder(c, w.multi)
}

// AppendError writes {"error": code, "message", "fatal"?, "contextId"?}:
// the vendor's clients look for "error" (LiveKit's plugin rejects the
// context it names).
func (w *wire) AppendError(b []byte, contextID, code, msg string, fatal bool) []byte {
	b = append(b, `{"error":`...)
	b = appendJSONString(b, code)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, msg)
	if fatal {
		b = append(b, `,"fatal":true`...)
	}
	if contextID != "" && w.multi {
		b = append(b, `,"contextId":`...)
		b = appendJSONString(b, contextID)
	}
	return append(b, '}')
}

func (w *wire) AppendSessionEnded(b []byte, _ string) []byte { return b }
