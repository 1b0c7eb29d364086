package bench

import (
	"context"
	"testing"
	"time"
)

// TestWSRefusalWaitsRetryAfter: a context refused for capacity (task_failed
// upstream_busy before any audio) is a refusal, and the worker waits the
// frame's retry_after before its next context, or a second when it names none.
func TestWSRefusalWaitsRetryAfter(t *testing.T) {
	srv := newFakeServer(t)
	tests := []struct {
		voice string
		want  time.Duration
	}{
		{fakeBusy, refusalBackoff},
		{fakeBusyFor, 3 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.voice, func(t *testing.T) {
			tg := &target{base: srv.URL, apiRoot: srv.URL + apiPath, key: fakeKey, client: newHTTPClient(1),
				voiceID: tc.voice, text: "Hello there.", format: "pcm_s16le", sampleRate: 24000}
			sc := newWSScenario(tg, 1, false, 0)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := sc.open(ctx, 1); err != nil {
				t.Fatal(err)
			}
			defer sc.close()
			s := sc.do(ctx, 0)
			if !s.refused || s.err != "" || s.retryAfter != tc.want {
				t.Fatalf("sample refused %v err %q retryAfter %v, want a refusal waiting %v", s.refused, s.err, s.retryAfter, tc.want)
			}
		})
	}
}
