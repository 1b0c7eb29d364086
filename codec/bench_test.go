package codec

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// realtime measures seconds of audio processed per second of time. Timing
// lives only in benchmarks, never in tests. Two metrics: "x_realtime" over
// wall time, and "x_realtime_cpu" over the process's CPU time, which stays
// meaningful on a machine shared with other busy processes.
type realtime struct{ cpu0 time.Duration }

func startRealtime() realtime { return realtime{cpuTime()} }

func (r realtime) report(b *testing.B, audioSecondsPerOp float64) {
	b.Helper()
	audio := audioSecondsPerOp * float64(b.N)
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(audio/s, "x_realtime")
	}
	if s := (cpuTime() - r.cpu0).Seconds(); s > 0 {
		b.ReportMetric(audio/s, "x_realtime_cpu")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkResample: one second from the engine rate in 20 ms chunks.
func BenchmarkResample(b *testing.B) {
	in := voiceLike(22050, 22050)
	for _, out := range []int{24000, 48000} {
		b.Run(fmt.Sprintf("22050-%d", out), func(b *testing.B) {
			r, err := NewResampler(22050, out)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			buf := make([]float32, 0, 4096)
			rt := startRealtime()
			for b.Loop() {
				for i := 0; i < len(in); i += 441 {
					if buf, err = r.Process(buf[:0], in[i:i+441]); err != nil {
						b.Fatal(err)
					}
				}
			}
			rt.report(b, 1)
		})
	}
}

// BenchmarkOpusEncode: one second at 48 kHz, default bitrate and complexity.
func BenchmarkOpusEncode(b *testing.B) {
	in := voiceLike(OpusRate, OpusRate)
	p, err := NewOpusPacketizer(0)
	if err != nil {
		b.Fatal(err)
	}
	nop := func([]byte) error { return nil }
	rt := startRealtime()
	for b.Loop() {
		if err := p.Write(in, nop); err != nil {
			b.Fatal(err)
		}
	}
	rt.report(b, 1)
}

// BenchmarkPCM: one second at 24 kHz into each raw format (G.711 too).
func BenchmarkPCM(b *testing.B) {
	in := voiceLike(24000, 24000)
	for _, f := range append(pcmFormats, g711Formats...) {
		b.Run(string(f), func(b *testing.B) {
			buf := make([]byte, 0, 8*len(in))
			b.SetBytes(int64(len(in) * f.BytesPerSample()))
			rt := startRealtime()
			for b.Loop() {
				buf = AppendPCM(buf[:0], f, in)
			}
			rt.report(b, 1)
		})
	}
}

// BenchmarkPipeline: one 20 ms engine chunk (441 samples at 22050 Hz)
// through the whole per-stream conversion, at the default 24000 Hz.
func BenchmarkPipeline(b *testing.B) {
	chunk := voiceLike(441, 22050)
	for _, f := range []Format{S16LE, F32LE, WAV, Opus, MP3, MuLaw, ALaw, OggOpus, FLAC} {
		if f == MP3 && !MP3Available {
			continue
		}
		b.Run(string(f), func(b *testing.B) {
			p, err := NewPipeline(22050, f, 24000)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			nop := func([]byte) error { return nil }
			b.ReportAllocs()
			rt := startRealtime()
			for b.Loop() {
				if err := p.Write(chunk, nop); err != nil {
					b.Fatal(err)
				}
			}
			rt.report(b, 0.020)
		})
	}
}

// BenchmarkFLACEncode: one second at 24 kHz in 20 ms chunks, libFLAC
// level 5.
func BenchmarkFLACEncode(b *testing.B) {
	in := voiceLike(24000, 24000)
	e, err := NewFLACEncoder(24000)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	buf := make([]byte, 0, 64<<10)
	b.ReportAllocs()
	rt := startRealtime()
	for b.Loop() {
		for i := 0; i < len(in); i += 480 {
			if buf, err = e.Encode(buf[:0], in[i:i+480]); err != nil {
				b.Fatal(err)
			}
		}
	}
	rt.report(b, 1)
}

// BenchmarkOggOpus: one second at 48 kHz into Ogg Opus pages; against
// BenchmarkOpusEncode it shows the muxing cost.
func BenchmarkOggOpus(b *testing.B) {
	in := voiceLike(OpusRate, OpusRate)
	w, err := NewOggOpusWriter(24000, 0)
	if err != nil {
		b.Fatal(err)
	}
	nop := func([]byte) error { return nil }
	b.ReportAllocs()
	rt := startRealtime()
	for b.Loop() {
		if err := w.Write(in, nop); err != nil {
			b.Fatal(err)
		}
	}
	rt.report(b, 1)
}
