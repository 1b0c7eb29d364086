package lease

import (
	"context"
	"errors"
	"sync"
	"time"

	"voicesvc/control"
)

// clock is a hand-moved clock shared by a fake store and its managers.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 31, 23, 59, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type share struct {
	n   int
	exp time.Time
}

type reservation struct {
	month string
	n     int64
	exp   time.Time
}

// fakeStore is a LeaseService in memory with the store's rules, a clock
// of its own and a switch that makes it unreachable.
type fakeStore struct {
	clk *clock
	mu  sync.Mutex
	// slots by workspace/kind, then holder
	slots   map[string]map[string]share
	res     map[string]map[string]reservation // by workspace, then holder
	used    map[string]int64                  // by workspace/month
	daily   map[string]int64                  // by workspace/day
	credits map[string]int64
	// window by workspace: the requests and shares recorded, by time
	window map[string][]hit
	down   bool
	calls  int
	// gate, when set, holds every LeaseSlots call until it is closed.
	gate chan struct{}
}

func newFakeStore(clk *clock) *fakeStore {
	return &fakeStore{clk: clk, slots: map[string]map[string]share{}, res: map[string]map[string]reservation{},
		used: map[string]int64{}, daily: map[string]int64{}, credits: map[string]int64{},
		window: map[string][]hit{}}
}

var errDown = control.StoreUnavailableError(errors.New("fake store down"))

func (f *fakeStore) enter() error {
	f.calls++
	if f.down {
		return errDown
	}
	return nil
}

func (f *fakeStore) setDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

// held is every holder's unexpired slots of ws/kind.
func (f *fakeStore) held(ws, kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, s := range f.slots[ws+"/"+kind] {
		if s.exp.After(f.clk.now()) {
			n += s.n
		}
	}
	return n
}

func (f *fakeStore) LeaseSlots(_ context.Context, holder, ws, kind string, limit, used, want int, ttl time.Duration) (int, int, error) {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(); err != nil {
		return 0, 0, err
	}
	k := ws + "/" + kind
	if f.slots[k] == nil {
		f.slots[k] = map[string]share{}
	}
	now := f.clk.now()
	others := 0
	for h, s := range f.slots[k] {
		if h != holder && s.exp.After(now) {
			others += s.n
		}
	}
	held := max(min(max(want, 0), max(limit-others, 0)), used)
	f.slots[k][holder] = share{held, now.Add(ttl)}
	return held, max(limit-others-held, 0), nil
}

func (f *fakeStore) balance(ws, month string, allowance int64) control.Balance {
	return control.Balance{Allowance: allowance, Used: f.used[ws+"/"+month], Credits: f.credits[ws]}
}

func (f *fakeStore) SettleBilling(_ context.Context, holder string, s control.BillingSettle, ttl time.Duration) (control.BillingLease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(); err != nil {
		return control.BillingLease{}, err
	}
	for _, d := range s.Usage {
		k := s.WS + "/" + d.Day[:7]
		f.used[k], f.credits[s.WS], _, _ = control.ApplyUsage(s.Allowance, f.used[k], f.credits[s.WS], d.Chars)
		f.daily[s.WS+"/"+d.Day] += d.Chars
	}
	out := control.BillingLease{Balance: f.balance(s.WS, s.Month, s.Allowance)}
	now := f.clk.now()
	if f.res[s.WS] == nil {
		f.res[s.WS] = map[string]reservation{}
	}
	for h, r := range f.res[s.WS] {
		if h != holder && r.month == s.Month && r.exp.After(now) {
			out.Others += r.n
		}
	}
	out.Reserved = control.ReservationGrant(out.Balance, out.Others, s.Reserve, s.Enforce)
	f.res[s.WS][holder] = reservation{s.Month, out.Reserved, now.Add(ttl)}
	return out, nil
}

type hit struct {
	at int64 // ms of the fake clock
	n  int
}

// LeaseRequests keeps the window as the stores do: a share is recorded as
// admitted at the grant, never more than rps less what the window holds.
func (f *fakeStore) LeaseRequests(_ context.Context, ws string, rps, want int, back control.RequestsBack) (control.RequestsGrant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(); err != nil {
		return control.RequestsGrant{}, err
	}
	now := f.clk.now().UnixMilli()
	var hs []hit
	n := 0
	for _, h := range f.window[ws] {
		if h.at > now-1000 {
			if back.N > 0 && h.at == back.At {
				b := min(back.N, h.n)
				h.n -= b
				back.N -= b
			}
			hs = append(hs, h)
			n += h.n
		}
	}
	g := control.RequestsGrant{At: now, Granted: max(min(want, rps-n), 0)}
	if g.Granted > 0 {
		hs = append(hs, hit{now, g.Granted})
	}
	f.window[ws] = hs
	g.Remaining = max(rps-n-g.Granted, 0)
	if g.Remaining == 0 && len(hs) > 0 {
		g.ResetMS = max(hs[0].at+1000-now, 1)
	}
	return g, nil
}

func (f *fakeStore) RenewLeases(_ context.Context, holder string, ttl time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(); err != nil {
		return err
	}
	exp := f.clk.now().Add(ttl)
	for _, m := range f.slots {
		if s, ok := m[holder]; ok {
			s.exp = exp
			m[holder] = s
		}
	}
	for _, m := range f.res {
		if r, ok := m[holder]; ok {
			r.exp = exp
			m[holder] = r
		}
	}
	return nil
}

func (f *fakeStore) DropLeases(_ context.Context, holder string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(); err != nil {
		return err
	}
	for _, m := range f.slots {
		delete(m, holder)
	}
	for _, m := range f.res {
		delete(m, holder)
	}
	return nil
}

// newTestManager is a Manager on f whose background loop never runs by
// itself (tests call syncAll), on f's clock.
func newTestManager(f *fakeStore, cfg Config) *Manager {
	if cfg.Sync == 0 {
		cfg.Sync = time.Hour
	}
	if cfg.TTL == 0 {
		cfg.TTL = 10 * time.Second
	}
	m := New(Deps{Store: f, Billing: control.BillingEnforce}, cfg)
	m.cancel() // no background loop: tests sync by hand
	<-m.done
	m.now = f.clk.now
	return m
}
