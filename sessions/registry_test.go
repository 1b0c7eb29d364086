package sessions

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeSession records how the registry ended it.
type fakeSession struct{ revoked, drained atomic.Int32 }

func (f *fakeSession) Revoke() { f.revoked.Add(1) }
func (f *fakeSession) Drain()  { f.drained.Add(1) }

// The registry's paths that the change feed alone would miss: a key
// changed between a handshake's credential check and the session's
// registration is checked once at registration; after the feed was down,
// Recheck asks the store about every key with open sessions. And the
// change feed's own path: a revoked key's sessions end, others do not.
func TestRegistryMissedChanges(t *testing.T) {
	var mu sync.Mutex
	revoked := map[string]bool{}
	var asked atomic.Int64
	reg := NewRegistry(func(id string) bool {
		asked.Add(1)
		mu.Lock()
		defer mu.Unlock()
		return revoked[id]
	})
	defer reg.Stop()
	revoke := func(id string) {
		mu.Lock()
		revoked[id] = true
		mu.Unlock()
	}

	// Changed after the handshake authenticated: checked, and ended.
	racing := &fakeSession{}
	authAt := time.Now()
	revoke("k1")
	reg.KeyChanged("k1") // no session of k1 yet: remembered only
	reg.Add(racing, "k1", 0, authAt)
	if racing.revoked.Load() != 1 {
		t.Fatal("a key revoked between the handshake and the registration was not checked")
	}
	reg.Remove(racing, "k1")

	// Changed before the handshake: nothing to check.
	reg.KeyChanged("k2")
	before := asked.Load()
	calm := &fakeSession{}
	reg.Add(calm, "k2", 0, time.Now().Add(time.Second))
	if asked.Load() != before {
		t.Fatal("a key changed before the handshake was checked again")
	}
	// Revoked while the feed was down: Recheck finds it.
	revoke("k2")
	reg.Recheck()
	if calm.revoked.Load() != 1 {
		t.Fatal("Recheck did not end the session of a revoked key")
	}

	// The feed's path: only the revoked key's sessions end.
	a, b := &fakeSession{}, &fakeSession{}
	reg.Add(a, "k3", 0, time.Now().Add(-time.Minute))
	reg.Add(b, "k4", 0, time.Now().Add(-time.Minute))
	revoke("k3")
	reg.KeyChanged("k3")
	if a.revoked.Load() != 1 || b.revoked.Load() != 0 {
		t.Fatalf("revoked: k3's %d, k4's %d; want 1 and 0", a.revoked.Load(), b.revoked.Load())
	}
	if reg.Len() != 3 { // ended sessions stay until their server removes them
		t.Fatalf("Len %d, want 3", reg.Len())
	}
}

// A key's expiry ends its sessions on the registry's one timer.
func TestRegistryExpiry(t *testing.T) {
	reg := NewRegistry(func(string) bool { return false })
	defer reg.Stop()
	s := &fakeSession{}
	reg.Add(s, "k", time.Now().Add(200*time.Millisecond).UnixMilli(), time.Now().Add(-time.Minute))
	for deadline := time.Now().Add(5 * time.Second); s.revoked.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the session of an expired key was not ended")
		}
	}
	// Draining ends every open session's work.
	other := &fakeSession{}
	reg.Add(other, "k2", 0, time.Now().Add(-time.Minute))
	reg.Drain()
	if other.drained.Load() != 1 {
		t.Fatal("Drain did not reach the open session")
	}
}
