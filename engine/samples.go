package engine

import (
	"context"
	"sync"
)

// sampleBuffers holds chunk sample buffers between a pool's delivery of
// one chunk and a worker's read of the next (PoolOptions.RecycleSamples).
var sampleBuffers sync.Pool // of *[]float32

// sampleBufferCap fits every chunk the espeak engine sends: 100 ms at
// 22050 Hz plus one 20 ms buffer is 2646 samples.
const sampleBufferCap = 4096

// SampleBuffer returns a slice of n samples for a chunk, reusing a
// recycled buffer when one is large enough. Its contents are garbage: the
// caller overwrites all of it.
func SampleBuffer(n int) []float32 {
	if bp, ok := sampleBuffers.Get().(*[]float32); ok && cap(*bp) >= n {
		return (*bp)[:n]
	}
	return make([]float32, n, max(n, sampleBufferCap))
}

// RecycleSamples gives s back for a later SampleBuffer. Nothing may use s
// afterwards.
func RecycleSamples(s []float32) {
	if cap(s) < sampleBufferCap/2 || cap(s) > 4*sampleBufferCap {
		return // too small to be worth keeping, or unusually large
	}
	s = s[:0]
	sampleBuffers.Put(&s)
}

// Recycled wraps e so that each chunk's samples go back for reuse
// (RecycleSamples) once emit has returned: for an engine the server runs
// without a pool (the reference engine), as PoolOptions.RecycleSamples does
// for a pool. The same promise holds: every emit given to the wrapped
// engine is done with a chunk's samples when it returns.
func Recycled(e Engine) Engine { return recycled{e} }

type recycled struct{ Engine }

func (r recycled) WordTimes() bool { return WordTimes(r.Engine) }

func (r recycled) Synthesize(ctx context.Context, req Request, emit func(Chunk) error) error {
	return r.Engine.Synthesize(ctx, req, func(c Chunk) error {
		err := emit(c)
		RecycleSamples(c.Samples)
		return err
	})
}
