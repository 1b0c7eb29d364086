package jsonw

import (
	"encoding/json"
	"testing"
)

var cases = []string{
	"", "plain", `quote " and \ backslash`, "new\nline\ttab\rcr", "\x00\x01\x1f",
	"<script>&</script>", "line\u2028sep\u2029", "नमस्ते दुनिया", "日本語。", "emoji 🎙️",
	"bad \xff utf8 \xc3", "\x7f del", "\"\\/", "\xed\xa0\x80", "\b\f",
}

// The reference is encoding/json itself: the hand-built JSON must be the
// same bytes a client would get from the standard encoder.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range cases {
		check(t, s)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range cases {
		f.Add(s)
	}
	f.Fuzz(check)
}

func check(t *testing.T, s string) {
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendString(nil, s); string(got) != string(want) {
		t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
	}
}

func BenchmarkAppendString(b *testing.B) {
	buf := make([]byte, 0, 256)
	s := "A sentence of ordinary text, with a comma and an \"escaped\" quote."
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = AppendString(buf[:0], s)
	}
}
