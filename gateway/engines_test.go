package gateway

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/engine/reference"
	"voicesvc/synth"
)

// fakeUpstream is the reference engine under another name and rate, with
// replicas whose state the test sets: enough to tell, from the outside,
// which engine rendered a voice and whether readyz reads the registry.
type fakeUpstream struct {
	engine.Engine
	rate    int
	ejected atomic.Bool
}

func (f *fakeUpstream) Name() string    { return "up1" }
func (f *fakeUpstream) NativeRate() int { return f.rate }
func (f *fakeUpstream) Catalog() []engine.CatalogVoice {
	return []engine.CatalogVoice{{Alias: "up1-x", Name: "X", Language: "en-US", Profile: reference.MarshalProfile(220)}}
}
func (f *fakeUpstream) Status() engine.Status {
	state := "up"
	if f.ejected.Load() {
		state = "ejected"
	}
	return engine.Status{Name: "up1", Type: "openai", Replicas: []engine.ReplicaStatus{{URL: "http://10.0.0.1/v1", State: state}}}
}

// engineServer is a test server with the reference engine built in and
// fakeUpstream beside it, catalog seeded with both.
func engineServer(t *testing.T, up *fakeUpstream) *testServer {
	t.Helper()
	ts := &testServer{t: t, store: openStore(t, filepath.Join(t.TempDir(), "voicesvc.db"))}
	builtin := reference.New(reference.Options{})
	reg, err := engine.NewRegistry(builtin, up)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.SeedCatalog(context.Background(), ts.store, builtin, up); err != nil {
		t.Fatal(err)
	}
	ts.serve(Config{}, Deps{Store: ts.store, Engine: builtin, Engines: reg, Logger: slog.New(slog.DiscardHandler)})
	ts.ws = ts.workspace("pro")
	ts.key = ts.newKey(ts.ws.ID, nil, 0, false)
	return ts
}

// Each voice renders with its own engine at that engine's rate; a voice
// whose engine is not configured is 503 unavailable; readyz lists the
// upstream and is not ready once every replica of it is ejected.
func TestVoicesRenderWithTheirEngine(t *testing.T) {
	up := &fakeUpstream{Engine: reference.New(reference.Options{}), rate: 16000}
	ts := engineServer(t, up)
	speak := func(id string) *response {
		return ts.do("POST", "/voices/"+id+"/speak", ts.key, map[string]any{"text": "One two three.", "output_format": "s16le", "sample_rate": 16000})
	}
	builtin, upstream := speak(synth.CatalogVoiceID("ref-en-high")), speak(synth.CatalogVoiceID("up1-x"))
	if builtin.status != 200 || upstream.status != 200 {
		t.Fatalf("speak: %d %s / %d %s", builtin.status, builtin.body, upstream.status, upstream.body)
	}
	// The same reference audio: resampled from 24 kHz for the built-in
	// voice, passed through for the upstream that says it is at 16 kHz.
	if n, m := len(builtin.body), len(upstream.body); m < n*14/10 || m > n*16/10 {
		t.Fatalf("upstream voice %d bytes, built-in %d: want 1.5x (24 kHz audio taken as 16 kHz)", m, n)
	}

	ghost := &control.Voice{OrgID: ts.ws.ID, Name: "ghost", Status: control.VoiceReady, Visibility: "org",
		CloneMethod: "remix", Profile: []byte("x"), Engine: "gone"}
	if err := ts.store.CreateVoice(context.Background(), ghost); err != nil {
		t.Fatal(err)
	}
	speak(ghost.ID).failure(t, 503, control.EUnavailable)

	r := ts.do("GET", "!/readyz", "", nil)
	if r.status != 200 || !strings.Contains(string(r.body), `"engines":[{"name":"up1","type":"openai","replicas":[{"url":"http://10.0.0.1/v1","state":"up"}]}]`) {
		t.Fatalf("readyz: %d %s", r.status, r.body)
	}
	up.ejected.Store(true)
	ts.do("GET", "!/readyz", "", nil).failure(t, 503, control.EUnavailable)
}
