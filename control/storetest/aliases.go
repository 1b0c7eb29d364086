package storetest

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"voicesvc/control"
)

// testVoiceAliases runs a table of alias writes against one store, in
// order; after each, refused or not, the whole alias state of both
// workspaces must be what the table says (a refused write changes nothing).
func testVoiceAliases(t *testing.T, s control.Store) {
	ctx := t.Context()
	a := mustWorkspace(t, s, "free")
	b := mustWorkspace(t, s, "free")
	catalogWS := control.NewID()
	cat := newVoice("", "Anna")
	cat.Visibility, cat.Status, cat.Alias = "public", control.VoiceReady, "cat-anna"
	if err := s.SeedCatalog(ctx, catalogWS, []*control.Voice{cat}); err != nil {
		t.Fatal(err)
	}
	pub, err := s.GetVoiceByAlias(ctx, "cat-anna")
	if err != nil {
		t.Fatal(err)
	}
	a1 := mustVoice(t, s, newVoice(a.ID, "a1"))
	a2 := mustVoice(t, s, newVoice(a.ID, "a2"))
	b1 := mustVoice(t, s, newVoice(b.ID, "b1"))
	names := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%02d", prefix, i)
		}
		return out
	}
	type state map[string]map[string][]string // workspace -> voice -> aliases
	want := state{a.ID: {}, b.ID: {}}
	for _, tc := range []struct {
		name    string
		ws      string
		voice   string
		set     []string
		do      func() error // instead of a set
		code    string
		changes state // merged into want when the step succeeds
	}{
		{name: "set", ws: a.ID, voice: a1.ID, set: []string{"alloy", "echo"},
			changes: state{a.ID: {a1.ID: {"alloy", "echo"}}}},
		{name: "replace keeps the order given", ws: a.ID, voice: a1.ID, set: []string{"nova", "echo", "21m00Tcm4TlvDq8ikWAM"},
			changes: state{a.ID: {a1.ID: {"nova", "echo", "21m00Tcm4TlvDq8ikWAM"}}}},
		{name: "same alias in another workspace", ws: b.ID, voice: b1.ID, set: []string{"echo", "nova"},
			changes: state{b.ID: {b1.ID: {"echo", "nova"}}}},
		{name: "catalog voice by one workspace", ws: a.ID, voice: pub.ID, set: []string{"alloy", "cat-anna"},
			changes: state{a.ID: {pub.ID: {"alloy", "cat-anna"}}}},
		{name: "catalog voice by another", ws: b.ID, voice: pub.ID, set: []string{"alloy"},
			changes: state{b.ID: {pub.ID: {"alloy"}}}},
		{name: "taken by another voice", ws: a.ID, voice: a2.ID, set: []string{"fresh", "echo"}, code: control.EAliasTaken},
		{name: "taken by a catalog voice's alias", ws: a.ID, voice: a1.ID, set: []string{"alloy"}, code: control.EAliasTaken},
		{name: "another workspace's private voice", ws: a.ID, voice: b1.ID, set: []string{"x"}, code: control.ENotFound},
		{name: "unknown voice", ws: a.ID, voice: control.NewID(), set: []string{"x"}, code: control.ENotFound},
		{name: "id-shaped", ws: a.ID, voice: a2.ID, set: []string{"ok", "0123456789abcdef01234567"}, code: control.EInvalidRequest},
		{name: "invalid character", ws: a.ID, voice: a2.ID, set: []string{"a b"}, code: control.EInvalidRequest},
		{name: "duplicate in the request", ws: a.ID, voice: a2.ID, set: []string{"z", "z"}, code: control.EInvalidRequest},
		{name: "more than 32", ws: a.ID, voice: a2.ID, set: names("n", 33), code: control.EInvalidRequest},
		{name: "32", ws: a.ID, voice: a2.ID, set: names("n", 32), changes: state{a.ID: {a2.ID: names("n", 32)}}},
		{name: "clear", ws: a.ID, voice: a2.ID, set: []string{}, changes: state{a.ID: {a2.ID: nil}}},
		{name: "a freed alias moves", ws: a.ID, voice: a2.ID, set: []string{"n00"}, changes: state{a.ID: {a2.ID: {"n00"}}}},
		{name: "clear by nil", ws: a.ID, voice: pub.ID, set: nil, changes: state{a.ID: {pub.ID: nil}}},
		{name: "alias free again after clear", ws: a.ID, voice: a1.ID, set: []string{"alloy"},
			changes: state{a.ID: {a1.ID: {"alloy"}}}},
		{name: "deleted with the voice", do: func() error { return s.DeleteVoice(ctx, a.ID, a1.ID) },
			changes: state{a.ID: {a1.ID: nil}}},
		{name: "deleted with a catalog voice", do: func() error { return s.SeedCatalog(ctx, catalogWS, nil) },
			changes: state{b.ID: {pub.ID: nil}}},
		{name: "deleted voice", ws: a.ID, voice: a1.ID, set: []string{"x"}, code: control.ENotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.do != nil {
				err = tc.do()
			} else {
				var got []string
				got, err = s.SetVoiceAliases(ctx, tc.ws, tc.voice, tc.set)
				if err == nil && (got == nil || !slices.Equal(got, tc.set)) {
					t.Errorf("SetVoiceAliases returned %q, want %q", got, tc.set)
				}
				if tc.code != "" && err != nil && control.AsError(err).Code != control.ENotFound &&
					control.AsError(err).Param != "aliases" {
					t.Errorf("refusal %+v names no param", err)
				}
			}
			if tc.code == "" && err != nil {
				t.Fatal(err)
			}
			wantCode(t, err, tc.code)
			if err == nil {
				for ws, vs := range tc.changes {
					for v, list := range vs {
						if len(list) == 0 {
							delete(want[ws], v)
						} else {
							want[ws][v] = list
						}
					}
				}
			}
			checkAliases(t, s, want, []string{"fresh", "x", "z", "ok", "cat-anna-2", "n32"})
		})
	}
}

// checkAliases compares every read of the alias state with want; absent
// must resolve nowhere.
func checkAliases(t *testing.T, s control.Store, want map[string]map[string][]string, absent []string) {
	t.Helper()
	ctx := t.Context()
	for ws, vs := range want {
		got, err := s.WorkspaceAliases(ctx, ws)
		if err != nil {
			t.Fatal(err)
		}
		if got == nil || !maps.EqualFunc(got, vs, slices.Equal) {
			t.Errorf("WorkspaceAliases(%s) = %q, want %q", ws, got, vs)
		}
		for v, list := range vs {
			got, err := s.ListVoiceAliases(ctx, ws, v)
			if err != nil || !slices.Equal(got, list) {
				t.Errorf("ListVoiceAliases(%s) = %q %v, want %q", v, got, err, list)
			}
			for _, alias := range list {
				if id, err := s.ResolveVoiceAlias(ctx, ws, alias); err != nil || id != v {
					t.Errorf("ResolveVoiceAlias(%s) = %q %v, want %s", alias, id, err, v)
				}
			}
		}
		for _, alias := range absent {
			_, err := s.ResolveVoiceAlias(ctx, ws, alias)
			wantCode(t, err, control.ENotFound)
		}
	}
	if got, err := s.ListVoiceAliases(ctx, control.NewID(), control.NewID()); err != nil || got == nil || len(got) != 0 {
		t.Errorf("ListVoiceAliases of nothing = %#v %v, want an empty list", got, err)
	}
}

// testAliasChangeFeed: setting a workspace's aliases, and deleting a voice
// another workspace aliased, reach the feed as ("alias", workspace).
func testAliasChangeFeed(t *testing.T, s control.Store) {
	ctx := t.Context()
	a := mustWorkspace(t, s, "free")
	b := mustWorkspace(t, s, "free")
	v := mustVoice(t, s, newVoice(a.ID, "v"))
	WatchWithin(t, s, control.ChangeAlias, a.ID, func() {
		if _, err := s.SetVoiceAliases(ctx, a.ID, v.ID, []string{"alloy"}); err != nil {
			t.Fatal(err)
		}
	})
	catalogWS := control.NewID()
	cat := newVoice("", "Anna")
	cat.Visibility, cat.Status, cat.Alias = "public", control.VoiceReady, "cat-anna"
	if err := s.SeedCatalog(ctx, catalogWS, []*control.Voice{cat}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetVoiceAliases(ctx, b.ID, cat.ID, []string{"alloy"}); err != nil {
		t.Fatal(err)
	}
	WatchWithin(t, s, control.ChangeAlias, b.ID, func() {
		if err := s.SeedCatalog(ctx, catalogWS, nil); err != nil {
			t.Fatal(err)
		}
	})
	WatchWithin(t, s, control.ChangeAlias, a.ID, func() {
		if err := s.DeleteVoice(ctx, a.ID, v.ID); err != nil {
			t.Fatal(err)
		}
	})
}

// testVoiceAliasesConcurrent: workspaces' writers racing for one alias on
// different voices (as servers would): exactly one wins, the others answer
// alias_taken, and the alias names the winner's voice; the same race in
// another workspace is independent.
func testVoiceAliasesConcurrent(t *testing.T, s control.Store) {
	ctx := t.Context()
	const n = 6
	for range 2 {
		ws := mustWorkspace(t, s, "free")
		voices := make([]*control.Voice, n)
		for i := range voices {
			voices[i] = mustVoice(t, s, newVoice(ws.ID, fmt.Sprint("v", i)))
		}
		errs := make([]error, n)
		parallel(n, func(i int) {
			_, errs[i] = s.SetVoiceAliases(ctx, ws.ID, voices[i].ID, []string{fmt.Sprint("own", i), "contested"})
		})
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("voices %d and %d both took the alias", winner, i)
			case err == nil:
				winner = i
			default:
				wantCode(t, err, control.EAliasTaken)
			}
		}
		if winner < 0 {
			t.Fatal("no writer took the alias")
		}
		want := map[string][]string{voices[winner].ID: {fmt.Sprint("own", winner), "contested"}}
		got, err := s.WorkspaceAliases(ctx, ws.ID)
		if err != nil || !maps.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("after the race: %q %v, want %q", got, err, want)
		}
	}
}
