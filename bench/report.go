package bench

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// WriteOutputs writes results.json, report.md and the PNG plots into dir
// (created if needed) and the human table to stdout.
func WriteOutputs(dir string, run *Run, stdout io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := run.WriteJSON(filepath.Join(dir, "results.json")); err != nil {
		return err
	}
	figs, err := writePlots(dir, run)
	if err != nil {
		return err
	}
	var md bytes.Buffer
	writeMarkdown(&md, run, figs)
	WriteGatewayAdded(&md, run)
	WriteBaseline(&md, run)
	if err := os.WriteFile(filepath.Join(dir, "report.md"), md.Bytes(), 0o644); err != nil {
		return err
	}
	if stdout != nil {
		if err := WriteTable(stdout, run); err != nil {
			return err
		}
		WriteGatewayAdded(stdout, run)
		WriteBaseline(stdout, run)
	}
	return nil
}

// writeMarkdown renders the report: set-up, the figures table, errors, plots
// and how to read the numbers.
func writeMarkdown(w io.Writer, run *Run, figs []figure) {
	fmt.Fprintf(w, "# voicesvc benchmark\n\n")
	fmt.Fprintf(w, "| | |\n| - | - |\n")
	fmt.Fprintf(w, "| engine | `%s` |\n", mdEscape(run.Engine))
	fmt.Fprintf(w, "| server | %s |\n", mdEscape(run.BaseURL))
	fmt.Fprintf(w, "| voice | `%s` |\n", mdEscape(run.Voice))
	fmt.Fprintf(w, "| started | %s |\n", run.StartedAt.Format("2006-01-02 15:04:05 UTC"))
	fmt.Fprintf(w, "| client host | %s/%s, %d CPUs, %s |\n", run.Host.GOOS, run.Host.GOARCH, run.Host.CPUs, run.Host.GoVersion)
	if len(run.Args) > 0 {
		fmt.Fprintf(w, "| command | `%s` |\n", mdEscape(strings.Join(run.Args, " ")))
	}
	fmt.Fprintf(w, "\n## Results\n\n")
	fmt.Fprintf(w, "Latencies in milliseconds. Load is concurrency (closed loop) or arrivals per second (open loop); "+
		"for ws, concurrent contexts (sessions x contexts per session).\n\n")
	fmt.Fprintf(w, "| scenario | format | load | ok | errors | refused | TTFB p50 | p90 | p99 | max | total p50 | gap p99 | RTF p50 | audio s/s | ops/s | server CPU %% | server RSS MB |\n")
	fmt.Fprintf(w, "| - | - | - | -: | -: | -: | -: | -: | -: | -: | -: | -: | -: | -: | -: | -: | -: |\n")
	for _, r := range run.Results {
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %.1f | %.1f | %.0f | %.0f |\n",
			r.Scenario+wsNote(r), r.Format, r.LoadLabel(), r.OK, r.ErrorCount, r.Refused,
			mdMs(r.TTFB.N, r.TTFB.P50), mdMs(r.TTFB.N, r.TTFB.P90), mdMs(r.TTFB.N, r.TTFB.P99), mdMs(r.TTFB.N, r.TTFB.Max),
			mdMs(r.Total.N, r.Total.P50), mdMs(r.Gap.N, r.Gap.P99), rtfCell(r.RTFp50), r.AudioPerSec, r.Throughput,
			r.Server.CPUPercent, r.Server.RSSPeakMB)
	}
	if lines := capacityLines(run, capacityLimitMs); len(lines) > 0 {
		fmt.Fprintf(w, "\n## Capacity\n\nLargest measured load with TTFB p99 under %g ms, no errors and nothing refused:\n\n%s\n",
			capacityLimitMs, strings.Join(lines, "\n"))
	}
	var errs, notes, refused []string
	for _, r := range run.Results {
		if len(r.Errors) > 0 {
			errs = append(errs, fmt.Sprintf("- %s %s: %s", r.Scenario, r.LoadLabel(), mdEscape(errorList(r.Errors))))
		}
		if r.Refused > 0 {
			refused = append(refused, fmt.Sprintf("- %s %s: %s", r.Scenario, r.LoadLabel(), mdEscape(refusalText(r))))
		}
		if r.Note != "" {
			notes = append(notes, fmt.Sprintf("- %s %s: %s", r.Scenario, r.LoadLabel(), mdEscape(r.Note)))
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(w, "\n## Errors\n\n%s\n", strings.Join(errs, "\n"))
	}
	if len(refused) > 0 {
		fmt.Fprintf(w, "\n## Refused\n\nThe server at capacity turned these away at once (a client then waits its "+
			"`Retry-After`); they are neither ok nor errors, and the figures above are the admitted operations':\n\n%s\n",
			strings.Join(refused, "\n"))
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\n## Notes\n\n%s\n", strings.Join(notes, "\n"))
	}
	src := "none"
	if len(run.Results) > 0 {
		src = run.Results[0].Server.Source
	}
	fmt.Fprintf(w, "\nServer CPU and RSS source: `%s` (`proc`: the server process and its engine workers; "+
		"`metrics`: the serving process only). CPU %% is of one core; RSS is the peak over the measured window.\n", src)
	if len(figs) > 0 {
		fmt.Fprintf(w, "\n## Plots\n\n")
		for _, f := range figs {
			fmt.Fprintf(w, "### %s\n\n![%s](%s)\n\n", mdEscape(f.Title), mdEscape(f.Title), f.File)
		}
	}
	fmt.Fprint(w, methodNotes)
}

// capacityLimitMs is the TTFB p99 bound of the Capacity section: the
// latency a voice agent can hide in its turn-taking.
const capacityLimitMs = 100.0

// capacityLines names, per scenario, the largest load level whose TTFB p99
// stays under limit with no errors ("none" when even the smallest fails).
func capacityLines(run *Run, limit float64) []string {
	var order []string
	best := map[string]*Result{}
	seen := map[string]bool{}
	for _, r := range run.Results {
		if r.Overload != nil {
			continue // the overload probe measures refusals, not capacity
		}
		// Realtime-paced and back-to-back loads are different questions.
		k := r.Scenario
		if r.Paced {
			k += " realtime"
		}
		if !seen[k] {
			seen[k] = true
			order = append(order, k)
		}
		if r.ErrorCount == 0 && r.Refused == 0 && r.TTFB.N > 0 && r.TTFB.P99 < limit {
			if b := best[k]; b == nil || r.Load() > b.Load() {
				best[k] = r
			}
		}
	}
	lines := make([]string, 0, len(order))
	for _, scn := range order {
		if b := best[scn]; b != nil {
			lines = append(lines, fmt.Sprintf("- %s: %s (TTFB p99 %.1f ms)", scn, b.LoadLabel(), b.TTFB.P99))
		} else {
			lines = append(lines, fmt.Sprintf("- %s: none", scn))
		}
	}
	return lines
}

func wsNote(r *Result) string {
	if r.Scenario != "ws" || r.TextMode == "" {
		return ""
	}
	if r.TextMode == "stream" {
		return fmt.Sprintf(" (streamed %.0f words/s)", r.TPS)
	}
	return " (whole sentence)"
}

func mdMs(n int, v float64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}

// mdEscape keeps table cells intact.
func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

const methodNotes = `
## How to read this

- **TTFB**: from just before the request is written to the first audio byte: first body byte
  (speak, compat), first ` + "`chunk`" + ` event (sse), first binary frame after ` + "`task_start`" + ` (ws).
- **total**: request start to the end of the audio (end of body, ` + "`done`" + `, ` + "`task_done`" + `).
- **gap**: time between consecutive audio chunks of one stream, at receipt (sse, ws).
- **RTF**: wall time / audio seconds per operation (median shown); below 1 is faster than real time.
- **audio s/s**, **ops/s**: per wall second from the first measured start to the last measured end.
- **refused**: operations the server at capacity turned away (` + "`503 upstream_busy`" + `, or on ws
  ` + "`task_failed upstream_busy`" + ` before any audio); they are neither ok nor errors, every other
  figure is of the admitted operations, and the worker waits the ` + "`Retry-After`" + ` (on ws, ` + "`retry_after`" + `) before
  its next. The refusal time is from the request (` + "`task_start`" + `, handshake) to that answer.
- Percentiles interpolate linearly between closest ranks (type 7, as numpy); max is exact.
- Operations started during warm-up are excluded. Closed loop: each worker starts its next
  operation when the last ends. Open loop: arrivals at a fixed rate; an arrival finding every
  slot busy is counted as ` + "`client:dropped`" + `.
- The client shares the machine with a local server; its own CPU use is part of the picture.
`
