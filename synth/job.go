package synth

import (
	"context"
	"sync/atomic"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/engine"
)

// Job is one validated synthesis: its voice, engine, engine request and the
// codec pipeline that encodes it, and, once admitted, its admission.
// Nothing in it points into a protocol's request.
type Job struct {
	Voice     *control.Voice
	Engine    engine.Engine
	Request   engine.Request
	Pipe      *codec.Pipeline
	Options   Options
	Admission *Admission

	finished atomic.Bool
}

// Prepare finds the voice p may use (Voice), the engine that renders it,
// the engine request (language, settings) and the pipeline of the asked
// format. Nothing is held: a refused Prepare needs no Finish.
func (s *Service) Prepare(ctx context.Context, p *control.Principal, voiceRef string, o Options) (*Job, error) {
	j := new(Job)
	if err := s.PrepareInto(ctx, p, voiceRef, o, j); err != nil {
		return nil, err
	}
	return j, nil
}

// PrepareInto is Prepare into a Job the caller holds (a protocol's own
// job type embeds one: one allocation a request, not two).
func (s *Service) PrepareInto(ctx context.Context, p *control.Principal, voiceRef string, o Options, j *Job) error {
	v, err := s.Voice(ctx, p, voiceRef)
	if err != nil {
		return err
	}
	eng, err := EngineFor(s.engines, v)
	if err != nil {
		return err
	}
	req, err := Prepare(v, o, eng.Languages())
	if err != nil {
		return err
	}
	pipe, err := codec.NewPipeline(eng.NativeRate(), o.Format, o.SampleRate)
	if err != nil {
		return err
	}
	j.Voice, j.Engine, j.Request, j.Pipe, j.Options = v, eng, req, pipe, o
	return nil
}

// Admit admits a prepared job (Service.Admit, charging its text). On a
// refusal the job is finished: its pipeline is freed.
func (j *Job) Admit(ctx context.Context, s *Service, p *control.Principal, streaming bool) error {
	a, err := s.Admit(ctx, p, Ask{Chars: j.Options.Chars(), Streaming: streaming})
	if err != nil {
		j.Finish(0)
		return err
	}
	j.Admission = a
	return nil
}

// Begin is Prepare then Admit: a job ready to Run, or a refusal that holds
// nothing and bills nothing.
func (s *Service) Begin(ctx context.Context, p *control.Principal, voiceRef string, o Options, streaming bool) (*Job, error) {
	j, err := s.Prepare(ctx, p, voiceRef, o)
	if err != nil {
		return nil, err
	}
	if err := j.Admit(ctx, s, p, streaming); err != nil {
		return nil, err
	}
	return j, nil
}

// Run synthesizes the job into sink (see the package function Run).
func (j *Job) Run(ctx context.Context, sink Sink) (Result, error) {
	return Run(ctx, j.Engine, j.Request, j.Pipe, sink)
}

// Finish ends the job, whatever happened: the pipeline is freed, and the
// admission is done with the samples produced (none: the charge is
// refunded). Only the first call counts.
func (j *Job) Finish(samples int64) {
	if j == nil || !j.finished.CompareAndSwap(false, true) {
		return
	}
	j.Pipe.Close()
	j.Admission.Done(samples)
}
