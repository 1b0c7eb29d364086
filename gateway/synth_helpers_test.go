package gateway

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/engine/reference"
	"voicesvc/synth"
)

// synthOpts configure a synthesis test server.
type synthOpts struct {
	eng     engine.Engine // default: the reference engine, unpaced
	billing string        // default: meter
	plan    string        // default: pro
	cfg     Config
	meter   control.Meter        // default: the store's
	tracer  trace.TracerProvider // default: none, tracing off
}

// synthServer is a testServer with an engine, a memory limiter it can
// inspect, a ready voice of its own, and a catalog.
type synthServer struct {
	*testServer
	lim   *control.MemoryLimiter
	voice string // a ready private voice of ts.ws
}

func newSynthServer(t testing.TB, o synthOpts) *synthServer {
	t.Helper()
	if o.eng == nil {
		o.eng = reference.New()
	}
	if o.billing == "" {
		o.billing = control.BillingMeter
	}
	if o.plan == "" {
		o.plan = "pro"
	}
	ts := &testServer{t: t, store: openStore(t, filepath.Join(t.TempDir(), "voicesvc.db"))}
	if err := synth.SeedCatalog(context.Background(), ts.store, o.eng); err != nil {
		t.Fatal(err)
	}
	lim := control.NewMemoryLimiter()
	ts.serve(o.cfg, Deps{Store: ts.store, Engine: o.eng, Limiter: lim, Billing: o.billing,
		Meter: o.meter, Logger: slog.New(slog.DiscardHandler), TracerProvider: o.tracer})
	ts.ws = ts.workspace(o.plan)
	ts.key = ts.newKey(ts.ws.ID, nil, 0, false)
	ss := &synthServer{testServer: ts, lim: lim}
	ss.voice = ss.readyVoice(ts.ws.ID, "en")
	return ss
}

// readyVoice stores a ready private voice of ws with a reference profile.
func (ss *synthServer) readyVoice(ws, lang string) string {
	ss.t.Helper()
	now := control.NowMS()
	v := &control.Voice{ID: control.NewID(), OrgID: ws, Name: "ready", Status: control.VoiceReady,
		CloneMethod: "instant", Visibility: "private", PrimaryLanguage: lang, Labels: []control.Label{},
		Profile: reference.MarshalProfile(200), ConsentAt: now, CreatedAt: now, UpdatedAt: now}
	if err := ss.store.CreateVoice(context.Background(), v); err != nil {
		ss.t.Fatal(err)
	}
	return v.ID
}

// post sends a JSON body and returns the raw response, unread.
func (ss *synthServer) post(path, key string, body any, headers ...string) *http.Response {
	ss.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", ss.base+APIRoot+path, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ss.t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}

// sseEvent is one decoded server-sent event.
type sseEvent struct {
	name string
	data map[string]any
}

// readSSE reads events until the body ends; err is the read error, if any.
func readSSE(r io.Reader) ([]sseEvent, error) {
	var out []sseEvent
	br := bufio.NewReaderSize(r, 1<<16)
	var ev sseEvent
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" {
				return out, nil
			}
			return out, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[len("data: "):]), &ev.data); err != nil {
				return out, err
			}
		case line == "":
			out = append(out, ev)
			ev = sseEvent{}
		}
	}
}

// checkSSE checks the events of a successful stream and returns the
// decoded samples.
func checkSSE(t testing.TB, evs []sseEvent, rate int, f codec.Format) []float32 {
	t.Helper()
	if len(evs) < 3 || evs[0].name != "start" || evs[len(evs)-1].name != "done" {
		t.Fatalf("want start, chunks, done; got %d events: first %v last %v", len(evs), evs[0], evs[len(evs)-1])
	}
	st := evs[0].data
	if st["type"] != "start" || st["sample_rate"] != float64(rate) || st["audio_format"] != string(f) {
		t.Fatalf("start %v, want rate %d format %s", st, rate, f)
	}
	var samples []float32
	for i, ev := range evs[1 : len(evs)-1] {
		if ev.name != "chunk" || ev.data["type"] != "chunk" || ev.data["index"] != float64(i) {
			t.Fatalf("event %d: %v", i+1, ev)
		}
		pcm, err := base64.StdEncoding.DecodeString(ev.data["audio_b64"].(string))
		if err != nil || len(pcm) == 0 || len(pcm)%f.BytesPerSample() != 0 {
			t.Fatalf("chunk %d: %d bytes (width %d), %v", i, len(pcm), f.BytesPerSample(), err)
		}
		s, err := codec.DecodePCM(f, pcm)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, s...)
	}
	done := evs[len(evs)-1].data
	d, _ := done["audio_duration_s"].(float64)
	want := float64(len(samples)) / float64(rate)
	if done["type"] != "done" || math.Abs(d-want) > 0.01*want {
		t.Fatalf("done %v, decoded %.4f s", done, want)
	}
	return samples
}

func rms(s []float32) float64 {
	var sum float64
	for _, x := range s {
		sum += float64(x) * float64(x)
	}
	return math.Sqrt(sum / float64(max(len(s), 1)))
}

// wavInfo checks a canonical 16-bit mono WAV and returns its rate and
// samples.
func wavInfo(t testing.TB, b []byte) (int, []float32) {
	t.Helper()
	le := binary.LittleEndian
	if len(b) < 44 || string(b[:4]) != "RIFF" || string(b[8:16]) != "WAVEfmt " || string(b[36:40]) != "data" {
		t.Fatalf("not a canonical WAV: % x", b[:min(len(b), 44)])
	}
	if int(le.Uint32(b[4:])) != len(b)-8 || int(le.Uint32(b[40:])) != len(b)-44 {
		t.Fatalf("WAV sizes: riff %d data %d for %d bytes", le.Uint32(b[4:]), le.Uint32(b[40:]), len(b))
	}
	rate := int(le.Uint32(b[24:]))
	if le.Uint16(b[20:]) != 1 || le.Uint16(b[22:]) != 1 || le.Uint16(b[34:]) != 16 ||
		int(le.Uint32(b[28:])) != rate*2 || le.Uint16(b[32:]) != 2 {
		t.Fatalf("WAV fmt: % x", b[20:36])
	}
	s, err := codec.DecodePCM(codec.S16LE, b[44:])
	if err != nil {
		t.Fatal(err)
	}
	return rate, s
}

// gatedEngine wraps an engine: it counts running syntheses, and can fail
// after a number of chunks or hold before the first.
type gatedEngine struct {
	engine.Engine
	running  atomic.Int32
	started  atomic.Int32
	failAt   int   // fail with failErr before chunk failAt (0: never; 1: before the first)
	failErr  error // default: an unmapped engine failure
	chunkGap time.Duration
}

var errEngineBroke = errors.New("test engine: broke")

func (g *gatedEngine) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	g.started.Add(1)
	g.running.Add(1)
	defer g.running.Add(-1)
	n := 0
	err := g.Engine.Synthesize(ctx, req, func(c engine.Chunk) error {
		n++
		if g.failAt > 0 && n >= g.failAt {
			if g.failErr != nil {
				return g.failErr
			}
			return errEngineBroke
		}
		if g.chunkGap > 0 && n > 1 {
			select {
			case <-time.After(g.chunkGap):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return emit(c)
	})
	return err
}

// newRef is the reference engine as the server runs it (engine.Recycled).
func newRef(rtf float64) engine.Engine {
	return engine.Recycled(reference.New(reference.Options{RTF: rtf}))
}
