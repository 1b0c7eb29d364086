package upstream

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"voicesvc/engine"
)

func TestStreamsAsItArrives(t *testing.T) {
	f := newFixture(t)
	f.hold = make(chan struct{})
	f.piece = 1001 // the first piece holds one 20 ms chunk, and an odd byte
	e := newEngine(t, []string{f.srv.URL}, nil)
	const text = "Streaming starts before the answer ends."
	first := make(chan int32, 1)
	var got []float32
	var chunks []engine.Chunk
	err := e.Synthesize(context.Background(), engine.Request{Text: text, Profile: []byte("en-us-linda"), Params: engine.Params{Speed: 1.25}},
		func(c engine.Chunk) error {
			if len(chunks) == 0 {
				// The fixture holds the rest of its answer until we have
				// this chunk: it cannot have finished.
				first <- f.finished.Load()
				close(f.hold)
			}
			got = append(got, c.Samples...)
			chunks = append(chunks, engine.Chunk{Sentence: c.Sentence, Last: c.Last, Samples: make([]float32, len(c.Samples))})
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if n := <-first; n != 0 {
		t.Errorf("first chunk came after the fixture finished (%d finished)", n)
	}
	want := samplesOf(render(text, 1.25))
	if !slices.Equal(got, want) {
		t.Fatalf("samples differ from the fixture's pcm: got %d, want %d", len(got), len(want))
	}
	// 20 ms at the upstream's rate, no resampling: the last chunk has the rest.
	for i, c := range chunks {
		if last := i == len(chunks)-1; c.Last != last || !last && len(c.Samples) != 480 || c.Sentence != 0 {
			t.Fatalf("chunk %d: %d samples, last %v, sentence %d", i, len(c.Samples), c.Last, c.Sentence)
		}
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	wantBody := speechBody{Model: "service-v1", Input: text, Voice: "en-us-linda", ResponseFormat: "pcm", Stream: true, Speed: 1.25}
	if reqs[0] != wantBody || f.auth[0] != "Bearer vsk_test" {
		t.Errorf("request %+v auth %q; want %+v", reqs[0], f.auth[0], wantBody)
	}
}

func TestSentencesAndRate(t *testing.T) {
	f := newFixture(t)
	e := newEngine(t, []string{f.srv.URL}, func(c *Config) { c.SampleRate = 16000 })
	if e.NativeRate() != 16000 {
		t.Fatalf("NativeRate %d", e.NativeRate())
	}
	chunks, err := speak(context.Background(), e, "First one. Second one!", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want := append(samplesOf(render("First one.", 0)), samplesOf(render("Second one!", 0))...)
	if got := joined(chunks); !slices.Equal(got, want) {
		t.Fatalf("got %d samples, want %d: the engine must pass the upstream's samples through", len(got), len(want))
	}
	lasts := 0
	for i, c := range chunks {
		if c.Last {
			lasts++
		}
		// 20 ms at 16 kHz; a sentence's first chunk is what the first
		// read held, at most that.
		first := i == 0 || chunks[i-1].Last
		if !c.Last && (len(c.Samples) != 320 && !first || len(c.Samples) > 320 || len(c.Samples) == 0) {
			t.Fatalf("chunk %d of %d samples", i, len(c.Samples))
		}
	}
	reqs := f.requests()
	if lasts != 2 || len(reqs) != 2 || reqs[1].Input != "Second one!" || chunks[len(chunks)-1].Sentence != 1 {
		t.Fatalf("%d last chunks, %d requests", lasts, len(reqs))
	}
	if reqs[0].Speed != 0 {
		t.Errorf("speed %v sent without one asked", reqs[0].Speed)
	}
}

func TestOddPieces(t *testing.T) {
	const text = "Pieces of any size."
	want := samplesOf(render(text, 0))
	for _, piece := range []int{1, 3, 333, 961, 4097, 1 << 20} {
		f := newFixture(t)
		f.piece = piece
		e := newEngine(t, []string{f.srv.URL}, nil)
		chunks, err := speak(context.Background(), e, text, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if got := joined(chunks); !slices.Equal(got, want) {
			t.Errorf("pieces of %d bytes: got %d samples, want %d", piece, len(got), len(want))
		}
	}
}

func TestPCMChunkerOddBytes(t *testing.T) {
	pcm := render("Odd bytes.", 0)
	pcm = append(pcm, 0x7f) // half a sample at the end: dropped
	for _, cut := range [][]int{{1}, {7, 2, 1}, {479, 481}, {960, 1, 959}} {
		p := pcmChunker{size: 480}
		var got []float32
		emit := func(c engine.Chunk) error { got = append(got, c.Samples...); return nil }
		rest, k := pcm, 0
		for len(rest) > 0 {
			n := min(cut[k%len(cut)], len(rest))
			if err := p.write(rest[:n], emit); err != nil {
				t.Fatal(err)
			}
			rest, k = rest[n:], k+1
		}
		p.finish(emit)
		if want := samplesOf(pcm[:len(pcm)-1]); !slices.Equal(got, want) {
			t.Errorf("cuts %v: got %d samples, want %d", cut, len(got), len(want))
		}
	}
}

func TestCancelClosesUpstream(t *testing.T) {
	f := newFixture(t)
	f.hold = make(chan struct{}) // never released: only the disconnect ends it
	e := newEngine(t, []string{f.srv.URL}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := speak(ctx, e, "Cancel me while I speak.", time.Time{})
		done <- err
	}()
	recv(t, f.started, "the request")
	eventually(t, "audio", func() bool { return e.Replicas()[0].Outstanding == 1 })
	cancel()
	recv(t, f.gone, "the fixture to see the request end")
	if err := recv(t, done, "Synthesize to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	st := e.Replicas()[0]
	if st.Outstanding != 0 || st.Cancelled != 1 || st.State != "up" {
		t.Errorf("after cancel: %+v", st)
	}
}

func TestEmitErrorStops(t *testing.T) {
	f := newFixture(t)
	e := newEngine(t, []string{f.srv.URL}, nil)
	stop := errors.New("client gone")
	err := e.Synthesize(context.Background(), engine.Request{Text: "Stop after one chunk.", Profile: []byte("v")},
		func(engine.Chunk) error { return stop })
	if !errors.Is(err, stop) {
		t.Fatalf("err %v, want the emit error", err)
	}
	if st := e.Replicas()[0]; st.Outstanding != 0 || st.State != "up" || st.Requests != 1 {
		t.Errorf("after an emit error: %+v", st)
	}
}

func TestInputChecks(t *testing.T) {
	e := newEngine(t, []string{"http://127.0.0.1:9"}, nil)
	for _, req := range []engine.Request{{Text: "Hi.", Profile: nil}, {Text: "  ", Profile: []byte("v")}} {
		if err := e.Synthesize(context.Background(), req, func(engine.Chunk) error { return nil }); !errors.Is(err, engine.ErrInvalidInput) {
			t.Errorf("%+v: err %v, want ErrInvalidInput", req, err)
		}
	}
	if _, err := e.Enroll(context.Background(), engine.Clip{}); err == nil {
		t.Error("Enroll succeeded")
	}
	if got := e.Languages(); !slices.Equal(got, []string{"en"}) {
		t.Errorf("Languages %v", got)
	}
	cat := e.Catalog()
	if len(cat) != 1 || cat[0].Alias != "up1-linda" || string(cat[0].Profile) != "en-us-linda" || cat[0].Name != "up1-linda" {
		t.Errorf("Catalog %+v", cat)
	}
}

// TestStaleConnection: a kept-alive connection the upstream closes as the
// next request arrives (its idle timeout racing ours) is not a failure:
// the request is sent again at once on a new connection.
func TestStaleConnection(t *testing.T) {
	f := newFixture(t)
	f.before = func(w http.ResponseWriter, r *http.Request, _ speechBody) bool {
		if onConn(r) < 2 {
			return false
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // the second request on a connection: closed unanswered
		}
		return true
	}
	e := newEngine(t, []string{f.srv.URL}, func(c *Config) { c.EjectAfter = 1 })
	chunks, err := speak(context.Background(), e, "One. Two. Three.", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(joined(chunks)), (len(render("One.", 0))+len(render("Two.", 0))+len(render("Three.", 0)))/2; got != want {
		t.Errorf("%d samples, want %d", got, want)
	}
	st := e.Replicas()[0]
	// Sequentially, the 2nd and 3rd sentences would each meet one closed
	// connection; with the next sentence rendered ahead, which connections
	// are idle when depends on timing.
	if st.StaleRetries < 1 || st.State != "up" || st.ErrorsUpstream != 0 || st.Completed != 3 {
		t.Errorf("after stale connections: %+v", st)
	}
}

// TestSlowConsumer: the timeout counts only the wait for the upstream, not
// the time emit takes (a WebSocket session pauses synthesis while its
// client catches up).
func TestSlowConsumer(t *testing.T) {
	f := newFixture(t)
	f.piece = 4096
	e := newEngine(t, []string{f.srv.URL}, func(c *Config) { c.Timeout = 50 * time.Millisecond })
	n := 0
	err := e.Synthesize(context.Background(), engine.Request{Text: "A listener that reads slowly.", Profile: []byte("v")},
		func(c engine.Chunk) error {
			if n++; n == 2 {
				time.Sleep(200 * time.Millisecond) // longer than the timeout
			}
			return nil
		})
	if err != nil {
		t.Fatalf("a slow consumer timed the upstream out: %v", err)
	}
}
