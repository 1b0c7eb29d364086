package control

import (
	"context"
	"time"
)

// LeaseService is the store's side of package lease (docs/api.md, "Running
// several servers"): a server holds, per active workspace, a share of its
// concurrency slots and a reservation of its characters, taken from and
// given back to the store in batches, so that the request path counts and
// charges in memory. The store keeps what each holder (one server process)
// holds and until when; what a holder stops renewing expires on its own.
//
// The rules every implementation keeps:
//   - a grant never exceeds what the workspace has left once every other
//     holder's unexpired share is counted (so the sum of the shares never
//     exceeds the limit or the balance);
//   - the usage a holder settles counts characters when synthesized: the
//     month and the day of each amount are those of its synthesis.
type LeaseService interface {
	// LeaseSlots sets holder's share of the kind slots (SlotStream,
	// SlotSession) of ws to want, granting no more than limit less the
	// unexpired slots other holders have (also those of servers that take
	// one slot per request), but never less than used, the slots the holder
	// has in use (running streams keep their slots when a limit is lowered
	// under them, and count against everyone's next grant); the share
	// expires ttl from now. held is the share now; free is limit less every
	// holder's slots (at least 0). want 0 gives the share back.
	LeaseSlots(ctx context.Context, holder, ws, kind string, limit, used, want int, ttl time.Duration) (held, free int, err error)
	// SettleBilling applies s in one transaction: first the usage (see
	// BillingSettle), then holder's reservation of s.WS for s.Month is set
	// to s.Reserve characters, no more than the balance left once other
	// holders' unexpired reservations for the month are counted (with
	// s.Enforce; without it nothing is reserved). The reservation expires
	// ttl from now. ENotFound for an unknown workspace (nothing applied).
	SettleBilling(ctx context.Context, holder string, s BillingSettle, ttl time.Duration) (BillingLease, error)
	// LeaseRequests grants up to want requests of ws's rps window: the
	// requests admitted in any one second across servers, those of
	// servers that ask per request included. The grant is never more than
	// rps less what the window holds now, and it is recorded in the window
	// as that many requests admitted now, so a holder that uses it within
	// a short validity after asking admits at most rps in any second plus
	// the grants outstanding at its start. back gives back the unused part
	// of an earlier grant (taken out of the window while it is still
	// there). A grant of 0 says when the window admits one more.
	LeaseRequests(ctx context.Context, ws string, rps, want int, back RequestsBack) (RequestsGrant, error)
	// RenewLeases extends every share and reservation of holder to ttl
	// from now, in one call.
	RenewLeases(ctx context.Context, holder string, ttl time.Duration) error
	// DropLeases gives back every share and reservation of holder (a
	// server that shuts down).
	DropLeases(ctx context.Context, holder string) error
}

// RequestsBack is the unused part of a grant of LeaseRequests: N
// requests recorded at At (the grant's RequestsGrant.At).
type RequestsBack struct {
	At int64
	N  int
}

// RequestsGrant is the answer of LeaseRequests.
type RequestsGrant struct {
	Granted   int
	Remaining int   // rps less the window after the grant
	ResetMS   int64 // while Remaining is 0: ms until the window admits one more
	At        int64 // where the grant is recorded (for its give-back)
}

// BillingSettle is what one holder reports about one workspace.
type BillingSettle struct {
	WS        string
	Month     string // the month reserved for: the current UTC month
	Allowance int64  // the workspace's monthly characters
	// Usage is the characters synthesized since the last settle, by UTC
	// day (a refund makes an amount negative). A positive amount is taken
	// from the month's allowance, then from credits, then (it was already
	// synthesized, within a reservation or in meter mode) counted as used
	// beyond the allowance; a negative one gives back used characters,
	// then credits. Each day's amount is added to the daily counter.
	Usage   []DayChars
	Reserve int64 // the reservation wanted for Month
	Enforce bool
}

// DayChars is an amount of characters of one UTC day ("2006-01-02").
type DayChars struct {
	Day   string
	Chars int64
}

// BillingLease is the state after a settle.
type BillingLease struct {
	Balance        // Month's balance after the usage
	Reserved int64 // holder's reservation for Month now
	Others   int64 // what other holders reserve for Month
}

// Unreserved is the balance less every reservation: what no server holds.
func (b BillingLease) Unreserved() int64 {
	return max(b.Remaining()-b.Reserved-b.Others, 0)
}

// ApplyUsage adds chars synthesized characters (negative: given back) to a
// month's used characters and the credits, by the rule of BillingSettle.
// fromA and fromC are what it took from (or gave back to, negative) each.
func ApplyUsage(allowance, used, credits, chars int64) (usedAfter, creditsAfter, fromA, fromC int64) {
	if chars < 0 {
		back := -chars
		backA := min(back, max(used, 0))
		backC := back - backA
		return used - backA, credits + backC, -backA, -backC
	}
	fromA = min(chars, max(allowance-used, 0))
	fromC = min(chars-fromA, max(credits, 0))
	fromA += chars - fromA - fromC // synthesized already: used beyond the allowance
	return used + fromA, credits - fromC, fromA, fromC
}

// ReservationGrant is what a store grants a holder who wants want
// characters when others are reserved by other holders: never more than
// the balance left (enforce only; metering reserves nothing).
func ReservationGrant(bal Balance, others, want int64, enforce bool) int64 {
	if !enforce || want <= 0 {
		return 0
	}
	return max(min(want, bal.Remaining()-others), 0)
}
