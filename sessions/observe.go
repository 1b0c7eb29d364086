package sessions

import "time"

// ContextObserver is told of each context's life, for the server's metrics
// and tracing (Deps.Observer). Its calls come from the session's goroutines
// and must not block.
type ContextObserver interface {
	// ContextStarted is called when task_start opens a context, at start,
	// rendered by the engine named engine. The returned ContextSpan follows
	// that context; nil follows nothing.
	ContextStarted(start time.Time, engine string) ContextSpan
}

// ContextSpan follows one context.
type ContextSpan interface {
	// TraceID is the context's trace_id (task_done, task_failed,
	// task_cancelled); "" lets the session make one.
	TraceID() string
	// FirstAudio: the context's first audio was queued for the client
	// ttfa after task_start; the engine took engine of it, from the first
	// sentence's start to its first chunk. Called at most once.
	FirstAudio(ttfa, engine time.Duration)
	// End: the context closed, d after task_start, with outcome "ok"
	// (task_done), "cancelled" (task_cancel), "session_ended" (the session
	// ended first), "client_gone" (the socket broke) or the code of its
	// task_failed. Called exactly once.
	End(outcome string, d time.Duration)
}

// Context outcomes other than error codes.
const (
	outcomeOK           = "ok"
	outcomeCancelled    = "cancelled"
	outcomeSessionEnded = "session_ended"
	outcomeClientGone   = "client_gone"
)

// observeStart opens t's span, when the server observes contexts. Called
// with s.mu held, once t is among the open contexts (so closeLocked ends
// it), before any runner can read t.span.
func (t *task) observeStart() {
	if o := t.s.deps.Observer; o != nil {
		t.span = o.ContextStarted(t.start, t.eng.Name())
	}
	if t.span != nil {
		if id := t.span.TraceID(); id != "" {
			t.trace = id
		}
	}
}

// observeEnd reports t's end once (closeLocked: a finished context may be
// closed again by a late task_cancel).
func (t *task) observeEnd() {
	if t.span == nil || t.ended {
		return
	}
	t.ended = true
	o := t.outcome
	if o == "" {
		o = outcomeClientGone
	}
	t.span.End(o, time.Since(t.start))
}
