package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http/httputil"
	"net/textproto"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/engine/espeak"
	"voicesvc/synth"
)

// BenchmarkSynthTTFB measures the gateway's own cost: time to first byte of
// speak (raw s16le, streamed; and wav, buffered) and of SSE (f32le) through
// the server on loopback, against synth.Run (engine and codec pipeline)
// called in process, at 1 and 16 concurrent clients. Reported as p50-ms and
// p99-ms of the per-request TTFB; the added cost is the http median minus
// the direct median. Billing off (limits and billing are issue 5's
// benchmark). For wav the first byte comes after the whole clip, so its
// direct counterpart is the whole Run.
//
// The server runs in a child process (this test binary, TestSynthBenchServer,
// at nice 10): a client in the server's process, or competing with it for
// the CPU, measures the scheduler rather than the server, because an
// unpaced engine keeps every core busy right after the first byte.
//
//	go test ./gateway -run '^$' -bench SynthTTFB -benchtime 400x
func BenchmarkSynthTTFB(b *testing.B) {
	const text = "Hello there, this is a benchmark."
	for _, name := range []string{"reference", "espeak"} {
		b.Run(name, func(b *testing.B) {
			eng, err := benchEngine(name)
			if err != nil {
				b.Skip(err)
			}
			srv := startBenchServer(b, name)
			cat := eng.Catalog()[0]
			v := &control.Voice{ID: srv.voice, Status: control.VoiceReady, PrimaryLanguage: cat.Language, Profile: cat.Profile}
			// Baseline: a plain JSON GET through the same server and client.
			for _, clients := range []int{1, 16} {
				b.Run(fmt.Sprintf("get-voice/c%d/http", clients), func(b *testing.B) {
					runClients(b, clients, func() (func() (time.Duration, error), func()) {
						rc, err := dialRaw(srv.addr, APIRoot+"/voices/"+srv.voice, srv.key, "")
						if err != nil {
							b.Fatal(err)
						}
						return rc.do, func() { rc.c.Close() }
					})
				})
			}
			for _, route := range []struct {
				name, path string
				f          codec.Format
			}{
				{"speak-s16le", "speak", codec.S16LE},
				{"speak-wav", "speak", codec.WAV},
				{"sse-f32le", "stream", codec.F32LE},
			} {
				body := fmt.Sprintf(`{"text":%q,"output_format":%q}`, text, route.f)
				for _, clients := range []int{1, 16} {
					b.Run(fmt.Sprintf("%s/c%d/direct", route.name, clients), func(b *testing.B) {
						o, err := synth.ParseSpeak([]byte(body))
						if err != nil {
							b.Fatal(err)
						}
						req, err := synth.Prepare(v, o, eng.Languages())
						if err != nil {
							b.Fatal(err)
						}
						runClients(b, clients, func() (func() (time.Duration, error), func()) {
							return func() (time.Duration, error) {
								return directTTFB(eng, req, route.f)
							}, func() {}
						})
					})
					b.Run(fmt.Sprintf("%s/c%d/http", route.name, clients), func(b *testing.B) {
						path := APIRoot + "/voices/" + srv.voice + "/" + route.path
						runClients(b, clients, func() (func() (time.Duration, error), func()) {
							rc, err := dialRaw(srv.addr, path, srv.key, body)
							if err != nil {
								b.Fatal(err)
							}
							return rc.do, func() { rc.c.Close() }
						})
					})
				}
			}
		})
	}
}

func benchEngine(name string) (engine.Engine, error) {
	if name == "espeak" {
		e, err := espeak.New()
		if err == nil {
			e.SetEagerFirstChunk(true) // in-process, as serve runs it with --engine-workers 0
		}
		return e, err
	}
	return newRef(0), nil
}

type benchServer struct{ addr, key, voice string }

// startBenchServer runs TestSynthBenchServer in a child process.
func startBenchServer(b *testing.B, engineName string) benchServer {
	// At nice 10: the client stands for one on another machine, and must
	// not wait for a CPU while the server, which streams on as soon as the
	// first byte is out, keeps both cores of a small box busy.
	cmd := exec.Command("nice", "-n", "10", os.Args[0], "-test.run=^TestSynthBenchServer$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), "VOICESVC_BENCH_SERVER="+engineName)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var s benchServer
		if n, _ := fmt.Sscanf(sc.Text(), "BENCHSERVER %s %s %s", &s.addr, &s.key, &s.voice); n == 3 {
			go io.Copy(io.Discard, stdout)
			return s
		}
	}
	b.Fatal("bench server did not start")
	return benchServer{}
}

// TestSynthBenchServer is BenchmarkSynthTTFB's server process; it does
// nothing in a normal test run.
func TestSynthBenchServer(t *testing.T) {
	name := os.Getenv("VOICESVC_BENCH_SERVER")
	if name == "" {
		t.Skip("the server process of BenchmarkSynthTTFB")
	}
	eng, err := benchEngine(name)
	if err != nil {
		t.Fatal(err)
	}
	ss := newSynthServer(t, synthOpts{eng: eng, billing: control.BillingOff, plan: "enterprise"})
	// Serve with the auth and voice caches trusted, as in service.
	waitFor(5*time.Second, func() bool { return ss.srv.core.Voices().Live() && ss.srv.core.KeysLive() })
	fmt.Printf("BENCHSERVER %s %s %s\n", ss.base[len("http://"):], ss.key, synth.CatalogVoiceID(eng.Catalog()[0].Alias))
	io.Copy(io.Discard, os.Stdin) // until the benchmark closes it
}

// directTTFB runs the engine and the pipeline in process and returns the
// time to the first encoded bytes (wav: to the end, like a buffered reply).
func directTTFB(eng engine.Engine, req engine.Request, f codec.Format) (time.Duration, error) {
	start := time.Now()
	p, err := codec.NewPipeline(eng.NativeRate(), f, synth.DefaultSampleRate)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	var first time.Duration
	_, err = synth.Run(context.Background(), eng, req, p, func(b []byte) error {
		if first == 0 {
			first = time.Since(start)
		}
		return nil
	})
	if f == codec.WAV {
		first = time.Since(start)
	}
	return first, err
}

// runClients runs b.N requests over n clients, each made by mk (a request
// function and a cleanup), and reports the TTFB percentiles.
//
// With several clients, each waits a random 0 to SYNTH_BENCH_THINK
// (default 40ms) before every request, as callers of a voice service do:
// 16 clients asking back to back of an unpaced engine keep the 2 cores
// busy, and the percentiles then measure the queue that saturation builds
// (Little's law), not the gateway. SYNTH_BENCH_THINK=0 asks back to back.
func runClients(b *testing.B, n int, mk func() (func() (time.Duration, error), func())) {
	think := 40 * time.Millisecond
	if v := os.Getenv("SYNTH_BENCH_THINK"); v != "" {
		var err error
		if think, err = time.ParseDuration(v); err != nil {
			b.Fatal(err)
		}
	}
	if n == 1 {
		think = 0
	}
	per := max(b.N/n, 1)
	all := make([][]time.Duration, n)
	var wg sync.WaitGroup
	var failed error
	var mu sync.Mutex
	// Every client first makes warmUp requests that are not measured
	// (fresh connections, empty pools, a small heap), and measuring starts
	// when all have.
	const warmUp = 5
	var warmed sync.WaitGroup
	warmed.Add(n)
	start := make(chan struct{})
	for i := range n {
		do, done := mk()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer done()
			for k := range warmUp + per {
				if k == warmUp {
					warmed.Done()
					<-start
				}
				if think > 0 {
					time.Sleep(rand.N(think))
				}
				d, err := do()
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					if k < warmUp {
						warmed.Done()
					}
					return
				}
				if k >= warmUp {
					all[i] = append(all[i], d)
				}
			}
		}()
	}
	warmed.Wait()
	b.ResetTimer()
	close(start)
	wg.Wait()
	b.StopTimer()
	if failed != nil {
		b.Fatal(failed)
	}
	var ds []time.Duration
	for _, a := range all {
		ds = append(ds, a...)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	pct := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))]) / 1e6 }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// rawClient is a minimal keep-alive HTTP/1.1 client: no pooling, no header
// maps worth mentioning, so that what it measures is the server.
type rawClient struct {
	c   net.Conn
	br  *bufio.Reader
	req []byte
}

func dialRaw(addr, path, key, body string) (*rawClient, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	req := "POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nX-API-Key: " + key +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if body == "" {
		req = "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nX-API-Key: " + key + "\r\n\r\n"
	}
	return &rawClient{c: c, br: bufio.NewReaderSize(c, 64<<10), req: []byte(req)}, nil
}

// do sends the request, returns the time to the first body byte, and reads
// the rest of the response.
func (rc *rawClient) do() (time.Duration, error) {
	start := time.Now()
	if _, err := rc.c.Write(rc.req); err != nil {
		return 0, err
	}
	tp := textproto.NewReader(rc.br)
	status, err := tp.ReadLine()
	if err != nil {
		return 0, err
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return 0, err
	}
	if _, err := rc.br.Peek(1); err != nil {
		return 0, err
	}
	ttfb := time.Since(start)
	var body io.Reader
	if h.Get("Transfer-Encoding") == "chunked" {
		body = httputil.NewChunkedReader(rc.br)
	} else {
		n, _ := strconv.Atoi(h.Get("Content-Length"))
		body = io.LimitReader(rc.br, int64(n))
	}
	if _, err := io.Copy(io.Discard, body); err != nil {
		return 0, err
	}
	if h.Get("Transfer-Encoding") == "chunked" {
		if _, err := tp.ReadLine(); err != nil { // the CRLF after the last chunk
			return 0, err
		}
	}
	if !strings.HasPrefix(status, "HTTP/1.1 200") {
		return 0, fmt.Errorf("status %q", status)
	}
	return ttfb, nil
}
