package espeak

/*
// libsonic is linked in cgo.go (espeak-ng needs it too); its header comes
// with Debian's libsonic-dev.
#include <sonic.h>
*/
import "C"

import (
	"errors"
	"math"
	"slices"
	"unsafe"

	"voicesvc/engine"
)

var errNoMemory = errors.New("espeak: time-stretch: out of memory")

// stretcher time-stretches one request's chunks by speed with libsonic
// (the library espeak-ng itself uses above its highest rate), so that a
// speed other than 1 is an exact multiplier: espeak-ng renders at the
// profile's own rate and every sample position, word starts included, is
// divided by speed.
//
// espeak-ng's own rate is not used for it: it scales phonemes and pauses
// by different, rounded factors, so the words' starts move by 0.1-0.4 s
// on an 11 s text against start/speed at speed 1 (and its range ends at
// 80 and 450 words a minute); the contract wants them within 10 ms.
//
// Below 0.5, Debian's libsonic (0.2.0) lengthens by more than asked (its
// pitch periods are inserted with truncated lengths): at 0.2 the speech
// fell 0.3 s behind the clock over 25 s. Slowing by at most half at a
// time it keeps to the clock (within 15 ms of the unstretched clock), so
// a speed under 0.5 is reached by a chain of equal stages of at least 0.5
// (0.25: two of 0.5; 0.2: three of 0.585); likewise a speed over 2 by
// stages of at most 2 (at 5 in one stage the speech strayed 65 ms of the
// unstretched clock from it, in two 30 ms).
//
// It streams: every chunk in goes through sonic and whatever it has ready
// comes out at once as one chunk (sonic holds back about 30 ms of input a
// stage to find pitch periods); a sentence's last chunk flushes it. Word
// events are held until the audio that holds their (stretched) start goes
// out, so a word never comes with a chunk that ends before it starts.
//
// Each sentence gets fresh sonic streams, so a sentence's audio does not
// depend on what came before it (as in espeak.go).
type stretcher struct {
	speed   float64
	stages  []float64 // each stage's speed; their product is speed
	rate    int
	emit    func(engine.Chunk) error
	streams []C.sonicStream // this sentence's, one a stage; nil between sentences
	scratch []float32       // between stages
	inBase  int             // unstretched samples of the request before this sentence
	outBase int             // stretched samples of the request before this sentence
	out     int             // stretched samples of the request emitted so far
	inSent  int             // unstretched samples of this sentence written to sonic
	held    []engine.WordEvent
}

// newStretcher returns nil when speed needs no stretching.
func newStretcher(speed float64, rate int, emit func(engine.Chunk) error) *stretcher {
	if speed <= 0 || math.Abs(speed-1) < 1e-9 {
		return nil
	}
	speed = min(max(speed, engine.MinSpeed), engine.MaxSpeed)
	n := 1
	if speed < 0.5 {
		n = int(math.Ceil(math.Log(speed)/math.Log(0.5) - 1e-9))
	}
	if speed > 2 { // likewise, against jitter
		n = int(math.Ceil(math.Log(speed)/math.Log(2) - 1e-9))
	}
	st := &stretcher{speed: speed, rate: rate, emit: emit}
	for range n {
		st.stages = append(st.stages, math.Pow(speed, 1/float64(n)))
	}
	return st
}

// started reports whether the sentence's stretched audio has begun to
// come out (render sends single buffers until it has: espeak.go).
func (s *stretcher) started() bool { return s.out > s.outBase }

// chunk takes one chunk of the unstretched sentence. Its samples are
// recycled once written to sonic.
func (s *stretcher) chunk(c engine.Chunk) error {
	if s.streams == nil {
		for _, sp := range s.stages {
			st := C.sonicCreateStream(C.int(s.rate), 1)
			if st == nil {
				s.close()
				return errNoMemory
			}
			C.sonicSetSpeed(st, C.float(sp))
			s.streams = append(s.streams, st)
		}
	}
	if n := len(c.Samples); n > 0 {
		if C.sonicWriteFloatToStream(s.streams[0], (*C.float)(unsafe.Pointer(&c.Samples[0])), C.int(n)) == 0 {
			return errNoMemory
		}
		s.inSent += n
		engine.RecycleSamples(c.Samples)
	}
	for _, w := range c.Words {
		w.Sample = s.outBase + int(math.Round(float64(w.Sample-s.inBase)/s.speed))
		s.held = append(s.held, w)
	}
	// Through the stages: each one's output is the next one's input.
	last := s.streams[len(s.streams)-1]
	for i, st := range s.streams {
		if c.Last && C.sonicFlushStream(st) == 0 {
			return errNoMemory
		}
		if st == last {
			break
		}
		n := int(C.sonicSamplesAvailable(st))
		if n == 0 {
			continue
		}
		s.scratch = slices.Grow(s.scratch[:0], n)[:n]
		n = int(C.sonicReadFloatFromStream(st, (*C.float)(unsafe.Pointer(&s.scratch[0])), C.int(n)))
		if n > 0 && C.sonicWriteFloatToStream(s.streams[i+1], (*C.float)(unsafe.Pointer(&s.scratch[0])), C.int(n)) == 0 {
			return errNoMemory
		}
	}
	n := int(C.sonicSamplesAvailable(last))
	want := n
	if c.Last {
		// The sentence lasts exactly its unstretched length over speed
		// (sonic's flush is off by up to a few pitch periods, which would
		// add up sentence by sentence): the tail, espeak-ng's closing
		// pause, is cut or padded with silence. Rounded by sentence, so a
		// text renders as its sentences one by one do (the pool's way).
		want = max(int(math.Round(float64(s.inSent)/s.speed))-(s.out-s.outBase), 0)
	}
	var samples []float32
	if max(n, want) > 0 {
		samples = engine.SampleBuffer(max(n, want))
		if n > 0 {
			n = int(C.sonicReadFloatFromStream(last, (*C.float)(unsafe.Pointer(&samples[0])), C.int(n)))
		}
		clear(samples[n:])
		samples = samples[:want]
	}
	s.out += len(samples)
	// The words whose start this chunk reaches; all that are left on the
	// sentence's last chunk (no later than its end).
	k := 0
	for k < len(s.held) && (c.Last || s.held[k].Sample < s.out) {
		s.held[k].Sample = min(s.held[k].Sample, s.out)
		k++
	}
	out := engine.Chunk{Sentence: c.Sentence, Samples: samples, Last: c.Last}
	if k > 0 {
		out.Words = append([]engine.WordEvent(nil), s.held[:k]...)
		s.held = append(s.held[:0], s.held[k:]...)
	}
	if c.Last {
		s.close()
		s.inBase += s.inSent
		s.inSent = 0
		s.outBase = s.out // the next sentence starts where this one's audio ended
	}
	if len(samples) == 0 && len(out.Words) == 0 && !c.Last {
		return nil // sonic is still filling: nothing to send yet
	}
	return s.emit(out)
}

// close releases the sonic streams of an unfinished sentence.
func (s *stretcher) close() {
	if s == nil {
		return
	}
	for _, st := range s.streams {
		C.sonicDestroyStream(st)
	}
	s.streams = nil
}
