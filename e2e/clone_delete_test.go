package e2e

import (
	"strings"
	"testing"
	"time"

	"voicesvc/e2e/harness"
)

// Deleting a cloned voice takes its public preview down at once: the
// sample_audio_url answers 404 right after the DELETE.
func TestDeletedVoicePreviewGone(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: []string{"--engine", "espeak", "--billing", "meter"}})
	_, key := harness.Workspace(t, srv.DB, "pro")
	clip := clRead(t, clClip(t, "en+m1", 25, clTexts["en"], "wav"))
	vid, jid := clStartClone(t, srv.API, key, "to-delete", clip)
	if j := clWaitJob(t, srv.API, key, jid, 60*time.Second); j["status"] != "succeeded" {
		t.Fatalf("job %v", j)
	}
	url, _ := clVoice(t, srv.API, key, vid)["sample_audio_url"].(string)
	i := strings.Index(url, "/media/")
	if i < 0 {
		t.Fatalf("sample_audio_url %q", url)
	}
	preview := srv.URL + url[i:]
	if r := clDo(t, "GET", preview, "", "", nil); r.status != 200 {
		t.Fatalf("preview before the delete: %d", r.status)
	}
	if r := clDo(t, "DELETE", srv.API+"/voices/"+vid, key, "", nil); r.status != 200 {
		t.Fatalf("DELETE: %d %s", r.status, r.raw)
	}
	if r := clDo(t, "GET", preview, "", "", nil); r.status != 404 {
		t.Errorf("preview after the delete: %d, want 404", r.status)
	}
}
