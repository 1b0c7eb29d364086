package synth

import (
	"context"
	"slices"
	"testing"
	"time"

	"voicesvc/control"
)

// TestVoiceCacheAliases: a live cache answers a workspace alias, and a
// workspace's "no such alias", from memory until the workspace's aliases
// are invalidated or the entry ages past ttl; an untrusted cache always
// reads the store; one workspace's invalidation keeps the others'.
func TestVoiceCacheAliases(t *testing.T) {
	for _, tc := range []struct {
		name     string
		live     bool
		ttl      time.Duration
		between  func(c *VoiceCache) // after the first two lookups
		want     string              // what the third lookup answers
		resolves int                 // store reads after three lookups
	}{
		{name: "live", live: true, ttl: time.Minute, want: voiceOwn, resolves: 1},
		{name: "not live", live: false, ttl: time.Minute, want: "", resolves: 3},
		{name: "invalidated", live: true, ttl: time.Minute, want: "",
			between: func(c *VoiceCache) { c.InvalidateWorkspaceAliases(wsOwn) }, resolves: 2},
		{name: "another workspace invalidated", live: true, ttl: time.Minute, want: voiceOwn,
			between: func(c *VoiceCache) { c.InvalidateWorkspaceAliases("ws-other") }, resolves: 1},
		{name: "voice invalidated", live: true, ttl: time.Minute, want: voiceOwn,
			between: func(c *VoiceCache) { c.Invalidate(voiceOwn) }, resolves: 1},
		{name: "reset", live: true, ttl: time.Minute, want: "",
			between: func(c *VoiceCache) { c.Reset() }, resolves: 2},
		{name: "stale", live: true, ttl: time.Millisecond, want: "",
			between: func(*VoiceCache) { time.Sleep(5 * time.Millisecond) }, resolves: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeStore()
			if _, err := f.SetVoiceAliases(context.Background(), wsOwn, voiceOwn, []string{"alloy"}); err != nil {
				t.Fatal(err)
			}
			c := NewVoiceCache(tc.ttl)
			c.SetLive(tc.live)
			for range 2 {
				if id, err := c.ResolveAlias(f, wsOwn, "alloy"); err != nil || id != voiceOwn {
					t.Fatalf("ResolveAlias = %q %v, want %s", id, err, voiceOwn)
				}
			}
			// The store's aliases go; only a cache that is trusted and not
			// invalidated remembers them.
			f.aliases = map[string]map[string][]string{}
			if tc.between != nil {
				tc.between(c)
			}
			if id, err := c.ResolveAlias(f, wsOwn, "alloy"); err != nil || id != tc.want {
				t.Fatalf("third ResolveAlias = %q %v, want %q", id, err, tc.want)
			}
			if f.resolves != tc.resolves {
				t.Fatalf("%d store reads, want %d", f.resolves, tc.resolves)
			}
		})
	}
}

// TestVoiceCacheAliasMiss: a catalog alias costs no workspace-alias read
// once its miss is cached, and an own alias set through the core is seen at
// once (the core drops its workspace's entries), misses included.
func TestVoiceCacheAliasMiss(t *testing.T) {
	c := newCore(t, "", 1000)
	c.svc.Voices().SetLive(true)
	p := principal()
	for range 5 {
		if v, err := c.svc.Voice(context.Background(), p, "cat-anna"); err != nil || v.ID != voiceCat {
			t.Fatalf("cat-anna: %v %v", v, err)
		}
	}
	if c.store.resolves != 1 || c.store.byAlias != 1 {
		t.Fatalf("5 catalog lookups read the store %d (workspace alias) and %d (catalog) times, want 1 and 1",
			c.store.resolves, c.store.byAlias)
	}
	if _, err := c.svc.SetAliases(context.Background(), p, voiceOwn, []string{"cat-anna"}); err != nil {
		t.Fatal(err)
	}
	if v, err := c.svc.Voice(context.Background(), p, "cat-anna"); err != nil || v.ID != voiceOwn {
		t.Fatalf("after SetAliases cat-anna is %v %v, want the own voice", v, err)
	}
	if _, err := c.svc.SetAliases(context.Background(), p, voiceOwn, nil); err != nil {
		t.Fatal(err)
	}
	if v, err := c.svc.Voice(context.Background(), p, "cat-anna"); err != nil || v.ID != voiceCat {
		t.Fatalf("after clearing cat-anna is %v %v, want the catalog voice", v, err)
	}
}

// TestServiceAliases: SetAliases and Aliases take a voice id the workspace
// may use (own or public), validate, and answer the store's refusals.
func TestServiceAliases(t *testing.T) {
	c := newCore(t, "", 1000)
	ctx := context.Background()
	p := principal()
	if _, err := c.store.SetVoiceAliases(ctx, wsOwn, voiceFree, []string{"echo"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		voice   string
		aliases []string
		code    string
		want    []string // the voice's aliases afterwards
	}{
		{"own voice", voiceOwn, []string{"alloy", "nova"}, "", []string{"alloy", "nova"}},
		{"replace", voiceOwn, []string{"nova", "shimmer"}, "", []string{"nova", "shimmer"}},
		{"catalog voice", voiceCat, []string{"anna"}, "", []string{"anna"}},
		{"draft voice", voiceDraft, []string{"drafty"}, "", []string{"drafty"}},
		{"another workspace's voice", voiceOther, []string{"x"}, control.ENotFound, nil},
		{"unknown voice", "eeeeeeeeeeeeeeeeeeeeeeee", []string{"x"}, control.ENotFound, nil},
		{"a name, not an id", "cat-anna", []string{"x"}, control.ENotFound, nil},
		{"taken", voiceOwn, []string{"x", "echo"}, control.EAliasTaken, []string{"nova", "shimmer"}},
		{"id-shaped", voiceOwn, []string{"0123456789abcdef01234567"}, control.EInvalidRequest, []string{"nova", "shimmer"}},
		{"33", voiceOwn, make([]string, 33), control.EInvalidRequest, []string{"nova", "shimmer"}},
		{"clear", voiceOwn, []string{}, "", []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.svc.SetAliases(ctx, p, tc.voice, tc.aliases)
			if code := control.ErrorCode(err); code != tc.code {
				t.Fatalf("SetAliases: code %q (%v), want %q", code, err, tc.code)
			}
			if err == nil && !slices.Equal(got, tc.aliases) {
				t.Fatalf("SetAliases = %q, want %q", got, tc.aliases)
			}
			list, err := c.svc.Aliases(ctx, p, tc.voice)
			if tc.code == control.ENotFound {
				if control.ErrorCode(err) != control.ENotFound {
					t.Fatalf("Aliases: %v, want not_found", err)
				}
				return
			}
			if err != nil || !slices.Equal(list, tc.want) {
				t.Fatalf("Aliases = %q %v, want %q", list, err, tc.want)
			}
		})
	}
}

// TestServiceUsableVoicesWithAliases: the compatible voice list carries
// each voice's workspace aliases, and a token narrows it as UsableVoices.
func TestServiceUsableVoicesWithAliases(t *testing.T) {
	c := newCore(t, "", 1000)
	ctx := context.Background()
	for voice, aliases := range map[string][]string{voiceOwn: {"alloy"}, voiceCat: {"anna", "echo"}} {
		if _, err := c.store.SetVoiceAliases(ctx, wsOwn, voice, aliases); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.store.SetVoiceAliases(ctx, "ws-other", voiceCat, []string{"theirs"}); err != nil {
		t.Fatal(err)
	}
	got, err := c.svc.UsableVoicesWithAliases(ctx, principal(), 10)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{voiceOwn: {"alloy"}, voiceFree: nil, voiceCat: {"anna", "echo"}}
	if len(got) != len(want) {
		t.Fatalf("got %d voices, want %d", len(got), len(want))
	}
	for _, u := range got {
		if w, ok := want[u.Voice.ID]; !ok || !slices.Equal(u.Aliases, w) {
			t.Fatalf("voice %s aliases %q, want %q", u.Voice.ID, u.Aliases, w)
		}
	}
	plain, err := c.svc.UsableVoices(ctx, principal(), 10)
	if err != nil || len(plain) != len(got) {
		t.Fatalf("UsableVoices: %d %v", len(plain), err)
	}
	got, err = c.svc.UsableVoicesWithAliases(ctx, principal(withToken(voiceCat)), 10)
	if err != nil || len(got) != 1 || got[0].Voice.ID != voiceCat || !slices.Equal(got[0].Aliases, []string{"anna", "echo"}) {
		t.Fatalf("under a token: %+v %v", got, err)
	}
}

// BenchmarkVoiceLookup: Voice() on a warm live cache by id, by workspace
// alias and by catalog alias (which first misses the workspace aliases,
// cached). An alias should cost about what an id does.
func BenchmarkVoiceLookup(b *testing.B) {
	c := &core{store: newFakeStore(), meter: &fakeMeter{balance: 1}, lim: control.NewMemoryLimiter()}
	svc, err := NewService(Deps{Store: c.store, Engine: &fakeEngine{}, Limiter: c.lim, Meter: c.meter})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(svc.Close)
	c.svc = svc
	if _, err := c.store.SetVoiceAliases(context.Background(), wsOwn, voiceOwn, []string{"alloy"}); err != nil {
		b.Fatal(err)
	}
	c.svc.Voices().SetLive(true)
	p := principal()
	for _, bc := range []struct{ name, ref, want string }{
		{"id", voiceOwn, voiceOwn},
		{"workspace-alias", "alloy", voiceOwn},
		{"catalog-alias", "cat-anna", voiceCat},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			if v, err := c.svc.Voice(ctx, p, bc.ref); err != nil || v.ID != bc.want {
				b.Fatalf("%v %v", v, err)
			}
			reads := c.store.resolves + c.store.byAlias
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.svc.Voice(ctx, p, bc.ref); err != nil {
					b.Fatal(err)
				}
			}
			if n := c.store.resolves + c.store.byAlias; n != reads {
				b.Fatalf("a warm cache read the store %d times", n-reads)
			}
		})
	}
}
