package goroutines

import (
	"strings"
	"sync"
	"testing"
)

// parkedHere blocks until release is closed: a function name for In to find.
func parkedHere(started *sync.WaitGroup, release <-chan struct{}) {
	started.Done()
	<-release
}

func TestIn(t *testing.T) {
	const fn = "voicesvc/internal/testutil/goroutines.parkedHere"
	if n, _ := In(fn); n != 0 {
		t.Fatalf("%d goroutines in %s before any started", n, fn)
	}
	for _, count := range []int{1, 7} {
		release := make(chan struct{})
		var started, done sync.WaitGroup
		started.Add(count)
		done.Add(count)
		for range count {
			go func() { defer done.Done(); parkedHere(&started, release) }()
		}
		started.Wait()
		n, stacks := In(fn)
		if n != count || !strings.Contains(stacks, fn) {
			t.Errorf("In(%q) = %d with stacks %q, want %d", fn, n, stacks, count)
		}
		if other, _ := In("voicesvc/internal/testutil/goroutines.nowhere"); other != 0 {
			t.Errorf("%d goroutines in a function that does not exist", other)
		}
		close(release)
		done.Wait()
	}
}
