package control

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// The driver errors are classified by the stores (control/sqlite,
// control/postgres); control only knows the domain code.
func TestStoreUnavailable(t *testing.T) {
	cause := fmt.Errorf("count voices: %w", context.DeadlineExceeded)
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"store_unavailable error", ErrStoreUnavailable, true},
		{"with a cause", StoreUnavailableError(cause), true},
		{"wrapped", fmt.Errorf("list voices: %w", StoreUnavailableError(cause)), true},
		{"other *Error", Errorf(ENotFound, "x"), false},
		{"a bare driver-like error", cause, false},
		{"plain", errors.New("boom"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := StoreUnavailable(c.err); got != c.want {
				t.Errorf("StoreUnavailable(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}

// An unreachable store answers 503 store_unavailable with Retry-After 1
// wherever an error becomes a response, and keeps its cause for the logs.
func TestStoreUnavailableMapping(t *testing.T) {
	err := fmt.Errorf("list voices: %w", StoreUnavailableError(context.DeadlineExceeded))
	if c := ErrorCode(err); c != EStoreUnavailable {
		t.Errorf("ErrorCode = %q", c)
	}
	e := AsError(err)
	if e.Code != EStoreUnavailable || e.RetryAfter != 1 || e.Message != ErrStoreUnavailable.Message {
		t.Errorf("AsError = %+v", e)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Error("the cause is not visible to errors.Is")
	}
	if ErrStoreUnavailable.Cause != nil {
		t.Error("StoreUnavailableError changed the shared ErrStoreUnavailable")
	}
}
