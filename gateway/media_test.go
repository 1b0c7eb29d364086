package gateway

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"voicesvc/control"
)

// newMediaServer is newTestServer with a media directory.
func newMediaServer(t *testing.T) (*testServer, string) {
	t.Helper()
	dir := t.TempDir()
	ts := &testServer{t: t, store: openStore(t, filepath.Join(t.TempDir(), "voicesvc.db"))}
	ts.serve(Config{}, Deps{Store: ts.store, MediaDir: dir, Logger: slog.New(slog.DiscardHandler)})
	ts.ws = ts.workspace("pro")
	ts.key = ts.newKey(ts.ws.ID, nil, 0, false)
	return ts, dir
}

// Deleting a voice takes its preview down at once: the file is removed,
// and a preview a clone job still running writes after the delete is not
// served either.
func TestMediaGoneWithVoice(t *testing.T) {
	ts, dir := newMediaServer(t)
	id := ts.createVoice(ts.key, "v")["id"].(string)
	name := id + "-" + control.NewID() + ".wav"
	write := func() {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("RIFF0000WAVE"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write()
	r := ts.do("GET", "!/media/"+name, "", nil)
	if r.status != 200 {
		t.Fatalf("before delete: %d", r.status)
	}
	if cc := r.header.Get("Cache-Control"); cc != "public, no-cache" {
		t.Errorf("Cache-Control %q: a cache could serve the preview long after a delete", cc)
	}
	ts.do("DELETE", "/voices/"+id, ts.key, nil).data(t, 200)
	if r := ts.do("GET", "!/media/"+name, "", nil); r.status != 404 {
		t.Errorf("after delete: %d, want 404", r.status)
	}
	if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
		t.Errorf("preview file still there after delete: %v", err)
	}
	write() // the job that was rendering it finishes after the delete
	if r := ts.do("GET", "!/media/"+name, "", nil); r.status != 404 {
		t.Errorf("preview written after the delete: %d, want 404", r.status)
	}
}
