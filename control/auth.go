package control

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"math/big"
)

// Secret formats (docs/api.md#overview): a prefix and 40 base62
// characters made from 30 random bytes. Only the SHA-256 of a secret is
// stored, and lookups are by that hash.
const (
	APIKeyPrefix      = "vsk_"
	AccessTokenPrefix = "vst_"
	secretChars       = 40
	secretBytes       = 30
	// SecretLen is the full length of a key or token, prefix included.
	SecretLen = len(APIKeyPrefix) + secretChars
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewAPIKeySecret returns a new API key and the hash to store for it.
func NewAPIKeySecret() (secret string, hash []byte) { return newSecret(APIKeyPrefix) }

// NewAccessTokenSecret returns a new access token and the hash to store.
func NewAccessTokenSecret() (secret string, hash []byte) { return newSecret(AccessTokenPrefix) }

func newSecret(prefix string) (string, []byte) {
	var raw [secretBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	// 62^40 is a little below 2^240, so the 40 low base62 digits of the
	// 240-bit number keep about 238 bits: the fixed length matters more to
	// clients and validators than the last two bits.
	n := new(big.Int).SetBytes(raw[:])
	var out [SecretLen]byte
	copy(out[:], prefix)
	mod, d := big.NewInt(62), new(big.Int)
	for i := SecretLen - 1; i >= len(prefix); i-- {
		n.DivMod(n, mod, d)
		out[i] = base62[d.Int64()]
	}
	s := string(out[:])
	return s, HashSecret(s)
}

// HashSecret is the stored form of a key or token.
func HashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// ValidAPIKeyFormat reports whether s has the shape of an API key; anything
// else is refused before a hash or a lookup is spent on it.
func ValidAPIKeyFormat(s string) bool { return validSecret(s, APIKeyPrefix) }

// ValidAccessTokenFormat reports whether s has the shape of an access token.
func ValidAccessTokenFormat(s string) bool { return validSecret(s, AccessTokenPrefix) }

func validSecret(s, prefix string) bool {
	if len(s) != SecretLen || s[:len(prefix)] != prefix {
		return false
	}
	for i := len(prefix); i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

// SameHash compares two secret hashes in constant time, so that a cache or
// store hit never leaks through timing how much of a hash matched.
func SameHash(a, b []byte) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare(a, b) == 1
}

// ValidScope reports whether s names a scope of docs/api.md#api-keys.
func ValidScope(s string) bool {
	switch s {
	case ScopeTTS, ScopeVoicesRead, ScopeVoicesWrite, ScopeClone:
		return true
	}
	return false
}

// Check reports whether the key may authenticate at now (epoch ms):
// EUnauthorized when revoked (sent without a code), EKeyExpired when past
// its expiry. Revocation wins over expiry: a revoked key is not "expired".
// A revocation time is not compared with now: clocks of servers differ.
func (k *APIKey) Check(now int64) error {
	if k.RevokedAt != 0 {
		return Errorf(EUnauthorized, "invalid API key")
	}
	if k.ExpiresAt != 0 && k.ExpiresAt <= now {
		return Errorf(EKeyExpired, "API key expired")
	}
	return nil
}
