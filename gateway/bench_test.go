package gateway

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"voicesvc/control"
)

// BenchmarkGetVoice: an authenticated GET /voices/{id} through the whole
// fasthttp stack (client, in-memory connection, server, router, auth,
// handler) on the cache-hit path, which makes no store round trip. The
// figures include the client's side of each request.
//
//	go test -run '^$' -bench GetVoice -benchmem ./gateway
func BenchmarkGetVoice(b *testing.B) {
	b.Run("nolog", func(b *testing.B) { benchGetVoice(b, slog.New(slog.DiscardHandler), false) })
	// With the access log on, formatted and thrown away.
	b.Run("jsonlog", func(b *testing.B) { benchGetVoice(b, slog.New(slog.NewJSONHandler(io.Discard, nil)), false) })
	// Loopback TCP (benchGetVoice(b, logger, true)) is left out: syscalls
	// are slow in the sandboxes this runs in (~160 µs/op), which measures
	// the sandbox, not the server.
}

func benchGetVoice(b *testing.B, logger *slog.Logger, tcp bool) {
	db := openStore(b, filepath.Join(b.TempDir(), "bench.db"))
	srv, err := New(Config{}, Deps{Store: db, Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	var ln net.Listener = fasthttputil.NewInmemoryListener()
	dial := func(string) (net.Conn, error) { return ln.(*fasthttputil.InmemoryListener).Dial() }
	if tcp {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			b.Fatal(err)
		}
		dial = func(string) (net.Conn, error) { return net.Dial("tcp", ln.Addr().String()) }
	}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Shutdown(context.Background()) })

	ts := &testServer{t: b, store: db, srv: srv}
	ws := ts.workspace("pro")
	key := ts.newKey(ws.ID, nil, 0, false)
	v := &control.Voice{ID: control.NewID(), OrgID: ws.ID, Name: "Bench voice", Description: "a voice",
		Status: control.VoiceReady, CloneMethod: "instant", Visibility: "private", PrimaryLanguage: "en-US",
		Labels: []control.Label{{Key: "accent", Value: "american"}, {Key: "gender", Value: "female"}}}
	if err := db.CreateVoice(context.Background(), v); err != nil {
		b.Fatal(err)
	}
	// Wait until the caches are trusted (the change feed runs).
	if _, ok := waitFor(5*time.Second, func() bool { return srv.core.KeysLive() && srv.core.Voices().Live() }); !ok {
		b.Fatal("caches never became live")
	}

	client := &fasthttp.HostClient{Addr: "bench", Dial: dial}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	req.SetRequestURI("http://bench" + APIRoot + "/voices/" + v.ID)
	req.Header.Set("X-API-Key", key)
	do := func() {
		if err := client.Do(req, resp); err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode() != 200 {
			b.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
		}
	}
	do() // fills the key and voice caches
	do()

	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		do()
	}
	// CPU time of the process (client and server) per request: on a shared
	// machine it varies less than wall time, which includes waiting for a core.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGetVoiceHandler is the server's share of the same request: the
// router and everything under it, without connections or parsing.
func BenchmarkGetVoiceHandler(b *testing.B) {
	db := openStore(b, filepath.Join(b.TempDir(), "bench.db"))
	srv, err := New(Config{}, Deps{Store: db, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Shutdown(context.Background()) })
	ts := &testServer{t: b, store: db, srv: srv}
	ws := ts.workspace("pro")
	key := ts.newKey(ws.ID, nil, 0, false)
	v := &control.Voice{ID: control.NewID(), OrgID: ws.ID, Name: "Bench voice", Status: control.VoiceReady,
		CloneMethod: "instant", Visibility: "private", PrimaryLanguage: "en-US"}
	if err := db.CreateVoice(context.Background(), v); err != nil {
		b.Fatal(err)
	}
	if _, ok := waitFor(5*time.Second, func() bool { return srv.core.KeysLive() && srv.core.Voices().Live() }); !ok {
		b.Fatal("caches never became live")
	}
	h := srv.Handler()
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.SetRequestURI(APIRoot + "/voices/" + v.ID)
	req.Header.Set("X-API-Key", key)
	ctx.Init(&req, nil, nil)
	run := func() {
		ctx.Response.Reset()
		ctx.ResetUserValues()
		h(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
	run()
	run()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run()
	}
}
