package sessions

import (
	"context"
	"encoding/json"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// pipeTransport serves a session over an in-memory pipe: no socket, no
// HTTP, no upgrade. It records the close frame the session sends.
type pipeTransport struct {
	c      net.Conn
	mu     sync.Mutex
	closed []int
}

func (p *pipeTransport) Conn() net.Conn { return p.c }

func (p *pipeTransport) WriteClose(code int, deadline time.Time) error {
	p.mu.Lock()
	p.closed = append(p.closed, code)
	p.mu.Unlock()
	p.c.SetWriteDeadline(deadline)
	return ws.WriteFrame(p.c, ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusCode(code), "")))
}

// TestSessionOverFakeTransport: the session logic needs no socket: over a
// pipe, a context is spoken to its task_done with its audio, and a
// client's close is answered with the session's close frame.
func TestSessionOverFakeTransport(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	tr := &pipeTransport{c: server}
	ran := make(chan error, 1)
	go func() { ran <- NewOver(tr, Config{}, refDeps(nil)).Run(context.Background()) }()

	msg, _ := json.Marshal(start("a", "Hello over a pipe.", true))
	client.SetDeadline(time.Now().Add(10 * time.Second))
	if err := wsutil.WriteClientText(client, msg); err != nil {
		t.Fatal(err)
	}
	var types []string
	audio := 0
	for done := false; !done; {
		b, op, err := wsutil.ReadServerData(client)
		if err != nil {
			t.Fatalf("reading: %v after %v", err, types)
		}
		if op == ws.OpBinary {
			audio += len(b)
			continue
		}
		var ev struct{ Type string }
		json.Unmarshal(b, &ev)
		types = append(types, ev.Type)
		done = ev.Type == "task_done"
	}
	if types[0] != "task_started" || audio == 0 {
		t.Fatalf("events %v, %d audio bytes", types, audio)
	}
	// The client closes; the session answers with its close frame and ends.
	if err := ws.WriteFrame(client, ws.MaskFrame(ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusNormalClosure, "")))); err != nil {
		t.Fatal(err)
	}
	go func() { // drain what the session still sends
		for {
			if _, _, err := wsutil.ReadServerData(client); err != nil {
				return
			}
		}
	}()
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the session did not end after the client's close")
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.closed) != 1 || tr.closed[0] != int(ws.StatusNormalClosure) {
		t.Fatalf("close frames %v, want one 1000", tr.closed)
	}
}
