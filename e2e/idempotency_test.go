package e2e

import (
	"bytes"
	"testing"
	"time"

	"voicesvc/e2e/harness"
)

func idemHdr(key, apiKey string) []string {
	return []string{"Idempotency-Key", key, "X-API-Key", apiKey}
}

// TestIdempotentSpeakAcrossServers (Postgres, two servers): a retry on the
// other server replays byte-identical audio and is billed once; a different
// body with the same key is 422; a duplicate sent while the first runs is
// 409 on either server.
func TestIdempotentSpeakAcrossServers(t *testing.T) {
	a, b := twoPG(t, 1)
	e := newEnv(t, a, "pro", "--billing", "enforce")
	body := `{"text":"Idempotent speech.","output_format":"s16le"}`
	used0 := usedOf(t, e.db, e.ws)

	first := mustCall(t, "POST", e.speakURL(a), body, idemHdr("speak-1", e.key)...)
	if first.status != 200 || len(first.body) == 0 {
		t.Fatalf("first: %d %.200s", first.status, first.body)
	}
	for _, srv := range []*harness.Server{a, b} {
		r := mustCall(t, "POST", e.speakURL(srv), body, idemHdr("speak-1", e.key)...)
		if r.status != 200 || !bytes.Equal(r.body, first.body) || r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %d replayed=%q, %d bytes vs %d", r.status, r.header.Get("Idempotent-Replayed"), len(r.body), len(first.body))
		}
		if r.header.Get("X-Billing-Remaining") != first.header.Get("X-Billing-Remaining") ||
			r.header.Get("Content-Type") != first.header.Get("Content-Type") {
			t.Fatalf("replayed headers %v, first %v", r.header, first.header)
		}
	}
	// Usage counts within a lease sync of the synthesis.
	if used := eventuallyUsed(t, e.db, e.ws, used0+int64(len("Idempotent speech."))); used-used0 != int64(len("Idempotent speech.")) {
		t.Fatalf("billed %d characters for one request replayed twice", used-used0)
	}
	if r := mustCall(t, "POST", e.speakURL(b), `{"text":"Another text."}`, idemHdr("speak-1", e.key)...); r.outcome() != "422 idempotency_key_reused" {
		t.Fatalf("different body: %s", r.outcome())
	}

	// Concurrent duplicate: the first runs for a few seconds (paced engine).
	slow := `{"text":"` + longText[:60] + `","output_format":"s16le"}`
	done := make(chan *resp, 1)
	go func() { done <- call("POST", e.speakURL(a), slow, idemHdr("speak-2", e.key)...) }()
	time.Sleep(500 * time.Millisecond) // the first has claimed the key
	if dup := mustCall(t, "POST", e.speakURL(b), slow, idemHdr("speak-2", e.key)...); dup.outcome() != "409 idempotency_in_progress" {
		t.Fatalf("duplicate while running: %s", dup.outcome())
	}
	if r := <-done; r == nil || r.status != 200 {
		t.Fatalf("the first of the duplicates: %s", r.outcome())
	}
}
