package control

import (
	"strings"
	"testing"
)

func TestSecrets(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		key, kh := NewAPIKeySecret()
		tok, th := NewAccessTokenSecret()
		if !ValidAPIKeyFormat(key) || ValidAccessTokenFormat(key) || len(key) != 44 || !strings.HasPrefix(key, "vsk_") {
			t.Fatalf("key %q", key)
		}
		if !ValidAccessTokenFormat(tok) || ValidAPIKeyFormat(tok) {
			t.Fatalf("token %q", tok)
		}
		if !SameHash(kh, HashSecret(key)) || SameHash(kh, th) || len(kh) != 32 {
			t.Fatalf("hashes")
		}
		if seen[key] {
			t.Fatalf("repeated key")
		}
		seen[key] = true
	}
	for _, bad := range []string{"", "vsk_", "vsk_" + strings.Repeat("a", 39), "vsk_" + strings.Repeat("a", 41),
		"vsk_" + strings.Repeat("a", 39) + "-", "VSK_" + strings.Repeat("a", 40), "vsk_" + strings.Repeat("é", 20)} {
		if ValidAPIKeyFormat(bad) {
			t.Errorf("accepted %q", bad)
		}
	}
	if SameHash(nil, []byte{1}) || !SameHash(nil, nil) {
		t.Errorf("SameHash lengths")
	}
}

func TestKeyCheck(t *testing.T) {
	now := int64(10_000)
	tests := []struct {
		name string
		k    APIKey
		code string
	}{
		{"valid", APIKey{}, ""},
		{"future expiry", APIKey{ExpiresAt: now + 1}, ""},
		{"expired", APIKey{ExpiresAt: now}, EKeyExpired},
		{"revoked", APIKey{RevokedAt: now + 5}, EUnauthorized},
		{"revoked and expired", APIKey{RevokedAt: 1, ExpiresAt: 1}, EUnauthorized},
	}
	for _, tt := range tests {
		if got := ErrorCode(tt.k.Check(now)); got != tt.code {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.code)
		}
	}
	for _, s := range AllScopes {
		if !ValidScope(s) {
			t.Errorf("ValidScope(%q)", s)
		}
	}
	if ValidScope("admin") {
		t.Errorf("ValidScope(admin)")
	}
}
