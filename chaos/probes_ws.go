package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fasthttp/websocket"
)

// probeWSNoReader: sessions that send pings and invalid messages as fast
// as they can and never read. The replies (pongs, error frames) must queue
// in bounded memory, and the server closes such a session with 1008.
func probeWSNoReader(ctx context.Context, s *Suite) (string, bool) {
	srv, e := s.Main, s.MainEnv
	const sessions, perSession = 4, 24 << 20 // 96 MiB of requests for replies
	before := srv.RSS()
	stop, over := rssWatch(srv.PID(), before+300<<20)
	ping := clientFrame(0x9, []byte(strings.Repeat("p", 125)))
	bad := clientFrame(0x1, []byte(`{"type":"no_such_type","context_id":"`+strings.Repeat("x", 80)+`"}`))
	var batch []byte
	for len(batch) < 64<<10 {
		for i := 0; i < 7; i++ {
			batch = append(batch, ping...)
		}
		batch = append(batch, bad...)
	}
	type outcome struct {
		sent            int
		writeErr, end   error
		closeCode, nfrm int
	}
	res := make([]outcome, sessions)
	var wg sync.WaitGroup
	for i := 0; i < sessions; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := rawDial(srv.Addr, 4096)
			if err != nil {
				res[i].writeErr = err
				return
			}
			defer c.Close()
			status, br, err := rawHandshake(c, srv.Addr, APIPath+"/stream", "X-API-Key", e.Key)
			if status != 101 {
				res[i].writeErr = fmt.Errorf("handshake %d %v", status, err)
				return
			}
			deadline := time.Now().Add(60 * time.Second)
			for res[i].sent < perSession && ctx.Err() == nil && time.Now().Before(deadline) && !closed(over) {
				c.SetWriteDeadline(time.Now().Add(5 * time.Second))
				n, err := c.Write(batch)
				res[i].sent += n
				if err != nil {
					res[i].writeErr = err
					break
				}
			}
			time.Sleep(time.Second)
			res[i].closeCode, res[i].nfrm, res[i].end = drainFrames(br, 20*time.Second, c)
		}(i)
	}
	wg.Wait()
	peak := stop()
	growth := peak - before
	ok := growth <= 64<<20 && srv.Alive()
	var parts []string
	for _, r := range res {
		we := "none"
		if r.writeErr != nil {
			we = shortErr(r.writeErr)
		}
		end := fmt.Sprintf("close %d", r.closeCode)
		if r.closeCode == 0 && r.end != nil {
			end = "ended by " + shortErr(r.end)
		}
		parts = append(parts, fmt.Sprintf("sent %s, write err %s, %s", mib(int64(r.sent)), we, end))
		// The 1008 close frame may not fit into a send buffer that the
		// client never drains: a server that then drops the connection
		// (end of stream or reset, not a read timeout) closed it too.
		closedByServer := r.closeCode == 1008 || r.closeCode == 0 && r.end != nil && !isTimeout(r.end)
		if !closedByServer {
			ok = false
		}
	}
	return fmt.Sprintf("RSS +%s (peak %s); %s", mib(growth), mib(peak), strings.Join(parts, "; ")), ok
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// wsBillingSession runs one session of the realtime billing probe: 50
// task_continue frames of "Abcde." in one context against 100 credits. It
// returns the characters of the sentences whose synthesis the client saw
// start, and how the session ended.
func wsBillingSession(e *Env) (started int, fatal string, closeCode int, err error) {
	c, err := e.DialWS()
	if err != nil {
		return 0, "", 0, err
	}
	defer c.Close()
	c.WriteJSON(map[string]any{"type": "task_start", "context_id": "bill", "voice_id": e.Voice, "text": ""})
	for i := 0; i < 50; i++ {
		if err := c.WriteJSON(map[string]any{"type": "task_continue", "context_id": "bill", "text": "Abcde."}); err != nil {
			break
		}
	}
	c.WriteJSON(map[string]any{"type": "task_continue", "context_id": "bill", "text": "", "finalize": true})
	sentences := map[int]int{} // sentence index -> characters (6 until its sentence_done says)
	end := ReadWS(c, 60*time.Second, func(f WSFrame) bool {
		switch f.Type() {
		case "audio_chunk":
			if _, ok := sentences[idx(f)]; !ok {
				sentences[idx(f)] = 6
			}
		case "sentence_done":
			t, _ := f.JSON["text"].(string)
			sentences[idx(f)] = utf8.RuneCountInString(t)
		case "error":
			if f.JSON["fatal"] == true {
				fatal, _ = f.JSON["code"].(string)
			}
		}
		return f.Type() != "task_done"
	})
	for _, n := range sentences {
		started += n
	}
	return started, fatal, end.CloseCode, nil
}

func idx(f WSFrame) int { n, _ := f.JSON["sentence_index"].(float64); return int(n) }

// probeWSBilling: a session that runs out of credits keeps no charge for
// text that was never synthesized; three sessions, each from 100 credits.
func probeWSBilling(ctx context.Context, s *Suite) (string, bool) {
	e, err := s.NewEnv(s.Main, "pro", "--billing", "enforce", "--allowance", "0", "--credits", "100", "--rps", "0", "--used", "0")
	if err != nil {
		return err.Error(), false
	}
	ok := true
	var parts []string
	for i := 0; i < 3; i++ {
		if i > 0 {
			if _, err := s.Admin(e.Srv.DB, "workspace", "update", "--id", e.WS, "--credits", "100", "--used", "0"); err != nil {
				return err.Error(), false
			}
		}
		started, fatal, code, err := wsBillingSession(e)
		if err != nil {
			return err.Error(), false
		}
		time.Sleep(1500 * time.Millisecond) // refunds land as the context ends; servers settle usage every lease sync (0.5 s)
		used, credits, err := s.Balance(e.Srv.DB, e.WS)
		if err != nil {
			return err.Error(), false
		}
		billed := 100 - credits
		parts = append(parts, fmt.Sprintf("#%d billed %d (used %d) for %d chars synthesized, fatal %q, close %d",
			i+1, billed, used, started, fatal, code))
		if billed != int64(started) {
			ok = false
			s.Mismatch(fmt.Sprintf("ws billing session %d: billed %d, synthesized %d", i+1, billed, started))
		}
		if fatal != "insufficient_credits" || code != 1008 {
			ok = false
		}
	}
	return strings.Join(parts, "; "), ok
}

// revocationSession opens a session on e's server and reports, once the
// key is revoked, what ended it and how long after revoked().
type revocation struct {
	code      string
	closeCode int
	after     time.Duration
}

func openForRevocation(e *Env, srv *Server) (*websocket.Conn, error) {
	ee := *e
	ee.Srv = srv
	c, err := ee.DialWS()
	if err != nil {
		return nil, err
	}
	// An open context with text pending keeps the session busy but quiet.
	c.WriteJSON(map[string]any{"type": "task_start", "context_id": "r", "voice_id": e.Voice, "text": "Waiting", "idle_flush_ms": 5000})
	return c, nil
}

func awaitRevocation(c *websocket.Conn, revoked time.Time) revocation {
	var r revocation
	end := ReadWS(c, 4*time.Second, func(f WSFrame) bool {
		if f.Type() == "error" && f.JSON["fatal"] == true {
			r.code, _ = f.JSON["code"].(string)
		}
		return true
	})
	r.closeCode, r.after = end.CloseCode, time.Since(revoked)
	return r
}

// revokeAndWatch revokes e's key while a session is open on every server
// and checks each ends with unauthorized / 4401 within 2 s of the revoke.
func revokeAndWatch(s *Suite, e *Env, servers []*Server) (string, bool) {
	var conns []*websocket.Conn
	for _, srv := range servers {
		c, err := openForRevocation(e, srv)
		if err != nil {
			return srv.Name + ": " + err.Error(), false
		}
		defer c.Close()
		conns = append(conns, c)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := s.Admin(e.Srv.DB, "key", "revoke", "--id", e.KeyID); err != nil {
		return err.Error(), false
	}
	revoked := time.Now()
	res := make([]revocation, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func(i int, c *websocket.Conn) { defer wg.Done(); res[i] = awaitRevocation(c, revoked) }(i, c)
	}
	wg.Wait()
	ok := true
	var parts []string
	for i, r := range res {
		parts = append(parts, fmt.Sprintf("%s: error %q close %d after %s", servers[i].Name, r.code, r.closeCode, r.after.Round(100*time.Millisecond)))
		if r.code != "unauthorized" || r.closeCode != 4401 || r.after > 2*time.Second {
			ok = false
		}
	}
	return strings.Join(parts, "; "), ok
}

// probeRevocationSQLite: the key of an open session is revoked (SQLite).
func probeRevocationSQLite(ctx context.Context, s *Suite) (string, bool) {
	e, err := s.NewEnv(s.Main, "pro", "--billing", "off", "--rps", "0")
	if err != nil {
		return err.Error(), false
	}
	return revokeAndWatch(s, e, []*Server{s.Main})
}

// probeRevocationPostgres: the same with two servers on one Postgres store
// (the suite's own cluster), a session open on each.
func probeRevocationPostgres(ctx context.Context, s *Suite) (string, bool) {
	pg, err := s.Postgres()
	if err != nil {
		return "no Postgres: " + err.Error(), false
	}
	dsn := pg.NewDB("revoke")
	var servers []*Server
	for i := 0; i < 2; i++ {
		srv, err := s.StartServer(fmt.Sprintf("pg-revoke-%d", i), ServerOpts{DB: dsn,
			Args: []string{"--engine", "reference", "--engine-workers", "0"}})
		if err != nil {
			return err.Error(), false
		}
		defer srv.Stop()
		servers = append(servers, srv)
	}
	e, err := s.NewEnv(servers[0], "pro", "--billing", "off", "--rps", "0")
	if err != nil {
		return err.Error(), false
	}
	return revokeAndWatch(s, e, servers)
}

// probeAbandonedSessions: 1,000 sessions whose clients vanish (half reset
// without a close frame, half silent forever). Once they time out the
// server's goroutines and descriptors are back at the baseline.
func probeAbandonedSessions(ctx context.Context, s *Suite) (string, bool) {
	srv := s.Main
	e, err := s.NewEnv(srv, "enterprise", "--billing", "off", "--rps", "0", "--concurrency", "5000", "--sessions", "5000")
	if err != nil {
		return err.Error(), false
	}
	baseF, baseG := srv.FDs(), srv.Goroutines()
	const n = 1000
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	var mu sync.Mutex
	refused := map[int]int{}
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			c, err := net.DialTimeout("tcp", srv.Addr, 5*time.Second)
			if err != nil {
				return
			}
			status, _, _ := rawHandshake(c, srv.Addr, APIPath+"/stream", "X-API-Key", e.Key)
			if status != 101 {
				mu.Lock()
				refused[status]++
				mu.Unlock()
				c.Close()
				return
			}
			conns[i] = c
		}(i)
	}
	wg.Wait()
	open := 0
	peakG, peakF := srv.Goroutines(), srv.FDs()
	var silent []net.Conn
	for i, c := range conns {
		if c == nil {
			continue
		}
		open++
		if i%2 == 0 {
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0) // close with a reset, no close frame
			}
			c.Close()
		} else {
			silent = append(silent, c)
		}
	}
	defer closeAll(silent)
	var f, g int
	back := waitFor(mainIdleTimeout+30*time.Second, func() bool {
		f, g = srv.FDs(), srv.Goroutines()
		return f <= baseF+fdSlack && g >= 0 && g <= baseG+goroutineSlack
	})
	// The silent clients' sockets must have been closed by the server.
	closedByServer := 0
	for _, c := range silent {
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		br := bufio.NewReader(c)
		if _, _, err := drainFrames(br, 100*time.Millisecond, c); err == nil || !isTimeout(err) {
			closedByServer++
		}
	}
	return fmt.Sprintf("%d opened (refused %v); peak %d goroutines %d fds; after: %d goroutines (base %d), %d fds (base %d); %d/%d silent closed by server",
		open, refused, peakG, peakF, g, baseG, f, baseF, closedByServer, len(silent)), back && open == n && srv.Alive()
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
