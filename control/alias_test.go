package control

import (
	"fmt"
	"strings"
	"testing"
)

func TestValidateAliases(t *testing.T) {
	many := make([]string, MaxAliasesPerVoice+1)
	for i := range many {
		many[i] = fmt.Sprintf("a%d", i)
	}
	for _, tc := range []struct {
		name    string
		in      []string
		bad     string // the alias the message must name; "" when valid
		wantErr bool
	}{
		{name: "nil", in: nil},
		{name: "vendor names", in: []string{"alloy", "aura-2-thalia-en", "21m00Tcm4TlvDq8ikWAM", "a.b_c-D9"}},
		{name: "64 characters", in: []string{strings.Repeat("x", 64)}},
		{name: "32 aliases", in: many[:MaxAliasesPerVoice]},
		{name: "23 hex is not an id", in: []string{strings.Repeat("a", 23)}},
		{name: "25 hex is not an id", in: []string{strings.Repeat("a", 25)}},
		{name: "empty", in: []string{"ok", ""}, bad: `""`, wantErr: true},
		{name: "65 characters", in: []string{strings.Repeat("x", 65)}, bad: "xxxx", wantErr: true},
		{name: "space", in: []string{"my voice"}, bad: "my voice", wantErr: true},
		{name: "slash", in: []string{"a/b"}, bad: "a/b", wantErr: true},
		{name: "non-ascii", in: []string{"stimme-ä"}, bad: "stimme", wantErr: true},
		{name: "id-shaped", in: []string{"0123456789abcdef01234567"}, bad: "0123456789abcdef01234567", wantErr: true},
		{name: "id-shaped upper case", in: []string{"0123456789ABCDEF01234567"}, bad: "0123456789ABCDEF01234567", wantErr: true},
		{name: "duplicate", in: []string{"alloy", "echo", "alloy"}, bad: "alloy", wantErr: true},
		{name: "33 aliases", in: many, bad: "32", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ValidateAliases(tc.in)
			if !tc.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				if got == nil || len(got) != len(tc.in) {
					t.Fatalf("got %q, want %q", got, tc.in)
				}
				for i := range got {
					if got[i] != tc.in[i] || !ValidAlias(got[i]) {
						t.Fatalf("got %q, want %q", got, tc.in)
					}
				}
				return
			}
			e := AsError(err)
			if e.Code != EInvalidRequest || e.Param != "aliases" || !strings.Contains(e.Message, tc.bad) {
				t.Fatalf("got %+v, want invalid_request naming %s", e, tc.bad)
			}
		})
	}
}
