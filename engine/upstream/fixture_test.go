package upstream

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"voicesvc/engine"
	"voicesvc/engine/reference"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is an OpenAI-compatible speech server over loopback: it renders
// the input with the reference engine and streams it as s16le pcm in small
// flushed pieces, the way Kokoro-FastAPI streams.
type fixture struct {
	srv   *httptest.Server
	piece int // bytes per flushed piece

	// before, when set, answers a request instead of the audio when it
	// returns true (a status, a hang, a cut).
	before func(w http.ResponseWriter, r *http.Request, body speechBody) bool
	// hold, when set, is waited for after the first piece (or until the
	// client goes away).
	hold chan struct{}

	mu       sync.Mutex
	bodies   []speechBody
	auth     []string
	voices   string // the answer to GET /audio/voices
	active   int
	peak     int
	started  chan string   // the input of each request, as it arrives
	gone     chan struct{} // a request's context ended before it finished
	finished atomic.Int32  // requests whose audio was all written
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{piece: 333, started: make(chan string, 64), gone: make(chan struct{}, 64)}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	// Each connection counts its requests (onConn).
	f.srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, new(atomic.Int32))
	}
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/audio/voices" {
		f.mu.Lock()
		v := f.voices
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(v))
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/audio/speech" {
		http.NotFound(w, r)
		return
	}
	var body speechBody
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.active++
	f.peak = max(f.peak, f.active)
	before, hold := f.before, f.hold
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.active--
		f.mu.Unlock()
	}()
	f.started <- body.Input
	if before != nil && before(w, r, body) {
		return
	}
	pcm := render(body.Input, body.Speed)
	w.Header().Set("Content-Type", "audio/pcm")
	fl := w.(http.Flusher)
	for off := 0; off < len(pcm); off += f.piece {
		if _, err := w.Write(pcm[off:min(off+f.piece, len(pcm))]); err != nil {
			f.gone <- struct{}{}
			return
		}
		fl.Flush()
		if off == 0 && hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				f.gone <- struct{}{}
				return
			}
		}
	}
	f.finished.Add(1)
}

type connKey struct{}

// onConn counts r on its connection and returns its number there (1 for a
// new connection's first request).
func onConn(r *http.Request) int32 { return r.Context().Value(connKey{}).(*atomic.Int32).Add(1) }

func (f *fixture) setHold(ch chan struct{}) {
	f.mu.Lock()
	f.hold = ch
	f.mu.Unlock()
}

func (f *fixture) setVoices(answer string) {
	f.mu.Lock()
	f.voices = answer
	f.mu.Unlock()
}

func (f *fixture) release() {
	f.mu.Lock()
	close(f.hold)
	f.mu.Unlock()
}

func (f *fixture) peakActive() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.peak
}

func (f *fixture) requests() []speechBody {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]speechBody(nil), f.bodies...)
}

// renders caches the reference engine's pcm per input and speed.
var renders sync.Map

// render is the s16le pcm the reference engine makes of text.
func render(text string, speed float64) []byte {
	key := text + "\x00" + string(rune(int(speed*100)))
	if b, ok := renders.Load(key); ok {
		return b.([]byte)
	}
	var pcm []byte
	err := reference.New().Synthesize(context.Background(), engine.Request{Text: text, Params: engine.Params{Speed: speed}},
		func(c engine.Chunk) error {
			for _, s := range c.Samples {
				pcm = binary.LittleEndian.AppendUint16(pcm, uint16(int16(math.Round(float64(s)*32767))))
			}
			return nil
		})
	if err != nil {
		panic(err)
	}
	renders.Store(key, pcm)
	return pcm
}

// samplesOf is what the engine should emit for pcm.
func samplesOf(pcm []byte) []float32 {
	out := make([]float32, len(pcm)/2)
	for i := range out {
		out[i] = float32(int16(binary.LittleEndian.Uint16(pcm[2*i:]))) / 32768
	}
	return out
}

// newEngine makes an engine of the given replicas with test-sized
// durations; mod adjusts the configuration.
func newEngine(t testing.TB, urls []string, mod func(*Config)) *Engine {
	t.Helper()
	cfg := Config{Name: "up1", Type: "openai", URLs: urls, APIKey: "vsk_test", Model: "service-v1",
		Timeout: 5 * time.Second, MaxWait: 5 * time.Second,
		Voices: []Voice{{Alias: "up1-linda", Voice: "en-us-linda", Language: "en"}}}
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// speak runs a synthesis of text with the upstream voice and collects its
// chunks (copies: the engine's buffers may be recycled).
func speak(ctx context.Context, e *Engine, text string, due time.Time) ([]engine.Chunk, error) {
	var out []engine.Chunk
	err := e.Synthesize(ctx, engine.Request{Text: text, Profile: []byte("en-us-linda"), Due: due},
		func(c engine.Chunk) error {
			c.Samples = append([]float32(nil), c.Samples...)
			out = append(out, c)
			return nil
		})
	return out, err
}

func joined(chunks []engine.Chunk) []float32 {
	var out []float32
	for _, c := range chunks {
		out = append(out, c.Samples...)
	}
	return out
}

// fakeClock replaces the scheduler's clock, for ejection without sleeping.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func useFakeClock(e *Engine) *fakeClock {
	c := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	e.sched.mu.Lock()
	e.sched.now = c.now
	e.sched.mu.Unlock()
	return c
}

// waiting reports how many requests wait for a slot.
func waiting(e *Engine) int {
	e.sched.mu.Lock()
	defer e.sched.mu.Unlock()
	return len(e.sched.waiting)
}

// eventually polls cond for up to 10 s (a generous bound, not a timing
// assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// recv takes one value from ch within 10 s.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}
