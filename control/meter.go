package control

import (
	"context"
	"errors"
	"time"
)

// StoreMeter is the Meter over a BillingService (the plans' billing rules). (Not
// "BillingMeter": that name is the meter mode constant.) The
// mode is the workspace's override, else the server's default:
//
//   - off: nothing is counted or denied; remaining is -1 (no header).
//   - meter: every charge is counted, none is denied; beyond the allowance
//     and the credits usage still grows, so metering never loses characters.
//   - enforce: a charge not covered by the allowance left plus the credits is
//     refused whole (402 quota_exhausted or insufficient_credits) and nothing
//     is taken.
//
// The allowance is the plan's monthly characters after the workspace's
// override; the month is the current UTC calendar month. A character is a
// Unicode code point (CountChars). An unknown mode counts as enforce: a typo
// in configuration must not give audio away.
type StoreMeter struct {
	b   BillingService
	def string
	now func() time.Time // tests pin the month
}

var _ Meter = (*StoreMeter)(nil)

// NewMeter bills through b; defaultMode applies to workspaces without an
// override ("" is off).
func NewMeter(b BillingService, defaultMode string) *StoreMeter {
	if defaultMode == "" {
		defaultMode = BillingOff
	}
	return &StoreMeter{b: b, def: defaultMode, now: time.Now}
}

// Charge bills chars to ws and returns the balance after it, or -1 when
// billing is off. The Charge it returns is what Refund needs; it is zero
// when nothing was taken.
func (m *StoreMeter) Charge(ctx context.Context, ws *Workspace, chars int64) (Charge, int64, error) {
	l := ws.Limits(m.def)
	if l.Billing == BillingOff {
		return Charge{}, -1, nil
	}
	c, bal, err := m.b.Charge(ctx, ws.ID, Month(m.now()), l.MonthlyChars, chars, l.Billing != BillingMeter)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Unit == "" && (e.Code == EQuotaExhausted || e.Code == EInsufficientCredits) {
			e.Unit = "character" // the flat body always names its unit
		}
		return Charge{}, 0, err
	}
	return c, bal.Remaining(), nil
}

// Refund gives back a charge whose synthesis produced no audio. A zero
// charge (billing off, or nothing taken) costs no store round trip.
func (m *StoreMeter) Refund(ctx context.Context, c Charge) error {
	if c.WorkspaceID == "" || c.FromAllowance == 0 && c.FromCredits == 0 {
		return nil
	}
	return m.b.Refund(ctx, c)
}

// Remaining reports the balance of ws this month, or -1 when billing is off.
func (m *StoreMeter) Remaining(ctx context.Context, ws *Workspace) (int64, error) {
	l := ws.Limits(m.def)
	if l.Billing == BillingOff {
		return -1, nil
	}
	bal, err := m.b.Balance(ctx, ws.ID, Month(m.now()), l.MonthlyChars)
	if err != nil {
		return 0, err
	}
	return bal.Remaining(), nil
}

// Check reports, without taking anything, whether ws may start metered
// work whose size is not known yet (a realtime session): in enforce mode a
// balance of zero is refused with the error a 1-character charge would get
// (EQuotaExhausted or EInsufficientCredits, flat-body details filled).
// Otherwise it returns the balance, or -1 when billing is off. Reading
// instead of charging and refunding one character means a refused or
// racing check never moves the counters.
func (m *StoreMeter) Check(ctx context.Context, ws *Workspace) (int64, error) {
	l := ws.Limits(m.def)
	if l.Billing == BillingOff {
		return -1, nil
	}
	bal, err := m.b.Balance(ctx, ws.ID, Month(m.now()), l.MonthlyChars)
	if err != nil {
		return 0, err
	}
	if left := bal.Remaining(); left > 0 || l.Billing == BillingMeter {
		return left, nil
	}
	if _, _, e := SplitCharge(bal.Allowance, bal.Used, bal.Credits, 1, true); e != nil {
		return 0, e
	}
	return 0, nil
}
