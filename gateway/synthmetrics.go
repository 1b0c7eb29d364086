package gateway

import (
	"time"

	"go.opentelemetry.io/otel/attribute"

	"voicesvc/synth"
	"voicesvc/telemetry"
	"voicesvc/web"
)

// firstAudio records a streamed synthesis's first audio, handed to the
// connection now: voicesvc_time_to_first_audio_seconds and, when traced,
// the engine.queue and first_audio spans.
func (s *Server) firstAudio(job *web.Job, ts *telemetry.Series, synthStart time.Time) {
	now := time.Now()
	ts.FirstAudio(job.Engine.Name(), now.Sub(job.Start))
	if s.tracer != nil {
		rs := traceOf(job).rs
		rs.childSpan(s.tracer, "engine.queue", synthStart, now, nil)
		rs.childSpan(s.tracer, "first_audio", job.Start, now, nil)
	}
}

// streamEnded records the end of a streamed synthesis: its duration, and
// the end of the request's span.
func (s *Server) streamEnded(job *web.Job, ts *telemetry.Series, err error) {
	ts.Duration.Observe(time.Since(job.Start).Seconds())
	if rs := traceOf(job).rs; rs != nil {
		s.endStreamSpan(rs, err)
	}
}

// synthEnded records a buffered synthesis: the body is whole now, so its
// first audio and its end are both now.
func (s *Server) synthEnded(job *web.Job, ts *telemetry.Series, first *firstChunk, err error) {
	now := time.Now()
	ok := err == nil
	d := now.Sub(job.Start)
	ts.Duration.Observe(d.Seconds())
	if ok {
		ts.FirstAudio(job.Engine.Name(), d)
	}
	if s.tracer != nil {
		rs := traceOf(job).rs
		if first != nil && !first.at.IsZero() {
			rs.childSpan(s.tracer, "engine.queue", first.start, first.at, nil)
		}
		if ok {
			rs.childSpan(s.tracer, "first_audio", job.Start, now, nil)
		}
		if err != nil && rs != nil {
			rs.span.SetAttributes(attribute.String("voicesvc.outcome", outcomeOf(err)))
		}
	}
}

// firstChunk times a buffered synthesis's first audio, for its spans. Made
// only when traced: a sink that records it is a closure over it.
type firstChunk struct{ start, at time.Time }

func timeFirstChunk(sink synth.Sink) (*firstChunk, synth.Sink) {
	f := &firstChunk{start: time.Now()}
	return f, func(b []byte) error {
		if f.at.IsZero() {
			f.at = time.Now()
		}
		return sink(b)
	}
}
