package gateway

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// fasthttp's message about unparsable headers quotes 200-byte pieces of the
// request, which may cut a key anywhere: those bytes are never logged, and
// the rest of its messages are redacted.
func TestFasthttpLoggerRedacts(t *testing.T) {
	key := "vsk_" + strings.Repeat("k", 40)
	var buf bytes.Buffer
	l := fasthttpLogger{slog.New(slog.NewTextHandler(&buf, nil))}
	l.Printf("error when serving connection %q<->%q: %v", "a", "b",
		`error when reading request headers: EOF. Buffer size=900, contents: "GET / HTTP/1.1\r\nX-Pad: ppp"..."kkkkkkkkkkkk\r\nAuthorization: Bearer vst_abc\r\n"`)
	l.Printf("unsupported http request method %q in %q", "G\x01T", "G\x01T /?api_key="+key+" HTTP/1.1\r\n")
	out := buf.String()
	for _, leak := range []string{"kkkk", "vst_abc", key[4:]} {
		if strings.Contains(out, leak) {
			t.Errorf("%q is in the log:\n%s", leak, out)
		}
	}
	if !strings.Contains(out, "Buffer size=900") || !strings.Contains(out, "api_key=[REDACTED]") {
		t.Errorf("the message lost more than the request bytes:\n%s", out)
	}
}
