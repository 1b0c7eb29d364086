package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/fasthttp/websocket"
)

// The elevenlabs target benchmarks any server of the ElevenLabs API (the
// vendor, or voicesvc's dialect at {api_root}/compat/elevenlabs): one
// utterance a stream-input socket, the text in its first message then the
// closing empty text, pcm audio at --sample-rate.
// Each worker's next socket is dialled while its current one speaks (after
// its first audio byte), so no handshake or session setup is in a time to
// first audio byte, as none is for the ws scenario's sessions (dialled up
// front). With --native (the voicesvc behind --base), its own realtime
// WebSocket is measured by the same client in the same run, round by round
// in turn: what the dialect adds over the native socket. Both sides then
// name the voice by the same id, and both read audio without decoding it.

// Scenario names of the elevenlabs target's results.
const (
	scenarioElevenLabs       = "elevenlabs"        // --base
	scenarioElevenLabsNative = "elevenlabs-native" // --native: the native ws
)

// elevenLabsScenario runs one stream-input socket per operation.
type elevenLabsScenario struct {
	url, key string
	text     string
	rate     int
	dialer   *websocket.Dialer
	next     []chan elevenLabsDial // per slot: the socket dialled ahead
}

type elevenLabsDial struct {
	conn *websocket.Conn
	err  string
}

func newElevenLabsScenario(base, key, voice, text string, rate int) *elevenLabsScenario {
	u := strings.TrimRight(base, "/")
	u = "ws" + strings.TrimPrefix(u, "http") + "/v1/text-to-speech/" + url.PathEscape(voice) +
		"/stream-input?auto_mode=true&output_format=pcm_" + fmt.Sprint(rate)
	return &elevenLabsScenario{url: u, key: key, text: text, rate: rate,
		dialer: &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 64 << 10, NetDialContext: unpacedDial}}
}

func (sc *elevenLabsScenario) open(ctx context.Context, slots int) error {
	sc.next = make([]chan elevenLabsDial, slots)
	for i := range sc.next {
		sc.next[i] = make(chan elevenLabsDial, 1)
		sc.dialAhead(ctx, i)
	}
	return nil
}

// dialAhead dials slot's next socket in the background.
func (sc *elevenLabsScenario) dialAhead(ctx context.Context, slot int) {
	go func() {
		h := http.Header{}
		h.Set("xi-api-key", sc.key)
		c, resp, err := sc.dialer.DialContext(context.WithoutCancel(ctx), sc.url, h)
		d := elevenLabsDial{conn: c}
		if err != nil {
			d.err = netError(err)
			if resp != nil {
				var f sample
				if failStatus(&f, resp); f.err != "" {
					d.err = "el:handshake_" + f.err
				}
				resp.Body.Close()
			}
		}
		sc.next[slot] <- d
	}()
}

func (sc *elevenLabsScenario) close() {
	for _, ch := range sc.next {
		select {
		case d := <-ch:
			if d.conn != nil {
				d.conn.Close()
			}
		case <-time.After(2 * time.Second):
		}
	}
}

// elevenLabsMsg is what the client reads of a server message: its audio
// is measured (the base64 length), not decoded.
type elevenLabsMsg struct {
	Audio   int // base64 characters of "audio" (0: null or none)
	IsFinal bool
	Error   string
}

// elevenLabsFields is how a server message is decoded when the quick scan
// cannot tell (an error, or a shape it does not expect).
type elevenLabsFields struct {
	Audio   *string `json:"audio"`
	IsFinal bool    `json:"isFinal"`
	Error   string  `json:"error"`
}

// scanElevenLabsMsg reads a server message. An audio message (most of
// them, each with up to kilobytes of base64) is read without a JSON
// decode: the client's own cost per message would otherwise be a good
// part of the time between utterances at one stream, time in which the
// server idles, which the native side's binary frames do not have. Any
// other message is decoded in full; ok is false for one that is not JSON.
func scanElevenLabsMsg(b []byte) (m elevenLabsMsg, ok bool) {
	const audioKey = `{"audio":"`
	if bytes.HasPrefix(b, []byte(audioKey)) {
		if end := bytes.IndexByte(b[len(audioKey):], '"'); end >= 0 {
			rest := b[len(audioKey)+end:]
			if !bytes.Contains(rest, []byte(`"error"`)) {
				m.Audio, m.IsFinal = end, bytes.Contains(rest, []byte(`"isFinal":true`))
				return m, true
			}
		}
	}
	var f elevenLabsFields
	if json.Unmarshal(b, &f) != nil {
		return m, false
	}
	if f.Audio != nil {
		m.Audio = len(*f.Audio)
	}
	m.IsFinal, m.Error = f.IsFinal, f.Error
	return m, true
}

func (sc *elevenLabsScenario) do(ctx context.Context, slot int) sample {
	var d elevenLabsDial
	select {
	case d = <-sc.next[slot]:
	case <-ctx.Done():
		return sample{start: time.Now(), err: "client:timeout"}
	}
	if d.conn == nil {
		sc.dialAhead(ctx, slot)
		return sample{start: time.Now(), err: d.err}
	}
	// The next socket is dialled once this one's first audio byte is in,
	// while it speaks: by its turn it has been open a while, as an agent's
	// pre-opened connection and the native scenario's sessions (dialled up
	// front, then idle), and its handshake is in no first byte's time
	// (the native sessions' are in none either).
	dialled := false
	defer func() {
		if !dialled {
			sc.dialAhead(ctx, slot)
		}
	}()
	c := d.conn
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	s := sample{start: start}
	// The first message opens the context with its text, as the vendor's
	// reference allows (one message, as the native task_start), then the
	// closing empty text.
	for _, m := range []string{mustJSON(map[string]any{"text": sc.text + " ", "flush": true}), `{"text":""}`} {
		if err := c.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
			s.err, s.total = netError(err), time.Since(start)
			return s
		}
	}
	var last time.Time
	var b64 int // base64 characters of audio
	var buf bytes.Buffer
	for {
		_, r, err := c.NextReader()
		now := time.Now() // at receipt: parsing is not the server's time
		if err != nil {
			s.err = "el:closed_early"
			if ctx.Err() != nil {
				s.err = "client:timeout"
			}
			break
		}
		buf.Reset()
		_, err = buf.ReadFrom(r)
		m, ok := scanElevenLabsMsg(buf.Bytes())
		if err != nil || !ok {
			s.err = "el:bad_message"
			break
		}
		if m.Error != "" {
			s.err = "el:" + m.Error
			break
		}
		if m.Audio > 0 {
			if s.ttfb == 0 {
				s.ttfb = now.Sub(start)
				sc.dialAhead(ctx, slot)
				dialled = true
			} else {
				s.gaps = append(s.gaps, Ms(now.Sub(last)))
			}
			last = now
			b64 += m.Audio
		}
		if m.IsFinal {
			break
		}
	}
	s.total = time.Since(start)
	s.audio = float64(b64/4*3) / 2 / float64(sc.rate)
	if s.err == "" && s.ttfb == 0 {
		s.err = "el:no_audio"
	}
	return s
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// executeElevenLabs is Execute for --target elevenlabs.
func executeElevenLabs(ctx context.Context, o Options) (*Run, error) {
	if o.Voice == "" {
		return nil, fmt.Errorf("--target elevenlabs needs --voice (the server's voice id)")
	}
	voice := o.Voice
	var native *side
	if o.Native != "" {
		t := &target{base: o.Native, apiRoot: o.Native + apiPath, key: o.APIKey,
			client: newHTTPClient(4), text: o.Text, format: "s16le", sampleRate: o.SampleRate}
		defer t.client.CloseIdleConnections()
		if err := t.resolveVoice(ctx, o.Voice); err != nil {
			return nil, err
		}
		// Both sides name the voice the same way: by the id the native
		// side resolved (an agent's ElevenLabs voice_id is an id too).
		voice = t.voiceID
		native = &side{scenarioElevenLabsNative, reuse(newWSScenario(t, 1, false, o.TPS)), pickProcSource(o.Native, o.ServerPID)}
	}
	sides := []side{{scenarioElevenLabs, reuse(newElevenLabsScenario(o.BaseURL, o.APIKey, voice, o.Text, o.SampleRate)),
		pickProcSource(o.BaseURL, o.ServerPID)}}
	if native != nil {
		sides = append(sides, *native)
	}
	// More than one stream is a population of realtime listeners, paced.
	return runSides(ctx, o, sidesRun{engine: "elevenlabs", format: "pcm", tune: func(level float64, spec *loadSpec, _ *Result) {
		spec.pace = o.Pace || level > 1
	}}, sides)
}
