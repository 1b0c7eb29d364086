package sessions

import (
	"context"
	"time"
	"unicode/utf8"

	"voicesvc/control"
	"voicesvc/engine"
)

// Billing of a realtime context. Characters are charged as their frame
// arrives (the frame that does not fit is refused whole, fatal
// insufficient_credits), but a context can end before its text reaches the
// engine: cancelled, failed, the session closed by the client, a fatal
// error, a revoked key or a server shutdown. Every character of text that
// never reached the engine is then given back, so that under any ending
// what stays billed is the characters of the sentences whose synthesis
// started. (Before, a session that ran out of credits mid-stream kept the
// charge for all the text it had buffered and spoke none of it.)
//
// The accounting is by characters of the client's text: a sentence queued
// for the engine carries the characters from the end of the previous one
// up to its own end (the whitespace and unspeakable runs before it) as its
// cost, so that the costs of all sentences plus the text still pending add
// up to exactly what was charged. A sentence's cost is spent when the
// runner takes it for the engine; what is waiting, or was dropped as
// having nothing to speak, is given back when the context closes.

// sentence is one queued sentence and the characters it accounts for.
type sentence struct {
	text string
	cost int
	at   int // code points of the context's text before it (word offsets)
}

// queueCut queues the spans cut from buf (whose first rest bytes they
// cover): each span costs the characters since the previous span's end,
// the last one also those up to rest. Characters not covered by any span
// (text with nothing to speak) are counted as dropped.
func (t *task) queueCut(buf string, spans []engine.Span, rest int) {
	from, chars := 0, t.textAt // chars: code points of the context's text before buf[from:]
	for i, sp := range spans {
		end := sp.End
		if i == len(spans)-1 {
			end = rest
		}
		at := chars + utf8.RuneCountInString(buf[from:sp.Start])
		cost := utf8.RuneCountInString(buf[from:end])
		t.queued = append(t.queued, sentence{text: sp.Text, cost: cost, at: at})
		t.queuedChars += cost
		chars += cost
		from = end
	}
	if from < rest {
		t.dropped += utf8.RuneCountInString(buf[from:rest])
	}
	// The caller keeps buf[rest:] as the pending text.
	t.textAt = chars + utf8.RuneCountInString(buf[from:rest])
}

// ledger is what a context's frames took from the balance, per month and
// day (almost always one of each), so that part of it can be given back
// exactly: to the month's balance and to the day's usage it was counted in.
type ledger []control.Charge

func (l *ledger) add(c control.Charge) {
	if c.WorkspaceID == "" || c.FromAllowance == 0 && c.FromCredits == 0 {
		return
	}
	if n := len(*l); n > 0 && (*l)[n-1].Month == c.Month && (*l)[n-1].Day == c.Day && (*l)[n-1].WorkspaceID == c.WorkspaceID {
		(*l)[n-1].FromAllowance += c.FromAllowance
		(*l)[n-1].FromCredits += c.FromCredits
		return
	}
	*l = append(*l, c)
}

// take removes n characters from the ledger and returns them as charges to
// refund: the last taken first, that is the newest day first and, within
// a day, credits before the allowance (a charge takes the allowance
// first). Each carries its day, so the daily usage gives it back too.
func (l *ledger) take(n int64, out []control.Charge) []control.Charge {
	for i := len(*l) - 1; i >= 0 && n > 0; i-- {
		c := &(*l)[i]
		r := control.Charge{WorkspaceID: c.WorkspaceID, Month: c.Month, Day: c.Day}
		r.FromCredits = min(n, c.FromCredits)
		n -= r.FromCredits
		r.FromAllowance = min(n, c.FromAllowance)
		n -= r.FromAllowance
		c.FromCredits -= r.FromCredits
		c.FromAllowance -= r.FromAllowance
		if r.FromCredits+r.FromAllowance > 0 {
			out = append(out, r)
		}
	}
	return out
}

// unspentLocked gives back what t was charged for text that will now never
// reach the engine; it is called as t closes. The refunds are made by
// flushRefunds, outside the lock.
func (t *task) unspentLocked() {
	n := int64(t.waitingChars() + t.dropped)
	t.dropped = 0
	if n > 0 {
		t.s.refunds = t.bill.take(n, t.s.refunds)
	}
}

// refundTimeout bounds one refund; it runs on a context that shutdown does
// not cancel, since a refund is owed however the session ends.
const refundTimeout = 5 * time.Second

// flushRefunds makes the refunds queued under the lock.
func (s *session) flushRefunds() {
	s.mu.Lock()
	rs := s.refunds
	s.refunds = nil
	s.mu.Unlock()
	if len(rs) == 0 || s.deps.Billing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.parent), refundTimeout)
	defer cancel()
	for _, c := range rs {
		if err := s.deps.Billing.Refund(ctx, c); err != nil {
			s.log.Error("websocket refund failed", "workspace", c.WorkspaceID,
				"characters", c.FromAllowance+c.FromCredits, "err", err)
		}
	}
}
