package chaos

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"voicesvc/e2e/harness"
)

// TestChaosFast runs the fast probes against the real binary
// ($VOICESVC_BIN, else built once by the e2e harness): the part of the
// hardening suite that runs with every `make test`.
func TestChaosFast(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real binary")
	}
	s, err := NewSuite(harness.Binary(t), testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	results := s.Run(ctx, FastProbes(), nil)
	var b strings.Builder
	ok := Report(&b, results)
	t.Log(b.String())
	if !ok {
		for _, r := range results {
			if !r.Pass {
				t.Errorf("%s: want %s; got %s", r.Probe, r.Expected, r.Observed)
			}
		}
		if os.Getenv("CHAOS_SERVER_LOGS") != "" && s.Main != nil {
			t.Logf("main server log:\n%s", s.Main.Logs())
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
