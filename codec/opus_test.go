package codec

import (
	"errors"
	"testing"

	"github.com/hraban/opus"
)

// packetize runs in through a packetizer in chunks (cycled) and returns
// copies of the packets.
func packetize(t *testing.T, in []float32, chunks []int) [][]byte {
	t.Helper()
	p, err := NewOpusPacketizer(0)
	if err != nil {
		t.Fatal(err)
	}
	var packets [][]byte
	emit := func(b []byte) error {
		packets = append(packets, append([]byte(nil), b...))
		return nil
	}
	for i := 0; len(in) > 0; i++ {
		n := min(chunks[i%len(chunks)], len(in))
		if err := p.Write(in[:n], emit); err != nil {
			t.Fatal(err)
		}
		in = in[n:]
	}
	if err := p.Flush(emit); err != nil {
		t.Fatal(err)
	}
	return packets
}

func decodeOpusPackets(t *testing.T, packets [][]byte) []float32 {
	t.Helper()
	d, err := opus.NewDecoder(OpusRate, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out []float32
	pcm := make([]float32, 5760)
	for i, p := range packets {
		n, err := d.DecodeFloat32(p, pcm)
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		if n != OpusFrameSamples {
			t.Fatalf("packet %d holds %d samples, want %d", i, n, OpusFrameSamples)
		}
		out = append(out, pcm[:n]...)
	}
	return out
}

// TestOpusPacketsDecode: packets from odd-sized chunks decode with libopus
// to audio correlated ≥ 0.9 with the input after alignment.
func TestOpusPacketsDecode(t *testing.T) {
	in := voiceLike(OpusRate, OpusRate) // one second
	tests := []struct {
		name   string
		chunks []int
	}{
		{"whole", []int{len(in)}},
		{"frames", []int{OpusFrameSamples}},
		{"odd", []int{1, 333, 960, 2000, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			packets := packetize(t, in, tt.chunks)
			if len(packets) != 50 {
				t.Fatalf("%d packets, want 50", len(packets))
			}
			out := decodeOpusPackets(t, packets)
			c, lag := bestCorrelation(in, out, 1000)
			if c < 0.9 {
				t.Fatalf("correlation %.3f at lag %d, want ≥ 0.9", c, lag)
			}
			t.Logf("correlation %.4f at lag %d", c, lag)
		})
	}
}

// TestOpusFlushPads: a partial last frame becomes one padded packet, and
// Flush with nothing pending emits nothing.
func TestOpusFlushPads(t *testing.T) {
	tests := []struct{ samples, packets int }{
		{0, 0}, {1, 1}, {959, 1}, {960, 1}, {961, 2}, {2400, 3},
	}
	for _, tt := range tests {
		got := packetize(t, sine(tt.samples, OpusRate, 440, 0.5), []int{100})
		if len(got) != tt.packets {
			t.Errorf("%d samples: %d packets, want %d", tt.samples, len(got), tt.packets)
		}
	}
}

func TestOpusEmitError(t *testing.T) {
	boom := errors.New("client gone")
	p, err := NewOpusPacketizer(32000)
	if err != nil {
		t.Fatal(err)
	}
	f := &failingEmit{n: 2, err: boom}
	if err := p.Write(sine(4*OpusFrameSamples, OpusRate, 440, 0.5), f.emit); !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want %v", err, boom)
	}
	if f.calls != 2 {
		t.Fatalf("emit called %d times after failing, want 2", f.calls)
	}
	p.Write(sine(10, OpusRate, 440, 0.5), func([]byte) error { return nil })
	if err := p.Flush(f.emit); !errors.Is(err, boom) {
		t.Fatalf("Flush = %v, want %v", err, boom)
	}
}

func TestOpusSettings(t *testing.T) {
	if _, err := NewOpusPacketizer(-5); err == nil {
		t.Error("negative bitrate accepted")
	}
	p, err := NewOpusPacketizer(24000)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetComplexity(11); err == nil {
		t.Error("complexity 11 accepted")
	}
	if err := p.SetComplexity(10); err != nil {
		t.Error(err)
	}
}
