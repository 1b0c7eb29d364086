// Package bench is voicesvc's load generator and report: it drives a running
// server over its public transports (one-shot speak, SSE stream, realtime
// WebSocket, compatible speech endpoint), measures what a voice agent feels
// (time to first audio byte, inter-chunk gaps, real-time factor) and writes a
// human table, results.json and a Markdown report with PNG plots into one
// directory per run.
//
// # Definitions
//
//   - TTFB: request start (just before the request is written) to the first
//     audio byte: the first body byte (speak, compat), the first `chunk` event
//     (sse), the first binary frame after task_start (ws).
//   - Total: request start to the end of the body / `done` / `task_done`.
//   - Inter-chunk gap: time between consecutive audio chunks of one stream
//     (sse chunk events, ws binary frames), measured at receipt.
//   - RTF (real-time factor): wall time / audio seconds, per operation; below 1
//     means faster than real time. The aggregate RTF is sum(wall)/sum(audio).
//   - Audio seconds per wall second (and operations per second): audio
//     delivered by measured operations divided by the time from the first
//     measured operation's start to the last one's end.
//   - Percentiles use linear interpolation between the two closest ranks
//     (Hyndman–Fan type 7, numpy's default): p = x[floor(h)] + (h-floor(h)) *
//     (x[floor(h)+1]-x[floor(h)]) with h = (n-1)*q. Max is exact.
//
// # Load
//
// Closed loop (--concurrency N): N workers, each starts its next operation when
// the previous one ends. Workers start spread evenly over the warm-up, so that
// operations of equal length do not stay in lockstep. With --pace a worker
// starts its next operation no sooner than the previous one's start plus its
// audio duration, as a listener playing it would: N workers are then N
// concurrent realtime streams even against an engine much faster than real
// time (paced workers are spread over one operation's audio, learnt from one
// unmeasured operation before the level starts). Open loop (--rate R): operations arrive every 1/R
// seconds whatever the server does; --concurrency then caps operations in
// flight and an arrival that finds no free slot is counted as the error
// "client:dropped" rather than queued, so the offered load stays honest.
// For ws, concurrency counts contexts; sessions = ceil(N / --contexts), each
// session's contexts sharing one socket. A closed-loop worker pauses 50 ms
// after a failed operation so that a server answering errors at once is not
// hammered by a hot loop on the cores it shares with the bench.
//
// Refused: an operation the server turns away for capacity (503
// upstream_busy; ws: task_failed upstream_busy before any audio, or a
// handshake answered 503 upstream_busy) is counted as refused, neither ok
// nor an error, with its own latency (request to refusal); the worker then
// waits the Retry-After (1 s when none is given) and up to half of it
// again. --overload N runs the overload probe: paced ws listeners at 1,
// 1.5 and 3 times a capacity figure N (OverloadProbe).
//
// ws text: "sentence" sends the whole text in task_start with finalize;
// "stream" sends the first word in task_start, then one word per 1/--tps
// seconds in task_continue (a word stands for a language-model token), then a
// finalize-only task_continue. TTFB still starts at task_start, so in stream
// mode it includes the server waiting for a sentence end or its idle flush.
//
// Operations started during --warmup run but are excluded from every figure.
// Every run is bounded: by --duration or --requests (with a hard time cap), and
// every operation by --timeout. Requests go only to --base; redirects are not
// followed.
//
// # Server set-up for benchmarks
//
// Plan limits apply to the benchmark like any client. Give the workspace room:
//
//	voicesvc admin workspace update --id WS --billing off --concurrency 2000 --rps 0 --sessions 1000
//
// # Server resources
//
// CPU and resident memory of the server are sampled every second over the
// measured window from /proc/<pid> summed with its descendants (engine worker
// subprocesses), where pid is --server-pid or the local process listening on
// the base URL's port, assuming USER_HZ=100; otherwise from the Prometheus
// /metrics gauges process_cpu_seconds_total and process_resident_memory_bytes
// (the serving process only).
package bench
