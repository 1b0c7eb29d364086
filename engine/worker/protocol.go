// Package worker runs an engine in another process (`voicesvc
// engine-worker`) and talks to it over a pipe, so that an engine that can
// only render one sentence at a time per process (espeak-ng) can use more
// cores.
//
// The protocol is a stream of frames in both directions:
//
//	frame   = length:uint32 (big endian, of type+payload) type:byte payload
//	request = 'R' id:uint64 json{text, lang, profile, params, in_hand}
//	                                                            parent -> child
//	cancel  = 'X' id:uint64                                     parent -> child
//	chunk   = 'C' id:uint64 sentence:uint32 last:byte
//	          nwords:uint32 {index, offset, length, sample: int32}*
//	          nsamples:uint32 float32 little endian*            child -> parent
//	done    = 'D' id:uint64                                     child -> parent
//	error   = 'E' id:uint64 kind:byte message                   child -> parent
//
// Every request ends with exactly one done or error frame, also after a
// cancel. Closing the child's stdin makes it finish and exit.
package worker

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"unsafe"

	"voicesvc/engine"
)

const (
	frameRequest = 'R'
	frameCancel  = 'X'
	frameChunk   = 'C'
	frameDone    = 'D'
	frameError   = 'E'

	// maxFrame bounds what a reader accepts: a corrupt length must not
	// make it allocate gigabytes.
	maxFrame = 64 << 20
)

// Error kinds carried by an error frame, so typed errors survive the pipe.
const (
	kindOther byte = iota
	kindInvalidInput
	kindBusy
	kindUnavailable
	kindCancelled
	kindClipUnusable
)

var kinds = []struct {
	kind byte
	err  error
}{
	{kindInvalidInput, engine.ErrInvalidInput},
	{kindBusy, engine.ErrBusy},
	{kindUnavailable, engine.ErrUnavailable},
	{kindCancelled, context.Canceled},
	{kindClipUnusable, engine.ErrClipUnusable},
}

func errorKind(err error) byte {
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.kind
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return kindCancelled
	}
	return kindOther
}

// remoteError is an error reported by the child, matching the typed error
// of its kind with errors.Is.
type remoteError struct {
	kind byte
	msg  string
}

func (e *remoteError) Error() string { return "engine worker: " + e.msg }

func (e *remoteError) Is(target error) bool {
	for _, k := range kinds {
		if k.kind == e.kind && target == k.err {
			return true
		}
	}
	return false
}

// wireRequest is the JSON payload of a request frame.
type wireRequest struct {
	Text    string        `json:"text"`
	Lang    string        `json:"lang,omitempty"`
	Profile []byte        `json:"profile,omitempty"`
	Params  engine.Params `json:"params"`
	InHand  bool          `json:"in_hand,omitempty"`
}

type frame struct {
	typ     byte
	id      uint64
	payload []byte        // after the id; nil for a chunk frame
	chunk   *engine.Chunk // a chunk frame's chunk
}

// writeFrame buffers one frame in w; the caller flushes.
func writeFrame(w *bufio.Writer, typ byte, id uint64, payload ...[]byte) error {
	n := 1 + 8
	for _, p := range payload {
		n += len(p)
	}
	var hdr [13]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(n))
	hdr[4] = typ
	binary.BigEndian.PutUint64(hdr[5:], id)
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	for _, p := range payload {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// readFrame reads the next frame. A chunk frame's samples are read from r
// straight into the chunk's slice, with no frame buffer to allocate, clear
// and copy out of (the parent does this for every chunk of every worker,
// on the cores the workers need); other frames keep their payload. Any
// malformed chunk is an error: the stream is our own child's, and a broken
// one is not resumed.
func readFrame(r *bufio.Reader) (frame, error) {
	var hdr [13]byte
	if _, err := io.ReadFull(r, hdr[:4]); err != nil {
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < 9 || n > maxFrame {
		return frame{}, fmt.Errorf("engine worker: bad frame length %d", n)
	}
	if _, err := io.ReadFull(r, hdr[4:]); err != nil {
		return frame{}, noEOF(err)
	}
	f := frame{typ: hdr[4], id: binary.BigEndian.Uint64(hdr[5:])}
	rest := int(n) - 9
	if f.typ != frameChunk {
		f.payload = make([]byte, rest)
		_, err := io.ReadFull(r, f.payload)
		return f, noEOF(err)
	}
	c, err := readChunk(r, rest)
	f.chunk = &c
	return f, err
}

// readChunk reads a chunk payload of n bytes (writeChunk's layout).
func readChunk(r *bufio.Reader, n int) (engine.Chunk, error) {
	var c engine.Chunk
	var b [16]byte
	if n < 13 {
		return c, errShort
	}
	if _, err := io.ReadFull(r, b[:9]); err != nil {
		return c, noEOF(err)
	}
	c.Sentence = int(binary.BigEndian.Uint32(b[:]))
	c.Last = b[4] == 1
	nw := int(binary.BigEndian.Uint32(b[5:]))
	n -= 13 // the header and the sample count
	if nw < 0 || nw > n/16 {
		return c, errShort
	}
	if nw > 0 {
		c.Words = make([]engine.WordEvent, nw)
	}
	for i := range c.Words {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return c, noEOF(err)
		}
		v := func(k int) int { return int(int32(binary.BigEndian.Uint32(b[4*k:]))) }
		c.Words[i] = engine.WordEvent{Index: v(0), TextOffset: v(1), TextLength: v(2), Sample: v(3)}
	}
	n -= 16 * nw
	if _, err := io.ReadFull(r, b[:4]); err != nil {
		return c, noEOF(err)
	}
	ns := int(binary.BigEndian.Uint32(b[:]))
	if ns < 0 || 4*ns != n {
		return c, errShort
	}
	if ns == 0 {
		c.Samples = []float32{}
		return c, nil
	}
	// Every sample is read into the buffer below, so a recycled one
	// (engine.SampleBuffer) needs no clearing.
	c.Samples = engine.SampleBuffer(ns)
	if littleEndian {
		_, err := io.ReadFull(r, unsafe.Slice((*byte)(unsafe.Pointer(&c.Samples[0])), 4*ns))
		return c, noEOF(err)
	}
	for i := range c.Samples {
		if _, err := io.ReadFull(r, b[:4]); err != nil {
			return c, noEOF(err)
		}
		c.Samples[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[:]))
	}
	return c, nil
}

// noEOF: a stream that ends inside a frame was cut, not closed.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// writeChunk buffers a chunk frame in w (the layout in the package
// comment). The samples go from the chunk straight into w's buffer, with
// no frame of their own to allocate: the child writes every second of
// audio through here, and the garbage a frame per chunk left ran its GC
// dozens of times a second.
func writeChunk(w *bufio.Writer, id uint64, c engine.Chunk) error {
	n := 1 + 8 + 13 + 16*len(c.Words) + 4*len(c.Samples)
	var b [32]byte
	h := binary.BigEndian.AppendUint32(b[:0], uint32(n))
	h = append(h, frameChunk)
	h = binary.BigEndian.AppendUint64(h, id)
	h = binary.BigEndian.AppendUint32(h, uint32(c.Sentence))
	last := byte(0)
	if c.Last {
		last = 1
	}
	h = append(h, last)
	h = binary.BigEndian.AppendUint32(h, uint32(len(c.Words)))
	w.Write(h)
	for _, wd := range c.Words {
		h = b[:0]
		for _, v := range [4]int{wd.Index, wd.TextOffset, wd.TextLength, wd.Sample} {
			h = binary.BigEndian.AppendUint32(h, uint32(int32(v)))
		}
		w.Write(h)
	}
	w.Write(binary.BigEndian.AppendUint32(b[:0], uint32(len(c.Samples))))
	if littleEndian && len(c.Samples) > 0 {
		_, err := w.Write(unsafe.Slice((*byte)(unsafe.Pointer(&c.Samples[0])), 4*len(c.Samples)))
		return err
	}
	for _, s := range c.Samples {
		w.Write(binary.LittleEndian.AppendUint32(b[:0], math.Float32bits(s)))
	}
	// bufio.Writer keeps its first error and returns it from every later
	// call, so one check at the end sees any.
	_, err := w.Write(nil)
	return err
}

// littleEndian: the samples' wire order is the machine's, so they cross
// the pipe as one copy each way instead of a loop per sample.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

var errShort = errors.New("engine worker: short chunk frame")

func encodeRequest(req engine.Request) ([]byte, error) {
	return json.Marshal(wireRequest{Text: req.Text, Lang: req.Language, Profile: req.Profile, Params: req.Params, InHand: req.InHand})
}

func decodeRequest(b []byte) (engine.Request, error) {
	var w wireRequest
	if err := json.Unmarshal(b, &w); err != nil {
		return engine.Request{}, err
	}
	return engine.Request{Text: w.Text, Language: w.Lang, Profile: w.Profile, Params: w.Params, InHand: w.InHand}, nil
}
