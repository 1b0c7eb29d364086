package gateway

import (
	"bufio"
	"context"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"voicesvc/control"
)

// BenchmarkWSIdleHeap: heap and stack the server holds per idle open
// session, through the whole gateway (fasthttp server with its configured
// buffers, handshake, hijack, session), measured in process after GC. The
// e2e BenchmarkWSIdleMemory measures RSS of the real binary, which counts
// only the pages a session touched; this counts every byte it keeps. The
// client is a bare socket so that it adds only its socket.
func BenchmarkWSIdleHeap(b *testing.B) {
	const n = 500
	ss := newSynthServer(b, synthOpts{})
	many := 10 * n
	w := &control.Workspace{Name: "mem", Plan: "enterprise", Sessions: &many, Concurrency: &many}
	if err := ss.store.CreateWorkspace(context.Background(), w); err != nil {
		b.Fatal(err)
	}
	key := ss.newKey(w.ID, nil, 0, false)
	addr := strings.TrimPrefix(ss.base, "http://")
	for i := 0; i < b.N; i++ {
		before := heapStack()
		conns := make([]net.Conn, 0, n)
		for range n {
			c, err := wsRawDial(addr, key)
			if err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c)
		}
		time.Sleep(200 * time.Millisecond) // every session reaches its read
		after := heapStack()
		b.ReportMetric(float64(after-before)/n/1024, "KiB/session")
		for _, c := range conns {
			c.Close()
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func heapStack() uint64 {
	for range 3 {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// wsRawDial does the client side of the handshake on a bare socket.
func wsRawDial(addr, key string) (net.Conn, error) {
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		return nil, err
	}
	req := "GET " + APIRoot + "/stream HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nX-API-Key: " + key + "\r\n\r\n"
	if _, err := c.Write([]byte(req)); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(c, 256)
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.Contains(line, " 101 ") {
		c.Close()
		return nil, &net.AddrError{Err: "handshake refused: " + line, Addr: addr}
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		if line == "\r\n" {
			return c, nil
		}
	}
}
