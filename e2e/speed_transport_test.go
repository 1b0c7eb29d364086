package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"voicesvc/e2e/harness"
)

// Speed per transport (docs/shared decisions "Speed", issue 28): on both
// built-in engines, a text of at least 5 s at speed 1 is spoken at 0.25,
// 0.5, 1, 2 and 4 on speak, SSE, the WebSocket (length_scale 4 .. 0.25, and
// 5 and 0.2) and compat; each duration is within 5% of 1/speed of the
// duration at speed 1, and every word's start (SSE timestamps, WebSocket
// word_timestamps) is within 10 ms of its start at speed 1 divided by the
// speed. A length_scale below 0.2 is clamped to 0.2 (speed 5).

const spText = "The quick brown fox jumps over the lazy dog near the river bank. " +
	"Then it runs far away into the quiet forest, and nobody sees it again for a very long time. " +
	"Seven small birds sing in the tall trees while the sun goes down behind the hills."

// spTake is one synthesis: its audio duration and its word starts (nil
// where the transport has none).
// spKnown are deviations from the rules found by this test and not fixed
// yet (the code is elsewhere): they are logged as KNOWN instead of failing,
// unless VOICESVC_SPEED_STRICT=1, and only while at most spKnownWords words
// per take are off. Remove an entry once it passes.
const spKnownWords = 2

var spKnown = map[string]string{}

type spTake struct {
	dur    float64
	starts []float64
}

func TestSpeedPerTransport(t *testing.T) {
	speeds := []float64{0.25, 0.5, 1, 2, 4}
	wsSpeeds := []float64{0.2, 0.25, 0.5, 1, 2, 4, 5} // length_scale 5 .. 0.2
	var table []string
	for _, engine := range []string{"espeak", "reference"} {
		t.Run(engine, func(t *testing.T) {
			args := []string{"--engine", "espeak"}
			if engine == "reference" {
				args = refArgs(0)
			}
			srv := harness.Start(t, harness.Options{Args: append(args, "--billing", "off")})
			e := newEnv(t, srv, "pro")
			transports := []struct {
				name   string
				speeds []float64
				words  bool
				run    func(t *testing.T, speed float64) spTake
			}{
				{"speak", speeds, false, func(t *testing.T, s float64) spTake { return spSpeak(t, srv, e, s) }},
				{"sse", speeds, true, func(t *testing.T, s float64) spTake { return spSSE(t, srv, e, s) }},
				{"websocket", wsSpeeds, true, func(t *testing.T, s float64) spTake { return spWS(t, srv, e, 1/s) }},
				{"compat", speeds, false, func(t *testing.T, s float64) spTake { return spCompat(t, srv, e, s) }},
			}
			for _, tr := range transports {
				t.Run(tr.name, func(t *testing.T) {
					takes := map[float64]spTake{}
					for _, s := range tr.speeds {
						takes[s] = tr.run(t, s)
					}
					base := takes[1]
					if base.dur < 5 {
						t.Fatalf("the text lasts %.2f s at speed 1, want at least 5 s", base.dur)
					}
					if tr.words && len(base.starts) < 20 {
						t.Fatalf("%d word starts at speed 1", len(base.starts))
					}
					row := fmt.Sprintf("%-9s %-9s base %6.3fs", engine, tr.name, base.dur)
					for _, s := range tr.speeds {
						k := takes[s]
						ratio := k.dur * s / base.dur // 1.000 when exact
						worst := 0.0
						row += fmt.Sprintf(" | %g: %.4f", s, ratio)
						if math.Abs(ratio-1) > 0.05 {
							t.Errorf("speed %g: %.3f s, want %.3f s ±5%% (ratio %.3f)", s, k.dur, base.dur/s, ratio)
						}
						if !tr.words {
							continue
						}
						if len(k.starts) != len(base.starts) {
							t.Errorf("speed %g: %d words, %d at speed 1", s, len(k.starts), len(base.starts))
							continue
						}
						var bad []string // the words off by more than 10 ms
						for i, st := range k.starts {
							d := math.Abs(st - base.starts[i]/s)
							worst = max(worst, d)
							if d > 0.010 {
								bad = append(bad, fmt.Sprintf("word %d at %.4f s, want %.4f s", i, st, base.starts[i]/s))
							}
						}
						if len(bad) > 0 {
							msg := fmt.Sprintf("speed %g: %d word starts off by more than 10 ms (largest %.1f ms): %s",
								s, len(bad), worst*1000, strings.Join(bad, "; "))
							why, known := spKnown[engine+"/"+tr.name+"/words"]
							if known && len(bad) <= spKnownWords && os.Getenv("VOICESVC_SPEED_STRICT") != "1" {
								t.Logf("KNOWN %s (%s)", msg, why)
							} else {
								t.Error(msg)
							}
						}
						row += fmt.Sprintf(" (words ±%.1fms)", worst*1000)
					}
					t.Log(row)
					table = append(table, row)
				})
			}
			t.Run("websocket-clamp", func(t *testing.T) {
				// length_scale 0.1 is taken as 0.2: the same audio as speed 5.
				fast, clamped := spWS(t, srv, e, 0.2), spWS(t, srv, e, 0.1)
				if math.Abs(clamped.dur-fast.dur) > 0.01*fast.dur {
					t.Errorf("length_scale 0.1: %.3f s; length_scale 0.2: %.3f s (want the clamp to 0.2)", clamped.dur, fast.dur)
				}
				if len(clamped.starts) != len(fast.starts) {
					t.Fatalf("length_scale 0.1: %d words, 0.2: %d", len(clamped.starts), len(fast.starts))
				}
				for i := range fast.starts {
					if math.Abs(clamped.starts[i]-fast.starts[i]) > 0.010 {
						t.Fatalf("length_scale 0.1: word %d at %.4f s, at 0.2 %.4f s", i, clamped.starts[i], fast.starts[i])
					}
				}
				row := fmt.Sprintf("%-9s websocket length_scale 0.1: %.3fs = length_scale 0.2: %.3fs", engine, clamped.dur, fast.dur)
				t.Log(row)
				table = append(table, row)
			})
		})
	}
	t.Logf("duration × speed ÷ duration at speed 1 (1.0000 = exact); words: the largest word-start error:\n%s",
		strings.Join(table, "\n"))
}

func spBody(e *env, speed float64, extra ...any) map[string]any {
	m := map[string]any{"text": spText, "speed": speed, "output_format": "s16le"}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

// spRate reads X-Sample-Rate.
func spRate(t testing.TB, h http.Header) float64 {
	t.Helper()
	r, err := strconv.Atoi(h.Get("X-Sample-Rate"))
	if err != nil || r <= 0 {
		t.Fatalf("X-Sample-Rate %q", h.Get("X-Sample-Rate"))
	}
	return float64(r)
}

func spSpeak(t *testing.T, srv *harness.Server, e *env, speed float64) spTake {
	t.Helper()
	r := synPost(t, e.speakURL(srv), e.key, spBody(e, speed))
	if r.status != 200 {
		t.Fatalf("speak at speed %g: %d %.300s", speed, r.status, r.body)
	}
	return spTake{dur: float64(len(r.body)) / 2 / spRate(t, r.header)}
}

func spCompat(t *testing.T, srv *harness.Server, e *env, speed float64) spTake {
	t.Helper()
	r := mustCall(t, "POST", srv.API+"/compat/audio/speech", map[string]any{
		"model": "service-v1", "input": spText, "voice": e.voice, "response_format": "pcm", "speed": speed,
	}, bearerHdr(e.key)...)
	if r.status != 200 {
		t.Fatalf("compat at speed %g: %d %.300s", speed, r.status, r.body)
	}
	return spTake{dur: float64(len(r.body)) / 2 / 24000}
}

type spWord struct {
	Word   string  `json:"word"`
	StartS float64 `json:"start_s"`
}

// spStarts are the words' starts in the order they came.
func spStarts(words []spWord) []float64 {
	out := make([]float64, len(words))
	for i, w := range words {
		out[i] = w.StartS
	}
	return out
}

func spSSE(t *testing.T, srv *harness.Server, e *env, speed float64) spTake {
	t.Helper()
	r := synPost(t, srv.API+"/voices/"+e.voice+"/stream", e.key, spBody(e, speed, "timestamps", true))
	if r.status != 200 {
		t.Fatalf("stream at speed %g: %d %.300s", speed, r.status, r.body)
	}
	var rate float64
	var bytes int
	var words []spWord
	for _, ev := range synSSE(t, r.body) {
		switch ev.name {
		case "start":
			rate = ev.data["sample_rate"].(float64)
		case "chunk":
			b, err := base64.StdEncoding.DecodeString(ev.data["audio_b64"].(string))
			if err != nil {
				t.Fatal(err)
			}
			bytes += len(b)
		case "timestamps":
			j, _ := json.Marshal(ev.data["words"])
			var ws []spWord
			if err := json.Unmarshal(j, &ws); err != nil {
				t.Fatal(err)
			}
			words = append(words, ws...)
		case "error":
			t.Fatalf("stream at speed %g: error event %v", speed, ev.data)
		}
	}
	if rate == 0 {
		t.Fatalf("stream at speed %g: no start event", speed)
	}
	return spTake{dur: float64(bytes) / 2 / rate, starts: spStarts(words)}
}

// spWS speaks the text in one context with length_scale ls and timestamps.
// It names no language, so it speaks with the WebSocket's default, en
// (docs/realtime.md), where speak, SSE and compat speak the voice's primary
// language: hence espeak's other duration at speed 1 here (14.3 s against
// 16.4 s with the test's de voice; with language de the WebSocket's audio
// and word starts are those of SSE).
func spWS(t *testing.T, srv *harness.Server, e *env, ls float64) spTake {
	t.Helper()
	c, resp, err := wsDialer.Dial(wsURL(srv, nil), http.Header{"X-Api-Key": {e.key}})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial: %v (%d)", err, status)
	}
	defer c.Close()
	start, _ := json.Marshal(map[string]any{"type": "task_start", "context_id": "c", "voice_id": e.voice,
		"text": spText, "finalize": true, "length_scale": ls, "timestamps": true, "output_format": "s16le"})
	if err := c.WriteMessage(websocket.TextMessage, start); err != nil {
		t.Fatal(err)
	}
	var rate float64
	var bytes int
	var words []spWord
	for {
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		typ, b, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("length_scale %g: read: %v", ls, err)
		}
		if typ == websocket.BinaryMessage {
			bytes += len(b)
			continue
		}
		var m struct {
			Type       string   `json:"type"`
			SampleRate float64  `json:"sample_rate"`
			Timestamps *bool    `json:"timestamps"`
			Words      []spWord `json:"words"`
			Code       string   `json:"code"`
			Message    string   `json:"message"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("frame %q: %v", b, err)
		}
		switch m.Type {
		case "task_started":
			rate = m.SampleRate
			if m.Timestamps == nil || !*m.Timestamps {
				t.Fatalf("length_scale %g: task_started %s: want timestamps true", ls, b)
			}
		case "word_timestamps":
			words = append(words, m.Words...)
		case "error", "task_failed":
			t.Fatalf("length_scale %g: %s", ls, b)
		case "task_done":
			if rate == 0 {
				t.Fatal("no task_started")
			}
			c.WriteMessage(websocket.TextMessage, []byte(`{"type":"session_end"}`))
			return spTake{dur: float64(bytes) / 2 / rate, starts: spStarts(words)}
		}
	}
}
