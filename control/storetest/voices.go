package storetest

import (
	"bytes"
	"fmt"
	"testing"

	"voicesvc/control"
)

func newVoice(ws, name string) *control.Voice {
	return &control.Voice{OrgID: ws, Name: name, Status: control.VoiceDraft, CloneMethod: "instant",
		Visibility: "private", PrimaryLanguage: "en"}
}

func mustVoice(t *testing.T, s control.Store, v *control.Voice) *control.Voice {
	t.Helper()
	if err := s.CreateVoice(t.Context(), v); err != nil {
		t.Fatal(err)
	}
	return v
}

func testVoice(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free")
	other := mustWorkspace(t, s, "free")
	v := newVoice(ws.ID, "mine")
	v.Labels = []control.Label{{Key: "accent", Value: "scottish"}}
	v.Settings = &control.VoiceSettings{Speed: ptr(1.25), EngineParams: map[string]any{"x": "y"}}
	v.Profile, v.Engine = []byte{1, 2, 3}, "up1"
	mustVoice(t, s, v)
	if !control.ValidID(v.ID) || v.CreatedAt == 0 {
		t.Fatalf("id/timestamps not filled: %+v", v)
	}
	got, err := s.GetVoice(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "mine" || got.OrgID != ws.ID || len(got.Labels) != 1 || got.Labels[0].Value != "scottish" ||
		got.Settings == nil || *got.Settings.Speed != 1.25 || got.Settings.EngineParams["x"] != "y" ||
		!bytes.Equal(got.Profile, []byte{1, 2, 3}) || got.Engine != "up1" {
		t.Fatalf("got %+v", got)
	}
	plain := mustVoice(t, s, newVoice(ws.ID, "plain"))
	if got, _ := s.GetVoice(ctx, plain.ID); got == nil || got.Settings != nil || len(got.Labels) != 0 || got.Engine != "" {
		t.Fatalf("unset settings/labels must stay unset: %+v", got)
	}
	pub := newVoice(other.ID, "Pub")
	pub.Visibility, pub.Status, pub.Alias = "public", control.VoiceReady, "en-pub"
	mustVoice(t, s, pub)
	if got, err := s.GetVoiceByAlias(ctx, "en-pub"); err != nil || got.ID != pub.ID {
		t.Fatalf("by alias: %v %+v", err, got)
	}
	_, err = s.GetVoiceByAlias(ctx, "nope")
	wantCode(t, err, control.ENotFound)
	_, err = s.GetVoice(ctx, control.NewID())
	wantCode(t, err, control.ENotFound)

	var noSettings *control.VoiceSettings
	upd := control.VoiceUpdate{Name: ptr("renamed"), Description: ptr("d"), PrimaryLanguage: ptr("de"),
		Labels: &[]control.Label{}, Settings: &noSettings, Visibility: ptr("org")}
	u, err := s.UpdateVoice(ctx, ws.ID, v.ID, upd)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetVoice(ctx, v.ID)
	for _, x := range []*control.Voice{u, got} {
		if x.Name != "renamed" || x.Description != "d" || x.PrimaryLanguage != "de" || len(x.Labels) != 0 ||
			x.Settings != nil || x.Visibility != "org" || !bytes.Equal(x.Profile, []byte{1, 2, 3}) ||
			x.Engine != "up1" {
			t.Fatalf("after update %+v", x)
		}
	}
	// Another workspace's voice, a public voice and an unknown id all
	// answer ENotFound to update and delete.
	for _, c := range []struct{ ws, id string }{{other.ID, v.ID}, {ws.ID, pub.ID}, {ws.ID, control.NewID()}} {
		_, err := s.UpdateVoice(ctx, c.ws, c.id, control.VoiceUpdate{Name: ptr("x")})
		wantCode(t, err, control.ENotFound)
		wantCode(t, s.DeleteVoice(ctx, c.ws, c.id), control.ENotFound)
	}
	if err := s.DeleteVoice(ctx, ws.ID, v.ID); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetVoice(ctx, v.ID)
	wantCode(t, err, control.ENotFound)
}

func testListVoices(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free")
	cat := mustWorkspace(t, s, "free")
	other := mustWorkspace(t, s, "free")
	var own []*control.Voice
	for i := range 3 {
		v := newVoice(ws.ID, fmt.Sprint("own", i))
		v.CreatedAt = int64(1000 + i)
		if i == 2 {
			v.Status, v.PrimaryLanguage = control.VoiceReady, "de"
		}
		own = append(own, mustVoice(t, s, v))
	}
	for _, alias := range []string{"zeta", "alpha", "mid"} {
		v := newVoice(cat.ID, alias)
		v.Visibility, v.Status, v.Alias = "public", control.VoiceReady, alias
		mustVoice(t, s, v)
	}
	hidden := newVoice(cat.ID, "not ready")
	hidden.Visibility, hidden.Alias = "public", "aaa"
	mustVoice(t, s, hidden)
	mustVoice(t, s, newVoice(other.ID, "private of other"))

	names := func(vs []*control.Voice) string {
		out := ""
		for _, v := range vs {
			out += v.Name + " "
		}
		return out
	}
	tests := []struct {
		name  string
		f     control.VoiceFilter
		want  string
		total int
	}{
		{"all", control.VoiceFilter{}, "own2 own1 own0 alpha mid zeta ", 6},
		{"page 2 of 4", control.VoiceFilter{Page: 2, PageSize: 4}, "mid zeta ", 6},
		{"page past end", control.VoiceFilter{Page: 9, PageSize: 4}, "", 6},
		{"public", control.VoiceFilter{Visibility: "public"}, "alpha mid zeta ", 3},
		{"draft", control.VoiceFilter{Status: control.VoiceDraft}, "own1 own0 ", 2},
		{"german", control.VoiceFilter{Language: "de"}, "own2 ", 1},
	}
	for _, tt := range tests {
		tt.f.WorkspaceID = ws.ID
		vs, total, err := s.ListVoices(ctx, tt.f)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(vs); got != tt.want || total != tt.total {
			t.Errorf("%s: got %q total %d, want %q total %d", tt.name, got, total, tt.want, tt.total)
		}
	}
}

func testSeedCatalog(t *testing.T, s control.Store) {
	ctx := t.Context()
	catalogWS := control.NewID()
	catalog := func(desc string, aliases ...string) []*control.Voice {
		var vs []*control.Voice
		for _, a := range aliases {
			v := newVoice("", a)
			v.Visibility, v.Status, v.Alias, v.Description, v.Profile = "public", control.VoiceReady, a, desc, []byte(a)
			vs = append(vs, v)
		}
		return vs
	}
	if err := s.SeedCatalog(ctx, catalogWS, catalog("v1", "en-a", "en-b")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetWorkspace(ctx, catalogWS); err != nil {
		t.Fatalf("catalog workspace not created: %v", err)
	}
	a1, err := s.GetVoiceByAlias(ctx, "en-a")
	if err != nil {
		t.Fatal(err)
	}
	// Seeding again keeps ids, updates changed voices and drops voices no
	// longer in the catalog.
	if err := s.SeedCatalog(ctx, catalogWS, catalog("v2", "en-a", "en-c")); err != nil {
		t.Fatal(err)
	}
	a2, err := s.GetVoiceByAlias(ctx, "en-a")
	if err != nil {
		t.Fatal(err)
	}
	if a2.ID != a1.ID || a2.Description != "v2" || a2.OrgID != catalogWS {
		t.Fatalf("reseeded voice %+v (was %+v)", a2, a1)
	}
	_, err = s.GetVoiceByAlias(ctx, "en-b")
	wantCode(t, err, control.ENotFound)
	if _, err := s.GetVoiceByAlias(ctx, "en-c"); err != nil {
		t.Fatal(err)
	}
	// A voice that moves to another engine is rewritten (an upstream
	// configured under the alias of a built-in voice).
	moved := catalog("v2", "en-a", "en-c")
	moved[0].Engine = "up1"
	if err := s.SeedCatalog(ctx, catalogWS, moved); err != nil {
		t.Fatal(err)
	}
	if a3, err := s.GetVoiceByAlias(ctx, "en-a"); err != nil || a3.Engine != "up1" || a3.ID != a1.ID {
		t.Fatalf("engine not reseeded: %v %+v", err, a3)
	}
	ws := mustWorkspace(t, s, "free")
	if _, total, err := s.ListVoices(ctx, control.VoiceFilter{WorkspaceID: ws.ID}); err != nil || total != 2 {
		t.Fatalf("list after seeding: total %d, %v", total, err)
	}
}
