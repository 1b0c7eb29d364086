package gateway

import (
	"bytes"
	"log/slog"
	"mime/multipart"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
)

// /media/ serves only the runner's file names from the media directory.
func TestMediaRoute(t *testing.T) {
	dir := t.TempDir()
	name := strings.Repeat("a", 24) + "-" + strings.Repeat("b", 24) + ".wav"
	if err := os.WriteFile(filepath.Join(dir, name), []byte("RIFFdata"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(filepath.Dir(dir), "secret.wav"), []byte("x"), 0o644)
	store := openStore(t, filepath.Join(t.TempDir(), "db"))
	ws := &control.Workspace{Name: "w", Plan: "pro"}
	if err := store.CreateWorkspace(t.Context(), ws); err != nil {
		t.Fatal(err)
	}
	v := &control.Voice{ID: strings.Repeat("a", 24), OrgID: ws.ID, Name: "v", Status: control.VoiceReady,
		CloneMethod: "instant", Visibility: "private", PrimaryLanguage: "en", Labels: []control.Label{}}
	if err := store.CreateVoice(t.Context(), v); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{}, Deps{Store: store, MediaDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(t.Context())
	get := func(path string) *fasthttp.RequestCtx {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI(path)
		ctx.Request.Header.SetMethod("GET")
		srv.Handler()(&ctx)
		return &ctx
	}
	ctx := get("/media/" + name)
	if ctx.Response.StatusCode() != 200 || string(ctx.Response.Header.ContentType()) != "audio/wav" {
		t.Fatalf("preview: %d %q", ctx.Response.StatusCode(), ctx.Response.Header.ContentType())
	}
	for _, p := range []string{"/media/../secret.wav", "/media/%2e%2e%2fsecret.wav", "/media/" + strings.Repeat("c", 24) + "-" +
		strings.Repeat("b", 24) + ".wav", "/media/x.wav", "/media/" + strings.ToUpper(name), "/media/"} {
		if c := get(p); c.Response.StatusCode() != 404 {
			t.Errorf("%s: %d, want 404", p, c.Response.StatusCode())
		}
	}
}

// Consent is recorded on the voice with the time and the key that gave it.
func TestCloneRecordsConsent(t *testing.T) {
	ts := newTestServer(t, "")
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	w.WriteField("name", "me")
	w.WriteField("consent", "true")
	fw, _ := w.CreateFormFile("file", "a.wav")
	fw.Write([]byte("RIFF\x24\x00\x00\x00WAVEfmt "))
	w.Close()
	before := control.NowMS()
	r := ts.do("POST", "/voices/clone", ts.key, body.Bytes(), "Content-Type", w.FormDataContentType())
	d := r.data(t, 202)
	id := d["voice"].(map[string]any)["id"].(string)
	v, err := ts.store.GetVoice(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := ts.store.GetAPIKeyByHash(t.Context(), control.HashSecret(ts.key))
	if v.ConsentAt < before || k == nil || v.ConsentKeyID != k.ID || v.Status != control.VoiceProcessing {
		t.Fatalf("voice %+v (key %+v)", v, k)
	}
	if _, ok := d["job_id"].(string); !ok {
		t.Fatalf("no job_id: %v", d)
	}
}
