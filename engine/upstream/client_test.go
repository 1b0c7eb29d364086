package upstream

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestSpeechBodyJSON: the hand-built body is what encoding/json makes.
func TestSpeechBodyJSON(t *testing.T) {
	for _, b := range []speechBody{
		{Model: "service-v1", Input: "Hello there.", Voice: "af_bella", ResponseFormat: "pcm", Stream: true},
		{Model: "m", Input: `Quotes " and \ and <b>&</b>, a tab	and a line
break, é, 日本, \u2028 ` + "\u2028\x01\xff", Voice: "v", ResponseFormat: "pcm", Stream: true, Speed: 1.25},
		{Model: "", Input: "", Voice: "", ResponseFormat: "pcm", Speed: 0.25},
		{Model: "m", Input: "x", Voice: "v", ResponseFormat: "pcm", Stream: true, Speed: 4},
		{Model: "m", Input: "x", Voice: "v", ResponseFormat: "pcm", Stream: true, Speed: 1.0 / 3},
	} {
		want, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.appendJSON(nil); string(got) != string(want) {
			t.Errorf("appendJSON\n got %s\nwant %s", got, want)
		}
	}
}

// TestRequestHeaders: what an upstream receives, with a key and with a
// user and password in the URL instead.
func TestRequestHeaders(t *testing.T) {
	type seen struct {
		method, path, host, auth, ctype, accept, length string
		user, pass                                      string
		basic                                           bool
	}
	got := make(chan seen, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{method: r.Method, path: r.URL.Path, host: r.Host, auth: r.Header.Get("Authorization"),
			ctype: r.Header.Get("Content-Type"), accept: r.Header.Get("Accept"), length: r.Header.Get("Content-Length")}
		s.user, s.pass, s.basic = r.BasicAuth()
		got <- s
		w.Header().Set("Content-Type", "audio/pcm")
		w.Write(make([]byte, 960))
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		name string
		url  string
		key  string
		want seen
	}{
		{"key", srv.URL + "/v1", "vsk_k", seen{method: "POST", path: "/v1/audio/speech", host: host, auth: "Bearer vsk_k",
			ctype: "application/json", accept: "audio/pcm, application/octet-stream, */*;q=0.1"}},
		{"password in the URL", "http://al:s3cret@" + host + "/v1", "", seen{method: "POST", path: "/v1/audio/speech", host: host,
			ctype: "application/json", accept: "audio/pcm, application/octet-stream, */*;q=0.1", user: "al", pass: "s3cret", basic: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, []string{tc.url}, func(c *Config) { c.APIKey = tc.key })
			if _, err := speak(context.Background(), e, "Hi.", time.Time{}); err != nil {
				t.Fatal(err)
			}
			s := recv(t, got, "the request")
			body := (&speechBody{Model: "service-v1", Input: "Hi.", Voice: "en-us-linda", ResponseFormat: "pcm", Stream: true}).appendJSON(nil)
			if s.length != strconv.Itoa(len(body)) {
				t.Errorf("Content-Length %q, want %d", s.length, len(body))
			}
			s.length = ""
			if tc.want.basic {
				tc.want.auth = s.auth // checked as user and password
			}
			if s != tc.want {
				t.Errorf("upstream saw %+v\nwant %+v", s, tc.want)
			}
		})
	}
}

// TestTLS: an https replica streams over TLS, and its connections are
// kept for the next sentences.
func TestTLS(t *testing.T) {
	f := &fixture{piece: 333, started: make(chan string, 64), gone: make(chan struct{}, 64)}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	var conns atomic.Int32
	f.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	e := newEngine(t, []string{f.srv.URL}, nil)
	roots := x509.NewCertPool()
	roots.AddCert(f.srv.Certificate())
	e.sched.replicas[0].client.tls.RootCAs = roots
	const text = "Over TLS. Twice over."
	for range 3 {
		chunks, err := speak(context.Background(), e, text, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(joined(chunks)), (len(render("Over TLS.", 0))+len(render("Twice over.", 0)))/2; got != want {
			t.Fatalf("%d samples, want %d", got, want)
		}
	}
	// Six sentences, at most two at a time (one rendered ahead).
	if n := conns.Load(); n > 2 {
		t.Errorf("%d connections for 6 sentences, want at most 2", n)
	}
}

// TestIdlePool: at most maxIdle connections are kept, the most recently
// used is taken first, and one idle for idleFor is closed.
func TestIdlePool(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peers := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			peers <- c
		}
	}()
	c := newClient(&url.URL{Scheme: "http", Host: ln.Addr().String()}, 2)
	defer c.closeIdle()
	var pcs []*conn
	var far []net.Conn // the server's ends, in the same order
	for range 3 {
		pc, err := c.dial(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		pcs = append(pcs, pc)
		far = append(far, recv(t, peers, "the connection"))
	}
	for _, pc := range pcs {
		c.put(pc)
	}
	closed := func(nc net.Conn) bool {
		nc.SetReadDeadline(time.Now().Add(time.Second))
		_, err := nc.Read(make([]byte, 1))
		return err != nil && !isTimeoutErr(err)
	}
	if !closed(far[2]) {
		t.Error("a third idle connection was kept (maxIdle 2)")
	}
	if got := c.get(); got != pcs[1] {
		t.Error("get did not take the most recently kept connection")
	}
	c.put(pcs[1])
	c.mu.Lock()
	c.idleFor = time.Nanosecond // both are due
	c.mu.Unlock()
	c.expire() // what the sweep timer runs
	if c.get() != nil {
		t.Error("an expired connection was taken")
	}
	if !closed(far[0]) || !closed(far[1]) {
		t.Error("an expired connection is still open")
	}
}

func isTimeoutErr(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
