package gateway

import (
	"testing"
	"time"

	"voicesvc/control"
)

// One workspace holds at most a quarter of the server's upload slots (at
// least 2): a key trickling uploads cannot make every other workspace's
// clone 503 for the length of an upload. Past its share a workspace gets
// 429 concurrency_limited with Retry-After; the others still upload.
func TestUploadWorkspaceShare(t *testing.T) {
	ts := newConfigServer(t, Config{MaxUploads: 8}) // a share of 2
	keyA := ts.key
	other := ts.workspace("pro")
	keyB := ts.newKey(other.ID, nil, 0, false)

	a1 := holdUpload(t, ts, 1)
	holdUpload(t, ts, 2)
	ct, body := cloneForm(1000, "third")
	for _, extra := range [][]string{nil, {"Idempotency-Key", "share-1"}} {
		r := ts.do("POST", "/voices/clone", keyA, body, append([]string{"Content-Type", ct}, extra...)...)
		r.failure(t, 429, control.EConcurrencyLimited)
		if r.header.Get("Retry-After") != "5" {
			t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
		}
	}
	// Another workspace is not held back: it uploads, and holds its own
	// share.
	ts.do("POST", "/voices/clone", keyB, body, "Content-Type", ct).data(t, 202)
	ts.key = keyB
	holdUpload(t, ts, 3)
	holdUpload(t, ts, 4)
	ts.do("POST", "/voices/clone", keyB, body, "Content-Type", ct).failure(t, 429, control.EConcurrencyLimited)
	// A's share frees with its uploads.
	a1.Close()
	if _, ok := waitFor(10*time.Second, func() bool { return ts.srv.core.UploadsInProgress() == 3 }); !ok {
		t.Fatalf("%d upload slots held, want 3", ts.srv.core.UploadsInProgress())
	}
	ts.do("POST", "/voices/clone", keyA, body, "Content-Type", ct).data(t, 202)
}
