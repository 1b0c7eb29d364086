package telemetry

import (
	"reflect"
	"slices"
	"testing"

	"voicesvc/control"
)

// Every store method but the change feed, Ping and Close is timed: a method
// added to control.Store must be added to timedStore (store.go), or
// it would pass through the embedded store untimed.
func TestTimedStoreCoversStore(t *testing.T) {
	untimed := []string{"WatchChanges", "Ping", "Close"}
	st := reflect.TypeFor[control.Store]()
	for i := range st.NumMethod() {
		name := st.Method(i).Name
		if !slices.Contains(untimed, name) && !slices.Contains(storeMethodNames[:], name) {
			t.Errorf("control.Store.%s is not timed", name)
		}
	}
}
