package synth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"voicesvc/codec"
	"voicesvc/engine"
	"voicesvc/engine/espeak"
	"voicesvc/engine/reference"
)

// 20 ms of f32le at 24 kHz: the unit the engines emit.
var pcm20ms = make([]byte, 480*4)

func BenchmarkSSEChunk20ms(b *testing.B) {
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(len(pcm20ms)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		buf = AppendSSEChunk(buf[:0], i, pcm20ms)
		i++
	}
}

// BenchmarkSSEChunk20msMarshal is the json.Marshal way, for comparison.
func BenchmarkSSEChunk20msMarshal(b *testing.B) {
	type chunk struct {
		Type     string `json:"type"`
		Index    int    `json:"index"`
		AudioB64 string `json:"audio_b64"`
	}
	b.SetBytes(int64(len(pcm20ms)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		data, _ := json.Marshal(chunk{"chunk", i, base64.StdEncoding.EncodeToString(pcm20ms)})
		_ = append(append([]byte("event: chunk\ndata: "), data...), "\n\n"...)
		i++
	}
}

func BenchmarkParseSpeak(b *testing.B) {
	body := []byte(`{"text":"Hello there, this is a short sentence to speak.","language":"en","output_format":"s16le","sample_rate":16000,"num_step":16,"expressiveness":0.4}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseSpeak(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseSpeak10k(b *testing.B) {
	body := []byte(`{"text":"` + strings.Repeat("नमस्ते ", 1428) + `"}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseSpeak(body); err != nil {
			b.Fatal(err)
		}
	}
}

var errFirst = errors.New("first chunk")

// benchFirstChunk measures engine + pipeline time to the first encoded
// bytes: Run stops at them (the sink fails), so the rest is not rendered.
// Reports the p50 and p99 of Result.TTFB.
func benchFirstChunk(b *testing.B, eng engine.Engine, f codec.Format, rate int) {
	req := engine.Request{Text: "Hello there. This is the first sentence of a longer text.", Language: "en"}
	var ttfb []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		p, err := codec.NewPipeline(eng.NativeRate(), f, rate)
		if err != nil {
			b.Fatal(err)
		}
		res, err := Run(context.Background(), eng, req, p, func([]byte) error { return errFirst })
		p.Close()
		if err != errFirst {
			b.Fatal(err)
		}
		ttfb = append(ttfb, res.TTFB)
	}
	sort.Slice(ttfb, func(i, j int) bool { return ttfb[i] < ttfb[j] })
	b.ReportMetric(float64(ttfb[len(ttfb)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(ttfb[len(ttfb)*99/100].Microseconds()), "p99-µs")
}

func BenchmarkFirstChunkReference(b *testing.B) {
	for _, tc := range []struct {
		f    codec.Format
		rate int
	}{{codec.F32LE, 24000}, {codec.S16LE, 16000}, {codec.WAV, 48000}} {
		b.Run(string(tc.f)+"-"+itoa(tc.rate), func(b *testing.B) { benchFirstChunk(b, reference.New(), tc.f, tc.rate) })
	}
}

func BenchmarkFirstChunkEspeak(b *testing.B) {
	eng, err := espeak.New()
	if err != nil {
		b.Skip("espeak-ng unavailable:", err)
	}
	for _, tc := range []struct {
		f    codec.Format
		rate int
	}{{codec.F32LE, 24000}, {codec.S16LE, 16000}} {
		b.Run(string(tc.f)+"-"+itoa(tc.rate), func(b *testing.B) { benchFirstChunk(b, eng, tc.f, tc.rate) })
	}
}
