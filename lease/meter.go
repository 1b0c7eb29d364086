package lease

import (
	"context"
	"sort"
	"sync"
	"time"

	"voicesvc/control"
)

// account is this server's billing state of one workspace: its
// reservation (enforce) and the usage not yet settled.
type account struct {
	ws string
	mu sync.Mutex
	// mode and allowance are the last a charge brought (the workspace's
	// limits); a change makes the account stale.
	mode      string
	allowance int64
	month     string // the month reserved for
	known     bool   // settled at least once
	until     time.Time
	stale     bool
	avail     int64 // reserved, not yet charged (enforce)
	base      int64 // the balance less every reservation, at the last settle
	bal       control.Balance
	others    int64
	spent     int64            // charged since the last settle (meter mode's header)
	pending   map[string]int64 // synthesized, not settled, by UTC day
	recent    int64            // charged since the last tick, for sizing
	rate      int64            // charged in the tick before
	last      time.Time
	syncing   chan struct{}
	// floor: while a settle runs, a charge may not take avail below it
	// (the settle may shrink the reservation to what it asked).
	floor int64
}

func (m *Manager) account(ws string) *account {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.accts[ws]
	if a == nil {
		a = &account{ws: ws, pending: map[string]int64{}}
		m.accts[ws] = a
	}
	return a
}

// charHeadroom is how much a reservation holds beyond the charge at hand:
// twice what the workspace charged here in the last tick, at least a little,
// at most CharBatch and a quarter of what no one holds (so that a small
// balance stays spread over the servers that use it).
func (m *Manager) charHeadroom(a *account) int64 {
	h := min(max(2*max(a.rate, a.recent), 256), m.cfg.CharBatch)
	if a.known {
		h = min(h, (a.base+a.avail)/4)
	}
	return max(h, 0)
}

type meter Manager

var _ control.Meter = (*meter)(nil)

// Charge takes chars from this server's reservation for ws (enforce), or
// counts them (meter), in memory; when the reservation does not cover
// them, or is stale or expired, it settles and reserves first (one store
// call). A charge the store's grant does not cover is refused whole, with
// the balance less the other servers' reservations in its details.
func (mt *meter) Charge(ctx context.Context, ws *control.Workspace, chars int64) (control.Charge, int64, error) {
	m := (*Manager)(mt)
	l := ws.Limits(m.billing)
	if l.Billing == control.BillingOff {
		return control.Charge{}, -1, nil
	}
	a := m.account(ws.ID)
	for try := 0; ; try++ {
		a.mu.Lock()
		now := m.now()
		if a.mode != l.Billing || a.allowance != l.MonthlyChars {
			a.mode, a.allowance, a.stale = l.Billing, l.MonthlyChars, true
		}
		day := control.Day(now)
		fresh := a.known && !a.stale && a.month == day[:7] && now.Before(a.until)
		if fresh && (a.mode == control.BillingMeter || a.avail-chars >= max(a.floor, 0)) {
			c := a.take(now, day, chars)
			rem := a.remaining()
			a.mu.Unlock()
			return c, rem, nil
		}
		// Refused only once a settle of this charge's own showed that
		// the balance less the other servers' reservations cannot cover
		// it; a reservation that charges running meanwhile used up is
		// asked again.
		if fresh && try > 0 && a.syncing == nil && a.base+a.avail < chars {
			err := a.refusal(chars)
			a.mu.Unlock()
			return control.Charge{}, 0, err
		}
		if try > 8 && fresh {
			err := a.refusal(chars) // contended past reason: stricter, never looser
			a.mu.Unlock()
			return control.Charge{}, 0, err
		}
		if try > 16 {
			a.mu.Unlock()
			return control.Charge{}, 0, control.StoreUnavailableError(nil)
		}
		want := chars + m.charHeadroom(a)
		a.mu.Unlock()
		if err := m.settle(ctx, a, want); err != nil {
			return control.Charge{}, 0, err
		}
	}
}

// take charges chars on day, now's UTC day (a.mu held).
func (a *account) take(now time.Time, day string, chars int64) control.Charge {
	if a.mode == control.BillingEnforce {
		a.avail -= chars
	}
	a.spent += chars
	a.recent += chars
	a.last = now
	if chars != 0 {
		a.pending[day] += chars
	}
	return control.Charge{WorkspaceID: a.ws, Month: day[:7], Day: day, FromAllowance: chars}
}

// remaining is X-Billing-Remaining: the balance less every reservation,
// plus what this server still holds (enforce); the balance less what was
// charged since the last settle (meter). a.mu held.
func (a *account) remaining() int64 {
	if a.mode == control.BillingEnforce {
		return max(a.base+a.avail, 0)
	}
	return max(a.base-a.spent, 0)
}

// refusal is the 402 for a charge of chars beyond what this server may
// charge (the balance less every reservation, plus its own): the store's
// rule over that balance, credits counted last as they are taken last.
// a.mu held.
func (a *account) refusal(chars int64) error {
	left := a.remaining()
	credits := min(max(a.bal.Credits, 0), left)
	used := a.bal.Allowance - (left - credits)
	if _, _, err := control.SplitCharge(a.bal.Allowance, used, credits, chars, true); err != nil {
		return err
	}
	e := control.Errorf(control.EQuotaExhausted, "monthly character allowance exhausted")
	e.Unit, e.Limit, e.Used = "character", a.bal.Allowance, used
	return e
}

// Refund gives back a charge whose text was never synthesized: to the
// usage not yet settled (a negative amount once settled) and, in enforce
// mode, to this server's reservation.
func (mt *meter) Refund(_ context.Context, c control.Charge) error {
	m := (*Manager)(mt)
	n := c.FromAllowance + c.FromCredits
	if c.WorkspaceID == "" || n == 0 {
		return nil
	}
	a := m.account(c.WorkspaceID)
	a.mu.Lock()
	a.pending[c.Day] -= n
	a.spent -= n
	a.recent -= n
	if a.mode == control.BillingEnforce && a.known && c.Month == a.month {
		a.avail += n
	}
	a.mu.Unlock()
	return nil
}

// Remaining is the X-Billing-Remaining of ws now, or -1 when billing is off.
func (mt *meter) Remaining(ctx context.Context, ws *control.Workspace) (int64, error) {
	_, rem, err := mt.Charge(ctx, ws, 0)
	return rem, err
}

// Check is Remaining that refuses a zero balance in enforce mode.
func (mt *meter) Check(ctx context.Context, ws *control.Workspace) (int64, error) {
	m := (*Manager)(mt)
	_, rem, err := mt.Charge(ctx, ws, 0)
	if err != nil || rem != 0 || ws.Limits(m.billing).Billing != control.BillingEnforce {
		return rem, err
	}
	a := m.account(ws.ID)
	a.mu.Lock()
	defer a.mu.Unlock()
	return 0, a.refusal(1)
}

// settle sends the usage not yet settled and sets the reservation to want
// (want < 0: nothing, and the account is forgotten after), in one store
// call. One call per account at a time: a caller that finds one in flight
// waits for it and retries.
func (m *Manager) settle(ctx context.Context, a *account, want int64) error {
	a.mu.Lock()
	if ch := a.syncing; ch != nil {
		a.mu.Unlock()
		return awaitSync(ctx, ch)
	}
	if a.mode == "" { // a refund before any charge here
		a.mode = control.BillingMeter
	}
	ch := make(chan struct{})
	a.syncing = ch
	now := m.now()
	month := control.Month(now)
	if a.month != month {
		a.avail = 0 // a reservation is for its month only
		a.month = month
	}
	usage := make([]control.DayChars, 0, len(a.pending))
	for d, n := range a.pending {
		if n != 0 {
			usage = append(usage, control.DayChars{Day: d, Chars: n})
		}
	}
	sort.Slice(usage, func(i, j int) bool { return usage[i].Day < usage[j].Day })
	clear(a.pending)
	startAvail, startSpent := a.avail, a.spent
	if want >= 0 && want < startAvail && !a.stale {
		// Shrinking: charges meanwhile stay within what is asked.
		a.floor = startAvail - want
	} else if want > startAvail {
		a.floor = 0
	} else {
		a.floor = startAvail // giving everything back (idle, stale)
	}
	if want > 0 && a.stale {
		a.floor = 0
	}
	wasStale := a.stale
	a.stale = false
	s := control.BillingSettle{WS: a.ws, Month: month, Allowance: a.allowance, Usage: usage,
		Reserve: max(want, 0), Enforce: a.mode == control.BillingEnforce}
	a.mu.Unlock()

	res, err := m.st.SettleBilling(ctx, m.holder, s, m.cfg.TTL)
	m.count(err)
	a.mu.Lock()
	if err != nil {
		for _, u := range usage {
			a.pending[u.Day] += u.Chars
		}
		a.stale = a.stale || wasStale
	} else {
		// What was charged while the call ran came out of the old
		// reservation, which the grant replaced.
		// It may go below 0 only when the store granted less than
		// asked (the balance shrank): no charge here until it is back.
		during := startAvail - a.avail
		a.avail = res.Reserved - during
		a.spent -= startSpent
		a.base = res.Unreserved()
		if !s.Enforce {
			a.base = max(res.Remaining()-res.Others, 0)
		}
		a.bal, a.others = res.Balance, res.Others
		a.until = m.expiry(now)
		a.known = true
	}
	a.syncing = nil
	a.floor = 0
	a.mu.Unlock()
	close(ch)
	return err
}

// accountTarget is the reservation a sync gives a, and whether one is
// needed: every tick with usage to settle or a reservation short of the
// coming tick's charges; -1 once idle (settle, reserve nothing, forget).
func (m *Manager) accountTarget(a *account, now time.Time, tick bool) (int64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.syncing != nil {
		return 0, false
	}
	if tick {
		a.rate, a.recent = a.recent, 0
	}
	unsettled := false
	for _, n := range a.pending {
		if n != 0 {
			unsettled = true
			break
		}
	}
	if now.Sub(a.last) >= m.cfg.Idle && a.rate == 0 {
		return -1, true
	}
	if a.mode != control.BillingEnforce {
		return 0, a.stale || (tick && unsettled)
	}
	want := m.charHeadroom(a)
	short := a.avail < want/2
	return want, a.stale || (tick && (unsettled || short)) || a.month != control.Month(now)
}

func (m *Manager) dropAccount(a *account) {
	a.mu.Lock()
	idle := a.syncing == nil && len(a.pending) == 0 && m.now().Sub(a.last) >= m.cfg.Idle
	a.mu.Unlock()
	if !idle {
		return
	}
	m.mu.Lock()
	if m.accts[a.ws] == a {
		delete(m.accts, a.ws)
	}
	m.mu.Unlock()
}
