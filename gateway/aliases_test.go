package gateway

import (
	"testing"

	"voicesvc/control"
	"voicesvc/synth"
)

// TestVoiceAliases: a workspace names voices it may use (its own and the
// catalog's) and every synthesis path takes the names
// (docs/api.md#voice-aliases); other workspaces do not see them.
func TestVoiceAliases(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	catalog := ss.srv.engine.Catalog()[0].Alias
	other := ss.newKey(ss.workspace("pro").ID, nil, 0, false)
	path := "/voices/" + ss.voice + "/aliases"

	for _, tc := range []struct {
		name   string
		key    string
		method string
		path   string
		body   any
		status int
		code   string
	}{
		{"set", ss.key, "PUT", path, map[string]any{"aliases": []string{"alloy", "nova.v2"}}, 200, ""},
		{"id-shaped", ss.key, "PUT", path, map[string]any{"aliases": []string{"0123456789abcdef01234567"}}, 400, control.EInvalidRequest},
		{"bad characters", ss.key, "PUT", path, map[string]any{"aliases": []string{"no spaces"}}, 400, control.EInvalidRequest},
		{"missing list", ss.key, "PUT", path, map[string]any{}, 400, control.EInvalidRequest},
		{"another workspace's voice", other, "PUT", path, map[string]any{"aliases": []string{"x"}}, 404, control.ENotFound},
		{"read", ss.key, "GET", path, nil, 200, ""},
		{"catalog voice", ss.key, "PUT", "/voices/" + synth.CatalogVoiceID(catalog) + "/aliases",
			map[string]any{"aliases": []string{"shimmer"}}, 200, ""},
		{"taken by another voice", ss.key, "PUT", "/voices/" + synth.CatalogVoiceID(catalog) + "/aliases",
			map[string]any{"aliases": []string{"alloy"}}, 409, control.EAliasTaken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ss.do(tc.method, tc.path, tc.key, tc.body)
			if r.status != tc.status || tc.code != "" && r.json["code"] != tc.code {
				t.Fatalf("%d %s, want %d %s", r.status, r.body, tc.status, tc.code)
			}
		})
	}
	// A refused PUT changed nothing; the voice shows its names.
	v := ss.do("GET", "/voices/"+ss.voice, ss.key, nil).data(t, 200)["voice"].(map[string]any)
	if got, _ := v["workspace_aliases"].([]any); len(got) != 2 || got[0] != "alloy" || got[1] != "nova.v2" {
		t.Fatalf("workspace_aliases %v", v["workspace_aliases"])
	}

	speak := func(key, name string) int {
		resp := ss.post("/voices/"+name+"/speak", key, map[string]any{"text": "Hi.", "output_format": "s16le"})
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := speak(ss.key, "alloy"); s != 200 {
		t.Errorf("speak by workspace alias: %d", s)
	}
	if s := speak(other, "alloy"); s != 404 {
		t.Errorf("another workspace speaking by the alias: %d, want 404", s)
	}
	if s := speak(ss.key, catalog); s != 200 {
		t.Errorf("speak by catalog alias: %d", s)
	}
	// The WebSocket names voices the same way: a workspace alias and a
	// catalog alias.
	c, _, err := ss.wsDial("", wsKey(ss.key))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	speakOnce(t, c, "nova.v2", "by-workspace-alias")
	speakOnce(t, c, catalog, "by-catalog-alias")
	speakOnce(t, c, "shimmer", "catalog-voice-by-workspace-alias")

	// An empty list removes them all.
	ss.do("PUT", path, ss.key, map[string]any{"aliases": []string{}}).data(t, 200)
	if s := speak(ss.key, "alloy"); s != 404 {
		t.Errorf("speak by a removed alias: %d, want 404", s)
	}
}
