package synth

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/engine"
)

// The core's endings, with a fake engine and a fake store: no sockets, no
// HTTP. Every case checks what is left afterwards: slots held, characters
// billed, and whether the access token was spent.

const (
	wsOwn      = "ws-own"
	voiceOwn   = "0123456789abcdef01234567"
	voiceDraft = "aaaaaaaaaaaaaaaaaaaaaaaa"
	voiceOther = "bbbbbbbbbbbbbbbbbbbbbbbb" // another workspace's, private
	voiceCat   = "cccccccccccccccccccccccc" // public catalog voice, alias "cat-anna"
	voiceFree  = "dddddddddddddddddddddddd" // own, ready, not in the token's list
	voiceCat2  = "ffffffffffffffffffffffff" // TestServiceVoiceNames: public, alias "gone"
	voiceGone  = "eeeeeeeeeeeeeeeeeeeeeee0" // TestServiceVoiceNames: deleted after its aliases were cached
)

// fakeStore holds the voices, the workspace aliases and the tokens' single
// use, and counts alias lookups.
type fakeStore struct {
	mu       sync.Mutex
	voices   map[string]*control.Voice
	consumed map[string]bool
	aliases  map[string]map[string][]string // workspace -> voice -> aliases
	resolves int                            // ResolveVoiceAlias calls
	byAlias  int                            // GetVoiceByAlias calls
}

func newFakeStore() *fakeStore {
	v := func(id, org, vis, status, alias string) *control.Voice {
		return &control.Voice{ID: id, OrgID: org, Visibility: vis, Status: status, Alias: alias, PrimaryLanguage: "en"}
	}
	return &fakeStore{voices: map[string]*control.Voice{
		voiceOwn:   v(voiceOwn, wsOwn, "private", control.VoiceReady, ""),
		voiceFree:  v(voiceFree, wsOwn, "private", control.VoiceReady, ""),
		voiceDraft: v(voiceDraft, wsOwn, "private", control.VoiceDraft, ""),
		voiceOther: v(voiceOther, "ws-other", "private", control.VoiceReady, ""),
		voiceCat:   v(voiceCat, "", "public", control.VoiceReady, "cat-anna"),
	}, consumed: map[string]bool{}, aliases: map[string]map[string][]string{}}
}

func (f *fakeStore) GetVoice(_ context.Context, id string) (*control.Voice, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.voices[id]; ok {
		return v, nil
	}
	return nil, control.Errorf(control.ENotFound, "not found")
}

func (f *fakeStore) GetVoiceByAlias(_ context.Context, alias string) (*control.Voice, error) {
	f.mu.Lock()
	f.byAlias++
	f.mu.Unlock()
	for _, v := range f.voices {
		if v.Alias == alias && v.Visibility == "public" {
			return v, nil
		}
	}
	return nil, control.Errorf(control.ENotFound, "not found")
}

func (f *fakeStore) ListVoices(_ context.Context, flt control.VoiceFilter) ([]*control.Voice, int, error) {
	var out []*control.Voice
	for _, id := range []string{voiceOwn, voiceFree, voiceDraft, voiceOther, voiceCat} {
		v := f.voices[id]
		if (v.OrgID == flt.WorkspaceID || v.Visibility == "public") && (flt.Status == "" || v.Status == flt.Status) {
			out = append(out, v)
		}
	}
	return out, len(out), nil
}

// SetVoiceAliases follows the stores' rules (control.AliasService).
func (f *fakeStore) SetVoiceAliases(_ context.Context, ws, voiceID string, aliases []string) ([]string, error) {
	list, err := control.ValidateAliases(aliases)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.voices[voiceID]; !ok || !v.Usable(ws) {
		return nil, control.Errorf(control.ENotFound, "voice not found")
	}
	for id, held := range f.aliases[ws] {
		for _, a := range list {
			if id != voiceID && slices.Contains(held, a) {
				return nil, control.AliasTaken(a)
			}
		}
	}
	if f.aliases[ws] == nil {
		f.aliases[ws] = map[string][]string{}
	}
	if len(list) == 0 {
		delete(f.aliases[ws], voiceID)
	} else {
		f.aliases[ws][voiceID] = list
	}
	return list, nil
}

func (f *fakeStore) ListVoiceAliases(_ context.Context, ws, voiceID string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string{}, f.aliases[ws][voiceID]...), nil
}

func (f *fakeStore) ResolveVoiceAlias(_ context.Context, ws, alias string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resolves++
	for id, list := range f.aliases[ws] {
		if slices.Contains(list, alias) {
			return id, nil
		}
	}
	return "", control.Errorf(control.ENotFound, "alias not found")
}

func (f *fakeStore) WorkspaceAliases(_ context.Context, ws string) (map[string][]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.aliases[ws]), nil
}

// The fake has no keys or tokens: the credential tests use the real stores.
func (f *fakeStore) GetAPIKeyByHash(context.Context, []byte) (*control.APIKey, error) {
	return nil, control.Errorf(control.ENotFound, "no keys")
}
func (f *fakeStore) GetAPIKey(context.Context, string) (*control.APIKey, error) {
	return nil, control.Errorf(control.ENotFound, "no keys")
}
func (f *fakeStore) GetWorkspace(context.Context, string) (*control.Workspace, error) {
	return nil, control.Errorf(control.ENotFound, "no workspaces")
}
func (f *fakeStore) GetTokenByHash(context.Context, []byte) (*control.AccessToken, error) {
	return nil, control.Errorf(control.ETokenInvalid, "no tokens")
}

func (f *fakeStore) ConsumeToken(_ context.Context, hash []byte, _ int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.consumed[string(hash)] {
		return control.Errorf(control.ETokenInvalid, "used")
	}
	f.consumed[string(hash)] = true
	return nil
}

// fakeMeter keeps a balance in memory, enforced.
type fakeMeter struct {
	mu      sync.Mutex
	balance int64
	billed  int64
}

func (m *fakeMeter) Charge(_ context.Context, ws *control.Workspace, chars int64) (control.Charge, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if chars > m.balance {
		return control.Charge{}, 0, &control.Error{Code: control.EInsufficientCredits, Message: "not enough"}
	}
	m.balance -= chars
	m.billed += chars
	return control.Charge{WorkspaceID: ws.ID, FromCredits: chars}, m.balance, nil
}

func (m *fakeMeter) Refund(_ context.Context, c control.Charge) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.balance += c.FromCredits
	m.billed -= c.FromCredits
	return nil
}

func (m *fakeMeter) Remaining(context.Context, *control.Workspace) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.balance, nil
}

func (m *fakeMeter) Check(ctx context.Context, ws *control.Workspace) (int64, error) {
	b, _ := m.Remaining(ctx, ws)
	if b <= 0 {
		return 0, &control.Error{Code: control.EInsufficientCredits, Message: "nothing left"}
	}
	return b, nil
}

// fakeEngine renders chunks of silence, or fails, as its mode says.
type fakeEngine struct{ mode string }

const fakeRate = 16000

var errEngine = errors.New("fake engine: broken")

func (e *fakeEngine) Name() string                                        { return "fake" }
func (e *fakeEngine) NativeRate() int                                     { return fakeRate }
func (e *fakeEngine) Languages() []string                                 { return []string{"en"} }
func (e *fakeEngine) Catalog() []engine.CatalogVoice                      { return nil }
func (e *fakeEngine) Enroll(context.Context, engine.Clip) ([]byte, error) { return nil, nil }

func (e *fakeEngine) Synthesize(ctx context.Context, _ engine.Request, emit func(engine.Chunk) error) error {
	switch e.mode {
	case "fail-before":
		return errEngine
	case "block":
		<-ctx.Done()
		return ctx.Err()
	}
	for i := range 3 {
		if e.mode == "fail-after" && i == 1 {
			return errEngine
		}
		if err := emit(engine.Chunk{Samples: make([]float32, 480), Last: i == 2}); err != nil {
			return err
		}
	}
	return nil
}

// core is one Service over fakes, and what the cases look at afterwards.
type core struct {
	svc   *Service
	store *fakeStore
	meter *fakeMeter
	lim   *control.MemoryLimiter
}

func newCore(t *testing.T, mode string, balance int64) *core {
	t.Helper()
	c := &core{store: newFakeStore(), meter: &fakeMeter{balance: balance}, lim: control.NewMemoryLimiter()}
	svc, err := NewService(Deps{Store: c.store, Engine: &fakeEngine{mode: mode}, Limiter: c.lim, Meter: c.meter})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	c.svc = svc
	return c
}

func principal(mods ...func(*control.Principal)) *control.Principal {
	p := &control.Principal{WorkspaceID: wsOwn, Limits: control.Limits{
		Concurrency: 1, Sessions: 1, RPS: 0, Streaming: true, Billing: control.BillingEnforce}}
	for _, m := range mods {
		m(p)
	}
	return p
}

func withToken(voices ...string) func(*control.Principal) {
	return func(p *control.Principal) {
		p.Token = &control.AccessToken{Hash: []byte("token-1"), VoiceIDs: voices}
	}
}

var text = Options{Text: "Hello there.", Format: codec.S16LE, SampleRate: 16000, NumStep: DefaultNumStep}

// after is what a case expects once it has ended.
type after struct {
	billed   int64
	consumed bool
}

func (c *core) check(t *testing.T, want after) {
	t.Helper()
	if n := c.lim.InUse(wsOwn, control.SlotStream); n != 0 {
		t.Errorf("stream slots held: %d, want 0", n)
	}
	if n := c.lim.InUse(wsOwn, control.SlotSession); n != 0 {
		t.Errorf("session slots held: %d, want 0", n)
	}
	if c.meter.billed != want.billed {
		t.Errorf("billed %d characters, want %d", c.meter.billed, want.billed)
	}
	if got := c.store.consumed["token-1"]; got != want.consumed {
		t.Errorf("token consumed: %v, want %v", got, want.consumed)
	}
}

var errGone = errors.New("client gone")

func TestServiceEndings(t *testing.T) {
	chars := text.Chars()
	for _, tc := range []struct {
		name    string
		mode    string // the engine's
		sink    func(n *int) Sink
		cancel  bool // the context ends while the engine runs
		wantErr string
		want    after
	}{
		{name: "success", want: after{billed: chars, consumed: true}},
		{name: "client gone before audio", sink: func(*int) Sink { return func([]byte) error { return errGone } },
			wantErr: "gone", want: after{billed: 0, consumed: true}},
		{name: "client gone after audio", sink: func(n *int) Sink {
			return func([]byte) error {
				if *n++; *n > 1 {
					return errGone
				}
				return nil
			}
		}, wantErr: "gone", want: after{billed: chars, consumed: true}},
		{name: "engine fails before audio", mode: "fail-before", wantErr: control.EInternal,
			want: after{billed: 0, consumed: true}},
		{name: "engine fails after audio", mode: "fail-after", wantErr: control.EInternal,
			want: after{billed: chars, consumed: true}},
		{name: "cancelled", mode: "block", cancel: true, wantErr: "canceled",
			want: after{billed: 0, consumed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCore(t, tc.mode, 1000)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			job, err := c.svc.Begin(ctx, principal(withToken()), voiceOwn, text, true)
			if err != nil {
				t.Fatal(err)
			}
			if c.lim.InUse(wsOwn, control.SlotStream) != 1 {
				t.Fatal("an admitted job holds no slot")
			}
			n := 0
			sink := Sink(func([]byte) error { return nil })
			if tc.sink != nil {
				sink = tc.sink(&n)
			}
			if tc.cancel {
				cancel()
			}
			res, err := job.Run(ctx, sink)
			job.Finish(res.Samples)
			job.Finish(res.Samples) // idempotent
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Run: %v", err)
			case tc.wantErr == "gone" && !errors.Is(err, errGone):
				t.Fatalf("Run: %v, want the sink's error", err)
			case tc.wantErr == "canceled" && !errors.Is(err, context.Canceled):
				t.Fatalf("Run: %v, want context.Canceled", err)
			case tc.wantErr != "" && tc.wantErr != "gone" && tc.wantErr != "canceled" && control.ErrorCode(EngineError(err)) == "":
				t.Fatalf("Run: %v, want a failure", err)
			}
			c.check(t, tc.want)
		})
	}
}

func TestServiceRefusals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		voice   string
		p       *control.Principal
		ask     Ask
		balance int64
		hold    string // a slot of this kind is held by another request first
		use     bool   // the token was spent before
		code    string
	}{
		{name: "unknown voice", voice: "eeeeeeeeeeeeeeeeeeeeeeee", p: principal(), code: control.ENotFound},
		{name: "unknown alias", voice: "alloy", p: principal(), code: control.ENotFound},
		{name: "other workspace's voice", voice: voiceOther, p: principal(), code: control.ENotFound},
		{name: "draft voice", voice: voiceDraft, p: principal(), code: control.EVoiceNotReady},
		{name: "token's voices", voice: voiceFree, p: principal(withToken(voiceOwn)), code: control.EVoiceNotAllowed},
		{name: "streaming feature", voice: voiceOwn, ask: Ask{Streaming: true},
			p: principal(func(p *control.Principal) { p.Limits.Streaming = false }), code: control.EFeatureDisabled},
		{name: "concurrency", voice: voiceOwn, p: principal(), hold: control.SlotStream, code: control.EConcurrencyLimited},
		{name: "credits", voice: voiceOwn, p: principal(), balance: 3, code: control.EInsufficientCredits},
		{name: "token used", voice: voiceOwn, p: principal(withToken()), use: true, code: control.ETokenInvalid},
		{name: "session slot", voice: voiceOwn, ask: Ask{Session: true, Streaming: true}, p: principal(),
			hold: control.SlotSession, code: control.ETooManySessions},
		{name: "session balance", voice: voiceOwn, ask: Ask{Session: true, Streaming: true}, p: principal(),
			balance: 0, code: control.EInsufficientCredits},
	} {
		t.Run(tc.name, func(t *testing.T) {
			balance := tc.balance
			if balance == 0 && tc.code != control.EInsufficientCredits {
				balance = 1000
			}
			c := newCore(t, "", balance)
			if tc.use {
				c.store.consumed["token-1"] = true
			}
			var held control.Lease
			if tc.hold != "" {
				l, _, err := c.lim.Acquire(context.Background(), wsOwn, tc.hold, 1)
				if err != nil {
					t.Fatal(err)
				}
				held = l
			}
			var err error
			if tc.ask.Session {
				var a *Admission
				a, err = c.svc.Admit(context.Background(), tc.p, tc.ask)
				a.Done(0)
			} else {
				var job *Job
				o := text
				job, err = c.svc.Begin(context.Background(), tc.p, tc.voice, o, tc.ask.Streaming)
				job.Finish(0)
			}
			if got := control.ErrorCode(err); got != tc.code {
				t.Fatalf("code %q (%v), want %q", got, err, tc.code)
			}
			if held != nil {
				held.Release()
			}
			// A refusal holds nothing, bills nothing, and leaves the token
			// as it was.
			c.check(t, after{billed: 0, consumed: tc.use})
		})
	}
}

func TestServiceRateLimit(t *testing.T) {
	c := newCore(t, "", 1000)
	p := principal(func(p *control.Principal) { p.Limits.RPS = 1 })
	if _, err := c.svc.AllowRequest(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	d, err := c.svc.AllowRequest(context.Background(), p)
	if control.ErrorCode(err) != control.ERateLimited || d.Allowed {
		t.Fatalf("second request in the second: %+v %v, want rate_limited", d, err)
	}
	c.check(t, after{})
}

// TestServiceVoiceNames: the lookup order (id, then workspace alias, then
// catalog alias), that a workspace alias shadows a catalog alias for its
// workspace only, and that a token's voice_ids are checked on the id a name
// resolves to. The table runs with the cache untrusted (every lookup reads
// the store) and live (twice: the second answer comes from the cache,
// misses included).
func TestServiceVoiceNames(t *testing.T) {
	other := func(p *control.Principal) { p.WorkspaceID = "ws-other" }
	cases := []struct {
		name, ref, want, code string
		p                     *control.Principal
	}{
		{"id", voiceOwn, voiceOwn, "", principal()},
		{"catalog alias", "cat-anna", voiceCat, "", principal(other)},
		{"catalog id", voiceCat, voiceCat, "", principal()},
		{"alias under a token listing its id", "cat-anna", voiceCat, "", principal(other, withToken(voiceCat))},
		{"alias under a token without it", "cat-anna", "", control.EVoiceNotAllowed, principal(other, withToken(voiceOwn))},
		{"empty", "", "", control.ENotFound, principal()},
		{"long", string(make([]byte, 200)), "", control.ENotFound, principal()},
		{"workspace alias of an own voice", "alloy", voiceOwn, "", principal()},
		{"vendor id as a workspace alias", "21m00Tcm4TlvDq8ikWAM", voiceFree, "", principal()},
		{"workspace alias of a catalog voice", "anna", voiceCat, "", principal()},
		{"workspace alias shadows a catalog alias", "cat-anna", voiceOwn, "", principal()},
		{"another workspace's alias", "alloy", "", control.ENotFound, principal(other)},
		{"another workspace's alias of its own voice", "theirs", "", control.ENotFound, principal()},
		{"the other workspace's own alias", "theirs", voiceOther, "", principal(other)},
		{"workspace alias of a draft voice", "drafty", "", control.EVoiceNotReady, principal()},
		{"workspace alias under a token listing its id", "alloy", voiceOwn, "", principal(withToken(voiceOwn))},
		{"workspace alias under a token without it", "alloy", "", control.EVoiceNotAllowed, principal(withToken(voiceFree))},
		{"shadowing alias under a token listing the catalog voice", "cat-anna", "", control.EVoiceNotAllowed,
			principal(withToken(voiceCat))},
		{"alias of a voice gone meanwhile falls to the catalog", "gone", voiceCat2, "", principal()},
		{"alias of a voice gone meanwhile", "gone-too", "", control.ENotFound, principal()},
		{"unknown name", "nova", "", control.ENotFound, principal()},
		{"not an alias's characters", "a b", "", control.ENotFound, principal()},
	}
	for _, mode := range []string{"store", "live cache"} {
		t.Run(mode, func(t *testing.T) {
			c := newCore(t, "", 1000)
			set := func(ws, voice string, aliases ...string) {
				t.Helper()
				if _, err := c.store.SetVoiceAliases(context.Background(), ws, voice, aliases); err != nil {
					t.Fatal(err)
				}
			}
			set(wsOwn, voiceOwn, "alloy", "cat-anna")
			set(wsOwn, voiceFree, "21m00Tcm4TlvDq8ikWAM")
			set(wsOwn, voiceCat, "anna")
			set(wsOwn, voiceDraft, "drafty")
			set("ws-other", voiceOther, "theirs")
			// A second catalog voice, alias "gone"; and an own voice aliased
			// "gone" and "gone-too" that is deleted after a live cache read
			// its aliases: the store deletes them with the voice, but the
			// cache may still hold them until the "alias" change arrives.
			c.store.voices[voiceCat2] = &control.Voice{ID: voiceCat2, Visibility: "public",
				Status: control.VoiceReady, Alias: "gone"}
			c.store.voices[voiceGone] = &control.Voice{ID: voiceGone, OrgID: wsOwn, Visibility: "private",
				Status: control.VoiceReady}
			set(wsOwn, voiceGone, "gone", "gone-too")
			rounds := 1
			if mode == "live cache" {
				c.svc.Voices().SetLive(true)
				rounds = 2
				for _, ref := range []string{"gone", "gone-too"} {
					if id, err := c.svc.Voices().ResolveAlias(c.store, wsOwn, ref); err != nil || id != voiceGone {
						t.Fatalf("warming %s: %q %v", ref, id, err)
					}
				}
			}
			c.store.mu.Lock()
			delete(c.store.voices, voiceGone)
			delete(c.store.aliases[wsOwn], voiceGone)
			c.store.mu.Unlock()
			for round := range rounds {
				for _, tc := range cases {
					t.Run(tc.name, func(t *testing.T) {
						v, err := c.svc.Voice(context.Background(), tc.p, tc.ref)
						if got := control.ErrorCode(err); got != tc.code {
							t.Fatalf("round %d: code %q (%v), want %q", round, got, err, tc.code)
						}
						if err == nil && v.ID != tc.want {
							t.Fatalf("round %d: voice %s, want %s", round, v.ID, tc.want)
						}
					})
				}
			}
		})
	}
}

// TestServiceSessionBilling: a realtime session's admission charges text
// as it arrives and refunds what never reached the engine, whatever ends
// it (a revoked key, a cancel, the socket closing): billed = the text
// synthesized, and both slots come back.
func TestServiceSessionBilling(t *testing.T) {
	for _, tc := range []struct {
		name        string
		synthesized []int64 // charges whose text reached the engine
		unspoken    []int64 // charges refunded at the end
	}{
		{"all spoken", []int64{10, 20}, nil},
		{"revoked mid-session", []int64{10}, []int64{20, 5}},
		{"cancelled before any", nil, []int64{30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCore(t, "", 1000)
			a, err := c.svc.Admit(context.Background(), principal(withToken()), Ask{Session: true, Streaming: true})
			if err != nil {
				t.Fatal(err)
			}
			if c.lim.InUse(wsOwn, control.SlotSession) != 1 || c.lim.InUse(wsOwn, control.SlotStream) != 1 {
				t.Fatal("a session holds a session slot and a stream slot")
			}
			var want int64
			for _, n := range tc.synthesized {
				if _, err := a.Charge(context.Background(), n); err != nil {
					t.Fatal(err)
				}
				want += n
			}
			for _, n := range tc.unspoken {
				ch, err := a.Charge(context.Background(), n)
				if err != nil {
					t.Fatal(err)
				}
				if err := a.Refund(context.Background(), ch); err != nil {
					t.Fatal(err)
				}
			}
			a.Done(0)
			c.check(t, after{billed: want, consumed: true})
		})
	}
}
