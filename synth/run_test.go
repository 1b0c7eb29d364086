package synth

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"testing"

	"go.uber.org/goleak"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/engine/reference"
	"voicesvc/engine/upstream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newPipeline(t testing.TB, f codec.Format, rate int) *codec.Pipeline {
	t.Helper()
	p, err := codec.NewPipeline(reference.Rate, f, rate)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// refSamples is the reference engine's length of text in native samples.
func refSamples(nonSpaceChars int) int {
	return int(math.Round(float64(nonSpaceChars) * reference.PerCharacter.Seconds() * reference.Rate))
}

// TestRunReference drives the real reference engine through the real codec
// in every format at three rates: whole samples, the right count, in order.
func TestRunReference(t *testing.T) {
	const text = "Hello there. How are you?" // 21 non-space characters
	native := refSamples(21)
	eng := reference.New()
	for _, f := range []codec.Format{codec.WAV, codec.S16LE, codec.S24LE, codec.S32LE, codec.F32LE, codec.F64LE} {
		for _, rate := range []int{8000, 24000, 48000} {
			t.Run(string(f)+"/"+itoa(rate), func(t *testing.T) {
				p := newPipeline(t, f, rate)
				var out []byte
				writes := 0
				res, err := Run(context.Background(), eng, engine.Request{Text: text, Language: "en"}, p,
					func(b []byte) error { out = append(out, b...); writes++; return nil })
				if err != nil {
					t.Fatal(err)
				}
				width := f.BytesPerSample()
				pcm := out
				if f == codec.WAV {
					width, pcm = 2, out[wavHeaderLen:]
					if string(out[:4]) != "RIFF" || string(out[8:12]) != "WAVE" {
						t.Fatalf("no WAV header: %q", out[:12])
					}
				}
				if len(pcm)%width != 0 || int64(len(out)) != res.Bytes {
					t.Fatalf("%d bytes of %d-byte samples, Bytes %d", len(pcm), width, res.Bytes)
				}
				want := float64(native) * float64(rate) / reference.Rate
				if got := float64(res.Samples); got != float64(len(pcm)/width) || math.Abs(got-want) > want*0.01 {
					t.Fatalf("samples %v (bytes say %d), want about %v", got, len(pcm)/width, want)
				}
				if math.Abs(res.Duration-float64(native)/reference.Rate) > 0.01*res.Duration {
					t.Fatalf("duration %v", res.Duration)
				}
				if writes < 2 || res.Chunks < 2 || res.TTFB <= 0 || res.EngineTTFB <= 0 {
					t.Fatalf("not streamed: %d writes, %+v", writes, res)
				}
			})
		}
	}
}

// TestRunOrder: at the native rate the f32le output must be exactly the
// reference tone, sample after sample, so any reordering or loss shows.
func TestRunOrder(t *testing.T) {
	p := newPipeline(t, codec.F32LE, reference.Rate)
	var out []byte
	_, err := Run(context.Background(), reference.New(), engine.Request{Text: "A single sentence of text", Language: "en"}, p,
		func(b []byte) error { out = append(out, b...); return nil })
	if err != nil {
		t.Fatal(err)
	}
	got, err := codec.DecodePCM(codec.F32LE, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != refSamples(21) {
		t.Fatalf("%d samples, want %d", len(got), refSamples(21))
	}
	for i, s := range got {
		want := reference.Amplitude * math.Sin(2*math.Pi*reference.DefaultFreq*float64(i)/reference.Rate)
		if math.Abs(float64(s)-want) > 1e-6 {
			t.Fatalf("sample %d = %v, want %v", i, s, want)
		}
	}
}

// failingEngine emits n chunks of the reference engine, then fails.
type failingEngine struct {
	engine.Engine
	n   int
	err error
}

func (f failingEngine) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	i := 0
	err := f.Engine.Synthesize(ctx, req, func(c engine.Chunk) error {
		if i == f.n {
			return f.err
		}
		i++
		return emit(c)
	})
	if err == nil {
		return errors.New("test: engine produced less than asked")
	}
	return err
}

func TestRunEngineErrors(t *testing.T) {
	tests := []struct {
		name    string
		n       int // chunks before the failure
		err     error
		code    string
		retry   int
		samples bool
	}{
		{"busy", 0, engine.ErrBusy, control.EUpstreamBusy, 1, false},
		{"invalid input", 0, engine.ErrInvalidInput, control.EInvalidInput, 0, false},
		{"unavailable", 0, engine.ErrUnavailable, control.EUpstreamError, 0, false},
		{"mid-stream", 3, errors.New("worker died"), control.EUpstreamError, 0, true},
		{"wrapped busy mid-stream", 2, errWrap{engine.ErrBusy}, control.EUpstreamBusy, 1, true},
		{"upstream busy keeps its Retry-After", 0, &upstream.BusyError{RetryAfter: 7, Reason: "429"}, control.EUpstreamBusy, 7, false},
		{"unknown engine", 0, fmt.Errorf("%w: no engine \"gone\"", engine.ErrUnknownEngine), control.EUnavailable, 0, false},
		{"control error passes", 1, control.Errorf(control.EInsufficientCredits, "out"), control.EInsufficientCredits, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPipeline(t, codec.S16LE, 16000)
			eng := failingEngine{Engine: reference.New(), n: tc.n, err: tc.err}
			res, err := Run(context.Background(), eng, engine.Request{Text: "One. Two. Three. Four.", Language: "en"}, p,
				func([]byte) error { return nil })
			var ce *control.Error
			if !errors.As(err, &ce) || ce.Code != tc.code || ce.RetryAfter != tc.retry {
				t.Fatalf("got %v (%+v), want %s", err, ce, tc.code)
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("%v does not keep its cause %v", err, tc.err)
			}
			if (res.Samples > 0) != tc.samples {
				t.Fatalf("samples %d", res.Samples)
			}
		})
	}
}

type errWrap struct{ err error }

func (e errWrap) Error() string { return "pool: " + e.err.Error() }
func (e errWrap) Unwrap() error { return e.err }

// poolEngine imitates a pool: a worker goroutine renders ahead of the
// consumer and stops only when the request's context ends, so a consumer
// that leaves without cancelling would leak it.
type poolEngine struct {
	engine.Engine
	stopped chan struct{}
}

func (e *poolEngine) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	chunks := make(chan engine.Chunk, 4)
	go func() {
		defer close(e.stopped)
		c := engine.Chunk{Samples: make([]float32, 480)}
		for {
			select {
			case chunks <- c:
			case <-ctx.Done():
				return
			}
		}
	}()
	for c := range chunks {
		if err := emit(c); err != nil {
			return err // the worker is not stopped here: Run must cancel
		}
	}
	return nil
}

func TestRunSinkErrorStopsEngine(t *testing.T) {
	defer goleak.VerifyNone(t)
	gone := errors.New("client gone")
	eng := &poolEngine{Engine: reference.New(), stopped: make(chan struct{})}
	p := newPipeline(t, codec.F32LE, 24000)
	writes := 0
	res, err := Run(context.Background(), eng, engine.Request{Text: "endless"}, p, func([]byte) error {
		if writes++; writes == 3 {
			return gone
		}
		return nil
	})
	// The third write failed: it delivered nothing and is not counted.
	if err != gone || writes != 3 || res.Samples != 2*480 {
		t.Fatalf("err %v after %d writes, %d samples", err, writes, res.Samples)
	}
	<-eng.stopped // cancelled by Run: this would hang otherwise
}

func TestRunContextCancelled(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(context.Background())
	p := newPipeline(t, codec.S16LE, 24000)
	eng := reference.New(reference.Options{RTF: 1}) // paced: cancel lands mid-stream
	_, err := Run(ctx, eng, engine.Request{Text: "A rather long sentence to speak slowly."}, p, func([]byte) error {
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
