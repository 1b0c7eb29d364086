package redact

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
)

const (
	key   = "vsk_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_ab"
	token = "vst_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210_-zz"
)

func TestString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"nothing to see", "nothing to see"},
		{"route=GET /voices status=200", "route=GET /voices status=200"},
		{"key " + key + " used", "key vsk_[REDACTED] used"},
		{"VST_abc", "VST_[REDACTED]"},
		{"vsk_ alone", "vsk_ alone"},
		{"X-API-Key: " + key + "\r\nHost: x", "X-API-Key: [REDACTED]\r\nHost: x"},
		{"x-api-key: not-a-key-shape\r\n", "x-api-key: [REDACTED]\r\n"},
		{"Authorization: Bearer " + token + "\r\nHost: x", "Authorization: [REDACTED]\r\nHost: x"},
		{"Authorization: Basic dXNlcjpwYXNz", "Authorization: [REDACTED]"},
		{"Proxy-Authorization:secret", "Proxy-Authorization:[REDACTED]"},
		// fasthttp logs request bytes with Go quoting.
		{`contents: "GET / HTTP/1.1\r\nX-Api-Key: ` + key + `\r\nAuthorization: Bearer ` + token + `\r\n\r\n"`,
			`contents: "GET / HTTP/1.1\r\nX-Api-Key: [REDACTED]\r\nAuthorization: [REDACTED]\r\n\r\n"`},
		{"GET /stream?api_key=" + key + "&voice=x", "GET /stream?api_key=[REDACTED]&voice=x"},
		{"GET /stream?access_token=opaque&x=1", "GET /stream?access_token=[REDACTED]&x=1"},
		{"authorization=hunter2 status=401", "authorization=[REDACTED] status=401"},
		{`{"authorization":"Bearer abc","n":1}`, `{"authorization":"[REDACTED]","n":1}`},
		{`{\"x-api-key\":\"abc\"}`, `{\"x-api-key\":\"[REDACTED]\"}`},
		{"Cookie: vs_session=abc; other=1\r\n", "Cookie: [REDACTED]\r\n"},
		{"authorization failed for this request", "authorization failed for this request"},
		{"Authorization:", "Authorization:"},
		{"two " + key + "," + token, "two vsk_[REDACTED],vst_[REDACTED]"},
		{"héllo " + key + " wörld", "héllo vsk_[REDACTED] wörld"},
	} {
		if got := String(c.in); got != c.want {
			t.Errorf("String(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

// secretLeft finds what String must never leave: a token prefix followed by
// a token character, or a credential name and separator followed by
// anything but the mask.
var secretLeft = regexp.MustCompile(`(?i)vs[kt]_[A-Za-z0-9_-]`)

func FuzzString(f *testing.F) {
	for _, s := range []string{
		"", key, "Bearer " + token, "X-API-Key: " + key + "\r\n", "authorization=a b",
		`"GET /?api_key=` + key + ` HTTP/1.1\r\n"`, "vsk_vsk_vsk_", "VsT_-", "x-api-key\\\":\\\"k",
		"cookie=;", "AUTHORIZATION :\t'x'", "vs", "api_key=&", "\xff\xfevsk_a",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := String(s)
		if m := secretLeft.FindString(out); m != "" {
			t.Fatalf("String(%q) = %q still holds %q", s, out, m)
		}
		if again := String(out); again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, out, again)
		}
		if firstSuspect(s) < 0 && out != s {
			t.Fatalf("changed text without anything to redact: %q -> %q", s, out)
		}
	})
}

type secretValuer struct{}

func (secretValuer) LogValue() slog.Value { return slog.StringValue("X-API-Key: " + key) }

type secretStruct struct{ Header string }

func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	l := Logger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	l = l.With("conn", "Authorization: Bearer "+token).WithGroup("req")
	l.Warn("fasthttp: bad request "+key,
		"err", errors.New("read "+key),
		"x-api-key", "opaque-value",
		"Authorization", 42,
		"valuer", secretValuer{},
		"bytes", []byte(token),
		"struct", secretStruct{Header: key},
		slog.Group("inner", "k", key, slog.Group("deeper", "t", token)),
		"n", 7, "ok", true)
	out := buf.String()
	if secretLeft.MatchString(out) || strings.Contains(out, "opaque-value") || strings.Contains(out, "=42") {
		t.Fatalf("a secret got through:\n%s", out)
	}
	for _, want := range []string{"req.n=7", "req.ok=true", "req.inner.deeper.t=vst_[REDACTED]", `req.x-api-key=[REDACTED]`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if NewHandler(l.Handler()) != l.Handler() {
		t.Errorf("wrapping twice")
	}
}

func BenchmarkStringClean(b *testing.B) {
	s := fmt.Sprintf("request_id=req_%024x route=%q status=200", 1, "GET /voices/{id}")
	for b.Loop() {
		String(s)
	}
}
