package e2e

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"voicesvc/e2e/harness"
)

// upPair is the gateway in front of another voicesvc: B is a voicesvc
// (espeak), A lists B's compat endpoint as an upstream engine "b" and has
// B's English voice in its catalog as alias b-en.
type upPair struct {
	a, b         *harness.Server
	keyA, keyB   string
	voiceA       string // the id of b-en on A
	voiceB       string // the voice on B it renders with
	config, yaml string // A's configuration file and its text
}

// startUpPair starts B, then A with B as upstream (extra is appended to
// A's engines list) and A's built-in engine the unpaced reference.
func startUpPair(t *testing.T, extra string, aArgs ...string) *upPair {
	t.Helper()
	p := &upPair{}
	p.b = harness.Start(t, harness.Options{Args: []string{"--engine-workers", "1"}})
	_, p.keyB = harness.Workspace(t, p.b.DB, "enterprise")
	p.voiceB = synVoices(t, p.b, p.keyB)["en"]
	p.yaml = fmt.Sprintf(`log_level: info
engines:
  - name: b
    type: openai
    urls: [%s/compat]
    api_key: %s
    model: service-v1
    timeout: 5s
    voices:
      - {alias: b-en, voice: %s, name: "B English", language: en-US, labels: {gender: male}}
%s`, p.b.API, p.keyB, p.voiceB, extra)
	p.config = filepath.Join(t.TempDir(), "voicesvc.yaml")
	if err := os.WriteFile(p.config, []byte(p.yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p.a = harness.Start(t, harness.Options{Args: append(refArgs(0, "--config", p.config), aArgs...)})
	_, p.keyA = harness.Workspace(t, p.a.DB, "enterprise")
	p.voiceA = voiceByAlias(t, p.a, p.keyA, "b-en")
	return p
}

// voiceByAlias finds a public voice's id on srv.
func voiceByAlias(t testing.TB, srv *harness.Server, key, alias string) string {
	t.Helper()
	r := mustCall(t, "GET", srv.API+"/voices?visibility=public&page_size=100", nil, keyHdr(key)...)
	for _, v := range r.data(t)["voices"].([]any) {
		if m := v.(map[string]any); m["alias"] == alias {
			return m["id"].(string)
		}
	}
	t.Fatalf("no voice %s on %s: %.500s", alias, srv.URL, r.body)
	return ""
}

// wavSeconds is the length of a WAV body, header sizes or not (a streamed
// WAV has none): the bytes after the 44-byte header, 16-bit mono.
func wavSeconds(t testing.TB, b []byte) float64 {
	t.Helper()
	if len(b) < 44 || string(b[:4]) != "RIFF" {
		t.Fatalf("not a WAV: %d bytes", len(b))
	}
	return float64((len(b)-44)/2) / float64(binary.LittleEndian.Uint32(b[24:]))
}

// within reports whether got is within frac of want.
func within(got, want, frac float64) bool { return want > 0 && math.Abs(got-want) <= frac*want }

// fakeUpstream imitates an OpenAI-compatible speech server whose behaviour
// the voice picks: "busy429" and "busy503" refuse with a Retry-After,
// "bad" is a 400, "hang" never answers, "stream" streams a tone until the
// client leaves. It records when each request's connection went away.
type fakeUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	gone []time.Time // when a streaming or hanging request saw its client leave
	auth []string    // Authorization headers received
}

func newFakeUpstream(t *testing.T) *fakeUpstream {
	f := &fakeUpstream{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Voice, Input, ResponseFormat string
		}
		json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.mu.Unlock()
		switch body.Voice {
		case "busy429":
			w.Header().Set("Retry-After", "7")
			http.Error(w, `{"detail":"too many requests"}`, http.StatusTooManyRequests)
		case "busy503":
			w.Header().Set("Retry-After", "3")
			http.Error(w, `{"detail":"overloaded"}`, http.StatusServiceUnavailable)
		case "bad":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"detail":{"error":"processing_error","message":"text contains no speakable content"}}`))
		case "hang":
			<-r.Context().Done()
			f.left()
		case "stream":
			w.Header().Set("Content-Type", "audio/pcm")
			chunk := make([]byte, 960) // 20 ms at 24 kHz, s16le
			for i := 0; i < len(chunk); i += 2 {
				binary.LittleEndian.PutUint16(chunk[i:], uint16(int16(8000*math.Sin(float64(i)/8))))
			}
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
				if _, err := w.Write(chunk); err != nil {
					f.left()
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					f.left()
					return
				case <-tick.C:
				}
			}
		default:
			http.Error(w, "unknown voice", http.StatusNotFound)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeUpstream) left() {
	f.mu.Lock()
	f.gone = append(f.gone, time.Now())
	f.mu.Unlock()
}

// waitGone waits until n requests have seen their client leave and returns
// the time the last one did.
func (f *fakeUpstream) waitGone(t testing.TB, n int) time.Time {
	t.Helper()
	var at time.Time
	if !poll(5*time.Second, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.gone) >= n {
			at = f.gone[n-1]
			return true
		}
		return false
	}) {
		t.Fatalf("the upstream request was not closed")
	}
	return at
}

// fakeEngines is the configuration of one engine per behaviour of f, each
// with its own replica state: fake-<voice> renders with voice.
func fakeEngines(f *fakeUpstream, timeout string) string {
	var b strings.Builder
	for _, v := range []string{"busy429", "busy503", "bad", "hang", "stream"} {
		fmt.Fprintf(&b, `  - name: f-%s
    type: openai
    urls: [%s/v1]
    api_key: fake-key
    model: kokoro
    timeout: %s
    voices:
      - {alias: fake-%s, voice: %s, language: en}
`, strings.ToLower(v), f.URL, timeout, strings.ToLower(v), v)
	}
	return b.String()
}

// upOpenStream sends a synthesis and returns the response unread, with a
// cancel that closes its connection.
func upOpenStream(t testing.TB, url, key string, body any) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	j, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(string(j)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		cancel()
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp, cancel
}
