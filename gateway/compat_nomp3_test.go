//go:build nomp3

package gateway

import (
	"strings"
	"testing"

	"voicesvc/codec"
)

// TestCompatNoMP3: a build without the MP3 encoder answers mp3, the default
// included, with 400 unsupported_response_format asking for wav or pcm,
// before any slot or charge; wav, pcm, opus and flac still work.
func TestCompatNoMP3(t *testing.T) {
	if codec.MP3Available {
		t.Fatal("built with MP3")
	}
	ss := newSynthServer(t, synthOpts{})
	for _, format := range []any{nil, "mp3"} {
		body := map[string]any{"model": "service-v1", "voice": ss.voice, "input": "Hello there."}
		if format != nil {
			body["response_format"] = format
		}
		resp, b := ss.compatDo(body, bearerHdr(ss.key)...)
		e := checkCompatError(t, resp, b, 400, "invalid_request_error", "unsupported_response_format", "response_format")
		if m, _ := e["message"].(string); !containsAll(m, "wav", "pcm") {
			t.Errorf("message %q does not ask for wav or pcm", m)
		}
		if resp.Header.Get("X-Billing-Remaining") != "" {
			t.Errorf("refused request metered: %v", resp.Header)
		}
	}
	for _, format := range []string{"wav", "pcm", "opus", "flac"} {
		resp, b := ss.compatDo(map[string]any{"model": "tts-1", "voice": ss.voice, "input": "Hi.",
			"response_format": format}, bearerHdr(ss.key)...)
		if resp.StatusCode != 200 || len(b) == 0 {
			t.Errorf("%s: %d %.100s", format, resp.StatusCode, b)
		}
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
