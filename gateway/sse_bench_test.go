package gateway

import (
	"io"
	"net"
	"sort"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
)

// The SSE route's own cost to the first byte (issue 25: `voicesvc bench
// baseline` found SSE's added first byte +0.061 ms over the build before
// the core, the other transports within +0.02 ms). Two views of one
// request, both on the unpaced reference engine with billing off:
//
//   - BenchmarkSSEHandler calls the server's handler without fasthttp's
//     connection loop (a loopback socket as its connection) and reads the
//     body stream to its end: allocations and CPU per request of the route
//     wrapper, the protocol package, the core and the stream, stable
//     enough to compare builds (-benchmem, -cpuprofile, -memprofile).
//   - BenchmarkSSEFirstByte sends the request over loopback to the server
//     in this process with a keep-alive raw client and reports the time to
//     the first body byte (p10-us, p50-us, p90-us; the lower quantiles move
//     least with the load of a shared host), the process's CPU per request
//     (cpu-us/op, client and server) and its allocations.
//
// Wall times move with the host: compare builds by the medians of
// alternated runs (scripts/ab-baseline.sh does so for the whole binary).
//
// Measured against 2fc3cc7 (the build before the core; the file ported),
// 2 shared cores, 6 alternated runs of 3,000 requests: the same
// allocations (94 per handler request, 118 per loopback request), and
// first byte p10 93.7 -> 92.2 us, p50 150 -> 125 us (medians; spread
// 91-128 and 88-97 us at p10): no regression of the server's own path.
//
//	go test ./gateway -run '^$' -bench 'SSE(Handler|FirstByte)' -benchmem -count 5

// A short text: the engine's and the codec's share stays small, and so
// does the rest of the utterance, which the unpaced engine renders right
// after the first byte while the client waits for a CPU to read it.
const sseBenchBody = `{"text":"Hi.","output_format":"s16le"}`

// sseBenchServer is a loopback server on the unpaced reference engine,
// billing off, an enterprise workspace, its caches live.
func sseBenchServer(b *testing.B) *synthServer {
	ss := newSynthServer(b, synthOpts{billing: control.BillingOff, plan: "enterprise"})
	if _, ok := waitFor(5*time.Second, func() bool { return ss.srv.core.KeysLive() && ss.srv.core.Voices().Live() }); !ok {
		b.Fatal("caches never became live")
	}
	return ss
}

func BenchmarkSSEHandler(b *testing.B) {
	ss := sseBenchServer(b)
	h := ss.srv.Handler()
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI(APIRoot + "/voices/" + ss.voice + "/stream")
	req.Header.Set("X-API-Key", ss.key)
	req.Header.SetContentType("application/json")
	req.SetBodyString(sseBenchBody)
	// A loopback connection of its own, as fasthttp would give the
	// handler: the stream moves its write deadline (a net.Pipe's deadlines
	// allocate timers, a TCP socket's do not).
	conn := loopbackConn(b)
	ctx.Init2(conn, nil, false)
	req.CopyTo(&ctx.Request)
	run := func() {
		ctx.Response.Reset()
		ctx.ResetUserValues()
		h(&ctx)
		if ctx.Response.StatusCode() != 200 || !ctx.Response.IsBodyStream() {
			b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
		n, err := io.Copy(io.Discard, ctx.Response.BodyStream())
		ctx.Response.CloseBodyStream()
		if err != nil || n == 0 {
			b.Fatalf("stream: %d bytes, %v", n, err)
		}
	}
	for range 20 {
		run()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		run()
	}
}

// loopbackConn is the server side of a loopback TCP connection, closed with b.
func loopbackConn(b *testing.B) net.Conn {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	conn, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(); peer.Close() })
	return conn
}

func BenchmarkSSEFirstByte(b *testing.B) {
	ss := sseBenchServer(b)
	rc, err := dialRaw(ss.base[len("http://"):], APIRoot+"/voices/"+ss.voice+"/stream", ss.key, sseBenchBody)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rc.c.Close() })
	for range 20 {
		if _, err := rc.do(); err != nil {
			b.Fatal(err)
		}
	}
	ds := make([]time.Duration, 0, b.N)
	cpu0 := cpuTime()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		d, err := rc.do()
		if err != nil {
			b.Fatal(err)
		}
		ds = append(ds, d)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/1e3/float64(b.N), "cpu-us/op")
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	pct := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))]) / 1e3 }
	b.ReportMetric(pct(0.1), "p10-us")
	b.ReportMetric(pct(0.5), "p50-us")
	b.ReportMetric(pct(0.9), "p90-us")
}

// BenchmarkStreamDeadline is the cost of the sliding write deadline per
// piece a stream hands over, on a loopback TCP connection: moved at every
// piece (as before deadlineSteps; a period under the clock's step makes
// slide move it each time) and moved per deadlineSteps of the idle period.
func BenchmarkStreamDeadline(b *testing.B) {
	for _, bc := range []struct {
		name string
		idle time.Duration
	}{{"every-piece", time.Nanosecond}, {"steps", time.Minute}} {
		b.Run(bc.name, func(b *testing.B) {
			conn := loopbackConn(b)
			st := &audioStream{ch: make(chan []byte, 1), free: make(chan []byte, 1),
				gone: make(chan struct{}), first: make(chan struct{}), handed: true}
			st.slidingDeadline(conn, bc.idle, time.Time{})
			piece, p := []byte("piece"), make([]byte, 64)
			b.ReportAllocs()
			for range b.N {
				st.ch <- piece
				if _, err := st.Read(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
