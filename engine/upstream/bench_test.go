package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"voicesvc/engine"
)

// benchText is one sentence of 10 s of reference audio (166 characters
// that are not spaces, 60 ms each).
const benchText = "the quick brown fox jumps over the lazy dog and keeps running through the long green field " +
	"until the evening sun sets behind the quiet hills where the old river bends and the wind"

// The two benchmarks read the same fixture answer (10 s of 24 kHz pcm in
// 4 KiB flushed pieces, Kokoro's way): directly with net/http, and through
// the engine to float32 chunks. Both count the fixture's own CPU (it runs
// in this process); the difference per audio second is the engine's cost,
// and the difference in time to first byte/chunk its added latency.
//
//	go test ./engine/upstream -run '^$' -bench . -benchtime 200x

func BenchmarkDirect(b *testing.B) {
	f, audio := benchFixture(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	defer client.CloseIdleConnections()
	body, _ := json.Marshal(speechBody{Model: "m", Input: benchText, Voice: "v", ResponseFormat: "pcm", Stream: true})
	buf := make([]byte, 16<<10)
	var first time.Duration
	cpu := cpuTime()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/audio/speech", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, got := 0, false
		for {
			k, err := resp.Body.Read(buf)
			if k > 0 && !got {
				first += time.Since(start)
				got = true
			}
			n += k
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		resp.Body.Close()
		if n != len(render(benchText, 0)) {
			b.Fatalf("%d bytes", n)
		}
	}
	report(b, cpu, first, audio)
}

func BenchmarkEngine(b *testing.B) {
	f, audio := benchFixture(b)
	e := newEngine(b, []string{f.srv.URL}, nil)
	var first time.Duration
	cpu := cpuTime()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		n, got := 0, false
		err := e.Synthesize(context.Background(), engine.Request{Text: benchText, Profile: []byte("v")}, func(c engine.Chunk) error {
			if !got {
				first += time.Since(start)
				got = true
			}
			n += len(c.Samples) // and dropped, as in the server (pcmChunker.buffer)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if n != len(render(benchText, 0))/2 {
			b.Fatalf("%d samples", n)
		}
	}
	report(b, cpu, first, audio)
}

func benchFixture(b *testing.B) (*fixture, float64) {
	f := newFixture(b)
	f.piece = 4096
	// Nobody reads what the fixture records: drain it.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-f.started:
			case <-ctx.Done():
				return
			}
		}
	}()
	b.Cleanup(func() { cancel(); <-done })
	return f, float64(len(render(benchText, 0))/2) / 24000
}

func report(b *testing.B, cpu0 time.Duration, first time.Duration, audio float64) {
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/(float64(b.N)*audio), "cpu-ms/audio-s")
	b.ReportMetric(float64(first)/float64(time.Microsecond)/float64(b.N), "µs-first")
}

// cpuTime is the CPU this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPCMChunker is the engine's own work per audio second, without
// the network: s16le in 4 KiB pieces to 20 ms float32 chunks.
func BenchmarkPCMChunker(b *testing.B) {
	pcm := render(benchText, 0)
	audio := float64(len(pcm)/2) / 24000
	b.SetBytes(int64(len(pcm)))
	emit := func(engine.Chunk) error { return nil }
	for range b.N {
		p := pcmChunker{size: 480}
		for off := 0; off < len(pcm); off += 4096 {
			p.write(pcm[off:min(off+4096, len(pcm))], emit)
		}
		p.finish(emit)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/(float64(b.N)*audio), "µs/audio-s")
}
