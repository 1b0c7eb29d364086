package bench

import (
	"encoding/json"
	"fmt"
)

// wsMsg is the union of the server messages the bench reads (interface 6.2).
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
	Message            string  `json:"message"`
	Fatal              bool    `json:"fatal"`
	Reason             string  `json:"reason"`
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
	var m wsMsg
	if err := json.Unmarshal(frame, &m); err != nil {
		return m, fmt.Errorf("text frame is not JSON: %w", err)
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
