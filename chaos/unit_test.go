package chaos

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"
)

// The suite's own pieces that need no server: frame encoding, frame
// draining, the soak summary's points.

func TestClientFrameLengths(t *testing.T) {
	for _, c := range []struct {
		n      int
		header int // bytes before the payload: 2 + extended length + 4 of mask
	}{{0, 6}, {125, 6}, {126, 8}, {65535, 8}, {65536, 14}} {
		f := clientFrame(0x9, make([]byte, c.n))
		if len(f) != c.header+c.n || f[0] != 0x89 || f[1]&0x80 == 0 {
			t.Errorf("payload %d: frame of %d bytes, header % x", c.n, len(f), f[:2])
		}
	}
}

// serverFrame is an unmasked frame as a server sends it.
func serverFrame(opcode byte, payload []byte) []byte {
	f := []byte{0x80 | opcode}
	switch n := len(payload); {
	case n < 126:
		f = append(f, byte(n))
	case n < 1<<16:
		f = append(f, 126, byte(n>>8), byte(n))
	default:
		f = append(f, 127)
		f = binary.BigEndian.AppendUint64(f, uint64(n))
	}
	return append(f, payload...)
}

func TestDrainFramesFindsClose(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var stream bytes.Buffer
	stream.Write(serverFrame(0xA, []byte("pong")))
	stream.Write(serverFrame(0x2, make([]byte, 70000)))
	stream.Write(serverFrame(0x1, make([]byte, 300)))
	stream.Write(serverFrame(0x8, []byte{0x03, 0xf0, 'q'})) // 1008
	go func() { a.Write(stream.Bytes()) }()
	code, frames, err := drainFrames(b, 5*time.Second, b)
	if code != 1008 || frames != 4 || err != nil {
		t.Fatalf("close %d after %d frames (%v), want 1008 after 4", code, frames, err)
	}
}

func TestSummaryPointsNearestSamples(t *testing.T) {
	var samples []soakSample
	for m := 0; m <= 60; m++ {
		samples = append(samples, soakSample{at: time.Duration(m) * time.Minute, requests: int64(m)})
	}
	p := summaryPoints(samples, time.Hour)
	if len(p) != 3 || p[0].label != "start" || p[1].label != "30 min" || p[1].requests != 30 || p[2].label != "60 min" {
		t.Fatalf("points %+v", p)
	}
}
