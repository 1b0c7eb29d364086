package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fasthttp/websocket"
)

// The deepgram target benchmarks Deepgram's speak socket at --base (the
// vendor's https://api.deepgram.com, or voicesvc's
// {api_root}/compat/deepgram): one socket per stream, dialed before the
// level, each operation a Speak of the text and a Flush, timed from the
// Speak to the first binary frame (TTFB) and to the Flushed. --voice is the
// model, --key the key (sent as `Authorization: Token`). With --native, a
// voicesvc server's base URL (scheme://host:port), the same client also
// runs voicesvc's native WebSocket there (one context a session, the whole
// text in task_start) level by level and round by round in turn, and the
// report gives what the Deepgram socket adds to the native one's TTFB.

// Scenario names of the deepgram target's results.
const (
	scenarioDeepgram       = "deepgram"        // --base
	scenarioDeepgramNative = "deepgram-native" // --native's ws
)

// deepgramScenario runs one Speak + Flush per operation on the slot's
// socket.
type deepgramScenario struct {
	url    string
	header http.Header
	text   []byte // the Speak message
	rate   int
	dialer *websocket.Dialer
	socks  []*websocket.Conn
}

func newDeepgramScenario(base, key, model, text string, rate int) *deepgramScenario {
	q := url.Values{"model": {model}, "encoding": {"linear16"}, "sample_rate": {strconv.Itoa(rate)}}
	speak, _ := json.Marshal(map[string]string{"type": "Speak", "text": text})
	return &deepgramScenario{
		url:    "ws" + strings.TrimPrefix(strings.TrimRight(base, "/"), "http") + "/v1/speak?" + q.Encode(),
		header: http.Header{"Authorization": {"Token " + key}},
		text:   speak, rate: rate,
		dialer: &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 64 << 10, WriteBufferSize: 16 << 10,
			NetDialContext: unpacedDial},
	}
}

// open dials every slot's socket up front, so that no handshake is inside
// a TTFB; one that fails is dialed again by do.
func (sc *deepgramScenario) open(ctx context.Context, slots int) error {
	sc.socks = make([]*websocket.Conn, slots)
	for i := range sc.socks {
		sc.socks[i], _ = sc.dial(ctx)
	}
	return nil
}

// dial opens a socket and reads its Metadata.
func (sc *deepgramScenario) dial(ctx context.Context) (*websocket.Conn, string) {
	c, r, err := sc.dialer.DialContext(ctx, sc.url, sc.header)
	if err != nil {
		if r != nil {
			return nil, "http:" + strconv.Itoa(r.StatusCode)
		}
		return nil, netError(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := c.ReadMessage(); err != nil {
		c.Close()
		return nil, "deepgram:no_metadata"
	}
	return c, ""
}

func (sc *deepgramScenario) close() {
	for _, c := range sc.socks {
		if c != nil {
			_ = c.WriteMessage(websocket.TextMessage, []byte(`{"type":"Close"}`))
			c.Close()
		}
	}
}

func (sc *deepgramScenario) do(ctx context.Context, slot int) sample {
	start := time.Now()
	c := sc.socks[slot]
	if c == nil {
		var e string
		if c, e = sc.dial(ctx); c == nil {
			return sample{start: start, total: time.Since(start), err: e}
		}
		sc.socks[slot] = c
	}
	fail := func(s sample, e string) sample {
		c.Close()
		sc.socks[slot] = nil
		s.err, s.total = e, time.Since(s.start)
		return s
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	c.SetReadDeadline(deadline)
	s := sample{start: time.Now()}
	if err := c.WriteMessage(websocket.TextMessage, sc.text); err != nil {
		return fail(s, netError(err))
	}
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"Flush"}`)); err != nil {
		return fail(s, netError(err))
	}
	var bytes int64
	var last time.Time
	for {
		kind, b, err := c.ReadMessage()
		now := time.Now()
		if err != nil {
			return fail(s, netError(err))
		}
		if kind == websocket.BinaryMessage {
			if s.ttfb == 0 {
				s.ttfb = now.Sub(s.start)
			} else {
				s.gaps = append(s.gaps, Ms(now.Sub(last)))
			}
			last = now
			bytes += int64(len(b))
			continue
		}
		var m struct{ Type, Code string }
		if json.Unmarshal(b, &m) != nil {
			return fail(s, "deepgram:bad_message")
		}
		switch m.Type {
		case "Flushed":
			s.total = now.Sub(s.start)
			s.audio = pcmSeconds(bytes, 2, sc.rate)
			if s.ttfb == 0 {
				s.err = "deepgram:no_audio"
			}
			return s
		case "Warning", "Error":
			return fail(s, "deepgram:"+strings.ToLower(m.Type)+":"+m.Code)
		}
	}
}

// executeDeepgram is Execute for --target deepgram.
func executeDeepgram(ctx context.Context, o Options) (*Run, error) {
	if o.Voice == "" {
		return nil, fmt.Errorf("--target deepgram needs --voice (the model: a voice name)")
	}
	sides := []side{{scenarioDeepgram, reuse(newDeepgramScenario(o.BaseURL, o.APIKey, o.Voice, o.Text, o.SampleRate)),
		pickProcSource(o.BaseURL, o.ServerPID)}}
	if o.Native != "" {
		client := newHTTPClient(4)
		defer client.CloseIdleConnections()
		t := &target{base: o.Native, apiRoot: o.Native + apiPath, key: o.APIKey, client: client, text: o.Text,
			format: "s16le", sampleRate: o.SampleRate}
		if err := t.resolveVoice(ctx, o.Voice); err != nil {
			return nil, err
		}
		sides = append([]side{{scenarioDeepgramNative, reuse(newWSScenario(t, 1, false, o.TPS)), pickProcSource(o.Native, o.ServerPID)}}, sides...)
	}
	return runSides(ctx, o, sidesRun{engine: "deepgram", format: "s16le"}, sides)
}

// targetDeepgramLevels are the levels the Deepgram socket is held to
// targetDialectAddedP50Ms at, each reported even when not run.
var targetDeepgramLevels = []int{1, 64}

// writeDeepgramTargets checks the Deepgram socket against the native
// WebSocket at 1 stream and 64 paced listeners.
func writeDeepgramTargets(w io.Writer, run *Run) {
	rows := DialectAddedOf(run)
	for _, level := range targetDeepgramLevels {
		label := fmt.Sprintf("deepgram: socket-added TTFB <= %g ms p50 at %d stream(s)", targetDialectAddedP50Ms, level)
		found := false
		for _, a := range rows {
			if a.Concurrency != level {
				continue
			}
			found = true
			ok := a.AddedP50 <= targetDialectAddedP50Ms && a.DirectErrors+a.ViaErrors == 0
			fmt.Fprintf(w, "| %s | medians of %d rounds: native p50 %.3f, deepgram p50 %.3f (added %+.3f) ms; p99 %.3f / %.3f ms; errors %d/%d | %s |\n",
				label, a.Rounds, a.DirectP50, a.ViaP50, a.AddedP50, a.DirectP99, a.ViaP99, a.DirectErrors, a.ViaErrors, yesNo(ok))
		}
		if !found {
			fmt.Fprintf(w, "| %s | not run | - |\n", label)
		}
	}
}
