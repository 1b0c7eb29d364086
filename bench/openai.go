package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"
)

// The openai target benchmarks any OpenAI-compatible speech server
// (Kokoro-FastAPI, LocalAI, Speaches, voicesvc's compat endpoint): POST
// {base}/audio/speech asking for streamed pcm, as the upstream engines send
// it. With --via, a second base URL (a voicesvc in front of the first, say)
// is measured by the same client in the same run, level by level and round
// by round in turn, so both see the same machine; the report adds what the
// second adds to the first's time to first audio byte.

// Scenario names of the openai target's results.
const (
	scenarioOpenAI    = "openai"     // --base
	scenarioOpenAIVia = "openai-via" // --via
)

// openaiScenario streams one speech request per operation.
type openaiScenario struct {
	t          *target
	url, key   string
	model      string
	rate       int
	speechBody []byte
}

func newOpenAIScenario(t *target, base, key, model, voice string) *openaiScenario {
	b, _ := json.Marshal(map[string]any{"model": model, "input": t.text, "voice": voice,
		"response_format": "pcm", "stream": true})
	return &openaiScenario{t: t, url: strings.TrimRight(base, "/") + "/audio/speech", key: key, rate: t.sampleRate, speechBody: b}
}

func (sc *openaiScenario) open(context.Context, int) error { return nil }
func (sc *openaiScenario) close()                          {}
func (sc *openaiScenario) do(ctx context.Context, _ int) sample {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sc.url, bytes.NewReader(sc.speechBody))
	if err != nil {
		return sample{start: time.Now(), err: "client:request"}
	}
	req.Header.Set("Content-Type", "application/json")
	if sc.key != "" {
		req.Header.Set("Authorization", "Bearer "+sc.key)
	}
	return sc.t.bodyOp(req, audioKind{format: "pcm", fixedRate: sc.rate})
}

// executeOpenAI is Execute for --target openai.
func executeOpenAI(ctx context.Context, o Options) (*Run, error) {
	if o.Voice == "" {
		return nil, fmt.Errorf("--target openai needs --voice (the server's voice name)")
	}
	maxConns := o.Concurrency
	for _, l := range levelsOf(o) {
		maxConns = max(maxConns, int(l))
	}
	client := newHTTPClient(2 * maxConns)
	defer client.CloseIdleConnections()
	mk := func(name, base, key, voice string, pid int) side {
		t := &target{base: base, key: key, client: client, text: o.Text, sampleRate: o.SampleRate}
		return side{name: name, mk: reuse(newOpenAIScenario(t, base, key, o.Model, voice)), usage: pickProcSource(base, pid)}
	}
	sides := []side{mk(scenarioOpenAI, o.BaseURL, o.APIKey, o.Voice, o.ServerPID)}
	if o.Via != "" {
		voice := o.ViaVoice
		if voice == "" {
			voice = o.Voice
		}
		sides = append(sides, mk(scenarioOpenAIVia, o.Via, o.ViaKey, voice, o.ViaPID))
	}
	// An openai scenario's open and close do nothing: each operation is
	// its own request.
	return runSides(ctx, o, sidesRun{engine: "openai", format: "pcm"}, sides)
}

// pickProcSource measures a local server by pid (given, else found by the
// URL's loopback port); nil when neither works.
func pickProcSource(base string, pid int) usageSource {
	if pid == 0 {
		pid = localPIDForURL(base)
	}
	if pid > 0 {
		if _, _, err := (procSource{pid}).read(context.Background()); err == nil {
			return procSource{pid}
		}
	}
	return nil
}

// GatewayAdded is what --via adds over --base at one load level: the
// medians over the rounds of each side's TTFB percentiles, their
// differences, and the via server's CPU per second of audio.
type GatewayAdded struct {
	Concurrency               int
	DirectP50, ViaP50         float64 // ms
	DirectP99, ViaP99         float64 // ms
	AddedP50, AddedP99        float64 // ms
	ViaCPUPerAudioSecond      float64 // CPU seconds of the via server per audio second
	DirectErrors, ViaErrors   int
	DirectAudioPS, ViaAudioPS float64 // audio seconds per second
	Rounds                    int
}

// GatewayAddedOf pairs the openai and openai-via results of a run.
func GatewayAddedOf(run *Run) []GatewayAdded { return addedOf(run, scenarioOpenAI, scenarioOpenAIVia) }

// dialectPairs names, per dialect target (a Run's Engine), its native
// WebSocket's results (direct), its dialect socket's (via) and the title of
// the table of what the dialect adds.
var dialectPairs = map[string]struct{ direct, via, title string }{
	"cartesia": {scenarioCartesiaNative, scenarioCartesia,
		"the native WebSocket (direct, --native) and the Cartesia socket (via, --base)"},
	"elevenlabs": {scenarioElevenLabsNative, scenarioElevenLabs,
		"the native WebSocket (direct, --native) and ElevenLabs' stream-input (via, --base)"},
	"deepgram": {scenarioDeepgramNative, scenarioDeepgram,
		"the native WebSocket and the Deepgram socket (direct, --native; via, --base)"},
}

// DialectAddedOf pairs a dialect run's native WebSocket (direct) and
// dialect socket (via) results: what the dialect adds (Cartesia's socket,
// ElevenLabs' stream-input or Deepgram's speak socket); nil for a run of
// another target.
func DialectAddedOf(run *Run) []GatewayAdded {
	p, ok := dialectPairs[run.Engine]
	if !ok {
		return nil
	}
	return addedOf(run, p.direct, p.via)
}

// addedOf pairs the results of scenarios direct and via, level by level.
func addedOf(run *Run, direct, via string) []GatewayAdded {
	byLevel := map[int]*struct{ d, v []*Result }{}
	var levels []int
	for _, r := range run.Results {
		if r.Scenario != direct && r.Scenario != via {
			continue
		}
		g := byLevel[r.Concurrency]
		if g == nil {
			g = &struct{ d, v []*Result }{}
			byLevel[r.Concurrency] = g
			levels = append(levels, r.Concurrency)
		}
		if r.Scenario == direct {
			g.d = append(g.d, r)
		} else {
			g.v = append(g.v, r)
		}
	}
	sort.Ints(levels)
	var out []GatewayAdded
	for _, l := range levels {
		g := byLevel[l]
		if len(g.d) == 0 || len(g.v) == 0 {
			continue
		}
		a := GatewayAdded{Concurrency: l, Rounds: len(g.v),
			DirectP50:     medianOf(g.d, func(r *Result) float64 { return r.TTFB.P50 }),
			ViaP50:        medianOf(g.v, func(r *Result) float64 { return r.TTFB.P50 }),
			DirectP99:     medianOf(g.d, func(r *Result) float64 { return r.TTFB.P99 }),
			ViaP99:        medianOf(g.v, func(r *Result) float64 { return r.TTFB.P99 }),
			DirectAudioPS: medianOf(g.d, func(r *Result) float64 { return r.AudioPerSec }),
			ViaAudioPS:    medianOf(g.v, func(r *Result) float64 { return r.AudioPerSec }),
		}
		a.AddedP50, a.AddedP99 = a.ViaP50-a.DirectP50, a.ViaP99-a.DirectP99
		var cpu, audio float64
		for _, r := range g.v {
			cpu += r.Server.CPUSeconds
			audio += r.AudioSeconds
			a.ViaErrors += r.ErrorCount
		}
		for _, r := range g.d {
			a.DirectErrors += r.ErrorCount
		}
		if audio > 0 {
			a.ViaCPUPerAudioSecond = cpu / audio
		}
		out = append(out, a)
	}
	return out
}

func medianOf(rs []*Result, f func(*Result) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	sort.Float64s(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// WriteGatewayAdded writes the table of GatewayAddedOf, or of
// DialectAddedOf; nothing without --via or --native results.
func WriteGatewayAdded(w io.Writer, run *Run) {
	rows := GatewayAddedOf(run)
	title := "Time to first audio byte, direct (--base) and through --via"
	if len(rows) == 0 {
		rows = DialectAddedOf(run)
		title = "Time to first audio byte, " + dialectPairs[run.Engine].title
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s: medians over %d round(s)\n\n", title, rows[0].Rounds)
	fmt.Fprintf(w, "| streams | direct p50 | via p50 | added p50 | direct p99 | via p99 | added p99 | via CPU s / audio s | errors direct/via |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|\n")
	for _, a := range rows {
		fmt.Fprintf(w, "| %d | %.3f ms | %.3f ms | %+.3f ms | %.3f ms | %.3f ms | %+.3f ms | %.4f | %d/%d |\n",
			a.Concurrency, a.DirectP50, a.ViaP50, a.AddedP50, a.DirectP99, a.ViaP99, a.AddedP99,
			a.ViaCPUPerAudioSecond, a.DirectErrors, a.ViaErrors)
	}
}
