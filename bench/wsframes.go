package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// wsMsg is the union of the server messages the bench reads (docs/realtime.md#client-messages).
type wsMsg struct {
	Type               string  `json:"type"`
	ContextID          string  `json:"context_id"`
	SentenceIndex      int     `json:"sentence_index"`
	ChunkIndex         int     `json:"chunk_index"`
	AudioDurationS     float64 `json:"audio_duration_s"`
	ByteLength         int     `json:"byte_length"`
	TotalAudioDuration float64 `json:"total_audio_duration_s"`
	SampleRate         int     `json:"sample_rate"`
	AudioFormat        string  `json:"audio_format"`
	Code               string  `json:"code"`
	RetryAfter         int     `json:"retry_after"` // task_failed upstream_busy: seconds
	Message            string  `json:"message"`
	Fatal              bool    `json:"fatal"`
	Reason             string  `json:"reason"`
	// Profile is task_done's server-side account: ttfb_ms runs from the
	// server reading task_start to its first audio chunk being queued.
	Profile struct {
		TTFBMs float64 `json:"ttfb_ms"`
	} `json:"profile"`
}

// pairChecker enforces the WebSocket framing rule: every audio_chunk text frame
// is immediately followed by exactly one binary frame of byte_length bytes for
// that context, and no binary frame arrives otherwise. A violation means the
// client cannot attribute audio to a context, so the bench reports it as the
// error "ws:pairing" instead of guessing.
type pairChecker struct {
	pending *wsMsg // the audio_chunk awaiting its binary frame
}

// Text consumes one text frame. It returns the decoded message, or an error
// when the frame is not JSON or arrives while a binary frame is owed.
func (p *pairChecker) Text(frame []byte) (wsMsg, error) {
	m, ok := parseAudioChunk(frame)
	if !ok {
		m = wsMsg{}
		if err := json.Unmarshal(frame, &m); err != nil {
			return m, fmt.Errorf("text frame is not JSON: %w", err)
		}
	}
	if p.pending != nil {
		want := p.pending
		p.pending = nil
		return m, fmt.Errorf("%q frame for context %q arrived where the binary frame of audio_chunk %d/%d was due",
			m.Type, m.ContextID, want.SentenceIndex, want.ChunkIndex)
	}
	if m.Type == "audio_chunk" {
		if m.ByteLength < 0 {
			return m, fmt.Errorf("audio_chunk with negative byte_length %d", m.ByteLength)
		}
		mc := m
		p.pending = &mc
	}
	return m, nil
}

// Binary consumes one binary frame of n bytes and returns the audio_chunk it
// belongs to.
func (p *pairChecker) Binary(n int) (wsMsg, error) {
	if p.pending == nil {
		return wsMsg{}, fmt.Errorf("binary frame of %d bytes without a preceding audio_chunk", n)
	}
	m := *p.pending
	p.pending = nil
	if n != m.ByteLength {
		return m, fmt.Errorf("binary frame of %d bytes for context %q, audio_chunk said byte_length %d",
			n, m.ContextID, m.ByteLength)
	}
	return m, nil
}

// parseAudioChunk decodes the audio_chunk frame exactly as the server writes
// it (fields in this order, no spaces, a context id without escapes):
//
//	{"type":"audio_chunk","context_id":"c1","sentence_index":0,"chunk_index":3,"audio_duration_s":0.02,"byte_length":960}
//
// Under a thousand realtime contexts encoding/json on these frames was a
// fifth of the client's CPU, taken from the server it shares cores with.
// Anything else, even equivalent JSON, reports !ok for encoding/json.
func parseAudioChunk(b []byte) (m wsMsg, ok bool) {
	lit := func(s string) bool {
		if !bytes.HasPrefix(b, []byte(s)) {
			return false
		}
		b = b[len(s):]
		return true
	}
	num := func() string {
		i := 0
		for i < len(b) && (b[i] >= '0' && b[i] <= '9' || b[i] == '.' || b[i] == '-' || b[i] == '+' || b[i] == 'e' || b[i] == 'E') {
			i++
		}
		s := string(b[:i])
		b = b[i:]
		return s
	}
	integer := func(dst *int) bool {
		v, err := strconv.Atoi(num())
		*dst = v
		return err == nil
	}
	if !lit(`{"type":"audio_chunk","context_id":"`) {
		return m, false
	}
	i := bytes.IndexByte(b, '"')
	if i < 0 || bytes.IndexByte(b[:i], '\\') >= 0 {
		return m, false
	}
	for _, c := range b[:i] {
		if c < 0x20 || c >= 0x80 {
			return m, false
		}
	}
	m.Type, m.ContextID = "audio_chunk", string(b[:i])
	b = b[i+1:]
	if !lit(`,"sentence_index":`) || !integer(&m.SentenceIndex) ||
		!lit(`,"chunk_index":`) || !integer(&m.ChunkIndex) || !lit(`,"audio_duration_s":`) {
		return m, false
	}
	d, err := strconv.ParseFloat(num(), 64)
	if err != nil {
		return m, false
	}
	m.AudioDurationS = d
	if !lit(`,"byte_length":`) || !integer(&m.ByteLength) || string(b) != "}" {
		return m, false
	}
	return m, true
}
