package synth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/engine/reference"
)

type sseEvent struct {
	name string
	data map[string]any
}

// parseSSE splits a stream into events, checking the framing of 6.1: an
// event line, one data line of JSON with a type equal to the event, a blank
// line.
func parseSSE(t *testing.T, stream []byte) []sseEvent {
	t.Helper()
	var evs []sseEvent
	for _, block := range strings.SplitAfter(string(stream), "\n\n") {
		if block == "" {
			continue
		}
		lines := strings.Split(strings.TrimSuffix(block, "\n\n"), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "event: ") || !strings.HasPrefix(lines[1], "data: ") ||
			!strings.HasSuffix(block, "\n\n") {
			t.Fatalf("bad event block %q", block)
		}
		ev := sseEvent{name: strings.TrimPrefix(lines[0], "event: ")}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[1], "data: ")), &ev.data); err != nil {
			t.Fatalf("data of %q: %v", block, err)
		}
		if ev.data["type"] != ev.name {
			t.Fatalf("type %v in event %s", ev.data["type"], ev.name)
		}
		evs = append(evs, ev)
	}
	return evs
}

func TestAppendSSE(t *testing.T) {
	pcm := []byte{0, 1, 2, 253, 254, 255, 9}
	var b []byte
	b = AppendSSEStart(b, 24000, codec.F32LE)
	b = AppendSSEChunk(b, 0, pcm)
	b = AppendSSEChunk(b, 1, nil)
	b = AppendSSEDone(b, 1.23456789)
	b = AppendSSEError(b, control.EUpstreamError, "bad \"engine\"\n\t\x01 <&> \u2028 \xff नमस्ते")
	evs := parseSSE(t, b)
	want := []map[string]any{
		{"type": "start", "sample_rate": 24000.0, "audio_format": "f32le"},
		{"type": "chunk", "index": 0.0, "audio_b64": base64.StdEncoding.EncodeToString(pcm)},
		{"type": "chunk", "index": 1.0, "audio_b64": ""},
		{"type": "done", "audio_duration_s": 1.234568},
		{"type": "error", "code": "upstream_error", "message": "bad \"engine\"\n\t\x01 <&> \u2028 \ufffd नमस्ते"},
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events", len(evs))
	}
	for i, ev := range evs {
		for k, v := range want[i] {
			if ev.data[k] != v {
				t.Errorf("event %d %s = %#v, want %#v", i, k, ev.data[k], v)
			}
		}
	}
}

func TestCoalescer(t *testing.T) {
	tests := []struct {
		name   string
		size   int
		width  int
		writes []int // bytes per write
		want   []int // bytes per emit
	}{
		{"first passes, then coalesced", 12, 4, []int{4, 4, 4, 4, 4, 4, 4}, []int{4, 12, 12}},
		{"flush remainder", 12, 4, []int{8, 4, 8}, []int{8, 12}},
		{"big write split, no copy needed", 8, 2, []int{2, 20}, []int{2, 8, 8, 4}},
		{"size rounded up to samples", 10, 4, []int{4, 4, 4, 4}, []int{4, 12}},
		{"partial first sample waits", 6, 3, []int{2, 2, 5}, []int{3, 6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var in, out []byte
			var got []int
			c := NewCoalescer(tc.size, tc.width, func(b []byte) error {
				got = append(got, len(b))
				out = append(out, b...)
				if len(b)%tc.width != 0 {
					t.Fatalf("emit of %d bytes: not whole %d-byte samples", len(b), tc.width)
				}
				return nil
			})
			for _, n := range tc.writes {
				p := make([]byte, n)
				for i := range p {
					p[i] = byte(len(in) + i)
				}
				in = append(in, p...)
				if err := c.Write(p); err != nil {
					t.Fatal(err)
				}
				if len(got) == 0 && len(in) >= tc.width {
					t.Fatal("first whole sample did not pass through at once")
				}
			}
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
			if !equalInts(got, tc.want) {
				t.Fatalf("emits %v, want %v", got, tc.want)
			}
			whole := len(in) - len(in)%tc.width
			if !bytes.Equal(out, in[:whole]) {
				t.Fatal("bytes changed or reordered")
			}
		})
	}
	if n := CoalesceBytes(24000, 4, DefaultCoalesce); n != 960*4 {
		t.Fatalf("40 ms f32le at 24 kHz = %d bytes", n)
	}
}

// TestSSEStream runs the reference engine into an SSEWriter: start first,
// contiguous chunks of whole samples, done with the decoded duration.
func TestSSEStream(t *testing.T) {
	for _, tc := range []struct {
		f    codec.Format
		rate int
	}{{codec.F32LE, 24000}, {codec.S16LE, 8000}, {codec.S24LE, 48000}, {codec.F64LE, 16000}} {
		t.Run(string(tc.f), func(t *testing.T) {
			var stream bytes.Buffer
			flushes := 0
			width := tc.f.BytesPerSample()
			w := NewSSEWriter(&stream, func() error { flushes++; return nil },
				CoalesceBytes(tc.rate, width, DefaultCoalesce), width)
			p := newPipeline(t, tc.f, tc.rate)
			if err := w.Start(p.Rate(), tc.f); err != nil {
				t.Fatal(err)
			}
			res, err := Run(context.Background(), reference.New(), engine.Request{Text: "Streaming works. Doesn't it?"}, p, w.Audio)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Done(res.Duration); err != nil {
				t.Fatal(err)
			}
			evs := parseSSE(t, stream.Bytes())
			if evs[0].name != "start" || evs[0].data["sample_rate"] != float64(tc.rate) || evs[0].data["audio_format"] != string(tc.f) {
				t.Fatalf("first event %+v", evs[0])
			}
			last := evs[len(evs)-1]
			if last.name != "done" || flushes != len(evs) || w.Chunks() != len(evs)-2 {
				t.Fatalf("last %+v, %d flushes for %d events", last, flushes, len(evs))
			}
			samples := 0
			for i, ev := range evs[1 : len(evs)-1] {
				pcm, err := base64.StdEncoding.DecodeString(ev.data["audio_b64"].(string))
				if ev.name != "chunk" || ev.data["index"] != float64(i) || err != nil || len(pcm) == 0 || len(pcm)%width != 0 {
					t.Fatalf("chunk %d: %s index %v, %d bytes, %v", i, ev.name, ev.data["index"], len(pcm), err)
				}
				samples += len(pcm) / width
			}
			decoded := float64(samples) / float64(tc.rate)
			if d := last.data["audio_duration_s"].(float64); math.Abs(d-decoded) > 0.01*decoded {
				t.Fatalf("done says %v s, chunks hold %v s", d, decoded)
			}
		})
	}
}

type failWriter struct {
	n, ok int // writes allowed
}

func (f *failWriter) Write(b []byte) (int, error) {
	if f.n++; f.n > f.ok {
		return 0, errors.New("broken pipe")
	}
	return len(b), nil
}

// TestSSEClientGone: the first failed write ends Run, and nothing more is
// written after it.
func TestSSEClientGone(t *testing.T) {
	fw := &failWriter{ok: 2} // start and the first chunk
	w := NewSSEWriter(fw, nil, CoalesceBytes(24000, 4, 20*time.Millisecond), 4)
	p := newPipeline(t, codec.F32LE, 24000)
	w.Start(24000, codec.F32LE)
	_, err := Run(context.Background(), reference.New(), engine.Request{Text: "Long enough for many chunks of audio."}, p, w.Audio)
	if err == nil || err.Error() != "broken pipe" || fw.n != 3 {
		t.Fatalf("err %v after %d writes", err, fw.n)
	}
	if w.Done(1) == nil || w.Error(err) == nil || fw.n != 3 {
		t.Fatalf("wrote after the failure: %d writes", fw.n)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestAppendSSEChunkBase64: the SIMD encoder writes what encoding/base64
// does, for every length class (tails of 0, 1 and 2 bytes, short inputs
// below the vector width, long ones) and after existing content.
func TestAppendSSEChunkBase64(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 4, 5, 11, 12, 13, 23, 24, 25, 31, 32, 33, 47, 48, 49, 95, 96, 97, 960, 1919, 1920, 4801} {
		pcm := make([]byte, n)
		for i := range pcm {
			pcm[i] = byte(i*131 + n)
		}
		prefix := []byte("x")
		got := string(AppendSSEChunk(prefix, 7, pcm))
		want := "x" + `event: chunk` + "\n" + `data: {"type":"chunk","index":7,"audio_b64":"` + base64.StdEncoding.EncodeToString(pcm) + `"}` + "\n\n"
		if got != want {
			t.Fatalf("%d bytes:\n got %q\nwant %q", n, got, want)
		}
	}
}
