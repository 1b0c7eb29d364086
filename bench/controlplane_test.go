package bench

import (
	"slices"
	"strings"
	"testing"
)

// TestSelectCPCases: --cases runs exactly the cases it names (a regression:
// once the first named case was found, every case after it ran too).
func TestSelectCPCases(t *testing.T) {
	for _, tc := range []struct {
		names string
		pg    bool
		want  []string
		bad   bool
	}{
		{"", false, []string{"sqlite-off", "sqlite-enforce", "sqlite-enforce-rps"}, false},
		{"", true, []string{"sqlite-off", "sqlite-enforce", "postgres-enforce", "postgres-off", "sqlite-enforce-rps", "postgres-enforce-rps"}, false},
		{"sqlite-off", true, []string{"sqlite-off"}, false},
		{"postgres-off,sqlite-off", true, []string{"sqlite-off", "postgres-off"}, false},
		{"postgres-off", false, nil, true},
		{"nope", true, nil, true},
	} {
		got, err := selectCPCases(tc.names, tc.pg)
		if (err != nil) != tc.bad {
			t.Errorf("%q pg=%v: error %v", tc.names, tc.pg, err)
			continue
		}
		var names []string
		for _, c := range got {
			names = append(names, c.Name)
		}
		if !slices.Equal(names, tc.want) {
			t.Errorf("%q pg=%v: %v, want %v", tc.names, tc.pg, names, tc.want)
		}
	}
}

// TestWriteControlPlane: each case is set against sqlite-off at its level,
// in req/s, TTFB and server CPU per request.
func TestWriteControlPlane(t *testing.T) {
	var b strings.Builder
	WriteControlPlane(&b, []CPResult{
		{Case: "sqlite-off", Concurrency: 16, RPS: 10000, TTFBp50: 1.0, CPUus: 200},
		{Case: "postgres-enforce", Concurrency: 16, RPS: 9000, TTFBp50: 1.25, CPUus: 210, RoundTrips: 0.0004},
		{Case: "postgres-enforce", Concurrency: 64, RPS: 9000, TTFBp50: 5},
	})
	out := b.String()
	for _, want := range []string{
		"| postgres-enforce | 16 | 9000 | 1.25 | 0.0004 | 210 |",
		"postgres-enforce / sqlite-off at c=16: 0.90 of the req/s, TTFB p50 +0.25 ms, 1.05 of the server CPU per request",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "at c=64") {
		t.Errorf("a ratio without sqlite-off at its level:\n%s", out)
	}
}
