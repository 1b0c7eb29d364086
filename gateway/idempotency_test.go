package gateway

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"voicesvc/control"
)

func idemHdr(key string) []string { return []string{"Idempotency-Key", key} }

// TestIdempotentSpeak: a replay is byte-identical, marked, billed once; a
// different body is 422; a bad key is 400.
func TestIdempotentSpeak(t *testing.T) {
	ss := newSynthServer(t, synthOpts{billing: control.BillingEnforce})
	speak := "/voices/" + ss.voice + "/speak"
	body := map[string]any{"text": "hello there", "output_format": "s16le"}

	first := ss.do("POST", speak, ss.key, body, idemHdr("k-1")...)
	if first.status != 200 || len(first.body) == 0 || first.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %v", first.status, first.header)
	}
	again := ss.do("POST", speak, ss.key, body, idemHdr("k-1")...)
	if again.status != 200 || !bytes.Equal(again.body, first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v, %d bytes vs %d", again.status, again.header, len(again.body), len(first.body))
	}
	for _, h := range []string{"Content-Type", "X-Sample-Rate", "X-Audio-Format", "X-Channels", "X-Billing-Remaining"} {
		if again.header.Get(h) == "" || again.header.Get(h) != first.header.Get(h) {
			t.Errorf("replayed %s %q, first %q", h, again.header.Get(h), first.header.Get(h))
		}
	}
	if again.header.Get("X-Request-Id") == first.header.Get("X-Request-Id") {
		t.Errorf("replay reused the request id")
	}
	bal, err := ss.store.Balance(t.Context(), ss.ws.ID, control.Month(time.Now()), 1_000_000)
	if err != nil || bal.Used != int64(len("hello there")) {
		t.Fatalf("billed %d characters (%v), want once", bal.Used, err)
	}

	ss.do("POST", speak, ss.key, map[string]any{"text": "other"}, idemHdr("k-1")...).failure(t, 422, control.EIdempotencyKeyReused)
	// Keys are per workspace.
	other := ss.workspace("pro")
	otherKey := ss.newKey(other.ID, nil, 0, false)
	otherVoice := ss.readyVoice(other.ID, "en")
	if r := ss.do("POST", "/voices/"+otherVoice+"/speak", otherKey, body, idemHdr("k-1")...); r.status != 200 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("other workspace: %d %v", r.status, r.header)
	}
	for _, bad := range []string{strings.Repeat("x", 256), "caf\u00e9", "tab\there"} {
		ss.do("POST", speak, ss.key, body, idemHdr(bad)...).failure(t, 400, control.EInvalidRequest)
	}
	ss.do("POST", speak, ss.key, body, idemHdr(strings.Repeat("x", 255))...).ok(t)
}

// ok checks the status of a non-envelope 200 (audio).
func (r *response) ok(t testing.TB) {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
}

// TestIdempotentRefusedIsRetryable: a request refused before it runs (402)
// frees its key, so the same request runs once the cause is gone.
func TestIdempotentRefusedIsRetryable(t *testing.T) {
	ss := newSynthServer(t, synthOpts{billing: control.BillingEnforce, plan: "free"})
	noRPS := 0
	used := int64(10_000)
	ss.store.UpdateWorkspace(t.Context(), ss.ws.ID, control.WorkspaceUpdate{RPS: &noRPS, Used: &used})
	ss.srv.core.ResetKeys()
	speak := "/voices/" + ss.voice + "/speak"
	body := map[string]any{"text": "hi"}
	if r := ss.do("POST", speak, ss.key, body, idemHdr("retry")...); r.status != 402 {
		t.Fatalf("want 402: %d %s", r.status, r.body)
	}
	used = 0
	ss.store.UpdateWorkspace(t.Context(), ss.ws.ID, control.WorkspaceUpdate{Used: &used})
	r := ss.do("POST", speak, ss.key, body, idemHdr("retry")...)
	if r.status != 200 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry after 402: %d %v", r.status, r.header)
	}
}

// TestIdempotentInProgress: a duplicate sent while the first runs is 409.
func TestIdempotentInProgress(t *testing.T) {
	g := &gatedEngine{Engine: newRef(1)}
	ss := newSynthServer(t, synthOpts{eng: g})
	speak := "/voices/" + ss.voice + "/speak"
	body := map[string]any{"text": "a sentence that takes a moment to say"}
	done := make(chan *http.Response, 1)
	go func() { done <- ss.post(speak, ss.key, body, idemHdr("slow")...) }()
	if _, ok := waitFor(5*time.Second, func() bool { return g.started.Load() > 0 }); !ok {
		t.Fatal("first request never started")
	}
	ss.do("POST", speak, ss.key, body, idemHdr("slow")...).failure(t, 409, control.EIdempotencyInProgress)
	resp := <-done
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	ss.do("POST", speak, ss.key, body, idemHdr("slow")...).ok(t)
	if g.started.Load() != 1 {
		t.Fatalf("ran %d times", g.started.Load())
	}
}

// TestIdempotentCreateVoice: create replays the same voice (multipart
// uploads match across boundaries: dialect/native TestPartsHashBoundary).
func TestIdempotentCreateVoice(t *testing.T) {
	ts := newTestServer(t, "")
	in := map[string]any{"name": "v", "consent": true}
	a := ts.do("POST", "/voices", ts.key, in, idemHdr("create-1")...).data(t, 201)
	b := ts.do("POST", "/voices", ts.key, in, idemHdr("create-1")...)
	if b.header.Get("Idempotent-Replayed") != "true" || b.data(t, 201)["voice"].(map[string]any)["id"] != a["voice"].(map[string]any)["id"] {
		t.Fatalf("replay: %s", b.body)
	}
	ts.do("POST", "/voices", ts.key, map[string]any{"name": "w", "consent": true}, idemHdr("create-1")...).
		failure(t, 422, control.EIdempotencyKeyReused)
}
