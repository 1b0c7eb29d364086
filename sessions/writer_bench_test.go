package sessions

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"voicesvc/engine/reference"
)

// BenchmarkStreamCPU streams audio through sessions to cheap raw clients
// (4 contexts on each of 16 sockets) and reports the process CPU time and
// write syscalls per audio chunk delivered. The clients only parse frame
// headers, so most of the CPU is the engine, the codec and the writer.
func BenchmarkStreamCPU(b *testing.B) {
	for _, rtf := range []float64{0, 0.05} {
		b.Run(fmt.Sprintf("rtf=%g", rtf), func(b *testing.B) { benchStreamCPU(b, rtf, false) })
	}
}

// BenchmarkTimestampsCPU: what word timestamps cost at 64 contexts (16
// sockets of 4), unpaced: the same sessions with and without them,
// interleaved by -count. The target is 2% of the CPU per chunk.
func BenchmarkTimestampsCPU(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("timestamps=%v", on), func(b *testing.B) { benchStreamCPU(b, 0, on) })
	}
}

// benchStreamCPU: 64 contexts (16 sockets of 4) to the end, CPU per audio chunk.
func benchStreamCPU(b *testing.B, rtf float64, timestamps bool) {
	ts := startServer(b, Config{}, refDeps(reference.New(reference.Options{RTF: rtf})))
	const sockets, contexts = 16, 4
	conns := make([]net.Conn, sockets)
	readers := make([]*bufio.Reader, sockets)
	for i := range conns {
		c, err := rawDial(ts.addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		conns[i], readers[i] = c, bufio.NewReaderSize(c, 32<<10)
	}
	text := strings.Repeat("Hello there, this is one sentence. ", 4)
	var chunks int64
	var mu sync.Mutex
	cpu0, w0 := cpuNow(), syscw()
	t0 := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		for s := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range contexts {
					msg := `{"type":"task_start","context_id":"c` + strconv.Itoa(i) + `-` + strconv.Itoa(k) +
						`","voice_id":"` + voiceReady + `","text":"` + text + `","finalize":true,"timestamps":` +
						strconv.FormatBool(timestamps) + `}`
					if err := rawSend(conns[s], msg); err != nil {
						b.Error(err)
						return
					}
				}
				n, err := rawReadUntilDone(readers[s], contexts)
				if err != nil {
					b.Error(err)
				}
				mu.Lock()
				chunks += n
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	b.StopTimer()
	el := time.Since(t0)
	cpu, w := cpuNow()-cpu0, syscw()-w0
	b.ReportMetric(float64(cpu)/float64(chunks), "cpu-ns/chunk")
	b.ReportMetric(float64(w)/float64(chunks), "writes/chunk")
	b.ReportMetric(float64(cpu)/float64(el), "cores")
}

// rawSend writes a masked (zero key) client text frame.
func rawSend(c net.Conn, msg string) error {
	var f []byte
	if len(msg) <= 125 {
		f = append(f, 0x81, 0x80|byte(len(msg)))
	} else {
		f = append(f, 0x81, 0x80|126, byte(len(msg)>>8), byte(len(msg)))
	}
	f = append(f, 0, 0, 0, 0)
	f = append(f, msg...)
	_, err := c.Write(f)
	return err
}

// rawReadUntilDone reads server frames until n task_done frames, counting
// binary frames.
func rawReadUntilDone(r *bufio.Reader, n int) (int64, error) {
	var bins int64
	var buf []byte
	for n > 0 {
		h0, err := r.ReadByte()
		if err != nil {
			return bins, err
		}
		h1, err := r.ReadByte()
		if err != nil {
			return bins, err
		}
		size := int(h1 & 0x7f)
		switch size {
		case 126:
			var l [2]byte
			if _, err := io.ReadFull(r, l[:]); err != nil {
				return bins, err
			}
			size = int(binary.BigEndian.Uint16(l[:]))
		case 127:
			var l [8]byte
			if _, err := io.ReadFull(r, l[:]); err != nil {
				return bins, err
			}
			size = int(binary.BigEndian.Uint64(l[:]))
		}
		switch h0 & 0x0f {
		case 2:
			bins++
			if _, err := r.Discard(size); err != nil {
				return bins, err
			}
		case 1:
			if cap(buf) < size {
				buf = make([]byte, size)
			}
			buf = buf[:size]
			if _, err := io.ReadFull(r, buf); err != nil {
				return bins, err
			}
			if strings.Contains(string(buf), `"task_done"`) {
				n--
			} else if strings.Contains(string(buf), `"error"`) || strings.Contains(string(buf), `"task_failed"`) {
				return bins, fmt.Errorf("server said %s", buf)
			}
		default:
			return bins, fmt.Errorf("unexpected frame %#x", h0)
		}
	}
	return bins, nil
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// syscw is the process's count of write syscalls (writev included).
func syscw() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "syscw: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
