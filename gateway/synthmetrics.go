package gateway

import (
	"time"

	"go.opentelemetry.io/otel/attribute"

	"voicesvc/synth"
	"voicesvc/telemetry"
)

// series are the metrics of one of the server's transports; the
// compatible endpoint is the OpenAI dialect's.
func (s *Server) series(transport string) *telemetry.Series {
	if transport == telemetry.Compat {
		return s.synth.m.Series(telemetry.OpenAI, transport)
	}
	return s.synth.m.Series(telemetry.Native, transport)
}

// firstAudio records a streamed synthesis's first audio, handed to the
// connection now: voicesvc_time_to_first_audio_seconds and, when traced,
// the engine.queue and first_audio spans.
func (s *Server) firstAudio(job *synthJob, transport string, synthStart time.Time) {
	now := time.Now()
	s.series(transport).FirstAudio(job.Engine.Name(), now.Sub(job.start))
	if s.tracer != nil {
		job.tr.rs.childSpan(s.tracer, "engine.queue", synthStart, now, nil)
		job.tr.rs.childSpan(s.tracer, "first_audio", job.start, now, nil)
	}
}

// streamEnded records the end of a streamed synthesis: its duration, and
// the end of the request's span.
func (s *Server) streamEnded(job *synthJob, transport string, err error) {
	s.series(transport).Duration.Observe(time.Since(job.start).Seconds())
	if job.tr.rs != nil {
		s.endStreamSpan(job.tr.rs, err)
	}
}

// synthEnded records a buffered synthesis: the body is whole now, so its
// first audio and its end are both now.
func (s *Server) synthEnded(job *synthJob, transport string, first *firstChunk, err error) {
	now := time.Now()
	ok := err == nil
	ts := s.series(transport)
	d := now.Sub(job.start)
	ts.Duration.Observe(d.Seconds())
	if ok {
		ts.FirstAudio(job.Engine.Name(), d)
	}
	if s.tracer != nil {
		if first != nil && !first.at.IsZero() {
			job.tr.rs.childSpan(s.tracer, "engine.queue", first.start, first.at, nil)
		}
		if ok {
			job.tr.rs.childSpan(s.tracer, "first_audio", job.start, now, nil)
		}
		if err != nil && job.tr.rs != nil {
			job.tr.rs.span.SetAttributes(attribute.String("voicesvc.outcome", outcomeOf(err)))
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
