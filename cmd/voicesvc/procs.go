package main

import "runtime"

// serveProcs is the GOMAXPROCS the server runs with: twice what Go chose
// (the CPUs, or the container's CPU limit), unless the operator set
// GOMAXPROCS (env, the value Go already applied). The gateway's goroutines
// wait mostly on sockets and pipes, and Go polls the network from an idle
// P: with every P busy, readiness waits for the runtime's monitor, which
// polls every 10 ms. On 2 cores at three times espeak-ng's capacity (5,400
// realtime streams, the renderers in their own processes), 4 Ps instead of
// 2 answered refused streams in p50 0.7-0.8 ms instead of 1.1-1.5 and p99
// 5.8-7.0 ms instead of 7.7-9.3, and the first audio of admitted streams
// no later, for 2-4% of the audio rendered a second at that load (none at
// capacity): three paired runs.
func serveProcs(env string, cur int) int {
	if env != "" {
		return cur
	}
	return 2 * cur
}

// applyServeProcs sets GOMAXPROCS to serveProcs and returns it.
func applyServeProcs(env string) int {
	n := serveProcs(env, runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(n)
	return n
}
