package bench

import (
	"slices"
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
