package bench

import (
	"context"
	"fmt"
	"runtime"
	"time"
)

// side is one of the clients a two-sided target (openai with --via, a
// dialect with --native) runs in turn: the name of its results, its
// scenario and the usage source of the server it measures.
type side struct {
	name string
	// mk gives the scenario of one level and round: a fresh one, or the
	// same one again (see reuse).
	mk    func() scenario
	usage usageSource
}

// reuse is a side's mk that gives sc every time.
func reuse(sc scenario) func() scenario { return func() scenario { return sc } }

// sidesRun is what differs between the targets that runSides serves.
type sidesRun struct {
	engine string // the Run's Engine
	format string // the Results' Format
	// tune, when set, adjusts a level's spec and its result before the
	// level runs (pacing, a socket's contexts); the result's Paced is the
	// spec's pace after it.
	tune func(level float64, spec *loadSpec, res *Result)
}

// levelsOf is the load levels of a closed-loop run: --sweep, else
// --concurrency.
func levelsOf(o Options) []float64 {
	if len(o.Sweep) == 0 {
		return []float64{float64(o.Concurrency)}
	}
	return o.Sweep
}

// runSides runs every side at every level, round by round, the sides in
// turn within a round, so that both see the same machine. A side's
// scenario opens before its level (sockets dialled outside every TTFB) and
// closes after it.
func runSides(ctx context.Context, o Options, rs sidesRun, sides []side) (*Run, error) {
	rounds := max(o.Rounds, 1)
	run := &Run{
		Tool: "voicesvc-bench", Version: 1, StartedAt: time.Now().UTC(), BaseURL: o.BaseURL,
		Engine: rs.engine, Voice: o.Voice,
		Host: HostInfo{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()},
	}
	for _, level := range levelsOf(o) {
		for r := 1; r <= rounds; r++ {
			for _, s := range sides {
				if ctx.Err() != nil {
					return run, ctx.Err()
				}
				spec := loadSpec{concurrency: max(1, int(level)), duration: o.Duration, requests: o.Requests,
					warmup: o.Warmup, timeout: o.Timeout, maxTime: o.MaxTime, pace: o.Pace}
				res := &Result{Scenario: s.name, Mode: "closed", Concurrency: spec.concurrency, Format: rs.format,
					TextChars: len([]rune(o.Text)), Warmup: o.Warmup.Seconds()}
				if rs.tune != nil {
					rs.tune(level, &spec, res)
				}
				res.Paced = spec.pace
				if rounds > 1 {
					res.Note = fmt.Sprintf("round %d of %d", r, rounds)
				}
				sc := s.mk()
				if err := sc.open(ctx, spec.concurrency); err != nil {
					return run, fmt.Errorf("%s: %w", s.name, err)
				}
				mon := startUsage(ctx, s.usage, time.Now().Add(spec.warmup))
				rec := drive(ctx, sc, spec, fmt.Sprintf("[%s c=%d round %d]", s.name, spec.concurrency, r), o.Progress)
				res.Server = mon.finish()
				sc.close()
				rec.fill(res)
				run.Results = append(run.Results, res)
			}
		}
	}
	return run, nil
}
