package gateway

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/engine/reference"
	"voicesvc/synth"
)

// BenchmarkSpeakHandler is the server's cost of one short speak (wav,
// buffered, so the handler returns with the whole body) on the unpaced
// reference engine with billing off: the route wrapper, authentication,
// admission, synthesis, metrics, and tracing when the server traces.
// Without connections or parsing, and with the engine's share kept small,
// so that the difference between two builds (or tracing off and on) is not
// lost in the noise of loopback or of the engine.
//
// Measured with the metrics and tracing hooks, tracing off, against the
// build before them, in paired runs (the builds alternate, 5,000 speaks a
// run, on a 2-core box shared with other work), medians: wav -1.3 us on
// 64-70 us (the new build faster in 12 of 21 rounds); s16le +5.7 us on
// 73-76 us (7 of 21), then +3.5 us on 81-82 us (12 of 31). No difference
// beyond the box's noise (a sign test finds none), and the same
// allocations (63 wav, 82 s16le). Tracing on, every span sampled, none
// exported: +9% wav, +13% s16le, 45 more allocations
// (BenchmarkSpeakHandlerTraced).
//
//	go test ./gateway -run '^$' -bench SpeakHandler -benchtime 2000x
func BenchmarkSpeakHandler(b *testing.B) {
	benchSpeakHandler(b, Deps{})
}

// benchSpeakHandler runs the speak benchmark in wav (buffered: the handler
// returns with the body) and s16le (streamed: the body is read to its end
// from the response's stream, as fasthttp would write it).
func benchSpeakHandler(b *testing.B, deps Deps) {
	for _, format := range []string{"wav", "s16le"} {
		b.Run(format, func(b *testing.B) { benchSpeakFormat(b, deps, format) })
	}
}

// benchSpeakServer is a server on the unpaced reference engine, billing
// off, with the catalog, an enterprise workspace, its key and a ready voice
// of its own, its caches live: what the speak benchmarks share.
func benchSpeakServer(b *testing.B, deps Deps) (srv *Server, key string, v *control.Voice) {
	db := openStore(b, filepath.Join(b.TempDir(), "bench.db"))
	eng := reference.New()
	if err := synth.SeedCatalog(context.Background(), db, eng); err != nil {
		b.Fatal(err)
	}
	deps.Store, deps.Engine, deps.Billing = db, eng, control.BillingOff
	deps.Logger = slog.New(slog.DiscardHandler)
	srv, err := New(Config{}, deps)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Shutdown(context.Background()) })
	ts := &testServer{t: b, store: db, srv: srv}
	ws := ts.workspace("enterprise")
	key = ts.newKey(ws.ID, nil, 0, false)
	cat := eng.Catalog()[0]
	v = &control.Voice{ID: control.NewID(), OrgID: ws.ID, Name: "Bench voice", Status: control.VoiceReady,
		CloneMethod: "instant", Visibility: "private", PrimaryLanguage: cat.Language, Profile: cat.Profile}
	if err := db.CreateVoice(context.Background(), v); err != nil {
		b.Fatal(err)
	}
	if _, ok := waitFor(5*time.Second, func() bool { return srv.core.KeysLive() && srv.core.Voices().Live() }); !ok {
		b.Fatal("caches never became live")
	}
	return srv, key, v
}

func benchSpeakFormat(b *testing.B, deps Deps, format string) {
	srv, key, v := benchSpeakServer(b, deps)
	h := srv.Handler()
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI(APIRoot + "/voices/" + v.ID + "/speak")
	req.Header.Set("X-API-Key", key)
	req.Header.SetContentType("application/json")
	req.SetBodyString(`{"text":"Hi.","output_format":"` + format + `"}`)
	// A connection of its own: a streamed body moves its write deadline.
	conn, peer := net.Pipe()
	b.Cleanup(func() { conn.Close(); peer.Close() })
	ctx.Init2(conn, nil, false)
	req.CopyTo(&ctx.Request)
	run := func() {
		ctx.Response.Reset()
		ctx.ResetUserValues()
		h(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
		if ctx.Response.IsBodyStream() {
			n, err := io.Copy(io.Discard, ctx.Response.BodyStream())
			ctx.Response.CloseBodyStream()
			if err != nil || n == 0 {
				b.Fatalf("stream: %d bytes, %v", n, err)
			}
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
