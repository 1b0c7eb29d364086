package chaos

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Probes on the connection layer: what a client can make the server hold
// before it has authenticated.

// dialMany opens n connections to addr (64 dials at a time) and sends
// first on each; it returns the ones that opened.
func dialMany(ctx context.Context, addr string, n int, first []byte) ([]net.Conn, int) {
	conns := make([]net.Conn, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range conns {
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				return
			}
			if len(first) > 0 {
				c.SetWriteDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.Write(first); err != nil {
					c.Close()
					return
				}
			}
			conns[i] = c
		}(i)
	}
	wg.Wait()
	var open []net.Conn
	for _, c := range conns {
		if c != nil {
			open = append(open, c)
		}
	}
	return open, n - len(open)
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// probePreAuthOOM: 150 unauthenticated uploads that declare 20 MB and send
// one byte. A declared length must reserve nothing.
func probePreAuthOOM(ctx context.Context, s *Suite) (string, bool) {
	srv := s.Main
	head := "POST " + APIPath + "/voices/clone HTTP/1.1\r\nHost: chaos\r\nContent-Type: multipart/form-data; boundary=zz\r\n" +
		"Content-Length: 20000000\r\n\r\n-"
	before := srv.RSS()
	stop, over := rssWatch(srv.PID(), before+300<<20)
	var conns []net.Conn
	failed := 0
	for len(conns)+failed < 150 && !closed(over) {
		// Ten at a time, so a server that reserves the declared length is
		// caught before it has taken gigabytes.
		c, f := dialMany(ctx, srv.Addr, 10, []byte(head))
		conns, failed = append(conns, c...), failed+f
		time.Sleep(100 * time.Millisecond)
	}
	select { // let the server act on every one of them
	case <-time.After(3 * time.Second):
	case <-over:
	}
	healthy := srv.Healthy()
	peak := stop()
	closeAll(conns)
	growth := peak - before
	ok := growth <= 100<<20 && healthy && srv.Alive()
	early := ""
	if closed(over) {
		early = " (stopped early: RSS passed the ceiling)"
	}
	return fmt.Sprintf("%d held%s (%d refused), RSS %s -> peak %s (+%s), healthz ok=%v",
		len(conns), early, failed, mib(before), mib(peak), mib(growth), healthy), ok
}

// probeFDExhaustion: a server limited to 256 descriptors gets 400 idle
// connections; it must stay up and serve once they close.
func probeFDExhaustion(ctx context.Context, s *Suite) (string, bool) {
	srv, err := s.StartServer("fdlimit", ServerOpts{NoFile: 256,
		Args: []string{"--engine", "reference", "--reference-rtf", "0", "--engine-workers", "0"}})
	if err != nil {
		return err.Error(), false
	}
	defer srv.Stop()
	e, err := s.NewEnv(srv, "enterprise", "--billing", "off", "--rps", "0", "--concurrency", "1000")
	if err != nil {
		return err.Error(), false
	}
	conns, refused := dialMany(ctx, srv.Addr, 400, nil)
	time.Sleep(3 * time.Second) // the accept loop meets EMFILE here
	aliveDuring := srv.Alive()
	closeAll(conns)
	served := ""
	ok := waitFor(20*time.Second, func() bool {
		if !srv.Alive() {
			served = "server is gone"
			return true
		}
		r := e.Speak("Back again.")
		served = r.Outcome()
		return r.Status == 200
	})
	return fmt.Sprintf("%d connections opened (%d failed), alive during=%v, after close: %s, alive=%v",
		len(conns), refused, aliveDuring, served, srv.Alive()), aliveDuring && ok && served == "200" && srv.Alive()
}

// probeSecretsInLogs: malformed requests carrying a real key, a real token
// and well-formed fake ones, oversized headers, a client gone mid-headers;
// no secret may reach the log.
func probeSecretsInLogs(ctx context.Context, s *Suite) (string, bool) {
	srv, e := s.Main, s.MainEnv
	tok := Call("POST", srv.API+"/tokens", map[string]any{"ttl_seconds": 600}, "X-API-Key", e.Key)
	token, _ := tok.Data()["token"].(string)
	if token == "" {
		return "POST /tokens: " + tok.Outcome(), false
	}
	s.Secret(token)
	fakeKey, fakeTok := fakeSecret("vsk_"), fakeSecret("vst_")
	s.Secret(fakeKey)
	s.Secret(fakeTok)
	speak := APIPath + "/voices/" + e.Voice + "/speak"
	creds := func(key, tok string) string {
		return "X-API-Key: " + key + "\r\nAuthorization: Bearer " + tok + "\r\n"
	}
	reqs := []string{
		"POST " + speak + " HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n" + creds(e.Key, token) + "\r\n{}",
		"POST " + speak + " HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n" + creds(fakeKey, fakeTok) + "\r\n{}",
		"POST " + speak + " HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n" + creds(e.Key, token) + "\r\n",
		"POST " + speak + " HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n" + creds(fakeKey, token) + "\r\n{}",
		"POST " + speak + " HTTP/1.1\r\nHost: x\r\n" + creds(e.Key, fakeTok) + "X-Big: " + strings.Repeat("a", 64<<10) + "\r\n\r\n",
		"GET " + APIPath + "/voices HTTP/1.1\r\nHost: x\r\n" + creds(fakeKey, token) + "Bad Header Line\r\n\r\n",
		"POST " + speak + " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n" + creds(e.Key, token) + "\r\nzz\r\n",
	}
	var answers []string
	for _, q := range reqs {
		c, err := net.DialTimeout("tcp", srv.Addr, 5*time.Second)
		if err != nil {
			answers = append(answers, "dial error")
			continue
		}
		c.SetDeadline(time.Now().Add(3 * time.Second))
		io.WriteString(c, q)
		line, _ := bufio.NewReader(c).ReadString('\n')
		answers = append(answers, strings.TrimSpace(strings.TrimPrefix(line, "HTTP/1.1 ")))
		c.Close()
	}
	// Clients that go away in the middle of their headers.
	for _, partial := range []string{
		"POST " + speak + " HTTP/1.1\r\nHost: x\r\n" + creds(e.Key, token) + "X-Partial: yes",
		"GET " + APIPath + "/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n" + creds(fakeKey, token) + "Sec-WebSocket-Ke",
	} {
		if c, err := net.DialTimeout("tcp", srv.Addr, 5*time.Second); err == nil {
			io.WriteString(c, partial)
			time.Sleep(200 * time.Millisecond)
			c.Close()
		}
	}
	time.Sleep(time.Second)
	found := s.secretsIn(srv.Logs())
	return fmt.Sprintf("answers [%s]; secrets in log: %s", strings.Join(answers, " | "), orNone(found, "none")),
		len(found) == 0 && srv.Alive()
}

// probeWSKeyTooLong: a Sec-WebSocket-Key longer than 24 characters is a
// bad handshake (400), not a server error.
func probeWSKeyTooLong(ctx context.Context, s *Suite) (string, bool) {
	srv, e := s.Main, s.MainEnv
	var got []string
	ok := true
	for _, key := range []string{strings.Repeat("A", 100), base64Of(64), strings.Repeat("x", 25) + "==", strings.Repeat("Zm9v", 2000)} {
		c, err := net.DialTimeout("tcp", srv.Addr, 5*time.Second)
		if err != nil {
			return "dial: " + err.Error(), false
		}
		status, _, err := rawHandshake(c, srv.Addr, APIPath+"/stream", "X-API-Key", e.Key, "Sec-WebSocket-Key", key)
		c.Close()
		got = append(got, fmt.Sprintf("len %d: %d", len(key), status))
		if status != 400 {
			ok = false
		}
		_ = err
	}
	healthy := srv.Healthy()
	return strings.Join(got, ", ") + fmt.Sprintf("; healthz ok=%v", healthy), ok && healthy
}

func base64Of(n int) string {
	return strings.Repeat("QUJD", n/3) // "ABC" repeated: valid base64 of n bytes
}

// probeSlowloris: 4,000 connections trickling their headers a line at a
// time; a normal client is still served and memory stays bounded. The
// server starts as a service manager would start it, with a soft
// descriptor limit of 1024 under a higher hard limit: it is expected to
// raise its own soft limit rather than fail at the 1,024th connection.
func probeSlowloris(ctx context.Context, s *Suite) (string, bool) {
	var lim syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	hard := int(min(lim.Max, 1<<20))
	if hard < 8192 {
		return fmt.Sprintf("the suite's hard descriptor limit %d is below 8192: raise it", hard), false
	}
	srv, err := s.StartServer("slowloris", ServerOpts{NoFile: 1024, NoFileHard: hard,
		Args: []string{"--engine", "reference", "--reference-rtf", "0", "--engine-workers", "0"}})
	if err != nil {
		return err.Error(), false
	}
	defer srv.Stop()
	e, err := s.NewEnv(srv, "enterprise", "--billing", "off", "--rps", "0", "--concurrency", "1000")
	if err != nil {
		return err.Error(), false
	}
	before := srv.RSS()
	stop, over := rssWatch(srv.PID(), before+300<<20)
	conns, failed := dialMany(ctx, srv.Addr, 4000, []byte("GET /healthz HTTP/1.1\r\nHost: chaos\r\n"))
	var served []string
	allServed := true
	for round := 0; round < 10 && ctx.Err() == nil && !closed(over) && srv.Alive(); round++ {
		t := time.Now()
		for i, c := range conns {
			c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
			fmt.Fprintf(c, "X-Slow-%d: %d\r\n", round, i)
		}
		if round%3 == 1 {
			r := e.Speak("Still here.")
			served = append(served, r.Outcome())
			allServed = allServed && r.Status == 200
		}
		time.Sleep(time.Second - time.Since(t))
	}
	healthy := srv.Healthy()
	peak := stop()
	closeAll(conns)
	growth := peak - before
	return fmt.Sprintf("%d open (%d failed), normal client: %s, RSS +%s (peak %s), alive=%v",
			len(conns), failed, strings.Join(served, ","), mib(growth), mib(peak), srv.Alive()),
		allServed && healthy && growth <= 100<<20 && srv.Alive()
}

// probeBodyTooLarge: a 22 MiB upload gets its 413, read by the client,
// rather than a reset: by Go's client, which reads while it writes, and by
// a client that writes the whole body before reading (as curl without
// Expect: 100-continue does).
func probeBodyTooLarge(ctx context.Context, s *Suite) (string, bool) {
	srv, e := s.Main, s.MainEnv
	url := srv.API + "/voices/clone"
	body := bytes.Repeat([]byte("a"), 22<<20)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "multipart/form-data; boundary=zz")
	req.Header.Set("X-API-Key", e.Key)
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	goClient := ""
	if r, err := c.Do(req); err != nil {
		goClient = "error: " + err.Error()
	} else {
		goClient = fmt.Sprint(r.StatusCode)
		r.Body.Close()
	}

	raw := ""
	conn, err := net.DialTimeout("tcp", srv.Addr, 5*time.Second)
	if err != nil {
		return "dial: " + err.Error(), false
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	head := fmt.Sprintf("POST %s/voices/clone HTTP/1.1\r\nHost: chaos\r\nX-API-Key: %s\r\nContent-Type: multipart/form-data; boundary=zz\r\nContent-Length: %d\r\n\r\n",
		APIPath, e.Key, len(body))
	_, werr := conn.Write(append([]byte(head), body...))
	line, rerr := bufio.NewReader(conn).ReadString('\n')
	if rerr != nil {
		raw = fmt.Sprintf("read error: %v (write: %v)", rerr, werr)
	} else {
		raw = strings.TrimSpace(strings.TrimPrefix(line, "HTTP/1.1 "))
	}
	return fmt.Sprintf("Go client: %s; write-then-read client: %s", goClient, raw),
		goClient == "413" && strings.HasPrefix(raw, "413") && srv.Alive()
}
