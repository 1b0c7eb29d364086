package gateway

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"voicesvc/engine/reference"
	"voicesvc/sessions"
)

// pairSession is a session served over loopback and the client's end.
type pairSession struct {
	x      *sessions.Session
	client *websocket.Conn
	ran    chan error // Run's result
}

// newPairSession upgrades one loopback connection with the upgrader the
// gateway uses and prepares a session on it; run starts it.
func newPairSession(t *testing.T) *pairSession {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type upgraded struct {
		conn *websocket.Conn
		err  error
	}
	up := make(chan upgraded, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			up <- upgraded{nil, err}
			return
		}
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			c.Close()
			up <- upgraded{nil, err}
			return
		}
		u := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
		conn, err := u.Upgrade(&hijackedResponse{conn: c, brw: bufio.NewReadWriter(br, bufio.NewWriter(c))}, req, nil)
		up <- upgraded{conn, err}
	}()
	client, _, err := websocket.DefaultDialer.Dial("ws://"+ln.Addr().String()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	u := <-up
	if u.err != nil {
		t.Fatal(u.err)
	}
	t.Cleanup(func() { u.conn.Close() })
	deps := sessions.Deps{Engine: reference.New()}
	return &pairSession{x: sessions.New(u.conn, sessions.Config{}, deps), client: client, ran: make(chan error, 1)}
}

func (p *pairSession) run(ctx context.Context) { go func() { p.ran <- p.x.Run(ctx) }() }

// ended waits for the session's close (bounded) and returns its code.
func (p *pairSession) ended(t *testing.T) int {
	t.Helper()
	_ = p.client.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := p.client.ReadMessage()
		if ce, ok := err.(*websocket.CloseError); ok {
			<-p.ran
			return ce.Code
		}
		if err != nil {
			t.Fatalf("want a close: %v", err)
		}
	}
}

// The registry's paths that the change feed alone would miss: a key
// changed between a handshake's credential check and the session's
// registration is checked once at registration; after the feed was down,
// recheck asks the store about every key with open sessions.
func TestWSRegistryMissedChanges(t *testing.T) {
	var mu sync.Mutex
	revoked := map[string]bool{}
	var asked atomic.Int64
	reg := newWSRegistry(func(id string) bool {
		asked.Add(1)
		mu.Lock()
		defer mu.Unlock()
		return revoked[id]
	})
	defer reg.stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Changed after the handshake authenticated: checked, and ended.
	racing := newPairSession(t)
	authAt := time.Now()
	mu.Lock()
	revoked["k1"] = true
	mu.Unlock()
	reg.keyChanged("k1") // no session of k1 yet: remembered only
	reg.add(racing.x, "k1", 0, authAt)
	racing.run(ctx)
	if code := racing.ended(t); code != 4401 {
		t.Fatalf("racing revocation: close %d, want 4401", code)
	}
	reg.remove(racing.x, "k1")

	// Changed before the handshake: nothing to check.
	reg.keyChanged("k2")
	before := asked.Load()
	calm := newPairSession(t)
	reg.add(calm.x, "k2", 0, time.Now().Add(time.Second))
	if asked.Load() != before {
		t.Fatal("a key changed before the handshake was checked again")
	}

	// Revoked while the feed was down: recheck finds it.
	calm.run(ctx)
	mu.Lock()
	revoked["k2"] = true
	mu.Unlock()
	reg.recheck()
	if code := calm.ended(t); code != 4401 {
		t.Fatalf("recheck: close %d, want 4401", code)
	}
}
