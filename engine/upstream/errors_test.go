package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"voicesvc/engine"
)

// TestErrorClasses: each upstream answer maps to the engine error the
// gateway turns into a status: ErrBusy (503 upstream_busy, with the
// upstream's Retry-After), ErrInvalidInput (422, with its message), or a
// plain error (502 upstream_error).
func TestErrorClasses(t *testing.T) {
	status := func(code int, retryAfter, body string) func(http.ResponseWriter, *http.Request, speechBody) bool {
		return func(w http.ResponseWriter, r *http.Request, _ speechBody) bool {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			w.Write([]byte(body))
			return true
		}
	}
	const (
		busy     = "busy"
		invalid  = "invalid"
		upstream = "upstream"
	)
	tests := []struct {
		name       string
		answer     func(http.ResponseWriter, *http.Request, speechBody) bool
		class      string
		retryAfter int
		message    string // in the error
	}{
		{"429", status(429, "7", `{"error":{"message":"rate limited"}}`), busy, 7, "rate limited"},
		{"503 no retry-after", status(503, "", "overloaded"), busy, 1, "overloaded"},
		{"503 date", status(503, time.Now().Add(3*time.Second).UTC().Format(http.TimeFormat), ""), busy, 3, "Service Unavailable"},
		{"400 kokoro", status(400, "", `{"detail":{"error":"invalid_model","message":"Unsupported model: x","type":"invalid_request_error"}}`), invalid, 0, "Unsupported model: x"},
		{"404", status(404, "", `{"error":{"code":"voice_not_found","message":"no voice zz"}}`), invalid, 0, "no voice zz"},
		{"413", status(413, "", ""), invalid, 0, "Request Entity Too Large"},
		{"422 fastapi", status(422, "", `{"detail":[{"loc":["body","input"],"msg":"field required"}]}`), invalid, 0, "field required"},
		{"500", status(500, "", `{"detail":"boom"}`), upstream, 0, "boom"},
		{"502", status(502, "", ""), upstream, 0, "502"},
		{"401", status(401, "", `{"error":{"message":"bad key"}}`), upstream, 0, "bad key"},
		{"403", status(403, "", ""), upstream, 0, "403"},
		{"json 200", status(200, "", `{"audio":"..."}`), upstream, 0, "not pcm"},
		{"cut short", cutAfter(4000), upstream, 0, "cut short"},
		{"other rate", withHeader("X-Sample-Rate", "22050"), upstream, 0, "sample_rate is 24000"},
		{"stereo", withHeader("X-Channels", "2"), upstream, 0, "mono"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.before = tc.answer
			e := newEngine(t, []string{f.srv.URL}, nil)
			_, err := speak(context.Background(), e, "Errors.", time.Time{})
			var be *BusyError
			var got string
			switch {
			case errors.As(err, &be) && errors.Is(err, engine.ErrBusy):
				got = busy
				// An HTTP date has whole seconds: one less is fine.
				if be.RetryAfter != tc.retryAfter && !(strings.Contains(tc.name, "date") && be.RetryAfter == tc.retryAfter-1) {
					t.Errorf("Retry-After %d, want %d", be.RetryAfter, tc.retryAfter)
				}
				var ra interface{ RetryAfterSeconds() int }
				if !errors.As(err, &ra) || ra.RetryAfterSeconds() != be.RetryAfter {
					t.Error("RetryAfterSeconds not found through errors.As")
				}
			case errors.Is(err, engine.ErrInvalidInput):
				got = invalid
				if strings.Contains(err.Error(), "127.0.0.1") {
					t.Errorf("an invalid-input error reaches the client: it must not name the upstream's URL: %v", err)
				}
			case err != nil:
				got = upstream
			}
			if got != tc.class || err == nil || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err %v: class %q, want %q with %q", err, got, tc.class, tc.message)
			}
			st := e.Replicas()[0]
			if n := map[string]uint64{busy: st.ErrorsBusy, invalid: st.ErrorsInvalid, upstream: st.ErrorsUpstream}[tc.class]; n != 1 || st.Outstanding != 0 {
				t.Errorf("counters %+v", st)
			}
		})
	}
}

// withHeader answers audio with a header that contradicts the configuration.
func withHeader(k, v string) func(http.ResponseWriter, *http.Request, speechBody) bool {
	return func(w http.ResponseWriter, r *http.Request, _ speechBody) bool {
		w.Header().Set(k, v)
		return false
	}
}

func TestRetryAfterHeader(t *testing.T) {
	now := time.Now()
	for h, want := range map[string]int{"": 1, "0": 1, "12": 12, "junk": 1, "99999": 3600,
		now.Add(90 * time.Second).UTC().Format(http.TimeFormat): 90} {
		if got := retryAfter(h, now); got != want && !(want == 90 && got == 91) {
			t.Errorf("Retry-After %q: %d, want %d", h, got, want)
		}
	}
}

func TestUpstreamMessage(t *testing.T) {
	long := strings.Repeat("é", 400)
	for _, tc := range []struct{ body, want string }{
		{`{"error":{"message":"m1"}}`, "m1"},
		{`{"error":"m2"}`, "m2"},
		{`{"detail":"m3"}`, "m3"},
		{`{"message":"m4"}`, "m4"},
		{"plain\ntext\x00", "plain text"},
		{`{}`, "Bad Request"},
		{fmt.Sprintf("%q", long), ""},
	} {
		got := upstreamMessage([]byte(tc.body), 400)
		if tc.want != "" && !strings.HasPrefix(got, tc.want) || len(got) > maxMessage+len("…") || !utf8Valid(got) {
			t.Errorf("%q: %q, want %q", tc.body, got, tc.want)
		}
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "?") == s }

func TestConfigValidate(t *testing.T) {
	t.Setenv("UPSTREAM_TEST_KEY", "vsk_env")
	good := func() Config {
		return Config{Name: "up1", Type: "openai", URLs: []string{"http://127.0.0.1:9001/v1/"}, Model: "m",
			Voices: []Voice{{Alias: "up1-a", Voice: "a", Language: "en-US"}}}
	}
	c := good()
	c.APIKeyEnv = "UPSTREAM_TEST_KEY"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.APIKey != "vsk_env" || c.SampleRate != 24000 || c.MaxConcurrency != 8 || c.Timeout != 10*time.Second ||
		c.EjectAfter != 3 || c.EjectFor != 5*time.Second || c.MaxWaiting != 32 || c.URLs[0] != "http://127.0.0.1:9001/v1" ||
		c.Voices[0].Name != "up1-a" || c.SentenceTimeout != 60*time.Second || c.MaxAudioSecondsPerChar != 1 ||
		c.MaxSentenceBytes != 16<<20 {
		t.Errorf("defaults: %+v", c)
	}
	tests := []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Name = "Up_1" }, "name"},
		{func(c *Config) { c.Name = strings.Repeat("a", 33) }, "name"},
		{func(c *Config) { c.Type = "grpc" }, "type"},
		{func(c *Config) { c.URLs = nil }, "urls"},
		{func(c *Config) { c.URLs = []string{"ftp://x"} }, "urls[0]"},
		{func(c *Config) { c.URLs = []string{"http://u:secret@h/v1?x=1"} }, "urls[0]"},
		{func(c *Config) { c.URLs = []string{"http://h/v1", "http://h/v1/"} }, "twice"},
		{func(c *Config) { c.APIKey, c.APIKeyEnv = "k", "UPSTREAM_TEST_KEY" }, "exclusive"},
		{func(c *Config) { c.APIKeyEnv = "UPSTREAM_TEST_UNSET" }, "unset"},
		{func(c *Config) { c.Model = "" }, "model"},
		{func(c *Config) { c.SampleRate = 100 }, "sample_rate"},
		{func(c *Config) { c.MaxConcurrency = -1 }, "max_concurrency"},
		{func(c *Config) { c.Timeout = -time.Second }, "timeout"},
		{func(c *Config) { c.SentenceTimeout = -time.Second }, "sentence_timeout"},
		{func(c *Config) { c.MaxAudioSecondsPerChar = -1 }, "max_audio_seconds_per_char"},
		{func(c *Config) { c.MaxAudioSecondsPerChar = 61 }, "max_audio_seconds_per_char"},
		{func(c *Config) { c.MaxSentenceBytes = -1 }, "max_sentence_bytes"},
		{func(c *Config) { c.Voices[0].Alias = "Bad Alias" }, "alias"},
		{func(c *Config) { c.Voices = append(c.Voices, c.Voices[0]) }, "repeated"},
		{func(c *Config) { c.Voices[0].Voice = "" }, "voice is required"},
		{func(c *Config) { c.Voices[0].Language = "english!" }, "language"},
	}
	for _, tc := range tests {
		c := good()
		tc.mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want one about %q", c, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("error shows a password: %v", err)
		}
	}
}
