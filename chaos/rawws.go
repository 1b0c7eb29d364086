package chaos

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// The raw WebSocket client: the probes that misbehave (never read, vanish
// without a close, send odd handshakes) need control no library gives.

// rawHandshake sends a WebSocket upgrade for path with extra header lines
// and reads the response head; it returns the status and the reader that
// holds any bytes after the head.
func rawHandshake(c net.Conn, host, path string, extra ...string) (int, *bufio.Reader, error) {
	k := make([]byte, 16)
	rand.Read(k)
	key := base64.StdEncoding.EncodeToString(k)
	hdr := map[string]string{}
	var lines []string
	for i := 0; i+1 < len(extra); i += 2 {
		hdr[strings.ToLower(extra[i])] = extra[i+1]
		lines = append(lines, extra[i]+": "+extra[i+1])
	}
	if _, ok := hdr["sec-websocket-key"]; !ok {
		lines = append(lines, "Sec-WebSocket-Key: "+key)
	}
	req := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: service.v1\r\n" + strings.Join(lines, "\r\n")
	if len(lines) > 0 {
		req += "\r\n"
	}
	req += "\r\n"
	c.SetDeadline(time.Now().Add(30 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, req); err != nil {
		return 0, nil, err
	}
	br := bufio.NewReaderSize(c, 4096)
	status := 0
	for i := 0; ; i++ {
		line, err := br.ReadString('\n')
		if err != nil {
			return status, br, err
		}
		if i == 0 {
			fmt.Sscanf(line, "HTTP/1.1 %d", &status)
		}
		if line == "\r\n" {
			return status, br, nil
		}
	}
}

// clientFrame is one masked client frame (mask key zero: the payload is
// sent as is, which RFC 6455 allows).
func clientFrame(opcode byte, payload []byte) []byte {
	f := []byte{0x80 | opcode}
	switch n := len(payload); {
	case n < 126:
		f = append(f, 0x80|byte(n))
	case n < 1<<16:
		f = append(f, 0x80|126, byte(n>>8), byte(n))
	default:
		f = append(f, 0x80|127)
		f = binary.BigEndian.AppendUint64(f, uint64(n))
	}
	f = append(f, 0, 0, 0, 0)
	return append(f, payload...)
}

// drainFrames reads server frames until the connection ends or limit
// passes and returns the close code seen (0: none), the number of frames
// and how the reading ended.
func drainFrames(r io.Reader, limit time.Duration, c net.Conn) (closeCode, frames int, end error) {
	c.SetReadDeadline(time.Now().Add(limit))
	hdr := make([]byte, 2)
	for {
		if _, err := io.ReadFull(r, hdr); err != nil {
			return closeCode, frames, err
		}
		n := int64(hdr[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(r, b[:]); err != nil {
				return closeCode, frames, err
			}
			n = int64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(r, b[:]); err != nil {
				return closeCode, frames, err
			}
			n = int64(binary.BigEndian.Uint64(b[:]))
		}
		frames++
		if hdr[0]&0x0f == 8 { // close
			p := make([]byte, min(n, 125))
			io.ReadFull(r, p)
			if len(p) >= 2 {
				closeCode = int(binary.BigEndian.Uint16(p))
			} else {
				closeCode = 1005
			}
			return closeCode, frames, nil
		}
		if _, err := io.CopyN(io.Discard, r, n); err != nil {
			return closeCode, frames, err
		}
	}
}
