package upstream

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"voicesvc/engine"
)

// TestLive speaks through a real server when UPSTREAM_LIVE_URL is set
// (a Kokoro-FastAPI at http://127.0.0.1:8880/v1, another voicesvc's
// {api_root}/compat): UPSTREAM_LIVE_KEY, UPSTREAM_LIVE_MODEL (default
// "kokoro"), UPSTREAM_LIVE_VOICE (default "af_bella"), UPSTREAM_LIVE_RATE
// (default 24000) and UPSTREAM_LIVE_DISCOVER=1 to list its voices too.
func TestLive(t *testing.T) {
	url := os.Getenv("UPSTREAM_LIVE_URL")
	if url == "" {
		t.Skip("UPSTREAM_LIVE_URL is not set")
	}
	env := func(k, def string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return def
	}
	cfg := Config{Name: "live", Type: "openai", URLs: []string{url}, APIKey: os.Getenv("UPSTREAM_LIVE_KEY"),
		Model: env("UPSTREAM_LIVE_MODEL", "kokoro"), Discover: os.Getenv("UPSTREAM_LIVE_DISCOVER") == "1"}
	if r := os.Getenv("UPSTREAM_LIVE_RATE"); r != "" {
		cfg.SampleRate = atoiOr(r, 0)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if cfg.Discover {
		n, err := e.Discover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var aliases []string
		for _, v := range e.Catalog() {
			aliases = append(aliases, v.Alias+"("+v.Language+")")
		}
		t.Logf("discovered %d voices: %s", n, strings.Join(aliases, " "))
	}
	start := time.Now()
	var first time.Duration
	samples, lasts := 0, 0
	err = e.Synthesize(ctx, engine.Request{Text: "Hello from the gateway. This is the second sentence.",
		Profile: []byte(env("UPSTREAM_LIVE_VOICE", "af_bella"))}, func(c engine.Chunk) error {
		if first == 0 {
			first = time.Since(start)
		}
		samples += len(c.Samples)
		if c.Last {
			lasts++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if lasts != 2 || samples < e.NativeRate()/2 {
		t.Fatalf("%d samples, %d sentences", samples, lasts)
	}
	t.Logf("%.2f s of audio at %d Hz; first chunk after %v, all after %v; %+v",
		float64(samples)/float64(e.NativeRate()), e.NativeRate(), first, time.Since(start), e.Replicas()[0])
}

func atoiOr(s string, def int) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return def
		}
		n = n*10 + int(c-'0')
	}
	return n
}
