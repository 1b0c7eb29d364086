package gateway

import (
	"sync"

	"voicesvc/control"
)

// uploadShares counts the uploads each workspace has in progress, so that
// one workspace holds at most its share of the server's MaxUploads slots
// (docs/api.md#uploads): a key that trickles a few bytes a second into
// every slot would otherwise make every other workspace's clone 503 for
// the length of an upload. The zero value is ready; an idle workspace has
// no entry.
type uploadShares struct {
	mu sync.Mutex
	n  map[string]int
}

// errUploadShare: this workspace already has its share of uploads in
// progress; the others are not held back by it.
var errUploadShare = &control.Error{Code: control.EConcurrencyLimited,
	Message: "too many uploads in progress for this workspace; retry later", RetryAfter: uploadRetryAfter}

// uploadShare is one workspace's share of the server's slots: a quarter,
// at least 2 (and never more than the server has).
func uploadShare(slots int) int {
	return min(slots, max(2, slots/4))
}

// take counts one more upload for ws, unless it holds share already.
func (u *uploadShares) take(ws string, share int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.n[ws] >= share {
		return false
	}
	if u.n == nil {
		u.n = map[string]int{}
	}
	u.n[ws]++
	return true
}

// give ends one of ws's uploads.
func (u *uploadShares) give(ws string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.n[ws]--; u.n[ws] <= 0 {
		delete(u.n, ws)
	}
}
