package gateway

import (
	"bytes"
	"context"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"voicesvc/control"
	"voicesvc/netguard"
)

// BenchmarkWSIdleSession: what the server holds per idle open session,
// through the whole gateway (fasthttp server with its configured buffers,
// handshake, hijack, upgrade, session, registry, poller), over 1,000
// sessions: the resident memory added (VmRSS, with freed pages given back
// to the OS before each reading), heap + stacks after GC, and goroutines.
// The clients are bare blocking sockets made with system calls, so the
// process's memory grows only by the server's side. The e2e
// BenchmarkWSIdleMemory measures the real binary's RSS.
//
//	go test -run '^$' -bench WSIdleSession -benchtime 1x ./gateway/
func BenchmarkWSIdleSession(b *testing.B) {
	const n = 1000
	if _, err := netguard.RaiseFileLimit(); err != nil || netguard.FileLimit() < 2*n+256 {
		b.Skipf("needs %d descriptors (limit %d): %v", 2*n+256, netguard.FileLimit(), err)
	}
	ss := newSynthServer(b, synthOpts{})
	many := 10 * n
	w := &control.Workspace{Name: "mem", Plan: "enterprise", Sessions: &many, Concurrency: &many}
	if err := ss.store.CreateWorkspace(context.Background(), w); err != nil {
		b.Fatal(err)
	}
	key := ss.newKey(w.ID, nil, 0, false)
	addr := strings.TrimPrefix(ss.base, "http://")
	// One session first, so that what the first one builds (pools, the
	// poller's goroutine, code pages) is not counted per session.
	fd, err := rawWSDial(addr, key)
	if err != nil {
		b.Fatal(err)
	}
	defer syscall.Close(fd)
	for i := 0; i < b.N; i++ {
		ss.waitSessions(b, 1)
		before := idleMemNow()
		fds := make([]int, 0, n)
		for range n {
			fd, err := rawWSDial(addr, key)
			if err != nil {
				b.Fatal(err)
			}
			fds = append(fds, fd)
		}
		ss.waitSessions(b, n+1)
		time.Sleep(200 * time.Millisecond) // every session reads, finds nothing and parks
		after := idleMemNow()
		b.ReportMetric(float64(after.rss-before.rss)/n/1024, "KiB-rss/session")
		b.ReportMetric(float64(after.heapStack-before.heapStack)/n/1024, "KiB-heap+stack/session")
		b.ReportMetric(float64(after.goroutines-before.goroutines)/n, "goroutines/session")
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}
}

// waitSessions waits (bounded) for the server to count n open sessions.
func (ss *synthServer) waitSessions(tb testing.TB, n int) {
	tb.Helper()
	for deadline := time.Now().Add(30 * time.Second); ss.srv.ws.reg.Len() != n; {
		if time.Now().After(deadline) {
			tb.Fatalf("%d sessions open, want %d", ss.srv.ws.reg.Len(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type memReading struct {
	rss, heapStack uint64
	goroutines     int
}

func idleMemNow() memReading {
	for range 3 {
		runtime.GC()
	}
	debug.FreeOSMemory() // RSS counts live pages, not freed ones the runtime keeps
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r := memReading{heapStack: ms.HeapInuse + ms.StackInuse, goroutines: runtime.NumGoroutine()}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseUint(f[1], 10, 64)
			r.rss = pages * uint64(os.Getpagesize())
		}
	}
	return r
}

// rawWSDial does the client side of the handshake on a blocking socket
// made with system calls: unlike a net.Conn it costs the process no
// memory and is not in Go's poller. It returns the descriptor.
func rawWSDial(addr, key string) (int, error) {
	ap, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return -1, err
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	sa := &syscall.SockaddrInet4{Port: ap.Port}
	copy(sa.Addr[:], ap.IP.To4())
	if err := syscall.Connect(fd, sa); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	req := "GET " + APIRoot + "/stream HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nX-API-Key: " + key + "\r\n\r\n"
	if _, err := syscall.Write(fd, []byte(req)); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	// Read the 101 up to its blank line (the server sends nothing after it
	// until the client speaks).
	var resp []byte
	var b [512]byte
	for !bytes.HasSuffix(resp, []byte("\r\n\r\n")) {
		k, err := syscall.Read(fd, b[:])
		if err != nil || k <= 0 {
			syscall.Close(fd)
			return -1, &net.AddrError{Err: "handshake: " + string(resp), Addr: addr}
		}
		resp = append(resp, b[:k]...)
	}
	if !bytes.Contains(resp, []byte(" 101 ")) {
		syscall.Close(fd)
		return -1, &net.AddrError{Err: "handshake refused: " + string(resp), Addr: addr}
	}
	return fd, nil
}
