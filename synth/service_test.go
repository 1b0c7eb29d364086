package synth

import (
	"context"
	"errors"
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
)

// fakeStore holds the voices and the tokens' single use.
type fakeStore struct {
	mu       sync.Mutex
	voices   map[string]*control.Voice
	consumed map[string]bool
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
	}, consumed: map[string]bool{}}
}

func (f *fakeStore) GetVoice(_ context.Context, id string) (*control.Voice, error) {
	if v, ok := f.voices[id]; ok {
		return v, nil
	}
	return nil, control.Errorf(control.ENotFound, "not found")
}

func (f *fakeStore) GetVoiceByAlias(_ context.Context, alias string) (*control.Voice, error) {
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
	c.svc = NewService(Deps{Store: c.store, Engine: &fakeEngine{mode: mode}, Limiter: c.lim, Meter: c.meter})
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

// TestServiceVoiceNames: the lookup order (id, then catalog alias) and
// that a token's voice_ids are checked on the id a name resolves to.
func TestServiceVoiceNames(t *testing.T) {
	c := newCore(t, "", 1000)
	for _, tc := range []struct {
		name, ref, want, code string
		p                     *control.Principal
	}{
		{"id", voiceOwn, voiceOwn, "", principal()},
		{"catalog alias", "cat-anna", voiceCat, "", principal()},
		{"catalog id", voiceCat, voiceCat, "", principal()},
		{"alias under a token listing its id", "cat-anna", voiceCat, "", principal(withToken(voiceCat))},
		{"alias under a token without it", "cat-anna", "", control.EVoiceNotAllowed, principal(withToken(voiceOwn))},
		{"empty", "", "", control.ENotFound, principal()},
		{"long", string(make([]byte, 200)), "", control.ENotFound, principal()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := c.svc.Voice(context.Background(), tc.p, tc.ref)
			if got := control.ErrorCode(err); got != tc.code {
				t.Fatalf("code %q (%v), want %q", got, err, tc.code)
			}
			if err == nil && v.ID != tc.want {
				t.Fatalf("voice %s, want %s", v.ID, tc.want)
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
