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

// TestRetryAfterFollowsPressure: a refusal asks the client back after 1 s
// while few requests are refused, and later the larger the share refused
// over the last windows, so that refused clients do not come back faster
// than the pool can take them; a load that eases brings it back to 1 s.
func TestRetryAfterFollowsPressure(t *testing.T) {
	tests := []struct {
		name      string
		refusedIn []float64 // the share refused in each window, in order
		want      int
	}{
		{"nothing refused", []float64{0, 0}, 1},
		{"one in ten", []float64{0.1, 0.1, 0.1}, 1},
		{"1.5x capacity: one in three", []float64{1.0 / 3, 1.0 / 3, 1.0 / 3, 1.0 / 3, 1.0 / 3}, 1},
		{"3x capacity: two in three", []float64{2.0 / 3, 2.0 / 3, 2.0 / 3, 2.0 / 3, 2.0 / 3, 2.0 / 3}, 3},
		{"everything refused: bounded", []float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, maxRetryAfter},
		{"eased", []float64{1, 1, 1, 1, 0, 0, 0, 0, 0, 0}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var a admission
			now := time.Unix(1000, 0)
			for _, share := range tc.refusedIn {
				for i := range 30 {
					a.count(float64(i) < share*30, now)
				}
				now = now.Add(pressureWindow)
			}
			a.count(false, now) // folds the last window in
			if got := a.retryAfter(); got != tc.want {
				t.Errorf("Retry-After %d s (pressure %.2f), want %d", got, a.pressure, tc.want)
			}
		})
	}
}
