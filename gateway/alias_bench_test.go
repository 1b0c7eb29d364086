package gateway

import (
	"io"
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// BenchmarkSpeakByName is the server's cost of one short speak (s16le,
// streamed, read to its end) naming the voice three ways (docs/api.md#voice-aliases:
// the lookup order is voice id, workspace alias,
// catalog alias): by-id, by-workspace-alias (the workspace's own voice
// under a name of its choosing) and by-catalog-alias (a catalog voice by
// its public alias, which is first looked up, and missed, among the
// workspace's aliases). One server for the three, set up like
// BenchmarkSpeakHandler (unpaced reference engine, billing off, no
// connections), so that only the name differs.
//
// Compare in alternated rounds, one sub-benchmark a run, their order
// rotated from round to round (the same order every round showed the
// third one 15% faster: position, not name), e.g.:
//
//	go test -c -o /tmp/gw.test ./gateway
//	for i in $(seq 0 17); do for n in by-id by-workspace-alias by-catalog-alias; do # rotate
//	  /tmp/gw.test -test.run '^$' -test.bench "SpeakByName/^$n\$" -test.benchtime 3000x -test.benchmem
//	done; done
//
// then benchstat with each name's lines in a file of its own. Measured so
// (18 rounds, 3,000 speaks a run, a 2-core box shared with other work,
// load 6-9), medians: by-id 126.6 us ± 63%, by-workspace-alias 122.8 us
// ± 20% (p=0.563), by-catalog-alias 119.0 us ± 23% (p=0.339); the same 85
// allocations and 160.5 KiB a speak each; the workspace alias slower than
// the id in 8 of 18 rounds. No difference beyond the noise: a resolved
// name is cached per workspace (synth.VoiceCache.ResolveAlias), misses
// included.
func BenchmarkSpeakByName(b *testing.B) {
	srv, key, v := benchSpeakServer(b, Deps{})
	cat := srv.engine.Catalog()[0]
	h := srv.Handler()
	conn, peer := net.Pipe() // a streamed body moves its connection's write deadline
	b.Cleanup(func() { conn.Close(); peer.Close() })

	// request makes a handler call: it answers the status and body (a
	// streamed body read to its end).
	request := func(ctx *fasthttp.RequestCtx, method, path, body string) func() (int, []byte) {
		ctx.Init2(conn, nil, false)
		ctx.Request.Header.SetMethod(method)
		ctx.Request.SetRequestURI(APIRoot + path)
		ctx.Request.Header.Set("X-API-Key", key)
		ctx.Request.Header.SetContentType("application/json")
		ctx.Request.SetBodyString(body)
		var req fasthttp.Request
		ctx.Request.CopyTo(&req)
		return func() (int, []byte) {
			req.CopyTo(&ctx.Request)
			ctx.Response.Reset()
			ctx.ResetUserValues()
			h(ctx)
			if ctx.Response.IsBodyStream() {
				n, err := io.Copy(io.Discard, ctx.Response.BodyStream())
				ctx.Response.CloseBodyStream()
				if err != nil || n == 0 {
					b.Fatalf("%s %s: stream of %d bytes, %v", method, path, n, err)
				}
				return ctx.Response.StatusCode(), nil
			}
			return ctx.Response.StatusCode(), ctx.Response.Body()
		}
	}

	// The workspace's alias, set through the API as a client sets it.
	var put fasthttp.RequestCtx
	if st, body := request(&put, "PUT", "/voices/"+v.ID+"/aliases", `{"aliases":["alloy"]}`)(); st != 200 {
		b.Fatalf("PUT aliases: %d %s", st, body)
	}

	for _, bc := range []struct{ name, voice string }{
		{"by-id", v.ID},
		{"by-workspace-alias", "alloy"},
		{"by-catalog-alias", cat.Alias},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var ctx fasthttp.RequestCtx
			speak := request(&ctx, "POST", "/voices/"+bc.voice+"/speak", `{"text":"Hi.","output_format":"s16le"}`)
			run := func() {
				if st, body := speak(); st != 200 {
					b.Fatalf("speak %s: status %d: %s", bc.voice, st, body)
				}
			}
			run()
			run()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				run()
			}
		})
	}
}
