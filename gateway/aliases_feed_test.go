package gateway

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"voicesvc/engine/reference"
	"voicesvc/synth"
)

// TestAliasChangesReachServers: two servers on one store; an alias set or
// removed through one reaches the other's alias cache (hits and cached
// misses alike) through the change feed within 2 seconds.
func TestAliasChangesReachServers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	eng := reference.New()
	servers := make([]*testServer, 2)
	for i := range servers {
		ts := &testServer{t: t, store: openStore(t, path)}
		ts.serve(Config{}, Deps{Engine: eng, Logger: slog.New(slog.DiscardHandler)})
		servers[i] = ts
	}
	a, b := servers[0], servers[1]
	if err := synth.SeedCatalog(context.Background(), a.store, eng); err != nil {
		t.Fatal(err)
	}
	ws := a.workspace("pro")
	key := a.newKey(ws.ID, nil, 0, false)
	voice := synth.CatalogVoiceID(eng.Catalog()[0].Alias)
	for _, s := range servers {
		s.waitLive()
	}
	speak := func(s *testServer, name string) int {
		return s.do("POST", "/voices/"+name+"/speak", key, map[string]any{"text": "Hi.", "output_format": "s16le"}).status
	}
	set := func(aliases ...string) {
		t.Helper()
		if aliases == nil {
			aliases = []string{} // an empty list removes them all
		}
		a.do("PUT", "/voices/"+voice+"/aliases", key, map[string]any{"aliases": aliases}).data(t, 200)
	}
	within := func(what string, ok func() bool) {
		t.Helper()
		took, done := waitFor(2*time.Second, ok)
		if !done {
			t.Fatalf("%s: not seen by the other server within 2 s", what)
		}
		t.Logf("%s reached the other server after %v", what, took)
	}

	if s := speak(b, "nova"); s != 404 { // a miss, now cached on b
		t.Fatalf("unknown alias: %d", s)
	}
	set("nova")
	within("a new alias", func() bool { return speak(b, "nova") == 200 })
	set() // removed
	within("a removed alias", func() bool { return speak(b, "nova") == 404 })
}
