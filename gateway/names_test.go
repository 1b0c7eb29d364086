package gateway

import (
	"strings"
	"testing"

	"voicesvc/control"
)

// Names shown in the dashboard refuse control characters and the
// bidirectional formatting characters that reorder what is displayed
// (U+202E made "evil\u202Egnp.exe" read as "evilexe.png"): 400
// invalid_request naming the field.
var spoofNames = []string{
	"ci\x00key", "ci\u202Eyek", "ci\u202Akey", "ci\u2066key", "ci\u2069key", "ci\u200Ekey", "ci\u200Fkey",
	"ci\u061Ckey", "line\u2028break", "bell\x07", "del\x7F", "c1\u0085x",
}

func TestKeyNameRefusesSpoofing(t *testing.T) {
	ts := newTestServer(t, "")
	cookie := ts.signIn(ts.ws.ID)
	with := []string{"Cookie", cookie, "Origin", ts.base}
	for _, name := range spoofNames {
		r := ts.do("POST", "/keys", "", map[string]any{"name": name, "scopes": []string{"tts"}}, with...)
		r.failure(t, 400, control.EInvalidRequest)
		if !strings.Contains(string(r.body), "name") {
			t.Errorf("%q: the error does not name the field: %s", name, r.body)
		}
	}
	// Names in any script, with marks and emoji, are fine.
	for _, name := range []string{"ci", "מפתח ci", "مفتاح", "clé ✓ 🔑", "नमस्ते"} {
		k := ts.do("POST", "/keys", "", map[string]any{"name": name, "scopes": []string{"tts"}}, with...).data(t, 201)
		if k["name"] != name {
			t.Errorf("name %q stored as %v", name, k["name"])
		}
	}
}

// Voice names and labels share the rule.
func TestVoiceNameRefusesSpoofing(t *testing.T) {
	ts := newTestServer(t, "")
	for _, name := range spoofNames {
		r := ts.do("POST", "/voices", ts.key, map[string]any{"name": name, "consent": true})
		r.failure(t, 400, control.EInvalidRequest)
		if !strings.Contains(string(r.body), "name") {
			t.Errorf("%q: the error does not name the field: %s", name, r.body)
		}
	}
	ts.do("POST", "/voices", ts.key, map[string]any{"name": "ok", "consent": true,
		"labels": []map[string]string{{"key": "accent", "value": "x\u202Ey"}}}).failure(t, 400, control.EInvalidRequest)
}
