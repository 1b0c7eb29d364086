package deepgram

import (
	"strconv"
	"time"

	"voicesvc/jsonw"
	"voicesvc/sessions"
	"voicesvc/synth"
)

// wire is the speak socket's vocabulary (docs/dialects.md#deepgram), one
// per socket. The socket has one implicit context, opened by the first
// Speak after the socket opens or after a Clear, with the voice and format
// of the handshake's query:
//
//	{"type":"Speak","text":"..."}  -> text appended; each sentence is
//	                                  spoken once its end is certain
//	{"type":"Flush"}               -> the waiting text spoken, then
//	                                  {"type":"Flushed","sequence_id":N}
//	                                  after its last audio
//	{"type":"Clear"}               -> the context cancelled (no audio of it
//	                                  follows), {"type":"Cleared","sequence_id":N}
//	{"type":"Close"}               -> the text spoken, then the socket closed
//
// Out: {"type":"Metadata",...} first, the audio as binary frames alone
// (raw samples of the query's encoding), Flushed and Cleared, a Warning
// for a refused message and an Error before the socket closes on a fatal
// one (or when a synthesis fails). Flush and Clear share one sequence:
// each takes the next id, from 0.
type wire struct {
	model, voiceID, requestID string
	options                   synth.Options
	seq                       int
}

// contextID names the socket's one context (never on the wire).
const contextID = "speak"

var _ sessions.Wire = (*wire)(nil)

// Hello is the Metadata message: the request's id, the model as asked
// (decisions: model_name echoes it), the voice it resolved to as the
// model's uuid.
func (w *wire) Hello(b []byte) []byte {
	b = append(b, `{"type":"Metadata","request_id":`...)
	b = jsonw.AppendString(b, w.requestID)
	b = append(b, `,"model_name":`...)
	b = jsonw.AppendString(b, w.model)
	b = append(b, `,"model_version":"voicesvc","model_uuid":`...)
	b = jsonw.AppendString(b, w.voiceID)
	return append(b, '}')
}

// Parse reads one client message. Every message is a JSON object with a
// string type; Speak's text goes through the core's text rule.
func (w *wire) Parse(b []byte, cmds []sessions.Command) ([]sessions.Command, error) {
	f, err := synth.Scan(b)
	if err != nil {
		return cmds, sessions.Invalid("", "message is not a JSON object")
	}
	typ, ok, err := synth.String("type", f.Type)
	switch {
	case err != nil:
		return cmds, err
	case !ok:
		return cmds, sessions.Invalid("", "field type is required")
	}
	switch typ {
	case "Speak":
		text, err := synth.DeepgramSpeakText(f.Text)
		if err != nil {
			return cmds, err
		}
		return append(cmds, sessions.Command{Kind: sessions.Speak, Context: contextID, Text: text,
			Open: &sessions.OpenParams{Voice: w.voiceID, Options: w.options,
				// A partial sentence waits for Flush (or Close), as the
				// vendor's buffer does: no idle flush cuts a sentence
				// whose rest the client is still producing.
				Buffer: sessions.Buffer{IdleFlush: -time.Nanosecond}}}), nil
	case "Flush":
		return append(cmds, sessions.Command{Kind: sessions.Flush, Context: contextID, FlushID: w.next()}), nil
	case "Clear":
		cleared := append([]byte(`{"type":"Cleared","sequence_id":`), w.next()...)
		return append(cmds, sessions.Command{Kind: sessions.Clear},
			sessions.Command{Kind: sessions.Reply, Text: string(append(cleared, '}'))}), nil
	case "Close":
		return append(cmds, sessions.Command{Kind: sessions.EndSession, Graceful: true}), nil
	}
	return cmds, sessions.Invalid("", "unknown message type %q: send Speak, Flush, Clear or Close", typ)
}

// next is the next sequence id, as JSON.
func (w *wire) next() string {
	id := strconv.Itoa(w.seq)
	w.seq++
	return id
}

func (w *wire) Encoder(*sessions.ContextInfo) sessions.Encoder { return encoder{} }

// AppendError: a Warning for a refused message, an Error before a close.
// Both carry the vendor's fields (description and code, as its SDK types
// them) and the older warn_/err_ pair its plugins log; code is voicesvc's.
func (w *wire) AppendError(b []byte, _, code, msg string, fatal bool) []byte {
	return appendEvent(b, fatal, code, msg)
}

func appendEvent(b []byte, fatal bool, code, msg string) []byte {
	kind, legacyCode, legacyMsg := "Warning", "warn_code", "warn_msg"
	if fatal {
		kind, legacyCode, legacyMsg = "Error", "err_code", "err_msg"
	}
	b = append(b, `{"type":"`...)
	b = append(b, kind...)
	b = append(b, `","description":`...)
	b = jsonw.AppendString(b, msg)
	b = append(b, `,"code":`...)
	b = jsonw.AppendString(b, code)
	b = append(b, `,"`...)
	b = append(b, legacyCode...)
	b = append(b, `":`...)
	b = jsonw.AppendString(b, code)
	b = append(b, `,"`...)
	b = append(b, legacyMsg...)
	b = append(b, `":`...)
	b = jsonw.AppendString(b, msg)
	return append(b, '}')
}

// AppendSessionEnded sends nothing: the close frame ends the socket.
func (w *wire) AppendSessionEnded(b []byte, _ string) []byte { return b }

// encoder writes the context's events: binary audio, Flushed, and an
// Error when its synthesis fails; the others have no message.
type encoder struct{}

func (encoder) Started(b []byte) []byte { return b }
func (encoder) Audio(b, bin []byte, a *sessions.Audio) ([]byte, []byte) {
	return b, append(bin, a.Bytes...)
}
func (encoder) Words(b []byte, _ int, _ string, _ int, _ []synth.Word) []byte { return b }
func (encoder) SentenceDone(b []byte, _ int, _ string, _ float64) []byte      { return b }
func (encoder) Flushed(b []byte, id string) []byte {
	b = append(b, `{"type":"Flushed","sequence_id":`...)
	b = append(b, id...)
	return append(b, '}')
}
func (encoder) Done(b []byte, _ *sessions.Done) []byte           { return b }
func (encoder) Cancelled(b []byte, _ *sessions.Cancelled) []byte { return b }

// Failed: the text's audio will not come; an Error says why (the socket
// stays open for the next Speak).
func (encoder) Failed(b []byte, code string, _, _ int, _ string) []byte {
	return appendEvent(b, true, code, "synthesis failed: "+code)
}
