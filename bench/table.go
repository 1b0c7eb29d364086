package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
)

// WriteTable prints the human table: one row per scenario and load level.
func WriteTable(w io.Writer, run *Run) error {
	fmt.Fprintf(w, "engine %s  voice %s  base %s\n", run.Engine, run.Voice, run.BaseURL)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tload\tok\terr\trefused\tttfb p50\tp90\tp99\tmax\ttotal p50\trtf\taudio s/s\tops/s\tgap p99\tcpu %\trss MB\tsteal %\t")
	for _, r := range run.Results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%s\t%.0f\t%.0f\t%s\t\n",
			r.Scenario, r.LoadLabel(), r.OK, r.ErrorCount, r.Refused,
			msCell(r.TTFB.N, r.TTFB.P50), msCell(r.TTFB.N, r.TTFB.P90), msCell(r.TTFB.N, r.TTFB.P99),
			msCell(r.TTFB.N, r.TTFB.Max), msCell(r.Total.N, r.Total.P50),
			rtfCell(r.RTFp50), r.AudioPerSec, r.Throughput, msCell(r.Gap.N, r.Gap.P99),
			r.Server.CPUPercent, r.Server.RSSPeakMB, stealCell(r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range run.Results {
		if len(r.Errors) > 0 {
			fmt.Fprintf(w, "errors %s %s: %s\n", r.Scenario, r.LoadLabel(), errorList(r.Errors))
		}
		if r.Refused > 0 {
			fmt.Fprintf(w, "refused %s %s: %s\n", r.Scenario, r.LoadLabel(), refusalText(r))
		}
		if r.Note != "" {
			fmt.Fprintf(w, "note %s %s: %s\n", r.Scenario, r.LoadLabel(), r.Note)
		}
	}
	return nil
}

// refusalText describes a level's refusals.
func refusalText(r *Result) string {
	return fmt.Sprintf("%d of %d operations (503/task_failed upstream_busy), answered in p50 %.1f ms, p99 %.1f ms, max %.1f ms",
		r.Refused, r.Operations, r.Refusal.P50, r.Refusal.P99, r.Refusal.Max)
}

// msCell prints milliseconds, or "-" when there was no sample.
func msCell(n int, v float64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fms", v)
}

// rtfCell prints the real-time factor, or "-" when no audio was measured.
func rtfCell(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

// errorList renders errors most frequent first, ties by name, so that two
// runs print in the same order.
func errorList(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s x%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// resultKey matches results of two runs for --compare.
func resultKey(r *Result) string {
	return fmt.Sprintf("%s|%s|%s|%s", r.Scenario, r.LoadLabel(), r.Format, r.TextMode)
}

// compareRow is one metric of a comparison; lower says which way is better.
type compareRow struct {
	name  string
	get   func(*Result) float64
	lower bool
}

var compareRows = []compareRow{
	{"ttfb p50 ms", func(r *Result) float64 { return r.TTFB.P50 }, true},
	{"ttfb p99 ms", func(r *Result) float64 { return r.TTFB.P99 }, true},
	{"total p50 ms", func(r *Result) float64 { return r.Total.P50 }, true},
	{"gap p99 ms", func(r *Result) float64 { return r.Gap.P99 }, true},
	{"rtf p50", func(r *Result) float64 { return r.RTFp50 }, true},
	{"audio s/s", func(r *Result) float64 { return r.AudioPerSec }, false},
	{"ops/s", func(r *Result) float64 { return r.Throughput }, false},
	{"errors", func(r *Result) float64 { return float64(r.ErrorCount) }, true},
	{"server cpu %", func(r *Result) float64 { return r.Server.CPUPercent }, true},
	{"server rss MB", func(r *Result) float64 { return r.Server.RSSPeakMB }, true},
}

// Ratio is b/a, NaN when a is 0 (no baseline to divide by).
func Ratio(a, b float64) float64 {
	if a == 0 {
		if b == 0 {
			return 1
		}
		return math.NaN()
	}
	return b / a
}

// WriteCompare prints two runs side by side, B relative to A; results are
// matched by scenario, load, format and text mode. Unmatched ones are listed.
func WriteCompare(w io.Writer, a, b *Run) error {
	fmt.Fprintf(w, "A: engine %s, %s, %s\nB: engine %s, %s, %s\n",
		a.Engine, a.BaseURL, a.StartedAt.Format("2006-01-02 15:04:05Z"),
		b.Engine, b.BaseURL, b.StartedAt.Format("2006-01-02 15:04:05Z"))
	bi := map[string]*Result{}
	for _, r := range b.Results {
		bi[resultKey(r)] = r
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tload\tmetric\tA\tB\tB/A\t")
	seen := map[string]bool{}
	for _, ra := range a.Results {
		k := resultKey(ra)
		rb := bi[k]
		if rb == nil {
			continue
		}
		seen[k] = true
		for _, row := range compareRows {
			va, vb := row.get(ra), row.get(rb)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%.2f\t%s\t\n", ra.Scenario, ra.LoadLabel(), row.name, va, vb, ratioCell(va, vb, row.lower))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, run := range []struct {
		n string
		r *Run
	}{{"A", a}, {"B", b}} {
		for _, r := range run.r.Results {
			if !seen[resultKey(r)] {
				fmt.Fprintf(w, "only in %s: %s %s\n", run.n, r.Scenario, r.LoadLabel())
			}
		}
	}
	return nil
}

// ratioCell marks a ratio that is better (+) or worse (-) by more than 5%.
func ratioCell(a, b float64, lower bool) string {
	r := Ratio(a, b)
	if math.IsNaN(r) {
		return "n/a"
	}
	mark := ""
	switch {
	case r > 1.05:
		mark = map[bool]string{true: " -", false: " +"}[lower]
	case r < 0.95:
		mark = map[bool]string{true: " +", false: " -"}[lower]
	}
	return fmt.Sprintf("%.2fx%s", r, mark)
}
