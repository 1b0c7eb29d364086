package chaos

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
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

// TestHostileUpstreamKinds: each misbehaviour of the upstream probes'
// server starts its answer as the probe expects, and Close ends them all.
func TestHostileUpstreamKinds(t *testing.T) {
	h, err := startHostileUpstream()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for kind, want := range map[string]string{
		"endless-body":    "HTTP/1.1 200 OK\r\nContent-Type: audio/pcm\r\nConnection: close\r\n\r\n",
		"endless-headers": "HTTP/1.1 200 OK\r\nContent-Type: audio/pcm\r\nConnection: close\r\nX-Pad: ppp",
		"endless-line":    "HTTP/1.1 200 OK\r\nContent-Type: audio/pcm\r\nConnection: close\r\nX-Long: lll",
		"drip":            "HTTP/1.1 200 OK\r\nContent-Type: audio/pcm\r\nConnection: close\r\n\r\n\x11",
		"huge-length":     "HTTP/1.1 200 OK\r\nContent-Type: audio/pcm\r\nConnection: close\r\nContent-Length: 1000000000\r\n",
		"garbage":         "HTTP/1.1 200 OK\r\n",
	} {
		c, err := net.Dial("tcp", h.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		body := `{"model":"m","input":"x","voice":"` + kind + `"}`
		fmt.Fprintf(c, "POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got := make([]byte, len(want))
		_, err = io.ReadFull(c, got)
		c.Close()
		if err != nil || string(got) != want {
			t.Errorf("%s: %q (%v), want %q", kind, got, err, want)
		}
	}
}

// TestSoakEndCheck: the base checkpoint sits at 5 minutes or a sixth of a
// shorter run, and growth past 10% fails while a drop does not.
func TestSoakEndCheck(t *testing.T) {
	if baseMark(time.Hour) != 5*time.Minute || baseMark(6*time.Minute) != time.Minute {
		t.Fatalf("baseMark %v %v", baseMark(time.Hour), baseMark(6*time.Minute))
	}
	base := &soakSample{rss: 100 << 20, goroutines: 40, fds: 20}
	if ok, out := checkGrowth(base, soakSample{rss: 110 << 20, goroutines: 44, fds: 22}); !ok {
		t.Fatalf("+10%% refused: %s", out)
	}
	if ok, out := checkGrowth(base, soakSample{rss: 50 << 20, goroutines: 30, fds: 15}); !ok {
		t.Fatalf("a drop refused: %s", out)
	}
	if ok, out := checkGrowth(base, soakSample{rss: 100 << 20, goroutines: 45, fds: 20}); ok {
		t.Fatalf("+12.5%% goroutines accepted: %s", out)
	}
	if ok, _ := checkGrowth(nil, soakSample{}); ok {
		t.Fatal("no base checkpoint accepted")
	}
}

// TestSoakFaultAttribution: a request belongs to the window open at its
// start, else at its end, else the last one begun while it ran; only
// store_unavailable in the store window is excused.
func TestSoakFaultAttribution(t *testing.T) {
	f := &soakFaults{}
	m0 := f.begin()
	if f.windowOf(m0) != nil {
		t.Fatal("a window without any")
	}
	f.windows = []*faultWindow{
		{n: 1, fault: "drip", aimed: map[string]int{}, other: map[string]int{}},
		{n: 2, fault: storeFault, aimed: map[string]int{}, other: map[string]int{}},
	}
	f.seq.Store(1)
	f.active.Store(1)
	m1 := f.begin()
	f.active.Store(0)
	if w := f.windowOf(m1); w == nil || w.n != 1 {
		t.Fatalf("open at the start: %+v", w)
	}
	if w := f.windowOf(m0); w == nil || w.n != 1 {
		t.Fatalf("begun while it ran: %+v", w)
	}
	if f.windowOf(f.begin()) != nil {
		t.Fatal("after the window")
	}
	if f.record(f.windows[0], "503 store_unavailable") || !f.record(f.windows[1], "503 store_unavailable") ||
		f.record(f.windows[1], "502 upstream_error") || f.record(nil, "503 store_unavailable") {
		t.Fatal("excuses")
	}
	if !isServerError("500 internal") || !isServerError("stream ended with error internal") || isServerError("502 upstream_error") {
		t.Fatal("isServerError")
	}
}
