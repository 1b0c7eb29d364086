package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"voicesvc/codec"
	"voicesvc/e2e/harness"
	"voicesvc/engine"
	"voicesvc/engine/espeak"
)

// kokoroFixture is a fixture of Kokoro-FastAPI's shape, not Kokoro itself:
// GET /v1/audio/voices answers {"voices":["af_bella","bf_emma"]} as
// Kokoro-FastAPI does, and POST /v1/audio/speech streams real speech as
// s16le pcm, rendered by our own espeak-ng engine (in this process) with a
// voice per Kokoro name, at the engine's rate.
type kokoroFixture struct {
	*httptest.Server
	eng      *espeak.Engine
	profiles map[string][]byte
	mu       sync.Mutex // espeak-ng renders one sentence at a time
}

func newKokoroFixture(t *testing.T) *kokoroFixture {
	t.Helper()
	eng, err := espeak.New()
	if err != nil {
		t.Fatal(err)
	}
	f := &kokoroFixture{eng: eng, profiles: map[string][]byte{}}
	for _, v := range eng.Catalog() {
		switch v.Alias {
		case "en-us-linda":
			f.profiles["af_bella"] = v.Profile
		case "en-gb-annie":
			f.profiles["bf_emma"] = v.Profile
		}
	}
	if len(f.profiles) != 2 {
		t.Fatalf("no en-us-linda and en-gb-annie in the engine's catalog")
	}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "GET" && r.URL.Path == "/v1/audio/voices":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"voices":["af_bella","bf_emma"]}`))
		case r.Method == "POST" && r.URL.Path == "/v1/audio/speech":
			var body struct{ Input, Voice, ResponseFormat string }
			json.NewDecoder(r.Body).Decode(&body)
			prof := f.profiles[body.Voice]
			if prof == nil {
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, `{"detail":{"error":"validation_error","message":"Voice '%s' not found"}}`, body.Voice)
				return
			}
			w.Header().Set("Content-Type", "audio/pcm")
			pcm, _ := f.render(r.Context(), body.Input, prof)
			w.Write(pcm)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

// render is the fixture's own audio for text: s16le at the engine's rate.
func (f *kokoroFixture) render(ctx context.Context, text string, profile []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []byte
	err := f.eng.Synthesize(ctx, engine.Request{Text: text, Language: "en", Profile: profile}, func(c engine.Chunk) error {
		out = codec.AppendPCM(out, codec.S16LE, c.Samples)
		return nil
	})
	return out, err
}

// TestUpstreamDiscover: discover: true lists the fixture's voices in
// Kokoro-FastAPI's shape and adds each to A's catalog as
// "<engine>-<voice>", which then speaks with the fixture's audio.
func TestUpstreamDiscover(t *testing.T) {
	f := newKokoroFixture(t)
	cfg := fmt.Sprintf(`engines:
  - name: kokoro
    type: openai
    urls: [%s/v1]
    model: kokoro
    sample_rate: %d
    discover: true
`, f.URL, f.eng.NativeRate())
	path := filepath.Join(t.TempDir(), "voicesvc.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a := harness.Start(t, harness.Options{Args: refArgs(0, "--config", path)})
	_, key := harness.Workspace(t, a.DB, "enterprise")
	for alias, voice := range map[string]string{"kokoro-af-bella": "af_bella", "kokoro-bf-emma": "bf_emma"} {
		id := voiceByAlias(t, a, key, alias)
		const text = "Discovered voices speak like the server that lists them."
		r := synPost(t, a.API+"/voices/"+id+"/speak", key,
			map[string]any{"text": text, "output_format": "s16le", "sample_rate": f.eng.NativeRate()})
		if r.status != 200 {
			t.Fatalf("%s: %d %s", alias, r.status, r.body)
		}
		own, err := f.render(context.Background(), text, f.profiles[voice])
		if err != nil {
			t.Fatal(err)
		}
		if got, want := float64(len(r.body)), float64(len(own)); !within(got, want, 0.05) {
			t.Fatalf("%s: %d bytes through the gateway, the fixture makes %d", alias, len(r.body), len(own))
		}
	}
	r := mustCall(t, "GET", a.API+"/voices/"+voiceByAlias(t, a, key, "kokoro-bf-emma"), nil, keyHdr(key)...)
	if v, _ := r.data(t)["voice"].(map[string]any); v["primary_language"] != "en-GB" {
		t.Fatalf("bf_emma is British English: %s", r.body)
	}
}

// TestUpstreamDiscoverVoicesvc: discover against another voicesvc's compat
// endpoint (its GET /compat/audio/voices) adds every voice of B.
func TestUpstreamDiscoverVoicesvc(t *testing.T) {
	b := harness.Start(t, harness.Options{Args: refArgs(0)})
	_, keyB := harness.Workspace(t, b.DB, "enterprise")
	cfg := fmt.Sprintf(`engines:
  - name: b
    type: openai
    urls: [%s/compat]
    api_key: %s
    model: service-v1
    discover: true
`, b.API, keyB)
	path := filepath.Join(t.TempDir(), "voicesvc.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a := harness.Start(t, harness.Options{Args: refArgs(0, "--config", path)})
	_, key := harness.Workspace(t, a.DB, "enterprise")
	id := voiceByAlias(t, a, key, "b-ref-en-high")
	r := synPost(t, a.API+"/voices/"+id+"/speak", key, map[string]any{"text": "Found by listing.", "output_format": "s16le"})
	if r.status != 200 || len(r.body) == 0 {
		t.Fatalf("speak a discovered voice: %d %.200s", r.status, r.body)
	}
}
