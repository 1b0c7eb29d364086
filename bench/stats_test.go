package bench

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestPercentile(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		q    float64
		want float64
	}{
		{"single", []float64{7}, 0.99, 7},
		{"median odd", []float64{1, 2, 3}, 0.5, 2},
		{"median even interpolates", []float64{1, 2, 3, 4}, 0.5, 2.5},
		{"p90 of 1..10", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.9, 9.1},
		{"p99 of 1..100", seq(100), 0.99, 99.01},
		{"q=0 is min", []float64{3, 5}, 0, 3},
		{"q=1 is max", []float64{3, 5}, 1, 5},
		{"p25 two values", []float64{10, 20}, 0.25, 12.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.xs, tc.q); !near(got, tc.want) {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tc.xs, tc.q, got, tc.want)
			}
		})
	}
	if !math.IsNaN(Percentile(nil, 0.5)) {
		t.Error("empty input must give NaN")
	}
}

func seq(n int) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	return xs
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		want Dist
	}{
		{"empty", nil, Dist{}},
		{"unsorted", []float64{4, 1, 3, 2}, Dist{N: 4, Mean: 2.5, P50: 2.5, P90: 3.7, P99: 3.97, Max: 4}},
		{"constant", []float64{5, 5, 5}, Dist{N: 3, Mean: 5, P50: 5, P90: 5, P99: 5, Max: 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Summarize(tc.xs)
			if got.N != tc.want.N || !near(got.Mean, tc.want.Mean) || !near(got.P50, tc.want.P50) ||
				!near(got.P90, tc.want.P90) || !near(got.P99, tc.want.P99) || !near(got.Max, tc.want.Max) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRatesAndRTF(t *testing.T) {
	tests := []struct {
		name      string
		got, want float64
	}{
		{"rtf half real time", RTF(500*time.Millisecond, 1), 0.5},
		{"rtf slower than real time", RTF(3*time.Second, 2), 1.5},
		{"rtf no audio", RTF(time.Second, 0), 0},
		{"rate", Rate(30, 10*time.Second), 3},
		{"rate empty window", Rate(5, 0), 0},
		{"ms", Ms(1500 * time.Microsecond), 1.5},
		{"ratio", Ratio(2, 3), 1.5},
		{"ratio both zero", Ratio(0, 0), 1},
		{"pcm s16le 1s", pcmSeconds(48000, 2, 24000), 1},
		{"pcm f32le 0.5s", pcmSeconds(48000, 4, 24000), 0.5},
		{"pcm unknown width", pcmSeconds(48000, 0, 24000), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !near(tc.got, tc.want) {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
	if !math.IsNaN(Ratio(0, 1)) {
		t.Error("ratio over zero baseline must be NaN")
	}
}

func TestReservoir(t *testing.T) {
	tests := []struct {
		name     string
		capacity int
		n        int
	}{
		{"under cap is exact", 1000, 100},
		{"over cap keeps count and max", 50, 1000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newReservoir(tc.capacity)
			for i := 1; i <= tc.n; i++ {
				r.add(float64(i))
			}
			d := r.dist()
			if d.N != tc.n || d.Max != float64(tc.n) || len(r.xs) != min(tc.n, tc.capacity) {
				t.Fatalf("dist %+v, kept %d", d, len(r.xs))
			}
			if tc.n <= tc.capacity && !near(d.P50, Percentile(seq(tc.n), 0.5)) {
				t.Errorf("p50 %v not exact", d.P50)
			}
		})
	}
}

func TestRecorderFill(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// Warm-up ended before the first measured start: rates use the latter.
	rec := newRecorder(t0.Add(-500 * time.Millisecond))
	ok := func(at, ttfb, total time.Duration, audio float64, gaps ...float64) sample {
		return sample{start: t0.Add(at), ttfb: ttfb, total: total, audio: audio, gaps: gaps}
	}
	// A warm-up sample must not count anywhere.
	rec.add(ok(-time.Second, 999*time.Millisecond, time.Second, 9), false)
	rec.add(ok(0, 10*time.Millisecond, time.Second, 2, 5, 7), true)
	rec.add(ok(time.Second, 30*time.Millisecond, time.Second, 2, 9), true)
	rec.add(sample{start: t0.Add(time.Second), total: 3 * time.Second, err: "429 rate_limited"}, true)
	// A refusal is an operation, neither ok nor an error, timed apart.
	rec.add(sample{start: t0.Add(time.Second), total: 4 * time.Millisecond, refused: true, retryAfter: time.Second}, true)
	rec.addError("client:dropped")
	var res Result
	rec.fill(&res)
	checks := []struct {
		name      string
		got, want float64
	}{
		{"operations", float64(res.Operations), 4},
		{"ok", float64(res.OK), 2},
		{"errors", float64(res.ErrorCount), 2},
		{"refused", float64(res.Refused), 1},
		{"refusal max", res.Refusal.Max, 4},
		{"ttfb p50", res.TTFB.P50, 20},
		{"ttfb max", res.TTFB.Max, 30},
		{"gap max", res.Gap.Max, 9},
		{"gap n", float64(res.Gap.N), 3},
		{"audio", res.AudioSeconds, 4},
		{"elapsed ends with the last op", res.Elapsed, 4},
		{"audio per second", res.AudioPerSec, 1},
		{"ops per second", res.Throughput, 1},
		{"rtf p50", res.RTFp50, 0.5},
		{"rtf aggregate", res.RTFAggregate, 0.5},
	}
	for _, c := range checks {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if res.Errors["429 rate_limited"] != 1 || res.Errors["client:dropped"] != 1 {
		t.Errorf("errors %v", res.Errors)
	}
}

func TestB64Len(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{{"", 0}, {"AA==", 1}, {"AAA=", 2}, {"AAAA", 3}, {"AAAAAA==", 4}, {"AAAAAA", 4}, {"AAAAAAA", 5}} {
		if got := b64Len(tc.in); got != tc.want {
			t.Errorf("b64Len(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func wavHeader(rate int, dataSize uint32) []byte {
	h := make([]byte, 44)
	copy(h, "RIFF")
	copy(h[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(h[16:], 16)
	binary.LittleEndian.PutUint16(h[20:], 1)
	binary.LittleEndian.PutUint16(h[22:], 1)
	binary.LittleEndian.PutUint32(h[24:], uint32(rate))
	binary.LittleEndian.PutUint32(h[28:], uint32(rate*2))
	binary.LittleEndian.PutUint16(h[32:], 2)
	binary.LittleEndian.PutUint16(h[34:], 16)
	copy(h[36:], "data")
	binary.LittleEndian.PutUint32(h[40:], dataSize)
	return h
}

// mp3Frame builds an MPEG-1 layer III frame header at 128 kbit/s, 48 kHz:
// 384 bytes, 1152 samples = 24 ms.
func mp3Frame(payload string) []byte {
	f := make([]byte, 144000*128/48000)
	copy(f, []byte{0xff, 0xfb, 0x94, 0x00})
	copy(f[4:], payload)
	return f
}

func TestAudioSeconds(t *testing.T) {
	var mp3 []byte
	id3 := []byte{'I', 'D', '3', 4, 0, 0, 0, 0, 0, 5, 1, 2, 3, 4, 5}
	mp3 = append(mp3, id3...)
	mp3 = append(mp3, mp3Frame("Xing")...)
	for i := 0; i < 10; i++ {
		mp3 = append(mp3, mp3Frame("")...)
	}
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"wav streamed with placeholder size", wavSeconds(wavHeader(24000, 0xffffffff), 44+48000), 1},
		{"wav not riff", wavSeconds([]byte("nope"), 100), 0},
		{"mp3 skips id3 and xing", mp3Seconds(mp3), 10 * 1152.0 / 48000},
		{"mp3 garbage", mp3Seconds([]byte("garbage with no frames")), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !near(tc.got, tc.want) {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func TestErrorCode(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"status":429,"error":true,"code":"rate_limited","message":"x"}`, "rate_limited"},
		{`{"error":"quota_exhausted","unit":"character"}`, "quota_exhausted"},
		{`{"error":{"message":"m","type":"invalid_request_error","code":"unsupported_response_format"}}`, "unsupported_response_format"},
		{`{"status":401,"error":true,"message":"bad key"}`, ""},
		{`not json`, ""},
	} {
		if got := errorCode([]byte(tc.body)); got != tc.want {
			t.Errorf("errorCode(%s) = %q, want %q", tc.body, got, tc.want)
		}
	}
}

func TestCapacityLines(t *testing.T) {
	res := func(scn string, c int, p99 float64, errs int) *Result {
		return &Result{Scenario: scn, Mode: "closed", Concurrency: c, ErrorCount: errs, TTFB: Dist{N: 10, P99: p99}}
	}
	run := &Run{Results: []*Result{
		res("sse", 1, 10, 0), res("sse", 64, 90, 0), res("sse", 256, 150, 0),
		res("ws", 1, 20, 0), res("ws", 16, 30, 2),
		res("speak", 1, 200, 0),
	}}
	got := strings.Join(capacityLines(run, 100), "\n")
	want := "- sse: c=64 (TTFB p99 90.0 ms)\n- ws: c=1 (0x0) (TTFB p99 20.0 ms)\n- speak: none"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestProgressLine(t *testing.T) {
	rec := newRecorder(time.Now().Add(time.Hour))
	if got := rec.progressLine("[sse c=1]", time.Second); !strings.Contains(got, "warm-up") || !strings.Contains(got, "ttfb(1s) -") {
		t.Errorf("empty warm-up line: %q", got)
	}
	rec.add(sample{start: time.Now(), ttfb: 20 * time.Millisecond, total: time.Second}, false)
	if got := rec.progressLine("[sse c=1]", time.Second); !strings.Contains(got, "p50 20.0ms") {
		t.Errorf("line: %q", got)
	}
	if got := rec.progressLine("[sse c=1]", time.Second); !strings.Contains(got, "ttfb(1s) -") {
		t.Errorf("window not drained: %q", got)
	}
}

func TestMarkdownNotesAndErrors(t *testing.T) {
	run := &Run{Engine: "e|x", Results: []*Result{
		{Scenario: "sse", Mode: "closed", Concurrency: 64, Note: "no operation started", Errors: map[string]int{"503 upstream_busy": 2}, ErrorCount: 2},
	}}
	var b strings.Builder
	writeMarkdown(&b, run, nil)
	for _, want := range []string{"`e\\|x`", "## Errors", "- sse c=64: 503 upstream_busy x2", "## Notes", "no operation started", "| sse | "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestStealPercent(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want float64
	}{
		{"cpu  100 0 50 800 10 0 5 35 0 0", "cpu  200 0 100 1495 10 0 10 185 0 0", 15},
		{"cpu  100 0 50 800 10 0 5 35 0 0", "cpu  100 0 50 900 10 0 5 35 0 0", 0},
		{"cpu  100 0 50 800 10 0 5 35 7 0", "cpu  200 0 50 800 10 0 5 35 90 0", 0}, // guest is inside user
		{"cpu  100 0 50 800 10 0 5 35 0 0", "cpu  100 0 50 800 10 0 5 35 0 0", -1}, // no time passed
	} {
		a, okA := parseCPUTicks(tc.a)
		b, okB := parseCPUTicks(tc.b)
		if !okA || !okB {
			t.Fatalf("parse %q / %q", tc.a, tc.b)
		}
		if got := stealPercent(a, b); got != tc.want {
			t.Errorf("%q -> %q: steal %v%%, want %v%%", tc.a, tc.b, got, tc.want)
		}
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 x 4 5 6 7 8", "cpu 1 2 3"} {
		if _, ok := parseCPUTicks(bad); ok {
			t.Errorf("parseCPUTicks(%q) accepted", bad)
		}
	}
}
