package engine

import (
	"testing"
	"time"
)

// TestRefuseHysteresis: a pool starts refusing once behind by more than
// MaxLag and stops once back within half of it; in between it keeps what
// it was doing, so that it admits in bursts rather than flipping on every
// request.
func TestRefuseHysteresis(t *testing.T) {
	const maxLag = 100 * time.Millisecond
	tests := []struct {
		refusing bool
		behind   time.Duration
		want     bool
	}{
		{false, 0, false},
		{false, 50 * time.Millisecond, false},
		{false, 80 * time.Millisecond, false},
		{false, maxLag, false},
		{false, maxLag + time.Millisecond, true},
		{true, 2 * maxLag, true},
		{true, 80 * time.Millisecond, true},
		{true, 51 * time.Millisecond, true},
		{true, 50 * time.Millisecond, false},
		{true, 0, false},
	}
	for _, tc := range tests {
		if got := refuse(tc.refusing, tc.behind, maxLag); got != tc.want {
			t.Errorf("refusing %v, behind %v: refuse = %v, want %v", tc.refusing, tc.behind, got, tc.want)
		}
	}
}
