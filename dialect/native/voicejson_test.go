package native

import (
	"encoding/json"
	"testing"
)

// appendString must agree with encoding/json on every string.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "tab\t nl\n cr\r", "\x00\x1f", "<a&b>", "é ü 日本",
		"\u2028\u2029", "bad \xff utf8", "emoji 🎙"} {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); string(got) != string(want) {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
}
