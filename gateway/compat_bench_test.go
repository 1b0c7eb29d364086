package gateway

import (
	"fmt"
	"io"
	"net/http/httputil"
	"net/textproto"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkCompat compares the compat endpoint (mp3, wav, pcm; streamed, as
// on every plan with the streaming feature) with speak (s16le streamed, wav
// buffered) on the same text, through the same child-process server as
// BenchmarkSynthTTFB (billing off, enterprise plan, caches live), one
// keep-alive client. Reported as medians: ttfb-p50-ms (first body byte) and
// total-p50-ms (whole body read). Targets: compat pcm/wav within 1 ms of
// speak s16le at p50; compat mp3 TTFB at most 5 ms above compat pcm.
//
//	go test ./gateway -run '^$' -bench Compat -benchtime 200x
func BenchmarkCompat(b *testing.B) {
	const text = "Hello there, this is a benchmark. It has a second sentence."
	for _, name := range []string{"reference", "espeak"} {
		b.Run(name, func(b *testing.B) {
			if _, err := benchEngine(name); err != nil {
				b.Skip(err)
			}
			srv := startBenchServer(b, name)
			speak := APIRoot + "/voices/" + srv.voice + "/speak"
			compat := APIRoot + "/compat/audio/speech"
			for _, r := range []struct{ name, path, body string }{
				{"speak-s16le", speak, fmt.Sprintf(`{"text":%q,"output_format":"s16le"}`, text)},
				{"speak-wav", speak, fmt.Sprintf(`{"text":%q,"output_format":"wav"}`, text)},
				{"compat-pcm", compat, compatBenchBody(srv.voice, text, "pcm")},
				{"compat-wav", compat, compatBenchBody(srv.voice, text, "wav")},
				{"compat-mp3", compat, compatBenchBody(srv.voice, text, "mp3")},
			} {
				b.Run(r.name, func(b *testing.B) {
					rc, err := dialRaw(srv.addr, r.path, srv.key, r.body)
					if err != nil {
						b.Fatal(err)
					}
					defer rc.c.Close()
					for range 5 { // warm the connection and the caches
						if _, _, err := rc.doTimed(); err != nil {
							b.Fatal(err)
						}
					}
					ttfb := make([]time.Duration, 0, b.N)
					total := make([]time.Duration, 0, b.N)
					b.ResetTimer()
					for range b.N {
						f, t, err := rc.doTimed()
						if err != nil {
							b.Fatal(err)
						}
						ttfb, total = append(ttfb, f), append(total, t)
					}
					b.StopTimer()
					b.ReportMetric(median(ttfb), "ttfb-p50-ms")
					b.ReportMetric(median(total), "total-p50-ms")
					b.ReportMetric(0, "ns/op")
				})
			}
		})
	}
}

func compatBenchBody(voice, text, format string) string {
	return fmt.Sprintf(`{"model":"service-v1","voice":%q,"input":%q,"response_format":%q}`, voice, text, format)
}

// median in milliseconds.
func median(ds []time.Duration) float64 {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return float64(ds[len(ds)/2]) / 1e6
}

// doTimed sends the request and returns the time to the first body byte and
// to the end of the body (rawClient.do measures the first only).
func (rc *rawClient) doTimed() (ttfb, total time.Duration, err error) {
	start := time.Now()
	if _, err := rc.c.Write(rc.req); err != nil {
		return 0, 0, err
	}
	tp := textproto.NewReader(rc.br)
	status, err := tp.ReadLine()
	if err != nil {
		return 0, 0, err
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return 0, 0, err
	}
	if _, err := rc.br.Peek(1); err != nil {
		return 0, 0, err
	}
	ttfb = time.Since(start)
	chunked := h.Get("Transfer-Encoding") == "chunked"
	var body io.Reader
	if chunked {
		body = httputil.NewChunkedReader(rc.br)
	} else {
		n, _ := strconv.Atoi(h.Get("Content-Length"))
		body = io.LimitReader(rc.br, int64(n))
	}
	if _, err := io.Copy(io.Discard, body); err != nil {
		return 0, 0, err
	}
	if chunked {
		if _, err := tp.ReadLine(); err != nil { // the CRLF after the last chunk
			return 0, 0, err
		}
	}
	total = time.Since(start)
	if !strings.HasPrefix(status, "HTTP/1.1 200") {
		return 0, 0, fmt.Errorf("status %q", status)
	}
	return ttfb, total, nil
}
