package main

import "testing"

func TestServeProcs(t *testing.T) {
	tests := []struct {
		env       string
		cur, want int
	}{
		{"", 2, 4},  // Go's choice, doubled
		{"", 1, 2},  // one CPU
		{"3", 3, 3}, // the operator's GOMAXPROCS stands
		{"1", 1, 1},
	}
	for _, tc := range tests {
		if got := serveProcs(tc.env, tc.cur); got != tc.want {
			t.Errorf("serveProcs(%q, %d) = %d, want %d", tc.env, tc.cur, got, tc.want)
		}
	}
}
