package bench

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
)

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	Event string // the `event:` field; empty when the stream sent none
	Data  string // `data:` lines joined with "\n"
}

// sseReader parses a text/event-stream incrementally, following the WHATWG
// rules that matter for our server and for robustness: lines end in LF, CRLF or
// CR; a leading ':' is a comment; one space after the colon is dropped; an
// event is dispatched at a blank line only when it carried data; a partial event
// at EOF is discarded (the stream was cut, and the caller reports it
// incomplete).
//
// Lines are cut with bufio.Reader.ReadSlice('\n'), so the work is linear in
// the input however the network splits it (a rescanning line splitter is
// quadratic on long base64 lines that trickle in). The cost: a stream that
// ends lines with lone CRs only is dispatched at the next LF or at EOF.
type sseReader struct {
	br     *bufio.Reader
	acc    []byte   // the start of a line longer than one read
	lines  []string // complete lines not yet consumed
	skipLF bool     // the last chunk ended in CR: a leading LF completes CRLF
	err    error    // sticky read error
	event  string
	first  string          // the event's first data line
	data   strings.Builder // the lines joined, once there is a second
	lines2 bool            // data holds the lines
	has    bool
}

// maxSSELine bounds one line; a base64 audio chunk is far below it.
const maxSSELine = 16 << 20

var errSSELineTooLong = errors.New("sse: line too long")

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// nextLine returns the next line without its terminator. An unterminated
// last line is returned at EOF, as the spec's line splitting does.
func (r *sseReader) nextLine() (string, error) {
	for len(r.lines) == 0 {
		if r.err != nil {
			if r.err == io.EOF && len(r.acc) > 0 {
				line := string(r.acc)
				r.acc = r.acc[:0]
				return line, nil
			}
			return "", r.err
		}
		chunk, err := r.br.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			r.err = err
		}
		r.split(chunk)
	}
	line := r.lines[0]
	r.lines = r.lines[1:]
	return line, nil
}

// split cuts chunk (which ends in LF, or is a buffer's worth, or the tail)
// into lines, carrying an unterminated end over in acc.
func (r *sseReader) split(chunk []byte) {
	if r.skipLF && len(chunk) > 0 {
		r.skipLF = false
		if chunk[0] == '\n' {
			chunk = chunk[1:]
		}
	}
	for len(chunk) > 0 {
		i := indexEOL(chunk)
		if i < 0 {
			r.acc = append(r.acc, chunk...)
			if len(r.acc) > maxSSELine {
				r.err = errSSELineTooLong
			}
			return
		}
		r.lines = append(r.lines, string(r.acc)+string(chunk[:i]))
		r.acc = r.acc[:0]
		if chunk[i] == '\r' {
			if i+1 == len(chunk) {
				r.skipLF = true
			} else if chunk[i+1] == '\n' {
				i++
			}
		}
		chunk = chunk[i+1:]
	}
}

// Next returns the next event, io.EOF at a clean end, or the read error.
func (r *sseReader) Next() (sseEvent, error) {
	for {
		line, err := r.nextLine()
		if err != nil {
			return sseEvent{}, err
		}
		if line == "" {
			if r.has {
				ev := sseEvent{Event: r.event, Data: r.first}
				if r.lines2 {
					ev.Data = r.data.String()
				}
				r.reset()
				return ev, nil
			}
			r.reset()
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "event":
			r.event = value
		case "data":
			// Audio events have one data line, kept as it is: joining
			// into a builder would copy every base64 payload once more.
			switch {
			case !r.has:
				r.first = value
			case !r.lines2:
				r.data.WriteString(r.first)
				r.lines2 = true
				fallthrough
			default:
				r.data.WriteByte('\n')
				r.data.WriteString(value)
			}
			r.has = true
		}
		// id and retry are irrelevant to a benchmark; unknown fields are ignored.
	}
}

func (r *sseReader) reset() {
	r.event, r.first = "", ""
	r.data.Reset()
	r.has, r.lines2 = false, false
}

// indexEOL is bytes.IndexAny(b, "\r\n") with two vectorised IndexByte scans:
// audio events are long base64 lines, and this scan is the client's main
// cost per SSE byte.
func indexEOL(b []byte) int {
	n := bytes.IndexByte(b, '\n')
	head := b
	if n >= 0 {
		head = b[:n]
	}
	if r := bytes.IndexByte(head, '\r'); r >= 0 {
		return r
	}
	return n
}
